/*
 * The ALiBi distance offset the ring's local passes use (common/attention_offset.h),
 * on one backend (--backend; the ring itself refuses OpenCL, so this is where
 * OpenCL's offset is checked).  A pass over sq rows and sk keys with offset
 * off has the scores of a public problem without offset and a bit mask:
 *   off > 0: off extra keys after the sk (bottom-right alignment moves the
 *            diagonal by off), hidden from every row by the mask;
 *   off < 0: -off extra query rows after the sq (the diagonal moves by off),
 *            hidden entirely (their O is 0, they add nothing to dK / dV).
 * So the offset pass's O, LSE, dQ, dK, dV are the padded problem's on the
 * real rows and keys, which is held to the project's rule against that
 * problem's fp64 reference and naive oracle.  The offset pass reads its
 * inputs as strided views into the padded tensors.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/attention_offset.h"
#include "common/fmsa_half.h"
#include "common/naive.h"
#include "common/reference.h"
#include "common/validate.h"
#include "tests/support/fmsa_test_check.h"
#include "tests/support/fmsa_test_options.h"

static fmsa_test_options g_opt;
static fmsa_context *g_ctx;

enum { B = 2, HQ = 4, HKV = 2, D = 64 };

typedef struct off_case {
    int64_t sq, sk, off;
    int alibi2;    ///< slopes [B, Hq] (else [Hq])
    float softcap; ///< 0 = off
    int dt_index;  ///< 0: the backend's first dtype, 1: bf16
} off_case;

static const off_case CASES[] = {
    {5, 9, 4, 0, 0.0f, 0},  {9, 5, -3, 1, 0.0f, 1}, {7, 7, 11, 1, 20.0f, 0},
    {7, 7, -13, 0, 0.0f, 1}, {1, 12, -6, 0, 0.0f, 0}, {12, 3, 7, 1, 0.0f, 1},
    {6, 6, 0, 0, 0.0f, 0},
};

static void draw(void *p, fmsa_dtype dt, size_t n, unsigned *seed) {
    for (size_t i = 0; i < n; ++i) {
        *seed = *seed * 1664525u + 1013904223u;
        fmsa_store_f32(p, dt, (int64_t)i, (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
}

static fmsa_tensor t4(void *p, fmsa_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t sh[4] = {a, b, c, d};
    return fmsa_tensor_contiguous(p, dt, 4, sh);
}

/* Rows [0, rows) of a contiguous [B, S, H, d] tensor, keeping its strides. */
static fmsa_tensor head_rows(fmsa_tensor t, int64_t rows) {
    t.shape[1] = rows;
    return t;
}

/* Device copy of n bytes of host memory (NULL on failure). */
static void *upload(const void *h, size_t n) {
    void *d = NULL;
    if (fmsa_malloc(g_ctx, n ? n : 1, &d) != FMSA_SUCCESS) return NULL;
    if (n && fmsa_copy_to_device(g_ctx, d, 0, h, n) != FMSA_SUCCESS) return NULL;
    return d;
}

/* The rule on X-shaped results against the padded problem's oracles, gathered
 * to X's rows (rows of `rows_y`, keep the first `rows_x` of each batch). */
static int check(const char *name, const void *got_dev, fmsa_dtype store, size_t n_x,
                 const double *ref_y, const double *nv_y, int64_t rows_y, int64_t rows_x,
                 int64_t inner, int lse_layout, double factor, double units, double lse_max,
                 int is_lse, char *msg, size_t len) {
    double *got = malloc(n_x * sizeof *got), *ref = malloc(n_x * sizeof *ref),
           *nv = malloc(n_x * sizeof *nv);
    void *h = malloc(n_x * fmsa_dtype_size(store));
    fmsa_rule_floor_spec f = {store, units, lse_max, is_lse};
    fmsa_test_error e;
    int ok = 0;
    if (got && ref && nv && h &&
        fmsa_copy_to_host(g_ctx, h, got_dev, 0, n_x * fmsa_dtype_size(store)) == FMSA_SUCCESS) {
        /* lse_layout: [B, Hq, rows] (inner = 1, rows last); else [B, rows, inner] */
        const int64_t outer = lse_layout ? B * HQ : B;
        size_t k = 0;
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t r = 0; r < rows_x; ++r)
                for (int64_t x = 0; x < inner; ++x, ++k) {
                    const int64_t y = (o * rows_y + r) * inner + x;
                    got[k] = fmsa_load_f32(h, store, (int64_t)k);
                    ref[k] = ref_y[y];
                    nv[k] = nv_y[y];
                }
        fmsa_test_compare(got, nv, ref, NULL, (int64_t)n_x, factor, &f, &e);
        ok = e.ok;
        if (!ok) fmsa_test_error_format(name, &e, factor, msg, len);
    } else {
        snprintf(msg, len, "%s: out of memory or download failed", name);
    }
    free(got);
    free(ref);
    free(nv);
    free(h);
    return ok;
}

