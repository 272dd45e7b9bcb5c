/*
 * The one variant decision of the CPU backend: a pure function of (device,
 * options read at context creation, problem), in named steps: the tiles and
 * product variant (cpu_plan_tiles), that variant's sizes (cpu_plan_sizes),
 * the dQ owner (cpu_bwd_dq_owner) and split-KV (cpu_fwd_splits).  supports,
 * workspace_size, forward and backward all call it, so the workspace a caller
 * was told to allocate is exactly the one the pass carves up.
 *
 * Workspace (caller-owned, fp32):
 *   forward, num_splits == 1 : nothing (0 bytes)
 *   forward, num_splits  > 1 : partial states, one record of (m, l, acc[Dv]) per
 *                              (sequence b, query head h, row i < seqlen_q, split s),
 *                              record index ((b * Hq + h) * seqlen_q + i) * splits + s
 *   backward                 : D_i = rowsum(dO_i * O_i) - dlse_i, one float per q row,
 *                              indexed like lse: (q_batch * Hq + h) * total_q + q_row;
 *                              nothing on bf16 products (their D is in the panels);
 *                              with dsink then (64-byte aligned, at dsink_offset) one
 *                              double per (b, h, query tile): that tile's share of dsink_h
 * Per-thread scratch tiles (Q, S, accumulators) and the packed K/V panels
 * (cpu_pack.h) are not in the workspace: they are malloc'ed at the start of
 * each call, so the workspace size does not depend on OMP_NUM_THREADS.
 *
 * Packed panels of one (sequence, kv head) slot, fp32, tiles_k key tiles:
 *   forward  : Kᵀ tiles [tiles_k][D][Bc] | V rows [tiles_k * Bc][Dv]
 *   backward : Kᵀ tiles | Vᵀ tiles ([Dv][Bc]) | K rows, then per query head of the
 *              group Q rows [tiles_q * Br][D], dO rows [tiles_q * Br][Dv] and lse2,
 *              delta [tiles_q * Br]
 *              (K, Q and dO rows only where fmsa_cpu_bwd_packs_rows: fp32
 *              inputs are read in place);
 *              with dq_parts > 0 then dQ partials [parts][group][tiles_q * Br][D]
 *              and their written-flags [parts][group][tiles_q]
 *   bf16 products: cpu_forward_b16.c / cpu_backward_b16.c (bf16 panels), the
 *              backward's dQ partials likewise after them, rows of D rounded to 16
 */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "common/error.h"
#include "backends/cpu/cpu_pack.h"
#include "common/planner.h"

/// A nominal core count given to the split-KV heuristic instead of the real
/// thread count: the number of splits (and so every sum's order) must be a
/// function of the problem's shape only, or results would change with
/// OMP_NUM_THREADS.  32 keeps a typical server socket busy on decode shapes.
#define FMSA_CPU_PLAN_CORES 32

/// Backward with dQ partials (FMSA_CPU_DQ_PARTS): at most this many parts of
/// a slot's key tiles each write their own dQ partials, used only when one
/// chunk of slots (as many as the panel budget holds with their partials)
/// times the parts gives FMSA_CPU_PLAN_CORES work items, a shape-only rule, so
/// results do not change with the thread count.  history: bench/RESULTS.md
#define FMSA_CPU_BWD_DQ_PARTS 8

/// Slots of floats_per_slot floats packed at a time (1..slots): as many as
/// the panel budget holds, then evened out over the chunks that takes, so a
/// pass never ends on a chunk of a few slots whose items leave most threads
/// idle between two barriers (64 slots of 1 MiB made chunks of 63 and 1).
static int64_t cpu_chunk_slots(int64_t floats_per_slot, int64_t slots) {
    int64_t chunk =
        (int64_t)(FMSA_CPU_PANEL_BUDGET / ((size_t)floats_per_slot * sizeof(float) + 1));
    if (chunk < 1) chunk = 1;
    if (slots <= 0) return 1;
    if (chunk > slots) return slots;
    return fmsa_cpu_ceil_div(slots, fmsa_cpu_ceil_div(slots, chunk));
}

