/*
 * Reference against naive in f32 (fmsa_test_oracle.h).
 *
 * The bound: every naive output is a short chain of fp32 sums, each of at
 * most n = D + Dv + keys + rows terms (a score's dot product over D, the
 * softmax sum over the keys, P V over the keys, dP over Dv, dK/dV and dsink
 * over the query rows), so its rounding error is at most about n u_f32 times
 * the magnitude it is computed at (the standard gamma_n bound, n u << 1).
 * The softmax turns an absolute error of the score into a relative one of P,
 * and the scores are as large as A = max |LSE| (check_rule.h, part (b)), hence
 *   |naive - ref| <= (n + 8) u_f32 (1 + A) M,
 * with M the magnitude the terms are summed at: 1 + max |ref| of the tensor
 * for outputs that are weighted averages (o, lse), and for the gradients,
 * sums of terms of either sign, that times sqrt(rows) (a random-sign sum of r
 * terms is sqrt(r) smaller than the terms it cancels).  The 8 covers exp,
 * log, the divisions and the final roundings.  Measured on the features grid:
 * errors are 0.1% to 0.4% of this bound; leaving a sink term out of the naive,
 * flipping dlse's sign in the reference or dropping 8 value columns fails it
 * by 1.5x to 1000x.
 */
#include "support/fmsa_test_oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/check_rule.h"
#include "common/naive.h"
#include "common/reference.h"
#include "support/fmsa_test_problem.h"

typedef struct oracle_cmp {
    const char *name;
    double err, bound;
    int bad;
} oracle_cmp;

static void oracle_compare(const char *name, const double *nv, const double *ref, int64_t n,
                           double unit, double spread, oracle_cmp *c) {
    double ref_max = 0.0;
    c->name = name;
    c->err = 0.0;
    c->bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (isnan(ref[i]) || isnan(nv[i]) || (isinf(ref[i]) && nv[i] != ref[i])) {
            c->bad = 1;
            continue;
        }
        if (isinf(ref[i])) continue;
        if (fabs(ref[i]) > ref_max) ref_max = fabs(ref[i]);
        if (fabs(nv[i] - ref[i]) > c->err) c->err = fabs(nv[i] - ref[i]);
    }
    c->bound = unit * (1.0 + ref_max) * spread;
    if (c->err > c->bound) c->bad = 1;
}

int fmsa_test_oracle_check(const fmsa_test_spec *spec, char *msg, size_t len,
                           double *worst_ratio) {
    fmsa_test_spec s = *spec;
    fmsa_test_problem tp;
    const fmsa_problem *p = &tp.host;
    double *buf[12] = {NULL};
    oracle_cmp c[6];
    int nc = 0, rc = 0, bwd;
    double unit, lse_max, rows_sqrt, worst = 0.0;
    int64_t rows;

    s.dtype = FMSA_DTYPE_F32;
    bwd = s.pass == FMSA_PASS_BACKWARD;
    msg[0] = '\0';
    if (fmsa_test_problem_create(&tp, &s)) {
        snprintf(msg, len, "oracle check: host setup failed");
        fmsa_test_problem_destroy(NULL, &tp);
        return -1;
    }
    {
        const int64_t n[12] = {tp.n_o, tp.n_lse, tp.n_o, tp.n_lse, tp.n_q, tp.n_k,
                               tp.n_v, tp.n_q,   tp.n_k, tp.n_v,   s.hq,   s.hq};
        for (int i = 0; i < 12; ++i) {
            buf[i] = (double *)calloc((size_t)n[i] + 1, sizeof(double));
            if (!buf[i]) rc = -1;
        }
    }
    if (rc || fmsa_reference_forward(p, buf[0], buf[1]) != FMSA_SUCCESS ||
        fmsa_naive_forward(p, buf[2], buf[3]) != 0 ||
        (bwd && (fmsa_reference_backward(p, buf[4], buf[5], buf[6]) != FMSA_SUCCESS ||
                 fmsa_naive_backward(p, buf[7], buf[8], buf[9]) != 0 ||
                 fmsa_reference_dsink(p, buf[10]) != FMSA_SUCCESS ||
                 fmsa_naive_dsink(p, buf[11]) != 0))) {
        snprintf(msg, len, "oracle check: reference or naive failed");
        rc = -1;
        goto done;
    }
    rows = s.batch * s.sq;
    rows_sqrt = sqrt((double)(rows > 1 ? rows : 1));
    lse_max = fmsa_rule_lse_max(buf[1], tp.n_lse);
    unit = (double)(s.d + fmsa_test_spec_dv(&s) + p->seqlen_k + rows + 8) *
           fmsa_rule_unit_roundoff(FMSA_DTYPE_F32) * (1.0 + lse_max);
    oracle_compare("o", buf[2], buf[0], tp.n_o, unit, 1.0, &c[nc++]);
    oracle_compare("lse", buf[3], buf[1], tp.n_lse, unit, 1.0, &c[nc++]);
    if (bwd) {
        oracle_compare("dq", buf[7], buf[4], tp.n_q, unit, rows_sqrt, &c[nc++]);
        oracle_compare("dk", buf[8], buf[5], tp.n_k, unit, rows_sqrt, &c[nc++]);
        oracle_compare("dv", buf[9], buf[6], tp.n_v, unit, rows_sqrt, &c[nc++]);
        if (s.sinks) oracle_compare("dsink", buf[11], buf[10], s.hq, unit, rows_sqrt, &c[nc++]);
    }
    for (int i = 0; i < nc; ++i) {
        size_t used = 0;
        double r = c[i].bound > 0.0 ? c[i].err / c[i].bound : (c[i].err > 0.0 ? INFINITY : 0.0);
        if (r > worst) worst = r;
        if (!c[i].bad) continue;
        rc = -1;
        while (used < len && msg[used]) ++used;
        if (used < len)
            snprintf(msg + used, len - used,
                     "oracle check (f32 twin): naive %s differs from the reference by %.3e > "
                     "bound %.3e (or NaN/inf mismatch)\n",
                     c[i].name, c[i].err, c[i].bound);
    }
done:
    if (worst_ratio) *worst_ratio = worst;
    for (int i = 0; i < 12; ++i) free(buf[i]);
    fmsa_test_problem_destroy(NULL, &tp);
    return rc;
}
