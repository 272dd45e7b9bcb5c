#include "support/fmsa_test_runner.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/naive.h"
#include "common/reference.h"
#include "support/fmsa_test_check.h"
#include "support/fmsa_test_options.h"
#include "support/fmsa_test_oracle.h"
#include "support/fmsa_test_problem.h"

/* ------------------------------------------------------------------------ */
/* One case                                                                 */
/* ------------------------------------------------------------------------ */

/// Appends a formatted line to the case's message.
static void run_note(char *msg, size_t len, const char *fmt, ...) {
    size_t used = strlen(msg);
    va_list ap;
    if (used + 1 >= len) return;
    va_start(ap, fmt);
    vsnprintf(msg + used, len - used, fmt, ap);
    va_end(ap);
    used = strlen(msg);
    if (used + 1 < len) {
        msg[used] = '\n';
        msg[used + 1] = '\0';
    }
}

/// Dense double arrays of one case (NULL where the pass has none).
typedef struct run_arrays {
    double *ref_o, *ref_lse, *nv_o, *nv_lse;
    double *ref_dq, *ref_dk, *ref_dv, *nv_dq, *nv_dk, *nv_dv;
    double *x_dq, *x_dk, *x_dv; ///< part (c) of check_rule.h per element (single-key rows)
    double *ref_dsink, *nv_dsink; ///< [Hq] when the case checks dsink
    double *x_dsink;              ///< part (d) of check_rule.h per head
    double *got;           ///< backend result of the tensor being compared
    unsigned char *image;  ///< a downloaded allocation
} run_arrays;

static void run_arrays_free(run_arrays *a) {
    double **all[] = {&a->ref_o, &a->ref_lse, &a->nv_o,  &a->nv_lse, &a->ref_dq, &a->ref_dk,
                      &a->ref_dv, &a->nv_dq,  &a->nv_dk, &a->nv_dv,  &a->got,
                      &a->x_dq,   &a->x_dk,   &a->x_dv,   &a->ref_dsink, &a->nv_dsink, &a->x_dsink};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        free(*all[i]);
        *all[i] = NULL;
    }
    free(a->image);
    a->image = NULL;
}

static double *run_dense(int64_t n) { return (double *)malloc(((size_t)n + 1) * sizeof(double)); }

/// Host-side oracles: the fp64 reference and the naive same-precision results.
static int run_oracles(fmsa_test_problem *tp, run_arrays *a, char *msg, size_t len) {
    const fmsa_problem *p = &tp->host;
    int bwd = tp->spec.pass == FMSA_PASS_BACKWARD;
    a->ref_o = run_dense(tp->n_o);
    a->ref_lse = run_dense(tp->n_lse);
    a->nv_o = run_dense(tp->n_o);
    a->nv_lse = run_dense(tp->n_lse);
    if (!a->ref_o || !a->ref_lse || !a->nv_o || !a->nv_lse) return -1;
    if (fmsa_reference_forward(p, a->ref_o, a->ref_lse) != FMSA_SUCCESS) {
        run_note(msg, len, "reference forward failed: %s", fmsa_last_error());
        return -1;
    }
    if (!bwd) return fmsa_naive_forward(p, a->nv_o, a->nv_lse);

    /* The backward's inputs O and LSE: the reference's, as the dtype / fp32
     * would hold them, so the backward is judged independently of the forward. */
    fmsa_test_buf_store(&tp->o, a->ref_o);
    fmsa_test_buf_store(&tp->lse, a->ref_lse);
    a->ref_dq = run_dense(tp->n_q);
    a->nv_dq = run_dense(tp->n_q);
    a->ref_dk = run_dense(tp->n_k);
    a->ref_dv = run_dense(tp->n_v);
    a->nv_dk = run_dense(tp->n_k);
    a->nv_dv = run_dense(tp->n_v);
    if (!a->ref_dq || !a->nv_dq || !a->ref_dk || !a->ref_dv || !a->nv_dk || !a->nv_dv) return -1;
    if (fmsa_reference_backward(p, a->ref_dq, a->ref_dk, a->ref_dv) != FMSA_SUCCESS) {
        run_note(msg, len, "reference backward failed: %s", fmsa_last_error());
        return -1;
    }
    a->x_dq = run_dense(tp->n_q);
    a->x_dk = run_dense(tp->n_k);
    a->x_dv = run_dense(tp->n_v);
    if (!a->x_dq || !a->x_dk || !a->x_dv ||
        fmsa_reference_single_key_floor(p, a->x_dq, a->x_dk, a->x_dv) != FMSA_SUCCESS)
        return -1;
    if (tp->has_dsink) {
        a->ref_dsink = run_dense(tp->spec.hq);
        a->nv_dsink = run_dense(tp->spec.hq);
        a->x_dsink = run_dense(tp->spec.hq);
        if (!a->ref_dsink || !a->nv_dsink || !a->x_dsink ||
            fmsa_reference_dsink(p, a->ref_dsink) != FMSA_SUCCESS ||
            fmsa_naive_dsink(p, a->nv_dsink) != 0 ||
            fmsa_reference_dsink_floor(p, a->x_dsink) != FMSA_SUCCESS)
            return -1;
    }
    return fmsa_naive_backward(p, a->nv_dq, a->nv_dk, a->nv_dv);
}