/// Floats the dQ partials of `parts` parts add to one slot's panels: the
/// partial rows [parts][group][tiles_q * bm][ld] and their written-flags
/// [parts][group][tiles_q] (fmsa_cpu_dq_partials; ld fmsa_cpu_dq_partial_ld).
static int64_t cpu_dq_partial_floats(const fmsa_problem *p, int64_t parts, int64_t tiles_q,
                                     int bm, int b16) {
    return parts * (p->heads_q / p->heads_kv) * tiles_q *
           ((int64_t)bm * fmsa_cpu_dq_partial_ld(b16, p->head_dim) + 1);
}

/// The one dQ-owner decision of the backward: partials of `parts` parts
/// where they fit and one chunk gives FMSA_CPU_PLAN_CORES items; else one
/// partial every key tile adds into in turn (no recomputation, and a slot's
/// items pipeline behind each other, so a few slots still feed many threads);
/// else (one slot's dQ rows beyond half the panel budget) recomputing S and
/// dP in stage (b).  opt->dq_owner forces one; one it cannot hold in memory is
/// refused.  Sets plan->dq_owner and plan->dq_parts.
static fmsa_status cpu_bwd_dq_owner(const fmsa_problem *p, const fmsa_cpu_options *opt,
                                    fmsa_cpu_plan *plan) {
    const int64_t tiles_k = plan->tiles_k;
    const int64_t parts = tiles_k < FMSA_CPU_BWD_DQ_PARTS ? tiles_k : FMSA_CPU_BWD_DQ_PARTS;
    const double part_bytes =
        (double)cpu_dq_partial_floats(p, 1, plan->tiles_q, plan->block_m, plan->b16) *
        sizeof(float);
    const int fits = parts >= 1 && parts * part_bytes <= (double)(FMSA_CPU_PANEL_BUDGET / 2);
    const int fits_one = tiles_k >= 1 && part_bytes <= (double)(FMSA_CPU_PANEL_BUDGET / 2);
    fmsa_cpu_dq_owner owner = opt->dq_owner;
    if (owner == FMSA_CPU_DQ_AUTO) {
        const int64_t with = plan->slot_floats + cpu_dq_partial_floats(p, parts, plan->tiles_q,
                                                                       plan->block_m, plan->b16);
        if (fits && cpu_chunk_slots(with, p->batch * p->heads_kv) * parts >= FMSA_CPU_PLAN_CORES)
            owner = FMSA_CPU_DQ_PARTS;
        else
            owner = fits_one ? FMSA_CPU_DQ_ORDERED : FMSA_CPU_DQ_RECOMPUTE;
    } else if (owner != FMSA_CPU_DQ_RECOMPUTE && tiles_k > 0 &&
               !(owner == FMSA_CPU_DQ_PARTS ? fits : fits_one)) {
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "FLASHMSA_CPU_BWD=%s: the dQ partials of one slot (%.0f MiB) exceed "
                         "half the CPU panel budget",
                         owner == FMSA_CPU_DQ_PARTS ? "parts" : "ordered",
                         (owner == FMSA_CPU_DQ_PARTS ? parts : 1) * part_bytes / 1048576.0);
    }
    if (tiles_k == 0) owner = FMSA_CPU_DQ_RECOMPUTE; /* no key tile, no partial */
    plan->dq_owner = owner;
    plan->dq_parts = owner == FMSA_CPU_DQ_PARTS ? parts : owner == FMSA_CPU_DQ_ORDERED ? 1 : 0;
    return FMSA_SUCCESS;
}

/// Bytes of one thread's fp32 tiles for block sizes (bm, bn) and head dims D
/// (Q, K) and Dv (V, O), each tile rounded to a cache line (K and V live in
/// the shared panels).  cpu_forward.c and cpu_backward.c carve the same.
static size_t cpu_scratch_bytes(fmsa_pass pass, int bm, int bn, int64_t D, int64_t Dv) {
    const size_t row_tile = fmsa_cpu_round64((size_t)bm * (size_t)D * sizeof(float));
    const size_t acc_tile = fmsa_cpu_round64((size_t)bm * (size_t)Dv * sizeof(float));
    const size_t key_tile = fmsa_cpu_round64((size_t)bn * (size_t)D * sizeof(float));
    const size_t val_tile = fmsa_cpu_round64((size_t)bn * (size_t)Dv * sizeof(float));
    const size_t score = fmsa_cpu_round64((size_t)bm * (size_t)bn * sizeof(float));
    const size_t vec = fmsa_cpu_round64((size_t)bm * sizeof(float));
    if (pass == FMSA_PASS_FORWARD) /* q, acc | s | m, l */
        return row_tile + acc_tile + score + 2 * vec;
    /* dK/dV stage: dk, dv | s, dp, g;  dQ stage: dq | s, dp, g  (the larger wins) */
    return (key_tile + val_tile > row_tile ? key_tile + val_tile : row_tile) + 3 * score;
}

