/*
 * fp16 / bf16 conversions of common/fmsa_half.h.
 *
 * Oracles, independent of the bit tricks under test: the value of every
 * 16-bit pattern computed with ldexp from its fields; fp32 -> 16-bit
 * rounding done in double with nearbyint (round-half-even in the default
 * rounding mode) at the target's quantum; and, where the compiler has it,
 * the C23/_Float16 conversion of the platform.
 */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/fmsa_half.h"

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
static int bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

/* Value of an fp16 pattern from its fields. */
static double f16_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (e == 0x1f) v = man ? NAN : INFINITY;
    else if (e == 0) v = ldexp(man, -24);
    else v = ldexp(1024 + man, e - 25);
    return sign ? -v : v;
}

/* Value of a bf16 pattern from its fields. */
static double bf16_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 7) & 0xff, man = h & 0x7f;
    double v;
    if (e == 0xff) v = man ? NAN : INFINITY;
    else if (e == 0) v = ldexp(man, -133);
    else v = ldexp(128 + man, e - 134);
    return sign ? -v : v;
}

/* Round |x| to `mant` fraction bits with minimum normal exponent emin,
 * half to even; returns the rounded magnitude (may be >= the overflow point). */
static double round_to(double a, int mant, int emin) {
    int ex;
    double q;
    if (a == 0) return 0;
    frexp(a, &ex); /* a = f * 2^ex, f in [0.5, 1) */
    ex -= 1;       /* a in [2^ex, 2^(ex+1)) */
    if (ex < emin) ex = emin;
    q = ldexp(1.0, ex - mant);
    return nearbyint(a / q) * q; /* a / q is exact: q is a power of two */
}

static uint16_t ref_f32_to_f16(float f) {
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    double r;
    int ex;
    if (isnan(f)) return sign | 0x7e00u;
    r = isinf(f) ? INFINITY : round_to(fabs((double)f), 10, -14);
    if (r > 65504.0) return sign | 0x7c00u;
    if (r < ldexp(1.0, -14)) return sign | (uint16_t)ldexp(r, 24); /* subnormal or zero */
    frexp(r, &ex);
    return sign | (uint16_t)((ex - 1 + 15) << 10) | (uint16_t)(ldexp(r, 10 - (ex - 1)) - 1024);
}

static uint16_t ref_f32_to_bf16(float f) {
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    double r;
    if (isnan(f)) return sign | 0x7fc0u;
    r = isinf(f) ? INFINITY : round_to(fabs((double)f), 7, -126);
    if (r > FLT_MAX) return sign | 0x7f80u;
    /* r has <= 8 significant bits and is in range: exact as a float */
    return sign | (uint16_t)(fmsa_f32_to_bits((float)r) >> 16);
}

/* Compares one conversion with the oracle (NaN only needs to stay NaN). */
static void check_f16(float f) {
    uint16_t got = fmsa_f32_to_f16(f), want = ref_f32_to_f16(f);
    if (isnan(f)) {
        if (!f16_is_nan(got)) fail_msg("f16(NaN 0x%08x) = 0x%04x", fmsa_f32_to_bits(f), got);
        return;
    }
    if (got != want)
        fail_msg("f16(%.9g = 0x%08x) = 0x%04x, want 0x%04x", f, fmsa_f32_to_bits(f), got, want);
#if defined(__FLT16_MAX__)
    {
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        if (hb != want) fail_msg("oracles disagree at 0x%08x: _Float16 0x%04x, ldexp 0x%04x",
                                 fmsa_f32_to_bits(f), hb, want);
    }
#endif /* __FLT16_MAX__ */
}

static void check_bf16(float f) {
    uint16_t got = fmsa_f32_to_bf16(f), want = ref_f32_to_bf16(f);
    if (isnan(f)) {
        if (!bf16_is_nan(got)) fail_msg("bf16(NaN 0x%08x) = 0x%04x", fmsa_f32_to_bits(f), got);
        return;
    }
    if (got != want)
        fail_msg("bf16(%.9g = 0x%08x) = 0x%04x, want 0x%04x", f, fmsa_f32_to_bits(f), got, want);
}

