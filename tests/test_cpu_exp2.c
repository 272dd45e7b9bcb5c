/*
 * The CPU backend's exp2 (backends/cpu/cpu_exp2.h): the accuracy its header
 * claims, measured against exp2 in double on a dense grid, and the special
 * values the passes rely on.  The SIMD paths implement the same steps with
 * the same constants, so these bounds are the ones the grids' error checks
 * rest on:
 *   fmsa_cpu_exp2      (degree 6): <= 1.2 ulp of fp32 (ulp of 1: 2^-23
 *                      relative) on [-30, 0.5]
 *   fmsa_cpu_exp2_b16  (degree 4, the probabilities rounded to bf16 next):
 *                      <= 2.7e-6 relative (2^-18.5) on [-30, 0.5], which is
 *                      1/730 of the bf16 rounding that follows (2^-9)
 * and both: exactly 0 for -inf and below 2^-126, exactly 2^n at integers
 * within a few ulp, NaN stays NaN.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cpu/cpu_exp2.h"

typedef float (*exp2_fn)(float);

/// Largest |f(x) - exp2(x)| / exp2(x) over a grid of [lo, hi] (step 2^-12).
static double max_rel_err(exp2_fn f, double lo, double hi) {
    double worst = 0.0;
    for (double x = lo; x <= hi; x += 1.0 / 4096.0) {
        const float xf = (float)x;
        const double ref = exp2((double)xf), got = (double)f(xf);
        const double e = fabs(got - ref) / ref;
        if (e > worst) worst = e;
    }
    return worst;
}

static void degree6_within_1p2_ulp(void **state) {
    const double err = max_rel_err(fmsa_cpu_exp2, -30.0, 0.5);
    (void)state;
    print_message("fmsa_cpu_exp2: max relative error %.3g (%.2f ulp of 1)\n", err,
                  err / ldexp(1.0, -23));
    assert_true(err <= 1.2 * ldexp(1.0, -23)); /* 1.2 ulp: an ulp is 2^-23 relative at most */
}

static void degree4_within_2p7e_minus6(void **state) {
    const double err = max_rel_err(fmsa_cpu_exp2_b16, -30.0, 0.5);
    (void)state;
    print_message("fmsa_cpu_exp2_b16: max relative error %.3g\n", err);
    assert_true(err <= 2.7e-6);
    assert_true(err * 730.0 <= ldexp(1.0, -9)); /* 1/730 of bf16's rounding bound, 2^-9 */
}

static void special_values(void **state) {
    const exp2_fn fns[2] = {fmsa_cpu_exp2, fmsa_cpu_exp2_b16};
    (void)state;
    for (int i = 0; i < 2; ++i) {
        assert_true(fns[i](-INFINITY) == 0.0f);
        assert_true(fns[i](-126.5f) == 0.0f);
        assert_true(fns[i](-1000.0f) == 0.0f);
        assert_true(isnan(fns[i](NAN)));
        assert_true(fns[i](-125.0f) > 0.0f);
        for (int n = -20; n <= 0; ++n) /* integers: the polynomial at f = 0 */
            assert_true(fabs((double)fns[i]((float)n) / ldexp(1.0, n) - 1.0) <= 1e-6);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(degree6_within_1p2_ulp),
        cmocka_unit_test(degree4_within_2p7e_minus6),
        cmocka_unit_test(special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
