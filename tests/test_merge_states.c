/*
 * fmsa_merge_states on any backend (--backend / FLASHMSA_TEST_BACKEND):
 * random partials in f32/f16/bf16 mixes, rows where one side or both have
 * lse = -inf (the -inf side's o row holds NaN: it must be selected away,
 * never multiplied by 0), in place (o is o_a or o_b, lse is lse_a or
 * lse_b), strided views (heads-major padded o, transposed padded lse),
 * outputs poisoned and guarded like every suite's, against the fp64 merge
 * (fmsa_reference_merge) of the same stored partials.
 *
 * Tolerance, element by element: u(o.dtype) |ref| + 8 u_f32 (1 + L)
 * (|o_a| + |o_b|), and for the lse 8 u_f32 (1 + |ref|), with L the largest
 * |lse_a - lse_b| of finite pairs: the merge's weights are computed in fp32
 * from the same fp32 lse, so they carry a few u_f32 from exp2, log2, the sum
 * and the division plus u_f32 |lse_a - lse_b| from the exponent's argument
 * (8 units leave room for a GPU's approximate exp2 of 2 ulp), and the result
 * is rounded once to o's dtype.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/check_rule.h"
#include "common/reference.h"
#include "support/fmsa_test_buffer.h"
#include "support/fmsa_test_options.h"
#include "support/fmsa_test_rng.h"

/// One case: extents, the three o dtypes, layout, in place (0, 'a' or 'b').
typedef struct merge_case {
    int64_t b, s, h, dv;
    fmsa_dtype dta, dtb, dto;
    int strided, inplace;
    double lse_spread; ///< sigma of the finite lse values (large: one side dominates)
} merge_case;

#define F32 FMSA_DTYPE_F32
#define F16 FMSA_DTYPE_F16
#define BF16 FMSA_DTYPE_BF16

static const merge_case merge_cases[] = {
    {2, 37, 4, 64, F32, F32, F32, 0, 0, 3.0},
    {1, 64, 8, 128, F16, F16, F16, 0, 0, 3.0},
    {3, 5, 2, 8, BF16, BF16, BF16, 0, 0, 3.0},
    {1, 16, 2, 512, F32, F32, BF16, 0, 0, 3.0}, /* fp32 partials into a bf16 result */
    {2, 9, 3, 576, F32, BF16, F16, 1, 0, 3.0},
    {2, 20, 4, 72, BF16, F32, F32, 1, 0, 3.0},
    {2, 33, 3, 64, F32, F32, F32, 1, 'a', 3.0}, /* in place over a */
    {1, 40, 4, 128, BF16, BF16, BF16, 0, 'b', 3.0},
    {2, 17, 2, 256, F16, F16, F16, 1, 'a', 3.0},
    {1, 1, 1, 8, F32, F32, F32, 0, 0, 3.0},
    {2, 25, 3, 32, F32, F16, F32, 0, 0, 30.0}, /* one weight ~ exp(-40) */
    {1, 30, 2, 512, BF16, BF16, F32, 1, 'b', 10.0},
};

#define MERGE_COUNT (sizeof merge_cases / sizeof merge_cases[0])

static fmsa_context *ctx;
static fmsa_test_options opts;

/// [B, S, H, Dv]: contiguous, or heads-major with padded rows and batch.
static int merge_buf_o(fmsa_test_buf *b, const char *name, fmsa_dtype dt, fmsa_test_role role,
                       const merge_case *c) {
    int64_t shape[4] = {c->b, c->s, c->h, c->dv}, st[4];
    st[3] = 1;
    st[1] = c->dv + 8;
    st[2] = c->s * st[1];
    st[0] = c->h * st[2] + 8;
    return fmsa_test_buf_init(b, name, dt, role, 4, shape, c->strided ? st : NULL);
}

/// [B, H, S] fp32: contiguous, or stored as [B, S, H + 1] plus a padded batch.
static int merge_buf_lse(fmsa_test_buf *b, const char *name, fmsa_test_role role,
                         const merge_case *c) {
    int64_t shape[3] = {c->b, c->h, c->s}, st[3] = {c->s * (c->h + 1) + 2, 1, c->h + 1};
    return fmsa_test_buf_init(b, name, F32, role, 3, shape, c->strided ? st : NULL);
}

