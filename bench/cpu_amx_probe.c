/*
 * cpu_amx_probe: where the AMX products of the bf16 forward lose their time
 * (developer tool for the device machine's Xeon; not a test, not installed).
 *
 * cpu_kernel_bench measured S = Q·Kᵀ (64 x 256, k = 128) at 25-40% and
 * acc += P·V (64 x 128, k = 256) at 15-30% of the tile peak, with operands
 * hot or rotating through L2 alike.  This times, in one process and in
 * alternating rounds (the VM's speed drifts by 2x between calls), variants
 * of the same 2 x 2-block tile loop that differ in one thing each:
 *   lib      the library's kernel (cpu_kern_amx.c; since ca0798e: no
 *            prefetch, each operand tile loaded right before its first reader)
 *   pf       the library's loop before ca0798e: the next block's B tiles
 *            prefetched into L1, the four operand tiles loaded up front
 *   nopf     as pf without the prefetch
 *   2x1db    32 x 16 blocks of C with double-buffered operand tiles
 *   jit      B tiles prefetched two k steps ahead instead of a block ahead
 *   jouter   P·V with the column blocks outside (P stays in L1 whole)
 *   hotb     every column block reads the same B tiles (B always in L1)
 *   noload   zero, tdpbf16ps and store only (the tile unit's own cost)
 *   tdponly  tdpbf16ps only (the ceiling)
 * The panel layout is the library's (cpu_kernels.h); results are not checked
 * (the variants compute the same sums as lib except hotb/noload/tdponly).
 *
 *   FLASHMSA_CPU_KERNEL=amx cpu_amx_probe [rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_kernels.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <immintrin.h>

static double pr_now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { PR_LIB, PR_PF, PR_NOPF, PR_2X1, PR_JIT, PR_JOUTER, PR_HOTB, PR_NOLOAD, PR_TDPONLY, PR_N };
static const char *const pr_names[PR_N] = {"lib", "pf", "nopf", "2x1db", "jit", "jouter", "hotb", "noload", "tdponly"};

static inline __attribute__((always_inline)) void
pr_block(const int mode, int k, const uint16_t *a, int64_t lda, const uint16_t *b0,
         const uint16_t *b1, float *c, int64_t ldc, int acc, const char *pf0, const char *pf1) {
    const int64_t sa = lda * 2, sc = ldc * 4;
    if (mode != PR_TDPONLY) {
        if (acc && mode != PR_NOLOAD) {
            _tile_loadd(0, c, sc);
            _tile_loadd(1, c + 16, sc);
            _tile_loadd(2, c + 16 * ldc, sc);
            _tile_loadd(3, c + 16 * ldc + 16, sc);
        } else {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
        }
    }
    for (int kk = 0; kk < k; kk += 32) {
        if (mode == PR_JIT) { /* two k steps ahead, then the next block's first two */
            const int ahead = kk + 64;
            const char *x0 = ahead < k ? (const char *)(b0 + (int64_t)ahead * 16) : pf0 + (int64_t)(ahead - k) * 32;
            const char *x1 = ahead < k ? (const char *)(b1 + (int64_t)ahead * 16) : pf1 + (int64_t)(ahead - k) * 32;
            for (int x = 0; x < 1024; x += 64) {
                _mm_prefetch(x0 + x, _MM_HINT_T0);
                _mm_prefetch(x1 + x, _MM_HINT_T0);
            }
        }
        if (mode != PR_NOLOAD && mode != PR_TDPONLY) {
            _tile_loadd(6, b0 + (int64_t)kk * 16, 64);
            _tile_loadd(7, b1 + (int64_t)kk * 16, 64);
            _tile_loadd(4, a + kk, sa);
        }
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (mode != PR_NOLOAD && mode != PR_TDPONLY) _tile_loadd(5, a + 16 * lda + kk, sa);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    if (mode != PR_TDPONLY) {
        _tile_stored(0, c, sc);
        _tile_stored(1, c + 16, sc);
        _tile_stored(2, c + 16 * ldc, sc);
        _tile_stored(3, c + 16 * ldc + 16, sc);
    }
}

