/*
 * The CUDA backend on a device (exit 77 = skipped where there is none):
 *  - the device-side metadata check: good cu_seqlens / block tables pass,
 *    each kind of bad one is reported by the next fmsa_synchronize, by name,
 *    and cleared;
 *  - graph safety: forward + backward (dense, and varlen with max_seqlen
 *    given) captured into a CUDA graph in the strictest capture mode (global:
 *    any allocation, synchronisation or synchronous copy inside fails the
 *    capture), replayed, bit-identical to the same calls run directly;
 *  - the deterministic backward, bit-identical over 10 runs;
 *  - a backward with no rows captured too (its dsink zeros are a kernel).
 * Streams and graphs come straight from the driver (dlopen), as an embedder's
 * would.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cuda/cuda_internal.h"
#include "common/context.h"

typedef struct graph_api {
    fmsa_cu_result (*stream_create)(fmsa_cu_stream *, unsigned);
    fmsa_cu_result (*stream_destroy)(fmsa_cu_stream);
    fmsa_cu_result (*begin_capture)(fmsa_cu_stream, int);
    fmsa_cu_result (*end_capture)(fmsa_cu_stream, void **);
    fmsa_cu_result (*instantiate)(void **, void *, unsigned long long);
    fmsa_cu_result (*launch)(void *, fmsa_cu_stream);
    fmsa_cu_result (*exec_destroy)(void *);
    fmsa_cu_result (*graph_destroy)(void *);
} graph_api;

static graph_api G;
static fmsa_context *ctx;
static fmsa_cuda_state *st;
static fmsa_cu_stream stream;

#define CU_OK(expr) assert_int_equal((expr), FMSA_CU_SUCCESS)

static void *dev_copy(const void *host, size_t bytes) {
    void *d = NULL;
    assert_int_equal(fmsa_malloc(ctx, bytes, &d), FMSA_SUCCESS);
    if (host) assert_int_equal(fmsa_copy_to_device(ctx, d, 0, host, bytes), FMSA_SUCCESS);
    return d;
}

/* ------------------------------------------------------------------ checks */

static fmsa_status run_check(const fmsa_cuda_fwd_params *fp) {
    fmsa_cuda_plan none;
    memset(&none, 0, sizeof none); /* no attention launch: the check alone */
    assert_int_equal(fmsa_cuda_enqueue_pass(st, &none, fp, (void *)fp, 0, stream), FMSA_SUCCESS);
    return fmsa_synchronize(ctx, stream);
}

static void metadata_check_reports(void **state) {
    const int good_q[4] = {0, 5, 5, 12}, good_k[4] = {0, 7, 9, 20};
    const int bad_q[4] = {0, 6, 4, 12}, long_k[4] = {0, 15, 16, 20};
    const int table[6] = {0, 1, 2, 3, 4, 5}, bad_table[6] = {0, 1, 2, 3, 9, 5};
    const int used[2] = {24, 12}, bad_used[2] = {24, 25};
    fmsa_cuda_fwd_params fp;
    void *bufs[7];
    (void)state;
    memset(&fp, 0, sizeof fp);
    fp.status = (unsigned *)(uintptr_t)st->status;
    fp.is_varlen = 1, fp.batch = 3, fp.total_q = 12, fp.total_k = 20;
    fp.seqlen_q = 7, fp.seqlen_k = 11, fp.cu_q_s = 1, fp.cu_k_s = 1;
    fp.cu_seqlens_q = (const int *)(bufs[0] = dev_copy(good_q, sizeof good_q));
    fp.cu_seqlens_k = (const int *)(bufs[1] = dev_copy(good_k, sizeof good_k));
    assert_int_equal(run_check(&fp), FMSA_SUCCESS);
    fp.cu_seqlens_q = (const int *)(bufs[2] = dev_copy(bad_q, sizeof bad_q));
    assert_int_equal(run_check(&fp), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "cu_seqlens"));
    assert_int_equal(fmsa_synchronize(ctx, stream), FMSA_SUCCESS); /* cleared */
    fp.cu_seqlens_q = (const int *)bufs[0];
    fp.cu_seqlens_k = (const int *)(bufs[3] = dev_copy(long_k, sizeof long_k)); /* 15 > 11 */
    assert_int_equal(run_check(&fp), FMSA_ERR_INVALID_ARGUMENT);

    memset(&fp, 0, sizeof fp);
    fp.status = (unsigned *)(uintptr_t)st->status;
    fp.is_paged = 1, fp.batch = 2, fp.max_pages = 3, fp.page_size = 8, fp.num_pages = 6;
    fp.bt_sb = 3, fp.bt_sp = 1, fp.su_s = 1;
    fp.block_table = (const int *)(bufs[4] = dev_copy(table, sizeof table));
    assert_int_equal(run_check(&fp), FMSA_SUCCESS);
    fp.has_seqused_k = 1;
    fp.seqused_k = (const int *)(bufs[5] = dev_copy(used, sizeof used));
    fp.block_table = (const int *)(bufs[6] = dev_copy(bad_table, sizeof bad_table));
    /* sequence 1 uses 12 keys: pages [1][0] and [1][1] = 9, outside [0, 6) */
    assert_int_equal(run_check(&fp), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "block_table"));
    assert_int_equal(fmsa_copy_to_device(ctx, bufs[5], 0, bad_used, sizeof bad_used), FMSA_SUCCESS);
    fp.block_table = (const int *)bufs[4];
    assert_int_equal(run_check(&fp), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "seqused_k"));
    for (int i = 0; i < 7; ++i) fmsa_free(ctx, bufs[i]);
}