static fmsa_view4 merge_view4(const fmsa_test_buf *b) {
    fmsa_view4 v;
    v.data = b->host;
    v.byte_offset = FMSA_TEST_GUARD_BYTES;
    v.sb = b->strides[0];
    v.ss = b->strides[1];
    v.sh = b->strides[2];
    return v;
}

static fmsa_viewn merge_viewn(const fmsa_test_buf *b) {
    fmsa_viewn v;
    v.data = b->host;
    v.byte_offset = FMSA_TEST_GUARD_BYTES;
    v.s0 = b->strides[0];
    v.s1 = b->strides[1];
    v.s2 = b->strides[2];
    return v;
}

/*
 * Row (b, h, i) of lse: -inf on side a when (i + h) % 5 == 1, on side b when
 * (i + 2 h) % 7 == 2 (both -inf on some rows), else N(2, spread^2); an o row
 * of a -inf side is NaN, the others N(0, 1) in their dtype.
 */
static void merge_fill(fmsa_test_buf *o, fmsa_test_buf *lse, int side, const merge_case *c,
                       fmsa_test_rng *r) {
    const int64_t rows = c->b * c->h * c->s;
    double *lv = (double *)malloc(sizeof(double) * (size_t)rows);
    double *ov = (double *)malloc(sizeof(double) * (size_t)(rows * c->dv));
    assert_non_null(lv);
    assert_non_null(ov);
    for (int64_t n = 0; n < rows; ++n) {
        const int64_t i = n % c->s, h = (n / c->s) % c->h;
        const int masked = side == 0 ? (i + h) % 5 == 1 : (i + 2 * h) % 7 == 2;
        lv[n] = masked ? -INFINITY : 2.0 + c->lse_spread * fmsa_test_rng_normal(r);
    }
    for (int64_t n = 0; n < rows * c->dv; ++n) {
        const int64_t h = (n / c->dv) % c->h, i = (n / (c->dv * c->h)) % c->s,
                      b = n / (c->dv * c->h * c->s);
        ov[n] = isinf(lv[(b * c->h + h) * c->s + i]) ? NAN : fmsa_test_rng_normal(r);
    }
    fmsa_test_buf_store(lse, lv);
    fmsa_test_buf_store(o, ov);
    free(lv);
    free(ov);
}

/// Downloads b and checks guards, holes, inputs unchanged, outputs written.
static void merge_check_buf(const fmsa_test_buf *b, unsigned char *image, int allow_inf) {
    char msg[256];
    assert_int_equal(fmsa_test_buf_download(ctx, b, image), FMSA_SUCCESS);
    if (fmsa_test_buf_check(b, image, allow_inf, msg, sizeof msg)) fail_msg("%s", msg);
}

