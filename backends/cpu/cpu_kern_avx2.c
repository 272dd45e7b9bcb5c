/*
 * AVX2 + FMA kernel path (x86-64 since Haswell / Zen).  This file is compiled
 * with -mavx2 -mfma (CMakeLists.txt) and only ever called after the
 * dispatcher has seen both features in cpuid.
 *
 * The product is a 6 x 16 register-blocked micro-kernel (BLIS's Haswell
 * shape): 12 ymm accumulators, 2 ymm of B and one broadcast of A per step,
 * 15 of the 16 ymm registers.  Two FMA pipes of 4-5 cycles latency need at
 * least 10 independent accumulators to stay busy; 12 gives slack.  Edges are
 * instances of the same inline kernel with fewer rows (mr < 6), one vector
 * of columns, or masked loads/stores, so every size runs at full speed
 * except the last partial block.  Each C element is one FMA chain over
 * p = 0 .. k-1: the summation order is the same for any m, n, or thread.
 */
#include "backends/cpu/cpu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <math.h>

#include "backends/cpu/cpu_exp2.h"
#include "common/fmsa_softmax.h"

#define AVX2_MR 6  ///< rows of C per micro-kernel call
#define AVX2_NR 16 ///< columns of C per micro-kernel call (2 ymm)

#define AVX2_INLINE static inline __attribute__((always_inline))

