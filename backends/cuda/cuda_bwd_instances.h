/*
 * The CUDA backward's compiled instances and the host-side arithmetic that
 * goes with them: which instance serves a problem, the three launch grids and
 * the workspace layout.  Plain host C (no CUDA): the host backend includes it
 * and launches the kernels by the names listed here.
 *
 * Three stages, launched in this order on one stream:
 *   pre   D_i = rowsum(dO * O) (- dlse_i) into dsum (over head_dim_v in the _V
 *         rows' fmsa_cuda_bwd_pre_dv_*); zeroes dq_accum and the
 *         deterministic mode's counters.  head_dim / 8 lanes (a power of two,
 *         at most 32) per (row, query head).
 *   main  one block per (key tile, kv head, sequence): dK, dV in
 *         registers over every query head of its kv head, dQ into dq_accum.
 *   post  dq = dq_accum * softmax_scale in the dtype.  Lanes as in pre.
 *   dsink (only when dsink is requested) one block per query head:
 *         dsink_h = -sum_i exp(t_h - lse_i) D_i over every row, fixed order.
 */
#ifndef FMSA_CUDA_BWD_INSTANCES_H
#define FMSA_CUDA_BWD_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#include "backends/cuda/cuda_params.h"
#include "flashmsa/flashmsa.h"

/*
 * X(dt, BF16, D, BM, BN, WK, STAGES, OPT): dtype name, 1 for bf16, head dim,
 * query rows per step, keys per block, warps along the keys in S^T (of
 * FMSA_CUDA_BWD_WARPS; the rest split the query rows), Q/dO buffers (2 = the
 * next query tile loads while this one computes), options: bit 0 counts the
 * step's head and query tile instead of dividing them out of the step index;
 * bit 1 adds dQ on sm_90 by one vector reduction per lane and n8 tile without
 * the divergent even/odd branch; bit 2 = dQ warps
 * 4 x 2 instead of 2 x 4; bit 6 computes dQ between dV and dK; bit 7 adds
 * dQ by v2 instead of v4 reductions; bit 8 turns on dQ's bulk reductions
 * through a staging tile (sm_90, D <= 128; FMSA_CUDA_BWD_BULK_DQ for all),
 * bit 9 keeps them off; timing-only ablations for the
 * development harness (wrong results): bit 3 computes dQ but adds none of
 * it, bit 4 leaves dQ out, bit 5 takes P = S without the exponential, bit 10
 * adds values at hand without dQ's products (bits 11 and 12, dQ's
 * reductions deferred into the next step and lean loads, measured 0.96x and
 * 0.99x and removed, NOTES_BWD.md call 5); bit 13 keeps dq_accum in 16 x 8
 * tiles in the accumulators' lane order (one contiguous 512-byte reduction
 * per warp and n8 tile; rows of whole 16-row groups, else the row layout),
 * with its own postprocess; bit 15 computes tiles cut by a causal diagonal,
 * a window or a sequence end (without mask, ALiBi, softcap) as full ones
 * plus one visibility select per element, each test one integer compare
 * against per-step bounds (bit 14, the same with per-element 64-bit index
 * math, measured slower and removed); bit 16 orders the blocks of a causal /
 * windowed problem so that the grid ends on its short blocks (not in the
 * deterministic mode); bit 17 drops the block barrier between the P^T / dS^T
 * stores and their readers: a warp's own query blocks of dV / dK start from
 * registers, the other blocks wait at a named barrier of the warps that
 * share its keys, dQ at one of the warps that wrote its rows (bit 18, dQ
 * before the other blocks, measured 0.95-0.99x at d128 and removed).  Rows of one D are
 * listed preferred first; the pick takes the first whose shared memory fits
 * the device (the 1-stage rows are for the A100's 164 KiB, as is d64's
 * 64-row tile).  A row may come
 * twice, with and without bit 15: the pick takes the bit-15 kernel for causal
 * and windowed problems and the other one for the rest (d64: bit 15's code
 * costs registers, 60 B of spills against 16 B, 2-3% without a mask).
 */
