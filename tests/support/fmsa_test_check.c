#include "support/fmsa_test_check.h"

#include <math.h>
#include <stdio.h>

void fmsa_test_compare(const double *got, const double *naive, const double *ref,
                       const double *extra, int64_t n, double factor,
                       const fmsa_rule_floor_spec *f, fmsa_test_error *e) {
    e->backend = e->naive = e->ref_max = 0.0;
    e->worst = e->first_bad = -1;
    e->nan = e->inf_bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        double err;
        /* a NaN reference is an oracle bug; without this branch it would
         * compare false below and the element would silently pass */
        if (isnan(got[i]) || isnan(ref[i])) {
            if (e->first_bad < 0) e->first_bad = i;
            ++e->nan;
            continue;
        }
        if (isinf(ref[i])) {
            if (got[i] != ref[i]) {
                if (e->first_bad < 0) e->first_bad = i;
                ++e->inf_bad;
            }
            continue;
        }
        err = fabs(got[i] - ref[i]); /* inf when the backend is infinite here */
        if (extra) err -= extra[i];  /* part (c): this element's own allowance */
        if (err > e->backend || (isinf(err) && e->worst < 0)) {
            e->backend = err;
            e->worst = i;
        }
        if (fabs(ref[i]) > e->ref_max) e->ref_max = fabs(ref[i]);
        /* a naive infinity would make the tolerance meaningless: ignore it */
        if (isfinite(naive[i]) && fabs(naive[i] - ref[i]) > e->naive)
            e->naive = fabs(naive[i] - ref[i]);
    }
    e->floor = fmsa_rule_floor(f, e->ref_max);
    e->tol = factor * e->naive + e->floor;
    e->ok = e->nan == 0 && e->inf_bad == 0 && e->backend <= e->tol;
}

void fmsa_test_error_format(const char *name, const fmsa_test_error *e, double factor, char *buf,
                            size_t len) {
    snprintf(buf, len,
             "%s: err %.3e %s tol %.3e (%g x naive %.3e + floor %.3e), max|ref| %.3e, NaN %lld, "
             "inf mismatch %lld",
             name, e->backend, e->backend <= e->tol ? "<=" : ">", e->tol, factor, e->naive,
             e->floor, e->ref_max, (long long)e->nan, (long long)e->inf_bad);
}
