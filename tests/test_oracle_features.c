/*
 * The fp64 reference on the features of API v0.2, with no backend involved:
 * dsink and the dlse-extended dq/dk/dv against central finite differences of
 * the reference's own forward (the loss L = sum(dout * O) + sum(dlse * lse)),
 * sinks of -inf against no sinks (bit for bit, reference and naive), a value
 * head dim other than D against a closed form (sinks included), and the
 * reference merge: two halves of the keys merged equal the whole, -inf sides
 * contribute nothing (even when their rows hold NaN), a state merged with
 * itself.  The backend suites are only as good as this oracle.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/naive.h"
#include "common/reference.h"
#include "support/fmsa_test_problem.h"
#include "support/fmsa_test_runner.h"

static double *of_dense(int64_t n) {
    double *d = (double *)calloc((size_t)n + 1, sizeof(double));
    assert_non_null(d);
    return d;
}

/// L = sum(dout * O) + sum over rows with a finite lse of dlse * lse, in fp64.
static double of_loss(fmsa_test_problem *tp, const double *dout, const double *dlse) {
    double *o = of_dense(tp->n_o), *lse = of_dense(tp->n_lse), loss = 0.0;
    assert_int_equal(fmsa_reference_forward(&tp->host, o, lse), FMSA_SUCCESS);
    for (int64_t n = 0; n < tp->n_o; ++n) loss += dout[n] * o[n];
    if (dlse)
        for (int64_t n = 0; n < tp->n_lse; ++n)
            if (isfinite(lse[n])) loss += dlse[n] * lse[n];
    free(o);
    free(lse);
    return loss;
}

/*
 * Central differences on every element of one f32 input (the step taken in
 * f32, the exact step as denominator; h = 2^-10: truncation ~1e-6 relative,
 * far above fp64 cancellation).  An input of -inf (a sink that is absent)
 * must have exactly zero gradient.
 */
static void of_fd_check(fmsa_test_problem *tp, fmsa_test_buf *b, const double *grad,
                        const double *dout, const double *dlse) {
    const double h = 1.0 / 1024.0;
    double gmax = 0.0, worst = 0.0;
    float *origin = (float *)fmsa_test_buf_origin(b, b->host);
    for (int64_t n = 0; n < b->count; ++n) gmax = fmax(gmax, fabs(grad[n]));
    for (int64_t n = 0; n < b->count; ++n) {
        int64_t off = fmsa_test_buf_offset(b, n);
        float x = origin[off], xp = (float)(x + h), xm = (float)(x - h);
        double lp, lm, fd;
        if (isinf(x)) {
            if (grad[n] != 0.0) fail_msg("%s[%lld] = -inf: gradient %g, not 0", b->name,
                                         (long long)n, grad[n]);
            continue;
        }
        origin[off] = xp;
        lp = of_loss(tp, dout, dlse);
        origin[off] = xm;
        lm = of_loss(tp, dout, dlse);
        origin[off] = x;
        fd = (lp - lm) / ((double)xp - (double)xm);
        worst = fmax(worst, fabs(fd - grad[n]));
    }
    if (worst > 1e-4 * (1.0 + gmax))
        fail_msg("%s: finite differences differ from the reference gradient by %.3e (max "
                 "|grad| %.3e)",
                 b->name, worst, gmax);
    assert_true(gmax > 0.0); /* a zero gradient everywhere would pass trivially */
}

