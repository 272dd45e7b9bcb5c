/*
 * The portable kernel path: plain C loops whose innermost loop is unit-stride
 * over a restrict-qualified row, which GCC and Clang vectorise for whatever
 * the baseline target is (SSE2 on x86-64, NEON on aarch64), without
 * reassociating any sum.  Compiled a second time with auto-vectorisation off
 * as the "scalar" path (cpu_kern_scalar.c): the plain scalar tiled baseline
 * that `flashmsa bench` reports beside the SIMD paths.
 */
#include <math.h>

#include "backends/cpu/cpu_exp2.h"
#include "backends/cpu/cpu_kernels.h"
#include "common/fmsa_half.h"
#include "common/fmsa_softmax.h"

#ifdef FMSA_CPU_KERN_SCALAR
#define CPU_KERN(name) cpu_scalar_##name ///< the scalar copy's symbols
#else
#define CPU_KERN(name) cpu_generic_##name
#endif /* FMSA_CPU_KERN_SCALAR */

static void CPU_KERN(gemm)(int m, int n, int k, const float *a, int64_t rsa, int64_t csa,
                           const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate) {
    for (int i = 0; i < m; ++i) {
        float *restrict ci = c + (int64_t)i * ldc;
        const float *ai = a + (int64_t)i * rsa;
        if (!accumulate)
            for (int j = 0; j < n; ++j) ci[j] = 0.0f;
        for (int p = 0; p < k; ++p) {
            const float x = ai[(int64_t)p * csa];
            const float *restrict bp = b + (int64_t)p * ldb;
            for (int j = 0; j < n; ++j) ci[j] += x * bp[j];
        }
    }
}

static float CPU_KERN(row_max)(const float *x, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
    return mx;
}

static float CPU_KERN(row_exp2_sum)(float *restrict x, int n, float m) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) x[j] = fmsa_cpu_exp2(x[j] - m); /* vectorised */
    for (int j = 0; j < n; ++j) sum += x[j];                    /* in order */
    return sum;
}

static void CPU_KERN(row_scale)(float *restrict x, int n, float c) {
    for (int j = 0; j < n; ++j) x[j] *= c;
}

FMSA_CPU_DEFINE_TILE_SOFTMAX(static, CPU_KERN(tile_softmax), CPU_KERN(row_max), CPU_KERN(row_scale),
                            CPU_KERN(row_exp2_sum))

static void CPU_KERN(row_bwd_ds)(float *restrict s, float *restrict dp, const float *restrict g,
                                 int n, float lse2, float delta) {
    fmsa_cpu_bwd_ds_scalar(s, dp, g, 0, n, lse2, delta);
}

#ifndef FMSA_CPU_KERN_SCALAR
/* The 16-bit products in plain C, reading the same packed panels as AMX and
 * AVX512-BF16 (cpu_kernels.h): the reference those paths are written against,
 * and the only way to run the bf16 forward pass on a CPU without them. */
/* Each pair is summed odd element first, as vdpbf16ps does (Intel SDM), so
 * this twin rounds in a different order from the fp32 kernels' FMA chain,
 * as the hardware paths do: a pass that silently relies on the two orders
 * agreeing fails the grid here too (it caught the backward's delta).
 * GCC 12.2 at -O3 miscompiles this loop (odd-first order) when it
 * vectorises it, so its loop vectoriser is off for this function. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-vectorize")))
#endif /* GCC */
static void cpu_generic_gemm_b16(int m, int n, int k, const uint16_t *a, int64_t lda,
                                 const uint16_t *bp, int kb, float *c, int64_t ldc,
                                 int accumulate) {
    const int64_t half = (int64_t)(kb + 31) / 32 * 16; /* pair rows per 16-column block */
    for (int i = 0; i < m; ++i) {
        const uint16_t *ai = a + (int64_t)i * lda;
        for (int jb = 0; jb < n / 16; ++jb) {
            float acc[16];
            float *ci = c + (int64_t)i * ldc + jb * 16;
            for (int jj = 0; jj < 16; ++jj) acc[jj] = accumulate ? ci[jj] : 0.0f;
            for (int p2 = 0; p2 < k / 2; ++p2) {
                const float a0 = fmsa_bf16_to_f32(ai[2 * p2]), a1 = fmsa_bf16_to_f32(ai[2 * p2 + 1]);
                const uint16_t *b = bp + (jb * half + p2) * 32;
                for (int jj = 0; jj < 16; ++jj)
                    acc[jj] = (acc[jj] + a1 * fmsa_bf16_to_f32(b[2 * jj + 1])) +
                              a0 * fmsa_bf16_to_f32(b[2 * jj]);
            }
            for (int jj = 0; jj < 16; ++jj) ci[jj] = acc[jj];
        }
    }
}