/// Floats of one slot's packed panels (layout in the header comment).
static int64_t cpu_slot_floats(const fmsa_problem *p, int bm, int bn, int64_t tiles_q,
                               int64_t tiles_k) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, keys = tiles_k * bn, rows = tiles_q * bm;
    const int64_t copies = fmsa_cpu_bwd_packs_rows(p); /* K, Q and dO rows (else in place) */
    if (p->pass == FMSA_PASS_FORWARD) return keys * (D + Dv);
    return keys * ((1 + copies) * D + Dv) +
           (p->heads_q / p->heads_kv) * (copies * rows * (D + Dv) + 2 * rows);
}

/// Per-thread scratch and slot panel sizes of the plan's product variant:
/// the fp32-staged pass (this file's layouts) or the bf16-product twin
/// (cpu_forward_b16.c, cpu_backward_b16.c, whose layouts they are).
static void cpu_plan_sizes(const fmsa_problem *p, fmsa_cpu_plan *plan) {
    const int bm = plan->block_m, bn = plan->block_n;
    if (!plan->b16) {
        plan->scratch_bytes = cpu_scratch_bytes(p->pass, bm, bn, p->head_dim, p->head_dim_v);
        plan->slot_floats = cpu_slot_floats(p, bm, bn, plan->tiles_q, plan->tiles_k);
    } else if (p->pass == FMSA_PASS_FORWARD) {
        plan->scratch_bytes = fmsa_cpu_b16_carve(NULL, bm, bn, p->head_dim, p->head_dim_v, NULL);
        plan->slot_floats =
            fmsa_cpu_b16_slot_floats(p->head_dim, p->head_dim_v, bn, plan->tiles_k);
    } else {
        plan->scratch_bytes = fmsa_cpu_b16_bwd_scratch_bytes(p, bm, bn);
        plan->slot_floats = fmsa_cpu_b16_bwd_slot_floats(p, bm, bn, plan->tiles_q, plan->tiles_k);
    }
}

/// opt->tiles (FLASHMSA_CPU_TILES) for this pass, checked against the path
/// the planner chose: multiples of 8 in [8, 256], and of 16 x 32 on the
/// bf16-product path, whose key tile may reach 512; anything else is refused,
/// never adjusted.  Unset: the planner's tiles stay.
static fmsa_status cpu_tiles_override(const fmsa_cpu_options *opt, fmsa_pass pass, int b16,
                                      int *bm, int *bn) {
    const char *key = pass == FMSA_PASS_FORWARD ? "fwd=" : "bwd=";
    const int m = opt->tiles[pass][0], n = opt->tiles[pass][1];
    if (m == 0 && n == 0) return FMSA_SUCCESS;
    if (m < 8 || n < 8 || m > FMSA_CPU_MAX_BLOCK_M || n > (b16 ? 512 : 256) || m % 8 || n % 8 ||
        (b16 && (m % 16 || n % 32)))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "FLASHMSA_CPU_TILES: %s%dx%d is not a tile of this path (multiples of %s "
                         "in [8, 256]%s)", key, m, n, b16 ? "16 x 32" : "8",
                         b16 ? ", keys up to 512" : "");
    *bm = m;
    *bn = n;
    fmsa_log(FMSA_LOG_DEBUG, "cpu: FLASHMSA_CPU_TILES sets the %s tiles to %d x %d",
             pass == FMSA_PASS_FORWARD ? "forward" : "backward", m, n);
    return FMSA_SUCCESS;
}

