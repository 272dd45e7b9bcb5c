/*
 * Internal interface of the CPU backend: per-context state, the one variant
 * decision (fmsa_cpu_plan_make, shared by supports / workspace_size /
 * forward / backward so they can never disagree), host memory and thread
 * helpers.
 *
 * Determinism: every output element is produced by exactly one work item, and
 * the work decomposition (tile sizes, number of key splits, merge order) is a
 * function of the problem's shape and the device's cache sizes only, never of
 * the OpenMP thread count.  Results are therefore bit-identical for any
 * OMP_NUM_THREADS, run to run.
 */
#ifndef FMSA_CPU_INTERNAL_H
#define FMSA_CPU_INTERNAL_H

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_kernels.h"
#include "common/backend.h"
#include "common/fmsa_limits.h"

#ifdef _OPENMP
#include <omp.h>
/// An OpenMP directive that vanishes (without -Wunknown-pragmas noise) in
/// builds without OpenMP, where every loop simply runs on the calling thread.
#define FMSA_CPU_OMP(directive) _Pragma(#directive)
#else
#define FMSA_CPU_OMP(directive)
#endif /* _OPENMP */

/// Largest query tile (block_m) of any plan: the planner's rows stay below it
/// and FLASHMSA_CPU_TILES refuses more; per-tile row arrays are sized by it.
#define FMSA_CPU_MAX_BLOCK_M 256

/// A pass's buffers (panels, per-thread tiles, work lists) kept between the
/// calls of one context: a fresh multi-MiB allocation per call comes back as
/// new pages, whose first-touch faults cost a sizeable part of a pass
/// (history: bench/RESULTS.md).  One pass at a time uses it; a concurrent
/// pass on the same context allocates its own (fmsa_cpu_arena_take).
typedef struct fmsa_cpu_arena {
    atomic_flag busy; ///< set while a pass holds buf
    void *buf;        ///< fmsa_cpu_aligned_alloc'ed, grown to the largest request
    size_t bytes;     ///< size of buf
} fmsa_cpu_arena;

/// Who owns the backward's dQ rows, one decision per plan (cpu_plan.c).
typedef enum fmsa_cpu_dq_owner {
    FMSA_CPU_DQ_AUTO = 0,  ///< options only: the plan decides by shape
    FMSA_CPU_DQ_PARTS,     ///< stage (a) parts write their own partials; stage (b) sums them
    FMSA_CPU_DQ_ORDERED,   ///< every key tile adds into one partial in turn (cpu_sched.h)
    FMSA_CPU_DQ_RECOMPUTE, ///< stage (b) recomputes S and dP and owns its dQ tile
} fmsa_cpu_dq_owner;

/// The CPU backend's developer variables, read once at context creation
/// (cpu_options.c) so that planning is a pure function of (problem, device,
/// options) and no pass reads the environment.
typedef struct fmsa_cpu_options {
    const fmsa_cpu_kernels *kern; ///< kernel path: FLASHMSA_CPU_KERNEL, else the best (cpu_dispatch.c)
    int tiles[2][2];              ///< FLASHMSA_CPU_TILES: [pass][Br, Bc], 0 = the planner's tiles
    fmsa_cpu_dq_owner dq_owner;   ///< FLASHMSA_CPU_BWD=parts|ordered|recompute, else AUTO
    int trace;                    ///< FLASHMSA_CPU_TRACE: per-pass timing (cpu_trace.h)
    int poison;                   ///< FLASHMSA_CPU_POISON: pass buffers filled with NaN bytes
} fmsa_cpu_options;

/// Reads the variables into o; FMSA_ERR_INVALID_ARGUMENT naming the variable
/// when one is malformed, and the dispatcher's status when the forced kernel
/// path cannot run here.
fmsa_status fmsa_cpu_options_read(fmsa_cpu_options *o);

/// Per-context state: the device as queried once at context creation, so
/// planning does not re-read /proc and /sys on every call, the developer
/// options, and the buffers the passes reuse.
typedef struct fmsa_cpu_state {
    fmsa_device_info info; ///< what fmsa_cpu_device_info(0) reported
    fmsa_cpu_options opt;  ///< read once by context_create
    fmsa_cpu_arena arena;  ///< freed by the context's destroy
} fmsa_cpu_state;

