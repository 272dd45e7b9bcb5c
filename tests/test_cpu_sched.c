/*
 * The CPU backend's work order (backends/cpu/cpu_sched.h), driven by
 * simulated threads that call fmsa_cpu_sched_next in a fixed interleaving,
 * so every outcome is reproducible:
 *   - every item is handed out exactly once, then -1 to every thread, for
 *     teams smaller than, equal to and larger than the one dealt to, and
 *     for the shared list of FLASHMSA_CPU_SCHED=item;
 *   - groups are whole slots, dealt heaviest first to the least loaded
 *     thread: loads differ by at most the heaviest group;
 *   - with as many equal slots per thread, each thread's items all come
 *     from its own slots (no stealing when nobody runs ahead);
 *   - within a slot, and in the shared list, items come heaviest first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
        const int64_t slot = (k * 7 + 3) % nslots;
        for (int64_t i = 0; i < per; ++i) {
            x = x * 1103515245u + 12345u;
            f->items[f->n++] = (fmsa_cpu_item){slot, 0, i, 0, seed ? 1 + (x >> 16) % 97 : 1};
        }
    }
}

static void build(fixture *f, int64_t max_groups, int threads, int by_slot) {
    free(f->mem);
    f->mem = malloc(fmsa_cpu_sched_bytes(max_groups, threads));
    assert_non_null(f->mem);
    fmsa_cpu_sched_carve(f->mem, max_groups, threads, &f->sched);
    fmsa_cpu_sched_build(&f->sched, f->items, f->n, threads, by_slot);
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
                for (int by_slot = 0; by_slot <= 1; ++by_slot) {
                    const int teams[3] = {1, threads, threads + 3}; /* smaller, equal, larger */
                    for (int k = 0; k < 3; ++k) {
                        make_items(f, shapes[s][0], shapes[s][1], seed);
                        build(f, shapes[s][0], threads, by_slot);
                        drain(f, teams[k], burst, who);
                    }
                }
    make_items(f, 0, 0, 0);
    build(f, 1, 4, 1);
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
            build(f, 50, threads, 1);
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
        build(f, 4 * threads, threads, 1);
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
    build(f, 9, 4, 0);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_item_once),
        cmocka_unit_test(groups_are_slots_dealt_by_load),
        cmocka_unit_test(equal_slots_stay_with_their_owner),
        cmocka_unit_test(shared_list_is_heaviest_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
