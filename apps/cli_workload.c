/*
 * Problem setup shared by run and bench (see cli_workload.h).
 */
#include "apps/cli_workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cli_util.h"
#include "apps/cli_options.h"
#include "common/error.h"
#include "common/fmsa_half.h"
#include "common/fmsa_score.h"
#include "common/registry.h"
#include "common/validate.h"

/* The device a context would open must exist; said in the words of what
 * chose it (--device, or FLASHMSA_DEVICE under --backend auto), where the
 * library's message would name fmsa_context_create's arguments.  Malformed
 * variables are left to the library, whose message names them. */
static int cli_device_exists(fmsa_backend backend, int device) {
    const char *env_b = getenv("FLASHMSA_BACKEND"), *env_d = getenv("FLASHMSA_DEVICE");
    const char *who = "--device";
    char range[40];
    int count = 0, n = 0, i;
    if (backend == FMSA_BACKEND_AUTO) {
        if (env_b && *env_b && fmsa_backend_parse(env_b, &backend) != 0) return 1;
        if (env_d && *env_d) {
            char *end = NULL;
            long v = strtol(env_d, &end, 10);
            if (end == env_d || *end != '\0' || v < 0 || v > (1L << 20)) return 1;
            device = (int)v;
            who = "FLASHMSA_DEVICE";
        }
    }
    if (fmsa_device_count(&count) != FMSA_SUCCESS) return 1;
    for (i = 0; i < count; i++) {
        fmsa_device_info d;
        if (fmsa_device_get(i, &d) != FMSA_SUCCESS) return 1;
        if (backend == FMSA_BACKEND_AUTO || d.backend == backend) n++;
    }
    if (device < n || n == 0) return 1; /* n == 0: the library says the backend is unusable */
    if (n == 1)
        snprintf(range, sizeof range, "only index 0");
    else
        snprintf(range, sizeof range, "indexes 0 to %d", n - 1);
    fprintf(stderr, "flashmsa: %s%s%d: %s has %s; `flashmsa devices` lists them\n", who,
            who[0] == '-' ? " " : "=", device,
            backend == FMSA_BACKEND_AUTO ? "the global device list" : fmsa_backend_name(backend),
            range);
    return 0;
}

fmsa_status cli_context_open(fmsa_backend backend, int device, int threads, fmsa_context **ctx,
                             fmsa_device_info *info) {
    fmsa_status st;
    if (!cli_device_exists(backend, device)) return FMSA_ERR_INVALID_ARGUMENT;
    cli_set_threads(threads);
    st = fmsa_context_create(backend, device, ctx);
    if (cli_report(st, "fmsa_context_create") != FMSA_SUCCESS) return st;
    st = fmsa_context_device(*ctx, info);
    if (cli_report(st, "fmsa_context_device") != FMSA_SUCCESS) {
        fmsa_context_destroy(*ctx);
        *ctx = NULL;
    }
    return st;
}

/* Counter-based generator: element idx of tensor id depends only on (seed,
 * id, idx), so the fill parallelises and gives the same inputs for any thread
 * count. */
static uint64_t cli_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform on [-sqrt(3), sqrt(3)): unit variance, so q.k/sqrt(D) has unit
 * variance like the randn inputs of the usual attention tests, without the
 * cost of a Box-Muller per element on multi-GiB benchmark tensors. */
static void cli_fill(void *buf, fmsa_dtype dtype, int64_t n, uint64_t seed, uint64_t id) {
    const float half_width = 1.7320508f;
    int64_t i;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif /* _OPENMP */
    for (i = 0; i < n; i++) {
        uint64_t r = cli_mix64(seed ^ (id << 56) ^ (uint64_t)i * 0xd1342543de82ef95ull);
        float u = (float)(r >> 40) * (1.0f / 16777216.0f);
        fmsa_store_f32(buf, (int)dtype, i, (2.0f * u - 1.0f) * half_width);
    }
}

static fmsa_status cli_alloc_pair(cli_workload *w, size_t bytes, void **host, void **dev) {
    fmsa_status st;
    *host = malloc(bytes);
    if (*host == NULL) {
        fprintf(stderr, "flashmsa: out of host memory (%zu bytes)\n", bytes);
        return FMSA_ERR_OUT_OF_MEMORY;
    }
    st = fmsa_malloc(w->ctx, bytes, dev);
    return cli_report(st, "fmsa_malloc");
}

