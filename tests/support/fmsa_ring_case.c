/* One ring-attention test case (fmsa_ring_case.h). */
#include "tests/support/fmsa_ring_case.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check_rule.h"
#include "common/fmsa_half.h"
#include "common/naive.h"
#include "common/reference.h"
#include "common/validate.h"
#include "tests/support/fmsa_test_runner.h"

enum { GUARD = 64 };
static const unsigned char GUARD_BYTE = 0xa5;

struct fmsa_ring_case {
    fmsa_ring_spec s;
    int64_t S;                       ///< whole sequence: P * c
    void *q, *k, *v, *dout;          ///< whole inputs, spec dtype
    float *sinks;                    ///< [Hq] sink logits (NULL without)
    float *alibi;                    ///< ALiBi slopes, [Hq] or [B, Hq] (NULL without)
    int64_t n_alibi;                 ///< their count
    unsigned char *mask;             ///< [Bm, Hm, S, mask_bytes] (NULL without)
    int64_t mask_b, mask_h, mask_bytes; ///< its batch and head extents, bytes per row
    float *dlse;                     ///< [B, Hq, S] lse gradient (NULL without)
    double ref_dsink_max, nv_dsink_err; ///< dsink yardstick: max |ref|, max |naive - ref|
    double *ref_dsink;               ///< [Hq] (NULL without sinks)
    double *x_dsink;                 ///< [Hq] rule part (d): what O's rounding adds to D_i
    double *ref_o, *ref_lse, *ref_dq, *ref_dk, *ref_dv;
    double *nv_o, *nv_lse, *nv_dq, *nv_dk, *nv_dv;
};

static size_t es_of(fmsa_dtype t) { return fmsa_dtype_size(t); }

void fmsa_ring_spec_name(const fmsa_ring_spec *s, char *buf, size_t len) {
    static const char *lay[] = {"contiguous", "zigzag", "striped"};
    static const char *dt[] = {"?", "f32", "f16", "bf16"};
    char win[48] = "";
    if (s->window)
        snprintf(win, sizeof win, " window %lld/%lld", (long long)s->window_left,
                 (long long)s->window_right);
    snprintf(buf, len, "P=%d %s %s %s B=%lld c=%lld H=%lld/%lld D=%lld/%lld%s%s%s%s%s", s->P,
             lay[s->layout], s->causal ? "causal" : "full", dt[s->dtype], (long long)s->B,
             (long long)s->c, (long long)s->Hq, (long long)s->Hkv, (long long)s->D,
             (long long)s->Dv, s->softcap > 0 ? " softcap" : "", s->sinks ? " sinks" : "",
             s->alibi == 1 ? " alibi[Hq]" : s->alibi == 2 ? " alibi[B,Hq]" : "", win,
             s->mask == 1 ? " mask[B,Hq]" : s->mask == 2 ? " mask[1,1]" : "");
}

