/*
 * AVX-512F kernel path (Skylake-SP and later Xeons, Zen 4+).  Compiled with
 * -mavx512f/bw/vl/dq (CMakeLists.txt); called only after the dispatcher saw
 * those features in cpuid.
 *
 * The product is an 8 x 32 register-blocked micro-kernel: 16 zmm
 * accumulators (two FMA ports x 4 cycles of latency need 8 in flight), 2 zmm
 * of B, and A broadcast straight from memory into the FMA ({1to16}), 19 of
 * the 32 zmm registers.  8 rows divide every planner Br (multiples of 16).
 * Column tails use AVX-512 write masks, so any n costs one masked block.
 * Each C element is one FMA chain over p = 0 .. k-1, as on every path.
 *
 * bf16 inputs (forward) use vdpbf16ps (AVX512-BF16) where the CPU has it:
 * an 8 x 32 block of fp32 accumulators, each step one 32-bit broadcast of an
 * A pair and one zmm of B pairs per 16 columns (the panel layout of
 * cpu_kernels.h), two products per lane per instruction.  Without
 * AVX512-BF16 the dispatcher takes the _nobf16 table (bf16 staged in fp32).
 * fp16 inputs always take the fp32 path: rounding fp16 Q/K to bf16 would
 * lose 3 mantissa bits the naive fp16 implementation keeps.
 *
 * NOT RUN on the machine this was written on (AVX2 only): it compiles there,
 * and bench/cpu_device_run.sh checks it against fp64 on an AVX-512 CPU.
 */
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_kern_x86.h"

#ifdef FMSA_CPU_HAVE_AVX512_KERNELS
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_exp2.h"
#include "common/fmsa_softmax.h"

#define AVX512_MR 8  ///< rows of C per micro-kernel call
#define AVX512_NR 32 ///< columns of C per micro-kernel call (2 zmm)

#define AVX512_INLINE static inline __attribute__((always_inline))

/// Lanes [0, r) set, r in [0, 16].
AVX512_INLINE __mmask16 avx512_mask(int r) {
    return r >= 16 ? (__mmask16)0xffff : r <= 0 ? (__mmask16)0 : (__mmask16)((1u << r) - 1u);
}

