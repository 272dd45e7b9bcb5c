/*
 * The CUDA forward's compiled instances and the one function that picks an
 * instance for a problem and sizes its grid.  Plain C (no CUDA): the host
 * backend includes it to find the kernel by name in the embedded module, the
 * kernels include it for the same tile constants, so "supported" and "what
 * runs" come from this one list (STYLE.md habits 6 and 8).
 *
 * Every instance serves the head dims 8..D and value head dims 8..DV in steps
 * of 8 (a dim below the instance's is padded in the kernel: zero-filled
 * columns of Q, K and V); a problem takes the instance of the smallest
 * D + DV with D >= head_dim and DV >= head_dim_v whose shared memory the
 * device has.  What the kernels assume of the buffers and the
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
/// Dynamic shared memory of a forward instance of dtype code dt: the Q tile
/// (reused for the O tile, so its pitch is the larger dim's) and STAGES stages
/// of one K and one V tile.  The kernels count a row in 16-bit units (an fp32
/// element is two), so the pitches are those of d * FMSA_CUDA_FWD_EU(dt).
/// One zero V row follows (the V that keys no row sees are read from).
#define FMSA_CUDA_FWD_SMEM(dt, d, dv, bm, bn, stages)                                    \
    (((bm) * FMSA_CUDA_FWD_PITCH(FMSA_CUDA_FWD_EU(dt) * ((d) > (dv) ? (d) : (dv))) +     \
      (stages) * (bn) *                                                                   \
          (FMSA_CUDA_FWD_PITCH(FMSA_CUDA_FWD_EU(dt) * (d)) +                              \
           FMSA_CUDA_FWD_PITCH(FMSA_CUDA_FWD_EU(dt) * (dv))) +                            \
      FMSA_CUDA_FWD_PITCH(FMSA_CUDA_FWD_EU(dt) * (dv))) * 2)

/// The sync column: a schedule in its low two bits (fmsa_cuda_fwd.cuh) ...
#define FMSA_CUDA_FWD_SYNC_KV 0     ///< barrier for K, then for V, over 2+ stages (FA2's order)
#define FMSA_CUDA_FWD_SYNC_ONE 1    ///< one barrier per tile for K and V
#define FMSA_CUDA_FWD_SYNC_SINGLE 2 ///< one K and one V buffer (stages 1): V loads during S, K during P V
/// ... plus this flag: FAST 16-bit rows load K / V by the unrolled loader.
#define FMSA_CUDA_FWD_LOAD_U 4

#define FMSA_CUDA_FWD_FAST 0 ///< no softcap, ALiBi, bit mask or paged KV; windows, varlen, GQA yes
#define FMSA_CUDA_FWD_FULL 1 ///< every feature, each behind a run-time check

#define FMSA_CUDA_DT_F16 0   ///< dtype column: fp16 inputs
#define FMSA_CUDA_DT_BF16 1  ///< dtype column: bf16 inputs
#define FMSA_CUDA_DT_F32 2   ///< dtype column: fp32 inputs (3xTF32 on the tensor cores)
/// 16-bit units per element of dtype code dt.
#define FMSA_CUDA_FWD_EU(dt) ((dt) == FMSA_CUDA_DT_F32 ? 2 : 1)
/// The largest D or DV of an fp32 instance (fp32 tiles take twice the bytes).
#define FMSA_CUDA_FWD_F32_MAX_DIM 256

/*
 * X(name, dtype, D, DV, variant, threads, block_m, block_n, stages, q_in_regs,
 *   sync, min_blocks, col_split)
 * threads / 32 warps split block_m rows evenly (16 or 32 rows per warp), in
 * groups of col_split warps that share rows and split the DV output columns
 * (above 256, where one warp's 16 x DV accumulators exceed its registers);
 * q_in_regs keeps Q's mma fragments in registers for the whole row block
 * (else re-read from shared memory every key tile); sync is the schedule of
 * fmsa_cuda_fwd.cuh (FMSA_CUDA_FWD_SYNC_*: 0 barrier for K then for V, 1 one
 * barrier per tile, 2 one K and one V buffer; plus FMSA_CUDA_FWD_LOAD_U);
 * min_blocks feeds
 * __launch_bounds__.  Tile choices per head dim are measured:
 * backends/cuda/NOTES_FWD.md.
 */