#define FMSA_CUDA_BWD_INSTANCES(X)            \
    X(bf16, 1, 64, 128, 128, 4, 2, 106499)    \
    X(bf16, 1, 64, 128, 128, 4, 2, 8195)      \
    X(bf16, 1, 64, 64, 128, 4, 2, 3)          \
    X(bf16, 1, 96, 64, 128, 4, 2, 3)          \
    X(bf16, 1, 128, 64, 128, 4, 2, 237571)    \
    X(bf16, 1, 128, 64, 128, 4, 1, 3)         \
    X(bf16, 1, 192, 64, 64, 2, 2, 3)          \
    X(bf16, 1, 192, 64, 64, 2, 1, 3)          \
    X(bf16, 1, 256, 64, 64, 2, 2, 237571)     \
    X(bf16, 1, 256, 64, 64, 2, 1, 3)          \
    X(f16, 0, 64, 128, 128, 4, 2, 106499)     \
    X(f16, 0, 64, 128, 128, 4, 2, 8195)       \
    X(f16, 0, 64, 64, 128, 4, 2, 3)           \
    X(f16, 0, 96, 64, 128, 4, 2, 3)           \
    X(f16, 0, 128, 64, 128, 4, 2, 237571)     \
    X(f16, 0, 128, 64, 128, 4, 1, 3)          \
    X(f16, 0, 192, 64, 64, 2, 2, 3)           \
    X(f16, 0, 192, 64, 64, 2, 1, 3)           \
    X(f16, 0, 256, 64, 64, 2, 2, 237571)      \
    X(f16, 0, 256, 64, 64, 2, 1, 3)

/*
 * X(dt, BF16, D, DV, BM, BN, WK, STAGES, OPT): rows with a value head dim of
 * their own (V, dO, dV of DV columns; S^T, dK, dQ over D).  They bound V's
 * and dO's columns by head_dim_v, so they serve any head_dim <= D with any
 * head_dim_v <= DV (padded in the kernel), while the square rows above serve
 * head_dim_v == head_dim only (their code predates DV and is unchanged).  A
 * problem takes the smallest D + DV that covers it and fits (a tie goes to
 * the earlier row, so square problems keep the square rows):
 *   (192, 128)  DeepSeek's MLA prefill; every head_dim <= 192 with head_dim_v
 *               <= 128, e.g. (136, 120), (128, 64)
 *   (64, 256)   head_dim <= 64 with head_dim_v up to 256
 *   (256, 256)  the rest of head_dim, head_dim_v <= 256 (e.g. (256, 64)),
 *               one stage so that it fits the A100 as well as the H100/H200
 *   (512, 512)  head dims in (256, 512] (Gemma 4's D = 512, (264, 264), ...)
 *   (576, 512)  head_dim in (512, 576] with head_dim_v <= 512 (DeepSeek MLA's
 *               (576, 512)); both: 32 keys per block (2 x 4 warps of 16 keys
 *               x 16 queries), so dK and dV (32 x 1088 fp32 at 576) take 136
 *               registers a thread; dQ in passes of 16 columns a warp; one
 *               stage, 209,536 / 221,824 bytes: sm_90's opt-in 227 KiB only
 *               (the A100 refuses them by their shared memory)
 * The first three fit sm_80's 163 KiB.  head_dim_v above 512 (a square 576)
 * has no backward instance (K, V, Q, dO of 576 columns at 32 x 64 tiles
 * need 233,472 bytes) and is refused by name.
 */
#define FMSA_CUDA_BWD_INSTANCES_V(X)          \
    X(bf16, 1, 192, 128, 64, 64, 2, 2, 3)     \
    X(bf16, 1, 64, 256, 64, 64, 2, 2, 3)      \
    X(bf16, 1, 256, 256, 64, 64, 2, 1, 3)     \
    X(bf16, 1, 512, 512, 64, 32, 2, 1, 3)     \
    X(bf16, 1, 576, 512, 64, 32, 2, 1, 3)     \
    X(f16, 0, 192, 128, 64, 64, 2, 2, 3)      \
    X(f16, 0, 64, 256, 64, 64, 2, 2, 3)       \
    X(f16, 0, 256, 256, 64, 64, 2, 1, 3)      \
    X(f16, 0, 512, 512, 64, 32, 2, 1, 3)      \
    X(f16, 0, 576, 512, 64, 32, 2, 1, 3)