/// State threaded through fmsa_test_problem_each when checking buffers.
typedef struct run_check {
    fmsa_context *ctx;
    unsigned char *image;
    char *msg;
    size_t len;
    int bad;
} run_check;

/// Downloads one buffer and checks guards, padding, inputs and poison.
static void run_check_buf(fmsa_test_buf *b, void *user) {
    run_check *c = (run_check *)user;
    char line[256];
    fmsa_status st = fmsa_test_buf_download(c->ctx, b, c->image);
    if (st != FMSA_SUCCESS) {
        run_note(c->msg, c->len, "%s: download failed: %s", b->name, fmsa_last_error());
        c->bad = 1;
        return;
    }
    /* only the LSE may hold infinities: -inf for fully masked rows */
    if (fmsa_test_buf_check(b, c->image, strcmp(b->name, "lse") == 0, line, sizeof line)) {
        run_note(c->msg, c->len, "%s", line);
        c->bad = 1;
    }
}

/// After a failed call: the whole allocation must be exactly what was sent.
static void run_untouched_buf(fmsa_test_buf *b, void *user) {
    run_check *c = (run_check *)user;
    if (fmsa_test_buf_download(c->ctx, b, c->image) != FMSA_SUCCESS ||
        memcmp(c->image, b->host, b->total) != 0) {
        run_note(c->msg, c->len, "%s was modified by a call that failed", b->name);
        c->bad = 1;
    }
}

/// Downloads an output and applies the correctness rule to it.
static int run_compare(fmsa_context *ctx, const fmsa_test_problem *tp, const fmsa_test_buf *b,
                       run_arrays *a, const double *naive, const double *ref,
                       const double *extra, char *msg, size_t len) {
    fmsa_test_error e;
    fmsa_rule_floor_spec f;
    int bwd = tp->spec.pass == FMSA_PASS_BACKWARD;
    double factor = bwd ? FMSA_RULE_FACTOR_BWD : FMSA_RULE_FACTOR_FWD;
    char line[320];
    if (fmsa_test_buf_download(ctx, b, a->image) != FMSA_SUCCESS) return -1;
    fmsa_test_buf_load(b, a->image, a->got);
    f.store_dtype = b->dtype;
    f.softmax_units = bwd ? FMSA_RULE_SOFTMAX_UNITS_BWD : FMSA_RULE_SOFTMAX_UNITS_FWD;
    f.lse_max = fmsa_rule_lse_max(a->ref_lse, tp->n_lse);
    f.is_lse = b == &tp->lse;
    fmsa_test_compare(a->got, naive, ref, extra, b->count, factor, &f, &e);
    fmsa_test_error_format(b->name, &e, factor, line, sizeof line);
    run_note(msg, len, "%s%s", e.ok ? "  " : "FAIL ", line);
    if (!e.ok) {
        int64_t at = e.first_bad >= 0 ? e.first_bad : e.worst;
        if (at >= 0)
            run_note(msg, len, "     first offending element: dense index %lld (of shape "
                     "[%lld, %lld, %lld%s%lld]): backend %.9g, reference %.9g, naive %.9g",
                     (long long)at, (long long)b->shape[0], (long long)b->shape[1],
                     (long long)b->shape[2], b->ndim == 4 ? ", " : "",
                     b->ndim == 4 ? (long long)b->shape[3] : 0LL, a->got[at], ref[at], naive[at]);
    }
    return e.ok ? 0 : -1;
}