/// The micro-kernel: mr rows (1..8) x nv zmm columns (1 or 2), masked when tail.
/// Named accumulators: GCC keeps an array of vectors on the stack.
AVX512_INLINE void avx512_ukr(const int mr, const int nv, const int tail, int k, const float *a,
                              int64_t rsa, int64_t csa, const float *b, int64_t ldb, float *c,
                              int64_t ldc, int accumulate, __mmask16 m0, __mmask16 m1) {
    __m512 x0 = _mm512_setzero_ps(), y0 = x0, x1 = x0, y1 = x0, x2 = x0, y2 = x0, x3 = x0;
    __m512 y3 = x0, x4 = x0, y4 = x0, x5 = x0, y5 = x0, x6 = x0, y6 = x0, x7 = x0, y7 = x0;
#define AVX512_LD(ptr, mk) (tail ? _mm512_maskz_loadu_ps((mk), (ptr)) : _mm512_loadu_ps(ptr))
#define AVX512_ST(ptr, mk, v)                                                                  \
    do {                                                                                       \
        if (tail) _mm512_mask_storeu_ps((ptr), (mk), (v));                                     \
        else _mm512_storeu_ps((ptr), (v));                                                     \
    } while (0)
#define AVX512_ROW(I, OP)                                                                      \
    if (mr > I) {                                                                              \
        OP(x##I, y##I, I);                                                                     \
    }
#define AVX512_LOADC(X, Y, I)                                                                  \
    X = AVX512_LD(c + I * ldc, m0);                                                            \
    if (nv == 2) Y = AVX512_LD(c + I * ldc + 16, m1);
#define AVX512_FMA(X, Y, I)                                                                    \
    {                                                                                          \
        const __m512 ai = _mm512_set1_ps(ap[I * rsa]);                                         \
        X = _mm512_fmadd_ps(ai, b0, X);                                                        \
        if (nv == 2) Y = _mm512_fmadd_ps(ai, b1, Y);                                           \
    }
#define AVX512_STOREC(X, Y, I)                                                                 \
    AVX512_ST(c + I * ldc, m0, X);                                                             \
    if (nv == 2) AVX512_ST(c + I * ldc + 16, m1, Y);
#define AVX512_ALL(OP) AVX512_ROW(0, OP) AVX512_ROW(1, OP) AVX512_ROW(2, OP) AVX512_ROW(3, OP) \
                       AVX512_ROW(4, OP) AVX512_ROW(5, OP) AVX512_ROW(6, OP) AVX512_ROW(7, OP)
    if (accumulate) {
        AVX512_ALL(AVX512_LOADC)
    }
    for (int p = 0; p < k; ++p) {
        const float *bp = b + p * ldb, *ap = a + p * csa;
        const __m512 b0 = AVX512_LD(bp, m0);
        const __m512 b1 = nv == 2 ? AVX512_LD(bp + 16, m1) : b0;
        AVX512_ALL(AVX512_FMA)
    }
    AVX512_ALL(AVX512_STOREC)
#undef AVX512_ALL
#undef AVX512_STOREC
#undef AVX512_FMA
#undef AVX512_LOADC
#undef AVX512_ROW
#undef AVX512_ST
#undef AVX512_LD
}

/// Instances for mr = 1..8 with constant nv / tail.
#define AVX512_ROWS(NV, TAIL)                                                                  \
    static void avx512_block_##NV##_##TAIL(int mr, int k, const float *a, int64_t rsa,        \
                                           int64_t csa, const float *b, int64_t ldb, float *c,\
                                           int64_t ldc, int acc, __mmask16 m0, __mmask16 m1) {\
        switch (mr) {                                                                          \
        case 8: avx512_ukr(8, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        case 7: avx512_ukr(7, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        case 6: avx512_ukr(6, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        case 5: avx512_ukr(5, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        case 4: avx512_ukr(4, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        case 3: avx512_ukr(3, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        case 2: avx512_ukr(2, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;  \
        default: avx512_ukr(1, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break; \
        }                                                                                      \
    }
AVX512_ROWS(2, 0)
AVX512_ROWS(2, 1)
AVX512_ROWS(1, 0)
AVX512_ROWS(1, 1)

void fmsa_cpu_avx512_gemm(int m, int n, int k, const float *a, int64_t rsa, int64_t csa,
                        const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate) {
    /* column blocks outer: a 32-wide sliver of B stays in L1 while A streams */
    for (int j = 0; j < n; j += AVX512_NR) {
        const int nr = n - j < AVX512_NR ? n - j : AVX512_NR;
        const __mmask16 m0 = avx512_mask(nr), m1 = avx512_mask(nr - 16);
        for (int i = 0; i < m; i += AVX512_MR) {
            const int mr = m - i < AVX512_MR ? m - i : AVX512_MR;
            const float *ai = a + i * rsa;
            float *cij = c + i * ldc + j;
            if (nr == 32) avx512_block_2_0(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
            else if (nr > 16) avx512_block_2_1(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
            else if (nr == 16) avx512_block_1_0(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
            else avx512_block_1_1(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
        }
    }
}

/// 2^x per lane (cpu_exp2.h: same polynomial and constants as the scalar
/// form).  The power of two is applied with vscalefps, p * 2^n in one
/// rounding, which equals the scalar form's multiply by the constructed 2^n
/// for every n >= -126; below that (and for -inf, whose n - n is NaN) the
/// lane is zeroed by the mask of the same vscalefps, as the scalar form
/// returns 0 there.  The mask is "not less than -126", true for NaN, so a NaN
/// input stays NaN.  Every caller passes x <= ~0 (a score minus its row's
/// maximum or log-sum-exp), so the scalar form's clamp at +127 is not needed.
/// 10 vector operations with the degree-6 polynomial (b16 = 0), 8 with the
/// degree-4 one of the bf16 probabilities (b16 = 1, a constant after inlining).
AVX512_INLINE __m512 avx512_exp2_poly(__m512 x, const int b16) {
    /* f = x - round(x) in one vreduceps (exact), n = x - f (exact: n is an
     * integer): one operation fewer than vrndscaleps, which Intel cores run
     * as two; f and n equal the scalar form's for every finite x, and -inf
     * (f = 0, n = -inf) is zeroed by the mask below */
    const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 n = _mm512_sub_ps(x, f);
    __m512 p;
    if (b16) { /* the degree-4 form of the bf16 probabilities (cpu_exp2.h): 8 operations */
        p = _mm512_set1_ps(FMSA_CPU_EXP2_B16_C4);
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_B16_C3));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_B16_C2));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_B16_C1));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_B16_C0));
    } else {
        p = _mm512_set1_ps(FMSA_CPU_EXP2_C6);
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C5));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C4));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C3));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C2));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C1));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    }
    return _mm512_maskz_scalef_ps(
        _mm512_cmp_ps_mask(x, _mm512_set1_ps(FMSA_CPU_EXP2_LO), _CMP_NLT_UQ), p, n);
}
#define avx512_exp2(x) avx512_exp2_poly((x), 0)
#define avx512_exp2_b16(x) avx512_exp2_poly((x), 1)

