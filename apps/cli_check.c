/*
 * Checks against the fp64 reference with a tolerance derived from the naive
 * same-precision error (see cli_check.h).
 */
#include "apps/cli_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check_rule.h"
#include "common/error.h"
#include "common/fmsa_half.h"
#include "common/naive.h"
#include "common/reference.h"

/* dsink's reference and naive sums live on the stack: heads beyond this many
 * are not checked (the program's --heads allows 2^16; real models have <= 128). */
#define FMSA_CLI_MAX_HEADS_DSINK 1024

static const char *const cli_err_names[CLI_ERR_COUNT] = {"O", "LSE", "dQ", "dK", "dV", "dsink"};

static void cli_err_reset(cli_err err[CLI_ERR_COUNT]) {
    int i;
    memset(err, 0, sizeof(cli_err) * CLI_ERR_COUNT);
    for (i = 0; i < CLI_ERR_COUNT; i++) err[i].name = cli_err_names[i];
}

/* |a - ref| with equal infinities (fully masked rows: lse = -inf) counting as
 * exact and a NaN reference counting as a failure. */
static double cli_diff(double a, double ref) {
    if (a == ref) return 0.0;
    if (isnan(ref)) return INFINITY;
    return fabs(a - ref);
}

static void cli_err_add(cli_err *e, double got, double naive, double ref) {
    double d;
    e->checked++;
    if (isnan(got)) {
        e->nan_count++;
        return;
    }
    if (isfinite(ref) && fabs(ref) > e->ref_max) e->ref_max = fabs(ref);
    d = cli_diff(got, ref);
    if (d > e->err) e->err = d;
    d = cli_diff(naive, ref);
    if (d > e->naive) e->naive = d;
}

static void cli_err_finish(cli_err *e, double mult, const fmsa_rule_floor_spec *f) {
    e->tol = mult * e->naive + fmsa_rule_floor(f, e->ref_max);
    e->ok = e->checked > 0 && e->nan_count == 0 && e->err <= e->tol;
}

/* The rule of common/check_rule.h per tensor: factor 2 and the forward's
 * softmax units for O and LSE, 3 and the backward's for the gradients (dsink
 * among them, stored in fp32); A is the largest finite reference LSE, which
 * the LSE entry has just measured. */
static void cli_finish_all(const fmsa_problem *p, cli_err err[CLI_ERR_COUNT]) {
    int i;
    for (i = 0; i < CLI_ERR_COUNT; i++) {
        fmsa_rule_floor_spec f;
        int fwd = i <= CLI_ERR_LSE;
        if (err[i].checked == 0) continue;
        f.store_dtype = i == CLI_ERR_LSE || i == CLI_ERR_DSINK ? FMSA_DTYPE_F32 : p->dtype;
        f.softmax_units = fwd ? FMSA_RULE_SOFTMAX_UNITS_FWD : FMSA_RULE_SOFTMAX_UNITS_BWD;
        f.lse_max = err[CLI_ERR_LSE].ref_max;
        f.is_lse = i == CLI_ERR_LSE;
        cli_err_finish(&err[i], fwd ? FMSA_RULE_FACTOR_FWD : FMSA_RULE_FACTOR_BWD, &f);
    }
}

/* The checks index the reference's dense layout by (b, i, h), which is the
 * layout of the problems the program generates. */
static fmsa_status cli_check_supported(const fmsa_problem *p) {
    if (p->is_varlen || p->is_paged) {
        fprintf(stderr, "flashmsa: the built-in check covers dense batches (no varlen or "
                        "paged KV)\n");
        return FMSA_ERR_NOT_SUPPORTED;
    }
    return FMSA_SUCCESS;
}

/* Backend value of element d of row (b, i, h) of a q- or o-shaped output. */
static double cli_got_q(const fmsa_problem *p, const fmsa_view4 *v, int64_t b, int64_t i,
                        int64_t h, int64_t d) {
    fmsa_seq seq = fmsa_problem_seq(p, b);
    return fmsa_load_f32(fmsa_view4_host(v), (int)p->dtype,
                         fmsa_problem_q_offset(v, &seq, i, h) + d);
}

static double cli_got_lse(const fmsa_problem *p, int64_t b, int64_t i, int64_t h) {
    fmsa_seq seq = fmsa_problem_seq(p, b);
    const float *lse = (const float *)fmsa_viewn_host(&p->lse);
    return lse[fmsa_problem_lse_offset(p, &seq, i, h)];
}

/* Naive results for every row, as doubles in the reference's dense layout. */
typedef struct cli_naive_all {
    double *o, *lse, *dq, *dk, *dv;
} cli_naive_all;