/// Alternative tilings compiled into the development harness only, for timing
/// against the rows above (NOTES_BWD.md, "Session of 2026-12-03 afternoon"):
/// OPT bit 17 on the d64 rows' bits (o139267 = o8195 + 17, o237571 =
/// o106499 + 17), and the d128 / d256 rows' previous bits (o106499).
#define FMSA_CUDA_BWD_VARIANTS(X)             \
    X(bf16, 1, 64, 128, 128, 4, 2, 139267)    \
    X(bf16, 1, 64, 128, 128, 4, 2, 237571)    \
    X(bf16, 1, 128, 64, 128, 4, 2, 106499)    \
    X(bf16, 1, 256, 64, 64, 2, 2, 106499)

#define FMSA_CUDA_BWD_WARPS 8 ///< warps per block of the main stage
#define FMSA_CUDA_BWD_MAX_DIM 576 ///< the largest D of the lists (above: refused)
#define FMSA_CUDA_BWD_MAX_DIM_V 512 ///< the largest DV of the lists (above: refused)

#define FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT) \
    fmsa_cuda_bwd_main_##dt##_d##D##_m##BM##_n##BN##_k##WK##_p##ST##_o##OPT
#define FMSA_CUDA_BWD_MAIN_SYM_V(dt, D, DV, BM, BN, WK, ST, OPT) \
    fmsa_cuda_bwd_main_##dt##_d##D##v##DV##_m##BM##_n##BN##_k##WK##_p##ST##_o##OPT
#define FMSA_CUDA_BWD_STR_(x) #x
#define FMSA_CUDA_BWD_STR(x) FMSA_CUDA_BWD_STR_(x)

/// Dynamic shared memory of a main instance: K, V, STAGES x (Q, dO), P^T and
/// dS^T (rows padded by 8 elements against bank conflicts; V and dO rows of
/// DV), lse, D, a ticket; then, for D <= 128, the fp32 dQ staging tile of the
/// bulk reductions (BM x (D + 8) floats at a 128-byte boundary; unused on sm_80).
#define FMSA_CUDA_BWD_SMEM_BASE_V(D, DV, BM, BN, ST)                                          \
    (((2 * ((BN) * ((D) + 8) + (BN) * ((DV) + 8) + (ST) * (BM) * ((D) + 8) +                  \
            (ST) * (BM) * ((DV) + 8) + 2 * (BN) * ((BM) + 8)) +                                \
       8 * (ST) * (BM) + 16) + 127) / 128 * 128)
#define FMSA_CUDA_BWD_SMEM_BASE(D, BM, BN, ST) FMSA_CUDA_BWD_SMEM_BASE_V(D, D, BM, BN, ST)
/* The bulk path measured 0.98x the register reductions at d128 and 0.85x at
   d64 on the H200 (bench/RESULTS.md, 2026-12-02 call 3): off by default. */
#ifndef FMSA_CUDA_BWD_BULK_DQ
#define FMSA_CUDA_BWD_BULK_DQ 0
#endif /* FMSA_CUDA_BWD_BULK_DQ */
#define FMSA_CUDA_BWD_STAGED(D) ((D) <= 128)
#define FMSA_CUDA_BWD_SMEM(D, BM, BN, ST) FMSA_CUDA_BWD_SMEM_BASE(D, BM, BN, ST)
#define FMSA_CUDA_BWD_SMEM_V(D, DV, BM, BN, ST) FMSA_CUDA_BWD_SMEM_BASE_V(D, DV, BM, BN, ST)
/// What the staging tile adds where the kernels run their sm_90 code (compute capability >= 9).
#define FMSA_CUDA_BWD_SMEM_STAGE_(D, BM) (FMSA_CUDA_BWD_STAGED(D) ? 4 * (BM) * ((D) + 8) : 0)
#define FMSA_CUDA_BWD_SMEM_STAGE(D, BM, OPT)                                       \
    ((((OPT) & 256) || FMSA_CUDA_BWD_BULK_DQ) && !((OPT) & 512) ? FMSA_CUDA_BWD_SMEM_STAGE_(D, BM) : 0)

#define FMSA_CUDA_BWD_AUX_WARPS 8 ///< warps per block of pre and post
#define FMSA_CUDA_BWD_DSINK_THREADS 256 ///< threads of the dsink stage (a power of two)

