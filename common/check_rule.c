/*
 * The correctness rule's floor, shared by the test suites and the flashmsa
 * program (derivation in check_rule.h).
 */
#include "common/check_rule.h"

#include <math.h>

double fmsa_rule_unit_roundoff(fmsa_dtype dtype) {
    switch (dtype) {
    case FMSA_DTYPE_F16: return ldexp(1.0, -11); /* 10 stored mantissa bits */
    case FMSA_DTYPE_BF16: return ldexp(1.0, -8); /* 7 stored mantissa bits */
    default: return ldexp(1.0, -24);             /* f32: 23 stored mantissa bits */
    }
}

double fmsa_rule_floor(const fmsa_rule_floor_spec *f, double ref_max) {
    const double u32 = fmsa_rule_unit_roundoff(FMSA_DTYPE_F32);
    double storage = (FMSA_RULE_FLOOR_UNITS * fmsa_rule_unit_roundoff(f->store_dtype) +
                      FMSA_RULE_FLOOR_F32_UNITS * u32) * ref_max;
    double softmax = u32 * f->softmax_units * (1.0 + f->lse_max);
    return storage + (f->is_lse ? softmax : softmax * ref_max);
}

double fmsa_rule_lse_max(const double *lse, int64_t n) {
    double a = 0.0;
    for (int64_t i = 0; i < n; ++i)
        if (isfinite(lse[i]) && fabs(lse[i]) > a) a = fabs(lse[i]);
    return a;
}

void fmsa_rule_single_key_terms(int64_t head_dim, double m, double n, double *eps,
                                double *delta) {
    const double nu = (double)head_dim * fmsa_rule_unit_roundoff(FMSA_DTYPE_F32);
    const double gamma = nu < 1.0 ? nu / (1.0 - nu) : INFINITY; /* gamma_D, Higham (3.4) */
    *eps = 2.0 * gamma * m;
    *delta = gamma * n;
}