/* ---------------------------------------------------------- graph capture */

enum { B = 2, S = 160, H = 4, HKV = 2, D = 64 };

typedef struct pass_buffers {
    void *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv, *ws, *cu_q, *cu_k;
    size_t qbytes, kbytes, lbytes, wsbytes;
    fmsa_tensor tq, tk, tv, to, tl, tdo, tdq, tdk, tdv;
    fmsa_attention_desc desc;
} pass_buffers;

static uint16_t bf16_of(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

static void *rand_dev(size_t elems, unsigned seed) {
    uint16_t *h = (uint16_t *)malloc(elems * 2);
    void *d;
    for (size_t i = 0; i < elems; ++i) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = bf16_of((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
    d = dev_copy(h, elems * 2);
    free(h);
    return d;
}

/* varlen != 0: the same rows packed as 2 sequences of 100 and 220 queries
 * (keys 140 and 180), with max_seqlen given: the graph-safe varlen call. */
static int buffers_make(pass_buffers *pb, int varlen) {
    const int64_t bq = varlen ? 1 : B, sq = varlen ? B * S : S;
    const int64_t qs[4] = {bq, sq, H, D}, ks[4] = {bq, sq, HKV, D}, ls[3] = {bq, H, sq}, n = B + 1;
    const int cu_q[3] = {0, 100, 2 * S}, cu_k[3] = {0, 140, 2 * S};
    size_t ws_f = 0, ws_b = 0;
    memset(pb, 0, sizeof *pb);
    pb->qbytes = (size_t)B * S * H * D * 2, pb->kbytes = (size_t)B * S * HKV * D * 2;
    pb->lbytes = (size_t)B * H * S * 4;
    pb->q = rand_dev(pb->qbytes / 2, 1), pb->k = rand_dev(pb->kbytes / 2, 2);
    pb->v = rand_dev(pb->kbytes / 2, 3), pb->dout = rand_dev(pb->qbytes / 2, 4);
    pb->o = dev_copy(NULL, pb->qbytes), pb->lse = dev_copy(NULL, pb->lbytes);
    pb->dq = dev_copy(NULL, pb->qbytes), pb->dk = dev_copy(NULL, pb->kbytes);
    pb->dv = dev_copy(NULL, pb->kbytes);
    pb->tq = fmsa_tensor_contiguous(pb->q, FMSA_DTYPE_BF16, 4, qs);
    pb->tk = fmsa_tensor_contiguous(pb->k, FMSA_DTYPE_BF16, 4, ks);
    pb->tv = fmsa_tensor_contiguous(pb->v, FMSA_DTYPE_BF16, 4, ks);
    pb->to = fmsa_tensor_contiguous(pb->o, FMSA_DTYPE_BF16, 4, qs);
    pb->tdo = fmsa_tensor_contiguous(pb->dout, FMSA_DTYPE_BF16, 4, qs);
    pb->tdq = fmsa_tensor_contiguous(pb->dq, FMSA_DTYPE_BF16, 4, qs);
    pb->tdk = fmsa_tensor_contiguous(pb->dk, FMSA_DTYPE_BF16, 4, ks);
    pb->tdv = fmsa_tensor_contiguous(pb->dv, FMSA_DTYPE_BF16, 4, ks);
    pb->tl = fmsa_tensor_contiguous(pb->lse, FMSA_DTYPE_F32, 3, ls);
    pb->desc = fmsa_attention_desc_init(D);
    pb->desc.causal = 1;
    pb->desc.deterministic = 1;
    if (varlen) {
        pb->cu_q = dev_copy(cu_q, sizeof cu_q), pb->cu_k = dev_copy(cu_k, sizeof cu_k);
        pb->desc.cu_seqlens_q = fmsa_tensor_contiguous(pb->cu_q, FMSA_DTYPE_I32, 1, &n);
        pb->desc.cu_seqlens_k = fmsa_tensor_contiguous(pb->cu_k, FMSA_DTYPE_I32, 1, &n);
        pb->desc.max_seqlen_q = 220, pb->desc.max_seqlen_k = 180;
    }
    if (fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &pb->desc, &pb->tq, &pb->tk, &pb->tv, &ws_f) ==
            FMSA_ERR_NOT_SUPPORTED ||
        fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &pb->desc, &pb->tq, &pb->tk, &pb->tv, &ws_b) ==
            FMSA_ERR_NOT_SUPPORTED)
        return 0; /* no kernel instance for this shape in this build */
    pb->wsbytes = ws_f > ws_b ? ws_f : ws_b;
    pb->ws = pb->wsbytes ? dev_copy(NULL, pb->wsbytes) : NULL;
    return 1;
}

static void buffers_free(pass_buffers *pb) {
    void *all[] = {pb->q, pb->k, pb->v, pb->o, pb->lse, pb->dout, pb->dq, pb->dk, pb->dv,
                   pb->ws, pb->cu_q, pb->cu_k};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) fmsa_free(ctx, all[i]);
}