/// 32 x 16 block of C (tiles 0, 1) with double-buffered operands: even k
/// steps load A into 2, 3 and B into 4, odd ones into 5, 6 and 7, so a step's
/// loads never wait for the previous step's tdpbf16ps.  k: a multiple of 64.
static inline __attribute__((always_inline)) void
pr_block_2x1(int k, const uint16_t *a, int64_t lda, const uint16_t *b, float *c, int64_t ldc, int acc) {
    const int64_t sa = lda * 2, sc = ldc * 4;
    if (acc) {
        _tile_loadd(0, c, sc);
        _tile_loadd(1, c + 16 * ldc, sc);
    } else {
        _tile_zero(0);
        _tile_zero(1);
    }
    for (int kk = 0; kk < k; kk += 64) {
        _tile_loadd(4, b + (int64_t)kk * 16, 64);
        _tile_loadd(2, a + kk, sa);
        _tile_loadd(3, a + 16 * lda + kk, sa);
        _tile_loadd(7, b + (int64_t)(kk + 32) * 16, 64);
        _tile_loadd(5, a + kk + 32, sa);
        _tile_loadd(6, a + 16 * lda + kk + 32, sa);
        _tile_dpbf16ps(0, 2, 4);
        _tile_dpbf16ps(1, 3, 4);
        _tile_dpbf16ps(0, 5, 7);
        _tile_dpbf16ps(1, 6, 7);
    }
    _tile_stored(0, c, sc);
    _tile_stored(1, c + 16 * ldc, sc);
}

static void pr_prefetch_block(const uint16_t *bp, int64_t half, int j, int k) {
    const char *b = (const char *)(bp + (int64_t)(j / 16) * half * 32);
    for (int blk = 0; blk < 2; ++blk)
        for (int64_t x = 0; x < (int64_t)k * 32; x += 64) _mm_prefetch(b + blk * half * 64 + x, _MM_HINT_T0);
}

/// m, n multiples of 32, k of 32 (the probe's shapes only).
static void pr_gemm(int mode, int m, int n, int k, const uint16_t *a, int64_t lda, const uint16_t *bp,
                    int kb, float *c, int64_t ldc, int acc) {
    const int64_t half = kb / 2;
    const int jouter = mode == PR_JOUTER || (int64_t)m * k * 2 <= 24 * 1024;
#define PR_B(j) (bp + (int64_t)((mode == PR_HOTB ? 0 : (j)) / 16) * half * 32)
    if (mode == PR_2X1) { /* the library's block order, no prefetch */
        for (int o = 0; o < (jouter ? n : m); o += 32)
            for (int in = 0; in < (jouter ? m : n); in += 32) {
                const int i = jouter ? in : o, j = jouter ? o : in;
                pr_block_2x1(k, a + i * lda, lda, PR_B(j), c + i * ldc + j, ldc, acc);
                pr_block_2x1(k, a + i * lda, lda, PR_B(j) + half * 32, c + i * ldc + j + 16, ldc, acc);
            }
        return;
    }
    if (jouter) {
        for (int j = 0; j < n; j += 32) {
            if (mode == PR_PF && j + 32 < n) pr_prefetch_block(bp, half, j + 32, k);
            for (int i = 0; i < m; i += 32) {
                const int jn = i + 32 < m ? j : (j + 32 < n ? j + 32 : j);
                pr_block(mode, k, a + i * lda, lda, PR_B(j), PR_B(j) + half * 32, c + i * ldc + j, ldc, acc,
                         (const char *)PR_B(jn), (const char *)(PR_B(jn) + half * 32));
            }
        }
    } else {
        for (int i = 0; i < m; i += 32)
            for (int j = 0; j < n; j += 32) {
                const int jn = j + 32 < n ? j + 32 : 0;
                if (mode == PR_PF) pr_prefetch_block(bp, half, jn, k);
                pr_block(mode, k, a + i * lda, lda, PR_B(j), PR_B(j) + half * 32, c + i * ldc + j, ldc, acc,
                         (const char *)PR_B(jn), (const char *)(PR_B(jn) + half * 32));
            }
    }
#undef PR_B
}