/// d64 keys per tile: 128 for FAST (1.02-1.03x the 64 at every sweep point, call 3
/// of NOTES_FWD.md), 64 for FULL (its per-element work; the row the device grid ran).
#define FMSA_CUDA_FWD_D64_BN(variant) ((variant) == FMSA_CUDA_FWD_FAST ? 128 : 64)
/* d256: 128 x 64 on 8 warps takes 192 KB (sm_90's 227 KB opt-in); the 64 x 64
 * row on 4 warps after it (160 KB) is what sm_80's 163 KB holds, and the pick
 * takes it only where the first does not fit (a tie goes to the first row).
 * Above 256 (2 warps per 16 rows, 64 x 32 tiles): 192-221 KB, sm_90 only; on
 * sm_80 the pick finds no instance and says so. */
/// The sync column of the rows the 2026-12-02 A/B retuned: FAST takes the
/// unrolled loader (FULL's per-copy paging and window checks keep the rolled one).
#define FMSA_CUDA_FWD_SYNC_U(variant, sync) ((sync) | ((variant) == FMSA_CUDA_FWD_FAST ? FMSA_CUDA_FWD_LOAD_U : 0))
/* d256 FAST: 64 x 64 on 4 warps with one K and one V buffer (96.5 KB, two
 * blocks per SM, FlashAttention-2's d256 shape) instead of 128 x 64 on 8 warps
 * over two stages (192 KB, one block per SM); the A/B build sets 0 for the
 * old row (both the host C and nvcc). */
