/*
 * Head dims side by side on the CPU backend: the same FLOPs per call at each
 * head dim D (h = max(2, 1024 / D) heads, b = 1, s tokens, Dv = D), timed in
 * one rotation in one process (each round starts one dim later), so a loaded
 * or drifting machine slows every dim of a round alike.  Prints each dim's
 * median GFLOP/s and the median over rounds of its GFLOP/s over the first
 * dim's in the same round: the figure behind issue 13's "D = 512 within 15%
 * of D = 128" on a shared machine (bench/RESULTS.md, 2026-12-02).
 *
 *   cc -O2 -Iinclude bench/cpu_dims_paired.c -Lbuild -lflashmsa -lm -o cpu_dims_paired
 *   OMP_NUM_THREADS=2 ./cpu_dims_paired fp32|bf16 fwd|bwd SEQLEN ROUNDS SINKS D1 D2 ...
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <flashmsa/flashmsa.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DIMS 8
#define MAX_ROUNDS 64

#define CHECK(call)                                                                           \
    do {                                                                                      \
        fmsa_status st_ = (call);                                                             \
        if (st_ != FMSA_SUCCESS) {                                                            \
            fprintf(stderr, "%s failed: %s: %s\n", #call, fmsa_status_string(st_),            \
                    fmsa_last_error());                                                       \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/// n elements of dtype in [-1, 1) (bf16: the fp32 value truncated).
static void *fill(size_t n, fmsa_dtype dt, uint32_t seed) {
    const size_t es = fmsa_dtype_size(dt);
    unsigned char *p = (unsigned char *)malloc(n * es);
    for (size_t i = 0; i < n; ++i) {
        float x;
        uint32_t u;
        seed = seed * 1664525u + 1013904223u;
        x = (float)(seed >> 8) / 8388608.0f - 1.0f;
        memcpy(&u, &x, 4);
        if (dt == FMSA_DTYPE_F32) memcpy(p + 4 * i, &x, 4);
        else memcpy(p + 2 * i, (uint16_t[]){(uint16_t)(u >> 16)}, 2);
    }
    return p;
}

/// One head dim's problem: q, k, v, o, dout, dq, dk, dv, lse, sinks, dsink.
typedef struct dim_problem {
    int64_t d, h;
    fmsa_tensor t[8], lse, sinks, dsink;
    fmsa_attention_desc desc;
    double flops;
} dim_problem;

int main(int argc, char **argv) {
    fmsa_dtype dt;
    int bwd, rounds, sinks, ndims;
    int64_t s;
    dim_problem pr[MAX_DIMS];
    double sec[MAX_DIMS][MAX_ROUNDS];
    fmsa_context *ctx = NULL;
    size_t ws_bytes = 0;
    void *ws;
    if (argc < 7) {
        fprintf(stderr, "usage: %s fp32|bf16 fwd|bwd SEQLEN ROUNDS SINKS(0|1) D1 [D2 ...]\n",
                argv[0]);
        return 2;
    }
    dt = strcmp(argv[1], "bf16") == 0 ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F32;
    bwd = strcmp(argv[2], "bwd") == 0;
    s = atoll(argv[3]);
    rounds = atoi(argv[4]);
    sinks = atoi(argv[5]);
    ndims = argc - 6;
    if (ndims > MAX_DIMS || rounds < 1 || rounds > MAX_ROUNDS || s < 1) {
        fprintf(stderr, "at most %d dims, 1..%d rounds, SEQLEN >= 1\n", MAX_DIMS, MAX_ROUNDS);
        return 2;
    }
    CHECK(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx));
    for (int c = 0; c < ndims; ++c) {
        dim_problem *p = &pr[c];
        p->d = atoll(argv[6 + c]);
        p->h = 1024 / p->d < 2 ? 2 : 1024 / p->d;
        {
            const int64_t shape[4] = {1, s, p->h, p->d}, ls[3] = {1, p->h, s}, hs[1] = {p->h};
            const size_t n = (size_t)(s * p->h * p->d);
            float *t = (float *)fill((size_t)p->h, FMSA_DTYPE_F32, 99);
            size_t w;
            for (int i = 0; i < 8; ++i)
                p->t[i] = fmsa_tensor_contiguous(fill(n, dt, (uint32_t)(10 * c + i)), dt, 4, shape);
            p->lse = fmsa_tensor_contiguous(malloc((size_t)(s * p->h) * 4), FMSA_DTYPE_F32, 3, ls);
            p->sinks = fmsa_tensor_contiguous(t, FMSA_DTYPE_F32, 1, hs);
            p->dsink = fmsa_tensor_contiguous(malloc((size_t)p->h * 4), FMSA_DTYPE_F32, 1, hs);
            p->desc = fmsa_attention_desc_init(p->d);
            if (sinks) p->desc.sinks = p->sinks;
            p->flops = 4.0 * (double)p->h * (double)s * (double)s * (double)p->d * (bwd ? 2.5 : 1.0);
            CHECK(fmsa_workspace_size(ctx, bwd ? FMSA_PASS_BACKWARD : FMSA_PASS_FORWARD, &p->desc,
                                      &p->t[0], &p->t[1], &p->t[2], &w));
            if (w > ws_bytes) ws_bytes = w;
            CHECK(fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &p->desc, &p->t[0], &p->t[1],
                                      &p->t[2], &w));
            if (w > ws_bytes) ws_bytes = w;
        }
    }
    ws = malloc(ws_bytes ? ws_bytes : 1);
    for (int c = 0; c < ndims; ++c) /* O and LSE for the backward; also the warm-up */
        CHECK(fmsa_forward(ctx, &pr[c].desc, &pr[c].t[0], &pr[c].t[1], &pr[c].t[2], &pr[c].t[3],
                           &pr[c].lse, ws, ws_bytes, NULL));
    for (int r = -1; r < rounds; ++r)
        for (int k = 0; k < ndims; ++k) {
            const int c = (k + (r < 0 ? 0 : r)) % ndims; /* round r starts at dim r */
            dim_problem *p = &pr[c];
            const fmsa_backward_tensors bt = {
                .q = p->t[0], .k = p->t[1], .v = p->t[2], .o = p->t[3], .dout = p->t[4],
                .lse = p->lse, .dq = p->t[5], .dk = p->t[6], .dv = p->t[7],
                .dsink = sinks ? p->dsink : (fmsa_tensor){0}};
            const double t0 = now();
            if (bwd) CHECK(fmsa_backward(ctx, &p->desc, &bt, ws, ws_bytes, NULL));
            else CHECK(fmsa_forward(ctx, &p->desc, &p->t[0], &p->t[1], &p->t[2], &p->t[3],
                                    &p->lse, ws, ws_bytes, NULL));
            if (r >= 0) sec[c][r] = now() - t0;
        }
    printf("# %s %s s=%lld b=1 rounds=%d sinks=%d: GFLOP/s (median) and paired GFLOP/s over D=%s\n",
           argv[1], argv[2], (long long)s, rounds, sinks, argv[6]);
    for (int c = 0; c < ndims; ++c) {
        double ratio[MAX_ROUNDS], t[MAX_ROUNDS];
        for (int r = 0; r < rounds; ++r) {
            /* GFLOP/s of dim c over dim 0's in round r */
            ratio[r] = (pr[c].flops / sec[c][r]) / (pr[0].flops / sec[0][r]);
            t[r] = sec[c][r];
        }
        qsort(ratio, (size_t)rounds, sizeof ratio[0], by_value);
        qsort(t, (size_t)rounds, sizeof t[0], by_value);
        printf("D=%-4lld h=%-3lld %8.1f GFLOP/s  paired x%.3f\n", (long long)pr[c].d,
               (long long)pr[c].h, pr[c].flops / t[rounds / 2] * 1e-9, ratio[rounds / 2]);
    }
    fmsa_context_destroy(ctx);
    return 0;
}