/* Values in [-1, 1), rounded to the dtype (so the oracles see what is stored). */
static void *draw(size_t n, fmsa_dtype dt, unsigned *seed) {
    char *p = (char *)malloc(n * es_of(dt) + 1);
    if (!p) return NULL;
    for (size_t i = 0; i < n; ++i) {
        *seed = *seed * 1664525u + 1013904223u;
        fmsa_store_f32(p, dt, (int64_t)i, (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
    return p;
}

/* Global position of local row i of rank r. */
static int64_t pos_of(const fmsa_ring_spec *s, int r, int64_t i) {
    const int64_t half = s->c / 2;
    switch (s->layout) {
    case FMSA_RING_CONTIGUOUS: return (int64_t)r * s->c + i;
    case FMSA_RING_ZIGZAG:
        return i < half ? (int64_t)r * half + i : (int64_t)(2 * s->P - 1 - r) * half + i - half;
    case FMSA_RING_STRIPED: return (int64_t)r + (int64_t)s->P * i;
    }
    return -1;
}

static fmsa_tensor t4(void *p, fmsa_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t sh[4] = {a, b, c, d};
    return fmsa_tensor_contiguous(p, dt, 4, sh);
}

static fmsa_tensor t3(void *p, int64_t a, int64_t b, int64_t c) {
    const int64_t sh[3] = {a, b, c};
    return fmsa_tensor_contiguous(p, FMSA_DTYPE_F32, 3, sh);
}

/* The spec's ALiBi slopes at p: [Hq] or [B, Hq] (the desc's alibi_slopes). */
static fmsa_tensor alibi_tensor(const fmsa_ring_spec *s, void *p) {
    const int64_t sh[2] = {s->B, s->Hq};
    return s->alibi == 2 ? fmsa_tensor_contiguous(p, FMSA_DTYPE_F32, 2, sh)
                         : fmsa_tensor_contiguous(p, FMSA_DTYPE_F32, 1, &sh[1]);
}

/* The whole problem as the validator sees it (host memory). */
static int whole_problem(const fmsa_ring_case *rc, fmsa_pass pass, void *o, void *lse, void *dq,
                         void *dk, void *dv, fmsa_problem *p) {
    const fmsa_ring_spec *s = &rc->s;
    fmsa_attention_desc desc = fmsa_attention_desc_init(s->D);
    fmsa_tensor q = t4(rc->q, s->dtype, s->B, rc->S, s->Hq, s->D);
    fmsa_tensor k = t4(rc->k, s->dtype, s->B, rc->S, s->Hkv, s->D);
    fmsa_tensor v = t4(rc->v, s->dtype, s->B, rc->S, s->Hkv, s->Dv);
    fmsa_tensor to = t4(o, s->dtype, s->B, rc->S, s->Hq, s->Dv);
    fmsa_tensor tl = t3(lse, s->B, s->Hq, rc->S);
    fmsa_tensor tdo = t4(rc->dout, s->dtype, s->B, rc->S, s->Hq, s->Dv);
    fmsa_tensor tdq = t4(dq, s->dtype, s->B, rc->S, s->Hq, s->D);
    fmsa_tensor tdk = t4(dk, s->dtype, s->B, rc->S, s->Hkv, s->D);
    fmsa_tensor tdv = t4(dv, s->dtype, s->B, rc->S, s->Hkv, s->Dv);
    fmsa_call_tensors ct;
    fmsa_tensor tdl = t3(rc->dlse, s->B, s->Hq, rc->S);
    const int64_t hs[1] = {s->Hq};
    desc.causal = s->causal;
    desc.softcap = s->softcap;
    if (s->window) {
        desc.window_left = s->window_left;
        desc.window_right = s->window_right;
    }
    if (rc->sinks) desc.sinks = fmsa_tensor_contiguous(rc->sinks, FMSA_DTYPE_F32, 1, hs);
    if (rc->alibi) desc.alibi_slopes = alibi_tensor(s, rc->alibi);
    if (rc->mask)
        desc.mask = t4(rc->mask, FMSA_DTYPE_U8, rc->mask_b, rc->mask_h, rc->S, rc->mask_bytes);
    memset(&ct, 0, sizeof ct);
    if (rc->dlse) ct.dlse = &tdl;
    ct.q = &q;
    ct.k = &k;
    ct.v = &v;
    ct.o = &to;
    ct.lse = &tl;
    ct.dout = &tdo;
    ct.dq = &tdq;
    ct.dk = &tdk;
    ct.dv = &tdv;
    return fmsa_problem_build(p, pass, &desc, &ct, 0, NULL, NULL) == FMSA_SUCCESS ? 0 : -1;
}

void fmsa_ring_case_free(fmsa_ring_case *rc) {
    if (!rc) return;
    free(rc->q);
    free(rc->k);
    free(rc->v);
    free(rc->dout);
    free(rc->ref_o);
    free(rc->ref_lse);
    free(rc->ref_dq);
    free(rc->ref_dk);
    free(rc->ref_dv);
    free(rc->nv_o);
    free(rc->nv_lse);
    free(rc->nv_dq);
    free(rc->nv_dk);
    free(rc->nv_dv);
    free(rc->sinks);
    free(rc->alibi);
    free(rc->mask);
    free(rc->dlse);
    free(rc->ref_dsink);
    free(rc->x_dsink);
    free(rc);
}

fmsa_ring_case *fmsa_ring_case_make(const fmsa_ring_spec *spec) {
    fmsa_ring_case *rc = (fmsa_ring_case *)calloc(1, sizeof *rc);
    unsigned seed;
    size_t nq, nk, nv, no, nl;
    void *scratch[5] = {0};
    fmsa_problem pf, pb;
    int ok = 0;
    if (!rc) return NULL;
    rc->s = *spec;
    rc->S = spec->P * spec->c;
    seed = spec->seed;
    nq = (size_t)(spec->B * rc->S * spec->Hq * spec->D);
    nk = (size_t)(spec->B * rc->S * spec->Hkv * spec->D);
    nv = (size_t)(spec->B * rc->S * spec->Hkv * spec->Dv);
    no = (size_t)(spec->B * rc->S * spec->Hq * spec->Dv);
    nl = (size_t)(spec->B * spec->Hq * rc->S);
    rc->q = draw(nq, spec->dtype, &seed);
    rc->k = draw(nk, spec->dtype, &seed);
    rc->v = draw(nv, spec->dtype, &seed);
    rc->dout = draw(no, spec->dtype, &seed);
    if (spec->sinks) {
        rc->sinks = (float *)draw((size_t)spec->Hq, FMSA_DTYPE_F32, &seed);
        for (int64_t h = 0; rc->sinks && h < spec->Hq; ++h) rc->sinks[h] = 2.0f * rc->sinks[h] + 0.5f;
        rc->ref_dsink = (double *)malloc((size_t)spec->Hq * sizeof(double));
        rc->x_dsink = (double *)calloc((size_t)spec->Hq, sizeof(double));
    }
    if (spec->dlse) rc->dlse = (float *)draw(nl, FMSA_DTYPE_F32, &seed);
    if (spec->alibi) { /* slopes in [0.05, 0.55): a bias of several units across a few ranks */
        rc->n_alibi = spec->alibi == 2 ? spec->B * spec->Hq : spec->Hq;
        rc->alibi = (float *)draw((size_t)rc->n_alibi, FMSA_DTYPE_F32, &seed);
        for (int64_t h = 0; rc->alibi && h < rc->n_alibi; ++h)
            rc->alibi[h] = 0.25f * rc->alibi[h] + 0.3f;
        if (!rc->alibi) rc->n_alibi = 0;
    }
    if (spec->mask) { /* bits from the seed: 3 of 4 kept; row 1 of sequence 0 fully masked */
        size_t nm;
        rc->mask_b = spec->mask == 1 ? spec->B : 1;
        rc->mask_h = spec->mask == 1 ? spec->Hq : 1;
        rc->mask_bytes = (rc->S + 7) / 8;
        nm = (size_t)(rc->mask_b * rc->mask_h * rc->S * rc->mask_bytes);
        rc->mask = (unsigned char *)malloc(nm);
        for (size_t i = 0; rc->mask && i < nm; ++i) {
            unsigned char x = 0;
            for (int bit = 0; bit < 8; ++bit) {
                seed = seed * 1664525u + 1013904223u;
                x |= (unsigned char)((((seed >> 12) & 3u) != 0) << bit);
            }
            rc->mask[i] = x;
        }
        for (int64_t h = 0; rc->mask && rc->S > 1 && h < rc->mask_h; ++h)
            memset(rc->mask + (h * rc->S + 1) * rc->mask_bytes, 0, (size_t)rc->mask_bytes);
    }
    rc->ref_o = malloc(no * sizeof(double));
    rc->ref_lse = malloc(nl * sizeof(double));
    rc->ref_dq = malloc(nq * sizeof(double));
    rc->ref_dk = malloc(nk * sizeof(double));
    rc->ref_dv = malloc(nv * sizeof(double));
    rc->nv_o = malloc(no * sizeof(double));
    rc->nv_lse = malloc(nl * sizeof(double));
    rc->nv_dq = malloc(nq * sizeof(double));
    rc->nv_dk = malloc(nk * sizeof(double));
    rc->nv_dv = malloc(nv * sizeof(double));
    /* the validator wants every tensor of the pass present; the oracles never read them */
    scratch[0] = malloc(no * 4 + 1);
    scratch[1] = malloc(nl * 4 + 1);
    scratch[2] = malloc(nq * 4 + 1);
    scratch[3] = malloc(nk * 4 + 1);
    scratch[4] = malloc(nv * 4 + 1);
    if (rc->q && rc->k && rc->v && rc->dout && (rc->alibi || !spec->alibi) &&
        (rc->mask || !spec->mask) && rc->ref_o && rc->ref_lse && rc->ref_dq &&
        rc->ref_dk && rc->ref_dv && rc->nv_o && rc->nv_lse && rc->nv_dq && rc->nv_dk &&
        rc->nv_dv && scratch[0] && scratch[1] && scratch[2] && scratch[3] && scratch[4] &&
        whole_problem(rc, FMSA_PASS_FORWARD, scratch[0], scratch[1], scratch[2], scratch[3],
                      scratch[4], &pf) == 0 &&
        whole_problem(rc, FMSA_PASS_BACKWARD, scratch[0], scratch[1], scratch[2], scratch[3],
                      scratch[4], &pb) == 0 &&
        fmsa_reference_forward(&pf, rc->ref_o, rc->ref_lse) == FMSA_SUCCESS &&
        fmsa_reference_backward(&pb, rc->ref_dq, rc->ref_dk, rc->ref_dv) == FMSA_SUCCESS &&
        fmsa_naive_forward(&pf, rc->nv_o, rc->nv_lse) == 0 &&
        fmsa_naive_backward(&pb, rc->nv_dq, rc->nv_dk, rc->nv_dv) == 0)
        ok = 1;
    if (ok && spec->sinks) {
        double *nvd = (double *)malloc((size_t)spec->Hq * sizeof(double));
        ok = nvd && rc->ref_dsink && fmsa_reference_dsink(&pb, rc->ref_dsink) == FMSA_SUCCESS &&
             fmsa_naive_dsink(&pb, nvd) == 0;
        for (int64_t h = 0; ok && h < spec->Hq; ++h) {
            if (fabs(rc->ref_dsink[h]) > rc->ref_dsink_max) rc->ref_dsink_max = fabs(rc->ref_dsink[h]);
            if (fabs(nvd[h] - rc->ref_dsink[h]) > rc->nv_dsink_err)
                rc->nv_dsink_err = fabs(nvd[h] - rc->ref_dsink[h]);
        }
        /* Part (d) of check_rule.h: each rank's backward gets its O rounded to the
         * dtype.  No rank holds all rows of the ring's O, so the floor is taken over
         * the whole problem's fp64 O and lse, stored as a pass would store them (they
         * differ from the ranks' by the forward's error, a second-order change). */
        for (size_t j = 0; ok && j < no; ++j)
            fmsa_store_f32(scratch[0], spec->dtype, (int64_t)j, (float)rc->ref_o[j]);
        for (size_t j = 0; ok && j < nl; ++j) ((float *)scratch[1])[j] = (float)rc->ref_lse[j];
        ok = ok && rc->x_dsink && fmsa_reference_dsink_floor(&pb, rc->x_dsink) == FMSA_SUCCESS;
        free(nvd);
    }
    for (int i = 0; i < 5; ++i) free(scratch[i]);
    if (!ok) {
        fmsa_ring_case_free(rc);
        return NULL;
    }
    return rc;
}

/* ----------------------------------------------------------- one rank */

/// A host buffer with guard bytes on both sides, the inside poisoned (NaN bytes).
typedef struct guarded {
    unsigned char *raw;
    size_t bytes;
} guarded;

static void *guarded_make(guarded *g, size_t bytes) {
    g->bytes = bytes;
    g->raw = (unsigned char *)malloc(bytes + 2 * GUARD);
    if (!g->raw) return NULL;
    memset(g->raw, GUARD_BYTE, GUARD);
    memset(g->raw + GUARD, 0xff, bytes);
    memset(g->raw + GUARD + bytes, GUARD_BYTE, GUARD);
    return g->raw + GUARD;
}

static int guarded_intact(const guarded *g) {
    for (size_t i = 0; i < GUARD; ++i)
        if (g->raw[i] != GUARD_BYTE || g->raw[GUARD + g->bytes + i] != GUARD_BYTE) return 0;
    return 1;
}

/// Accumulates one tensor's check over this rank's rows.
typedef struct check_acc {
    double err, nerr, refmax;
    int nan;
} check_acc;

static void acc_add(check_acc *a, double x, double ref, double nv) {
    if (isnan(x)) a->nan = 1;
    if (isinf(ref)) {
        if (x != ref) a->nan = 1; /* an infinite reference must be met exactly */
        return;
    }
    if (fabs(x - ref) > a->err) a->err = fabs(x - ref);
    if (fabs(nv - ref) > a->nerr) a->nerr = fabs(nv - ref);
    if (fabs(ref) > a->refmax) a->refmax = fabs(ref);
}

static int acc_verdict(const check_acc *a, const char *name, fmsa_dtype store, double factor,
                       double softmax_units, double lse_max, int is_lse, char *msg, size_t len,
                       size_t *used) {
    fmsa_rule_floor_spec f;
    double bound;
    f.store_dtype = store;
    f.softmax_units = softmax_units;
    f.lse_max = lse_max;
    f.is_lse = is_lse;
    bound = factor * a->nerr + fmsa_rule_floor(&f, a->refmax);
    if (!a->nan && a->err <= bound) return 0;
    *used += (size_t)snprintf(msg + *used, *used < len ? len - *used : 0,
                              " %s: err %.3g > bound %.3g (naive %.3g)%s;", name, a->err, bound,
                              a->nerr, a->nan ? " NaN or a missed infinity" : "");
    return 1;
}

int fmsa_ring_case_run(const fmsa_ring_case *rc, fmsa_dist_comm *comm, char *msg, size_t len) {
    return fmsa_ring_case_run_on(rc, comm, NULL, msg, len);
}

int fmsa_ring_case_run_on(const fmsa_ring_case *rc, fmsa_dist_comm *comm, fmsa_context *ctx_in,
                          char *msg, size_t len) {
    const fmsa_ring_spec *s = &rc->s;
    const size_t es = es_of(s->dtype);
    const int64_t c = s->c, S = rc->S;
    int rank = 0, size = 0, bad = 0, rc_out = -1;
    fmsa_context *ctx = ctx_in;
    enum { Q, K, V, DO, O, LSE, DQ, DK, DV, DLSE, DSINK, SINKS, ALIBI, MASK, NB };
    guarded g[NB];
    void *buf[NB] = {0}, *dev[NB] = {0};
    void *ws = NULL;
    size_t wsf = 0, wsb = 0, used = 0;
    fmsa_status st;
    size_t bytes[NB];
    msg[0] = 0;
    memset(g, 0, sizeof g);
    if (fmsa_dist_comm_rank(comm, &rank, &size) != FMSA_SUCCESS || size != s->P) {
        snprintf(msg, len, "communicator size %d != P %d", size, s->P);
        return -1;
    }
    bytes[Q] = bytes[DQ] = (size_t)(s->B * c * s->Hq * s->D) * es;
    bytes[K] = bytes[DK] = (size_t)(s->B * c * s->Hkv * s->D) * es;
    bytes[V] = bytes[DV] = (size_t)(s->B * c * s->Hkv * s->Dv) * es;
    bytes[DO] = bytes[O] = (size_t)(s->B * c * s->Hq * s->Dv) * es;
    bytes[LSE] = bytes[DLSE] = (size_t)(s->B * s->Hq * c) * 4;
    bytes[DSINK] = bytes[SINKS] = (size_t)s->Hq * 4;
    bytes[ALIBI] = (size_t)(rc->n_alibi ? rc->n_alibi : 1) * 4;
    bytes[MASK] = rc->mask ? (size_t)(rc->mask_b * rc->mask_h * c * rc->mask_bytes) : 1;
    for (int i = 0; i < NB; ++i)
        if (!(buf[i] = guarded_make(&g[i], bytes[i]))) goto done;
    /* this rank's shard: rows of the layout gathered from the whole inputs */
    for (int64_t b = 0; b < s->B; ++b)
        for (int64_t i = 0; i < c; ++i) {
            const int64_t gi = pos_of(s, rank, i);
            memcpy((char *)buf[Q] + ((b * c + i) * s->Hq * s->D) * es,
                   (char *)rc->q + ((b * S + gi) * s->Hq * s->D) * es, (size_t)(s->Hq * s->D) * es);
            memcpy((char *)buf[K] + ((b * c + i) * s->Hkv * s->D) * es,
                   (char *)rc->k + ((b * S + gi) * s->Hkv * s->D) * es,
                   (size_t)(s->Hkv * s->D) * es);
            memcpy((char *)buf[V] + ((b * c + i) * s->Hkv * s->Dv) * es,
                   (char *)rc->v + ((b * S + gi) * s->Hkv * s->Dv) * es,
                   (size_t)(s->Hkv * s->Dv) * es);
            memcpy((char *)buf[DO] + ((b * c + i) * s->Hq * s->Dv) * es,
                   (char *)rc->dout + ((b * S + gi) * s->Hq * s->Dv) * es,
                   (size_t)(s->Hq * s->Dv) * es);
            for (int64_t h = 0; rc->dlse && h < s->Hq; ++h)
                ((float *)buf[DLSE])[(b * s->Hq + h) * c + i] = rc->dlse[(b * s->Hq + h) * S + gi];
        }
    /* the rank's mask: its own rows (in the shard's order) over every key column */
    for (int64_t bh = 0; rc->mask && bh < rc->mask_b * rc->mask_h; ++bh)
        for (int64_t i = 0; i < c; ++i)
            memcpy((unsigned char *)buf[MASK] + (bh * c + i) * rc->mask_bytes,
                   rc->mask + (bh * S + pos_of(s, rank, i)) * rc->mask_bytes,
                   (size_t)rc->mask_bytes);
    if (rc->sinks) memcpy(buf[SINKS], rc->sinks, bytes[SINKS]);
    if (rc->alibi) memcpy(buf[ALIBI], rc->alibi, bytes[ALIBI]);
    if (!ctx && fmsa_context_create(s->backend ? s->backend : FMSA_BACKEND_CPU, 0, &ctx) !=
                    FMSA_SUCCESS) {
        snprintf(msg, len, "context: %s", fmsa_last_error());
        goto done;
    }
    /* every buffer, guards included, in the context's memory */
    for (int i = 0; i < NB; ++i)
        if (fmsa_malloc(ctx, g[i].bytes + 2 * GUARD, &dev[i]) != FMSA_SUCCESS ||
            fmsa_copy_to_device(ctx, dev[i], 0, g[i].raw, g[i].bytes + 2 * GUARD) !=
                FMSA_SUCCESS) {
            snprintf(msg, len, "rank %d: device buffer %d: %s", rank, i, fmsa_last_error());
            goto done;
        }
    {
        fmsa_attention_desc desc = fmsa_attention_desc_init(s->D);
        fmsa_tensor q = t4(dev[Q], s->dtype, s->B, c, s->Hq, s->D);
        fmsa_tensor k = t4(dev[K], s->dtype, s->B, c, s->Hkv, s->D);
        fmsa_tensor v = t4(dev[V], s->dtype, s->B, c, s->Hkv, s->Dv);
        fmsa_tensor o = t4(dev[O], s->dtype, s->B, c, s->Hq, s->Dv);
        fmsa_tensor lse = t3(dev[LSE], s->B, s->Hq, c);
        fmsa_backward_tensors bt;
        const int64_t hs[1] = {s->Hq};
        size_t wsn;
        q.byte_offset = k.byte_offset = v.byte_offset = o.byte_offset = lse.byte_offset = GUARD;
        desc.causal = s->causal;
        desc.softcap = s->softcap;
        if (s->window) {
            desc.window_left = s->window_left;
            desc.window_right = s->window_right;
        }
        if (rc->sinks) {
            desc.sinks = fmsa_tensor_contiguous(dev[SINKS], FMSA_DTYPE_F32, 1, hs);
            desc.sinks.byte_offset = GUARD;
        }
        if (rc->alibi) {
            desc.alibi_slopes = alibi_tensor(s, dev[ALIBI]);
            desc.alibi_slopes.byte_offset = GUARD;
        }
        if (rc->mask) {
            desc.mask = t4(dev[MASK], FMSA_DTYPE_U8, rc->mask_b, rc->mask_h, c, rc->mask_bytes);
            desc.mask.byte_offset = GUARD;
        }
        st = fmsa_ring_workspace_size(ctx, comm, s->layout, FMSA_PASS_FORWARD, &desc, &q, &k, &v,
                                      &wsf);
        if (st == FMSA_SUCCESS)
            st = fmsa_ring_workspace_size(ctx, comm, s->layout, FMSA_PASS_BACKWARD, &desc, &q, &k,
                                          &v, &wsb);
        wsn = wsf > wsb ? wsf : wsb;
        if (st == FMSA_SUCCESS && fmsa_malloc(ctx, wsn ? wsn : 1, &ws) != FMSA_SUCCESS) {
            snprintf(msg, len, "rank %d: workspace of %zu bytes: %s", rank, wsn, fmsa_last_error());
            goto done;
        }
        if (st == FMSA_SUCCESS)
            st = fmsa_ring_forward(ctx, comm, s->layout, &desc, &q, &k, &v, &o, &lse, ws, wsf);
        memset(&bt, 0, sizeof bt);
        bt.q = q;
        bt.k = k;
        bt.v = v;
        bt.o = o;
        bt.lse = lse;
        bt.dout = t4(dev[DO], s->dtype, s->B, c, s->Hq, s->Dv);
        bt.dq = t4(dev[DQ], s->dtype, s->B, c, s->Hq, s->D);
        bt.dk = t4(dev[DK], s->dtype, s->B, c, s->Hkv, s->D);
        bt.dv = t4(dev[DV], s->dtype, s->B, c, s->Hkv, s->Dv);
        bt.dout.byte_offset = bt.dq.byte_offset = bt.dk.byte_offset = bt.dv.byte_offset = GUARD;
        if (rc->dlse) {
            bt.dlse = t3(dev[DLSE], s->B, s->Hq, c);
            bt.dlse.byte_offset = GUARD;
        }
        if (rc->sinks) {
            bt.dsink = fmsa_tensor_contiguous(dev[DSINK], FMSA_DTYPE_F32, 1, hs);
            bt.dsink.byte_offset = GUARD;
        }
        if (st == FMSA_SUCCESS)
            st = fmsa_ring_backward(ctx, comm, s->layout, &desc, &bt, ws, wsb);
        if (st == FMSA_SUCCESS) st = fmsa_synchronize(ctx, NULL);
        if (st == FMSA_ERR_NOT_SUPPORTED && fmsa_test_is_gate_refusal(fmsa_last_error())) {
            snprintf(msg, len, "refused: %s", fmsa_last_error());
            rc_out = 77;
            goto done;
        }
        if (st != FMSA_SUCCESS) {
            snprintf(msg, len, "rank %d: %s: %s", rank, fmsa_status_string(st), fmsa_last_error());
            rc_out = 1;
            goto done;
        }
    }
    for (int i = 0; i < NB; ++i)
        if (fmsa_copy_to_host(ctx, g[i].raw, dev[i], 0, g[i].bytes + 2 * GUARD) != FMSA_SUCCESS) {
            snprintf(msg, len, "rank %d: download of buffer %d: %s", rank, i, fmsa_last_error());
            goto done;
        }
    {
        check_acc a[5];
        const double lse_max = fmsa_rule_lse_max(rc->ref_lse, s->B * s->Hq * S);
        memset(a, 0, sizeof a);
        for (int64_t b = 0; b < s->B; ++b)
            for (int64_t i = 0; i < c; ++i) {
                const int64_t gi = pos_of(s, rank, i);
                for (int64_t h = 0; h < s->Hq; ++h) {
                    const int64_t lo = (b * s->Hq + h) * c + i, lg = (b * s->Hq + h) * S + gi;
                    acc_add(&a[1], ((float *)buf[LSE])[lo], rc->ref_lse[lg], rc->nv_lse[lg]);
                    for (int64_t d = 0; d < s->Dv; ++d) {
                        const int64_t l = ((b * c + i) * s->Hq + h) * s->Dv + d;
                        const int64_t w = ((b * S + gi) * s->Hq + h) * s->Dv + d;
                        acc_add(&a[0], fmsa_load_f32(buf[O], s->dtype, l), rc->ref_o[w], rc->nv_o[w]);
                    }
                    for (int64_t d = 0; d < s->D; ++d) {
                        const int64_t l = ((b * c + i) * s->Hq + h) * s->D + d;
                        const int64_t w = ((b * S + gi) * s->Hq + h) * s->D + d;
                        acc_add(&a[2], fmsa_load_f32(buf[DQ], s->dtype, l), rc->ref_dq[w], rc->nv_dq[w]);
                    }
                }
                for (int64_t h = 0; h < s->Hkv; ++h) {
                    for (int64_t d = 0; d < s->D; ++d) {
                        const int64_t l = ((b * c + i) * s->Hkv + h) * s->D + d;
                        const int64_t w = ((b * S + gi) * s->Hkv + h) * s->D + d;
                        acc_add(&a[3], fmsa_load_f32(buf[DK], s->dtype, l), rc->ref_dk[w], rc->nv_dk[w]);
                    }
                    for (int64_t d = 0; d < s->Dv; ++d) {
                        const int64_t l = ((b * c + i) * s->Hkv + h) * s->Dv + d;
                        const int64_t w = ((b * S + gi) * s->Hkv + h) * s->Dv + d;
                        acc_add(&a[4], fmsa_load_f32(buf[DV], s->dtype, l), rc->ref_dv[w], rc->nv_dv[w]);
                    }
                }
            }
        used = (size_t)snprintf(msg, len, "rank %d:", rank);
        bad |= acc_verdict(&a[0], "O", s->dtype, FMSA_RULE_FACTOR_FWD, FMSA_RULE_SOFTMAX_UNITS_FWD,
                           lse_max, 0, msg, len, &used);
        bad |= acc_verdict(&a[1], "LSE", FMSA_DTYPE_F32, FMSA_RULE_FACTOR_FWD,
                           FMSA_RULE_SOFTMAX_UNITS_FWD, lse_max, 1, msg, len, &used);
        bad |= acc_verdict(&a[2], "dQ", s->dtype, FMSA_RULE_FACTOR_BWD, FMSA_RULE_SOFTMAX_UNITS_BWD,
                           lse_max, 0, msg, len, &used);
        bad |= acc_verdict(&a[3], "dK", s->dtype, FMSA_RULE_FACTOR_BWD, FMSA_RULE_SOFTMAX_UNITS_BWD,
                           lse_max, 0, msg, len, &used);
        bad |= acc_verdict(&a[4], "dV", s->dtype, FMSA_RULE_FACTOR_BWD, FMSA_RULE_SOFTMAX_UNITS_BWD,
                           lse_max, 0, msg, len, &used);
        if (rc->sinks) { /* dsink: the sum over every rank's rows, the same on each; per head
                          * the rule's bound plus part (d) of that head */
            fmsa_rule_floor_spec f;
            f.store_dtype = FMSA_DTYPE_F32;
            f.softmax_units = FMSA_RULE_SOFTMAX_UNITS_BWD;
            f.lse_max = lse_max;
            f.is_lse = 0;
            for (int64_t h = 0; h < s->Hq; ++h) {
                const double x = ((float *)buf[DSINK])[h], err = fabs(x - rc->ref_dsink[h]);
                const double bound = FMSA_RULE_FACTOR_BWD * rc->nv_dsink_err +
                                     fmsa_rule_floor(&f, rc->ref_dsink_max) + rc->x_dsink[h];
                if (!isnan(x) && err <= bound) continue;
                bad = 1;
                used += (size_t)snprintf(msg + used, used < len ? len - used : 0,
                                         " dsink[%lld]: err %.3g > bound %.3g (naive %.3g, "
                                         "part (d) %.3g);",
                                         (long long)h, err, bound, rc->nv_dsink_err,
                                         rc->x_dsink[h]);
            }
        }
        for (int i = 0; i < NB; ++i)
            if (!guarded_intact(&g[i])) {
                bad = 1;
                used += (size_t)snprintf(msg + used, used < len ? len - used : 0,
                                         " guard bytes of buffer %d overwritten;", i);
            }
        rc_out = bad ? 1 : 0;
    }
done:
    for (int i = 0; i < NB; ++i) {
        free(g[i].raw);
        if (dev[i]) fmsa_free(ctx, dev[i]);
    }
    if (ws) fmsa_free(ctx, ws);
    if (ctx != ctx_in) fmsa_context_destroy(ctx);
    if (rc_out == -1 && !msg[0]) snprintf(msg, len, "rank %d: harness out of memory", rank);
    return rc_out;
}
