/* Slot-affine work order with stealing; see cpu_sched.h. */
#include "backends/cpu/cpu_sched.h"

#include <stdlib.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sched.h>
#endif /* defined(__unix__) || defined(__APPLE__) */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif /* defined(__x86_64__) || defined(__i386__) */

#include "backends/cpu/cpu_internal.h"

/// The order the passes build items in: (slot, sub, tile, split).
static int cpu_item_order_cmp(const void *pa, const void *pb) {
    const fmsa_cpu_item *a = (const fmsa_cpu_item *)pa, *b = (const fmsa_cpu_item *)pb;
    if (a->slot != b->slot) return a->slot < b->slot ? -1 : 1;
    if (a->sub != b->sub) return a->sub < b->sub ? -1 : 1;
    if (a->tile != b->tile) return a->tile < b->tile ? -1 : 1;
    return a->split < b->split ? -1 : (a->split > b->split);
}

/// Heaviest first, equal costs in build order.
static int cpu_item_cmp(const void *pa, const void *pb) {
    const fmsa_cpu_item *a = (const fmsa_cpu_item *)pa, *b = (const fmsa_cpu_item *)pb;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    return cpu_item_order_cmp(pa, pb);
}

/// Slot first, then cpu_item_cmp's order within the slot.
static int cpu_item_slot_cmp(const void *pa, const void *pb) {
    const fmsa_cpu_item *a = (const fmsa_cpu_item *)pa, *b = (const fmsa_cpu_item *)pb;
    if (a->slot != b->slot) return a->slot < b->slot ? -1 : 1;
    return cpu_item_cmp(pa, pb);
}

void fmsa_cpu_items_sort(fmsa_cpu_item *items, int64_t n) {
    if (n > 1) qsort(items, (size_t)n, sizeof *items, cpu_item_cmp);
}

size_t fmsa_cpu_sched_bytes(int64_t max_groups, int max_threads) {
    const size_t g = (size_t)(max_groups > 1 ? max_groups : 1);
    return fmsa_cpu_round64(g * sizeof(fmsa_cpu_group)) +
           2 * fmsa_cpu_round64(g * sizeof(int64_t)) +
           2 * fmsa_cpu_round64((size_t)(max_threads + 1) * sizeof(int64_t));
}

void fmsa_cpu_sched_carve(void *mem, int64_t max_groups, int max_threads, fmsa_cpu_sched *s) {
    const size_t g = (size_t)(max_groups > 1 ? max_groups : 1);
    const size_t t = fmsa_cpu_round64((size_t)(max_threads + 1) * sizeof(int64_t));
    char *at = (char *)mem;
    s->groups = (fmsa_cpu_group *)at;
    at += fmsa_cpu_round64(g * sizeof(fmsa_cpu_group));
    s->order = (int64_t *)at;
    at += fmsa_cpu_round64(g * sizeof(int64_t));
    s->owner = (int64_t *)at;
    at += fmsa_cpu_round64(g * sizeof(int64_t));
    s->first = (int64_t *)at;
    s->load = (int64_t *)(at + t);
    s->n_groups = 0;
    s->threads = 0;
}

/// Insertion sort of the groups, heaviest first: n_groups is the slots of one
/// chunk, and most shapes give groups of equal cost (already in order).
static void cpu_groups_sort(fmsa_cpu_sched *s, const fmsa_cpu_item *items) {
    fmsa_cpu_group *g = s->groups;
    for (int64_t i = 1; i < s->n_groups; ++i) {
        const int64_t begin = g[i].begin, end = g[i].end, cost = g[i].cost;
        int64_t j = i;
        /* (next is set after the sort: only these three fields move) */
        for (; j > 0 && (cost > g[j - 1].cost ||
                         (cost == g[j - 1].cost && items[begin].slot < items[g[j - 1].begin].slot));
             --j) {
            g[j].begin = g[j - 1].begin;
            g[j].end = g[j - 1].end;
            g[j].cost = g[j - 1].cost;
        }
        g[j].begin = begin;
        g[j].end = end;
        g[j].cost = cost;
    }
}