static int run_case(const off_case *c, char *msg, size_t len) {
    const int gpu = g_opt.backend == FMSA_BACKEND_CUDA;
    const fmsa_dtype dt = c->dt_index ? FMSA_DTYPE_BF16 : (gpu ? FMSA_DTYPE_F16 : FMSA_DTYPE_F32);
    const size_t es = fmsa_dtype_size(dt);
    const int64_t sqy = c->sq + (c->off < 0 ? -c->off : 0), sky = c->sk + (c->off > 0 ? c->off : 0);
    const int64_t nb = (sky + 7) / 8, nsl = c->alibi2 ? B * HQ : HQ;
    const size_t nq = (size_t)(B * sqy * HQ * D), nk = (size_t)(B * sky * HKV * D);
    const size_t nqx = (size_t)(B * c->sq * HQ * D), nkx = (size_t)(B * c->sk * HKV * D);
    const size_t nl = (size_t)(B * HQ * sqy), nlx = (size_t)(B * HQ * c->sq);
    unsigned seed = 977u * (unsigned)(c->sq * 31 + c->sk * 7) + (unsigned)(c->off + 100);
    void *q = malloc(nq * es), *k = malloc(nk * es), *v = malloc(nk * es), *dout = malloc(nq * es);
    unsigned char *mask = calloc((size_t)(sqy * nb), 1);
    float *slopes = malloc((size_t)nsl * sizeof(float));
    double *ro = malloc(nq * 8), *rl = malloc(nl * 8), *rdq = malloc(nq * 8), *rdk = malloc(nk * 8),
           *rdv = malloc(nk * 8), *no = malloc(nq * 8), *nlse = malloc(nl * 8),
           *ndq = malloc(nq * 8), *ndk = malloc(nk * 8), *ndv = malloc(nk * 8);
    void *scratch = malloc(nq * 4 + nl * 4 + 2 * nk * 4 + nq * 4 + 64);
    void *dq_ = NULL, *dk_ = NULL, *dv_ = NULL, *dd_ = NULL, *dsl = NULL, *dox = NULL,
         *dlx = NULL, *ddqx = NULL, *ddkx = NULL, *ddvx = NULL, *ws = NULL;
    int ok = 0;
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    msg[0] = 0;
    if (!q || !k || !v || !dout || !mask || !slopes || !ro || !rl || !rdq || !rdk || !rdv || !no ||
        !nlse || !ndq || !ndk || !ndv || !scratch) {
        snprintf(msg, len, "out of memory");
        goto done;
    }
    draw(q, dt, nq, &seed);
    draw(k, dt, nk, &seed);
    draw(v, dt, nk, &seed);
    draw(dout, dt, nq, &seed);
    draw(slopes, FMSA_DTYPE_F32, (size_t)nsl, &seed);
    for (int64_t i = 0; i < nsl; ++i) slopes[i] = 0.2f * slopes[i] + 0.25f;
    for (int64_t i = 0; i < c->sq; ++i)
        for (int64_t j = 0; j < c->sk; ++j) mask[i * nb + (j >> 3)] |= (unsigned char)(1u << (j & 7));
    desc.softcap = c->softcap;
    {   /* the padded public problem's oracles (host memory) */
        const int64_t ms[4] = {1, 1, sqy, nb}, ss[2] = {B, HQ};
        fmsa_tensor tq = t4(q, dt, B, sqy, HQ, D), tk = t4(k, dt, B, sky, HKV, D),
                    tv = t4(v, dt, B, sky, HKV, D), tdo = t4(dout, dt, B, sqy, HQ, D);
        char *s = (char *)scratch;
        fmsa_tensor to = t4(s, dt, B, sqy, HQ, D), tdq = t4(s, dt, B, sqy, HQ, D),
                    tdk = t4(s, dt, B, sky, HKV, D), tdv = t4(s, dt, B, sky, HKV, D);
        const int64_t ls[3] = {B, HQ, sqy};
        fmsa_tensor tl = fmsa_tensor_contiguous(s, FMSA_DTYPE_F32, 3, ls);
        fmsa_attention_desc dy = desc;
        fmsa_call_tensors ct;
        fmsa_problem pf, pb;
        dy.mask = fmsa_tensor_contiguous(mask, FMSA_DTYPE_U8, 4, ms);
        dy.alibi_slopes = c->alibi2 ? fmsa_tensor_contiguous(slopes, FMSA_DTYPE_F32, 2, ss)
                                    : fmsa_tensor_contiguous(slopes, FMSA_DTYPE_F32, 1, &ss[1]);
        memset(&ct, 0, sizeof ct);
        ct.q = &tq, ct.k = &tk, ct.v = &tv, ct.o = &to, ct.lse = &tl, ct.dout = &tdo;
        ct.dq = &tdq, ct.dk = &tdk, ct.dv = &tdv;
        if (fmsa_problem_build(&pf, FMSA_PASS_FORWARD, &dy, &ct, 0, NULL, NULL) != FMSA_SUCCESS ||
            fmsa_problem_build(&pb, FMSA_PASS_BACKWARD, &dy, &ct, 0, NULL, NULL) != FMSA_SUCCESS ||
            fmsa_reference_forward(&pf, ro, rl) != FMSA_SUCCESS ||
            fmsa_reference_backward(&pb, rdq, rdk, rdv) != FMSA_SUCCESS ||
            fmsa_naive_forward(&pf, no, nlse) != 0 || fmsa_naive_backward(&pb, ndq, ndk, ndv) != 0) {
            snprintf(msg, len, "oracles: %s", fmsa_last_error());
            goto done;
        }
    }
    /* the offset passes on the backend, over views of the padded inputs */
    dq_ = upload(q, nq * es), dk_ = upload(k, nk * es), dv_ = upload(v, nk * es);
    dd_ = upload(dout, nq * es), dsl = upload(slopes, (size_t)nsl * 4);
    if (!dq_ || !dk_ || !dv_ || !dd_ || !dsl || fmsa_malloc(g_ctx, nqx * es, &dox) ||
        fmsa_malloc(g_ctx, nlx * 4, &dlx) || fmsa_malloc(g_ctx, nqx * es, &ddqx) ||
        fmsa_malloc(g_ctx, nkx * es, &ddkx) || fmsa_malloc(g_ctx, nkx * es, &ddvx)) {
        snprintf(msg, len, "device memory: %s", fmsa_last_error());
        goto done;
    }
    {
        const int64_t ss[2] = {B, HQ}, ls[3] = {B, HQ, c->sq};
        fmsa_backward_tensors bt;
        size_t wf = 0, wb = 0, w;
        fmsa_status st;
        desc.alibi_slopes = c->alibi2 ? fmsa_tensor_contiguous(dsl, FMSA_DTYPE_F32, 2, ss)
                                      : fmsa_tensor_contiguous(dsl, FMSA_DTYPE_F32, 1, &ss[1]);
        memset(&bt, 0, sizeof bt);
        bt.q = head_rows(t4(dq_, dt, B, sqy, HQ, D), c->sq);
        bt.k = head_rows(t4(dk_, dt, B, sky, HKV, D), c->sk);
        bt.v = head_rows(t4(dv_, dt, B, sky, HKV, D), c->sk);
        bt.dout = head_rows(t4(dd_, dt, B, sqy, HQ, D), c->sq);
        bt.o = t4(dox, dt, B, c->sq, HQ, D);
        bt.lse = fmsa_tensor_contiguous(dlx, FMSA_DTYPE_F32, 3, ls);
        bt.dq = t4(ddqx, dt, B, c->sq, HQ, D);
        bt.dk = t4(ddkx, dt, B, c->sk, HKV, D);
        bt.dv = t4(ddvx, dt, B, c->sk, HKV, D);
        st = fmsa_workspace_size(g_ctx, FMSA_PASS_FORWARD, &desc, &bt.q, &bt.k, &bt.v, &wf);
        if (st == FMSA_SUCCESS)
            st = fmsa_workspace_size(g_ctx, FMSA_PASS_BACKWARD, &desc, &bt.q, &bt.k, &bt.v, &wb);
        w = wf > wb ? wf : wb;
        if (st == FMSA_SUCCESS) st = fmsa_malloc(g_ctx, w ? w : 1, &ws);
        if (st == FMSA_SUCCESS)
            st = fmsa_forward_offset(g_ctx, &desc, c->off, &bt.q, &bt.k, &bt.v, &bt.o, &bt.lse,
                                     ws, w, NULL);
        if (st == FMSA_SUCCESS) st = fmsa_backward_offset(g_ctx, &desc, c->off, &bt, ws, w, NULL);
        if (st == FMSA_SUCCESS) st = fmsa_synchronize(g_ctx, NULL);
        if (st != FMSA_SUCCESS) {
            snprintf(msg, len, "%s: %s", fmsa_status_string(st), fmsa_last_error());
            goto done;
        }
    }
    {
        const double A = fmsa_rule_lse_max(rl, (int64_t)nl);
        const double fw = FMSA_RULE_FACTOR_FWD, bw = FMSA_RULE_FACTOR_BWD;
        const double uf = FMSA_RULE_SOFTMAX_UNITS_FWD, ub = FMSA_RULE_SOFTMAX_UNITS_BWD;
        ok = check("O", dox, dt, nqx, ro, no, sqy, c->sq, HQ * D, 0, fw, uf, A, 0, msg, len) &&
             check("LSE", dlx, FMSA_DTYPE_F32, nlx, rl, nlse, sqy, c->sq, 1, 1, fw, uf, A, 1, msg,
                   len) &&
             check("dQ", ddqx, dt, nqx, rdq, ndq, sqy, c->sq, HQ * D, 0, bw, ub, A, 0, msg, len) &&
             check("dK", ddkx, dt, nkx, rdk, ndk, sky, c->sk, HKV * D, 0, bw, ub, A, 0, msg, len) &&
             check("dV", ddvx, dt, nkx, rdv, ndv, sky, c->sk, HKV * D, 0, bw, ub, A, 0, msg, len);
    }
done:
    {
        void *dev[] = {dq_, dk_, dv_, dd_, dsl, dox, dlx, ddqx, ddkx, ddvx, ws};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; ++i)
            if (dev[i]) fmsa_free(g_ctx, dev[i]);
    }
    free(q), free(k), free(v), free(dout), free(mask), free(slopes), free(scratch);
    free(ro), free(rl), free(rdq), free(rdk), free(rdv);
    free(no), free(nlse), free(ndq), free(ndk), free(ndv);
    return ok;
}