/// Horizontal sum in a fixed order (halves, then the AVX2 path's 8-lane order).
AVX512_INLINE float avx512_hsum(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX512_INLINE float avx512_row_max(const float *x, int n) {
    /* two chains (max is exact, so the split changes nothing but latency) */
    __m512 mx = _mm512_set1_ps(-INFINITY), m2 = mx;
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + j));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + j + 16));
    }
    mx = _mm512_max_ps(mx, m2);
    for (; j + 16 <= n; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + j));
    if (j < n) mx = _mm512_mask_max_ps(mx, avx512_mask(n - j), mx, _mm512_maskz_loadu_ps(avx512_mask(n - j), x + j));
    return _mm512_reduce_max_ps(mx);
}

AVX512_INLINE float avx512_row_exp2_sum(float *x, int n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 p = avx512_exp2(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
        _mm512_storeu_ps(x + j, p);
        sum = _mm512_add_ps(sum, p);
    }
    if (j < n) {
        const __mmask16 mk = avx512_mask(n - j);
        const __m512 p = _mm512_maskz_mov_ps(
            mk, avx512_exp2(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + j), vm)));
        _mm512_mask_storeu_ps(x + j, mk, p);
        sum = _mm512_add_ps(sum, p);
    }
    return avx512_hsum(sum);
}

AVX512_INLINE void avx512_row_scale(float *x, int n, float c) {
    const __m512 vc = _mm512_set1_ps(c);
    int j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), vc));
    if (j < n) {
        const __mmask16 mk = avx512_mask(n - j);
        _mm512_mask_storeu_ps(x + j, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + j), vc));
    }
}

float fmsa_cpu_avx512_row_max(const float *x, int n) { return avx512_row_max(x, n); }
void fmsa_cpu_avx512_row_scale(float *x, int n, float c) { avx512_row_scale(x, n, c); }

/// The forward's softmax step of a score tile (cpu_kernels.h).
FMSA_CPU_DEFINE_TILE_SOFTMAX(, fmsa_cpu_avx512_tile_softmax, avx512_row_max, avx512_row_scale,
                            avx512_row_exp2_sum)

void fmsa_cpu_avx512_row_bwd_ds(float *s, float *dp, const float *g, int n, float lse2,
                              float delta) {
    const __m512 vl = _mm512_set1_ps(lse2), vd = _mm512_set1_ps(delta);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 mk = avx512_mask(n - j);
        const __m512 p = avx512_exp2(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vl));
        __m512 ds = _mm512_mul_ps(p, _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, dp + j), vd));
        if (g) ds = _mm512_mul_ps(ds, _mm512_maskz_loadu_ps(mk, g + j));
        /* masked key (p = 0): dS = 0 even if dP is not finite */
        ds = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(p, _mm512_setzero_ps(), _CMP_NEQ_UQ), ds);
        _mm512_mask_storeu_ps(s + j, mk, p);
        _mm512_mask_storeu_ps(dp + j, mk, ds);
    }
}