void fmsa_cpu_sched_build(fmsa_cpu_sched *s, fmsa_cpu_item *items, int64_t n, int threads,
                          fmsa_cpu_sched_mode mode) {
    s->threads = threads > 0 ? threads : 1;
    s->n_groups = 0;
    for (int t = 0; t <= s->threads; ++t) s->first[t] = 0; /* nobody owns anything yet */
    if (n <= 0) return;
    if (mode == FMSA_CPU_SCHED_SHARED) { /* one group: the plain heaviest-first dynamic list */
        fmsa_cpu_items_sort(items, n);
        s->groups[0].begin = 0;
        s->groups[0].end = n;
        s->groups[0].cost = 0;
        s->n_groups = 1;
        atomic_init(&s->groups[0].next, 0);
        return;
    }
    qsort(items, (size_t)n, sizeof *items,
          mode == FMSA_CPU_SCHED_IN_ORDER ? cpu_item_order_cmp : cpu_item_slot_cmp);
    for (int64_t i = 0; i < n; ++i) {
        fmsa_cpu_group *g;
        if (i == 0 || items[i].slot != items[i - 1].slot) {
            g = &s->groups[s->n_groups++];
            g->begin = i;
            g->cost = 0;
        } else {
            g = &s->groups[s->n_groups - 1];
        }
        g->end = i + 1;
        g->cost += items[i].cost;
    }
    cpu_groups_sort(s, items);
    /* deal heaviest first, each group to the least loaded thread (lowest id
     * on ties), then lay the groups out thread-major, each thread's heaviest
     * first (a counting sort by owner) */
    for (int t = 0; t < s->threads; ++t) s->load[t] = 0;
    for (int64_t gi = 0; gi < s->n_groups; ++gi) {
        int best = 0;
        for (int t = 1; t < s->threads; ++t)
            if (s->load[t] < s->load[best]) best = t;
        s->load[best] += s->groups[gi].cost;
        s->owner[gi] = best;
        ++s->first[best + 1];
        atomic_init(&s->groups[gi].next, s->groups[gi].begin);
    }
    for (int t = 0; t < s->threads; ++t) {
        s->first[t + 1] += s->first[t];
        s->load[t] = s->first[t]; /* now: thread t's next free position in order */
    }
    for (int64_t gi = 0; gi < s->n_groups; ++gi) s->order[s->load[s->owner[gi]]++] = gi;
}

/// Claims the next item of group g, -1 when it has none left (each thread
/// asks an empty group once per walk, so next stays near end).
static int64_t cpu_group_claim(fmsa_cpu_group *g) {
    const int64_t i = atomic_fetch_add_explicit(&g->next, 1, memory_order_relaxed);
    return i < g->end ? i : -1;
}

int64_t fmsa_cpu_sched_next(fmsa_cpu_sched *s, int t, fmsa_cpu_cursor *c) {
    if (t < s->threads) { /* its own groups, in order */
        const int64_t first = s->first[t], count = s->first[t + 1] - first;
        for (; c->own < count; ++c->own) {
            const int64_t i = cpu_group_claim(&s->groups[s->order[first + c->own]]);
            if (i >= 0) return i;
        }
    }
    /* then every group, lightest first: the ones their owners reach last */
    for (; c->taken < s->n_groups; ++c->taken) {
        const int64_t i = cpu_group_claim(&s->groups[s->n_groups - 1 - c->taken]);
        if (i >= 0) return i;
    }
    return -1;
}

void fmsa_cpu_spin_pause(unsigned spins) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif /* defined(__x86_64__) || defined(__i386__) */
#if defined(__unix__) || defined(__APPLE__)
    if (spins % 4096 == 4095) sched_yield();
#else
    (void)spins;
#endif /* defined(__unix__) || defined(__APPLE__) */
}

void fmsa_cpu_turn_wait(atomic_int *turn, int64_t kt) {
    if (!turn) return;
    /* the predecessor is one tile step ahead in the steady state */
    for (unsigned spins = 0; atomic_load_explicit(turn, memory_order_acquire) != (int)kt; ++spins)
        fmsa_cpu_spin_pause(spins);
}