/// What the backward kernels implement of API v0.2 (common/feature_gate.h's
/// bits; expanded where that header is included): sinks (the main stage reads
/// the forward's lse, which holds them; dsink is its own stage), dlse (in D)
/// a value head dim of its own (FMSA_CUDA_BWD_INSTANCES_V) and head dims
/// above 256 (the (576, 512) rows, where the device's shared memory fits
/// them; the pick refuses by name where it does not).
#define FMSA_CUDA_BWD_FEATURES \
    (FMSA_FEATURE_SINKS | FMSA_FEATURE_DLSE | FMSA_FEATURE_VALUE_DIM | FMSA_FEATURE_LARGE_DIM)

/// Lanes per (row, head) of pre and post (the kernels' fmsa_bwd_aux_lanes):
/// the next power of two of head_dim / 8, at most 32.
static inline int fmsa_cuda_bwd_aux_lanes(int head_dim) {
    int l = 1;
    while (l < 32 && l * 8 < head_dim) l *= 2;
    return l;
}

typedef struct fmsa_cuda_bwd_instance {
    const char *pre, *main, *post; ///< kernel names in the module
    int bf16;                      ///< 1 bf16, 0 f16
    int head_dim;                  ///< D of the instance (serves head_dim <= D)
    int block_m, block_n;          ///< query rows per step, keys per block
    int stages;                    ///< Q/dO buffers
    int threads_main, threads_aux; ///< block sizes
    int smem_main;                 ///< dynamic shared memory of main (bytes) on sm_80 code
    int smem_stage;                ///< bytes main adds on compute capability >= 9 (dQ staging)
    int head_dim_v;                ///< DV of the instance (serves head_dim_v <= DV)
    int own_v;                     ///< 1: serves head_dim_v != head_dim (an _V row)
    int cut_full;                  ///< 1: OPT bit 15 (cut tiles as full ones), for masked problems
    int wg_opt;                    ///< the Hopper rows (fmsa_cuda_bwd_wg_list): the kernel's OPT bits
} fmsa_cuda_bwd_instance;

/// Dynamic shared memory of inst's main kernel on a device of compute capability cc_major.
static inline size_t fmsa_cuda_bwd_smem(const fmsa_cuda_bwd_instance *inst, int cc_major) {
    return (size_t)inst->smem_main + (cc_major >= 9 ? (size_t)inst->smem_stage : 0u);
}

/// The postprocess of a row: OPT bit 13's tiled dQ accumulator has its own.
#define FMSA_CUDA_BWD_POST_NAME(dt, OPT) (((OPT) & 8192) ? "fmsa_cuda_bwd_post_t_" #dt : "fmsa_cuda_bwd_post_" #dt)
#define FMSA_CUDA_BWD_ROW(dt, BF16, D, BM, BN, WK, ST, OPT)                                \
    {"fmsa_cuda_bwd_pre_" #dt, FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT)), \
     FMSA_CUDA_BWD_POST_NAME(dt, OPT), BF16, D, BM, BN, ST, 32 * FMSA_CUDA_BWD_WARPS,                 \
     32 * FMSA_CUDA_BWD_AUX_WARPS, FMSA_CUDA_BWD_SMEM(D, BM, BN, ST), FMSA_CUDA_BWD_SMEM_STAGE(D, BM, OPT), \
     D, 0, ((OPT) & 32768) != 0, 0},
/// A row of FMSA_CUDA_BWD_INSTANCES_V: its own preprocess (D_i over head_dim_v).
#define FMSA_CUDA_BWD_ROW_V(dt, BF16, D, DV, BM, BN, WK, ST, OPT)                              \
    {"fmsa_cuda_bwd_pre_dv_" #dt, FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_MAIN_SYM_V(dt, D, DV, BM, BN, WK, ST, OPT)), \
     "fmsa_cuda_bwd_post_" #dt, BF16, D, BM, BN, ST, 32 * FMSA_CUDA_BWD_WARPS,                 \
     32 * FMSA_CUDA_BWD_AUX_WARPS, FMSA_CUDA_BWD_SMEM_V(D, DV, BM, BN, ST),                    \
     FMSA_CUDA_BWD_SMEM_STAGE(D, BM, OPT), DV, 1, ((OPT) & 32768) != 0, 0},

static const fmsa_cuda_bwd_instance fmsa_cuda_bwd_instance_list[] = {
    FMSA_CUDA_BWD_INSTANCES(FMSA_CUDA_BWD_ROW) FMSA_CUDA_BWD_INSTANCES_V(FMSA_CUDA_BWD_ROW_V)};