/// vdpbf16ps micro-kernel: 8 rows x nv (1 or 2) zmm of C, k/2 pair steps.
AVX512_INLINE void avx512_b16_ukr(const int nv, int k, const uint16_t *a, int64_t lda,
                                  const uint16_t *b0p, const uint16_t *b1p, float *c,
                                  int64_t ldc, int accumulate) {
    __m512 x0 = _mm512_setzero_ps(), y0 = x0, x1 = x0, y1 = x0, x2 = x0, y2 = x0, x3 = x0;
    __m512 y3 = x0, x4 = x0, y4 = x0, x5 = x0, y5 = x0, x6 = x0, y6 = x0, x7 = x0, y7 = x0;
#define B16_ALL(OP) OP(x0, y0, 0) OP(x1, y1, 1) OP(x2, y2, 2) OP(x3, y3, 3) OP(x4, y4, 4) \
                    OP(x5, y5, 5) OP(x6, y6, 6) OP(x7, y7, 7)
#define B16_LOADC(X, Y, I)                                                                     \
    X = _mm512_loadu_ps(c + I * ldc);                                                          \
    if (nv == 2) Y = _mm512_loadu_ps(c + I * ldc + 16);
#define B16_DOT(X, Y, I)                                                                       \
    {                                                                                          \
        int32_t pair;                                                                          \
        __m512i ai;                                                                            \
        memcpy(&pair, a + I * lda + 2 * p2, sizeof pair);                                      \
        ai = _mm512_set1_epi32(pair);                                                          \
        X = _mm512_dpbf16_ps(X, (__m512bh)ai, (__m512bh)b0);                                   \
        if (nv == 2) Y = _mm512_dpbf16_ps(Y, (__m512bh)ai, (__m512bh)b1);                      \
    }
#define B16_STOREC(X, Y, I)                                                                    \
    _mm512_storeu_ps(c + I * ldc, X);                                                          \
    if (nv == 2) _mm512_storeu_ps(c + I * ldc + 16, Y);
    if (accumulate) {
        B16_ALL(B16_LOADC)
    }
    for (int p2 = 0; p2 < k / 2; ++p2) {
        const __m512i b0 = _mm512_loadu_si512(b0p + p2 * 32);
        const __m512i b1 = nv == 2 ? _mm512_loadu_si512(b1p + p2 * 32) : b0;
        B16_ALL(B16_DOT)
    }
    B16_ALL(B16_STOREC)
#undef B16_STOREC
#undef B16_DOT
#undef B16_LOADC
#undef B16_ALL
}

static void avx512_gemm_b16(int m, int n, int k, const uint16_t *a, int64_t lda,
                            const uint16_t *bp, int kb, float *c, int64_t ldc, int accumulate) {
    const int64_t half = kb / 2; /* pair rows per 16-column block of the panel */
    for (int j = 0; j < n; j += 32) {
        const uint16_t *b0 = bp + (int64_t)(j / 16) * half * 32, *b1 = b0 + half * 32;
        for (int i = 0; i < m; i += 8) {
            if (n - j >= 32)
                avx512_b16_ukr(2, k, a + i * lda, lda, b0, b1, c + i * ldc + j, ldc, accumulate);
            else
                avx512_b16_ukr(1, k, a + i * lda, lda, b0, b0, c + i * ldc + j, ldc, accumulate);
        }
    }
}