/// The variant the CPU backend runs for one problem and pass.
typedef struct fmsa_cpu_plan {
    int block_m;            ///< query rows per tile (from the planner)
    int block_n;            ///< keys per tile (from the planner)
    int64_t tiles_q;        ///< ceil(seqlen_q / block_m), seqlen_q the longest sequence
    int64_t tiles_k;        ///< ceil(seqlen_k / block_n)
    int64_t num_splits;     ///< forward: key splits merged in fixed order (1 = none)
    int64_t split_keys;     ///< forward with splits: keys per split, a multiple of block_n
    size_t workspace_bytes; ///< caller-owned workspace the pass uses (see cpu_plan.c)
    size_t dsink_offset;    ///< backward with dsink: bytes into the workspace of the
                            ///< per-(b, h, query tile) fp64 partials of dsink
    size_t scratch_bytes;   ///< per-thread fp32 tiles, malloc'ed inside the call
    int64_t slot_floats;    ///< packed panels of one (sequence, kv head) slot (cpu_pack.h)
    int64_t slots;          ///< batch * heads_kv
    int64_t chunk_slots;    ///< slots packed at a time (FMSA_CPU_PANEL_BUDGET, >= 1)
    fmsa_cpu_dq_owner dq_owner; ///< backward: who owns dQ (never AUTO in a plan)
    int64_t dq_parts;       ///< backward: dQ partials per slot: the parts (PARTS), 1
                            ///< (ORDERED) or 0 (RECOMPUTE: stage (b) recomputes S and dP)
    const fmsa_cpu_kernels *kern; ///< the micro-kernel path (cpu_dispatch.c)
    int b16;                ///< the planner chose a bf16-product row (FMSA_PLAN_DTYPES_BF16_MMA):
                            ///< bf16 inputs on kern->gemm_b16 (cpu_forward_b16.c, cpu_backward_b16.c)
    struct fmsa_cpu_trace *trace; ///< the pass's FLASHMSA_CPU_TRACE (cpu_trace.h), or NULL
    double *dsink_parts;    ///< backward with dsink: the workspace's partials (set by the pass)
} fmsa_cpu_plan;

/// One thread's tiles of the bf16-product forward.
typedef struct fmsa_cpu_b16_tiles {
    uint16_t *q;    ///< [BM][Dk] query rows in bf16, Dk = D rounded up to 32, zero padded
                    ///< (BM, BN: the plan's block_m, block_n)
    uint16_t *p;    ///< [BM][BN] probabilities in bf16 (the A of P·V)
    float *s;       ///< [BM][s_ld] scores
    float *acc;     ///< [BM][acc_ld] unnormalised output rows
    float *m, *l;   ///< [BM] running maxima and sums
    float *stage;   ///< [BN][max(D, Dv)] fp32 staging of K or V rows while packing
    int64_t acc_ld; ///< Dv rounded up to 16 (the n of P·V)
    int64_t s_ld;   ///< BN + FMSA_CPU_B16_S_PAD
} fmsa_cpu_b16_tiles;

/// Floats added to each S row of the bf16 forward: at BN = 256 a row is 1 KiB,
/// so the 16 rows of an AMX C tile store fell into 4 L1 sets; one more
/// cache line per row spreads them over 16 (bench/cpu_amx_probe; history:
/// bench/RESULTS.md).
#define FMSA_CPU_B16_S_PAD 16

/// Carves the tiles of a bm x bn plan (head dims D of Q/K, Dv of V/O) from
/// base (NULL: only counts); returns the bytes used.
size_t fmsa_cpu_b16_carve(char *base, int bm, int bn, int64_t D, int64_t Dv,
                          fmsa_cpu_b16_tiles *t);

/// Floats (uint16 pairs, 64-byte multiples) of one slot's bf16 K and V panels
/// (tiles_k key tiles of bn keys; K rows of D, V rows of Dv).
int64_t fmsa_cpu_b16_slot_floats(int64_t D, int64_t Dv, int bn, int64_t tiles_k);

/// Packs key tile ktile of slot `slot` into that slot's panels (cpu_forward_b16.c).
void fmsa_cpu_b16_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                       float *slot_panels, int64_t ktile, float *stage);

/// Runs keys [k_begin, k_end) of query rows [i0, i0+rows) of (sequence b, head h)
/// into t's m, l, acc (the bf16 twin of cpu_forward.c's cpu_fwd_rows).
void fmsa_cpu_b16_rows(const fmsa_problem *p, const fmsa_cpu_plan *pl, const fmsa_seq *seq,
                       int64_t b, int64_t h, int64_t i0, int rows, int64_t k_begin,
                       int64_t k_end, const float *slot_panels, fmsa_cpu_b16_tiles *t);

/// The bf16-product backward (cpu_backward_b16.c): floats of one slot's
/// panels, one thread's scratch bytes, pack job `job` of a slot (key tiles,
/// then query tiles of every head of the group; delta_ws the preprocess's D),
/// the dK/dV item of key tile kt (with dQ partials also dS·K into part
/// `part`'s rows) and the dQ item of query tile qt of head sub (recomputing).
int64_t fmsa_cpu_b16_bwd_slot_floats(const fmsa_problem *p, int bm, int bn, int64_t tiles_q,
                                     int64_t tiles_k);