/* es * a * b * c * d bytes, 0 when the product overflows size_t or int64. */
static int cli_bytes(size_t es, int64_t a, int64_t b, int64_t c, int64_t d, size_t *out) {
    int64_t n;
    size_t bytes;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
        __builtin_mul_overflow(n, d, &n) || n < 0 ||
        __builtin_mul_overflow((size_t)n, es, &bytes))
        return 0;
    *out = bytes;
    return 1;
}

static fmsa_tensor cli_tensor4(void *data, fmsa_dtype dt, int64_t b, int64_t s, int64_t h,
                               int64_t d) {
    int64_t shape[4];
    shape[0] = b;
    shape[1] = s;
    shape[2] = h;
    shape[3] = d;
    return fmsa_tensor_contiguous(data, dt, 4, shape);
}

static fmsa_tensor cli_tensor_lse(void *data, const cli_shape *s) {
    int64_t shape[3];
    shape[0] = s->batch;
    shape[1] = s->heads_q;
    shape[2] = s->seqlen_q;
    return fmsa_tensor_contiguous(data, FMSA_DTYPE_F32, 3, shape);
}

/* The four dense attention tensors plus lse over the given buffers. */
static void cli_make_tensors(const cli_shape *s, void *q, void *k, void *v, void *o, void *lse,
                             void *dout, void *dq, void *dk, void *dv, fmsa_tensor *t) {
    t[0] = cli_tensor4(q, s->dtype, s->batch, s->seqlen_q, s->heads_q, s->head_dim);
    t[1] = cli_tensor4(k, s->dtype, s->batch, s->seqlen_k, s->heads_kv, s->head_dim);
    const int64_t dv_dim = cli_shape_dv(s);
    t[2] = cli_tensor4(v, s->dtype, s->batch, s->seqlen_k, s->heads_kv, dv_dim);
    t[3] = cli_tensor4(o, s->dtype, s->batch, s->seqlen_q, s->heads_q, dv_dim);
    t[4] = cli_tensor_lse(lse, s);
    t[5] = cli_tensor4(dout, s->dtype, s->batch, s->seqlen_q, s->heads_q, dv_dim);
    t[6] = cli_tensor4(dq, s->dtype, s->batch, s->seqlen_q, s->heads_q, s->head_dim);
    t[7] = cli_tensor4(dk, s->dtype, s->batch, s->seqlen_k, s->heads_kv, s->head_dim);
    t[8] = cli_tensor4(dv, s->dtype, s->batch, s->seqlen_k, s->heads_kv, dv_dim);
}

/* fp32 [Hq] (sinks, dsink). */
static fmsa_tensor cli_tensor_heads(void *data, const cli_shape *s) {
    int64_t n = s->heads_q;
    return fmsa_tensor_contiguous(data, FMSA_DTYPE_F32, 1, &n);
}

/* Sink logits: every head sink_value, or uniform in [-2, 4] per head from the
 * seed (from negligible next to the keys to a visible share of each row). */
static void cli_fill_sinks(float *t, const cli_shape *s, uint64_t seed) {
    int64_t h;
    for (h = 0; h < s->heads_q; h++) {
        uint64_t r = cli_mix64(seed ^ (5ull << 56) ^ (uint64_t)h * 0xd1342543de82ef95ull);
        t[h] = s->sinks == 2 ? s->sink_value : -2.0f + 6.0f * (float)(r >> 40) / 16777216.0f;
    }
}