#define FMSA_CUDA_BWD_NUM_INSTANCES \
    ((int)(sizeof fmsa_cuda_bwd_instance_list / sizeof fmsa_cuda_bwd_instance_list[0]))

/// The selection rule that the planner's row order (common/plan_tables/cuda_mma.c)
/// encodes; the library picks through the planner, test_cuda_host checks that
/// both agree on every head-dim pair and device, and the dev tools call this.
/// The instance for a dtype and head dims: among the rows with D >= head_dim
/// and DV >= head_dim_v (an _V row where they differ) whose shared memory on
/// a device of compute capability cc_major fits smem_max bytes, the smallest
/// D + DV, the first such row on a tie; NULL where none (f32, a dim not a
/// multiple of 8, past 576 / 512, too little memory).
static inline const fmsa_cuda_bwd_instance *fmsa_cuda_bwd_select(fmsa_dtype dtype, int head_dim,
                                                                 int head_dim_v, size_t smem_max,
                                                                 int cc_major) {
    const fmsa_cuda_bwd_instance *best = NULL;
    int bf16;
    if (dtype == FMSA_DTYPE_BF16) bf16 = 1;
    else if (dtype == FMSA_DTYPE_F16) bf16 = 0;
    else return NULL;
    if (head_dim <= 0 || head_dim % 8 || head_dim_v <= 0 || head_dim_v % 8) return NULL;
    for (int i = 0; i < FMSA_CUDA_BWD_NUM_INSTANCES; ++i) {
        const fmsa_cuda_bwd_instance *c = &fmsa_cuda_bwd_instance_list[i];
        if (c->bf16 != bf16 || c->head_dim < head_dim || c->head_dim_v < head_dim_v ||
            (!c->own_v && head_dim_v != head_dim) || fmsa_cuda_bwd_smem(c, cc_major) > smem_max)
            continue;
        if (!best || c->head_dim + c->head_dim_v < best->head_dim + best->head_dim_v) best = c;
    }
    return best;
}

/// The Hopper main kernels (fmsa_cuda_bwd_wg.cu: d64, d128;
/// fmsa_cuda_bwd_wg256.cu: d256; wgmma, sm_90a only), the instances of the
/// planner's W16 rows: the grid, workspace, preprocess and tiled-accumulator
/// postprocess of the mma.sync row of the same D and tile (d64 m128 n128,
/// d128 m64 n128, d256 m64 n64, all 2-stage).  Shared memory: K, V, 2 x Q,
/// 2 x dO, dS^T (d256: and P^T) in 1024-byte aligned swizzled tiles, lse and
/// D, and 1024 bytes to align the base.
/// X(name, BF16, OPT, D, BM, BN, shared memory bytes)
#define FMSA_CUDA_BWD_WG_SMEM(D, BM) (128 * (D) * 2 * 2 + 4 * (BM) * (D) * 2 + 128 * (BM) * 2 + 4 * (BM) * 4 + 1024)
#define FMSA_CUDA_BWD_WG256_SMEM (64 * 256 * 2 * 2 + 4 * 64 * 256 * 2 + 2 * 64 * 64 * 2 + 4 * 64 * 4 + 1024)
#define FMSA_CUDA_BWD_WG_INSTANCES(X)                                                   \
    X(fmsa_cuda_bwd_wg_bf16_d64, 1, 64, 64, 128, 128, FMSA_CUDA_BWD_WG_SMEM(64, 128))  \
    X(fmsa_cuda_bwd_wg_f16_d64, 0, 64, 64, 128, 128, FMSA_CUDA_BWD_WG_SMEM(64, 128))   \
    X(fmsa_cuda_bwd_wg_bf16_d128, 1, 64, 128, 64, 128, FMSA_CUDA_BWD_WG_SMEM(128, 64)) \
    X(fmsa_cuda_bwd_wg_f16_d128, 0, 64, 128, 64, 128, FMSA_CUDA_BWD_WG_SMEM(128, 64))
#define FMSA_CUDA_BWD_WG256_INSTANCES(X)                                                \
    X(fmsa_cuda_bwd_wg_bf16_d256, 1, 64, 256, 64, 64, FMSA_CUDA_BWD_WG256_SMEM)        \
    X(fmsa_cuda_bwd_wg_f16_d256, 0, 64, 256, 64, 64, FMSA_CUDA_BWD_WG256_SMEM)
