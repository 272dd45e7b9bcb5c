/*
 * Passes running on one CPU context from several threads at once: the
 * context keeps one pass's buffers between calls (its arena), and a pass that
 * finds them taken must allocate its own instead of sharing them.  Each of
 * four threads repeats the forward and backward of its own problem (two
 * shapes and dtypes, so the arena also changes size under them) and every
 * output must be bit-identical to the same problem run alone: results never
 * depend on the thread count or on what else runs (cpu_internal.h).  The
 * suite runs with FLASHMSA_CPU_POISON, so a pass reading buffers another pass
 * is writing sees NaNs or foreign values and differs.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flashmsa/flashmsa.h"

enum { THREADS = 4, REPEATS = 3 };

/// One problem's inputs and a set of outputs (bytes; element size from dtype).
typedef struct problem {
    fmsa_dtype dtype;
    int64_t b, s, h, hkv, d;
    int causal;
    void *q, *k, *v, *dout;                 /* inputs */
    void *o, *lse, *dq, *dk, *dv;           /* outputs of one run */
} problem;

static size_t elem_size(fmsa_dtype t) { return t == FMSA_DTYPE_F32 ? 4 : 2; }

static void *fill(size_t n, fmsa_dtype t, unsigned *seed) {
    char *p = malloc(n * elem_size(t));
    assert_non_null(p);
    for (size_t i = 0; i < n; ++i) {
        float x;
        uint32_t bits;
        *seed = *seed * 1664525u + 1013904223u;
        x = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        memcpy(&bits, &x, 4);
        if (t == FMSA_DTYPE_F32) memcpy(p + 4 * i, &x, 4);
        else { /* bf16: the upper half of the float */
            const uint16_t h = (uint16_t)(bits >> 16);
            memcpy(p + 2 * i, &h, 2);
        }
    }
    return p;
}

static size_t q_elems(const problem *p) { return (size_t)(p->b * p->s * p->h * p->d); }
static size_t kv_elems(const problem *p) { return (size_t)(p->b * p->s * p->hkv * p->d); }

static void alloc_outputs(problem *p) {
    const size_t es = elem_size(p->dtype);
    p->o = malloc(q_elems(p) * es);
    p->dq = malloc(q_elems(p) * es);
    p->dk = malloc(kv_elems(p) * es);
    p->dv = malloc(kv_elems(p) * es);
    p->lse = malloc((size_t)(p->b * p->h * p->s) * sizeof(float));
    assert_true(p->o && p->dq && p->dk && p->dv && p->lse);
}

static void free_outputs(problem *p) {
    free(p->o), free(p->dq), free(p->dk), free(p->dv), free(p->lse);
}

/// Forward then backward of p on ctx into p's outputs; returns the first failure.
static fmsa_status run(fmsa_context *ctx, problem *p) {
    const int64_t qs[4] = {p->b, p->s, p->h, p->d}, ks[4] = {p->b, p->s, p->hkv, p->d};
    const int64_t ls[3] = {p->b, p->h, p->s};
    const fmsa_tensor q = fmsa_tensor_contiguous(p->q, p->dtype, 4, qs);
    const fmsa_tensor k = fmsa_tensor_contiguous(p->k, p->dtype, 4, ks);
    const fmsa_tensor v = fmsa_tensor_contiguous(p->v, p->dtype, 4, ks);
    const fmsa_tensor o = fmsa_tensor_contiguous(p->o, p->dtype, 4, qs);
    const fmsa_tensor dout = fmsa_tensor_contiguous(p->dout, p->dtype, 4, qs);
    const fmsa_tensor dq = fmsa_tensor_contiguous(p->dq, p->dtype, 4, qs);
    const fmsa_tensor dk = fmsa_tensor_contiguous(p->dk, p->dtype, 4, ks);
    const fmsa_tensor dv = fmsa_tensor_contiguous(p->dv, p->dtype, 4, ks);
    const fmsa_tensor lse = fmsa_tensor_contiguous(p->lse, FMSA_DTYPE_F32, 3, ls);
    fmsa_attention_desc desc = fmsa_attention_desc_init(p->d);
    size_t wf = 0, wb = 0;
    void *ws;
    fmsa_status s;
    desc.causal = p->causal;
    if ((s = fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &q, &k, &v, &wf)) != FMSA_SUCCESS ||
        (s = fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &desc, &q, &k, &v, &wb)) != FMSA_SUCCESS)
        return s;
    ws = malloc((wf > wb ? wf : wb) + 1);
    if (!ws) return FMSA_ERR_OUT_OF_MEMORY;
    s = fmsa_forward(ctx, &desc, &q, &k, &v, &o, &lse, ws, wf, NULL);
    if (s == FMSA_SUCCESS)
        s = fmsa_backward(ctx, &desc,
                          &(fmsa_backward_tensors){.q = q, .k = k, .v = v, .o = o, .dout = dout,
                                                   .lse = lse, .dq = dq, .dk = dk, .dv = dv},
                          ws, wb, NULL);
    free(ws);
    return s;
}