size_t fmsa_cpu_b16_bwd_scratch_bytes(const fmsa_problem *p, int bm, int bn);
void fmsa_cpu_b16_bwd_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                           float *slot_panels, int64_t job, char *scratch);
void fmsa_cpu_b16_bwd_dkdv(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                           float *slot_panels, int64_t kt, int64_t part, atomic_int *turns,
                           char *scratch);
void fmsa_cpu_b16_bwd_dq(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                         float *slot_panels, int64_t sub, int64_t qt, char *scratch);

/// Backward with dsink (either product variant, from the pack job of query
/// tile qt of head h of sequence b): records the tile's share of dsink_h,
/// -sum_r exp(t_h - lse_r) * delta[r] over its rows (delta: D_r - dlse_r).
void fmsa_cpu_bwd_dsink_tile(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                             const fmsa_seq *seq, int64_t b, int64_t h, int64_t qt, int rows,
                             const float *delta);

/// The dQ partials of one slot's panels (plan->dq_parts > 0, either product variant):
/// rows [part][group][head_rows][ld] fp32 and, per (part, group head, query
/// tile), a flag that is nonzero once that part wrote the tile's rows.
typedef struct fmsa_cpu_dq_partials {
    float *rows;       ///< partial dQ rows (unscaled, like the accumulators)
    float *written;    ///< [part][group][tiles_q] written-flags
    int64_t ld;        ///< floats per row (head_dim, or its 16-rounding on bf16 products)
    int64_t head_rows; ///< rows per (part, group head): tiles_q * block_m
} fmsa_cpu_dq_partials;

/// Floats per partial dQ row for head dim D: the bf16-product
/// kernels write rows of D rounded up to 16 (the n of their products).
static inline int64_t fmsa_cpu_dq_partial_ld(int b16, int64_t D) {
    return b16 ? (D + 15) / 16 * 16 : D;
}

/// Whether the fp32 backward copies Q, dO and K rows into its slot panels:
/// fp32 inputs are read in place (the products take their row strides), so
/// the panels hold no rows for them (cpu_plan.c sizes, cpu_backward.c lays out).
static inline int fmsa_cpu_bwd_packs_rows(const fmsa_problem *p) {
    /* also where keys may be hidden from every row (mask, left window): their
     * K rows become zeros in the panel (fmsa_cpu_dead_keys_zero), which the
     * caller's tensor must not */
    return p->dtype != FMSA_DTYPE_F32 || p->has_mask || p->window_left >= 0;
}

/// The bf16 backward's partials within one slot's panels (cpu_backward_b16.c).
fmsa_cpu_dq_partials fmsa_cpu_b16_bwd_partials(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                               float *slot_panels);

/// Fills info for the host CPU (index must be 0).
fmsa_status fmsa_cpu_device_info(int index, fmsa_device_info *info);

/// Decides tiles, variant, splits, workspace and scratch for p on device dev
/// under options opt: a pure function of the three.  Fails with the planner's
/// status when no tile fits, and with FMSA_ERR_NOT_SUPPORTED for paged KV in
/// backward or an option this problem cannot honour.
fmsa_status fmsa_cpu_plan_make(const fmsa_device_info *dev, const fmsa_cpu_options *opt,
                               const fmsa_problem *p, fmsa_cpu_plan *plan);

/// The plan of context state st (what every vtable entry and pass calls).
static inline fmsa_status fmsa_cpu_plan_of(const fmsa_cpu_state *st, const fmsa_problem *p,
                                           fmsa_cpu_plan *plan) {
    return fmsa_cpu_plan_make(&st->info, &st->opt, p, plan);
}

/// Checks every sequence's lengths against the maxima the plan was made for
/// (FMSA_ERR_INTERNAL if validation let an inconsistent problem through).
fmsa_status fmsa_cpu_check_sequences(const fmsa_problem *p);

/// 64-byte aligned host allocation (NULL on failure); bytes == 0 still
/// returns a unique pointer.  Free with fmsa_cpu_aligned_free.
void *fmsa_cpu_aligned_alloc(size_t bytes);
/// Frees what fmsa_cpu_aligned_alloc returned (NULL is allowed).
void fmsa_cpu_aligned_free(void *ptr);

/// A 64-byte aligned buffer of `bytes` for one pass: the context's arena when
/// it is free (a = NULL: none), grown if needed, else a fresh allocation.
/// NULL when out of memory.  Return it with fmsa_cpu_arena_give.
void *fmsa_cpu_arena_take(fmsa_cpu_arena *a, size_t bytes);
/// Ends the pass's use of buf (the arena's: kept; its own: freed).
void fmsa_cpu_arena_give(fmsa_cpu_arena *a, void *buf);
/// Frees the arena's buffer (context destroy; no pass may hold it).
void fmsa_cpu_arena_release(fmsa_cpu_arena *a);

