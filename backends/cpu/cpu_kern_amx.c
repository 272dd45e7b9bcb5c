/*
 * AMX path (Sapphire Rapids and later Xeons): the AVX-512 kernels for every
 * fp32 product and the bf16 products of the forward and backward on the tile
 * unit (tdpbf16ps).
 * Compiled with -mamx-tile -mamx-bf16 plus the AVX-512 flags (CMakeLists.txt);
 * called only after the dispatcher saw AMX-TILE, AMX-BF16, AVX512-BF16 in
 * cpuid and Linux granted the tile state (cpu_dispatch.c).
 *
 * Tiles: 0-3 hold a 32 x 32 block of C (fp32, 16 rows x 64 bytes each), 4-5
 * two 16 x 32 slices of A (bf16 rows of the Q or P tile), 6-7 two B tiles
 * of the packed panel (16 pair rows x 16 columns, 1 KiB contiguous).  Each k
 * step of 32 is 4 tile loads and 4 tdpbf16ps (16 x 16 x 32 each), the 2 x 2
 * reuse that keeps the load ports under the tile unit's rate.  Measured
 * alternatives (bench/cpu_amx_probe): software prefetch of B (slower), a
 * 32 x 16 block with double-buffered operands (within 5%, not consistent).  Every C
 * element sums its k steps in order, so results depend on the shapes only.
 *
 * The tile configuration is per-thread state that other libraries in the
 * process (oneDNN, for one) also set, so it is loaded at the start of every
 * work item (b16_begin) rather than once per thread.
 *
 * Checked on the device machine's Xeon (bench/cpu_device_run.sh: the CPU
 * grids with FLASHMSA_CPU_KERNEL=amx, determinism, every element against
 * fp64); the development machines have no AMX.
 */
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_kern_x86.h"

#if defined(FMSA_CPU_HAVE_AVX512_KERNELS) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <immintrin.h>
#include <string.h>

#define AMX_INLINE static inline __attribute__((always_inline))

/// The 64-byte operand of ldtilecfg (Intel SDM vol. 2, LDTILECFG), palette 1.
typedef struct amx_tilecfg {
    uint8_t palette;      ///< 1: 8 tiles of up to 16 rows x 64 bytes
    uint8_t start_row;    ///< restart row after an interrupted load/store (0)
    uint8_t reserved[14]; ///< must be 0
    uint16_t colsb[16];   ///< bytes per row of each tile
    uint8_t rows[16];     ///< rows of each tile
} amx_tilecfg;