float fmsa_cpu_avx512_row_exp2_b16(const float *x, int n, float scale, float m, uint16_t *dst,
                                   int npad, float *xmax) {
    const __m512 vm = _mm512_set1_ps(m), vs = _mm512_set1_ps(scale);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    __m512 mx0 = ninf, mx1 = ninf;
    int j = 0;
    /* 64 whole columns per step, no masks (computing and moving a mask costs
     * port-5 operations on Intel cores, the port the exponentials need), two
     * sum and max chains; one vcvtne2ps2bf16 rounds 32 values (one operation
     * fewer than two vcvtneps2bf16).  bench/cpu_kernel_bench 64 256, 1
     * thread, over the 32-column masked loop alone: Zen 5 0.100 -> 0.081
     * ns/score, device Xeon (amx) 0.256-0.383 -> 0.221-0.260 in five
     * alternating rounds (bench/RESULTS.md).  The
     * sums are fixed by n, so results still do not depend on threads. */
    for (; j + 64 <= n && j + 64 <= npad; j += 64) {
        const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
        const __m512 x2 = _mm512_loadu_ps(x + j + 32), x3 = _mm512_loadu_ps(x + j + 48);
        const __m512 p0 = avx512_exp2_b16(_mm512_fmsub_ps(x0, vs, vm));
        const __m512 p1 = avx512_exp2_b16(_mm512_fmsub_ps(x1, vs, vm));
        const __m512 p2 = avx512_exp2_b16(_mm512_fmsub_ps(x2, vs, vm));
        const __m512 p3 = avx512_exp2_b16(_mm512_fmsub_ps(x3, vs, vm));
        _mm512_storeu_si512(dst + j, (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
        _mm512_storeu_si512(dst + j + 32, (__m512i)_mm512_cvtne2ps_pbh(p3, p2));
        sum0 = _mm512_add_ps(sum0, _mm512_add_ps(p0, p1));
        sum1 = _mm512_add_ps(sum1, _mm512_add_ps(p2, p3));
        mx0 = _mm512_max_ps(mx0, _mm512_max_ps(x0, x1));
        mx1 = _mm512_max_ps(mx1, _mm512_max_ps(x2, x3));
    }
    for (; j < npad; j += 32) { /* the rest: lanes past n load as -inf, so their exp2 is 0 */
        const __mmask16 m0 = avx512_mask(n - j), m1 = avx512_mask(n - j - 16);
        const int left = npad - j;
        const __mmask32 st = left >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << left) - 1u);
        const __m512 x0 = _mm512_mask_loadu_ps(ninf, m0, x + j);
        const __m512 x1 = _mm512_mask_loadu_ps(ninf, m1, x + j + 16);
        const __m512 p0 = avx512_exp2_b16(_mm512_fmsub_ps(x0, vs, vm));
        const __m512 p1 = avx512_exp2_b16(_mm512_fmsub_ps(x1, vs, vm));
        _mm512_mask_storeu_epi16(dst + j, st, (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
        sum0 = _mm512_add_ps(sum0, _mm512_add_ps(p0, p1));
        mx0 = _mm512_max_ps(mx0, _mm512_max_ps(x0, x1));
    }
    if (xmax) *xmax = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
    return avx512_hsum(_mm512_add_ps(sum0, sum1));
}

void fmsa_cpu_avx512_words_t16(const void *const src[16], int words, int words_pad, uint32_t *out,
                               int64_t ostride) {
    for (int w0 = 0; w0 < words_pad; w0 += 16) {
        const __mmask16 mk = avx512_mask(words - w0);
        __m512i r[16], t[16];
        for (int i = 0; i < 16; ++i)
            r[i] = src[i] ? _mm512_maskz_loadu_epi32(mk, (const uint32_t *)src[i] + w0)
                          : _mm512_setzero_si512();
        /* 16 x 16 transpose of words: pairs of rows, then quads (within each
         * 128-bit lane), then the lanes: u[4g + m] lane L holds word 4L + m
         * of rows 4g .. 4g + 3 */
        for (int i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        }
        for (int g = 0; g < 16; g += 4) {
            r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
            r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
            r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
            r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
        }
        for (int m = 0; m < 4; ++m) {
            const __m512i x0 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44);
            const __m512i x1 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xEE);
            const __m512i y0 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44);
            const __m512i y1 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xEE);
            const __m512i rows[4] = {_mm512_shuffle_i32x4(x0, y0, 0x88),
                                     _mm512_shuffle_i32x4(x0, y0, 0xDD),
                                     _mm512_shuffle_i32x4(x1, y1, 0x88),
                                     _mm512_shuffle_i32x4(x1, y1, 0xDD)};
            for (int q = 0; q < 4; ++q) /* output row w0 + 4q + m */
                if (w0 + 4 * q + m < words_pad)
                    _mm512_storeu_si512(out + (int64_t)(w0 + 4 * q + m) * ostride, rows[q]);
        }
    }
}

void fmsa_cpu_avx512_pack_b16_pair_rows(const uint16_t *const src[32], int col0, int n,
                                        uint16_t *out) {
    /* element 2i of an output row is src[2r][col0 + i], 2i + 1 is src[2r + 1][col0 + i]
     * (the second row sits in the upper half of the permuted register) */
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    const __mmask16 mk = avx512_mask(n - col0);
    for (int r = 0; r < 16; ++r) {
        const uint16_t *s0 = src[2 * r], *s1 = src[2 * r + 1];
        const __m256i a = s0 ? _mm256_maskz_loadu_epi16(mk, s0 + col0) : _mm256_setzero_si256();
        const __m256i b = s1 ? _mm256_maskz_loadu_epi16(mk, s1 + col0) : _mm256_setzero_si256();
        const __m512i ab = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
        _mm512_storeu_si512(out + r * 32, _mm512_permutexvar_epi16(idx, ab));
    }
}

