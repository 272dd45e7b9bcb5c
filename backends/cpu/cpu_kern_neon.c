/*
 * AArch64 NEON (Advanced SIMD) kernel path: every AArch64 CPU has it, so the
 * dispatcher picks it on any arm64 machine unless FLASHMSA_CPU_KERNEL says
 * otherwise.  fp32 products and row steps on 128-bit vectors; bf16/fp16
 * inputs are staged in fp32 as on AVX2 (no BF16/SVE products yet).
 *
 * The product is an 8 x 8 register-blocked micro-kernel: 16 accumulators of
 * 4 lanes, 2 vectors of B and one A value broadcast by the FMA's scalar
 * operand per step, 19 of the 32 vector registers.  Two to four FMA pipes
 * of 4 cycles latency need 8-16 independent chains; 16 covers the widest
 * cores.  Edges run the same kernel with fewer rows and, for the last
 * columns, partial loads and stores through a 4-float buffer.  Each C
 * element is one FMA chain over p = 0 .. k-1, as on every path.
 *
 * Checked where it was written (x86-64): cross-compiled with
 * aarch64-linux-gnu-gcc 12 and the CPU test grid run under qemu-aarch64
 * (correctness only; no speed was measured on an ARM core).
 */
#include "backends/cpu/cpu_kernels.h"

#if defined(__aarch64__) && (defined(__ARM_NEON) || defined(__ARM_NEON__))
#include <arm_neon.h>
#include <math.h>

#include "backends/cpu/cpu_exp2.h"
#include "common/fmsa_softmax.h"

#define NEON_MR 8 ///< rows of C per micro-kernel call
#define NEON_NR 8 ///< columns of C per micro-kernel call (2 vectors)

#define NEON_INLINE static inline __attribute__((always_inline))

/// Lanes [0, r) of p (r < 4: the rest 0, nothing read past p + r).
NEON_INLINE float32x4_t neon_ld(const float *p, int r) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (r >= 4) return vld1q_f32(p);
    for (int i = 0; i < r; ++i) t[i] = p[i];
    return vld1q_f32(t);
}

/// Stores lanes [0, r) of v to p.
NEON_INLINE void neon_st(float *p, float32x4_t v, int r) {
    float t[4];
    if (r >= 4) {
        vst1q_f32(p, v);
        return;
    }
    vst1q_f32(t, v);
    for (int i = 0; i < r; ++i) p[i] = t[i];
}

/// The micro-kernel: mr rows (1..8) of nr columns (1..8), both constants
/// after inlining except the column tail r0 / r1 (lanes of each vector).
NEON_INLINE void neon_ukr(const int mr, const int nv, int r0, int r1, int k, const float *a,
                          int64_t rsa, int64_t csa, const float *b, int64_t ldb, float *c,
                          int64_t ldc, int accumulate) {
    float32x4_t x[NEON_MR], y[NEON_MR];
    for (int i = 0; i < NEON_MR; ++i) x[i] = y[i] = vdupq_n_f32(0.0f);
    if (accumulate)
        for (int i = 0; i < mr; ++i) {
            x[i] = neon_ld(c + i * ldc, r0);
            if (nv == 2) y[i] = neon_ld(c + i * ldc + 4, r1);
        }
    for (int p = 0; p < k; ++p) {
        const float *bp = b + p * ldb, *ap = a + p * csa;
        const float32x4_t b0 = neon_ld(bp, r0);
        const float32x4_t b1 = nv == 2 ? neon_ld(bp + 4, r1) : b0;
        for (int i = 0; i < mr; ++i) {
            const float ai = ap[i * rsa];
            x[i] = vfmaq_n_f32(x[i], b0, ai);
            if (nv == 2) y[i] = vfmaq_n_f32(y[i], b1, ai);
        }
    }
    for (int i = 0; i < mr; ++i) {
        neon_st(c + i * ldc, x[i], r0);
        if (nv == 2) neon_st(c + i * ldc + 4, y[i], r1);
    }
}

