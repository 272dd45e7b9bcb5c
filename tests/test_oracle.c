/*
 * Tests of the oracle itself, with no backend involved: the fp64 reference
 * (gradients against central finite differences of its own forward, closed
 * forms, row functions against the full passes), the naive same-precision
 * implementation (close to the reference in f32), and the test-support
 * checks (planted guard, padding, input and poison faults must be caught; spec
 * strings must round-trip).  If the oracle were wrong, every backend suite
 * would be judged against a wrong answer, so this runs with the CPU label.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/fmsa_half.h"
#include "common/naive.h"
#include "common/reference.h"
#include "support/fmsa_test_problem.h"

/// Dense double array, freed by the caller.
static double *oracle_dense(int64_t n) {
    double *d = (double *)calloc((size_t)n + 1, sizeof(double));
    assert_non_null(d);
    return d;
}

/// L = sum(dout * O) of the fp64 forward: the loss whose gradient the
/// reference backward returns.
static double oracle_loss(fmsa_test_problem *tp, const double *dout) {
    double *o = oracle_dense(tp->n_q), loss = 0.0;
    assert_int_equal(fmsa_reference_forward(&tp->host, o, NULL), FMSA_SUCCESS);
    for (int64_t n = 0; n < tp->n_q; ++n) loss += dout[n] * o[n];
    free(o);
    return loss;
}

/*
 * Central differences on every element of one f32 input.  The step is applied
 * in f32 (the reference reads f32), and the exact step taken is used as the
 * denominator.  h = 2^-10 makes the truncation error O(h^2 f''') ~ 1e-6
 * relative, far above fp64 cancellation (1e-16 |L| / h ~ 1e-13).
 */
static void oracle_fd_check(fmsa_test_problem *tp, fmsa_test_buf *b, const double *grad,
                            const double *dout) {
    const double h = 1.0 / 1024.0;
    double gmax = 0.0, worst = 0.0;
    float *origin = (float *)fmsa_test_buf_origin(b, b->host);
    for (int64_t n = 0; n < b->count; ++n) gmax = fmax(gmax, fabs(grad[n]));
    for (int64_t n = 0; n < b->count; ++n) {
        int64_t off = fmsa_test_buf_offset(b, n);
        float x = origin[off], xp = (float)(x + h), xm = (float)(x - h);
        double lp, lm, fd;
        origin[off] = xp;
        lp = oracle_loss(tp, dout);
        origin[off] = xm;
        lm = oracle_loss(tp, dout);
        origin[off] = x;
        fd = (lp - lm) / ((double)xp - (double)xm);
        worst = fmax(worst, fabs(fd - grad[n]));
    }
    if (worst > 1e-4 * (1.0 + gmax))
        fail_msg("%s: finite differences differ from the reference gradient by %.3e (max |grad| %.3e)",
                 b->name, worst, gmax);
}

