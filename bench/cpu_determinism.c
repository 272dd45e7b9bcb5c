/*
 * Determinism probe of the CPU backend: runs a GQA causal forward + backward
 * (dQ partials), a split-KV decode forward, a one-slot causal forward +
 * backward (ordered dQ) and two of issue 13's features (sinks with dsink,
 * dlse, Dv != D, D = 576) on fixed inputs and prints one FNV-1a hash
 * per output tensor.  The CPU backend promises bit-identical results for any
 * OMP_NUM_THREADS, so bench/cpu_device_run.sh runs this at 1 and at all
 * threads (per forced kernel path) and compares the lines.
 *
 *   cc -O2 -Iinclude bench/cpu_determinism.c -L<build> -lflashmsa -lm
 *   OMP_NUM_THREADS=16 FLASHMSA_CPU_KERNEL=amx ./cpu_determinism fp32|bf16
 */
#include <flashmsa/flashmsa.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                           \
    do {                                                                                      \
        fmsa_status st_ = (call);                                                             \
        if (st_ != FMSA_SUCCESS) {                                                            \
            fprintf(stderr, "%s failed: %s: %s\n", #call, fmsa_status_string(st_),            \
                    fmsa_last_error());                                                       \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/// Fills n elements of dtype with a deterministic pattern in [-1, 1).
static void *fill(size_t n, fmsa_dtype dt, uint32_t seed) {
    const size_t es = fmsa_dtype_size(dt);
    unsigned char *p = (unsigned char *)malloc(n * es);
    for (size_t i = 0; i < n; ++i) {
        float x;
        seed = seed * 1664525u + 1013904223u;
        x = (float)(seed >> 8) / 8388608.0f - 1.0f;
        if (dt == FMSA_DTYPE_F32) {
            memcpy(p + 4 * i, &x, 4);
        } else { /* bf16: truncate (any fixed pattern does) */
            uint32_t u;
            uint16_t h;
            memcpy(&u, &x, 4);
            h = (uint16_t)(u >> 16);
            memcpy(p + 2 * i, &h, 2);
        }
    }
    return p;
}

static void run(fmsa_context *ctx, fmsa_dtype dt, int64_t b, int64_t hq, int64_t hkv,
                int64_t sq, int64_t sk, int64_t d, int causal, int backward, const char *tag) {
    const int64_t qs[4] = {b, sq, hq, d}, ks[4] = {b, sk, hkv, d}, ls[3] = {b, hq, sq};
    const size_t nq = (size_t)(b * sq * hq * d), nk = (size_t)(b * sk * hkv * d);
    const size_t es = fmsa_dtype_size(dt);
    void *q = fill(nq, dt, 1), *k = fill(nk, dt, 2), *v = fill(nk, dt, 3), *dout = fill(nq, dt, 4);
    void *o = calloc(nq, es), *dq = calloc(nq, es), *dk = calloc(nk, es), *dv = calloc(nk, es);
    float *lse = (float *)calloc((size_t)(b * hq * sq), 4);
    fmsa_tensor tq = fmsa_tensor_contiguous(q, dt, 4, qs), tk = fmsa_tensor_contiguous(k, dt, 4, ks);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, dt, 4, ks), to = fmsa_tensor_contiguous(o, dt, 4, qs);
    fmsa_tensor tdo = fmsa_tensor_contiguous(dout, dt, 4, qs);
    fmsa_tensor tdq = fmsa_tensor_contiguous(dq, dt, 4, qs), tdk = fmsa_tensor_contiguous(dk, dt, 4, ks);
    fmsa_tensor tdv = fmsa_tensor_contiguous(dv, dt, 4, ks);
    fmsa_tensor tl = fmsa_tensor_contiguous(lse, FMSA_DTYPE_F32, 3, ls);
    fmsa_attention_desc desc = fmsa_attention_desc_init(d);
    size_t ws_bytes = 0;
    void *ws = NULL;
    desc.causal = causal;
    CHECK(fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &tq, &tk, &tv, &ws_bytes));
    ws = malloc(ws_bytes ? ws_bytes : 1);
    CHECK(fmsa_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl, ws, ws_bytes, NULL));
    free(ws);
    printf("%s O %016llx LSE %016llx", tag, (unsigned long long)fnv(o, nq * es),
           (unsigned long long)fnv(lse, (size_t)(b * hq * sq) * 4));
    if (backward) {
        CHECK(fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &desc, &tq, &tk, &tv, &ws_bytes));
        ws = malloc(ws_bytes ? ws_bytes : 1);
        CHECK(fmsa_backward(ctx, &desc,
                            &(fmsa_backward_tensors){.q = tq, .k = tk, .v = tv, .o = to,
                                                     .dout = tdo, .lse = tl, .dq = tdq,
                                                     .dk = tdk, .dv = tdv},
                            ws, ws_bytes, NULL));
        free(ws);
        printf(" dQ %016llx dK %016llx dV %016llx", (unsigned long long)fnv(dq, nq * es),
               (unsigned long long)fnv(dk, nk * es), (unsigned long long)fnv(dv, nk * es));
    }
    printf("\n");
    free(q), free(k), free(v), free(dout), free(o), free(dq), free(dk), free(dv), free(lse);
}

