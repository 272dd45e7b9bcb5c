/*
 * The CUDA forward's compiled instances and the one function that picks an
 * instance for a problem and sizes its grid.  Plain C (no CUDA): the host
 * backend includes it to find the kernel by name in the embedded module, the
 * kernels include it for the same tile constants, so "supported" and "what
 * runs" come from this one list (STYLE.md habits 6 and 8).
 *
 * Every instance serves the head dims 8..D in steps of 8 (a head dim below D is
 * padded in the kernel: zero-filled columns of Q, K and V); a problem takes the
 * smallest D >= its head dim.  What the kernels assume of the buffers and the
 * host must check: q, k, v, o 16-byte aligned with seq/head/batch strides that
 * are multiples of 8 elements (16-byte cp.async and stores), int32 metadata
 * 4-byte aligned, lse / alibi fp32.
 */
#ifndef FMSA_CUDA_FWD_INSTANCES_H
#define FMSA_CUDA_FWD_INSTANCES_H

#include "cuda_params.h"

/// Shared-memory row pitch in elements: head dims rounded up to 64 so every
/// row is a multiple of 128 bytes, which the 16-byte-chunk XOR swizzle needs.
#define FMSA_CUDA_FWD_PITCH(d) ((((d) + 63) / 64) * 64)
/// Dynamic shared memory of a forward instance: the Q tile (reused for the O
/// tile) and STAGES stages of one K and one V tile, 16-bit elements.
#define FMSA_CUDA_FWD_SMEM(d, bm, bn, stages) \
    (((bm) + 2 * (stages) * (bn)) * FMSA_CUDA_FWD_PITCH(d) * 2)

#define FMSA_CUDA_FWD_FAST 0 ///< no softcap, ALiBi, bit mask or paged KV; windows, varlen, GQA yes
#define FMSA_CUDA_FWD_FULL 1 ///< every feature, each behind a run-time check

#define FMSA_CUDA_DT_F16 0   ///< is_bf16 column: fp16 inputs
#define FMSA_CUDA_DT_BF16 1  ///< is_bf16 column: bf16 inputs

/*
 * X(name, is_bf16, D, variant, threads, block_m, block_n, stages, q_in_regs,
 *   sync, min_blocks)
 * threads / 32 warps split block_m rows evenly (16 or 32 rows per warp);
 * q_in_regs keeps Q's mma fragments in registers for the whole row block
 * (else re-read from shared memory every key tile); sync is the schedule of
 * fmsa_cuda_fwd.cuh (0: barrier for K then for V, 1: one barrier per tile,
 * 2: the two warp halves staggered by half a tile); min_blocks feeds
 * __launch_bounds__.  Tile choices per head dim are measured:
 * backends/cuda/NOTES_FWD.md.
 */
#define FMSA_CUDA_FWD_INSTANCES_DT(X, DT, dt, variant, vn)                                      \
    X(fmsa_cuda_fwd_##dt##_d64_##vn, DT, 64, variant, 256, 128, 64, 3, 1, 2, 1)                 \
    X(fmsa_cuda_fwd_##dt##_d96_##vn, DT, 96, variant, 256, 128, 64, 3, 1, 2, 1)                 \
    X(fmsa_cuda_fwd_##dt##_d128_##vn, DT, 128, variant, 256, 128, 64, 3, 1, 2, 1)               \
    X(fmsa_cuda_fwd_##dt##_d192_##vn, DT, 192, variant, 256, 128, 64, 3, 0, 2, 1)               \
    X(fmsa_cuda_fwd_##dt##_d256_##vn, DT, 256, variant, 256, 128, 64, 2, 0, 0, 1)

#define FMSA_CUDA_FWD_INSTANCES(X)                                                              \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_BF16, bf16, FMSA_CUDA_FWD_FAST, fast)            \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_BF16, bf16, FMSA_CUDA_FWD_FULL, full)            \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_F16, f16, FMSA_CUDA_FWD_FAST, fast)              \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_F16, f16, FMSA_CUDA_FWD_FULL, full)

/// One row of the list, as the host needs it.
typedef struct fmsa_cuda_fwd_instance {
    const char *name; ///< extern "C" kernel name in the module
    int is_bf16;      ///< FMSA_CUDA_DT_BF16 or FMSA_CUDA_DT_F16
    int head_dim;     ///< largest head dim served (and head_dim_v, equal for now)
    int variant;      ///< FMSA_CUDA_FWD_FAST or FMSA_CUDA_FWD_FULL
    int threads;      ///< block size (1-D)
    int block_m;      ///< query rows per block
    int block_n;      ///< keys per tile
    int smem_bytes;   ///< dynamic shared memory; > 48 KiB needs the opt-in attribute
} fmsa_cuda_fwd_instance;

/// The instance table, in list order; *count receives its length.
static inline const fmsa_cuda_fwd_instance *fmsa_cuda_fwd_instance_table(int *count) {
#define FMSA_CUDA_FWD_ROW(name, dt, d, variant, threads, bm, bn, stages, qreg, sync, minb) \
    {#name, dt, d, variant, threads, bm, bn, FMSA_CUDA_FWD_SMEM(d, bm, bn, stages)},
    static const fmsa_cuda_fwd_instance table[] = {FMSA_CUDA_FWD_INSTANCES(FMSA_CUDA_FWD_ROW)};
#undef FMSA_CUDA_FWD_ROW
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}

/// The variant a problem needs: FULL as soon as one per-element feature or
/// paged KV is present.
static inline int fmsa_cuda_fwd_variant(const fmsa_cuda_fwd_params *p) {
    return (p->softcap > 0.0f || p->alibi || p->mask || p->is_paged) ? FMSA_CUDA_FWD_FULL
                                                                      : FMSA_CUDA_FWD_FAST;
}

/// Picks the instance for a validated problem (is_bf16: the dtype of q/k/v/o,
/// FMSA_CUDA_DT_*): same dtype and variant, smallest head dim >= the problem's.
/// Returns its index in the table, or -1 when none serves it (fp32, head_dim_v
/// != head_dim, head dim above the list, batch or heads past the grid's 65535):
/// the host reports FMSA_ERR_NOT_SUPPORTED.
static inline int fmsa_cuda_fwd_select(int is_bf16, const fmsa_cuda_fwd_params *p) {
    int n, i, best = -1;
    const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_instance_table(&n);
    const int variant = fmsa_cuda_fwd_variant(p);
    if (p->head_dim_v != p->head_dim || p->head_dim <= 0 || p->head_dim % 8 != 0) return -1;
    if (p->batch > 65535 || p->heads_q > 65535) return -1;
    for (i = 0; i < n; ++i) {
        if (t[i].is_bf16 != is_bf16 || t[i].variant != variant || t[i].head_dim < p->head_dim)
            continue;
        if (best < 0 || t[i].head_dim < t[best].head_dim) best = i;
    }
    return best;
}

/// Grid of instance inst for problem p: x = query row blocks of the longest
/// sequence, y = query heads, z = sequences.  Blocks past a sequence's end
/// (varlen) return at once.
static inline void fmsa_cuda_fwd_grid(const fmsa_cuda_fwd_instance *inst,
                                      const fmsa_cuda_fwd_params *p, unsigned grid[3]) {
    grid[0] = (unsigned)((p->seqlen_q + inst->block_m - 1) / inst->block_m);
    grid[1] = (unsigned)p->heads_q;
    grid[2] = (unsigned)p->batch;
}

#endif /* FMSA_CUDA_FWD_INSTANCES_H */
