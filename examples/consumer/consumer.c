/*
 * Smallest useful flashmsa program: one causal forward pass on the CPU,
 * checked against a direct softmax(Q K^T / sqrt(D)) V computed here.
 * Uses only the installed public header, so it builds against the package.
 */
#include <flashmsa/flashmsa.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, S = 64, H = 2, D = 32 };

#define CHECK(call)                                                            \
    do {                                                                       \
        fmsa_status st_ = (call);                                              \
        if (st_ != FMSA_SUCCESS) {                                             \
            fprintf(stderr, "%s failed: %s: %s\n", #call,                      \
                    fmsa_status_string(st_), fmsa_last_error());               \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static float q[B * S * H * D], k[B * S * H * D], v[B * S * H * D], o[B * S * H * D];
static float lse[B * H * S];

/* Element (s, h, d) of a [1, S, H, D] tensor. */
static size_t at(int s, int h, int d) { return ((size_t)s * H + h) * D + d; }

/* Largest |o - softmax(q k^T * scale) v| over all rows, causal. */
static double max_error(float scale) {
    double worst = 0.0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++) {
            double p[S], m = -INFINITY, l = 0.0;
            for (int j = 0; j <= i; j++) {
                double dot = 0.0;
                for (int d = 0; d < D; d++) dot += (double)q[at(i, h, d)] * k[at(j, h, d)];
                p[j] = dot * scale;
                if (p[j] > m) m = p[j];
            }
            for (int j = 0; j <= i; j++) l += (p[j] = exp(p[j] - m));
            for (int d = 0; d < D; d++) {
                double ref = 0.0;
                for (int j = 0; j <= i; j++) ref += p[j] / l * v[at(j, h, d)];
                if (fabs(ref - o[at(i, h, d)]) > worst) worst = fabs(ref - o[at(i, h, d)]);
            }
        }
    return worst;
}

int main(void) {
    const int64_t shape[4] = {B, S, H, D};
    const int64_t lse_shape[3] = {B, H, S};
    fmsa_context *ctx = NULL;
    fmsa_device_info dev;
    size_t ws_bytes = 0;
    double err;

    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        q[i] = (float)sin(0.37 * (double)i);
        k[i] = (float)cos(0.11 * (double)i);
        v[i] = (float)sin(0.05 * (double)i + 1.0);
    }

    /* The CPU backend works on host memory: the tensors wrap these arrays. */
    CHECK(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx));
    CHECK(fmsa_context_device(ctx, &dev));

    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, shape);
    fmsa_tensor tk = fmsa_tensor_contiguous(k, FMSA_DTYPE_F32, 4, shape);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, FMSA_DTYPE_F32, 4, shape);
    fmsa_tensor to = fmsa_tensor_contiguous(o, FMSA_DTYPE_F32, 4, shape);
    fmsa_tensor tl = fmsa_tensor_contiguous(lse, FMSA_DTYPE_F32, 3, lse_shape);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    desc.causal = 1;

    CHECK(fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &tq, &tk, &tv, &ws_bytes));
    void *ws = NULL;
    if (ws_bytes > 0) CHECK(fmsa_malloc(ctx, ws_bytes, &ws));
    CHECK(fmsa_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl, ws, ws_bytes, NULL));
    CHECK(fmsa_synchronize(ctx, NULL));
    CHECK(fmsa_free(ctx, ws));

    err = max_error(desc.softmax_scale);
    printf("flashmsa %d.%d.%d on %s (%s): causal forward [%d, %d, %d, %d], max error %.2e\n",
           fmsa_version() / 10000, fmsa_version() / 100 % 100, fmsa_version() % 100, dev.name, fmsa_backend_name(dev.backend), B, S, H, D, err);
    fmsa_context_destroy(ctx);
    if (!(err < 1e-5)) {
        fprintf(stderr, "consumer: error too large\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
