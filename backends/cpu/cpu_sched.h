/*
 * Work items of the CPU passes and the order threads take them in.
 *
 * Items are grouped by the (sequence, kv head) slot whose K/V panels they
 * read.  Groups are dealt to threads heaviest first, each to the thread with
 * the least work so far (longest-processing-time order), and a thread runs
 * its own groups' items first, so a slot's panels are packed and then read
 * by one core while they sit in its L2.  When its own groups are empty it
 * takes items from the others', lightest group first (the group its owner
 * would reach last), one item at a time: no thread idles while items remain,
 * and the tail is balanced to one item, as with a plain dynamic loop.
 *
 * The forward uses this order; it beat one shared heaviest-first list at
 * s=512 on 16 threads on the Xeon, and the backward's dK/dV items without
 * turns still take that list (FMSA_CPU_SCHED_SHARED).  history:
 * bench/RESULTS.md
 *
 * Within a group items run heaviest first (causal and windowed items differ
 * by up to the sequence length).  The order only changes which thread runs
 * an item, never what it computes.
 */
#ifndef FMSA_CPU_SCHED_H
#define FMSA_CPU_SCHED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/// One unit of parallel work; fields are pass-specific indices.
typedef struct fmsa_cpu_item {
    int64_t slot;  ///< (sequence, kv head) slot: b * heads_kv + hk
    int64_t sub;   ///< query head within the GQA group (forward, dQ) or unused
    int64_t tile;  ///< query tile (forward, dQ) or key tile (dK/dV)
    int64_t split; ///< key split (forward split-KV), else 0
    int64_t cost;  ///< estimated work (keys x rows visited); 0 items are dropped
} fmsa_cpu_item;

/// Sorts items by cost, largest first (ties by position, so the order is fixed).
void fmsa_cpu_items_sort(fmsa_cpu_item *items, int64_t n);

/// Items [begin, end) of the sorted list that one thread owns first.
typedef struct fmsa_cpu_group {
    int64_t begin, end;
    int64_t cost;      ///< sum of its items' costs
    atomic_llong next; ///< the next unclaimed item (may run past end)
} fmsa_cpu_group;

typedef struct fmsa_cpu_sched {
    fmsa_cpu_group *groups; ///< heaviest first
    int64_t n_groups;
    int64_t *order;         ///< group indices, thread-major: thread t's own are
    int64_t *first;         ///< order[first[t] .. first[t + 1])
    int64_t *owner;         ///< owner of each group (build only)
    int64_t *load;          ///< per-thread cost, then fill position (build only)
    int threads;            ///< owners dealt to (the team of the build)
} fmsa_cpu_sched;

/// A thread's position in the schedule (zero-initialise before its first call).
typedef struct fmsa_cpu_cursor {
    int64_t own;   ///< groups of its own list done
    int64_t taken; ///< groups of the stealing walk done
} fmsa_cpu_cursor;

/// Bytes fmsa_cpu_sched_carve needs for up to max_groups slots and max_threads.
size_t fmsa_cpu_sched_bytes(int64_t max_groups, int max_threads);
/// Lays the schedule's arrays out in mem (fmsa_cpu_sched_bytes of it).
void fmsa_cpu_sched_carve(void *mem, int64_t max_groups, int max_threads, fmsa_cpu_sched *s);

/// How fmsa_cpu_sched_build orders and groups items.
typedef enum fmsa_cpu_sched_mode {
    FMSA_CPU_SCHED_SHARED,   ///< one group of every item, heaviest first, taken by
                             ///< every thread
    FMSA_CPU_SCHED_SLOTS,    ///< slot groups, each heaviest first
    FMSA_CPU_SCHED_IN_ORDER, ///< slot groups, each in list order (turns need it)
} fmsa_cpu_sched_mode;

/// Orders items (reordered in place) and deals their groups to `threads`
/// owners.  One thread calls it; the others must not call
/// fmsa_cpu_sched_next until a barrier follows.
void fmsa_cpu_sched_build(fmsa_cpu_sched *s, fmsa_cpu_item *items, int64_t n, int threads,
                          fmsa_cpu_sched_mode mode);

/// The next item index thread t runs, or -1 when every item is claimed.
/// Any number of threads may call it at once; a thread id at or above the
/// build's `threads` owns nothing and only takes from others.
int64_t fmsa_cpu_sched_next(fmsa_cpu_sched *s, int t, fmsa_cpu_cursor *c);

/*
 * Turns: ordered accumulation into shared rows without atomics on the data.
 * The backward's ordered dQ (FMSA_CPU_DQ_ORDERED, cpu_backward.c) lets every
 * dK/dV item (key tile kt of a slot) add its dS·K into the slot's one dQ
 * accumulator, one (query head, query tile) at a time, in key tile order:
 * item kt waits until the tile's turn is kt, adds, and passes the turn to
 * kt + 1.  Every sum then runs in the same order whatever the thread count.
 * Items of a slot are claimed in key tile order (FMSA_CPU_SCHED_IN_ORDER)
 * and each waits only for its predecessor, which was claimed before it and
 * waits only for its own: the lowest unfinished item never waits.
 */

/// One step of a spin-wait on another thread's progress (spins: the steps so
/// far): a pause, and every 4096 steps the core given away, which matters
/// only when there are more threads than cores.
void fmsa_cpu_spin_pause(unsigned spins);

/// Spins until *turn == kt (kt's predecessor has added its part), then the
/// caller may read and write the rows the turn guards.  NULL: no turns.
void fmsa_cpu_turn_wait(atomic_int *turn, int64_t kt);
/// Hands the rows to item kt + 1 (after fmsa_cpu_turn_wait(turn, kt)).
static inline void fmsa_cpu_turn_pass(atomic_int *turn, int64_t kt) {
    if (turn) atomic_store_explicit(turn, (int)(kt + 1), memory_order_release);
}
/// Waits for and passes a turn the item has nothing to add to.
static inline void fmsa_cpu_turn_skip(atomic_int *turn, int64_t kt) {
    fmsa_cpu_turn_wait(turn, kt);
    fmsa_cpu_turn_pass(turn, kt);
}

#endif /* FMSA_CPU_SCHED_H */