typedef struct worker {
    fmsa_context *ctx;
    problem p;             /* inputs shared with the reference, own outputs */
    const problem *ref;    /* outputs of the run alone */
    int mismatches;
    fmsa_status status;
} worker;

static int same_outputs(const problem *a, const problem *b) {
    const size_t es = elem_size(a->dtype);
    return memcmp(a->o, b->o, q_elems(a) * es) == 0 && memcmp(a->dq, b->dq, q_elems(a) * es) == 0 &&
           memcmp(a->dk, b->dk, kv_elems(a) * es) == 0 &&
           memcmp(a->dv, b->dv, kv_elems(a) * es) == 0 &&
           memcmp(a->lse, b->lse, (size_t)(a->b * a->h * a->s) * sizeof(float)) == 0;
}

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < REPEATS && w->status == FMSA_SUCCESS; ++r) {
        w->status = run(w->ctx, &w->p);
        if (w->status == FMSA_SUCCESS && !same_outputs(&w->p, w->ref)) ++w->mismatches;
    }
    return NULL;
}

static void concurrent_passes_match_serial(void **state) {
    problem shapes[2] = {
        {FMSA_DTYPE_BF16, 2, 300, 4, 2, 64, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {FMSA_DTYPE_F32, 1, 513, 2, 2, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    fmsa_context *ctx;
    worker w[THREADS];
    pthread_t tid[THREADS];
    unsigned seed = 5;
    (void)state;
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    for (int i = 0; i < 2; ++i) {
        problem *p = &shapes[i];
        p->q = fill(q_elems(p), p->dtype, &seed);
        p->k = fill(kv_elems(p), p->dtype, &seed);
        p->v = fill(kv_elems(p), p->dtype, &seed);
        p->dout = fill(q_elems(p), p->dtype, &seed);
        alloc_outputs(p);
        assert_int_equal(run(ctx, p), FMSA_SUCCESS); /* the reference: alone */
    }
    for (int t = 0; t < THREADS; ++t) {
        w[t].ctx = ctx;
        w[t].ref = &shapes[t % 2];
        w[t].p = shapes[t % 2];
        alloc_outputs(&w[t].p);
        w[t].mismatches = 0;
        w[t].status = FMSA_SUCCESS;
    }
    for (int t = 0; t < THREADS; ++t) assert_int_equal(pthread_create(&tid[t], NULL, work, &w[t]), 0);
    for (int t = 0; t < THREADS; ++t) assert_int_equal(pthread_join(tid[t], NULL), 0);
    for (int t = 0; t < THREADS; ++t) {
        assert_int_equal(w[t].status, FMSA_SUCCESS);
        assert_int_equal(w[t].mismatches, 0);
        free_outputs(&w[t].p);
    }
    for (int i = 0; i < 2; ++i) {
        free(shapes[i].q), free(shapes[i].k), free(shapes[i].v), free(shapes[i].dout);
        free_outputs(&shapes[i]);
    }
    fmsa_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(concurrent_passes_match_serial)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