fmsa_status cli_workload_create(fmsa_context *ctx, const cli_shape *shape, uint64_t seed,
                                cli_workload *w) {
    const cli_shape *s = shape;
    size_t es = fmsa_dtype_size(s->dtype);
    size_t fwd_ws = 0, bwd_ws = 0;
    fmsa_tensor t[9];
    fmsa_status st;

    memset(w, 0, sizeof *w);
    w->shape = *shape;
    w->ctx = ctx;
    /* The option limits allow products past int64 (batch 2^20 x seqlen 2^26 x
     * heads 2^16 x dim 2^12): refuse them instead of wrapping into a small,
     * wrong allocation. */
    if (!cli_bytes(es, s->batch, s->seqlen_q, s->heads_q, s->head_dim, &w->q_bytes) ||
        !cli_bytes(es, s->batch, s->seqlen_k, s->heads_kv, s->head_dim, &w->kv_bytes) ||
        !cli_bytes(es, s->batch, s->seqlen_q, s->heads_q, cli_shape_dv(s), &w->o_bytes) ||
        !cli_bytes(es, s->batch, s->seqlen_k, s->heads_kv, cli_shape_dv(s), &w->v_bytes) ||
        !cli_bytes(sizeof(float), s->batch, s->heads_q, s->seqlen_q, 1, &w->lse_bytes)) {
        fprintf(stderr, "flashmsa: the problem's tensors do not fit in memory (size overflows)\n");
        return FMSA_ERR_INVALID_ARGUMENT;
    }

    w->desc = fmsa_attention_desc_init(s->head_dim);
    w->desc.causal = s->causal;
    w->desc.window_left = s->window_left;
    w->desc.window_right = s->window_right;
    w->desc.softcap = s->softcap;

    if ((st = cli_alloc_pair(w, w->q_bytes, &w->h_q, &w->d_q)) != FMSA_SUCCESS ||
        (st = cli_alloc_pair(w, w->kv_bytes, &w->h_k, &w->d_k)) != FMSA_SUCCESS ||
        (st = cli_alloc_pair(w, w->v_bytes, &w->h_v, &w->d_v)) != FMSA_SUCCESS ||
        (st = cli_alloc_pair(w, w->o_bytes, &w->h_o, &w->d_o)) != FMSA_SUCCESS ||
        (st = cli_alloc_pair(w, w->lse_bytes, (void **)&w->h_lse, &w->d_lse)) != FMSA_SUCCESS)
        goto fail;
    if (s->backward &&
        ((st = cli_alloc_pair(w, w->o_bytes, &w->h_dout, &w->d_dout)) != FMSA_SUCCESS ||
         (st = cli_alloc_pair(w, w->q_bytes, &w->h_dq, &w->d_dq)) != FMSA_SUCCESS ||
         (st = cli_alloc_pair(w, w->kv_bytes, &w->h_dk, &w->d_dk)) != FMSA_SUCCESS ||
         (st = cli_alloc_pair(w, w->v_bytes, &w->h_dv, &w->d_dv)) != FMSA_SUCCESS))
        goto fail;
    if (s->sinks) {
        /* the backward of a problem with sinks also writes dsink, checked too */
        w->sink_bytes = sizeof(float) * (size_t)s->heads_q;
        if ((st = cli_alloc_pair(w, w->sink_bytes, (void **)&w->h_sinks, &w->d_sinks)) !=
                FMSA_SUCCESS ||
            (s->backward && (st = cli_alloc_pair(w, w->sink_bytes, (void **)&w->h_dsink,
                                                 &w->d_dsink)) != FMSA_SUCCESS))
            goto fail;
        cli_fill_sinks(w->h_sinks, s, seed);
        w->desc.sinks = cli_tensor_heads(w->d_sinks, s);
        if (s->backward) w->dsink = cli_tensor_heads(w->d_dsink, s);
        st = cli_report(fmsa_copy_to_device(ctx, w->d_sinks, 0, w->h_sinks, w->sink_bytes),
                        "copy sinks");
        if (st != FMSA_SUCCESS) goto fail;
    }

    cli_make_tensors(s, w->d_q, w->d_k, w->d_v, w->d_o, w->d_lse, w->d_dout, w->d_dq, w->d_dk,
                     w->d_dv, t);
    w->q = t[0], w->k = t[1], w->v = t[2], w->o = t[3], w->lse = t[4];
    w->dout = t[5], w->dq = t[6], w->dk = t[7], w->dv = t[8];

    cli_fill(w->h_q, s->dtype, (int64_t)(w->q_bytes / es), seed, 1);
    cli_fill(w->h_k, s->dtype, (int64_t)(w->kv_bytes / es), seed, 2);
    cli_fill(w->h_v, s->dtype, (int64_t)(w->v_bytes / es), seed, 3);
    if (s->backward) cli_fill(w->h_dout, s->dtype, (int64_t)(w->o_bytes / es), seed, 4);

    if ((st = cli_report(fmsa_copy_to_device(ctx, w->d_q, 0, w->h_q, w->q_bytes),
                         "copy q")) != FMSA_SUCCESS ||
        (st = cli_report(fmsa_copy_to_device(ctx, w->d_k, 0, w->h_k, w->kv_bytes),
                         "copy k")) != FMSA_SUCCESS ||
        (st = cli_report(fmsa_copy_to_device(ctx, w->d_v, 0, w->h_v, w->v_bytes),
                         "copy v")) != FMSA_SUCCESS)
        goto fail;
    if (s->backward &&
        (st = cli_report(fmsa_copy_to_device(ctx, w->d_dout, 0, w->h_dout, w->o_bytes),
                         "copy dout")) != FMSA_SUCCESS)
        goto fail;

    st = fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &w->desc, &w->q, &w->k, &w->v, &fwd_ws);
    if (cli_report(st, "fmsa_workspace_size(forward)") != FMSA_SUCCESS) goto fail;
    if (s->backward) {
        st = fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &w->desc, &w->q, &w->k, &w->v,
                                 &bwd_ws);
        if (cli_report(st, "fmsa_workspace_size(backward)") != FMSA_SUCCESS) goto fail;
    }
    w->ws_bytes = fwd_ws > bwd_ws ? fwd_ws : bwd_ws;
    if (w->ws_bytes > 0) {
        st = cli_report(fmsa_malloc(ctx, w->ws_bytes, &w->d_ws), "fmsa_malloc(workspace)");
        if (st != FMSA_SUCCESS) goto fail;
    }
    return FMSA_SUCCESS;