/// Lanes [0, r) set, for r in [0, 8].
AVX2_INLINE __m256i avx2_mask(int r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// The micro-kernel: mr rows (1..6) x nv ymm columns (1 or 2), masked when tail.
/// Accumulators are named variables, not an array: GCC keeps an array of
/// __m256 on the stack even when every index is a constant.
AVX2_INLINE void avx2_ukr(const int mr, const int nv, const int tail, int k, const float *a,
                          int64_t rsa, int64_t csa, const float *b, int64_t ldb, float *c,
                          int64_t ldc, int accumulate, __m256i m0, __m256i m1) {
    __m256 x0 = _mm256_setzero_ps(), y0 = x0, x1 = x0, y1 = x0, x2 = x0, y2 = x0;
    __m256 x3 = x0, y3 = x0, x4 = x0, y4 = x0, x5 = x0, y5 = x0;
#define AVX2_LD(ptr, mk) (tail ? _mm256_maskload_ps((ptr), (mk)) : _mm256_loadu_ps(ptr))
#define AVX2_ST(ptr, mk, v)                                                                    \
    do {                                                                                       \
        if (tail) _mm256_maskstore_ps((ptr), (mk), (v));                                       \
        else _mm256_storeu_ps((ptr), (v));                                                     \
    } while (0)
#define AVX2_ROW(I, OP)                                                                        \
    if (mr > I) {                                                                              \
        OP(x##I, y##I, I);                                                                     \
    }
#define AVX2_LOADC(X, Y, I)                                                                    \
    X = AVX2_LD(c + I * ldc, m0);                                                              \
    if (nv == 2) Y = AVX2_LD(c + I * ldc + 8, m1);
#define AVX2_FMA(X, Y, I)                                                                      \
    {                                                                                          \
        const __m256 ai = _mm256_broadcast_ss(ap + I * rsa);                                   \
        X = _mm256_fmadd_ps(ai, b0, X);                                                        \
        if (nv == 2) Y = _mm256_fmadd_ps(ai, b1, Y);                                           \
    }
#define AVX2_STOREC(X, Y, I)                                                                   \
    AVX2_ST(c + I * ldc, m0, X);                                                               \
    if (nv == 2) AVX2_ST(c + I * ldc + 8, m1, Y);
#define AVX2_ALL(OP) AVX2_ROW(0, OP) AVX2_ROW(1, OP) AVX2_ROW(2, OP) AVX2_ROW(3, OP) \
                     AVX2_ROW(4, OP) AVX2_ROW(5, OP)
    if (accumulate) {
        AVX2_ALL(AVX2_LOADC)
    }
    for (int p = 0; p < k; ++p) {
        const float *bp = b + p * ldb, *ap = a + p * csa;
        const __m256 b0 = AVX2_LD(bp, m0);
        const __m256 b1 = nv == 2 ? AVX2_LD(bp + 8, m1) : b0;
        AVX2_ALL(AVX2_FMA)
    }
    AVX2_ALL(AVX2_STOREC)
#undef AVX2_ALL
#undef AVX2_STOREC
#undef AVX2_FMA
#undef AVX2_LOADC
#undef AVX2_ROW
#undef AVX2_ST
#undef AVX2_LD
}

/// Instances for mr = 1..6 with constant nv / tail (so the loops unroll and
/// the accumulators live in registers).
#define AVX2_ROWS(NV, TAIL)                                                                    \
    static void avx2_block_##NV##_##TAIL(int mr, int k, const float *a, int64_t rsa,          \
                                         int64_t csa, const float *b, int64_t ldb, float *c,  \
                                         int64_t ldc, int acc, __m256i m0, __m256i m1) {      \
        switch (mr) {                                                                          \
        case 6: avx2_ukr(6, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;    \
        case 5: avx2_ukr(5, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;    \
        case 4: avx2_ukr(4, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;    \
        case 3: avx2_ukr(3, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;    \
        case 2: avx2_ukr(2, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;    \
        default: avx2_ukr(1, NV, TAIL, k, a, rsa, csa, b, ldb, c, ldc, acc, m0, m1); break;   \
        }                                                                                      \
    }
AVX2_ROWS(2, 0)
AVX2_ROWS(2, 1)
AVX2_ROWS(1, 0)
AVX2_ROWS(1, 1)

static void avx2_gemm(int m, int n, int k, const float *a, int64_t rsa, int64_t csa,
                      const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate) {
    const __m256i full = _mm256_set1_epi32(-1);
    /* column blocks outer: a 16-wide sliver of B (k x 64 bytes) stays in L1
     * while every row block of A streams past it */
    for (int j = 0; j < n; j += AVX2_NR) {
        const int nr = n - j < AVX2_NR ? n - j : AVX2_NR;
        const __m256i m0 = nr >= 8 ? full : avx2_mask(nr), m1 = avx2_mask(nr - 8);
        for (int i = 0; i < m; i += AVX2_MR) {
            const int mr = m - i < AVX2_MR ? m - i : AVX2_MR;
            const float *ai = a + i * rsa;
            float *cij = c + i * ldc + j;
            if (nr == 16) avx2_block_2_0(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
            else if (nr > 8) avx2_block_2_1(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
            else if (nr == 8) avx2_block_1_0(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
            else avx2_block_1_1(mr, k, ai, rsa, csa, b + j, ldb, cij, ldc, accumulate, m0, m1);
        }
    }
}

/// 2^x per lane (cpu_exp2.h: same steps and constants as the scalar form).
AVX2_INLINE __m256 avx2_exp2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(FMSA_CPU_EXP2_LO);
    const __m256 xc = _mm256_min_ps(_mm256_set1_ps(FMSA_CPU_EXP2_HI), x); /* NaN stays NaN */
    const __m256 n = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(xc, n);
    __m256 p = _mm256_set1_ps(FMSA_CPU_EXP2_C6);
    __m256i e;
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(FMSA_CPU_EXP2_C5));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(FMSA_CPU_EXP2_C4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(FMSA_CPU_EXP2_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(FMSA_CPU_EXP2_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(FMSA_CPU_EXP2_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    e = _mm256_cvtps_epi32(_mm256_max_ps(n, lo));
    e = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23);
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), p); /* -inf and tiny -> 0 */
}

AVX2_INLINE float avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX2_INLINE float avx2_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX2_INLINE float avx2_row_max_inline(const float *x, int n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf;
    int j = 0;
    for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + j));
    if (j < n) {
        const __m256i mk = avx2_mask(n - j);
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + j, mk),
                                                _mm256_castsi256_ps(mk)));
    }
    return avx2_hmax(mx);
}

AVX2_INLINE float avx2_row_exp2_sum_inline(float *x, int n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 p = avx2_exp2(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, p);
        sum = _mm256_add_ps(sum, p);
    }
    if (j < n) {
        const __m256i mk = avx2_mask(n - j);
        __m256 p = avx2_exp2(_mm256_sub_ps(_mm256_maskload_ps(x + j, mk), vm));
        p = _mm256_and_ps(p, _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(x + j, mk, p);
        sum = _mm256_add_ps(sum, p);
    }
    return avx2_hsum(sum);
}

AVX2_INLINE void avx2_row_scale_inline(float *x, int n, float c) {
    const __m256 vc = _mm256_set1_ps(c);
    int j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), vc));
    for (; j < n; ++j) x[j] *= c;
}

