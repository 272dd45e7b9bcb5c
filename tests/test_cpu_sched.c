/*
 * The CPU backend's work order (backends/cpu/cpu_sched.h), driven by
 * simulated threads that call fmsa_cpu_sched_next in a fixed interleaving,
 * so every outcome is reproducible:
 *   - every item is handed out exactly once, then -1 to every thread, for
 *     teams smaller than, equal to and larger than the one dealt to, and
 *     for the shared list (FMSA_CPU_SCHED_SHARED, the backward's dK/dV items);
 *   - groups are whole slots, dealt heaviest first to the least loaded
 *     thread: loads differ by at most the heaviest group;
 *   - with as many equal slots per thread, each thread's items all come
 *     from its own slots (no stealing when nobody runs ahead);
 *   - within a slot, and in the shared list, items come heaviest first;
 *     FMSA_CPU_SCHED_IN_ORDER keeps each slot's list order;
 *   - turns (the ordered dQ of the backward): real threads claiming items in
 *     order and adding into shared rows in turn record every contribution
 *     in key tile order, skipped turns included, at 1 to 6 threads (more
 *     threads than cores on small machines: the wait must yield).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "backends/cpu/cpu_sched.h"

#define MAX_ITEMS 4096
#define MAX_SLOTS 256
#define MAX_THREADS 17

typedef struct fixture {
    fmsa_cpu_item items[MAX_ITEMS];
    int64_t n;
    fmsa_cpu_sched sched;
    void *mem;
} fixture;

/// Items of nslots slots, `per` items each, costs from a small LCG (seed) or
/// all 1 (seed 0); slots listed in a scrambled order, as a pass never does,
/// so the build's own ordering is what the checks see.
static void make_items(fixture *f, int64_t nslots, int64_t per, unsigned seed) {
    unsigned x = seed;
    f->n = 0;
    for (int64_t k = 0; k < nslots; ++k) {
        const int64_t slot = (2 * nslots - 1 - k + nslots / 2) % nslots; /* a permutation */
        for (int64_t i = 0; i < per; ++i) {
            x = x * 1103515245u + 12345u;
            f->items[f->n++] = (fmsa_cpu_item){slot, 0, i, 0, seed ? 1 + (x >> 16) % 97 : 1};
        }
    }
}

static void build(fixture *f, int64_t max_groups, int threads, fmsa_cpu_sched_mode mode) {
    free(f->mem);
    f->mem = malloc(fmsa_cpu_sched_bytes(max_groups, threads));
    assert_non_null(f->mem);
    fmsa_cpu_sched_carve(f->mem, max_groups, threads, &f->sched);
    fmsa_cpu_sched_build(&f->sched, f->items, f->n, threads, mode);
}

/// Runs `team` simulated threads round-robin (thread t takes `burst[t]`
/// items per turn) until all return -1; who[i] = the thread that got item i.
static void drain(fixture *f, int team, const int *burst, int *who) {
    fmsa_cpu_cursor cur[MAX_THREADS + 4];
    int done[MAX_THREADS + 4] = {0}, live = team;
    memset(cur, 0, sizeof cur);
    for (int64_t i = 0; i < f->n; ++i) who[i] = -1;
    while (live > 0)
        for (int t = 0; t < team; ++t)
            for (int b = 0; b < burst[t] && !done[t]; ++b) {
                const int64_t i = fmsa_cpu_sched_next(&f->sched, t, &cur[t]);
                if (i < 0) {
                    done[t] = 1;
                    --live;
                    break;
                }
                assert_true(i < f->n);
                assert_int_equal(who[i], -1); /* handed out once */
                who[i] = t;
            }
    for (int64_t i = 0; i < f->n; ++i) assert_int_not_equal(who[i], -1);
    for (int t = 0; t < team; ++t) /* and nothing after the end */
        assert_int_equal(fmsa_cpu_sched_next(&f->sched, t, &cur[t]), -1);
}

static void every_item_once(void **state) {
    fixture *f = calloc(1, sizeof *f);
    int who[MAX_ITEMS], burst[MAX_THREADS + 4];
    const int64_t shapes[][2] = {{1, 1}, {1, 40}, {3, 5}, {32, 8}, {64, 1}, {200, 7}};
    (void)state;
    assert_non_null(f);
    for (int t = 0; t < MAX_THREADS + 4; ++t) burst[t] = 1 + (t * 5) % 3;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (unsigned seed = 0; seed < 3; ++seed)
            for (int threads = 1; threads <= MAX_THREADS; threads += 4)
                for (int mode = 0; mode <= (int)FMSA_CPU_SCHED_IN_ORDER; ++mode) {
                    const int teams[3] = {1, threads, threads + 3}; /* smaller, equal, larger */
                    for (int k = 0; k < 3; ++k) {
                        make_items(f, shapes[s][0], shapes[s][1], seed);
                        build(f, shapes[s][0], threads, (fmsa_cpu_sched_mode)mode);
                        drain(f, teams[k], burst, who);
                    }
                }
    make_items(f, 0, 0, 0);
    build(f, 1, 4, FMSA_CPU_SCHED_SLOTS);
    drain(f, 4, burst, who);
    free(f->mem);
    free(f);
}