fail:
    cli_workload_destroy(w);
    return st;
}

void cli_workload_destroy(cli_workload *w) {
    void *dev[] = {w->d_q,  w->d_k,  w->d_v,  w->d_o,  w->d_lse,   w->d_dout,
                   w->d_dq, w->d_dk, w->d_dv, w->d_ws, w->d_sinks, w->d_dsink};
    void *host[] = {w->h_q,  w->h_k,  w->h_v,  w->h_o,     w->h_lse,
                    w->h_dout, w->h_dq, w->h_dk, w->h_dv, w->h_sinks, w->h_dsink};
    size_t i;
    for (i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i] != NULL) fmsa_free(w->ctx, dev[i]);
    for (i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    memset(w, 0, sizeof *w);
}

/* Copies a host buffer of 0xff bytes (NaN in fp32, fp16 and bf16) over dev. */
static fmsa_status cli_poison_one(cli_workload *w, void *host, void *dev, size_t bytes) {
    memset(host, 0xff, bytes);
    return cli_report(fmsa_copy_to_device(w->ctx, dev, 0, host, bytes), "poison outputs");
}

fmsa_status cli_workload_poison(cli_workload *w, fmsa_pass pass) {
    if (pass == FMSA_PASS_FORWARD) {
        if (cli_poison_one(w, w->h_o, w->d_o, w->o_bytes) != FMSA_SUCCESS ||
            cli_poison_one(w, w->h_lse, w->d_lse, w->lse_bytes) != FMSA_SUCCESS)
            return FMSA_ERR_DEVICE;
        return FMSA_SUCCESS;
    }
    if (cli_poison_one(w, w->h_dq, w->d_dq, w->q_bytes) != FMSA_SUCCESS ||
        cli_poison_one(w, w->h_dk, w->d_dk, w->kv_bytes) != FMSA_SUCCESS ||
        cli_poison_one(w, w->h_dv, w->d_dv, w->v_bytes) != FMSA_SUCCESS ||
        (w->d_dsink != NULL &&
         cli_poison_one(w, w->h_dsink, w->d_dsink, w->sink_bytes) != FMSA_SUCCESS))
        return FMSA_ERR_DEVICE;
    return FMSA_SUCCESS;
}

fmsa_status cli_workload_run(cli_workload *w, fmsa_pass pass) {
    fmsa_status st;
    if (pass == FMSA_PASS_FORWARD) {
        st = fmsa_forward(w->ctx, &w->desc, &w->q, &w->k, &w->v, &w->o, &w->lse, w->d_ws,
                          w->ws_bytes, NULL);
        if (cli_report(st, "fmsa_forward") != FMSA_SUCCESS) return st;
    } else {
        fmsa_backward_tensors bt = {0};
        bt.q = w->q;
        bt.k = w->k;
        bt.v = w->v;
        bt.o = w->o;
        bt.dout = w->dout;
        bt.lse = w->lse;
        bt.dq = w->dq;
        bt.dk = w->dk;
        bt.dv = w->dv;
        bt.dsink = w->dsink;
        st = fmsa_backward(w->ctx, &w->desc, &bt, w->d_ws, w->ws_bytes, NULL);
        if (cli_report(st, "fmsa_backward") != FMSA_SUCCESS) return st;
    }
    return cli_report(fmsa_synchronize(w->ctx, NULL), "fmsa_synchronize");
}