/// The API v0.2 features on fixed inputs: sinks (with dsink), dlse, Dv != D,
/// a head dim past 256; one line of hashes, as run() prints.
static void run_features(fmsa_context *ctx, fmsa_dtype dt, int64_t hq, int64_t hkv, int64_t s,
                         int64_t d, int64_t dv, const char *tag) {
    const int64_t qs[4] = {1, s, hq, d}, ks[4] = {1, s, hkv, d}, vs[4] = {1, s, hkv, dv};
    const int64_t os[4] = {1, s, hq, dv}, ls[3] = {1, hq, s}, hs[1] = {hq};
    const size_t nq = (size_t)(s * hq * d), nk = (size_t)(s * hkv * d), nv = (size_t)(s * hkv * dv);
    const size_t no = (size_t)(s * hq * dv), nl = (size_t)(hq * s), es = fmsa_dtype_size(dt);
    void *q = fill(nq, dt, 11), *k = fill(nk, dt, 12), *v = fill(nv, dt, 13), *dout = fill(no, dt, 14);
    float *sinks = (float *)fill((size_t)hq, FMSA_DTYPE_F32, 15), *dlse = (float *)fill(nl, FMSA_DTYPE_F32, 16);
    void *o = calloc(no, es), *dq = calloc(nq, es), *dk = calloc(nk, es), *dv_ = calloc(nv, es);
    float *lse = (float *)calloc(nl, 4), *dsink = (float *)calloc((size_t)hq, 4);
    fmsa_tensor tq = fmsa_tensor_contiguous(q, dt, 4, qs), tk = fmsa_tensor_contiguous(k, dt, 4, ks);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, dt, 4, vs), to = fmsa_tensor_contiguous(o, dt, 4, os);
    fmsa_tensor tl = fmsa_tensor_contiguous(lse, FMSA_DTYPE_F32, 3, ls);
    fmsa_attention_desc desc = fmsa_attention_desc_init(d);
    size_t ws_bytes = 0;
    void *ws;
    desc.causal = 1;
    desc.sinks = fmsa_tensor_contiguous(sinks, FMSA_DTYPE_F32, 1, hs);
    CHECK(fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &tq, &tk, &tv, &ws_bytes));
    ws = malloc(ws_bytes ? ws_bytes : 1);
    CHECK(fmsa_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl, ws, ws_bytes, NULL));
    free(ws);
    CHECK(fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &desc, &tq, &tk, &tv, &ws_bytes));
    ws = malloc(ws_bytes ? ws_bytes : 1);
    CHECK(fmsa_backward(
        ctx, &desc,
        &(fmsa_backward_tensors){.q = tq, .k = tk, .v = tv, .o = to,
                                 .dout = fmsa_tensor_contiguous(dout, dt, 4, os), .lse = tl,
                                 .dlse = fmsa_tensor_contiguous(dlse, FMSA_DTYPE_F32, 3, ls),
                                 .dq = fmsa_tensor_contiguous(dq, dt, 4, qs),
                                 .dk = fmsa_tensor_contiguous(dk, dt, 4, ks),
                                 .dv = fmsa_tensor_contiguous(dv_, dt, 4, vs),
                                 .dsink = fmsa_tensor_contiguous(dsink, FMSA_DTYPE_F32, 1, hs)},
        ws, ws_bytes, NULL));
    free(ws);
    printf("%s O %016llx LSE %016llx dQ %016llx dK %016llx dV %016llx dsink %016llx\n", tag,
           (unsigned long long)fnv(o, no * es), (unsigned long long)fnv(lse, nl * 4),
           (unsigned long long)fnv(dq, nq * es), (unsigned long long)fnv(dk, nk * es),
           (unsigned long long)fnv(dv_, nv * es), (unsigned long long)fnv(dsink, (size_t)hq * 4));
    free(q), free(k), free(v), free(dout), free(sinks), free(dlse), free(o), free(dq), free(dk);
    free(dv_), free(lse), free(dsink);
}

int main(int argc, char **argv) {
    const fmsa_dtype dt = argc > 1 && strcmp(argv[1], "bf16") == 0 ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F32;
    fmsa_context *ctx = NULL;
    CHECK(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx));
    run(ctx, dt, 2, 8, 2, 777, 777, 128, 1, 1, "gqa-causal b2 h8/2 s777 d128");
    run(ctx, dt, 1, 2, 1, 3, 9000, 64, 0, 0, "decode-split b1 h2/1 sq3 sk9000 d64");
    /* one slot of 2 query heads: too few items for dQ partials, so the
     * backward adds every key tile into one dQ partial in turn (ordered) */
    run(ctx, dt, 1, 2, 1, 1500, 1500, 64, 1, 1, "ordered-dq causal b1 h2/1 s1500 d64");
    /* issue 13's features (new lines: the ones above are unchanged by them) */
    run_features(ctx, dt, 4, 2, 600, 192, 128, "features sinks dlse dsink causal h4/2 s600 d192/128");
    run_features(ctx, dt, 2, 1, 300, 576, 512, "features sinks dlse dsink causal h2/1 s300 d576/512");
    fmsa_context_destroy(ctx);
    return 0;
}