static void amx_begin(void) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; ++t) { /* every tile full size: 16 rows x 64 bytes */
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

/// One (16 * mi) x (16 * ni) block of C, mi, ni in {1, 2} (constants after inlining).
AMX_INLINE void amx_block(const int mi, const int ni, int k, const uint16_t *a, int64_t lda,
                          const uint16_t *b0, const uint16_t *b1, float *c, int64_t ldc,
                          int accumulate) {
    const int64_t sa = lda * 2, sc = ldc * 4;
    if (accumulate) {
        _tile_loadd(0, c, sc);
        if (ni == 2) _tile_loadd(1, c + 16, sc);
        if (mi == 2) {
            _tile_loadd(2, c + 16 * ldc, sc);
            if (ni == 2) _tile_loadd(3, c + 16 * ldc + 16, sc);
        }
    } else {
        _tile_zero(0);
        if (ni == 2) _tile_zero(1);
        if (mi == 2) {
            _tile_zero(2);
            if (ni == 2) _tile_zero(3);
        }
    }
    for (int kk = 0; kk < k; kk += 32) {
        /* pair row kk / 2 of a 16-column block starts at element (kk / 2) * 32;
         * each operand tile is loaded right before its first reader (A, B0,
         * then B1, then the second A), i.e. right after its last reader of
         * the previous step: 3% over loading all four up front (bench/
         * cpu_amx_probe, "reord", on the device Xeon) */
        _tile_loadd(4, a + kk, sa);
        _tile_loadd(6, b0 + (int64_t)kk * 16, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (ni == 2) {
            _tile_loadd(7, b1 + (int64_t)kk * 16, 64);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (mi == 2) {
            _tile_loadd(5, a + 16 * lda + kk, sa);
            _tile_dpbf16ps(2, 5, 6);
            if (ni == 2) _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, c, sc);
    if (ni == 2) _tile_stored(1, c + 16, sc);
    if (mi == 2) {
        _tile_stored(2, c + 16 * ldc, sc);
        if (ni == 2) _tile_stored(3, c + 16 * ldc + 16, sc);
    }
}

/// The (up to) 32 x 32 block of C at (i, j).
AMX_INLINE void amx_block_at(int m, int n, int k, const uint16_t *a, int64_t lda,
                             const uint16_t *bp, int64_t half, float *c, int64_t ldc,
                             int accumulate, int i, int j) {
    const uint16_t *b0 = bp + (int64_t)(j / 16) * half * 32, *b1 = b0 + half * 32;
    const uint16_t *ai = a + i * lda;
    float *ci = c + i * ldc + j;
    const int two_n = n - j >= 32;
    if (m - i >= 32) {
        if (two_n) amx_block(2, 2, k, ai, lda, b0, b1, ci, ldc, accumulate);
        else amx_block(2, 1, k, ai, lda, b0, b0, ci, ldc, accumulate);
    } else {
        if (two_n) amx_block(1, 2, k, ai, lda, b0, b1, ci, ldc, accumulate);
        else amx_block(1, 1, k, ai, lda, b0, b0, ci, ldc, accumulate);
    }
}

static void amx_gemm_b16(int m, int n, int k, const uint16_t *a, int64_t lda, const uint16_t *bp,
                         int kb, float *c, int64_t ldc, int accumulate) {
    const int64_t half = kb / 2; /* pair rows per 16-column block of the panel */
    /* Each 32 x 32 block loads one A and one B tile per tdpbf16ps.  The
     * block order keeps the smaller operand in L1: A whole (S = Q·Kᵀ: 16 KiB
     * of Q) with the columns outside, or, when A is larger than half of L1
     * (P·V at 256 keys: 32 KiB of P), 32 rows of A with the rows outside.
     * No software prefetch: prefetching the next block's B tiles into L1
     * (16 KiB for P·V) cost 15% on S and 45% on P·V, and prefetching two k
     * steps ahead cost 3-7% (bench/cpu_amx_probe on the device Xeon,
     * bench/RESULTS.md 2026-12-01): the tile loads from L2 do better alone. */
    if ((int64_t)m * k * 2 <= 24 * 1024) {
        for (int j = 0; j < n; j += 32)
            for (int i = 0; i < m; i += 32)
                amx_block_at(m, n, k, a, lda, bp, half, c, ldc, accumulate, i, j);
        return;
    }
    for (int i = 0; i < m; i += 32)
        for (int j = 0; j < n; j += 32)
            amx_block_at(m, n, k, a, lda, bp, half, c, ldc, accumulate, i, j);
}

static const fmsa_cpu_kernels amx_table = {
    .name = "amx",           /* FLASHMSA_CPU_KERNEL=amx */
    .isa = FMSA_CPU_ISA_AMX,
    .lanes = 16,             /* fp32 work runs the AVX-512 kernels */
    .gemm = fmsa_cpu_avx512_gemm,
    .row_max = fmsa_cpu_avx512_row_max,
    .row_scale = fmsa_cpu_avx512_row_scale,
    .tile_softmax = fmsa_cpu_avx512_tile_softmax,
    .row_bwd_ds = fmsa_cpu_avx512_row_bwd_ds,
    .b16_begin = amx_begin,
    .gemm_b16 = amx_gemm_b16, /* tdpbf16ps */
    .row_exp2_b16 = fmsa_cpu_avx512_row_exp2_b16,
    .row_to_b16 = fmsa_cpu_avx512_row_to_b16,
    .pack_b16_rows = fmsa_cpu_avx512_pack_b16_rows,
    .words_t16 = fmsa_cpu_avx512_words_t16,
    .pack_b16_pair_rows = fmsa_cpu_avx512_pack_b16_pair_rows,
};

const fmsa_cpu_kernels *fmsa_cpu_kernels_amx(void) { return &amx_table; }

#else
const fmsa_cpu_kernels *fmsa_cpu_kernels_amx(void) { return NULL; } /* no AMX in this build */
#endif /* AVX-512 kernels + AMX */