/// Workspace with a trailing guard (a cl_mem workspace cannot be offset, so
/// only overruns past its end are caught).
typedef struct run_workspace {
    void *dev;
    size_t bytes;
    unsigned char *host; ///< bytes of poison + FMSA_TEST_GUARD_BYTES of pattern
} run_workspace;

static fmsa_status run_workspace_make(fmsa_context *ctx, size_t bytes, run_workspace *w) {
    size_t total = bytes + FMSA_TEST_GUARD_BYTES;
    fmsa_status st;
    w->bytes = bytes;
    w->host = (unsigned char *)malloc(total);
    if (!w->host) return FMSA_ERR_OUT_OF_MEMORY;
    memset(w->host, FMSA_TEST_POISON_BYTE, bytes);
    for (size_t k = 0; k < FMSA_TEST_GUARD_BYTES; ++k) w->host[bytes + k] = (unsigned char)(0x5A ^ k);
    st = fmsa_malloc(ctx, total, &w->dev);
    if (st == FMSA_SUCCESS) st = fmsa_copy_to_device(ctx, w->dev, 0, w->host, total);
    return st;
}

static int run_workspace_intact(fmsa_context *ctx, const run_workspace *w) {
    unsigned char *tail = (unsigned char *)malloc(FMSA_TEST_GUARD_BYTES);
    int ok = tail && fmsa_copy_to_host(ctx, tail, w->dev, w->bytes, FMSA_TEST_GUARD_BYTES) ==
                         FMSA_SUCCESS &&
             memcmp(tail, w->host + w->bytes, FMSA_TEST_GUARD_BYTES) == 0;
    free(tail);
    return ok;
}

/// One call of the pass under test on the uploaded buffers.
static fmsa_status run_call(fmsa_context *ctx, fmsa_test_problem *tp, const run_workspace *w) {
    fmsa_attention_desc desc = fmsa_test_problem_desc(tp);
    fmsa_tensor q = fmsa_test_buf_tensor(&tp->q), k = fmsa_test_buf_tensor(&tp->k);
    fmsa_tensor v = fmsa_test_buf_tensor(&tp->v), o = fmsa_test_buf_tensor(&tp->o);
    fmsa_tensor lse = fmsa_test_buf_tensor(&tp->lse);
    fmsa_status st;
    if (tp->spec.pass == FMSA_PASS_FORWARD) {
        st = fmsa_forward(ctx, &desc, &q, &k, &v, &o, tp->spec.lse ? &lse : NULL, w->dev,
                          w->bytes, NULL);
    } else {
        fmsa_tensor dout = fmsa_test_buf_tensor(&tp->dout), dq = fmsa_test_buf_tensor(&tp->dq);
        fmsa_tensor dk = fmsa_test_buf_tensor(&tp->dk), dv = fmsa_test_buf_tensor(&tp->dv);
        fmsa_backward_tensors bt = {0};
        bt.q = q;
        bt.k = k;
        bt.v = v;
        bt.o = o;
        bt.dout = dout;
        bt.lse = lse;
        bt.dq = dq;
        bt.dk = dk;
        bt.dv = dv;
        if (tp->has_dlse) bt.dlse = fmsa_test_buf_tensor(&tp->dlse);
        if (tp->has_dsink) bt.dsink = fmsa_test_buf_tensor(&tp->dsink);
        st = fmsa_backward(ctx, &desc, &bt, w->dev, w->bytes, NULL);
    }
    if (st == FMSA_SUCCESS) st = fmsa_synchronize(ctx, NULL);
    return st;
}