/* Every 16-bit pattern: exact widening, and back to the same bits. */
static void every_pattern_round_trips(void **state) {
    (void)state;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = fmsa_f16_to_f32(h), g = fmsa_bf16_to_f32(h);
        double fv = f16_value(h), gv = bf16_value(h);
        if (f16_is_nan(h)) {
            assert_true(isnan(f));
            assert_true(f16_is_nan(fmsa_f32_to_f16(f)));
            assert_int_equal(signbit(f) != 0, (h >> 15) != 0);
        } else {
            if ((double)f != fv || !signbit(f) != !signbit(fv))
                fail_msg("f16 0x%04x -> %.9g, want %.9g", h, f, fv);
            if (fmsa_f32_to_f16(f) != h) fail_msg("f16 0x%04x round trip gives 0x%04x", h, fmsa_f32_to_f16(f));
        }
        if (bf16_is_nan(h)) {
            assert_true(isnan(g));
            assert_true(bf16_is_nan(fmsa_f32_to_bf16(g)));
        } else {
            if ((double)g != gv || !signbit(g) != !signbit(gv))
                fail_msg("bf16 0x%04x -> %.9g, want %.9g", h, g, gv);
            if (fmsa_f32_to_bf16(g) != h) fail_msg("bf16 0x%04x round trip gives 0x%04x", h, fmsa_f32_to_bf16(g));
        }
    }
}

/* Midpoints between neighbours (exact in fp32) go to the even one; one fp32
 * ulp either side goes to the nearer one.  Covers subnormals and the step
 * from the largest finite value to infinity. */
static void ties_round_to_even(void **state) {
    (void)state;
    for (uint32_t i = 0; i < 0x7c00u; i++) { /* fp16: every finite non-negative h, h+1 */
        for (int s = 0; s < 2; s++) {
            uint16_t sign = s ? 0x8000u : 0, lo = (uint16_t)(i | sign), hi = (uint16_t)((i + 1) | sign);
            double a = f16_value(lo), b = i + 1 == 0x7c00u ? (s ? -65536.0 : 65536.0) : f16_value(hi);
            float mid = (float)((a + b) / 2);
            uint16_t even = (i & 1) ? hi : lo;
            assert_true((double)mid == (a + b) / 2); /* the midpoint is exact */
            if (fmsa_f32_to_f16(mid) != even)
                fail_msg("f16 tie %.9g between 0x%04x and 0x%04x -> 0x%04x", mid, lo, hi, fmsa_f32_to_f16(mid));
            if (fmsa_f32_to_f16(nextafterf(mid, (float)a)) != lo ||
                fmsa_f32_to_f16(nextafterf(mid, (float)b)) != hi)
                fail_msg("f16 near-tie around %.9g (0x%04x/0x%04x) misrounded", mid, lo, hi);
            check_f16(mid);
        }
    }
    for (uint32_t i = 0; i < 0x7f80u; i++) { /* bf16 */
        for (int s = 0; s < 2; s++) {
            uint16_t sign = s ? 0x8000u : 0, lo = (uint16_t)(i | sign), hi = (uint16_t)((i + 1) | sign);
            double a = bf16_value(lo), b = i + 1 == 0x7f80u ? (s ? -1 : 1) * ldexp(1.0, 128) : bf16_value(hi);
            double m = (a + b) / 2;
            uint16_t even = (i & 1) ? hi : lo;
            float mid = (float)m;
            assert_true((double)mid == m);
            if (fmsa_f32_to_bf16(mid) != even)
                fail_msg("bf16 tie %.9g between 0x%04x and 0x%04x -> 0x%04x", mid, lo, hi, fmsa_f32_to_bf16(mid));
            if (fmsa_f32_to_bf16(nextafterf(mid, (float)a)) != lo ||
                fmsa_f32_to_bf16(nextafterf(mid, (float)b)) != hi)
                fail_msg("bf16 near-tie around %.9g (0x%04x/0x%04x) misrounded", mid, lo, hi);
            check_bf16(mid);
        }
    }
}