static void merge_case_run(void **state) {
    const merge_case *c = (const merge_case *)*state;
    fmsa_test_buf oa, la, ob, lb, oo, lo; /* oo/lo unused when in place */
    fmsa_test_buf *out_o, *out_l, *bufs[6];
    fmsa_test_rng r;
    fmsa_merge_problem mp;
    const int64_t rows = c->b * c->h * c->s, n = rows * c->dv;
    double *ref_o = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *ref_l = (double *)malloc(sizeof(double) * (size_t)(rows + 1));
    double *got = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *a_d = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *b_d = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *la_d = (double *)malloc(sizeof(double) * (size_t)(rows + 1));
    double *lb_d = (double *)malloc(sizeof(double) * (size_t)(rows + 1));
    unsigned char *image;
    double spread = 0.0, worst = 0.0, worst_l = 0.0;
    size_t most = 0;
    int nb = 0;
    fmsa_status st;

    assert_non_null(ref_o);
    assert_non_null(got);
    memset(&oo, 0, sizeof oo);
    memset(&lo, 0, sizeof lo);
    fmsa_test_rng_seed(&r, 1000 + (uint64_t)(c - merge_cases));
    assert_int_equal(merge_buf_o(&oa, "o_a", c->dta, c->inplace == 'a' ? FMSA_TEST_OUTPUT
                                                                         : FMSA_TEST_INPUT, c), 0);
    assert_int_equal(merge_buf_o(&ob, "o_b", c->dtb, c->inplace == 'b' ? FMSA_TEST_OUTPUT
                                                                         : FMSA_TEST_INPUT, c), 0);
    assert_int_equal(merge_buf_lse(&la, "lse_a", c->inplace == 'a' ? FMSA_TEST_OUTPUT
                                                                  : FMSA_TEST_INPUT, c), 0);
    assert_int_equal(merge_buf_lse(&lb, "lse_b", c->inplace == 'b' ? FMSA_TEST_OUTPUT
                                                                  : FMSA_TEST_INPUT, c), 0);
    merge_fill(&oa, &la, 0, c, &r);
    merge_fill(&ob, &lb, 1, c, &r);
    bufs[nb++] = &oa;
    bufs[nb++] = &la;
    bufs[nb++] = &ob;
    bufs[nb++] = &lb;
    if (c->inplace == 'a') {
        out_o = &oa;
        out_l = &la;
    } else if (c->inplace == 'b') {
        out_o = &ob;
        out_l = &lb;
    } else {
        assert_int_equal(merge_buf_o(&oo, "o", c->dto, FMSA_TEST_OUTPUT, c), 0);
        assert_int_equal(merge_buf_lse(&lo, "lse", FMSA_TEST_OUTPUT, c), 0);
        out_o = &oo;
        out_l = &lo;
        bufs[nb++] = &oo;
        bufs[nb++] = &lo;
    }

    /* the fp64 merge of the partials exactly as stored */
    memset(&mp, 0, sizeof mp);
    mp.batch = c->b;
    mp.seqlen = c->s;
    mp.heads = c->h;
    mp.head_dim_v = c->dv;
    mp.dtype_a = oa.dtype;
    mp.dtype_b = ob.dtype;
    mp.dtype_o = out_o->dtype;
    mp.o_a = merge_view4(&oa);
    mp.o_b = merge_view4(&ob);
    mp.o = merge_view4(out_o);
    mp.lse_a = merge_viewn(&la);
    mp.lse_b = merge_viewn(&lb);
    mp.lse = merge_viewn(out_l);
    assert_int_equal(fmsa_reference_merge(&mp, ref_o, ref_l), FMSA_SUCCESS);
    fmsa_test_buf_load(&oa, oa.host, a_d);
    fmsa_test_buf_load(&ob, ob.host, b_d);
    fmsa_test_buf_load(&la, la.host, la_d);
    fmsa_test_buf_load(&lb, lb.host, lb_d);
    for (int64_t k = 0; k < rows; ++k)
        if (isfinite(la_d[k]) && isfinite(lb_d[k])) spread = fmax(spread, fabs(la_d[k] - lb_d[k]));

    for (int k = 0; k < nb; ++k) {
        assert_int_equal(fmsa_test_buf_upload(ctx, bufs[k]), FMSA_SUCCESS);
        if (bufs[k]->total > most) most = bufs[k]->total;
    }
    {
        fmsa_tensor ta = fmsa_test_buf_tensor(&oa), tla = fmsa_test_buf_tensor(&la);
        fmsa_tensor tb = fmsa_test_buf_tensor(&ob), tlb = fmsa_test_buf_tensor(&lb);
        fmsa_tensor to = fmsa_test_buf_tensor(out_o), tlo = fmsa_test_buf_tensor(out_l);
        st = fmsa_merge_states(ctx, &ta, &tla, &tb, &tlb, &to, &tlo, NULL);
        if (st == FMSA_SUCCESS) st = fmsa_synchronize(ctx, NULL);
    }
    if (st != FMSA_SUCCESS)
        fail_msg("fmsa_merge_states: %s: %s", fmsa_status_string(st), fmsa_last_error());

    image = (unsigned char *)malloc(most);
    assert_non_null(image);
    for (int k = 0; k < nb; ++k) merge_check_buf(bufs[k], image, bufs[k]->dtype == F32 &&
                                                                     bufs[k]->ndim == 3);
    /* o */
    assert_int_equal(fmsa_test_buf_download(ctx, out_o, image), FMSA_SUCCESS);
    fmsa_test_buf_load(out_o, image, got);
    for (int64_t k = 0; k < n; ++k) {
        const int64_t row = k / c->dv, i = row / c->h % c->s, h = row % c->h, b = row / (c->h * c->s);
        const int64_t l = (b * c->h + h) * c->s + i;
        const double ma = isinf(la_d[l]) ? 0.0 : fabs(a_d[k]), mb = isinf(lb_d[l]) ? 0.0 : fabs(b_d[k]);
        const double tol = fmsa_rule_unit_roundoff(out_o->dtype) * fabs(ref_o[k]) +
                           8.0 * fmsa_rule_unit_roundoff(F32) * (1.0 + spread) * (ma + mb);
        const double err = fabs(got[k] - ref_o[k]);
        if (!(err <= tol))
            fail_msg("o[%lld] (b %lld, i %lld, h %lld): %.9g, fp64 merge %.9g: error %.3e > "
                     "tol %.3e (lse_a %g, lse_b %g)",
                     (long long)k, (long long)b, (long long)i, (long long)h, got[k], ref_o[k], err,
                     tol, la_d[l], lb_d[l]);
        if (err / (tol > 0 ? tol : 1) > worst) worst = err / (tol > 0 ? tol : 1);
    }
    /* lse */
    assert_int_equal(fmsa_test_buf_download(ctx, out_l, image), FMSA_SUCCESS);
    fmsa_test_buf_load(out_l, image, got);
    for (int64_t k = 0; k < rows; ++k) {
        const double tol = 8.0 * fmsa_rule_unit_roundoff(F32) * (1.0 + fabs(ref_l[k]));
        if (isinf(ref_l[k])) {
            if (got[k] != ref_l[k]) fail_msg("lse[%lld]: %g, expected -inf", (long long)k, got[k]);
            continue;
        }
        if (!(fabs(got[k] - ref_l[k]) <= tol))
            fail_msg("lse[%lld]: %.9g, fp64 merge %.9g (tol %.3e)", (long long)k, got[k], ref_l[k],
                     tol);
        if (fabs(got[k] - ref_l[k]) / tol > worst_l) worst_l = fabs(got[k] - ref_l[k]) / tol;
    }
    if (opts.verbose) print_message("  worst error / tol: o %.3f, lse %.3f\n", worst, worst_l);

    free(image);
    for (int k = 0; k < nb; ++k) fmsa_test_buf_free(ctx, bufs[k]);
    free(ref_o);
    free(ref_l);
    free(got);
    free(a_d);
    free(b_d);
    free(la_d);
    free(lb_d);
}