/// Deterministic backward: a second run on re-poisoned outputs must give the same bits.
static int run_determinism(fmsa_context *ctx, fmsa_test_problem *tp, const run_workspace *w,
                           char *msg, size_t len) {
    fmsa_test_buf *outs[4] = {&tp->dq, &tp->dk, &tp->dv, &tp->dsink};
    unsigned char *first[4] = {NULL, NULL, NULL, NULL}, *second = NULL;
    const int nout = tp->has_dsink ? 4 : 3; /* dsink too: it must repeat bit for bit */
    int rc = 0;
    for (int n = 0; n < nout && !rc; ++n) {
        first[n] = (unsigned char *)malloc(outs[n]->total);
        if (!first[n] || fmsa_test_buf_download(ctx, outs[n], first[n]) != FMSA_SUCCESS ||
            fmsa_test_buf_upload(ctx, outs[n]) != FMSA_SUCCESS)
            rc = -1;
    }
    if (!rc && run_call(ctx, tp, w) != FMSA_SUCCESS) rc = -1;
    for (int n = 0; n < nout && !rc; ++n) {
        second = (unsigned char *)malloc(outs[n]->total);
        if (!second || fmsa_test_buf_download(ctx, outs[n], second) != FMSA_SUCCESS) rc = -1;
        else if (memcmp(first[n], second, outs[n]->total) != 0) {
            run_note(msg, len, "FAIL %s: deterministic backward differs between two runs",
                     outs[n]->name);
            rc = -1;
        }
        free(second);
        second = NULL;
    }
    for (int n = 0; n < 4; ++n) free(first[n]);
    return rc;
}

/// Largest allocation among the buffers in use (for the download image).
static void run_max_total(fmsa_test_buf *b, void *user) {
    size_t *m = (size_t *)user;
    if (b->total > *m) *m = b->total;
}