/// Every gradient the reference gives for spec (dq, dk, dv; dsink with sinks)
/// against finite differences of L.
static void of_gradients(const char *spec_str) {
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    double *dq, *dk, *dv, *dsink, *dout, *dlse = NULL;
    assert_int_equal(fmsa_test_spec_parse(spec_str, &spec), 0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    dq = of_dense(tp.n_q);
    dk = of_dense(tp.n_k);
    dv = of_dense(tp.n_v);
    dsink = of_dense(spec.hq);
    dout = of_dense(tp.n_o);
    fmsa_test_buf_load(&tp.dout, tp.dout.host, dout);
    if (tp.has_dlse) {
        dlse = of_dense(tp.n_lse);
        fmsa_test_buf_load(&tp.dlse, tp.dlse.host, dlse);
    }
    assert_int_equal(fmsa_reference_backward(&tp.host, dq, dk, dv), FMSA_SUCCESS);
    assert_int_equal(fmsa_reference_dsink(&tp.host, dsink), FMSA_SUCCESS);
    of_fd_check(&tp, &tp.q, dq, dout, dlse);
    of_fd_check(&tp, &tp.k, dk, dout, dlse);
    of_fd_check(&tp, &tp.v, dv, dout, dlse);
    if (tp.has_sinks) of_fd_check(&tp, &tp.sinks, dsink, dout, dlse);
    free(dq);
    free(dk);
    free(dv);
    free(dsink);
    free(dout);
    free(dlse);
    fmsa_test_problem_destroy(NULL, &tp);
}

static void fd_dsink(void **state) {
    (void)state;
    of_gradients("pass=bwd dtype=f32 b=2 sq=5 sk=7 hq=3 hkv=1 d=8 sinks=1 seed=21");
}

static void fd_dlse(void **state) {
    (void)state;
    of_gradients("pass=bwd dtype=f32 b=2 sq=5 sk=7 hq=2 hkv=2 d=8 dlse=1 causal=1 seed=22");
}

static void fd_sinks_dlse_dv_varlen(void **state) {
    (void)state;
    /* varlen: sequence 2 has no keys (its rows have lse = t_h and add dlse_i to
     * dsink); extreme sinks: head 0 -inf (gradient exactly 0), head 1 dominant */
    of_gradients("pass=bwd dtype=f32 b=4 sq=5 sk=6 hq=3 hkv=1 d=8 dv=16 sinks=2 dlse=1 "
                 "varlen=1 softcap=3 mask=1 strided=1 seed=23");
}

/// A problem's dense forward/backward results (reference, then naive).
typedef struct of_results {
    double *o, *lse, *dq, *dk, *dv, *dsink;
} of_results;

static void of_results_run(fmsa_test_problem *tp, int naive, of_results *r) {
    const fmsa_problem *p = &tp->host;
    r->o = of_dense(tp->n_o);
    r->lse = of_dense(tp->n_lse);
    r->dq = of_dense(tp->n_q);
    r->dk = of_dense(tp->n_k);
    r->dv = of_dense(tp->n_v);
    r->dsink = of_dense(tp->spec.hq);
    if (naive) {
        assert_int_equal(fmsa_naive_forward(p, r->o, r->lse), 0);
        assert_int_equal(fmsa_naive_backward(p, r->dq, r->dk, r->dv), 0);
        assert_int_equal(fmsa_naive_dsink(p, r->dsink), 0);
    } else {
        assert_int_equal(fmsa_reference_forward(p, r->o, r->lse), FMSA_SUCCESS);
        assert_int_equal(fmsa_reference_backward(p, r->dq, r->dk, r->dv), FMSA_SUCCESS);
        assert_int_equal(fmsa_reference_dsink(p, r->dsink), FMSA_SUCCESS);
    }
}

static void of_results_free(of_results *r) {
    free(r->o);
    free(r->lse);
    free(r->dq);
    free(r->dk);
    free(r->dv);
    free(r->dsink);
}

/// Sinks of -inf are no sinks: every output bit-identical, dsink exactly 0.
static void sinks_minus_inf_are_none(void **state) {
    const char *spec_str = "pass=bwd dtype=bf16 b=4 sq=9 sk=13 hq=4 hkv=2 d=16 dv=24 sinks=1 "
                           "dlse=1 varlen=1 causal=1 seed=24";
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    (void)state;
    assert_int_equal(fmsa_test_spec_parse(spec_str, &spec), 0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    for (int naive = 0; naive < 2; ++naive) {
        of_results with, without;
        float *t = (float *)fmsa_test_buf_origin(&tp.sinks, tp.sinks.host);
        for (int64_t h = 0; h < spec.hq; ++h) t[h * tp.sinks.strides[0]] = -INFINITY;
        of_results_run(&tp, naive, &with);
        tp.host.has_sinks = 0;
        of_results_run(&tp, naive, &without);
        tp.host.has_sinks = 1;
        assert_memory_equal(with.o, without.o, sizeof(double) * (size_t)tp.n_o);
        assert_memory_equal(with.lse, without.lse, sizeof(double) * (size_t)tp.n_lse);
        assert_memory_equal(with.dq, without.dq, sizeof(double) * (size_t)tp.n_q);
        assert_memory_equal(with.dk, without.dk, sizeof(double) * (size_t)tp.n_k);
        assert_memory_equal(with.dv, without.dv, sizeof(double) * (size_t)tp.n_v);
        for (int64_t h = 0; h < spec.hq; ++h) assert_true(with.dsink[h] == 0.0);
        of_results_free(&with);
        of_results_free(&without);
    }
    fmsa_test_problem_destroy(NULL, &tp);
}

/*
 * Closed form with Dv != D and sinks: every key equal, so every score of row
 * i is the same s_i and, with sink t,
 *   lse_i = log(exp(t) + sk exp(s_i)),  O_i = mean_j(V_j) * sk exp(s_i - lse_i)
 * over all Dv columns; with the sink switched off O_i = mean(V) and
 * lse_i = s_i + log sk.
 */
static void value_dim_closed_form(void **state) {
    const int64_t D = 16, Dv = 40, sk = 11, sq = 3;
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    double *o, *lse, *v, *q, *k0, t;
    (void)state;
    assert_int_equal(fmsa_test_spec_parse("dtype=f32 b=1 sq=3 sk=11 hq=1 hkv=1 d=16 dv=40 "
                                          "sinks=1 seed=25",
                                          &spec),
                     0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    {
        float *k = (float *)fmsa_test_buf_origin(&tp.k, tp.k.host);
        for (int64_t j = 1; j < sk; ++j) memcpy(k + j * D, k, (size_t)D * sizeof(float));
        t = (double)((float *)fmsa_test_buf_origin(&tp.sinks, tp.sinks.host))[0];
    }
    o = of_dense(tp.n_o);
    lse = of_dense(tp.n_lse);
    v = of_dense(tp.n_v);
    q = of_dense(tp.n_q);
    k0 = of_dense(tp.n_k);
    fmsa_test_buf_load(&tp.v, tp.v.host, v);
    fmsa_test_buf_load(&tp.q, tp.q.host, q);
    fmsa_test_buf_load(&tp.k, tp.k.host, k0);
    for (int sinks = 1; sinks >= 0; --sinks) {
        tp.host.has_sinks = sinks;
        assert_int_equal(fmsa_reference_forward(&tp.host, o, lse), FMSA_SUCCESS);
        for (int64_t i = 0; i < sq; ++i) {
            double s = 0.0, want_lse, share;
            for (int64_t d = 0; d < D; ++d) s += q[i * D + d] * k0[d];
            s *= (double)tp.host.softmax_scale;
            want_lse = sinks ? log(exp(t) + (double)sk * exp(s)) : s + log((double)sk);
            share = (double)sk * exp(s - want_lse); /* 1 without the sink */
            assert_true(fabs(lse[i] - want_lse) < 1e-12 * (1.0 + fabs(want_lse)));
            for (int64_t d = 0; d < Dv; ++d) {
                double mean = 0.0;
                for (int64_t j = 0; j < sk; ++j) mean += v[j * Dv + d];
                mean /= (double)sk;
                assert_true(fabs(o[i * Dv + d] - share * mean) < 1e-12);
            }
            if (sinks) assert_true(share < 1.0 - 1e-6); /* the sink took a visible share */
        }
    }
    free(o);
    free(lse);
    free(v);
    free(q);
    free(k0);
    fmsa_test_problem_destroy(NULL, &tp);
}

/// A row with no visible key: O = 0, lse = t_h (reference and naive).
static void empty_rows_with_sinks(void **state) {
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    (void)state;
    /* causal with sq > sk: the first sq - sk rows see no key */
    assert_int_equal(fmsa_test_spec_parse("dtype=f16 b=1 sq=9 sk=4 hq=2 hkv=1 d=8 dv=16 "
                                          "causal=1 sinks=1 seed=26",
                                          &spec),
                     0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    for (int naive = 0; naive < 2; ++naive) {
        double *o = of_dense(tp.n_o), *lse = of_dense(tp.n_lse);
        const float *t = (const float *)fmsa_test_buf_origin(&tp.sinks, tp.sinks.host);
        if (naive) assert_int_equal(fmsa_naive_forward(&tp.host, o, lse), 0);
        else assert_int_equal(fmsa_reference_forward(&tp.host, o, lse), FMSA_SUCCESS);
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < 9; ++i) {
                const double want = (double)t[h * tp.sinks.strides[0]];
                if (i < 5) {
                    assert_true(lse[h * 9 + i] == want);
                    for (int64_t d = 0; d < 16; ++d) assert_true(o[(i * 2 + h) * 16 + d] == 0.0);
                } else {
                    assert_true(lse[h * 9 + i] > want); /* keys add to the sum */
                }
            }
        free(o);
        free(lse);
    }
    fmsa_test_problem_destroy(NULL, &tp);
}

/* ------------------------------------------------------------------------ */
/* The reference merge                                                      */
/* ------------------------------------------------------------------------ */

/// A dense f32 [1, S, H, Dv] partial and its lse [1, H, S], as merge views.
typedef struct of_part {
    float *o, *lse;
} of_part;

static void of_part_make(of_part *pt, const double *o, const double *lse, int64_t S, int64_t H,
                         int64_t Dv) {
    pt->o = (float *)malloc(sizeof(float) * (size_t)(S * H * Dv));
    pt->lse = (float *)malloc(sizeof(float) * (size_t)(S * H));
    assert_non_null(pt->o);
    assert_non_null(pt->lse);
    for (int64_t n = 0; n < S * H * Dv; ++n) pt->o[n] = (float)o[n];
    for (int64_t n = 0; n < S * H; ++n) pt->lse[n] = (float)lse[n];
}

static fmsa_merge_problem of_merge_problem(const of_part *a, const of_part *b, int64_t S,
                                           int64_t H, int64_t Dv) {
    fmsa_merge_problem mp;
    memset(&mp, 0, sizeof mp);
    mp.batch = 1;
    mp.seqlen = S;
    mp.heads = H;
    mp.head_dim_v = Dv;
    mp.dtype_a = mp.dtype_b = mp.dtype_o = FMSA_DTYPE_F32;
    mp.o_a.data = a->o;
    mp.o_b.data = b->o;
    mp.o_a.sb = mp.o_b.sb = S * H * Dv;
    mp.o_a.ss = mp.o_b.ss = H * Dv;
    mp.o_a.sh = mp.o_b.sh = Dv;
    mp.lse_a.data = a->lse;
    mp.lse_b.data = b->lse;
    mp.lse_a.s0 = mp.lse_b.s0 = H * S;
    mp.lse_a.s1 = mp.lse_b.s1 = S;
    mp.lse_a.s2 = mp.lse_b.s2 = 1;
    return mp;
}

/*
 * Keys split in two halves: the forward over each half (the first half with
 * the sink, which belongs to exactly one side), merged, equals the forward
 * over all keys to the f32 rounding of the partials (2^-24 relative of o and
 * lse, amplified by at most a few units through exp and the weights).
 */
static void merge_halves_equal_whole(void **state) {
    const int64_t S = 7, H = 3, Dv = 24, sk = 20, half = 9;
    fmsa_test_spec spec;
    fmsa_test_problem tp;
    fmsa_problem pa, pb;
    double *o = of_dense(S * H * Dv), *lse = of_dense(S * H), *oa = of_dense(S * H * Dv);
    double *la = of_dense(S * H), *ob = of_dense(S * H * Dv), *lb = of_dense(S * H);
    double *om = of_dense(S * H * Dv), *lm = of_dense(S * H), worst = 0.0, omax = 0.0;
    of_part a, b;
    fmsa_merge_problem mp;
    (void)state;
    assert_int_equal(fmsa_test_spec_parse("dtype=f32 b=1 sq=7 sk=20 hq=3 hkv=1 d=16 dv=24 "
                                          "sinks=1 seed=27",
                                          &spec),
                     0);
    assert_int_equal(fmsa_test_problem_create(&tp, &spec), 0);
    assert_int_equal(fmsa_reference_forward(&tp.host, o, lse), FMSA_SUCCESS);
    pa = pb = tp.host;
    pa.seqlen_k = pa.total_k = half;
    pb.seqlen_k = pb.total_k = sk - half;
    pb.has_sinks = 0;
    pb.k.byte_offset += half * pb.k.ss * (int64_t)sizeof(float);
    pb.v.byte_offset += half * pb.v.ss * (int64_t)sizeof(float);
    assert_int_equal(fmsa_reference_forward(&pa, oa, la), FMSA_SUCCESS);
    assert_int_equal(fmsa_reference_forward(&pb, ob, lb), FMSA_SUCCESS);
    of_part_make(&a, oa, la, S, H, Dv);
    of_part_make(&b, ob, lb, S, H, Dv);
    mp = of_merge_problem(&a, &b, S, H, Dv);
    assert_int_equal(fmsa_reference_merge(&mp, om, lm), FMSA_SUCCESS);
    for (int64_t n = 0; n < S * H * Dv; ++n) {
        worst = fmax(worst, fabs(om[n] - o[n]));
        omax = fmax(omax, fabs(o[n]));
    }
    assert_true(worst <= 8.0 * ldexp(1.0, -24) * (1.0 + omax));
    for (int64_t n = 0; n < S * H; ++n)
        assert_true(fabs(lm[n] - lse[n]) <= 8.0 * ldexp(1.0, -24) * (1.0 + fabs(lse[n])));
    free(a.o);
    free(a.lse);
    free(b.o);
    free(b.lse);
    free(o);
    free(lse);
    free(oa);
    free(la);
    free(ob);
    free(lb);
    free(om);
    free(lm);
    fmsa_test_problem_destroy(NULL, &tp);
}

/*
 * A side with lse = -inf contributes nothing even though its row holds NaN:
 * the other side comes back exactly; both -inf give o = 0, lse = -inf.  A
 * state merged with itself keeps o and adds log 2 to lse.
 */
static void merge_masked_sides_and_self(void **state) {
    const int64_t S = 4, H = 2, Dv = 8;
    of_part a, b;
    double *o = of_dense(S * H * Dv), *lse = of_dense(S * H);
    fmsa_merge_problem mp;
    (void)state;
    a.o = (float *)malloc(sizeof(float) * (size_t)(S * H * Dv));
    a.lse = (float *)malloc(sizeof(float) * (size_t)(S * H));
    b.o = (float *)malloc(sizeof(float) * (size_t)(S * H * Dv));
    b.lse = (float *)malloc(sizeof(float) * (size_t)(S * H));
    for (int64_t n = 0; n < S * H * Dv; ++n) {
        a.o[n] = NAN; /* every row of a is garbage: only -inf rows may be read past */
        b.o[n] = 0.25f * (float)(n % 13) - 1.0f;
    }
    for (int64_t n = 0; n < S * H; ++n) {
        a.lse[n] = -INFINITY;
        b.lse[n] = n % 3 == 0 ? -INFINITY : 0.5f * (float)n; /* some rows: both -inf */
    }
    mp = of_merge_problem(&a, &b, S, H, Dv);
    assert_int_equal(fmsa_reference_merge(&mp, o, lse), FMSA_SUCCESS);
    for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t l = h * S + s, r = (s * H + h) * Dv;
            assert_true(lse[l] == (double)b.lse[l]);
            for (int64_t d = 0; d < Dv; ++d)
                assert_true(o[r + d] == (isinf(b.lse[l]) ? 0.0 : (double)b.o[r + d]));
        }
    /* the same state on both sides (in place for the inputs) */
    mp = of_merge_problem(&b, &b, S, H, Dv);
    assert_int_equal(fmsa_reference_merge(&mp, o, lse), FMSA_SUCCESS);
    for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t l = h * S + s, r = (s * H + h) * Dv;
            if (isinf(b.lse[l])) {
                assert_true(isinf(lse[l]) && lse[l] < 0);
                continue;
            }
            assert_true(fabs(lse[l] - ((double)b.lse[l] + log(2.0))) < 1e-14 * (1.0 + lse[l]));
            for (int64_t d = 0; d < Dv; ++d)
                assert_true(fabs(o[r + d] - (double)b.o[r + d]) < 1e-15);
        }
    free(a.o);
    free(a.lse);
    free(b.o);
    free(b.lse);
    free(o);
    free(lse);
}

/// The features suite's refusal rule: the gate's words pass as 'not
/// supported', a planner's (or any other) refusal does not.
static void gate_refusals_told_apart(void **state) {
    (void)state;
    assert_true(fmsa_test_is_gate_refusal(
        "refused (FMSA_ERR_NOT_SUPPORTED): cpu: attention sinks (desc.sinks) are not supported "
        "by this backend"));
    assert_true(fmsa_test_is_gate_refusal(
        "refused (FMSA_ERR_NOT_SUPPORTED): cpu: head_dim 512 / head_dim_v 512: this backend runs "
        "head dims up to 256"));
    assert_false(fmsa_test_is_gate_refusal(
        "refused (FMSA_ERR_NOT_SUPPORTED): no forward tile table row for arch 'opencl-cpu' "
        "(opencl backend, table 'opencl-cpu'), head_dim 512, dtype bf16"));
    assert_false(fmsa_test_is_gate_refusal("refused (FMSA_ERR_NOT_SUPPORTED): paged KV is "
                                           "forward-only"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fd_dsink),
        cmocka_unit_test(fd_dlse),
        cmocka_unit_test(fd_sinks_dlse_dv_varlen),
        cmocka_unit_test(sinks_minus_inf_are_none),
        cmocka_unit_test(value_dim_closed_form),
        cmocka_unit_test(empty_rows_with_sinks),
        cmocka_unit_test(merge_halves_equal_whole),
        cmocka_unit_test(merge_masked_sides_and_self),
        cmocka_unit_test(gate_refusals_told_apart),
    };
    return cmocka_run_group_tests_name("oracle_features", tests, NULL, NULL);
}
