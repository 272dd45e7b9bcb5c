/*
 * The exp2 every CPU kernel path uses: 2^x = 2^n * p(f), n = round(x),
 * f = x - n in [-0.5, 0.5], p the degree-6 minimax polynomial of Cephes'
 * exp2f.  Measured against exp2 in double over [-30, 0.5]: at most 1.2 ulp
 * (0.93 ulp with FMA), against libm exp2f's 0.5 ulp; the probabilities it
 * makes feed sums whose own rounding is larger, so the output error stays
 * within the correctness rule's 2x-of-naive bound (checked per path).
 *
 * Results below 2^-126 are flushed to 0 (a probability that small is lost
 * against the row's largest, which is 1), and -inf gives exactly 0, which
 * masked keys rely on.  The SIMD paths implement the same steps with the
 * same constants and the same n and f (AVX2: vroundps; AVX-512: vreduceps,
 * then vscalefps for the power of two); whether the polynomial's steps are
 * fused multiply-adds may differ between paths and compilers.
 */
#ifndef FMSA_CPU_EXP2_H
#define FMSA_CPU_EXP2_H

#include <stdint.h>
#include <string.h>

#define FMSA_CPU_EXP2_C6 1.535336188319500e-4f
#define FMSA_CPU_EXP2_C5 1.339887440266574e-3f
#define FMSA_CPU_EXP2_C4 9.618437357674640e-3f
#define FMSA_CPU_EXP2_C3 5.550332471162809e-2f
#define FMSA_CPU_EXP2_C2 2.402264791363012e-1f
#define FMSA_CPU_EXP2_C1 6.931472028550421e-1f
/// 1.5 * 2^23: adding and subtracting it rounds |x| < 2^22 to the nearest integer.
#define FMSA_CPU_EXP2_ROUND 12582912.0f
/// Below this the result would be subnormal: flushed to 0.
#define FMSA_CPU_EXP2_LO (-126.0f)
/// Above this 2^n overflows the exponent field (never reached by softmax inputs).
#define FMSA_CPU_EXP2_HI 127.0f

/// The steps both scalar forms share: x = n + f with n = round(x) (x
/// clamped at FMSA_CPU_EXP2_HI), f in [-0.5, 0.5] ...
static inline float fmsa_cpu_exp2_reduce(float x, float *n) {
    const float xc = x > FMSA_CPU_EXP2_HI ? FMSA_CPU_EXP2_HI : x;
    *n = (xc + FMSA_CPU_EXP2_ROUND) - FMSA_CPU_EXP2_ROUND;
    return xc - *n;
}

/// ... and 2^x = p * 2^n, 0 below 2^-126 and for -inf (p = 2^f from a
/// polynomial), NaN for NaN (p is NaN then).  The clamp of n is written so
/// that a NaN n takes the bound too: the old "n < LO ? LO : n" passed NaN to
/// the int conversion, undefined behaviour found by test_cpu_exp2 under
/// UBSan.  Branch-free, so the generic path's loops stay vectorised.
static inline float fmsa_cpu_exp2_scale(float x, float n, float p) {
    float scale;
    const int32_t bits = ((int32_t)(n >= FMSA_CPU_EXP2_LO ? n : FMSA_CPU_EXP2_LO) + 127) * (1 << 23);
    memcpy(&scale, &bits, sizeof scale);
    return x < FMSA_CPU_EXP2_LO ? 0.0f : p * scale;
}

/// Scalar form (generic and scalar paths; written so compilers vectorise it).
static inline float fmsa_cpu_exp2(float x) {
    float n;
    const float f = fmsa_cpu_exp2_reduce(x, &n);
    float p = FMSA_CPU_EXP2_C6;
    p = p * f + FMSA_CPU_EXP2_C5;
    p = p * f + FMSA_CPU_EXP2_C4;
    p = p * f + FMSA_CPU_EXP2_C3;
    p = p * f + FMSA_CPU_EXP2_C2;
    p = p * f + FMSA_CPU_EXP2_C1;
    p = p * f + 1.0f;
    return fmsa_cpu_exp2_scale(x, n, p);
}

/*
 * The probabilities of the bf16-product forward (row_exp2_b16) are rounded to
 * bf16 (8 significant bits, relative rounding error up to 2^-9) right after
 * their exp2, so they take a degree-4 polynomial instead: the least-maximum-
 * relative-error fit of 2^f on [-0.5, 0.5] (Lawson iterations in double,
 * 2.6e-6 there), evaluated in fp32 at most 2.7e-6 = 2^-18.5 relative over
 * [-30, 0.5] (tests/test_cpu_exp2.c), 1/730 of the bf16 rounding that
 * follows.  The row sum l adds the unrounded values, so it carries the same
 * 2^-18.5 relative error, again far below the bf16 rounding of the output.
 * Two fewer multiply-adds per score than the degree-6 form: the softmax is a
 * third of the AMX forward's time (FLASHMSA_CPU_TRACE, bench/RESULTS.md).
 * Same reduction, same flush below 2^-126, same exact 0 for -inf.
 */
#define FMSA_CPU_EXP2_B16_C4 9.5700998e-3f
#define FMSA_CPU_EXP2_B16_C3 5.5917860e-2f
#define FMSA_CPU_EXP2_B16_C2 2.4024745e-1f
#define FMSA_CPU_EXP2_B16_C1 6.9312181e-1f
#define FMSA_CPU_EXP2_B16_C0 9.9999926e-1f

/// Scalar form of the degree-4 exp2 (the generic-bf16 twin).
static inline float fmsa_cpu_exp2_b16(float x) {
    float n;
    const float f = fmsa_cpu_exp2_reduce(x, &n);
    float p = FMSA_CPU_EXP2_B16_C4;
    p = p * f + FMSA_CPU_EXP2_B16_C3;
    p = p * f + FMSA_CPU_EXP2_B16_C2;
    p = p * f + FMSA_CPU_EXP2_B16_C1;
    p = p * f + FMSA_CPU_EXP2_B16_C0;
    return fmsa_cpu_exp2_scale(x, n, p);
}

/// The backward's dS step in scalar form on elements [j0, n) of a row (the
/// portable paths' whole row, the SIMD paths' tails): p = exp2(s - lse2),
/// dS = p * (dP - delta) * g (g NULL: 1), and dS = 0 where p = 0 (a masked
/// key) even if dP is not finite.  Written so compilers vectorise it.
static inline void fmsa_cpu_bwd_ds_scalar(float *restrict s, float *restrict dp,
                                          const float *restrict g, int j0, int n, float lse2,
                                          float delta) {
    for (int j = j0; j < n; ++j) {
        const float p = fmsa_cpu_exp2(s[j] - lse2);
        const float ds = p * (dp[j] - delta) * (g ? g[j] : 1.0f);
        s[j] = p;
        dp[j] = p == 0.0f ? 0.0f : ds;
    }
}

#endif /* FMSA_CPU_EXP2_H */