int main(int argc, char **argv) {
    struct CMUnitTest tests[MERGE_COUNT];
    char names[MERGE_COUNT][96];
    fmsa_status st;
    int rc;
    if (fmsa_test_options_parse(argc, argv, &opts)) return 2;
    for (size_t i = 0; i < MERGE_COUNT; ++i) {
        const merge_case *c = &merge_cases[i];
        static const char *const dn[] = {"?", "f32", "f16", "bf16"};
        snprintf(names[i], sizeof names[i], "case %zu: %lldx%lldx%lld dv%lld %s+%s->%s%s%s", i,
                 (long long)c->b, (long long)c->s, (long long)c->h, (long long)c->dv, dn[c->dta],
                 dn[c->dtb], dn[c->inplace == 'a' ? c->dta : c->inplace == 'b' ? c->dtb : c->dto],
                 c->strided ? " strided" : "",
                 c->inplace == 'a' ? " in-place-a" : c->inplace == 'b' ? " in-place-b" : "");
        tests[i].name = names[i];
        tests[i].test_func = merge_case_run;
        tests[i].setup_func = NULL;
        tests[i].teardown_func = NULL;
        tests[i].initial_state = (void *)c;
    }
    st = fmsa_test_context_create(&opts, &ctx);
    if (st != FMSA_SUCCESS) {
        fprintf(stderr, "test_merge_states: no context on backend %s: %s: %s\n",
                opts.backend_name, fmsa_status_string(st), fmsa_last_error());
        return st == FMSA_ERR_BACKEND_UNAVAILABLE ? FMSA_TEST_EXIT_SKIP : 1;
    }
    rc = _cmocka_run_group_tests("merge_states", tests, MERGE_COUNT, NULL, NULL);
    fmsa_context_destroy(ctx);
    return rc;
}