#ifndef FMSA_CUDA_FWD_D256_SINGLE
#define FMSA_CUDA_FWD_D256_SINGLE 1
#endif
#define FMSA_CUDA_FWD_D256_S(variant) ((variant) == FMSA_CUDA_FWD_FAST && FMSA_CUDA_FWD_D256_SINGLE)
#define FMSA_CUDA_FWD_INSTANCES_DT(X, DT, dt, variant, vn)                                      \
    X(fmsa_cuda_fwd_##dt##_d64_##vn, DT, 64, 64, variant, 128, 128, FMSA_CUDA_FWD_D64_BN(variant), 2, 1, \
      FMSA_CUDA_FWD_SYNC_U(variant, 0), 2, 1)                                                     \
    X(fmsa_cuda_fwd_##dt##_d96_##vn, DT, 96, 96, variant, 128, 128, 32, 2, 1, 0, 2, 1)          \
    X(fmsa_cuda_fwd_##dt##_d128_##vn, DT, 128, 128, variant, 128, 128, 64, 2, 0,                \
      FMSA_CUDA_FWD_SYNC_U(variant, 0), 2, 1)                                                     \
    X(fmsa_cuda_fwd_##dt##_d192v128_##vn, DT, 192, 128, variant, 256, 128, 64, 2, 0, 1, 1, 1)   \
    X(fmsa_cuda_fwd_##dt##_d192_##vn, DT, 192, 192, variant, 256, 128, 64, 2, 0, 1, 1, 1)       \
    X(fmsa_cuda_fwd_##dt##_d256_##vn, DT, 256, 256, variant, FMSA_CUDA_FWD_D256_S(variant) ? 128 : 256, \
      FMSA_CUDA_FWD_D256_S(variant) ? 64 : 128, 64, FMSA_CUDA_FWD_D256_S(variant) ? 1 : 2, 0,     \
      FMSA_CUDA_FWD_D256_S(variant) ? FMSA_CUDA_FWD_SYNC_SINGLE | FMSA_CUDA_FWD_LOAD_U            \
                                    : FMSA_CUDA_FWD_SYNC_U(variant, 1),                         \
      FMSA_CUDA_FWD_D256_S(variant) ? 2 : 1, 1)                                                   \
    X(fmsa_cuda_fwd_##dt##_d256_m64_##vn, DT, 256, 256, variant, 128, 64, 64, 2, 0, 1, 1, 1)    \
    X(fmsa_cuda_fwd_##dt##_d512_##vn, DT, 512, 512, variant, 256, 64, 32, 2, 0, 1, 1, 2)        \
    X(fmsa_cuda_fwd_##dt##_d576v512_##vn, DT, 576, 512, variant, 256, 64, 32, 2, 0, 1, 1, 2)    \
    X(fmsa_cuda_fwd_##dt##_d576_##vn, DT, 576, 576, variant, 256, 64, 32, 2, 0, 1, 1, 2)

/* fp32 (3xTF32): 4 warps x 16 rows, 64-row blocks, one barrier per tile; keys
 * per tile shrink with D so every row fits sm_80's 163 KB (80 / 96 / 128 KB).
 * Not timed against alternatives: the rows were chosen to fit, not measured. */
#define FMSA_CUDA_FWD_INSTANCES_F32(X, variant, vn)                                             \
    X(fmsa_cuda_fwd_f32_d64_##vn, FMSA_CUDA_DT_F32, 64, 64, variant, 128, 64, 64, 2, 0, 1, 1, 1) \
    X(fmsa_cuda_fwd_f32_d128_##vn, FMSA_CUDA_DT_F32, 128, 128, variant, 128, 64, 32, 2, 0, 1, 1, 1) \
    X(fmsa_cuda_fwd_f32_d256_##vn, FMSA_CUDA_DT_F32, 256, 256, variant, 128, 64, 16, 2, 0, 1, 1, 1)

#define FMSA_CUDA_FWD_INSTANCES(X)                                                              \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_BF16, bf16, FMSA_CUDA_FWD_FAST, fast)            \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_BF16, bf16, FMSA_CUDA_FWD_FULL, full)            \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_F16, f16, FMSA_CUDA_FWD_FAST, fast)              \
    FMSA_CUDA_FWD_INSTANCES_DT(X, FMSA_CUDA_DT_F16, f16, FMSA_CUDA_FWD_FULL, full)              \
    FMSA_CUDA_FWD_INSTANCES_F32(X, FMSA_CUDA_FWD_FAST, fast)                                    \
    FMSA_CUDA_FWD_INSTANCES_F32(X, FMSA_CUDA_FWD_FULL, full)

/*
 * The Hopper forward (kernels/fmsa_cuda_fwd_wg.cu: wgmma, sm_90a only), the
 * instances of the planner's W16 forward rows: head_dim = head_dim_v = 128
 * or 256 exactly, 128 query rows in two warpgroups, 128 keys a step (64 at
 * d256), K and V in 2 stages each, the FAST features but varlen (fmsa_cuda_fwd_wg_serves).  It
 * runs only where FLASHMSA_CUDA_WGMMA_FWD asks for it (cuda_device.c): it
 * has passed the host emulation (backends/cuda/dev/emu/run_wg.sh), not yet
 * the grids on an H100 / H200, so its rows are UNRUN.  The instance is the
 * overlapped schedule; FLASHMSA_CUDA_WGMMA_FWD=2 runs the serial one.
 * X(name, serial name, dtype, D, block_m, block_n, threads, stages)
 */
/// Dynamic shared memory of the Hopper forward: Q, the K and V stages, and 1024 bytes to align the base.
#define FMSA_CUDA_FWD_WG_SMEM(d, bm, bn, stages) (((bm) * (d) + 2 * (stages) * (bn) * (d)) * 2 + 1024)
#define FMSA_CUDA_FWD_WG_INSTANCES(X)                                                                   \
    X(fmsa_cuda_fwd_wg_bf16_d128_ovl, fmsa_cuda_fwd_wg_bf16_d128, FMSA_CUDA_DT_BF16, 128, 128, 128, 256, 2) \
    X(fmsa_cuda_fwd_wg_f16_d128_ovl, fmsa_cuda_fwd_wg_f16_d128, FMSA_CUDA_DT_F16, 128, 128, 128, 256, 2) \
    X(fmsa_cuda_fwd_wg_bf16_d256_ovl, fmsa_cuda_fwd_wg_bf16_d256, FMSA_CUDA_DT_BF16, 256, 128, 64, 256, 2) \
    X(fmsa_cuda_fwd_wg_f16_d256_ovl, fmsa_cuda_fwd_wg_f16_d256, FMSA_CUDA_DT_F16, 256, 128, 64, 256, 2)

/// One row of the list, as the host needs it.
typedef struct fmsa_cuda_fwd_instance {
    const char *name; ///< extern "C" kernel name in the module
    int dtype;        ///< FMSA_CUDA_DT_BF16, FMSA_CUDA_DT_F16 or FMSA_CUDA_DT_F32
    int head_dim;     ///< largest head dim served
    int head_dim_v;   ///< largest value head dim served
    int variant;      ///< FMSA_CUDA_FWD_FAST or FMSA_CUDA_FWD_FULL
    int threads;      ///< block size (1-D)
    int block_m;      ///< query rows per block
    int block_n;      ///< keys per tile
    int stages;       ///< K/V buffers
    int smem_bytes;   ///< dynamic shared memory; > 48 KiB needs the opt-in attribute
    const char *serial; ///< a Hopper (wgmma) instance: its serial schedule's kernel; NULL otherwise
} fmsa_cuda_fwd_instance;

/// The instance table, in list order (the Hopper instances last); *count receives its length.
static inline const fmsa_cuda_fwd_instance *fmsa_cuda_fwd_instance_table(int *count) {
#define FMSA_CUDA_FWD_ROW(name, dt, d, dv, variant, threads, bm, bn, stages, qreg, sync, minb, cs) \
    {#name, dt, d, dv, variant, threads, bm, bn, stages, FMSA_CUDA_FWD_SMEM(dt, d, dv, bm, bn, stages), NULL},
#define FMSA_CUDA_FWD_WG_ROW(name, serial, dt, d, bm, bn, threads, stages)                                \
    {#name, dt, d, d, FMSA_CUDA_FWD_FAST, threads, bm, bn, stages, FMSA_CUDA_FWD_WG_SMEM(d, bm, bn, stages), \
     #serial},
    static const fmsa_cuda_fwd_instance table[] = {FMSA_CUDA_FWD_INSTANCES(FMSA_CUDA_FWD_ROW)
                                                       FMSA_CUDA_FWD_WG_INSTANCES(FMSA_CUDA_FWD_WG_ROW)};
#undef FMSA_CUDA_FWD_ROW
#undef FMSA_CUDA_FWD_WG_ROW
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}

/// The variant a problem needs: FULL as soon as one per-element feature or
/// paged KV is present.
static inline int fmsa_cuda_fwd_variant(const fmsa_cuda_fwd_params *p) {
    return (p->softcap > 0.0f || p->alibi || p->mask || p->is_paged) ? FMSA_CUDA_FWD_FULL
                                                                      : FMSA_CUDA_FWD_FAST;
}

/// 1 where the device's FLASHMSA_CUDA_WGMMA_FWD setting (wgmma_fwd != 0:
/// cuda_device.c) runs the Hopper forward and the pass p is within what it
/// serves beyond the planner's feature bits: head_dim = head_dim_v = the D of
/// an instance exactly (the row's bucket reaches lower), no seqused_k, no
/// sinks.  The pick then asks the planner with FMSA_PLAN_CAP_WGMMA.
static inline int fmsa_cuda_fwd_wg_serves(const fmsa_cuda_fwd_params *p, int wgmma_fwd) {
    int n, i, dim = 0;
    const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_instance_table(&n);
    for (i = 0; i < n; ++i) dim |= t[i].serial && t[i].head_dim == p->head_dim;
    return wgmma_fwd && dim && p->head_dim_v == p->head_dim && !p->is_varlen && !p->has_seqused_k &&
           !p->sinks && fmsa_cuda_fwd_variant(p) == FMSA_CUDA_FWD_FAST;
}

/// The selection rule that the planner's row order (common/plan_tables/cuda_mma.c)
/// encodes for the mma.sync instances; the library picks through the planner,
/// test_cuda_host checks that both agree on every head-dim pair and device, and
/// the dev tools call this.
/// Picks the instance for a validated problem (dtype: the dtype code of q/k/v/o,
/// FMSA_CUDA_DT_*) on a device with smem_max bytes of shared memory per block
/// (opt-in): same dtype and variant, D >= head_dim, DV >= head_dim_v, fits
/// smem_max, smallest D + DV (the first such row on a tie).  Returns its index
/// in the table, or -1 when none serves it (a dim above the list, fp32 above
/// 256, a dim above what the device's shared memory holds, batch or heads past
/// the grid's 65535): the host reports FMSA_ERR_NOT_SUPPORTED.
static inline int fmsa_cuda_fwd_select(int dtype, const fmsa_cuda_fwd_params *p, long long smem_max) {
    int n, i, best = -1;
    const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_instance_table(&n);
    const int variant = fmsa_cuda_fwd_variant(p);
    if (p->head_dim <= 0 || p->head_dim % 8 != 0 || p->head_dim_v <= 0 || p->head_dim_v % 8 != 0)
        return -1;
    if (p->batch > 65535 || p->heads_q > 65535) return -1;
    for (i = 0; i < n; ++i) {
        if (t[i].serial || t[i].dtype != dtype || t[i].variant != variant || t[i].head_dim < p->head_dim ||
            t[i].head_dim_v < p->head_dim_v || t[i].smem_bytes > smem_max)
            continue;
        if (best < 0 || t[i].head_dim + t[i].head_dim_v < t[best].head_dim + t[best].head_dim_v)
            best = i;
    }
    return best;
}

/// The instance of a planner row (common/plan_tables/cuda_mma.c) for dtype
/// code dtype: the same variant, dims, tile, warps, stages and shared memory;
/// -1 where the list has none (a row without its kernel: a bug the host test
/// test_cuda_plan_rows rules out).
static inline int fmsa_cuda_fwd_instance_of(int dtype, int variant, int head_dim, int head_dim_v,
                                            int warps, int block_m, int block_n, int stages,
                                            long long smem_bytes) {
    int n, i;
    const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_instance_table(&n);
    for (i = 0; i < n; ++i)
        if (t[i].dtype == dtype && t[i].variant == variant && t[i].head_dim == head_dim &&
            t[i].head_dim_v == head_dim_v && t[i].threads == 32 * warps &&
            t[i].block_m == block_m && t[i].block_n == block_n && t[i].stages == stages &&
            t[i].smem_bytes == smem_bytes)
            return i;
    return -1;
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

/*
 * Split-KV decode (kernels/fmsa_cuda_fwd_split.cuh): taken when a KV head's
 * query rows fit one 16-row tile (seqlen_q * heads_q / heads_kv <= 16) and
 * max(head_dim, head_dim_v) <= 256 (one instance dim D serves both; above 256
 * the main kernel runs decode too).
 * X(name, dtype, D, variant, threads, keys_per_warp, stages); a block reads
 * threads / 32 * keys_per_warp keys per stage.
 */
#define FMSA_CUDA_FWD_SPLIT_KEYS_PER_WARP 16
#define FMSA_CUDA_FWD_SPLIT_SMEM(dt, d, threads, stages)                                        \
    ((16 + 2 * (stages) * ((threads) / 32) * FMSA_CUDA_FWD_SPLIT_KEYS_PER_WARP + 1) *           \
     FMSA_CUDA_FWD_PITCH(FMSA_CUDA_FWD_EU(dt) * (d)) * 2)
/* d128: 3 stages (100 KB) let two blocks share an SM (the plan then takes 4
 * splits of the standard decode: 256 blocks on 264 slots, no SM idle), 4
 * stages (132 KB) keep one; the A/B build sets the count with -D (both the
 * host C and nvcc: the plan's shared-memory size is this header's). */
#ifndef FMSA_CUDA_FWD_SPLIT_D128_STAGES
#define FMSA_CUDA_FWD_SPLIT_D128_STAGES 3
#endif
#define FMSA_CUDA_FWD_SPLIT_INSTANCES_DT(X, DT, dt, variant, vn)                                \
    X(fmsa_cuda_fwd_##dt##_d64_split_##vn, DT, 64, variant, 128, 16, 6)                         \
    X(fmsa_cuda_fwd_##dt##_d128_split_##vn, DT, 128, variant, 128, 16, FMSA_CUDA_FWD_SPLIT_D128_STAGES) \
    X(fmsa_cuda_fwd_##dt##_d256_split_##vn, DT, 256, variant, 128, 16, 3)
#define FMSA_CUDA_FWD_SPLIT_INSTANCES(X)                                                        \
    FMSA_CUDA_FWD_SPLIT_INSTANCES_DT(X, FMSA_CUDA_DT_BF16, bf16, FMSA_CUDA_FWD_FAST, fast)      \
    FMSA_CUDA_FWD_SPLIT_INSTANCES_DT(X, FMSA_CUDA_DT_BF16, bf16, FMSA_CUDA_FWD_FULL, full)      \
    FMSA_CUDA_FWD_SPLIT_INSTANCES_DT(X, FMSA_CUDA_DT_F16, f16, FMSA_CUDA_FWD_FAST, fast)        \
    FMSA_CUDA_FWD_SPLIT_INSTANCES_DT(X, FMSA_CUDA_DT_F16, f16, FMSA_CUDA_FWD_FULL, full)      \
    FMSA_CUDA_FWD_SPLIT_INSTANCES_F32(X, FMSA_CUDA_FWD_FAST, fast)                              \
    FMSA_CUDA_FWD_SPLIT_INSTANCES_F32(X, FMSA_CUDA_FWD_FULL, full)
/* fp32: fewer stages (d256: 2 warps) so each fits sm_80's 163 KB (100 / 136 / 144 KB). */
#define FMSA_CUDA_FWD_SPLIT_INSTANCES_F32(X, variant, vn)                                       \
    X(fmsa_cuda_fwd_f32_d64_split_##vn, FMSA_CUDA_DT_F32, 64, variant, 128, 16, 3)              \
    X(fmsa_cuda_fwd_f32_d128_split_##vn, FMSA_CUDA_DT_F32, 128, variant, 128, 16, 2)            \
    X(fmsa_cuda_fwd_f32_d256_split_##vn, FMSA_CUDA_DT_F32, 256, variant, 64, 16, 2)
/// X(name, dtype, threads): merges the splits' partials, one warp per row.
#define FMSA_CUDA_FWD_COMBINE_INSTANCES(X)                                                      \
    X(fmsa_cuda_fwd_bf16_combine, FMSA_CUDA_DT_BF16, 128)                                       \
    X(fmsa_cuda_fwd_f16_combine, FMSA_CUDA_DT_F16, 128)                                         \
    X(fmsa_cuda_fwd_f32_combine, FMSA_CUDA_DT_F32, 128)

/// The split instance table (same row type; block_m = 16, block_n = keys per stage).
static inline const fmsa_cuda_fwd_instance *fmsa_cuda_fwd_split_table(int *count) {
#define FMSA_CUDA_FWD_SPLIT_ROW(name, dt, d, variant, threads, bnw, stages) \
    {#name, dt, d, d, variant, threads, 16, (threads) / 32 * (bnw), stages, FMSA_CUDA_FWD_SPLIT_SMEM(dt, d, threads, stages), \
     NULL},
    static const fmsa_cuda_fwd_instance table[] = {FMSA_CUDA_FWD_SPLIT_INSTANCES(FMSA_CUDA_FWD_SPLIT_ROW)};
#undef FMSA_CUDA_FWD_SPLIT_ROW
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}

/// One kernel launch of a forward.
typedef struct fmsa_cuda_fwd_launch {
    const char *name;  ///< kernel name in the module
    unsigned grid[3];  ///< grid size
    unsigned threads;  ///< block size (1-D)
    int smem_bytes;    ///< dynamic shared memory
} fmsa_cuda_fwd_launch;

/// What a forward runs: one or two launches in order, the split count to set
/// in fmsa_cuda_fwd_params.num_splits, and the fp32 workspace the partials
/// need (o_accum at offset 0, lse_accum at lse_offset; 0 bytes with one split).
typedef struct fmsa_cuda_fwd_plan {
    int num_launches;                ///< 0 (nothing to do: no query rows), 1 or 2
    fmsa_cuda_fwd_launch launch[2];  ///< main or split kernel, then the combine
    int num_splits;                  ///< value for params.num_splits
    unsigned long long workspace_bytes; ///< o_accum + lse_accum, 256-byte aligned parts
    unsigned long long lse_offset;   ///< byte offset of lse_accum in the workspace
} fmsa_cuda_fwd_plan;

/// The split-KV instance of a validated problem: where a KV head's query rows
/// fit one 16-row tile (seqlen_q * heads_q / heads_kv <= 16, heads_kv within
/// the grid's 65535), the smallest D >= max(head_dim, head_dim_v) of the same
/// dtype and variant whose shared memory fits smem_max.  Returns its index in
/// fmsa_cuda_fwd_split_table, or -1 (the main kernel runs the problem).
static inline int fmsa_cuda_fwd_split_select(int dtype, const fmsa_cuda_fwd_params *p,
                                             long long smem_max) {
    const int variant = fmsa_cuda_fwd_variant(p);
    const long long group = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 0;
    const int dmax = p->head_dim > p->head_dim_v ? p->head_dim : p->head_dim_v;
    int n, i, best = -1;
    const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_split_table(&n);
    if (p->seqlen_q <= 0 || p->seqlen_q * group > 16 || p->heads_kv > 65535) return -1;
    for (i = 0; i < n; ++i)
        if (t[i].dtype == dtype && t[i].variant == variant && t[i].head_dim >= dmax &&
            t[i].smem_bytes <= smem_max && (best < 0 || t[i].head_dim < t[best].head_dim))
            best = i;
    return best;
}

/// Blocks of split instance in one SM runs at once, as the split count counts
/// them: two where its shared memory leaves room for a second (112 KiB: half
/// of sm_90's 228 KiB per SM less the 1 KiB each block reserves), else one.
static inline int fmsa_cuda_fwd_split_blocks_per_sm(const fmsa_cuda_fwd_instance *in) {
    return in->smem_bytes <= 112 * 1024 ? 2 : 1;
}

/// Plans a validated forward whose main kernel is instance main (the planned
/// row's, fmsa_cuda_fwd_instance_of): split kernel `split` (its index in
/// fmsa_cuda_fwd_split_table, fmsa_cuda_fwd_split_select's; -1 none) with
/// `splits` splits (the planner's count, fmsa_plan_split_count) where there is
/// one and splits > 0, else the main kernel.  Returns 0, or -1 when main is
/// not an instance.
static inline int fmsa_cuda_fwd_make_plan(int dtype, const fmsa_cuda_fwd_params *p, int main,
                                          int split, int splits, fmsa_cuda_fwd_plan *plan) {
    int n;
    plan->num_launches = 0;
    plan->num_splits = 1;
    plan->workspace_bytes = plan->lse_offset = 0;
    fmsa_cuda_fwd_instance_table(&n);
    if (main < 0 || main >= n) return -1;
    if (p->seqlen_q <= 0) return 0;
    {
        const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_split_table(&n);
        if (split >= 0 && split < n && splits > 0) {
            const fmsa_cuda_fwd_instance *in = &t[split];
            if (splits > 65535) splits = 65535;
            plan->num_splits = splits;
            plan->num_launches = 1;
            plan->launch[0].name = in->name;
            plan->launch[0].grid[0] = (unsigned)splits;
            plan->launch[0].grid[1] = (unsigned)p->heads_kv;
            plan->launch[0].grid[2] = (unsigned)p->batch;
            plan->launch[0].threads = (unsigned)in->threads;
            plan->launch[0].smem_bytes = in->smem_bytes;
            if (splits > 1) {
                const unsigned long long rows =
                    p->is_varlen ? (unsigned long long)p->total_q
                                 : (unsigned long long)p->batch * (unsigned long long)p->seqlen_q;
                const unsigned long long cells = (unsigned long long)splits * p->heads_q * rows;
                const unsigned long long warps = (unsigned long long)p->heads_q * rows;
                plan->lse_offset = (cells * p->head_dim_v * 4 + 255) / 256 * 256;
                plan->workspace_bytes = plan->lse_offset + (cells * 4 + 255) / 256 * 256;
                plan->num_launches = 2;
                plan->launch[1].name = dtype == FMSA_CUDA_DT_BF16  ? "fmsa_cuda_fwd_bf16_combine"
                                       : dtype == FMSA_CUDA_DT_F32 ? "fmsa_cuda_fwd_f32_combine"
                                                                   : "fmsa_cuda_fwd_f16_combine";
                plan->launch[1].grid[0] = (unsigned)((warps + 3) / 4);
                plan->launch[1].grid[1] = plan->launch[1].grid[2] = 1;
                plan->launch[1].threads = 128;
                plan->launch[1].smem_bytes = 0;
            }
            return 0;
        }
    }
    {
        const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_instance_table(&n);
        const fmsa_cuda_fwd_instance *in = &t[main];
        plan->num_launches = 1;
        plan->launch[0].name = in->name;
        fmsa_cuda_fwd_grid(in, p, plan->launch[0].grid);
        plan->launch[0].threads = (unsigned)in->threads;
        plan->launch[0].smem_bytes = in->smem_bytes;
    }
    return 0;
}

#endif /* FMSA_CUDA_FWD_INSTANCES_H */