static void oracle_gradients(const char *spec_str) {
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    double *dq, *dk, *dv, *dout;
    assert_int_equal(fmsa_test_spec_parse(spec_str, &spec), 0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    dq = oracle_dense(tp.n_q);
    dk = oracle_dense(tp.n_k);
    dv = oracle_dense(tp.n_k);
    dout = oracle_dense(tp.n_q);
    fmsa_test_buf_load(&tp.dout, tp.dout.host, dout);
    assert_int_equal(fmsa_reference_backward(&tp.host, dq, dk, dv), FMSA_SUCCESS);
    oracle_fd_check(&tp, &tp.q, dq, dout);
    oracle_fd_check(&tp, &tp.k, dk, dout);
    oracle_fd_check(&tp, &tp.v, dv, dout);
    free(dq);
    free(dk);
    free(dv);
    free(dout);
    fmsa_test_problem_destroy(NULL, &tp);
}

static void reference_gradients_plain(void **state) {
    (void)state;
    oracle_gradients("pass=bwd dtype=f32 b=2 sq=5 sk=7 hq=2 hkv=2 d=8 seed=3");
}

static void reference_gradients_features(void **state) {
    (void)state;
    /* softcap chain rule, ALiBi, mask, GQA 4:2, causal with sq < sk */
    oracle_gradients("pass=bwd dtype=f32 b=2 sq=5 sk=9 hq=4 hkv=2 d=8 causal=1 softcap=2 alibi=2 "
                     "mask=1 strided=1 seed=4");
}

static void reference_gradients_varlen(void **state) {
    (void)state;
    /* varlen with an empty query and an empty key sequence, window, MQA */
    oracle_gradients("pass=bwd dtype=f32 b=4 sq=6 sk=8 hq=3 hkv=1 d=8 varlen=1 wl=2 wr=1 seed=5");
}

/// Closed forms: with every key equal, P is uniform, O = mean(V), LSE = s + log(sk).
static void reference_closed_form(void **state) {
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    double *o, *lse, *v, *q, *k0;
    const int64_t D = 16, sk = 11;
    (void)state;
    assert_int_equal(fmsa_test_spec_parse("dtype=f32 b=1 sq=3 sk=11 hq=1 hkv=1 d=16", &spec), 0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    {
        float *k = (float *)fmsa_test_buf_origin(&tp.k, tp.k.host);
        for (int64_t j = 1; j < sk; ++j) memcpy(k + j * D, k, (size_t)D * sizeof(float));
    }
    o = oracle_dense(tp.n_q);
    lse = oracle_dense(tp.n_lse);
    v = oracle_dense(tp.n_k);
    q = oracle_dense(tp.n_q);
    k0 = oracle_dense(tp.n_k);
    fmsa_test_buf_load(&tp.v, tp.v.host, v);
    fmsa_test_buf_load(&tp.q, tp.q.host, q);
    fmsa_test_buf_load(&tp.k, tp.k.host, k0);
    assert_int_equal(fmsa_reference_forward(&tp.host, o, lse), FMSA_SUCCESS);
    for (int64_t i = 0; i < 3; ++i) {
        double s = 0.0;
        for (int64_t d = 0; d < D; ++d) s += q[i * D + d] * k0[d];
        s *= (double)tp.host.softmax_scale;
        assert_true(fabs(lse[i] - (s + log((double)sk))) < 1e-12 * (1.0 + fabs(s)));
        for (int64_t d = 0; d < D; ++d) {
            double mean = 0.0;
            for (int64_t j = 0; j < sk; ++j) mean += v[j * D + d];
            mean /= (double)sk;
            assert_true(fabs(o[i * D + d] - mean) < 1e-12);
        }
    }
    free(o);
    free(lse);
    free(v);
    free(q);
    free(k0);
    fmsa_test_problem_destroy(NULL, &tp);
}

/// Row functions give exactly what the full passes give (same code path).
static void reference_rows_match(void **state) {
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    double *o, *lse, *dq, *dk, *dv, row[64], row_lse;
    (void)state;
    assert_int_equal(fmsa_test_spec_parse("pass=bwd dtype=bf16 b=3 sq=9 sk=13 hq=4 hkv=2 d=64 "
                                          "varlen=1 causal=1 softcap=3 mask=1 seed=9",
                                          &spec),
                     0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    o = oracle_dense(tp.n_q);
    lse = oracle_dense(tp.n_lse);
    dq = oracle_dense(tp.n_q);
    dk = oracle_dense(tp.n_k);
    dv = oracle_dense(tp.n_k);
    assert_int_equal(fmsa_reference_forward(&tp.host, o, lse), FMSA_SUCCESS);
    assert_int_equal(fmsa_reference_backward(&tp.host, dq, dk, dv), FMSA_SUCCESS);
    for (int64_t b = 0; b < tp.host.batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(&tp.host, b);
        for (int64_t h = 0; h < tp.host.heads_q; ++h)
            for (int64_t i = 0; i < s.sq; ++i) {
                int64_t at = ((s.q_row0 + i) * tp.host.heads_q + h) * 64;
                int64_t lat = h * tp.host.total_q + s.q_row0 + i;
                assert_int_equal(fmsa_reference_forward_row(&tp.host, b, h, i, row, &row_lse),
                                 FMSA_SUCCESS);
                assert_memory_equal(row, o + at, sizeof(double) * 64);
                assert_true(row_lse == lse[lat] || (isinf(row_lse) && isinf(lse[lat])));
                assert_int_equal(fmsa_reference_backward_dq_row(&tp.host, b, h, i, row),
                                 FMSA_SUCCESS);
                assert_memory_equal(row, dq + at, sizeof(double) * 64);
            }
    }
    free(o);
    free(lse);
    free(dq);
    free(dk);
    free(dv);
    fmsa_test_problem_destroy(NULL, &tp);
}

/// The naive f32 implementation is an fp32 computation of the same function.
static void naive_close_to_reference(void **state) {
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    double *o, *lse, *no, *nlse, worst = 0.0;
    (void)state;
    assert_int_equal(fmsa_test_spec_parse("dtype=f32 b=2 sq=33 sk=47 hq=6 hkv=2 d=40 softcap=4 "
                                          "alibi=1 mask=1 wl=20 seed=11",
                                          &spec),
                     0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    o = oracle_dense(tp.n_q);
    lse = oracle_dense(tp.n_lse);
    no = oracle_dense(tp.n_q);
    nlse = oracle_dense(tp.n_lse);
    assert_int_equal(fmsa_reference_forward(&tp.host, o, lse), FMSA_SUCCESS);
    assert_int_equal(fmsa_naive_forward(&tp.host, no, nlse), 0);
    for (int64_t n = 0; n < tp.n_q; ++n) worst = fmax(worst, fabs(o[n] - no[n]));
    for (int64_t n = 0; n < tp.n_lse; ++n) {
        assert_true(isinf(lse[n]) == isinf(nlse[n]));
        if (!isinf(lse[n])) worst = fmax(worst, fabs(lse[n] - nlse[n]));
    }
    assert_true(worst > 0.0 && worst < 1e-5);
    free(o);
    free(lse);
    free(no);
    free(nlse);
    fmsa_test_problem_destroy(NULL, &tp);
}

/// Planted faults in a downloaded image must each be reported.
static void buffer_checks_catch_faults(void **state) {
    fmsa_test_buf in, out;
    int64_t shape[4] = {2, 3, 2, 8}, st[4] = {80, 16, 48, 1}; /* padded rows: holes */
    unsigned char *img;
    char msg[256];
    double dense[96];
    (void)state;
    for (int n = 0; n < 96; ++n) dense[n] = n * 0.25;
    assert_int_equal(fmsa_test_buf_init(&in, "in", FMSA_DTYPE_F16, FMSA_TEST_INPUT, 4, shape, st), 0);
    assert_int_equal(fmsa_test_buf_init(&out, "out", FMSA_DTYPE_F16, FMSA_TEST_OUTPUT, 4, shape, st), 0);
    fmsa_test_buf_store(&in, dense);
    img = (unsigned char *)malloc(in.total);
    assert_non_null(img);

    memcpy(img, in.host, in.total);
    assert_int_equal(fmsa_test_buf_check(&in, img, 0, msg, sizeof msg), 0);
    img[FMSA_TEST_GUARD_BYTES - 1] ^= 1; /* byte just before the tensor */
    assert_int_equal(fmsa_test_buf_check(&in, img, 0, msg, sizeof msg), -1);
    memcpy(img, in.host, in.total);
    img[in.total - FMSA_TEST_GUARD_BYTES] ^= 1; /* byte just after */
    assert_int_equal(fmsa_test_buf_check(&in, img, 0, msg, sizeof msg), -1);
    memcpy(img, in.host, in.total);
    img[FMSA_TEST_GUARD_BYTES + 2 * 9] ^= 1; /* an input element */
    assert_int_equal(fmsa_test_buf_check(&in, img, 0, msg, sizeof msg), -1);

    /* an output written everywhere it should be passes; a hole write or an
     * element left poisoned fails */
    memcpy(img, out.host, out.total);
    for (int64_t n = 0; n < out.count; ++n)
        fmsa_store_f32(fmsa_test_buf_origin(&out, img), 2, fmsa_test_buf_offset(&out, n), 1.0f);
    assert_int_equal(fmsa_test_buf_check(&out, img, 0, msg, sizeof msg), 0);
    ((uint16_t *)fmsa_test_buf_origin(&out, img))[8] = 0; /* padding after row 0 */
    assert_int_equal(fmsa_test_buf_check(&out, img, 0, msg, sizeof msg), -1);
    ((uint16_t *)fmsa_test_buf_origin(&out, img))[8] = 0xFFFF;
    ((uint16_t *)fmsa_test_buf_origin(&out, img))[fmsa_test_buf_offset(&out, 95)] = 0xFFFF;
    assert_int_equal(fmsa_test_buf_check(&out, img, 0, msg, sizeof msg), -1);
    free(img);
    fmsa_test_buf_free(NULL, &in);
    fmsa_test_buf_free(NULL, &out);
}

static void spec_round_trip(void **state) {
    const char *rows[] = {
        "pass=bwd dtype=bf16 b=3 sq=113 sk=203 hq=6 hkv=2 d=136 causal=1 wl=48 softcap=5.5 "
        "alibi=2 mask=3 varlen=1 strided=1 det=1 scale=0.3 seed=77",
        "pass=fwd dtype=f16 b=2 sq=1 sk=200 hq=6 hkv=1 d=72 page=16 seqused=1 lse=0",
    };
    (void)state;
    for (size_t r = 0; r < 2; ++r) {
        fmsa_test_spec a, b;
        char s1[512], s2[512];
        assert_int_equal(fmsa_test_spec_parse(rows[r], &a), 0);
        fmsa_test_spec_format(&a, s1, sizeof s1);
        assert_int_equal(fmsa_test_spec_parse(s1, &b), 0);
        fmsa_test_spec_format(&b, s2, sizeof s2);
        assert_string_equal(s1, s2);
    }
    {
        fmsa_test_spec a;
        assert_int_equal(fmsa_test_spec_parse("b=2 bogus=1", &a), -1);
        assert_int_equal(fmsa_test_spec_parse("b=two", &a), -1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_gradients_plain),
        cmocka_unit_test(reference_gradients_features),
        cmocka_unit_test(reference_gradients_varlen),
        cmocka_unit_test(reference_closed_form),
        cmocka_unit_test(reference_rows_match),
        cmocka_unit_test(naive_close_to_reference),
        cmocka_unit_test(buffer_checks_catch_faults),
        cmocka_unit_test(spec_round_trip),
    };
    return cmocka_run_group_tests_name("oracle", tests, NULL, NULL);
}