static void offsets(void **state) {
    int bad = 0;
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; ++i) {
        char msg[400];
        const off_case *c = &CASES[i];
        if (!run_case(c, msg, sizeof msg)) {
            ++bad;
            print_message("FAIL sq %lld sk %lld offset %lld%s%s: %s\n", (long long)c->sq,
                          (long long)c->sk, (long long)c->off, c->alibi2 ? " [B,Hq]" : " [Hq]",
                          c->dt_index ? " bf16" : "", msg);
        }
    }
    print_message("alibi offset on %s: %zu cases, %d failed\n", g_opt.backend_name,
                  sizeof CASES / sizeof CASES[0], bad);
    assert_int_equal(bad, 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(offsets)};
    fmsa_status st;
    int rc;
    if (fmsa_test_options_parse(argc, argv, &g_opt) != 0) return 2;
    st = fmsa_test_context_create(&g_opt, &g_ctx);
    if (st == FMSA_ERR_BACKEND_UNAVAILABLE && g_opt.backend != FMSA_BACKEND_CPU) {
        fprintf(stderr, "skipped: the %s backend is not usable here (%s)\n", g_opt.backend_name,
                fmsa_last_error());
        return FMSA_TEST_EXIT_SKIP;
    }
    if (st != FMSA_SUCCESS) {
        fprintf(stderr, "context: %s\n", fmsa_last_error());
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    fmsa_context_destroy(g_ctx);
    return rc;
}