fmsa_test_result fmsa_test_case_run(fmsa_context *ctx, const fmsa_test_spec *spec, char *msg,
                                    size_t len) {
    fmsa_test_problem tp;
    run_arrays a;
    run_workspace w;
    run_check chk;
    size_t ws = 0, max_total = 0;
    fmsa_status st;
    fmsa_test_result res = FMSA_TEST_FAIL;
    int bwd = spec->pass == FMSA_PASS_BACKWARD, bad = 0;

    msg[0] = '\0';
    memset(&a, 0, sizeof a);
    memset(&w, 0, sizeof w);
    if (fmsa_test_problem_create(&tp, spec) || run_oracles(&tp, &a, msg, len)) {
        run_note(msg, len, "host setup failed (out of memory?)");
        goto done;
    }
    if (spec->nan && tp.nan_keys == 0) { /* the case would test nothing */
        run_note(msg, len, "nan=1 but no key is hidden from every row");
        goto done;
    }
    fmsa_test_problem_each(&tp, run_max_total, &max_total);
    a.image = (unsigned char *)malloc(max_total);
    {
        int64_t most = tp.n_q;
        const int64_t sizes[5] = {tp.n_k, tp.n_lse, tp.n_o, tp.n_v, tp.spec.hq};
        for (int n = 0; n < 5; ++n) most = sizes[n] > most ? sizes[n] : most;
        a.got = run_dense(most);
    }
    if (!a.image || !a.got) goto done;

    st = fmsa_test_problem_upload(ctx, &tp);
    if (st != FMSA_SUCCESS) {
        run_note(msg, len, "upload failed: %s", fmsa_last_error());
        goto done;
    }
    {
        fmsa_attention_desc desc = fmsa_test_problem_desc(&tp);
        fmsa_tensor q = fmsa_test_buf_tensor(&tp.q), k = fmsa_test_buf_tensor(&tp.k);
        fmsa_tensor v = fmsa_test_buf_tensor(&tp.v);
        st = fmsa_workspace_size(ctx, spec->pass, &desc, &q, &k, &v, &ws);
    }
    if (st == FMSA_SUCCESS) st = run_workspace_make(ctx, ws, &w);
    if (st == FMSA_SUCCESS) st = run_call(ctx, &tp, &w);

    chk.ctx = ctx;
    chk.image = a.image;
    chk.msg = msg;
    chk.len = len;
    chk.bad = 0;
    if (st == FMSA_ERR_NOT_SUPPORTED) {
        /* Validation comes before any write: outputs must still be poison. */
        /* the library's words only: the features suite tells gate refusals by them */
        run_note(msg, len, "refused (FMSA_ERR_NOT_SUPPORTED): %s", fmsa_last_error());
        fmsa_test_problem_each(&tp, run_untouched_buf, &chk);
        res = chk.bad ? FMSA_TEST_FAIL : FMSA_TEST_SKIP;
        goto done;
    }
    if (st != FMSA_SUCCESS) {
        run_note(msg, len, "%s failed: %s: %s", bwd ? "fmsa_backward" : "fmsa_forward",
                 fmsa_status_string(st), fmsa_last_error());
        goto done;
    }

    fmsa_test_problem_each(&tp, run_check_buf, &chk);
    bad = chk.bad;
    if (!run_workspace_intact(ctx, &w)) {
        run_note(msg, len, "workspace: guard after its %zu bytes was overwritten", ws);
        bad = 1;
    }
    if (!bwd) {
        bad |= run_compare(ctx, &tp, &tp.o, &a, a.nv_o, a.ref_o, NULL, msg, len) != 0;
        if (spec->lse) bad |= run_compare(ctx, &tp, &tp.lse, &a, a.nv_lse, a.ref_lse, NULL, msg, len) != 0;
    } else {
        bad |= run_compare(ctx, &tp, &tp.dq, &a, a.nv_dq, a.ref_dq, a.x_dq, msg, len) != 0;
        bad |= run_compare(ctx, &tp, &tp.dk, &a, a.nv_dk, a.ref_dk, a.x_dk, msg, len) != 0;
        bad |= run_compare(ctx, &tp, &tp.dv, &a, a.nv_dv, a.ref_dv, a.x_dv, msg, len) != 0;
        /* dsink is a gradient (factor 3, the backward's units) stored in fp32 */
        if (tp.has_dsink)
            bad |= run_compare(ctx, &tp, &tp.dsink, &a, a.nv_dsink, a.ref_dsink, a.x_dsink, msg,
                               len) != 0;
        if (!bad && spec->det) bad |= run_determinism(ctx, &tp, &w, msg, len) != 0;
    }
    res = bad ? FMSA_TEST_FAIL : FMSA_TEST_PASS;

done:
    if (w.dev) fmsa_free(ctx, w.dev);
    free(w.host);
    run_arrays_free(&a);
    fmsa_test_problem_destroy(ctx, &tp);
    return res;
}

/* ------------------------------------------------------------------------ */
/* Suite main                                                               */
/* ------------------------------------------------------------------------ */