/// Work lists a pass may take with its buffers (items, packing state, schedule, turns).
#define FMSA_CPU_PASS_LISTS 4

/// One pass's buffers, taken from the arena in one piece (fmsa_cpu_arena_take):
/// per-thread scratch (nthreads x plan scratch_bytes), one chunk's panels,
/// then n_lists work lists of list_bytes[i] bytes, each 64-byte aligned.
typedef struct fmsa_cpu_pass_buffers {
    char *base;     ///< what fmsa_cpu_arena_give takes back
    char *scratch;  ///< thread t's tiles at scratch + t * scratch_bytes
    float *panels;  ///< chunk_slots x slot_floats
    void *lists[FMSA_CPU_PASS_LISTS]; ///< the work lists
} fmsa_cpu_pass_buffers;

/// Takes the buffers of a pass (`pass` names it in the out-of-memory message);
/// poison (FLASHMSA_CPU_POISON, the test suites) fills them with 0xff bytes,
/// NaN floats, so a result read from memory the pass never wrote fails.
fmsa_status fmsa_cpu_pass_buffers_take(fmsa_cpu_arena *a, int poison, const char *pass,
                                       int nthreads, const fmsa_cpu_plan *pl, int n_lists,
                                       const size_t *list_bytes, fmsa_cpu_pass_buffers *out);

/// The forward pass (cpu_forward.c); state is the context's fmsa_cpu_state.
fmsa_status fmsa_cpu_forward(void *state, const fmsa_problem *p, void *workspace,
                             size_t workspace_bytes, void *stream);
/// The backward pass (cpu_backward.c); state is the context's fmsa_cpu_state.
fmsa_status fmsa_cpu_backward(void *state, const fmsa_problem *p, void *workspace,
                              size_t workspace_bytes, void *stream);

/// fmsa_merge_states on host memory (cpu_merge.c).
fmsa_status fmsa_cpu_merge(void *state, const fmsa_merge_problem *mp, void *stream);

/// The ring's elementwise op and device copy on host memory (cpu_accumulate.c).
fmsa_status fmsa_cpu_accumulate(void *state, const fmsa_accumulate_problem *ap, void *stream);
fmsa_status fmsa_cpu_copy_device(void *state, void *dst, size_t dst_offset, const void *src,
                                 size_t src_offset, size_t bytes, void *stream);

/// Head dim of the rows of view v of p: Dv (head_dim_v) for V, O, dO and dV,
/// D for Q, K, dQ and dK, so packing and row I/O follow the view they read.
static inline int64_t fmsa_cpu_view_dim(const fmsa_problem *p, const fmsa_view4 *v) {
    return (v == &p->v || v == &p->o || v == &p->dout || v == &p->dv) ? p->head_dim_v
                                                                          : p->head_dim;
}

/// Sink logit t_h of query head h in base 2 (t_h * log2 e), -inf without sinks.
static inline float fmsa_cpu_sink2(const fmsa_problem *p, int64_t h) {
    if (!p->has_sinks) return -INFINITY;
    return ((const float *)fmsa_viewn_host(&p->sinks))[h * p->sinks.s0] * 1.4426950408889634f;
}

/// The state a query row of head h starts from: the sink's (m = t_h log2 e,
/// l = 1, acc = 0: one value-less softmax term) when with_sink, else empty
/// (m = -inf, l = 0).  Split-KV items start empty and the merge starts from
/// the sink, so the sink is counted once per row.
static inline void fmsa_cpu_softmax_start(const fmsa_problem *p, int with_sink, int64_t h,
                                          float *m, float *l) {
    const float t2 = with_sink ? fmsa_cpu_sink2(p, h) : -INFINITY;
    *m = t2;
    *l = t2 == -INFINITY ? 0.0f : 1.0f;
}

/// Threads a parallel region started now may use (1 without OpenMP).
static inline int fmsa_cpu_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif /* _OPENMP */
}

/// This thread's index within the current team (0 without OpenMP).
static inline int fmsa_cpu_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif /* _OPENMP */
}

/// Threads of the current team (1 without OpenMP or outside a parallel region).
static inline int fmsa_cpu_team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif /* _OPENMP */
}

/// Rounds bytes up to the 64-byte cache line, so carved tiles never share one.
static inline size_t fmsa_cpu_round64(size_t bytes) { return (bytes + 63u) & ~(size_t)63u; }

/// ceil(a / b) for a >= 0, b > 0.
static inline int64_t fmsa_cpu_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif /* FMSA_CPU_INTERNAL_H */