static float cpu_generic_row_exp2_b16(const float *x, int n, float scale, float m, uint16_t *dst,
                                      int npad, float *xmax) {
    float sum = 0.0f, mx = -INFINITY;
    for (int j = 0; j < n; ++j) {
        const float p = fmsa_cpu_exp2_b16(fmaf(x[j], scale, -m));
        sum += p;
        dst[j] = fmsa_f32_to_bf16(p);
        mx = x[j] > mx ? x[j] : mx;
    }
    for (int j = n; j < npad; ++j) dst[j] = 0;
    if (xmax) *xmax = mx;
    return sum;
}
#endif /* !FMSA_CPU_KERN_SCALAR */

static const fmsa_cpu_kernels CPU_KERN(table) = {
#ifdef FMSA_CPU_KERN_SCALAR
    .name = "scalar",               /* FLASHMSA_CPU_KERNEL=scalar */
    .isa = FMSA_CPU_ISA_SCALAR,
    .lanes = 1,                     /* auto-vectorisation off */
#else
    .name = "generic",              /* FLASHMSA_CPU_KERNEL=generic */
    .isa = FMSA_CPU_ISA_GENERIC,
    .lanes = 4,                     /* SSE2 / NEON baseline */
#endif /* FMSA_CPU_KERN_SCALAR */
    .gemm = CPU_KERN(gemm),
    .row_max = CPU_KERN(row_max),
    .row_scale = CPU_KERN(row_scale),
    .tile_softmax = CPU_KERN(tile_softmax),
    .row_bwd_ds = CPU_KERN(row_bwd_ds),
    .b16_begin = NULL,
    .gemm_b16 = NULL,               /* bf16/fp16 inputs are staged in fp32 */
    .row_exp2_b16 = NULL,
};

#ifdef FMSA_CPU_KERN_SCALAR
const fmsa_cpu_kernels *fmsa_cpu_kernels_scalar(void) { return &CPU_KERN(table); }
#else
const fmsa_cpu_kernels *fmsa_cpu_kernels_generic(void) { return &CPU_KERN(table); }

static const fmsa_cpu_kernels cpu_generic_bf16_table = {
    .name = "generic-bf16",         /* FLASHMSA_CPU_KERNEL=generic-bf16 (never auto) */
    .isa = FMSA_CPU_ISA_GENERIC_BF16,
    .lanes = 4,
    .gemm = cpu_generic_gemm,
    .row_max = cpu_generic_row_max,
    .row_scale = cpu_generic_row_scale,
    .tile_softmax = cpu_generic_tile_softmax,
    .row_bwd_ds = cpu_generic_row_bwd_ds,
    .b16_begin = NULL,
    .gemm_b16 = cpu_generic_gemm_b16, /* bf16 forward in the AMX panel layout */
    .row_exp2_b16 = cpu_generic_row_exp2_b16,
};

const fmsa_cpu_kernels *fmsa_cpu_kernels_generic_bf16(void) { return &cpu_generic_bf16_table; }
#endif /* FMSA_CPU_KERN_SCALAR */