void fmsa_test_spec_summary(const fmsa_test_spec *s, char *buf, size_t len) {
    char feat[64] = "";
    if (fmsa_test_spec_dv(s) != s->d)
        snprintf(feat, sizeof feat, " dv%lld", (long long)fmsa_test_spec_dv(s));
    if (s->sinks) strcat(feat, s->sinks == FMSA_TEST_SINKS_EXTREME ? " sinks-extreme" : " sinks");
    if (s->pass == FMSA_PASS_BACKWARD && s->dsink) strcat(feat, " dsink");
    if (s->pass == FMSA_PASS_BACKWARD && s->dlse) strcat(feat, " dlse");
    snprintf(buf, len, "%s %s %lldx%lldx%lld h%lld:%lld d%lld%s%s%s%s%s%s%s%s%s%s%s",
             s->pass == FMSA_PASS_BACKWARD ? "bwd" : "fwd", fmsa_test_dtype_name(s->dtype),
             (long long)s->batch, (long long)s->sq, (long long)s->sk, (long long)s->hq,
             (long long)s->hkv, (long long)s->d, s->causal ? " causal" : "",
             (s->wl >= 0 || s->wr >= 0) ? " window" : "", s->softcap > 0 ? " softcap" : "",
             s->alibi ? " alibi" : "", s->mask ? " mask" : "", s->varlen ? " varlen" : "",
             s->page ? " paged" : "", s->strided ? " strided" : "",
             s->pass == FMSA_PASS_FORWARD && !s->lse ? " no-lse" : "", s->det ? " det" : "", feat);
}

int fmsa_test_specs_parse(const char *const *rows, size_t count, fmsa_pass default_pass,
                          fmsa_test_spec *out) {
    for (size_t i = 0; i < count; ++i) {
        char line[512];
        snprintf(line, sizeof line, "pass=%s seed=%zu %s",
                 default_pass == FMSA_PASS_BACKWARD ? "bwd" : "fwd", i + 1, rows[i]);
        if (fmsa_test_spec_parse(line, &out[i])) {
            fprintf(stderr, "case table row %zu is malformed: '%s'\n", i, rows[i]);
            return -1;
        }
    }
    return 0;
}

/// What each cmocka test of the group receives.
typedef struct suite_entry {
    long index;          ///< position in the table (-1: from --shape)
    fmsa_test_spec spec; ///< the case
    char name[256];      ///< cmocka test name
} suite_entry;

static fmsa_context *suite_ctx;
static fmsa_test_options suite_opts;
static int suite_features; ///< fmsa_test_suite_main_features: gate refusals, oracle check

int fmsa_test_is_gate_refusal(const char *msg) {
    return strstr(msg, "not supported by this backend") != NULL ||
           strstr(msg, "runs head dims up to") != NULL;
}

int fmsa_test_require_all(const char *backend) {
    const char *v = getenv("FLASHMSA_TEST_REQUIRE_ALL");
    size_t n = strlen(backend);
    if (!v || !*v || !strcmp(v, "0")) return 0;
    if (!strcmp(v, "1")) return 1;
    for (const char *at = v; (at = strstr(at, backend)) != NULL; at += n)
        if ((at == v || at[-1] == ',') && (at[n] == '\0' || at[n] == ',')) return 1;
    return 0;
}

static void suite_case(void **state) {
    const suite_entry *e = (const suite_entry *)*state;
    char msg[8192], spec_str[512];
    fmsa_test_result r;
    if (suite_features) {
        /* the oracles against each other first: runs whatever the backend does */
        double ratio = 0.0;
        if (fmsa_test_oracle_check(&e->spec, msg, sizeof msg, &ratio)) {
            print_error("%s", msg);
            fail();
        }
        if (suite_opts.verbose) print_message("  oracle check: worst error / bound %.3f\n", ratio);
    }
    r = fmsa_test_case_run(suite_ctx, &e->spec, msg, sizeof msg);
    if (r == FMSA_TEST_PASS && suite_opts.verbose) print_message("%s", msg);
    if (r == FMSA_TEST_SKIP && suite_features) {
        /* features a backend's kernels lack: 'not supported' when its gate
         * says so, unless FLASHMSA_TEST_REQUIRE_ALL names the backend */
        if (!fmsa_test_is_gate_refusal(msg) || fmsa_test_require_all(suite_opts.backend_name))
            r = FMSA_TEST_FAIL;
    } else if (r == FMSA_TEST_SKIP && suite_opts.backend == FMSA_BACKEND_CPU) {
        /* The CPU backend supports every feature (it is the fallback
         * everywhere), so a refusal there is a defect, not a skip. */
        r = FMSA_TEST_FAIL;
    }
    if (r == FMSA_TEST_SKIP) {
        print_message("%s", msg);
        skip();
    }
    if (r == FMSA_TEST_FAIL) {
        fmsa_test_spec_format(&e->spec, spec_str, sizeof spec_str);
        print_error("%s", msg);
        if (e->index >= 0)
            print_error("REPRO: %s --backend %s --case %ld   # = --shape '%s'\n", suite_opts.prog,
                        suite_opts.backend_name, e->index, spec_str);
        else
            print_error("REPRO: %s --backend %s --shape '%s'\n", suite_opts.prog,
                        suite_opts.backend_name, spec_str);
        fail();
    }
}