static void overflow_and_subnormals(void **state) {
    (void)state;
    /* fp16 overflow: 65504 is the largest finite; >= 65520 rounds to inf */
    assert_int_equal(fmsa_f32_to_f16(65504.0f), 0x7bffu);
    assert_int_equal(fmsa_f32_to_f16(65519.996f), 0x7bffu);
    assert_int_equal(fmsa_f32_to_f16(65520.0f), 0x7c00u);
    assert_int_equal(fmsa_f32_to_f16(-65520.0f), 0xfc00u);
    assert_int_equal(fmsa_f32_to_f16(1e10f), 0x7c00u);
    assert_int_equal(fmsa_f32_to_f16(FLT_MAX), 0x7c00u);
    assert_int_equal(fmsa_f32_to_f16(INFINITY), 0x7c00u);
    assert_int_equal(fmsa_f32_to_f16(-INFINITY), 0xfc00u);
    /* bf16 overflow: above (2 - 2^-8) * 2^127 rounds to inf */
    assert_int_equal(fmsa_f32_to_bf16(FLT_MAX), 0x7f80u);
    assert_int_equal(fmsa_f32_to_bf16(-FLT_MAX), 0xff80u);
    assert_int_equal(fmsa_f32_to_bf16(INFINITY), 0x7f80u);
    assert_int_equal(fmsa_f32_to_bf16(3.3895314e38f), 0x7f7fu);
    /* fp16 subnormals: 2^-24 is the smallest; half of it ties to 0 */
    assert_int_equal(fmsa_f32_to_f16(ldexpf(1.0f, -24)), 0x0001u);
    assert_int_equal(fmsa_f32_to_f16(ldexpf(1.0f, -25)), 0x0000u);
    assert_int_equal(fmsa_f32_to_f16(-ldexpf(1.0f, -25)), 0x8000u);
    assert_int_equal(fmsa_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)), 0x0001u);
    assert_int_equal(fmsa_f32_to_f16(ldexpf(3.0f, -25)), 0x0002u);
    assert_int_equal(fmsa_f32_to_f16(ldexpf(1023.0f, -24)), 0x03ffu);
    assert_int_equal(fmsa_f32_to_f16(ldexpf(2047.0f, -25)), 0x0400u); /* ties up into the normals */
    assert_int_equal(fmsa_f32_to_f16(FLT_MIN), 0x0000u);
    assert_int_equal(fmsa_f32_to_f16(ldexpf(1.0f, -149)), 0x0000u);
    assert_true(fmsa_f16_to_f32(0x0001u) == ldexpf(1.0f, -24));
    assert_true(fmsa_f16_to_f32(0x83ffu) == -ldexpf(1023.0f, -24));
    /* bf16 keeps fp32's exponent range, subnormals included */
    assert_int_equal(fmsa_f32_to_bf16(fmsa_bits_to_f32(0x00008000u)), 0x0000u); /* tie to even 0 */
    assert_int_equal(fmsa_f32_to_bf16(fmsa_bits_to_f32(0x00008001u)), 0x0001u);
    assert_int_equal(fmsa_f32_to_bf16(fmsa_bits_to_f32(0x00018000u)), 0x0002u); /* tie to even 2 */
    assert_int_equal(fmsa_f32_to_bf16(fmsa_bits_to_f32(0x007fffffu)), 0x0080u); /* rounds into FLT_MIN */
    assert_int_equal(fmsa_f32_to_bf16(-0.0f), 0x8000u);
    assert_int_equal(fmsa_f32_to_f16(-0.0f), 0x8000u);
    /* NaNs of any payload stay NaN, signalling ones included */
    assert_true(f16_is_nan(fmsa_f32_to_f16(fmsa_bits_to_f32(0x7f800001u))));
    assert_true(bf16_is_nan(fmsa_f32_to_bf16(fmsa_bits_to_f32(0x7f800001u))));
    assert_true(bf16_is_nan(fmsa_f32_to_bf16(fmsa_bits_to_f32(0xff800001u))));
    assert_true(f16_is_nan(fmsa_f32_to_f16(fmsa_bits_to_f32(0xffffffffu))));
}

/* A strided sweep over all 2^32 fp32 patterns plus every exponent with
 * random mantissas, against the oracles. */
static void fp32_sweep_matches_oracle(void **state) {
    uint64_t x = 12345;
    (void)state;
    assert_int_equal(fegetround(), FE_TONEAREST); /* the oracle relies on it */
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 1021) {
        float f = fmsa_bits_to_f32((uint32_t)u);
        check_f16(f);
        check_bf16(f);
    }
    for (int i = 0; i < 1 << 20; i++) {
        uint32_t bits;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* exponents 100..150 (around fp16's range) get extra weight */
        bits = (uint32_t)x;
        if (i & 1) bits = (bits & 0x807fffffu) | ((uint32_t)(100 + (x >> 40) % 51) << 23);
        check_f16(fmsa_bits_to_f32(bits));
        check_bf16(fmsa_bits_to_f32(bits));
    }
}

/* The load/store helpers dispatch on the dtype codes of flashmsa.h. */
static void load_store_helpers(void **state) {
    uint16_t h[2];
    float f[2];
    (void)state;
    fmsa_store_f32(h, 2, 1, 1.5f);
    assert_int_equal(h[1], 0x3e00u);
    assert_true(fmsa_load_f32(h, 2, 1) == 1.5f);
    fmsa_store_f32(h, 3, 0, -2.0f);
    assert_int_equal(h[0], 0xc000u);
    assert_true(fmsa_load_f32(h, 3, 0) == -2.0f);
    fmsa_store_f32(f, 1, 1, 0.1f);
    assert_true(fmsa_load_f32(f, 1, 1) == 0.1f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_pattern_round_trips),
        cmocka_unit_test(ties_round_to_even),
        cmocka_unit_test(overflow_and_subnormals),
        cmocka_unit_test(fp32_sweep_matches_oracle),
        cmocka_unit_test(load_store_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