static fmsa_status passes_enqueue(pass_buffers *pb) {
    fmsa_status s = fmsa_forward(ctx, &pb->desc, &pb->tq, &pb->tk, &pb->tv, &pb->to, &pb->tl,
                                 pb->ws, pb->wsbytes, stream);
    if (s != FMSA_SUCCESS) return s;
    fmsa_backward_tensors bt = {0};
    bt.q = pb->tq;
    bt.k = pb->tk;
    bt.v = pb->tv;
    bt.o = pb->to;
    bt.dout = pb->tdo;
    bt.lse = pb->tl;
    bt.dq = pb->tdq;
    bt.dk = pb->tdk;
    bt.dv = pb->tdv;
    return fmsa_backward(ctx, &pb->desc, &bt, pb->ws, pb->wsbytes, stream);
}

static size_t results_bytes(const pass_buffers *pb) {
    return 2 * pb->qbytes + pb->lbytes + 2 * pb->kbytes;
}

/* o, lse, dq, dk, dv concatenated on the host. */
static unsigned char *results(pass_buffers *pb) {
    void *dev[5] = {pb->o, pb->lse, pb->dq, pb->dk, pb->dv};
    size_t bytes[5] = {pb->qbytes, pb->lbytes, pb->qbytes, pb->kbytes, pb->kbytes}, off = 0;
    unsigned char *h = (unsigned char *)malloc(results_bytes(pb));
    for (int i = 0; i < 5; ++i) {
        assert_int_equal(fmsa_copy_to_host(ctx, h + off, dev[i], 0, bytes[i]), FMSA_SUCCESS);
        off += bytes[i];
    }
    return h;
}