int fmsa_test_suite_main(int argc, char **argv, const char *suite, const fmsa_test_spec *cases,
                         size_t count) {
    suite_entry *entries;
    struct CMUnitTest *tests;
    size_t n = 0;
    fmsa_status st;
    int rc;
    char spec_str[512];

    if (fmsa_test_options_parse(argc, argv, &suite_opts)) return 2;
    if (suite_opts.list) {
        for (size_t i = 0; i < count; ++i) {
            fmsa_test_spec_format(&cases[i], spec_str, sizeof spec_str);
            printf("%zu: %s\n", i, spec_str);
        }
        return 0;
    }
    entries = (suite_entry *)calloc(count + 1, sizeof *entries);
    tests = (struct CMUnitTest *)calloc(count + 1, sizeof *tests);
    if (!entries || !tests) return 1;
    if (suite_opts.shape) {
        if (fmsa_test_spec_parse(suite_opts.shape, &entries[0].spec)) {
            fprintf(stderr, "%s: cannot parse --shape '%s'\n", suite_opts.prog, suite_opts.shape);
            return 2;
        }
        entries[n++].index = -1;
    } else if (suite_opts.case_index >= 0) {
        if ((size_t)suite_opts.case_index >= count) {
            fprintf(stderr, "%s: --case %ld: the table has %zu cases\n", suite_opts.prog,
                    suite_opts.case_index, count);
            return 2;
        }
        entries[0].spec = cases[suite_opts.case_index];
        entries[n++].index = suite_opts.case_index;
    } else {
        for (size_t i = 0; i < count; ++i) {
            entries[n].spec = cases[i];
            entries[n++].index = (long)i;
        }
    }
    for (size_t i = 0; i < n; ++i) {
        char summary[224];
        fmsa_test_spec_summary(&entries[i].spec, summary, sizeof summary);
        if (entries[i].index >= 0)
            snprintf(entries[i].name, sizeof entries[i].name, "case %ld: %s", entries[i].index,
                     summary);
        else
            snprintf(entries[i].name, sizeof entries[i].name, "shape: %s", summary);
        tests[i].name = entries[i].name;
        tests[i].test_func = suite_case;
        tests[i].initial_state = &entries[i];
    }

    st = fmsa_test_context_create(&suite_opts, &suite_ctx);
    if (st != FMSA_SUCCESS) {
        fprintf(stderr, "%s: no context on backend %s: %s: %s\n", suite_opts.prog,
                suite_opts.backend_name, fmsa_status_string(st), fmsa_last_error());
        free(entries);
        free(tests);
        return st == FMSA_ERR_BACKEND_UNAVAILABLE ? FMSA_TEST_EXIT_SKIP : 1;
    }
    rc = _cmocka_run_group_tests(suite, tests, n, NULL, NULL);
    fmsa_context_destroy(suite_ctx);
    free(entries);
    free(tests);
    return rc;
}

int fmsa_test_suite_main_features(int argc, char **argv, const char *suite,
                                  const fmsa_test_spec *cases, size_t count) {
    suite_features = 1;
    return fmsa_test_suite_main(argc, argv, suite, cases, count);
}