static float avx2_row_max(const float *x, int n) { return avx2_row_max_inline(x, n); }
static void avx2_row_scale(float *x, int n, float c) { avx2_row_scale_inline(x, n, c); }

/// The forward's softmax step of a score tile (cpu_kernels.h).
FMSA_CPU_DEFINE_TILE_SOFTMAX(static, avx2_tile_softmax, avx2_row_max_inline, avx2_row_scale_inline,
                            avx2_row_exp2_sum_inline)

static void avx2_row_bwd_ds(float *s, float *dp, const float *g, int n, float lse2, float delta) {
    const __m256 vl = _mm256_set1_ps(lse2), vd = _mm256_set1_ps(delta);
    const __m256 zero = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 p = avx2_exp2(_mm256_sub_ps(_mm256_loadu_ps(s + j), vl));
        __m256 ds = _mm256_mul_ps(p, _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd));
        if (g) ds = _mm256_mul_ps(ds, _mm256_loadu_ps(g + j));
        /* masked key (p = 0): dS = 0 even if dP is not finite */
        ds = _mm256_blendv_ps(ds, zero, _mm256_cmp_ps(p, zero, _CMP_EQ_OQ));
        _mm256_storeu_ps(s + j, p);
        _mm256_storeu_ps(dp + j, ds);
    }
    fmsa_cpu_bwd_ds_scalar(s, dp, g, j, n, lse2, delta);
}

/// 8 x 8 transpose of 32-bit elements in place (unpack pairs, then quads, then lanes).
AVX2_INLINE void avx2_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    /* u[4h + m] lane L holds element 4L + m of rows 4h .. 4h + 3 */
    for (int m = 0; m < 4; ++m) {
        r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
        r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
    }
}

/// words_t16 of cpu_kernels.h: two 8 x 8 transposes per 8 words (rows 0-7, 8-15).
static void avx2_words_t16(const void *const src[16], int words, int words_pad, uint32_t *out,
                           int64_t ostride) {
    for (int w0 = 0; w0 < words_pad; w0 += 8) {
        const __m256i mk = avx2_mask(words - w0);
        for (int half = 0; half < 2; ++half) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i) {
                const float *row = (const float *)src[8 * half + i];
                r[i] = row ? _mm256_maskload_ps(row + w0, mk) : _mm256_setzero_ps();
            }
            avx2_transpose8(r);
            for (int i = 0; i < 8 && w0 + i < words_pad; ++i)
                _mm256_storeu_ps((float *)(out + (int64_t)(w0 + i) * ostride) + 8 * half, r[i]);
        }
    }
}

static const fmsa_cpu_kernels avx2_table = {
    .name = "avx2",          /* FLASHMSA_CPU_KERNEL=avx2 */
    .isa = FMSA_CPU_ISA_AVX2,
    .lanes = 8,              /* ymm */
    .gemm = avx2_gemm,
    .row_max = avx2_row_max,
    .row_scale = avx2_row_scale,
    .tile_softmax = avx2_tile_softmax,
    .row_bwd_ds = avx2_row_bwd_ds,
    .b16_begin = NULL,
    .gemm_b16 = NULL,        /* bf16/fp16 inputs are staged in fp32 */
    .row_exp2_b16 = NULL,
    .words_t16 = avx2_words_t16, /* the fp32 Kᵀ tiles */
};

const fmsa_cpu_kernels *fmsa_cpu_kernels_avx2(void) { return &avx2_table; }

#else
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx2(void) { return NULL; } /* not x86-64 GNU */
#endif /* __AVX2__ && __FMA__ */