static void groups_are_slots_dealt_by_load(void **state) {
    fixture *f = calloc(1, sizeof *f);
    (void)state;
    assert_non_null(f);
    for (unsigned seed = 1; seed < 6; ++seed)
        for (int threads = 1; threads <= MAX_THREADS; threads += 3) {
            const fmsa_cpu_sched *s = &f->sched;
            int64_t load[MAX_THREADS] = {0}, heaviest = 0, lo = INT64_MAX, hi = 0;
            make_items(f, 50, 6, seed);
            build(f, 50, threads, FMSA_CPU_SCHED_SLOTS);
            assert_int_equal(s->n_groups, 50);
            assert_int_equal(s->first[threads], 50);
            for (int t = 0; t < threads; ++t)
                for (int64_t k = s->first[t]; k < s->first[t + 1]; ++k) {
                    const fmsa_cpu_group *g = &s->groups[s->order[k]];
                    int64_t cost = 0;
                    for (int64_t i = g->begin; i < g->end; ++i) {
                        assert_int_equal(f->items[i].slot, f->items[g->begin].slot);
                        if (i > g->begin) /* heaviest first within the slot */
                            assert_true(f->items[i].cost <= f->items[i - 1].cost);
                        cost += f->items[i].cost;
                    }
                    assert_int_equal(cost, g->cost);
                    assert_int_equal(g->end - g->begin, 6);
                    if (k > s->first[t]) /* each thread's own groups heaviest first */
                        assert_true(g->cost <= s->groups[s->order[k - 1]].cost);
                    load[t] += cost;
                    if (cost > heaviest) heaviest = cost;
                }
            for (int t = 0; t < threads; ++t) {
                if (load[t] < lo) lo = load[t];
                if (load[t] > hi) hi = load[t];
            }
            assert_true(hi - lo <= heaviest);
        }
    free(f->mem);
    free(f);
}

static void equal_slots_stay_with_their_owner(void **state) {
    fixture *f = calloc(1, sizeof *f);
    int who[MAX_ITEMS], burst[MAX_THREADS];
    (void)state;
    assert_non_null(f);
    for (int t = 0; t < MAX_THREADS; ++t) burst[t] = 1;
    for (int threads = 1; threads <= 16; threads *= 2) {
        make_items(f, 4 * threads, 8, 0); /* 4 slots of 8 equal items per thread */
        build(f, 4 * threads, threads, FMSA_CPU_SCHED_SLOTS);
        drain(f, threads, burst, who);
        for (int64_t i = 0; i < f->n; ++i) { /* one thread per slot */
            for (int64_t j = 0; j < i; ++j)
                if (f->items[j].slot == f->items[i].slot) assert_int_equal(who[j], who[i]);
        }
    }
    free(f->mem);
    free(f);
}

static void shared_list_is_heaviest_first(void **state) {
    fixture *f = calloc(1, sizeof *f);
    fmsa_cpu_cursor cur = {0, 0};
    int64_t prev = INT64_MAX, i, count = 0;
    (void)state;
    assert_non_null(f);
    make_items(f, 9, 11, 7);
    build(f, 9, 4, FMSA_CPU_SCHED_SHARED);
    assert_int_equal(f->sched.n_groups, 1);
    while ((i = fmsa_cpu_sched_next(&f->sched, 2, &cur)) >= 0) {
        assert_true(f->items[i].cost <= prev);
        assert_int_equal(i, count); /* in list order */
        prev = f->items[i].cost;
        ++count;
    }
    assert_int_equal(count, f->n);
    free(f->mem);
    free(f);
}

static void in_order_keeps_list_order(void **state) {
    fixture *f = calloc(1, sizeof *f);
    (void)state;
    assert_non_null(f);
    make_items(f, 7, 9, 3); /* random costs: IN_ORDER must ignore them */
    build(f, 7, 3, FMSA_CPU_SCHED_IN_ORDER);
    assert_int_equal(f->sched.n_groups, 7);
    for (int64_t k = 0; k < f->sched.n_groups; ++k) {
        const fmsa_cpu_group *g = &f->sched.groups[k];
        for (int64_t i = g->begin + 1; i < g->end; ++i)
            assert_int_equal(f->items[i].tile, f->items[i - 1].tile + 1);
    }
    free(f->mem);
    free(f);
}