static void poison(pass_buffers *pb) {
    void *dev[5] = {pb->o, pb->lse, pb->dq, pb->dk, pb->dv};
    size_t bytes[5] = {pb->qbytes, pb->lbytes, pb->qbytes, pb->kbytes, pb->kbytes};
    for (int i = 0; i < 5; ++i) {
        unsigned char *h = (unsigned char *)malloc(bytes[i]);
        memset(h, 0xff, bytes[i]);
        assert_int_equal(fmsa_copy_to_device(ctx, dev[i], 0, h, bytes[i]), FMSA_SUCCESS);
        free(h);
    }
}

static void graph_replay_matches(int varlen) {
    pass_buffers pb;
    unsigned char *direct, *replayed;
    void *graph = NULL, *exec = NULL;
    if (!buffers_make(&pb, varlen)) {
        buffers_free(&pb);
        skip();
    }
    assert_int_equal(passes_enqueue(&pb), FMSA_SUCCESS);
    assert_int_equal(fmsa_synchronize(ctx, stream), FMSA_SUCCESS);
    direct = results(&pb);
    poison(&pb);
    CU_OK(G.begin_capture(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    {
        fmsa_status s = passes_enqueue(&pb);
        CU_OK(G.end_capture(stream, &graph));
        assert_int_equal(s, FMSA_SUCCESS);
    }
    /* nothing ran during capture */
    replayed = results(&pb);
    for (size_t i = 0; i < results_bytes(&pb); ++i) assert_int_equal(replayed[i], 0xff);
    free(replayed);
    CU_OK(G.instantiate(&exec, graph, 0));
    for (int r = 0; r < 2; ++r) {
        CU_OK(G.launch(exec, stream));
        assert_int_equal(fmsa_synchronize(ctx, stream), FMSA_SUCCESS);
        replayed = results(&pb);
        assert_memory_equal(direct, replayed, results_bytes(&pb));
        free(replayed);
        poison(&pb);
    }
    G.exec_destroy(exec);
    G.graph_destroy(graph);
    free(direct);
    buffers_free(&pb);
}

static void graph_dense(void **state) {
    (void)state;
    graph_replay_matches(0);
}

static void graph_varlen_bounds_given(void **state) {
    (void)state;
    graph_replay_matches(1);
}

static void deterministic_backward_bitwise(void **state) {
    pass_buffers pb;
    unsigned char *first = NULL;
    (void)state;
    if (!buffers_make(&pb, 0)) {
        buffers_free(&pb);
        skip();
    }
    for (int r = 0; r < 10; ++r) {
        unsigned char *now;
        poison(&pb);
        assert_int_equal(passes_enqueue(&pb), FMSA_SUCCESS);
        assert_int_equal(fmsa_synchronize(ctx, stream), FMSA_SUCCESS);
        now = results(&pb);
        if (first) {
            assert_memory_equal(first, now, results_bytes(&pb));
            free(now);
        } else {
            first = now;
        }
    }
    free(first);
    buffers_free(&pb);
}

/* A backward with no rows still writes dsink (zeros): captured too, so that
 * write must be a kernel on the stream, not a synchronous copy. */
static void graph_dsink_of_no_rows(void **state) {
    const int64_t qs[4] = {B, 0, H, D}, ks[4] = {B, 0, HKV, D}, ls[3] = {B, H, 0}, h = H;
    const float ones[H] = {1.0f, 1.0f, 1.0f, 1.0f}, sinks[H] = {0.5f, -1.0f, 2.0f, 0.0f};
    float got[H];
    void *dsink = dev_copy(ones, sizeof ones), *sk = dev_copy(sinks, sizeof sinks);
    void *graph = NULL, *exec = NULL, *ws = NULL;
    size_t wsbytes = 0;
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    fmsa_backward_tensors bt;
    fmsa_status s;
    (void)state;
    memset(&bt, 0, sizeof bt);
    bt.q = fmsa_tensor_contiguous(NULL, FMSA_DTYPE_BF16, 4, qs);
    bt.k = bt.v = bt.dk = bt.dv = fmsa_tensor_contiguous(NULL, FMSA_DTYPE_BF16, 4, ks);
    bt.o = bt.dout = bt.dq = bt.q;
    bt.lse = fmsa_tensor_contiguous(NULL, FMSA_DTYPE_F32, 3, ls);
    bt.dsink = fmsa_tensor_contiguous(dsink, FMSA_DTYPE_F32, 1, &h);
    desc.sinks = fmsa_tensor_contiguous(sk, FMSA_DTYPE_F32, 1, &h);
    /* the workspace is asked for and allocated before the capture, as a caller would */
    assert_int_equal(fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &desc, &bt.q, &bt.k, &bt.v,
                                         &wsbytes),
                     FMSA_SUCCESS);
    ws = wsbytes ? dev_copy(NULL, wsbytes) : NULL;
    CU_OK(G.begin_capture(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    s = fmsa_backward(ctx, &desc, &bt, ws, wsbytes, stream);
    CU_OK(G.end_capture(stream, &graph));
    if (s != FMSA_SUCCESS) print_error("fmsa_backward: %s\n", fmsa_last_error());
    assert_int_equal(s, FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_host(ctx, got, dsink, 0, sizeof got), FMSA_SUCCESS);
    for (int i = 0; i < H; ++i) assert_true(got[i] == 1.0f); /* nothing ran during capture */
    CU_OK(G.instantiate(&exec, graph, 0));
    CU_OK(G.launch(exec, stream));
    assert_int_equal(fmsa_synchronize(ctx, stream), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_host(ctx, got, dsink, 0, sizeof got), FMSA_SUCCESS);
    for (int i = 0; i < H; ++i) assert_true(got[i] == 0.0f);
    G.exec_destroy(exec);
    G.graph_destroy(graph);
    fmsa_free(ctx, dsink);
    fmsa_free(ctx, sk);
    fmsa_free(ctx, ws);
}

static int graph_api_load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    *(void **)&G.stream_create = dlsym(lib, "cuStreamCreate");
    *(void **)&G.stream_destroy = dlsym(lib, "cuStreamDestroy_v2");
    *(void **)&G.begin_capture = dlsym(lib, "cuStreamBeginCapture_v2");
    *(void **)&G.end_capture = dlsym(lib, "cuStreamEndCapture");
    *(void **)&G.instantiate = dlsym(lib, "cuGraphInstantiateWithFlags");
    *(void **)&G.launch = dlsym(lib, "cuGraphLaunch");
    *(void **)&G.exec_destroy = dlsym(lib, "cuGraphExecDestroy");
    *(void **)&G.graph_destroy = dlsym(lib, "cuGraphDestroy");
    return G.stream_create && G.stream_destroy && G.begin_capture && G.end_capture &&
           G.instantiate && G.launch && G.exec_destroy && G.graph_destroy;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(metadata_check_reports),
        cmocka_unit_test(graph_dense),
        cmocka_unit_test(graph_varlen_bounds_given),
        cmocka_unit_test(deterministic_backward_bitwise),
        cmocka_unit_test(graph_dsink_of_no_rows),
    };
    fmsa_status s = fmsa_context_create(FMSA_BACKEND_CUDA, 0, &ctx);
    int rc;
    if (s == FMSA_ERR_BACKEND_UNAVAILABLE) {
        fprintf(stderr, "test_cuda_graph: no CUDA device (%s): skipped\n", fmsa_last_error());
        return 77;
    }
    if (s != FMSA_SUCCESS || !graph_api_load()) {
        fprintf(stderr, "test_cuda_graph: setup failed: %s\n", fmsa_last_error());
        return 1;
    }
    st = (fmsa_cuda_state *)ctx->state;
    if (fmsa_cuda_push(st) != FMSA_SUCCESS || G.stream_create(&stream, 1 /* non-blocking */)) {
        fprintf(stderr, "test_cuda_graph: no stream: %s\n", fmsa_last_error());
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    G.stream_destroy(stream);
    fmsa_cuda_pop(st);
    fmsa_context_destroy(ctx);
    return rc;
}