void fmsa_cpu_avx512_row_to_b16(const float *x, int n, uint16_t *dst, int npad) {
    for (int j = 0; j < npad; j += 16) {
        const __mmask16 mk = avx512_mask(n - j), st = avx512_mask(npad - j);
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x + j));
        _mm256_mask_storeu_epi16(dst + j, st, (__m256i)h);
    }
}

/// The panel layout of cpu_kernels.h from a row-major fp32 tile: per 16
/// columns and pair of rows, one vcvtne2ps2bf16 (both rows, rounded to
/// nearest even) and one vpermw that interleaves them into (even, odd) pairs.
void fmsa_cpu_avx512_pack_b16_rows(int k, int n, const float *b, int64_t ldb, uint16_t *dst) {
    static const uint16_t pairs[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_loadu_si512(pairs);
    const int kp = (k + 31) / 32 * 32, np = (n + 15) / 16 * 16;
    for (int jb = 0; jb < np / 16; ++jb) {
        const __mmask16 mk = avx512_mask(n - jb * 16);
        const float *col = b + jb * 16;
        uint16_t *out = dst + (int64_t)jb * (kp / 2) * 32;
        for (int p = 0; p < kp; p += 2, out += 32) {
            const __m512 r0 = p < k ? _mm512_maskz_loadu_ps(mk, col + p * ldb) : _mm512_setzero_ps();
            const __m512 r1 =
                p + 1 < k ? _mm512_maskz_loadu_ps(mk, col + (p + 1) * ldb) : _mm512_setzero_ps();
            const __m512bh h = _mm512_cvtne2ps_pbh(r1, r0); /* r0 in elements 0-15, r1 in 16-31 */
            _mm512_storeu_si512(out, _mm512_permutexvar_epi16(idx, (__m512i)h));
        }
    }
}

static const fmsa_cpu_kernels avx512_table = {
    .name = "avx512",        /* FLASHMSA_CPU_KERNEL=avx512 */
    .isa = FMSA_CPU_ISA_AVX512,
    .lanes = 16,             /* zmm */
    .gemm = fmsa_cpu_avx512_gemm,
    .row_max = fmsa_cpu_avx512_row_max,
    .row_scale = fmsa_cpu_avx512_row_scale,
    .tile_softmax = fmsa_cpu_avx512_tile_softmax,
    .row_bwd_ds = fmsa_cpu_avx512_row_bwd_ds,
    .b16_begin = NULL,
    .gemm_b16 = avx512_gemm_b16, /* vdpbf16ps for bf16 inputs */
    .row_exp2_b16 = fmsa_cpu_avx512_row_exp2_b16,
    .row_to_b16 = fmsa_cpu_avx512_row_to_b16,
    .pack_b16_rows = fmsa_cpu_avx512_pack_b16_rows,
    .words_t16 = fmsa_cpu_avx512_words_t16,
    .pack_b16_pair_rows = fmsa_cpu_avx512_pack_b16_pair_rows,
};

/// The same without AVX512-BF16 (bf16 inputs staged in fp32).
static const fmsa_cpu_kernels avx512_nobf16_table = {
    .name = "avx512",        /* FLASHMSA_CPU_KERNEL=avx512 on a CPU without AVX512-BF16 */
    .isa = FMSA_CPU_ISA_AVX512,
    .lanes = 16,
    .gemm = fmsa_cpu_avx512_gemm,
    .row_max = fmsa_cpu_avx512_row_max,
    .row_scale = fmsa_cpu_avx512_row_scale,
    .tile_softmax = fmsa_cpu_avx512_tile_softmax,
    .row_bwd_ds = fmsa_cpu_avx512_row_bwd_ds,
    .b16_begin = NULL,
    .gemm_b16 = NULL,
    .row_exp2_b16 = NULL,
};

const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512(void) { return &avx512_table; }
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512_nobf16(void) { return &avx512_nobf16_table; }

#else
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512(void) { return NULL; } /* not x86-64 GNU */
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512_nobf16(void) { return NULL; }
#endif /* FMSA_CPU_HAVE_AVX512_KERNELS */