typedef struct pr_shape {
    const char *name;
    int m, n, k, acc, ldc; ///< ldc: C's row stride in floats (n, or padded)
} pr_shape;

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 11, tiles = 16;
    const pr_shape shapes[] = {{"S 64x256 k128", 64, 256, 128, 0, 256},
                               {"S 64x256 ld272", 64, 256, 128, 0, 272},
                               {"PV 64x128 k256", 64, 128, 256, 1, 128},
                               {"PV 64x128 ld144", 64, 128, 256, 1, 144},
                               {"S 64x128 k128", 64, 128, 128, 0, 128},
                               {"PV 64x128 k128", 64, 128, 128, 1, 128}};
    const fmsa_cpu_kernels *kern;
    if (fmsa_cpu_kernels_get(&kern) != FMSA_SUCCESS || !kern->gemm_b16 || kern->isa != FMSA_CPU_ISA_AMX) {
        fprintf(stderr, "cpu_amx_probe: needs the amx path (FLASHMSA_CPU_KERNEL=amx on an AMX CPU)\n");
        return 1;
    }
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
        const pr_shape *sh = &shapes[si];
        const int64_t pe = fmsa_cpu_b16_panel_elems(sh->k, sh->n);
        uint16_t *a = (uint16_t *)fmsa_cpu_aligned_alloc((size_t)sh->m * sh->k * 2);
        uint16_t *bp = (uint16_t *)fmsa_cpu_aligned_alloc((size_t)(tiles * pe) * 2);
        float *c = (float *)fmsa_cpu_aligned_alloc((size_t)sh->m * sh->ldc * 4);
        const double flops = 2.0 * sh->m * sh->n * sh->k;
        const int reps = (int)(5e9 / flops) + 1;
        double best[PR_N], sum[PR_N];
        if (!a || !bp || !c) return 1;
        for (int64_t i = 0; i < (int64_t)sh->m * sh->k; ++i) a[i] = (uint16_t)(0x3c00 + i % 97);
        for (int64_t i = 0; i < tiles * pe; ++i) bp[i] = (uint16_t)(0x3c00 + i % 89);
        memset(c, 0, (size_t)sh->m * sh->ldc * 4);
        for (int v = 0; v < PR_N; ++v) best[v] = 0.0, sum[v] = 0.0;
        kern->b16_begin();
        for (int r = 0; r < rounds; ++r)
            for (int v = 0; v < PR_N; ++v) {
                const double t0 = pr_now();
                for (int t = 0; t < reps; ++t) {
                    const uint16_t *b = bp + (int64_t)(t % tiles) * pe;
                    if (v == PR_LIB) kern->gemm_b16(sh->m, sh->n, sh->k, a, sh->k, b, sh->k, c, sh->ldc, sh->acc);
                    else pr_gemm(v, sh->m, sh->n, sh->k, a, sh->k, b, sh->k, c, sh->ldc, sh->acc);
                }
                {
                    const double gf = flops * reps / (pr_now() - t0) * 1e-9;
                    if (gf > best[v]) best[v] = gf;
                    sum[v] += gf;
                }
            }
        printf("%-16s", sh->name);
        for (int v = 0; v < PR_N; ++v) printf("  %s %6.0f/%6.0f", pr_names[v], best[v], sum[v] / rounds);
        printf("   (GFLOP/s best/mean of %d rounds, 1 thread)\n", rounds);
        fmsa_cpu_aligned_free(a);
        fmsa_cpu_aligned_free(bp);
        fmsa_cpu_aligned_free(c);
    }
    return 0;
}
#else
int main(void) {
    fprintf(stderr, "cpu_amx_probe: built without AMX (needs -mamx-tile -mamx-bf16)\n");
    return 1;
}
#endif /* defined(__AMX_TILE__) && defined(__AMX_BF16__) */