fmsa_status cli_check_full(const fmsa_problem *pf, const fmsa_problem *pb,
                           cli_err err[CLI_ERR_COUNT]) {
    const fmsa_problem *p = pb != NULL ? pb : pf; /* the backward one also has dout */
    const int64_t B = p->batch, Sq = p->seqlen_q, Sk = p->seqlen_k, D = p->head_dim;
    const int64_t Dv = p->head_dim_v, Hq = p->heads_q, Hkv = p->heads_kv;
    /* q/k-shaped arrays are sized for the larger of D and Dv, so o and dv fit too */
    const int64_t Dm = D > Dv ? D : Dv;
    const size_t nq = (size_t)(B * Sq * Hq * Dm), nk = (size_t)(B * Sk * Hkv * Dm);
    const size_t nl = (size_t)(B * Hq * Sq);
    double *buf;
    double *o_ref, *lse_ref, *dq_ref = NULL, *dk_ref = NULL, *dv_ref = NULL;
    double ds_ref[FMSA_CLI_MAX_HEADS_DSINK], ds_nv[FMSA_CLI_MAX_HEADS_DSINK];
    const int dsink = pb != NULL && pb->has_dsink && Hq <= FMSA_CLI_MAX_HEADS_DSINK;
    cli_naive_all n;
    fmsa_status st;
    int64_t b, i, h, j, d;

    cli_err_reset(err);
    FMSA_TRY(cli_check_supported(p));
    /* one allocation: reference and naive copies of every checked output */
    buf = malloc(sizeof(double) * 2 * (nq + nl + (pb != NULL ? nq + 2 * nk : 0)));
    if (buf == NULL) {
        fprintf(stderr, "flashmsa: out of host memory for the full check\n");
        return FMSA_ERR_OUT_OF_MEMORY;
    }
    o_ref = buf;
    n.o = o_ref + nq;
    lse_ref = n.o + nq;
    n.lse = lse_ref + nl;
    n.dq = n.dk = n.dv = NULL;
    if (pb != NULL) {
        dq_ref = n.lse + nl;
        n.dq = dq_ref + nq;
        dk_ref = n.dq + nq;
        n.dk = dk_ref + nk;
        dv_ref = n.dk + nk;
        n.dv = dv_ref + nk;
    }

    st = fmsa_reference_forward(pf, o_ref, lse_ref);
    if (st == FMSA_SUCCESS && pb != NULL) st = fmsa_reference_backward(pb, dq_ref, dk_ref, dv_ref);
    if (st == FMSA_SUCCESS && dsink) st = fmsa_reference_dsink(pb, ds_ref);
    if (st != FMSA_SUCCESS) {
        fprintf(stderr, "flashmsa: fp64 reference failed: %s: %s\n", fmsa_status_string(st),
                fmsa_last_error());
        free(buf);
        return st;
    }
    if (fmsa_naive_forward(p, n.o, n.lse) != 0 ||
        (pb != NULL && fmsa_naive_backward(p, n.dq, n.dk, n.dv) != 0) ||
        (dsink && fmsa_naive_dsink(p, ds_nv) != 0)) {
        fprintf(stderr, "flashmsa: out of host memory for the naive check\n");
        free(buf);
        return FMSA_ERR_OUT_OF_MEMORY;
    }

    for (b = 0; b < B; b++)
        for (i = 0; i < Sq; i++)
            for (h = 0; h < Hq; h++) {
                size_t row = (size_t)(((b * Sq + i) * Hq + h) * D);
                size_t orow = (size_t)(((b * Sq + i) * Hq + h) * Dv);
                size_t l = (size_t)((b * Hq + h) * Sq + i);
                cli_err_add(&err[CLI_ERR_LSE], cli_got_lse(pf, b, i, h), n.lse[l], lse_ref[l]);
                for (d = 0; d < Dv; d++)
                    cli_err_add(&err[CLI_ERR_O], cli_got_q(pf, &pf->o, b, i, h, d),
                                n.o[orow + d], o_ref[orow + d]);
                for (d = 0; d < D && pb != NULL; d++)
                    cli_err_add(&err[CLI_ERR_DQ], cli_got_q(pb, &pb->dq, b, i, h, d),
                                n.dq[row + d], dq_ref[row + d]);
            }
    if (pb != NULL) {
        for (b = 0; b < B; b++) {
            fmsa_seq seq = fmsa_problem_seq(pb, b);
            for (j = 0; j < Sk; j++)
                for (h = 0; h < Hkv; h++) {
                    size_t row = (size_t)(((b * Sk + j) * Hkv + h) * D);
                    size_t vrow = (size_t)(((b * Sk + j) * Hkv + h) * Dv);
                    int64_t ko = fmsa_problem_k_offset(pb, &pb->dk, &seq, b, j, h);
                    int64_t vo = fmsa_problem_k_offset(pb, &pb->dv, &seq, b, j, h);
                    for (d = 0; d < D; d++)
                        cli_err_add(&err[CLI_ERR_DK],
                                    fmsa_load_f32(fmsa_view4_host(&pb->dk), (int)pb->dtype, ko + d),
                                    n.dk[row + d], dk_ref[row + d]);
                    for (d = 0; d < Dv; d++)
                        cli_err_add(&err[CLI_ERR_DV],
                                    fmsa_load_f32(fmsa_view4_host(&pb->dv), (int)pb->dtype, vo + d),
                                    n.dv[vrow + d], dv_ref[vrow + d]);
                }
        }
    }
    for (h = 0; dsink && h < Hq; h++)
        cli_err_add(&err[CLI_ERR_DSINK],
                    ((const float *)fmsa_viewn_host(&pb->dsink))[h * pb->dsink.s0], ds_nv[h],
                    ds_ref[h]);
    free(buf);
    cli_finish_all(p, err);
    return FMSA_SUCCESS;
}

