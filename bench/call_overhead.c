/*
 * Host time of one fmsa_forward (and fmsa_backward) call on a tiny CUDA
 * problem, called from C: the yardstick bench/python_overhead.py puts beside
 * one flashmsa.attention() call.  N calls are queued back to back on the
 * context's default stream and timed on the host until the last is queued,
 * then once more until fmsa_synchronize returns; the problem is small enough
 * that the GPU keeps up, so the first figure is the call's own cost.
 *
 *   cc -O2 -Iinclude bench/call_overhead.c -Lbuild-cuda -lflashmsa -o call_overhead
 *   ./call_overhead [batch seqlen heads head_dim calls [cpu]]   (default 1 128 8 64 2000)
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashmsa/flashmsa.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A contiguous 3- or 4-dimensional tensor at p (shape[3] = 0 for 3 dims). */
static fmsa_tensor tensor_at(void *p, fmsa_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d) {
    fmsa_tensor t = {0};
    t.data = p;
    t.dtype = dt;
    t.ndim = d ? 4 : 3;
    t.shape[0] = a, t.shape[1] = b, t.shape[2] = c, t.shape[3] = d;
    t.strides[t.ndim - 1] = 1;
    for (int i = t.ndim - 2; i >= 0; --i) t.strides[i] = t.strides[i + 1] * t.shape[i + 1];
    return t;
}

static void need(fmsa_status st, const char *what) {
    if (st != FMSA_SUCCESS) {
        fprintf(stderr, "%s: %s: %s\n", what, fmsa_status_string(st), fmsa_last_error());
        exit(1);
    }
}

int main(int argc, char **argv) {
    const int64_t B = argc > 4 ? atoll(argv[1]) : 1, S = argc > 4 ? atoll(argv[2]) : 128,
                  H = argc > 4 ? atoll(argv[3]) : 8, D = argc > 4 ? atoll(argv[4]) : 64;
    const int calls = argc > 5 ? atoi(argv[5]) : 2000;
    const size_t n = (size_t)(B * S * H * D) * 2, nl = (size_t)(B * H * S) * 4;
    fmsa_context *ctx = NULL;
    void *buf[9] = {0}, *ws = NULL;
    size_t ws_f = 0, ws_b = 0;
    const int on_cpu = argc > 6 && strcmp(argv[6], "cpu") == 0;
    need(fmsa_context_create(on_cpu ? FMSA_BACKEND_CPU : FMSA_BACKEND_CUDA, 0, &ctx),
         "fmsa_context_create");
    for (int i = 0; i < 9; ++i) need(fmsa_malloc(ctx, i == 4 ? nl : n, &buf[i]), "fmsa_malloc");
    /* q k v o lse dout dq dk dv; inputs left as allocated: the time does not depend on values */
    fmsa_tensor t[9];
    for (int i = 0; i < 9; ++i)
        t[i] = i == 4 ? tensor_at(buf[i], FMSA_DTYPE_F32, B, H, S, 0)
                      : tensor_at(buf[i], FMSA_DTYPE_BF16, B, S, H, D);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    desc.causal = 1;
    need(fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &t[0], &t[1], &t[2], &ws_f), "ws");
    need(fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &desc, &t[0], &t[1], &t[2], &ws_b), "ws");
    if (ws_f > ws_b) ws_b = ws_f;
    if (ws_b) need(fmsa_malloc(ctx, ws_b, &ws), "fmsa_malloc(workspace)");
    fmsa_backward_tensors bt = {0};
    bt.q = t[0], bt.k = t[1], bt.v = t[2], bt.o = t[3], bt.lse = t[4], bt.dout = t[5];
    bt.dq = t[6], bt.dk = t[7], bt.dv = t[8];
    for (int pass = 0; pass < 2; ++pass) {
        double t0 = 0.0, t1 = 0.0;
        for (int rep = 0; rep < 2; ++rep) { /* the first round warms up */
            t0 = now_s();
            for (int i = 0; i < calls; ++i) {
                if (pass == 0)
                    need(fmsa_forward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], &t[4], ws, ws_f,
                                      NULL),
                         "fmsa_forward");
                else
                    need(fmsa_backward(ctx, &desc, &bt, ws, ws_b, NULL), "fmsa_backward");
            }
            t1 = now_s();
            need(fmsa_synchronize(ctx, NULL), "fmsa_synchronize");
        }
        const double t2 = now_s();
        printf("c_api %s b=%lld s=%lld h=%lld d=%lld calls=%d: %.2f us/call queued, "
               "%.2f us/call to synchronize\n",
               pass == 0 ? "forward" : "backward", (long long)B, (long long)S, (long long)H,
               (long long)D, calls, 1e6 * (t1 - t0) / calls, 1e6 * (t2 - t0) / calls);
    }
    for (int i = 0; i < 9; ++i) fmsa_free(ctx, buf[i]);
    fmsa_free(ctx, ws);
    fmsa_context_destroy(ctx);
    return 0;
}