#define TURN_SLOTS 3
#define TURN_TILES 40 /* items (key tiles) per slot */
#define TURN_ROWS 17  /* turns (query tiles) per slot */

typedef struct turn_run {
    fixture *f;
    atomic_int turn[TURN_SLOTS][TURN_ROWS];
    int log[TURN_SLOTS][TURN_ROWS][TURN_TILES]; /* contributions, in the order made */
    int count[TURN_SLOTS][TURN_ROWS];
} turn_run;

typedef struct turn_worker {
    turn_run *run;
    int id;
} turn_worker;

/// Item kt has nothing to add to row tile i when (kt + 2 i) % 5 == 0.
static int turn_skips(int64_t kt, int i) { return (kt + 2 * i) % 5 == 0; }

static void *turn_thread(void *arg) {
    const turn_worker *w = (const turn_worker *)arg;
    turn_run *r = w->run;
    fmsa_cpu_cursor cur = {0, 0};
    int64_t n;
    while ((n = fmsa_cpu_sched_next(&r->f->sched, w->id, &cur)) >= 0) {
        const fmsa_cpu_item *it = &r->f->items[n];
        for (int i = 0; i < TURN_ROWS; ++i) {
            atomic_int *t = &r->turn[it->slot][i];
            if (turn_skips(it->tile, i)) {
                fmsa_cpu_turn_skip(t, it->tile);
                continue;
            }
            fmsa_cpu_turn_wait(t, it->tile);
            r->log[it->slot][i][r->count[it->slot][i]++] = (int)it->tile;
            /* some work while holding the turn, so that the threads really
             * overlap (items of a few ns would all finish before the other
             * threads start) */
            for (volatile int spin = 0; spin < 2000; ++spin) {
            }
            fmsa_cpu_turn_pass(t, it->tile);
        }
    }
    return NULL;
}

static void turns_add_in_key_tile_order(void **state) {
    turn_run *r = calloc(1, sizeof *r);
    (void)state;
    assert_non_null(r);
    r->f = calloc(1, sizeof *r->f);
    assert_non_null(r->f);
    for (int threads = 1; threads <= 6; ++threads)
        for (int round = 0; round < 3; ++round) {
            pthread_t tid[6];
            turn_worker w[6];
            fixture *f = r->f;
            f->n = 0;
            for (int64_t slot = 0; slot < TURN_SLOTS; ++slot) /* built slot by slot, in order */
                for (int64_t kt = 0; kt < TURN_TILES; ++kt)
                    f->items[f->n++] = (fmsa_cpu_item){slot, 0, kt, 0, 1 + (kt * 7) % 11};
            /* deal to fewer owners than threads in some rounds: the rest only take */
            build(f, TURN_SLOTS, round == 2 ? 1 : threads, FMSA_CPU_SCHED_IN_ORDER);
            memset(r->count, 0, sizeof r->count);
            for (int s = 0; s < TURN_SLOTS; ++s)
                for (int i = 0; i < TURN_ROWS; ++i) atomic_init(&r->turn[s][i], 0);
            for (int t = 0; t < threads; ++t) {
                w[t] = (turn_worker){r, t};
                assert_int_equal(pthread_create(&tid[t], NULL, turn_thread, &w[t]), 0);
            }
            for (int t = 0; t < threads; ++t) assert_int_equal(pthread_join(tid[t], NULL), 0);
            for (int s = 0; s < TURN_SLOTS; ++s)
                for (int i = 0; i < TURN_ROWS; ++i) {
                    int c = 0;
                    for (int kt = 0; kt < TURN_TILES; ++kt)
                        if (!turn_skips(kt, i)) assert_int_equal(r->log[s][i][c++], kt);
                    assert_int_equal(r->count[s][i], c);
                    assert_int_equal(atomic_load(&r->turn[s][i]), TURN_TILES);
                }
        }
    free(r->f->mem);
    free(r->f);
    free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_item_once),
        cmocka_unit_test(groups_are_slots_dealt_by_load),
        cmocka_unit_test(equal_slots_stay_with_their_owner),
        cmocka_unit_test(shared_list_is_heaviest_first),
        cmocka_unit_test(in_order_keeps_list_order),
        cmocka_unit_test(turns_add_in_key_tile_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