/// Development variants (bf16), compiled where the kernels are built with
/// -DFMSA_CUDA_BWD_WG_VARIANTS and run with FLASHMSA_CUDA_WGMMA=o<OPT> in
/// place of the instance of their D: the OPT bits of fmsa_cuda_bwd_wg.cu
/// (o0: the reductions in their own step; o68 a timing-only ablation).
#define FMSA_CUDA_BWD_WG_VARIANT_LIST(X)                                                \
    X(fmsa_cuda_bwd_wg_bf16_d64_o0, 1, 0, 64, 128, 128, FMSA_CUDA_BWD_WG_SMEM(64, 128)) \
    X(fmsa_cuda_bwd_wg_bf16_d64_o68, 1, 68, 64, 128, 128, FMSA_CUDA_BWD_WG_SMEM(64, 128)) \
    X(fmsa_cuda_bwd_wg_bf16_d128_o0, 1, 0, 128, 64, 128, FMSA_CUDA_BWD_WG_SMEM(128, 64)) \
    X(fmsa_cuda_bwd_wg_bf16_d128_o68, 1, 68, 128, 64, 128, FMSA_CUDA_BWD_WG_SMEM(128, 64))
#define FMSA_CUDA_BWD_WG256_VARIANT_LIST(X)                                             \
    X(fmsa_cuda_bwd_wg_bf16_d256_o0, 1, 0, 256, 64, 64, FMSA_CUDA_BWD_WG256_SMEM)       \
    X(fmsa_cuda_bwd_wg_bf16_d256_o68, 1, 68, 256, 64, 64, FMSA_CUDA_BWD_WG256_SMEM)
#define FMSA_CUDA_BWD_WG_INSTANCE(name, BF16, OPT, D, BM, BN, SMEM)                               \
    {BF16 ? "fmsa_cuda_bwd_pre_bf16" : "fmsa_cuda_bwd_pre_f16", #name,                            \
     BF16 ? "fmsa_cuda_bwd_post_t_bf16" : "fmsa_cuda_bwd_post_t_f16", BF16, D, BM, BN, 2,          \
     32 * FMSA_CUDA_BWD_WARPS, 32 * FMSA_CUDA_BWD_AUX_WARPS, SMEM, 0, D, 0, 0, OPT},
static const fmsa_cuda_bwd_instance fmsa_cuda_bwd_wg_list[] = {
    FMSA_CUDA_BWD_WG_INSTANCES(FMSA_CUDA_BWD_WG_INSTANCE) FMSA_CUDA_BWD_WG256_INSTANCES(FMSA_CUDA_BWD_WG_INSTANCE)};
static const fmsa_cuda_bwd_instance fmsa_cuda_bwd_wg_variants[] = {
    FMSA_CUDA_BWD_WG_VARIANT_LIST(FMSA_CUDA_BWD_WG_INSTANCE)
        FMSA_CUDA_BWD_WG256_VARIANT_LIST(FMSA_CUDA_BWD_WG_INSTANCE)};
#define FMSA_CUDA_BWD_WG_NUM ((int)(sizeof fmsa_cuda_bwd_wg_list / sizeof fmsa_cuda_bwd_wg_list[0]))

/// 1 where the device runs the Hopper kernels (wgmma != 0: cuda_device.c)
/// and the pass p is within what they serve beyond the planner's feature
/// bits (the W16 rows' not_with): head_dim = head_dim_v = the D of an
/// instance exactly (64, 128 or 256; the rows' buckets reach lower), not the
/// deterministic mode, whole 16-row query groups (the tiled dQ
/// accumulator), no seqused_k.  The pick then asks the planner with
/// FMSA_PLAN_CAP_WGMMA, else without it.
static inline int fmsa_cuda_bwd_wg_serves(const fmsa_cuda_bwd_params *p, int wgmma) {
    const fmsa_cuda_fwd_params *f = &p->fwd;
    int dim = 0;
    for (int i = 0; i < FMSA_CUDA_BWD_WG_NUM; ++i) dim |= fmsa_cuda_bwd_wg_list[i].head_dim == f->head_dim;
    return wgmma && dim && f->head_dim_v == f->head_dim && !p->deterministic && f->seqlen_q % 16 == 0 &&
           f->total_q == f->seqlen_q && !f->has_seqused_k;
}

