/*
 * ring_timing: the time of a ring step against the local kernel alone, on
 * one device with the loopback transport (P virtual ranks, each a thread
 * with its own context).  On one device every rank's work shares one queue,
 * so a ring pass over P ranks runs P x P local steps back to back: the
 * figure per step is the pass's wall time / P^2, beside the local pass of the
 * same work run alone (a full c x c block; the causal c x c block for zigzag
 * causal, whose every step does that much work) and the copy of one K/V
 * block.  The difference is what the ring adds per step on the device
 * (merges or fp32 sums, the copy, launches), which real links must hide
 * behind the kernel; it says nothing about link bandwidth.
 *
 *   ring_timing [--backend cuda]   (prints one markdown table row per case)
 *
 * FLASHMSA_RING_TIMING=alibi times causal zigzag and striped rings with and
 * without ALiBi ([Hq] slopes) instead: what striped ALiBi's extra passes
 * (each side of a block's diagonal its own, plus the lse shifts) cost per step
 * beside zigzag's one pass per pair of chunks.
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers, clock_gettime */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/accumulate.h"
#include "flashmsa/flashmsa_dist.h"
#include "tests/support/fmsa_test_options.h"

enum { MAX_P = 8, REPS = 5 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shard {
    fmsa_context *ctx;
    void *mem, *ws;
    size_t ws_bytes;
    fmsa_tensor q, k, v, o, lse, dout, dq, dk, dv;
    fmsa_tensor slopes; ///< [Hq] ALiBi slopes (with cfg.alibi)
} shard;

typedef struct cfg {
    int P, layout, causal;
    int64_t B, c, Hq, Hkv, D;
    fmsa_dtype dt;
    int alibi; ///< ALiBi with [Hq] slopes
} cfg;

static fmsa_tensor t4(void *base, size_t *off, fmsa_dtype dt, int64_t a, int64_t b, int64_t c,
                      int64_t d) {
    const int64_t sh[4] = {a, b, c, d};
    fmsa_tensor t = fmsa_tensor_contiguous(base, dt, 4, sh);
    t.byte_offset = (int64_t)*off;
    *off += ((size_t)(a * b * c * d) * fmsa_dtype_size(dt) + 255) & ~(size_t)255;
    return t;
}

/* The shard's tensors in one allocation, inputs filled with small values. */
static int shard_make(shard *s, fmsa_context *ctx, const cfg *g) {
    size_t off = 0, total;
    const int64_t lsh[3] = {g->B, g->Hq, g->c};
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    /* sizes first (base NULL), then the tensors for real */
    for (int pass = 0; pass < 2; ++pass) {
        off = 0;
        s->q = t4(s->mem, &off, g->dt, g->B, g->c, g->Hq, g->D);
        s->k = t4(s->mem, &off, g->dt, g->B, g->c, g->Hkv, g->D);
        s->v = t4(s->mem, &off, g->dt, g->B, g->c, g->Hkv, g->D);
        s->o = t4(s->mem, &off, g->dt, g->B, g->c, g->Hq, g->D);
        s->dout = t4(s->mem, &off, g->dt, g->B, g->c, g->Hq, g->D);
        s->dq = t4(s->mem, &off, g->dt, g->B, g->c, g->Hq, g->D);
        s->dk = t4(s->mem, &off, g->dt, g->B, g->c, g->Hkv, g->D);
        s->dv = t4(s->mem, &off, g->dt, g->B, g->c, g->Hkv, g->D);
        s->lse = fmsa_tensor_contiguous(s->mem, FMSA_DTYPE_F32, 3, lsh);
        s->lse.byte_offset = (int64_t)off;
        off += (size_t)(g->B * g->Hq * g->c) * 4;
        s->slopes = fmsa_tensor_contiguous(s->mem, FMSA_DTYPE_F32, 1, &g->Hq);
        s->slopes.byte_offset = (int64_t)off;
        off += (size_t)g->Hq * 4;
        if (pass == 0) {
            total = off;
            if (fmsa_malloc(ctx, total, &s->mem) != FMSA_SUCCESS) return -1;
        }
    }
    if (fmsa_accumulate(ctx, FMSA_ACC_FILL, &s->q, NULL, 0.02f, NULL) ||
        fmsa_accumulate(ctx, FMSA_ACC_FILL, &s->k, NULL, -0.03f, NULL) ||
        fmsa_accumulate(ctx, FMSA_ACC_FILL, &s->v, NULL, 0.5f, NULL) ||
        fmsa_accumulate(ctx, FMSA_ACC_FILL, &s->dout, NULL, 0.25f, NULL) ||
        fmsa_accumulate(ctx, FMSA_ACC_FILL, &s->slopes, NULL, 0.0625f, NULL))
        return -1;
    return 0;
}

static void shard_free(shard *s) {
    fmsa_free(s->ctx, s->mem);
    if (s->ws) fmsa_free(s->ctx, s->ws);
}

typedef struct job {
    const cfg *g;
    shard *sh;
    fmsa_dist_comm *comm;
    pthread_barrier_t *bar;
    fmsa_status st;
    char msg[256];
} job;

static fmsa_attention_desc cfg_desc(const cfg *g, const shard *s) {
    fmsa_attention_desc d = fmsa_attention_desc_init(g->D);
    d.causal = g->causal;
    if (g->alibi) d.alibi_slopes = s->slopes;
    return d;
}

static void *rank_main(void *arg) {
    job *j = (job *)arg;
    const fmsa_attention_desc d = cfg_desc(j->g, j->sh);
    fmsa_backward_tensors bt;
    shard *s = j->sh;
    memset(&bt, 0, sizeof bt);
    bt.q = s->q, bt.k = s->k, bt.v = s->v, bt.o = s->o, bt.lse = s->lse, bt.dout = s->dout;
    bt.dq = s->dq, bt.dk = s->dk, bt.dv = s->dv;
    j->st = FMSA_SUCCESS;
    /* one warm-up, then REPS forward and REPS backward, each phase after a barrier */
    for (int phase = 0; phase < 3; ++phase) { /* every barrier is met, failed or not */
        const int reps = phase == 0 ? 1 : REPS;
        pthread_barrier_wait(j->bar);
        for (int r = 0; r < reps && j->st == FMSA_SUCCESS; ++r) {
            if (phase != 2)
                j->st = fmsa_ring_forward(s->ctx, j->comm, (fmsa_ring_layout)j->g->layout, &d,
                                          &s->q, &s->k, &s->v, &s->o, &s->lse, s->ws, s->ws_bytes);
            if (phase != 1 && j->st == FMSA_SUCCESS)
                j->st = fmsa_ring_backward(s->ctx, j->comm, (fmsa_ring_layout)j->g->layout, &d, &bt,
                                           s->ws, s->ws_bytes);
        }
        if (j->st == FMSA_SUCCESS) j->st = fmsa_synchronize(s->ctx, NULL);
        if (j->st != FMSA_SUCCESS && !j->msg[0])
            snprintf(j->msg, sizeof j->msg, "%s", fmsa_last_error());
        pthread_barrier_wait(j->bar);
    }
    return NULL;
}

/* Seconds per local pass of the step's work on ctx (shard 0's tensors). */
static double local_time(const cfg *g, shard *s, int backward) {
    fmsa_attention_desc d = cfg_desc(g, s);
    fmsa_backward_tensors bt;
    double t0;
    size_t w = 0;
    void *ws = NULL;
    d.causal = g->causal; /* the causal c x c block does one zigzag step's work */
    memset(&bt, 0, sizeof bt);
    bt.q = s->q, bt.k = s->k, bt.v = s->v, bt.o = s->o, bt.lse = s->lse, bt.dout = s->dout;
    bt.dq = s->dq, bt.dk = s->dk, bt.dv = s->dv;
    if (fmsa_workspace_size(s->ctx, backward ? FMSA_PASS_BACKWARD : FMSA_PASS_FORWARD, &d, &s->q,
                            &s->k, &s->v, &w) != FMSA_SUCCESS ||
        (w && fmsa_malloc(s->ctx, w, &ws) != FMSA_SUCCESS))
        return -1.0;
    for (int r = -1; r < REPS; ++r) {
        if (r == 0) {
            fmsa_synchronize(s->ctx, NULL);
            t0 = now();
        }
        if (backward) fmsa_backward(s->ctx, &d, &bt, ws, w, NULL);
        else fmsa_forward(s->ctx, &d, &s->q, &s->k, &s->v, &s->o, &s->lse, ws, w, NULL);
    }
    fmsa_synchronize(s->ctx, NULL);
    t0 = (now() - t0) / REPS;
    if (ws) fmsa_free(s->ctx, ws);
    return t0;
}

/* Seconds per copy of one packed K/V block (what the loopback moves per step). */
static double copy_time(const cfg *g, shard *s) {
    const size_t bytes = (size_t)(2 * g->B * g->c * g->Hkv * g->D) * fmsa_dtype_size(g->dt);
    void *a = NULL, *b = NULL;
    double t0 = 0.0;
    if (fmsa_malloc(s->ctx, bytes, &a) != FMSA_SUCCESS || fmsa_malloc(s->ctx, bytes, &b) != FMSA_SUCCESS)
        return -1.0;
    for (int r = -1; r < REPS; ++r) {
        if (r == 0) {
            fmsa_synchronize(s->ctx, NULL);
            t0 = now();
        }
        fmsa_copy_device(s->ctx, b, 0, a, 0, bytes, NULL);
    }
    fmsa_synchronize(s->ctx, NULL);
    t0 = (now() - t0) / REPS;
    fmsa_free(s->ctx, a);
    fmsa_free(s->ctx, b);
    return t0;
}

/* Seconds of the per-step arithmetic the ring adds beside the kernel: the
 * forward's merge of a block's (O, lse) into the fp32 state (mode 0), the
 * backward's fp32 sums of dQ, dK and dV (mode 1). */
static double step_ops_time(const cfg *g, shard *s, int backward) {
    const int64_t os[4] = {g->B, g->c, g->Hq, g->D}, ks[4] = {g->B, g->c, g->Hkv, g->D};
    const int64_t ls[3] = {g->B, g->Hq, g->c};
    const size_t nq = (size_t)(g->B * g->c * g->Hq * g->D), nk = (size_t)(g->B * g->c * g->Hkv * g->D);
    void *m = NULL;
    double t0 = 0.0;
    fmsa_tensor acc, accl, acck, accv;
    if (fmsa_malloc(s->ctx, (nq + 2 * nk) * 4 + (size_t)(g->B * g->Hq * g->c) * 4, &m) != FMSA_SUCCESS)
        return -1.0;
    acc = fmsa_tensor_contiguous(m, FMSA_DTYPE_F32, 4, os);
    acck = fmsa_tensor_contiguous((char *)m + nq * 4, FMSA_DTYPE_F32, 4, ks);
    accv = fmsa_tensor_contiguous((char *)m + (nq + nk) * 4, FMSA_DTYPE_F32, 4, ks);
    accl = fmsa_tensor_contiguous((char *)m + (nq + 2 * nk) * 4, FMSA_DTYPE_F32, 3, ls);
    fmsa_accumulate(s->ctx, FMSA_ACC_FILL, &acc, NULL, 0.0f, NULL);
    fmsa_accumulate(s->ctx, FMSA_ACC_FILL, &accl, NULL, -1.0f, NULL);
    for (int r = -1; r < REPS; ++r) {
        if (r == 0) {
            fmsa_synchronize(s->ctx, NULL);
            t0 = now();
        }
        if (backward) {
            fmsa_accumulate(s->ctx, FMSA_ACC_ADD, &acc, &s->dq, 0.0f, NULL);
            fmsa_accumulate(s->ctx, FMSA_ACC_ADD, &acck, &s->dk, 0.0f, NULL);
            fmsa_accumulate(s->ctx, FMSA_ACC_ADD, &accv, &s->dv, 0.0f, NULL);
        } else {
            fmsa_merge_states(s->ctx, &acc, &accl, &s->o, &s->lse, &acc, &accl, NULL);
        }
    }
    fmsa_synchronize(s->ctx, NULL);
    t0 = (now() - t0) / REPS;
    fmsa_free(s->ctx, m);
    return t0;
}

static int run_cfg(const cfg *g, fmsa_context **ctx) {
    static const char *lay[] = {"contiguous", "zigzag", "striped"};
    shard sh[MAX_P];
    job jobs[MAX_P];
    pthread_t th[MAX_P];
    fmsa_dist_comm *comms[MAX_P];
    pthread_barrier_t bar;
    double tl_f, tl_b, tc, tm_f, tm_b, t[3] = {0, 0, 0}, tr_f, tr_b;
    fmsa_attention_desc d;
    int bad = 0;
    for (int r = 0; r < g->P; ++r) {
        size_t wf = 0, wb = 0;
        if (shard_make(&sh[r], ctx[r], g) != 0) return -1;
        d = cfg_desc(g, &sh[r]);
        if (r == 0 && fmsa_dist_comm_loopback(g->P, comms) != FMSA_SUCCESS) return -1;
        if (fmsa_ring_workspace_size(ctx[r], comms[r], (fmsa_ring_layout)g->layout,
                                     FMSA_PASS_FORWARD, &d, &sh[r].q, &sh[r].k, &sh[r].v, &wf) ||
            fmsa_ring_workspace_size(ctx[r], comms[r], (fmsa_ring_layout)g->layout,
                                     FMSA_PASS_BACKWARD, &d, &sh[r].q, &sh[r].k, &sh[r].v, &wb)) {
            fprintf(stderr, "workspace: %s\n", fmsa_last_error());
            return -1;
        }
        sh[r].ws_bytes = wf > wb ? wf : wb;
        if (fmsa_malloc(ctx[r], sh[r].ws_bytes, &sh[r].ws) != FMSA_SUCCESS) return -1;
    }
    tl_f = local_time(g, &sh[0], 0);
    tl_b = local_time(g, &sh[0], 1);
    tc = copy_time(g, &sh[0]);
    tm_f = step_ops_time(g, &sh[0], 0);
    tm_b = step_ops_time(g, &sh[0], 1);
    pthread_barrier_init(&bar, NULL, (unsigned)g->P + 1);
    for (int r = 0; r < g->P; ++r) {
        jobs[r] = (job){g, &sh[r], comms[r], &bar, FMSA_SUCCESS, {0}};
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (int phase = 0; phase < 3; ++phase) {
        double t0;
        pthread_barrier_wait(&bar);
        t0 = now();
        pthread_barrier_wait(&bar);
        t[phase] = now() - t0;
    }
    for (int r = 0; r < g->P; ++r) {
        pthread_join(th[r], NULL);
        if (jobs[r].st != FMSA_SUCCESS) {
            fprintf(stderr, "rank %d: %s\n", r, jobs[r].msg);
            bad = 1;
        }
        fmsa_dist_comm_destroy(comms[r]);
        shard_free(&sh[r]);
    }
    pthread_barrier_destroy(&bar);
    if (bad) return -1;
    tr_f = t[1] / REPS / (g->P * g->P);
    tr_b = t[2] / REPS / (g->P * g->P);
    printf("| %d | %s %s | %lld | %.1f | %.1f | %+.1f (%.0f%%) | %.1f | %.1f | %.1f | %+.1f (%.0f%%) "
           "| %.1f | %.1f |\n",
           g->P, lay[g->layout], g->causal ? (g->alibi ? "causal alibi" : "causal")
                                           : (g->alibi ? "full alibi" : "full"),
           (long long)g->c, tl_f * 1e6,
           tr_f * 1e6, (tr_f - tl_f) * 1e6, 100.0 * (tr_f - tl_f) / tl_f, tm_f * 1e6, tl_b * 1e6,
           tr_b * 1e6, (tr_b - tl_b) * 1e6, 100.0 * (tr_b - tl_b) / tl_b, tm_b * 1e6, tc * 1e6);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    fmsa_test_options o;
    fmsa_context *ctx[MAX_P] = {0};
    static const int Ps[] = {2, 4, 8};
    static const int64_t gpu_cs[] = {1024, 4096}, cpu_cs[] = {64, 128};
    const int64_t *cs;
    int64_t Hq, Hkv, D;
    int rc = 0;
    if (fmsa_test_options_parse(argc, argv, &o) != 0) return 2;
    for (int r = 0; r < MAX_P; ++r)
        if (fmsa_test_context_create(&o, &ctx[r]) != FMSA_SUCCESS) {
            fprintf(stderr, "context: %s\n", fmsa_last_error());
            return FMSA_TEST_EXIT_SKIP;
        }
    /* the CPU gets a smoke-sized problem: the figure that matters is a GPU's */
    cs = o.backend == FMSA_BACKEND_CPU ? cpu_cs : gpu_cs;
    Hq = o.backend == FMSA_BACKEND_CPU ? 4 : 32;
    Hkv = o.backend == FMSA_BACKEND_CPU ? 2 : 8;
    D = o.backend == FMSA_BACKEND_CPU ? 32 : 128;
    printf("B=1, Hq=%lld, Hkv=%lld, D=%lld, bf16, %s; times in us per (rank, step); ring step = "
           "pass / P^2\n\n", (long long)Hq, (long long)Hkv, (long long)D, o.backend_name);
    printf("| P | layout | c | fwd local | fwd ring step | ring - local | fwd merge | bwd local | "
           "bwd ring step | ring - local | bwd fp32 sums | K/V copy |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (getenv("FLASHMSA_RING_TIMING") && !strcmp(getenv("FLASHMSA_RING_TIMING"), "alibi")) {
        for (size_t pi = 1; pi < 3; ++pi) /* P = 4, 8; the largest shard */
            for (int layout = FMSA_RING_ZIGZAG; layout <= FMSA_RING_STRIPED; ++layout)
                for (int alibi = 0; alibi < 2; ++alibi) {
                    cfg g = {Ps[pi], layout, 1, 1, cs[1], Hq, Hkv, D, FMSA_DTYPE_BF16, alibi};
                    if (run_cfg(&g, ctx) != 0) rc = 1;
                }
    } else {
        for (size_t ci = 0; ci < 2; ++ci)
            for (int mode = 0; mode < 2; ++mode)
                for (size_t pi = 0; pi < 3; ++pi) {
                    cfg g = {Ps[pi], mode ? FMSA_RING_ZIGZAG : FMSA_RING_CONTIGUOUS, mode, 1,
                             cs[ci], Hq, Hkv, D, FMSA_DTYPE_BF16, 0};
                    if (run_cfg(&g, ctx) != 0) rc = 1;
                }
    }
    for (int r = 0; r < MAX_P; ++r) fmsa_context_destroy(ctx[r]);
    return rc;
}