/// Tiles and the product variant: the planner's row (its dtypes say whether
/// it is a bf16-product row), then opt's tile override.
static fmsa_status cpu_plan_tiles(const fmsa_device_info *dev, const fmsa_cpu_options *opt,
                                  const fmsa_problem *p, fmsa_cpu_plan *plan) {
    fmsa_plan_request req;
    fmsa_tile_plan tiles;
    /* bf16 inputs may run on bf16 products where the kernel path has them:
     * the planner then chooses between its bf16-product rows and the fp32-
     * staged ones.  fp16 never asks (the rows serve bf16 only): rounding fp16
     * Q/K to bf16 would lose bits the naive fp16 implementation keeps. */
    fmsa_plan_request_from_problem(p, opt->kern->gemm_b16 ? FMSA_PLAN_CAP_BF16_MMA : 0u, &req);
    /* the rows cost one head dim: the larger of D and Dv bounds every tile */
    if (p->head_dim_v > req.head_dim) req.head_dim = p->head_dim_v;
    FMSA_TRY(fmsa_plan_tiles(dev, &req, &tiles));
    if (tiles.block_m <= 0 || tiles.block_n <= 0 || tiles.block_m > FMSA_CPU_MAX_BLOCK_M)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cpu: planner row %s gave tiles %d x %d",
                         tiles.table_row ? tiles.table_row : "?", tiles.block_m, tiles.block_n);
    plan->b16 = tiles.dtypes == FMSA_PLAN_DTYPES_BF16_MMA;
    if (plan->b16 && (tiles.block_m % 16 != 0 || tiles.block_n % 32 != 0))
        return fmsa_fail(FMSA_ERR_INTERNAL,
                         "cpu: planner row %s gave bf16-product tiles %d x %d (need multiples "
                         "of 16 x 32)", tiles.table_row ? tiles.table_row : "?", tiles.block_m,
                         tiles.block_n);
    FMSA_TRY(cpu_tiles_override(opt, p->pass, plan->b16, &tiles.block_m, &tiles.block_n));
    fmsa_log(FMSA_LOG_DEBUG, "cpu: %s plan from row %s: %d x %d on %s kernels%s",
             p->pass == FMSA_PASS_FORWARD ? "forward" : "backward",
             tiles.table_row ? tiles.table_row : "?", tiles.block_m, tiles.block_n,
             opt->kern->name, plan->b16 ? " (bf16 products)" : "");
    plan->block_m = tiles.block_m;
    plan->block_n = tiles.block_n;
    plan->tiles_q = fmsa_cpu_ceil_div(p->seqlen_q, tiles.block_m);
    plan->tiles_k = fmsa_cpu_ceil_div(p->seqlen_k, tiles.block_n);
    return FMSA_SUCCESS;
}