/// The instance inst runs as, on a device whose wgmma setting is wgmma:
/// inst itself, or for a Hopper instance with 2 + N (FLASHMSA_CUDA_WGMMA=oN)
/// development variant N of its dtype and D (NULL where the list has none).
static inline const fmsa_cuda_bwd_instance *fmsa_cuda_bwd_wg_variant(const fmsa_cuda_bwd_instance *inst,
                                                                     int wgmma) {
    int hopper = 0;
    for (int i = 0; i < FMSA_CUDA_BWD_WG_NUM; ++i) hopper |= inst == &fmsa_cuda_bwd_wg_list[i];
    if (wgmma < 2 || !hopper) return inst;
    for (size_t i = 0; i < sizeof fmsa_cuda_bwd_wg_variants / sizeof fmsa_cuda_bwd_wg_variants[0]; ++i)
        if (fmsa_cuda_bwd_wg_variants[i].bf16 == inst->bf16 && fmsa_cuda_bwd_wg_variants[i].head_dim == inst->head_dim &&
            fmsa_cuda_bwd_wg_variants[i].wg_opt == wgmma - 2)
            return &fmsa_cuda_bwd_wg_variants[i];
    return NULL;
}

/// The 16-bit instance of a planner row (common/plan_tables/cuda_mma.c) for
/// dtype: the same dims (head_dim_v FMSA_PLAN_DV_SAME, -1: a square row),
/// tile, stages and shared memory on a device of compute capability
/// cc_major; where the row has a kernel with and one without OPT bit 15, the
/// one whose cut_full is `masked` (1: a causal or windowed problem); NULL
/// where the list has none (f32, or a row without its kernel: a bug the host
/// test test_cuda_plan_rows rules out).
static inline const fmsa_cuda_bwd_instance *fmsa_cuda_bwd_row_instance(
    fmsa_dtype dtype, int head_dim, int head_dim_v, int block_m, int block_n, int stages,
    size_t smem_bytes, int cc_major, int masked) {
    const fmsa_cuda_bwd_instance *first = NULL;
    int bf16;
    if (dtype == FMSA_DTYPE_BF16) bf16 = 1;
    else if (dtype == FMSA_DTYPE_F16) bf16 = 0;
    else return NULL;
    for (int i = 0; i < FMSA_CUDA_BWD_NUM_INSTANCES + FMSA_CUDA_BWD_WG_NUM; ++i) {
        const fmsa_cuda_bwd_instance *c = i < FMSA_CUDA_BWD_NUM_INSTANCES
                                              ? &fmsa_cuda_bwd_instance_list[i]
                                              : &fmsa_cuda_bwd_wg_list[i - FMSA_CUDA_BWD_NUM_INSTANCES];
        if (c->bf16 == bf16 && c->head_dim == head_dim &&
            (c->own_v ? c->head_dim_v == head_dim_v : head_dim_v < 0) &&
            c->block_m == block_m && c->block_n == block_n && c->stages == stages &&
            fmsa_cuda_bwd_smem(c, cc_major) == smem_bytes) {
            if (c->cut_full == masked) return c;
            if (!first) first = c;
        }
    }
    return first;
}

typedef struct fmsa_cuda_bwd_plan {
    const fmsa_cuda_bwd_instance *inst;
    unsigned grid_pre[3], grid_main[3], grid_post[3], grid_dsink[3];
    int dsink;                               ///< 1: the dsink stage runs (4 launches)
    size_t off_dsum, off_dq_accum, off_sems; ///< byte offsets into the workspace
    size_t workspace_bytes;                  ///< total, offsets 256-byte aligned
    int num_sems;
} fmsa_cuda_bwd_plan;

static inline size_t fmsa_cuda_bwd_align256(size_t x) { return (x + 255u) & ~(size_t)255u; }

