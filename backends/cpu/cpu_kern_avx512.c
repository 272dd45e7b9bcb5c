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
 * bf16/fp16 inputs are staged in fp32 like on every other path (the
 * vdpbf16ps / AMX products for bf16 are not written yet: gemm_b16 is NULL).
 *
 * NOT RUN on the machine this was written on (AVX2 only): it compiles there,
 * and bench/cpu_device_run.sh checks it against fp64 on an AVX-512 CPU.
 */
#include "backends/cpu/cpu_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#include <math.h>

#include "backends/cpu/cpu_exp2.h"

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

static void avx512_gemm(int m, int n, int k, const float *a, int64_t rsa, int64_t csa,
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

/// 2^x per lane (cpu_exp2.h: same steps and constants as the scalar form).
AVX512_INLINE __m512 avx512_exp2(__m512 x) {
    const __m512 lo = _mm512_set1_ps(FMSA_CPU_EXP2_LO);
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(FMSA_CPU_EXP2_HI), x); /* NaN stays NaN */
    const __m512 n = _mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(xc, n);
    __m512 p = _mm512_set1_ps(FMSA_CPU_EXP2_C6);
    __m512i e;
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C5));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(FMSA_CPU_EXP2_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    e = _mm512_cvtps_epi32(_mm512_max_ps(n, lo));
    e = _mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23);
    p = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    /* -inf and tiny -> 0 */
    return _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), p);
}

/// Horizontal sum in a fixed order (halves, then the AVX2 path's 8-lane order).
AVX512_INLINE float avx512_hsum(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static float avx512_row_max(const float *x, int n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + j));
    if (j < n) mx = _mm512_mask_max_ps(mx, avx512_mask(n - j), mx, _mm512_maskz_loadu_ps(avx512_mask(n - j), x + j));
    return _mm512_reduce_max_ps(mx);
}

static float avx512_row_exp2_sum(float *x, int n, float m) {
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

static void avx512_row_scale(float *x, int n, float c) {
    const __m512 vc = _mm512_set1_ps(c);
    int j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), vc));
    if (j < n) {
        const __mmask16 mk = avx512_mask(n - j);
        _mm512_mask_storeu_ps(x + j, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + j), vc));
    }
}

static void avx512_row_bwd_ds(float *s, float *dp, const float *g, int n, float lse2,
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

static const fmsa_cpu_kernels avx512_table = {
    .name = "avx512",        /* FLASHMSA_CPU_KERNEL=avx512 */
    .isa = FMSA_CPU_ISA_AVX512,
    .lanes = 16,             /* zmm */
    .gemm = avx512_gemm,
    .row_max = avx512_row_max,
    .row_exp2_sum = avx512_row_exp2_sum,
    .row_scale = avx512_row_scale,
    .row_bwd_ds = avx512_row_bwd_ds,
    .gemm_b16 = NULL,        /* bf16/fp16 inputs are staged in fp32 */
    .pack_b16 = NULL,
};

const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512(void) { return &avx512_table; }

#else
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512(void) { return NULL; } /* not x86-64 GNU */
#endif /* __AVX512F__ && __AVX512DQ__ */