/// Forward split-KV: whole key tiles per split, splits the rounding left
/// empty dropped, and the workspace of their partial states.
static fmsa_status cpu_fwd_splits(const fmsa_device_info *dev, const fmsa_problem *p,
                                  fmsa_cpu_plan *plan) {
    int64_t splits = 1, n;
    if (p->batch > 0 && p->heads_q > 0 && plan->tiles_k > 1)
        splits = fmsa_plan_num_splits(dev, p->batch * p->heads_q, p->seqlen_q, p->seqlen_k,
                                      plan->block_m, plan->block_n);
    if (splits > plan->tiles_k) splits = plan->tiles_k;
    if (splits > 1) {
        const int64_t tiles_per_split = fmsa_cpu_ceil_div(plan->tiles_k, splits);
        plan->num_splits = fmsa_cpu_ceil_div(plan->tiles_k, tiles_per_split);
        plan->split_keys = tiles_per_split * plan->block_n;
    }
    if (plan->num_splits <= 1) return FMSA_SUCCESS;
    /* records of (m, l, acc[D]) per (b, h, row, split): the shape is bounded
     * by what validation accepted, but a broadcast q can make the product of
     * its extents overflow */
    if (__builtin_mul_overflow(p->batch, p->heads_q, &n) ||
        __builtin_mul_overflow(n, p->seqlen_q, &n) ||
        __builtin_mul_overflow(n, plan->num_splits, &n) ||
        __builtin_mul_overflow(n, p->head_dim_v + 2, &n) ||
        __builtin_mul_overflow(n, (int64_t)sizeof(float), &n) || (uint64_t)n > SIZE_MAX)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "cpu: split-KV workspace of batch %lld x heads %lld x seqlen_q "
                         "%lld x %lld splits overflows", (long long)p->batch,
                         (long long)p->heads_q, (long long)p->seqlen_q,
                         (long long)plan->num_splits);
    plan->workspace_bytes = (size_t)n;
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cpu_plan_make(const fmsa_device_info *dev, const fmsa_cpu_options *opt,
                               const fmsa_problem *p, fmsa_cpu_plan *plan) {
    fmsa_device_info nominal = *dev;
    const int64_t D = p->head_dim, Dv = p->head_dim_v;

    if (p->is_paged && p->pass == FMSA_PASS_BACKWARD)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cpu: paged KV (block_table) in the backward pass is not supported by "
                         "the CPU backend");
    if (D < 1 || D > FMSA_HEAD_DIM_MAX || Dv < 1 || Dv > FMSA_HEAD_DIM_MAX)
        /* validation's limit; row buffers are sized by it */
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cpu: head dims D %lld, Dv %lld outside [1, %d] are not supported by "
                         "the CPU backend", (long long)D, (long long)Dv, FMSA_HEAD_DIM_MAX);
    memset(plan, 0, sizeof *plan);
    plan->kern = opt->kern;
    nominal.multiprocessors = FMSA_CPU_PLAN_CORES;
    FMSA_TRY(cpu_plan_tiles(&nominal, opt, p, plan));
    plan->num_splits = 1;
    plan->split_keys = p->seqlen_k;
    cpu_plan_sizes(p, plan);
    plan->slots = p->batch * p->heads_kv;
    if (p->pass == FMSA_PASS_FORWARD) {
        plan->chunk_slots = cpu_chunk_slots(plan->slot_floats, plan->slots);
        return cpu_fwd_splits(&nominal, p, plan);
    }
    FMSA_TRY(cpu_bwd_dq_owner(p, opt, plan));
    plan->slot_floats +=
        cpu_dq_partial_floats(p, plan->dq_parts, plan->tiles_q, plan->block_m, plan->b16);
    plan->chunk_slots = cpu_chunk_slots(plan->slot_floats, plan->slots);
    fmsa_log(FMSA_LOG_DEBUG, "cpu: backward owns dQ by %s (%lld slots per chunk)",
             plan->dq_owner == FMSA_CPU_DQ_ORDERED ? "one partial added in key tile order"
             : plan->dq_owner == FMSA_CPU_DQ_PARTS ? "partials"
                                                   : "recomputing S and dP",
             (long long)plan->chunk_slots);
    /* delta = rowsum(dO * O) per query row (cpu_backward.c's preprocess); the
     * bf16 products take delta through their own product into the slot panels
     * (cpu_backward_b16.c) and need no workspace */
    if (!plan->b16) {
        const int64_t q_batches = p->is_varlen ? 1 : p->batch;
        plan->workspace_bytes = (size_t)(q_batches * p->heads_q * p->total_q) * sizeof(float);
    }
    /* dsink: one fp64 partial per (sequence, query head, query tile), written
     * by the tile's pack job and summed in a fixed order after the pass; kept
     * for every backward with sinks, since the size may not depend on dsink
     * (fmsa_workspace_size does not see it) */
    if (p->has_sinks) {
        plan->dsink_offset = fmsa_cpu_round64(plan->workspace_bytes);
        plan->workspace_bytes = plan->dsink_offset + (size_t)(p->batch * p->heads_q *
                                                              plan->tiles_q) * sizeof(double);
    }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cpu_check_sequences(const fmsa_problem *p) {
    for (int64_t b = 0; b < p->batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        if (s.sq < 0 || s.sk < 0 || s.sq > p->seqlen_q || s.sk > p->seqlen_k)
            return fmsa_fail(FMSA_ERR_INTERNAL,
                             "cpu: sequence %lld has %lld queries / %lld keys, outside the "
                             "validated maxima %lld / %lld",
                             (long long)b, (long long)s.sq, (long long)s.sk,
                             (long long)p->seqlen_q, (long long)p->seqlen_k);
    }
    return FMSA_SUCCESS;
}