/// 1 when every 16-bit tensor of the pass is 16-byte aligned with strides of
/// whole 8-element chunks (the kernels move 16 bytes at a time).
static inline int fmsa_cuda_bwd_aligned(const fmsa_cuda_bwd_params *p) {
    const void *ptr[8] = {p->fwd.q, p->fwd.k, p->fwd.v, p->fwd.o, p->dout, p->dq, p->dk, p->dv};
    const long long st[24] = {p->fwd.q_sb, p->fwd.q_ss, p->fwd.q_sh, p->fwd.k_sb, p->fwd.k_ss,
                              p->fwd.k_sh, p->fwd.v_sb, p->fwd.v_ss, p->fwd.v_sh, p->fwd.o_sb,
                              p->fwd.o_ss, p->fwd.o_sh, p->do_sb, p->do_ss, p->do_sh, p->dq_sb,
                              p->dq_ss, p->dq_sh, p->dk_sb, p->dk_ss, p->dk_sh, p->dv_sb,
                              p->dv_ss, p->dv_sh};
    for (int i = 0; i < 8; ++i)
        if ((uintptr_t)ptr[i] % 16u) return 0;
    for (int i = 0; i < 24; ++i)
        if (st[i] % 8) return 0;
    return 1;
}

/// Fills plan for params p (geometry fields set) and instance inst.  Returns
/// 0, or -1 where the kernels cannot serve the problem (paged KV, dims past
/// the instance's, D_v != D on a square row, misaligned tensors): the caller
/// reports FMSA_ERR_NOT_SUPPORTED.
static inline int fmsa_cuda_bwd_plan_make(const fmsa_cuda_bwd_params *p,
                                          const fmsa_cuda_bwd_instance *inst,
                                          fmsa_cuda_bwd_plan *plan) {
    const fmsa_cuda_fwd_params *f = &p->fwd;
    long long rows, row_heads, aux_blocks, ktiles, mtiles;
    size_t off = 0;
    if (!inst || f->is_paged || f->head_dim > inst->head_dim || f->head_dim_v > inst->head_dim_v ||
        (!inst->own_v && f->head_dim_v != f->head_dim))
        return -1;
    if (!fmsa_cuda_bwd_aligned(p)) return -1;
    rows = (long long)(f->is_varlen ? 1 : f->batch) * f->total_q;
    row_heads = rows * f->heads_q;
    {
        const long long per_block = 32LL * FMSA_CUDA_BWD_AUX_WARPS / fmsa_cuda_bwd_aux_lanes(f->head_dim);
        aux_blocks = (row_heads + per_block - 1) / per_block;
    }
    ktiles = (f->seqlen_k + inst->block_n - 1) / inst->block_n;
    mtiles = (f->seqlen_q + inst->block_m - 1) / inst->block_m;
    plan->inst = inst;
    plan->grid_pre[0] = plan->grid_post[0] = (unsigned)(aux_blocks > 0 ? aux_blocks : 1);
    plan->grid_pre[1] = plan->grid_pre[2] = plan->grid_post[1] = plan->grid_post[2] = 1;
    plan->grid_main[0] = (unsigned)(ktiles > 0 ? ktiles : 1);
    plan->grid_main[1] = (unsigned)f->heads_kv;
    plan->grid_main[2] = (unsigned)f->batch;
    plan->dsink = p->dsinks != NULL;
    plan->grid_dsink[0] = (unsigned)f->heads_q;
    plan->grid_dsink[1] = plan->grid_dsink[2] = 1;
    plan->off_dsum = off;
    off = fmsa_cuda_bwd_align256(off + (size_t)row_heads * sizeof(float));
    plan->off_dq_accum = off;
    off = fmsa_cuda_bwd_align256(off + (size_t)row_heads * (size_t)inst->head_dim * sizeof(float));
    plan->off_sems = off;
    plan->num_sems = (int)((long long)f->batch * f->heads_q * mtiles + 1);
    off = fmsa_cuda_bwd_align256(off + (size_t)plan->num_sems * sizeof(int));
    plan->workspace_bytes = off;
    return 0;
}

/// Points p's workspace fields into workspace (device memory of plan->workspace_bytes).
static inline void fmsa_cuda_bwd_plan_bind(const fmsa_cuda_bwd_plan *plan, fmsa_cuda_bwd_params *p,
                                           void *workspace) {
    char *w = (char *)workspace;
    p->dsum = (float *)(w + plan->off_dsum);
    p->dq_accum = (float *)(w + plan->off_dq_accum);
    p->dq_sems = (int *)(w + plan->off_sems);
    p->num_sems = plan->num_sems;
    p->accum_dim = plan->inst->head_dim;
    p->dk_accum = p->dv_accum = NULL; /* dK/dV sum over a kv head's query heads in registers */
}

#endif /* FMSA_CUDA_BWD_INSTANCES_H */