fmsa_status cli_workload_fetch(cli_workload *w, fmsa_pass pass) {
    fmsa_context *c = w->ctx;
    if (pass == FMSA_PASS_FORWARD) {
        FMSA_TRY(cli_report(fmsa_copy_to_host(c, w->h_o, w->d_o, 0, w->o_bytes), "copy o"));
        return cli_report(fmsa_copy_to_host(c, w->h_lse, w->d_lse, 0, w->lse_bytes), "copy lse");
    }
    FMSA_TRY(cli_report(fmsa_copy_to_host(c, w->h_dq, w->d_dq, 0, w->q_bytes), "copy dq"));
    FMSA_TRY(cli_report(fmsa_copy_to_host(c, w->h_dk, w->d_dk, 0, w->kv_bytes), "copy dk"));
    FMSA_TRY(cli_report(fmsa_copy_to_host(c, w->h_dv, w->d_dv, 0, w->v_bytes), "copy dv"));
    if (w->d_dsink == NULL) return FMSA_SUCCESS;
    return cli_report(fmsa_copy_to_host(c, w->h_dsink, w->d_dsink, 0, w->sink_bytes),
                      "copy dsink");
}

fmsa_status cli_workload_host_problem(const cli_workload *w, fmsa_pass pass, fmsa_problem *p) {
    fmsa_tensor t[9], dsink;
    fmsa_call_tensors ct;
    fmsa_attention_desc desc = w->desc;
    memset(&ct, 0, sizeof ct);
    cli_make_tensors(&w->shape, w->h_q, w->h_k, w->h_v, w->h_o, w->h_lse, w->h_dout, w->h_dq,
                     w->h_dk, w->h_dv, t);
    ct.q = &t[0], ct.k = &t[1], ct.v = &t[2], ct.o = &t[3], ct.lse = &t[4];
    if (pass == FMSA_PASS_BACKWARD) ct.dout = &t[5], ct.dq = &t[6], ct.dk = &t[7], ct.dv = &t[8];
    if (w->h_sinks != NULL) desc.sinks = cli_tensor_heads(w->h_sinks, &w->shape);
    if (pass == FMSA_PASS_BACKWARD && w->h_dsink != NULL) {
        dsink = cli_tensor_heads(w->h_dsink, &w->shape);
        ct.dsink = &dsink;
    }
    return cli_report(fmsa_problem_build(p, pass, &desc, &ct, 0, NULL, NULL),
                      "fmsa_problem_build(host copy)");
}

double cli_shape_pairs(const cli_shape *s) {
    /* causal is window_right = 0 (flashmsa.h) */
    int64_t right = s->causal ? 0 : s->window_right;
    int64_t i, pairs = 0;
    if (s->window_left < 0 && right < 0) return (double)s->batch * s->seqlen_q * s->seqlen_k;
    if (s->causal && s->window_left < 0 && s->seqlen_q == s->seqlen_k)
        return (double)s->batch * s->seqlen_q * s->seqlen_k / 2.0;
    for (i = 0; i < s->seqlen_q; i++) {
        int64_t b = fmsa_window_key_begin(i, s->seqlen_q, s->seqlen_k, s->window_left);
        int64_t e = fmsa_window_key_end(i + 1, s->seqlen_q, s->seqlen_k, right);
        if (e > b) pairs += e - b;
    }
    return (double)s->batch * (double)pairs;
}

double cli_shape_flops(const cli_shape *s, fmsa_pass pass) {
    double fwd = 2.0 * (double)s->heads_q * (double)(s->head_dim + cli_shape_dv(s)) *
                 cli_shape_pairs(s);
    return pass == FMSA_PASS_FORWARD ? fwd : 2.5 * fwd;
}

void cli_shape_describe(const cli_shape *s, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s b%lld sq%lld sk%lld h%lld/%lld d%lld%s",
                       cli_dtype_name(s->dtype), (long long)s->batch, (long long)s->seqlen_q,
                       (long long)s->seqlen_k, (long long)s->heads_q, (long long)s->heads_kv,
                       (long long)s->head_dim, s->causal ? " causal" : "");
    if (len < 0 || (size_t)len >= n) return;
    if (cli_shape_dv(s) != s->head_dim)
        len += snprintf(buf + len, n - (size_t)len, " dv%lld", (long long)cli_shape_dv(s));
    if (len < 0 || (size_t)len >= n) return;
    if (s->sinks == 1) len += snprintf(buf + len, n - (size_t)len, " sinks random");
    if (s->sinks == 2) len += snprintf(buf + len, n - (size_t)len, " sinks %g", s->sink_value);
    if (len < 0 || (size_t)len >= n) return;
    if (s->window_left >= 0 || s->window_right >= 0)
        len += snprintf(buf + len, n - (size_t)len, " window %lld,%lld",
                        (long long)s->window_left, (long long)s->window_right);
    if (len < 0 || (size_t)len >= n) return;
    if (s->softcap > 0) snprintf(buf + len, n - (size_t)len, " softcap %g", s->softcap);
}
