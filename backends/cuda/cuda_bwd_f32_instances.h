/*
 * The CUDA backward's fp32 instances (3xTF32 on mma.sync m16n8k8,
 * kernels/fmsa_cuda_bwd_f32.cu): the rows, their pick and their kernel names.
 * Plain host C.  The three stages and the workspace are the 16-bit list's
 * (cuda_bwd_instances.h: fmsa_cuda_bwd_plan_make lays out dsum, dq_accum and
 * the deterministic counters for any row); pre and post are the 16-bit ones
 * with fp32 element access (fmsa_cuda_bwd_pre_post.cu: fmsa_cuda_bwd_pre_f32,
 * fmsa_cuda_bwd_post_f32), dsink is the same kernel (it reads lse and dsum
 * only); the main kernels are fmsa_cuda_bwd_f32.cu's.
 */
#ifndef FMSA_CUDA_BWD_F32_INSTANCES_H
#define FMSA_CUDA_BWD_F32_INSTANCES_H

#include <stddef.h>

#include "backends/cuda/cuda_bwd_instances.h"

/*
 * X(D, DV, BM, BN, STAGES): head dim, value head dim, query rows per step,
 * keys per block (16 per warp along the keys, FMSA_CUDA_BWD_WARPS warps), Q/dO
 * buffers.  Every row bounds V and dO by head_dim_v, so a row serves any
 * head_dim <= D with any head_dim_v <= DV; the pick takes the smallest D + DV
 * that fits the device, the first on a tie (the 2-stage d256 row needs sm_90's
 * opt-in 227 KiB, the 1-stage one fits the A100's 163 KiB).  Shared memory:
 * 140,304 / 154,128 / 209,424 / 142,608 bytes.
 */
#define FMSA_CUDA_BWD_F32_INSTANCES(X) \
    X(64, 64, 64, 64, 2)               \
    X(128, 128, 32, 64, 2)             \
    X(256, 256, 32, 32, 2)             \
    X(256, 256, 32, 32, 1)

#define FMSA_CUDA_BWD_F32_MAX_DIM 256 ///< the largest D / DV of the list (above: refused)

#define FMSA_CUDA_BWD_F32_SYM(D, DV, BM, BN, ST) \
    fmsa_cuda_bwd_f32_main_d##D##v##DV##_m##BM##_n##BN##_p##ST

/// Dynamic shared memory of a main instance (fp32 elements, rows padded by 4
/// so that every fragment load of the kernel is conflict-free): K, V,
/// STAGES x (Q, dO), P^T and dS^T, STAGES x (lse, D), a ticket.
#define FMSA_CUDA_BWD_F32_SMEM(D, DV, BM, BN, ST)                                              \
    (4 * ((BN) * ((D) + 4) + (BN) * ((DV) + 4) + (ST) * (BM) * ((D) + 4) +                     \
          (ST) * (BM) * ((DV) + 4) + 2 * (BN) * ((BM) + 4) + 2 * (ST) * (BM) + 4))

#if !defined(__CUDACC__) /* the host's list (designated initializers: C11; the kernels need none of it) */
#define FMSA_CUDA_BWD_F32_ROW(D, DV, BM, BN, ST)                                               \
    {.pre = "fmsa_cuda_bwd_pre_f32",                                                           \
     .main = FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_F32_SYM(D, DV, BM, BN, ST)),                      \
     .post = "fmsa_cuda_bwd_post_f32",                                                         \
     .bf16 = -1,                                                                               \
     .head_dim = D,                                                                            \
     .block_m = BM,                                                                            \
     .block_n = BN,                                                                            \
     .stages = ST,                                                                             \
     .threads_main = 32 * FMSA_CUDA_BWD_WARPS,                                                 \
     .threads_aux = 32 * FMSA_CUDA_BWD_AUX_WARPS,                                              \
     .smem_main = FMSA_CUDA_BWD_F32_SMEM(D, DV, BM, BN, ST),                                   \
     .smem_stage = 0,                                                                          \
     .head_dim_v = DV,                                                                         \
     .own_v = 1},

static const fmsa_cuda_bwd_instance fmsa_cuda_bwd_f32_list[] = {
    FMSA_CUDA_BWD_F32_INSTANCES(FMSA_CUDA_BWD_F32_ROW)};
#define FMSA_CUDA_BWD_F32_NUM ((int)(sizeof fmsa_cuda_bwd_f32_list / sizeof fmsa_cuda_bwd_f32_list[0]))

/// The selection rule that the planner's row order (common/plan_tables/cuda_mma.c)
/// encodes; the library picks through the planner, test_cuda_host checks that
/// both agree on every head-dim pair and device, and the dev tools call this.
/// The fp32 row for head dims (multiples of 8, at most 256): the smallest D +
/// DV covering both whose shared memory fits smem_max, the first on a tie;
/// NULL where none.
static inline const fmsa_cuda_bwd_instance *fmsa_cuda_bwd_f32_select(int head_dim, int head_dim_v,
                                                                     size_t smem_max) {
    const fmsa_cuda_bwd_instance *best = NULL;
    if (head_dim <= 0 || head_dim % 8 || head_dim_v <= 0 || head_dim_v % 8) return NULL;
    for (int i = 0; i < FMSA_CUDA_BWD_F32_NUM; ++i) {
        const fmsa_cuda_bwd_instance *c = &fmsa_cuda_bwd_f32_list[i];
        if (c->head_dim < head_dim || c->head_dim_v < head_dim_v || (size_t)c->smem_main > smem_max)
            continue;
        if (!best || c->head_dim + c->head_dim_v < best->head_dim + best->head_dim_v) best = c;
    }
    return best;
}

/// The instance of a planner row for dtype (fp32 rows from this list, 16-bit
/// ones from fmsa_cuda_bwd_row_instance, masked as there): NULL where the list
/// has none.
static inline const fmsa_cuda_bwd_instance *fmsa_cuda_bwd_instance_of(
    fmsa_dtype dtype, int head_dim, int head_dim_v, int block_m, int block_n, int stages,
    size_t smem_bytes, int cc_major, int masked) {
    if (dtype != FMSA_DTYPE_F32)
        return fmsa_cuda_bwd_row_instance(dtype, head_dim, head_dim_v, block_m, block_n, stages,
                                          smem_bytes, cc_major, masked);
    for (int i = 0; i < FMSA_CUDA_BWD_F32_NUM; ++i) {
        const fmsa_cuda_bwd_instance *c = &fmsa_cuda_bwd_f32_list[i];
        if (c->head_dim == head_dim && c->head_dim_v == head_dim_v && c->block_m == block_m &&
            c->block_n == block_n && c->stages == stages && (size_t)c->smem_main == smem_bytes)
            return c;
    }
    return NULL;
}
#endif /* __CUDACC__ */

#endif /* FMSA_CUDA_BWD_F32_INSTANCES_H */