static uint64_t cli_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

fmsa_status cli_check_rows(const fmsa_problem *pf, const fmsa_problem *pb, int rows,
                           uint64_t seed, cli_err err[CLI_ERR_COUNT]) {
    const fmsa_problem *p = pb != NULL ? pb : pf;
    const int64_t D = p->head_dim, Dv = p->head_dim_v, Dm = D > Dv ? D : Dv;
    double *ref = NULL;
    fmsa_naive_row r;
    fmsa_status st = FMSA_SUCCESS;
    int k;

    cli_err_reset(err);
    FMSA_TRY(cli_check_supported(p));
    ref = malloc(sizeof(double) * (size_t)(2 * Dm));
    if (ref == NULL || fmsa_naive_row_alloc(p, &r) != 0) {
        free(ref);
        fprintf(stderr, "flashmsa: out of host memory for the row check\n");
        return FMSA_ERR_OUT_OF_MEMORY;
    }
    for (k = 0; k < rows && st == FMSA_SUCCESS; k++) {
        uint64_t hsh = cli_hash(seed + (uint64_t)k);
        /* spread over the batch; first and last rows always (causal extremes) */
        int64_t b = (int64_t)k * p->batch / rows;
        int64_t h = (int64_t)(hsh % (uint64_t)p->heads_q);
        int64_t i = k == 0 ? 0 : k == 1 ? p->seqlen_q - 1
                                        : (int64_t)((hsh >> 20) % (uint64_t)p->seqlen_q);
        double lse_ref;
        int64_t d;

        st = fmsa_reference_forward_row(pf, b, h, i, ref, &lse_ref);
        if (st != FMSA_SUCCESS) break;
        fmsa_naive_forward_row(p, b, h, i, &r);
        cli_err_add(&err[CLI_ERR_LSE], cli_got_lse(pf, b, i, h), r.lse, lse_ref);
        for (d = 0; d < Dv; d++)
            cli_err_add(&err[CLI_ERR_O], cli_got_q(pf, &pf->o, b, i, h, d), r.o[d], ref[d]);
        if (pb == NULL) continue;
        st = fmsa_reference_backward_dq_row(pb, b, h, i, ref + Dm);
        if (st != FMSA_SUCCESS) break;
        fmsa_naive_backward_row(p, b, h, i, &r, NULL, NULL);
        for (d = 0; d < D; d++)
            cli_err_add(&err[CLI_ERR_DQ], cli_got_q(pb, &pb->dq, b, i, h, d), r.dq[d],
                        ref[Dm + d]);
    }
    if (st != FMSA_SUCCESS)
        fprintf(stderr, "flashmsa: fp64 reference row failed: %s: %s\n",
                fmsa_status_string(st), fmsa_last_error());
    free(ref);
    fmsa_naive_row_free(&r);
    if (st == FMSA_SUCCESS) cli_finish_all(p, err);
    return st;
}

int cli_check_ok(const cli_err err[CLI_ERR_COUNT]) {
    int i, any = 0;
    for (i = 0; i < CLI_ERR_COUNT; i++) {
        if (err[i].checked == 0) continue;
        any = 1;
        if (!err[i].ok) return 0;
    }
    return any;
}

double cli_check_worst_ratio(const cli_err err[CLI_ERR_COUNT]) {
    double worst = 0.0;
    int i;
    for (i = 0; i < CLI_ERR_COUNT; i++) {
        double r;
        if (err[i].checked == 0) continue;
        r = err[i].nan_count > 0 ? INFINITY : err[i].err / err[i].tol;
        if (r > worst) worst = r;
    }
    return worst;
}