/// Instances for mr = 1..8 with a constant vector count, so the loops unroll
/// and the accumulator arrays become registers (gcc 12 -O3 for aarch64: the
/// k loop of the 8-row instance is 16 register fmla and no stack access).
#define NEON_ROWS(NV)                                                                          \
    static void neon_block_##NV(int mr, int r0, int r1, int k, const float *a, int64_t rsa,    \
                                int64_t csa, const float *b, int64_t ldb, float *c,            \
                                int64_t ldc, int acc) {                                        \
        switch (mr) {                                                                          \
        case 8: neon_ukr(8, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        case 7: neon_ukr(7, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        case 6: neon_ukr(6, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        case 5: neon_ukr(5, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        case 4: neon_ukr(4, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        case 3: neon_ukr(3, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        case 2: neon_ukr(2, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;           \
        default: neon_ukr(1, NV, r0, r1, k, a, rsa, csa, b, ldb, c, ldc, acc); break;          \
        }                                                                                      \
    }
NEON_ROWS(2)
NEON_ROWS(1)

static void neon_gemm(int m, int n, int k, const float *a, int64_t rsa, int64_t csa,
                      const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate) {
    /* column blocks outer: an 8-wide sliver of B (k x 32 bytes) stays in L1
     * while every row block of A streams past it */
    for (int j = 0; j < n; j += NEON_NR) {
        const int nr = n - j < NEON_NR ? n - j : NEON_NR;
        for (int i = 0; i < m; i += NEON_MR) {
            const int mr = m - i < NEON_MR ? m - i : NEON_MR;
            if (nr > 4)
                neon_block_2(mr, 4, nr - 4, k, a + i * rsa, rsa, csa, b + j, ldb,
                             c + i * ldc + j, ldc, accumulate);
            else
                neon_block_1(mr, nr, 0, k, a + i * rsa, rsa, csa, b + j, ldb, c + i * ldc + j,
                             ldc, accumulate);
        }
    }
}

/// 2^x per lane (cpu_exp2.h: same steps and constants as the scalar form;
/// vrndnq rounds half to even, as the scalar form's 1.5 * 2^23 trick does).
NEON_INLINE float32x4_t neon_exp2(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(FMSA_CPU_EXP2_LO);
    const float32x4_t xc = vminq_f32(vdupq_n_f32(FMSA_CPU_EXP2_HI), x); /* NaN stays NaN */
    const float32x4_t n = vrndnq_f32(xc);
    const float32x4_t f = vsubq_f32(xc, n);
    float32x4_t p = vdupq_n_f32(FMSA_CPU_EXP2_C6);
    int32x4_t e;
    p = vfmaq_f32(vdupq_n_f32(FMSA_CPU_EXP2_C5), p, f);
    p = vfmaq_f32(vdupq_n_f32(FMSA_CPU_EXP2_C4), p, f);
    p = vfmaq_f32(vdupq_n_f32(FMSA_CPU_EXP2_C3), p, f);
    p = vfmaq_f32(vdupq_n_f32(FMSA_CPU_EXP2_C2), p, f);
    p = vfmaq_f32(vdupq_n_f32(FMSA_CPU_EXP2_C1), p, f);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, f);
    /* NaN n converts to 0 here (no undefined behaviour); p is NaN anyway */
    e = vcvtq_s32_f32(vmaxq_f32(n, lo));
    e = vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23);
    p = vmulq_f32(p, vreinterpretq_f32_s32(e));
    /* -inf and results below 2^-126 -> 0 */
    return vreinterpretq_f32_u32(
        vbicq_u32(vreinterpretq_u32_f32(p), vcltq_f32(x, lo)));
}

/// The maximum ignoring NaN (maxNum), as the portable path's comparison does:
/// a NaN score still reaches the output through its exponential.
NEON_INLINE float neon_row_max_inline(const float *x, int n) {
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    float out;
    int j = 0;
    for (; j + 4 <= n; j += 4) mx = vmaxnmq_f32(mx, vld1q_f32(x + j));
    out = vmaxnmvq_f32(mx);
    for (; j < n; ++j) out = x[j] > out ? x[j] : out;
    return out;
}

NEON_INLINE float neon_row_exp2_sum_inline(float *x, int n, float m) {
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t sum = vdupq_n_f32(0.0f);
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float32x4_t p = neon_exp2(vsubq_f32(vld1q_f32(x + j), vm));
        vst1q_f32(x + j, p);
        sum = vaddq_f32(sum, p);
    }
    if (j < n) {
        const float32x4_t p = neon_exp2(vsubq_f32(neon_ld(x + j, n - j), vm));
        /* lanes past n loaded 0: exp2(0 - m) is not 0, so they are left out */
        float t[4];
        vst1q_f32(t, p);
        for (int i = 0; i < 4; ++i)
            if (i >= n - j) t[i] = 0.0f;
        neon_st(x + j, vld1q_f32(t), n - j);
        sum = vaddq_f32(sum, vld1q_f32(t));
    }
    return vaddvq_f32(sum);
}

NEON_INLINE void neon_row_scale_inline(float *x, int n, float c) {
    int j = 0;
    for (; j + 4 <= n; j += 4) vst1q_f32(x + j, vmulq_n_f32(vld1q_f32(x + j), c));
    for (; j < n; ++j) x[j] *= c;
}

static float neon_row_max(const float *x, int n) { return neon_row_max_inline(x, n); }
static void neon_row_scale(float *x, int n, float c) { neon_row_scale_inline(x, n, c); }

/// The forward's softmax step of a score tile (cpu_kernels.h).
FMSA_CPU_DEFINE_TILE_SOFTMAX(static, neon_tile_softmax, neon_row_max_inline, neon_row_scale_inline,
                            neon_row_exp2_sum_inline)

static void neon_row_bwd_ds(float *s, float *dp, const float *g, int n, float lse2, float delta) {
    const float32x4_t vl = vdupq_n_f32(lse2), vd = vdupq_n_f32(delta);
    const float32x4_t zero = vdupq_n_f32(0.0f);
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float32x4_t p = neon_exp2(vsubq_f32(vld1q_f32(s + j), vl));
        float32x4_t ds = vmulq_f32(p, vsubq_f32(vld1q_f32(dp + j), vd));
        if (g) ds = vmulq_f32(ds, vld1q_f32(g + j));
        /* masked key (p = 0): dS = 0 even if dP is not finite */
        ds = vbslq_f32(vceqq_f32(p, zero), zero, ds);
        vst1q_f32(s + j, p);
        vst1q_f32(dp + j, ds);
    }
    fmsa_cpu_bwd_ds_scalar(s, dp, g, j, n, lse2, delta);
}

static const fmsa_cpu_kernels neon_table = {
    .name = "neon",          /* FLASHMSA_CPU_KERNEL=neon */
    .isa = FMSA_CPU_ISA_NEON,
    .lanes = 4,              /* 128-bit vectors */
    .gemm = neon_gemm,
    .row_max = neon_row_max,
    .row_scale = neon_row_scale,
    .tile_softmax = neon_tile_softmax,
    .row_bwd_ds = neon_row_bwd_ds,
    .b16_begin = NULL,
    .gemm_b16 = NULL,        /* bf16/fp16 inputs are staged in fp32 */
    .row_exp2_b16 = NULL,
    .words_t16 = NULL,       /* the Kᵀ tiles take the plain C transpose */
};

const fmsa_cpu_kernels *fmsa_cpu_kernels_neon(void) { return &neon_table; }

#else
const fmsa_cpu_kernels *fmsa_cpu_kernels_neon(void) { return NULL; } /* not AArch64 */
#endif /* __aarch64__ NEON */
