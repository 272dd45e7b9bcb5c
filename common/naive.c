/*
 * The naive same-precision implementation (naive.h): row functions, and the
 * whole-tensor passes built from them.  The whole-tensor passes run one task
 * per (sequence, head) on OpenMP threads; each task owns its output rows and
 * adds in the same order as a serial loop, so the result does not depend on
 * the thread count.
 */
#include "common/naive.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fmsa_half.h"

/// Rounds an fp32 value to the problem dtype and back (identity for f32).
static float nv_round(const fmsa_problem *p, float x) {
    switch (p->dtype) {
    case FMSA_DTYPE_F16: return fmsa_f16_to_f32(fmsa_f32_to_f16(x));
    case FMSA_DTYPE_BF16: return fmsa_bf16_to_f32(fmsa_f32_to_bf16(x));
    default: return x;
    }
}

/*
 * Score transforms and visibility, written out here in fp32 from flashmsa.h
 * instead of taken from the kernels' fmsa_score.h: if the naive shared a
 * mistake with a backend, its own error would be large and the tolerance
 * derived from it would hide the backend's.
 */
static int nv_visible(int64_t i, int64_t j, int64_t sq, int64_t sk, int64_t wl, int64_t wr) {
    const int64_t diag = i + sk - sq;
    return (wl < 0 || j >= diag - wl) && (wr < 0 || j <= diag + wr);
}

static float nv_softcap(float x, float cap) { return cap > 0.0f ? cap * tanhf(x / cap) : x; }

static float nv_alibi(float slope, int64_t i, int64_t j, int64_t sq, int64_t sk) {
    int64_t dist = i + sk - sq - j;
    return -slope * (float)(dist < 0 ? -dist : dist);
}

/// d softcap(x) / dx through the capped value c: 1 - (c / cap)^2.
static float nv_softcap_grad(float c, float cap) {
    return cap > 0.0f ? 1.0f - (c / cap) * (c / cap) : 1.0f;
}

static float *nv_alloc(int64_t n) { return (float *)malloc(((size_t)n + 1) * sizeof(float)); }

int fmsa_naive_row_alloc(const fmsa_problem *p, fmsa_naive_row *r) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, sk = p->seqlen_k;
    memset(r, 0, sizeof *r);
    r->D = D;
    r->Dv = Dv;
    r->sk_max = sk;
    r->kv_b = r->kv_h = -1;
    r->k = nv_alloc(sk * D);
    r->v = nv_alloc(sk * Dv);
    r->q = nv_alloc(D);
    r->dout = nv_alloc(Dv);
    r->s = nv_alloc(sk);
    r->c = nv_alloc(sk);
    r->p = nv_alloc(sk);
    r->o = nv_alloc(Dv);
    r->dq = nv_alloc(D);
    if (!r->k || !r->v || !r->q || !r->dout || !r->s || !r->c || !r->p || !r->o || !r->dq) {
        fmsa_naive_row_free(r);
        return -1;
    }
    return 0;
}

void fmsa_naive_row_free(fmsa_naive_row *r) {
    free(r->k);
    free(r->v);
    free(r->q);
    free(r->dout);
    free(r->s);
    free(r->c);
    free(r->p);
    free(r->o);
    free(r->dq);
    memset(r, 0, sizeof *r);
}

/// Loads the keys and values of (b, hk) unless r holds them already.
static void nv_load_kv(const fmsa_problem *p, const fmsa_seq *sq, int64_t b, int64_t hk,
                       fmsa_naive_row *r) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    const int dt = (int)p->dtype;
    r->sk = sq->sk;
    if (r->kv_b == b && r->kv_h == hk) return;
    for (int64_t j = 0; j < sq->sk; ++j) {
        int64_t ko = fmsa_problem_k_offset(p, &p->k, sq, b, j, hk);
        int64_t vo = fmsa_problem_k_offset(p, &p->v, sq, b, j, hk);
        for (int64_t d = 0; d < D; ++d)
            r->k[j * D + d] = fmsa_load_f32(fmsa_view4_host(&p->k), dt, ko + d);
        for (int64_t d = 0; d < Dv; ++d)
            r->v[j * Dv + d] = fmsa_load_f32(fmsa_view4_host(&p->v), dt, vo + d);
    }
    r->kv_b = b;
    r->kv_h = hk;
}

/// acc[d] = sum_j w[j] m[j][d], each element accumulated in fp32 in order of j
/// (the result of a plain fp32 matrix product, written cache-friendly).
static void nv_row_times(float *acc, const float *w, const float *m, int64_t n, int64_t D) {
    for (int64_t d = 0; d < D; ++d) acc[d] = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        if (w[j] == 0.0f) continue; /* adds exactly +0: the sum is unchanged */
        for (int64_t d = 0; d < D; ++d) acc[d] += w[j] * m[j * D + d];
    }
}

void fmsa_naive_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                            fmsa_naive_row *r) {
    const fmsa_seq sq = fmsa_problem_seq(p, b);
    const int64_t D = p->head_dim, Dv = p->head_dim_v, sk = sq.sk;
    const int dt = (int)p->dtype;
    const float scale = p->softmax_scale, cap = p->softcap;
    const char *qb = fmsa_view4_host(&p->q);
    const int64_t qo = fmsa_problem_q_offset(&p->q, &sq, i, h);
    const unsigned char *mrow = NULL;
    /* the sink logit stays fp32 (a parameter, not an activation in the dtype) */
    const float t = p->has_sinks
                        ? ((const float *)fmsa_viewn_host(&p->sinks))[h * p->sinks.s0]
                        : -INFINITY;
    float slope = 0.0f, m = -INFINITY, l = 0.0f;

    nv_load_kv(p, &sq, b, fmsa_problem_kv_head(p, h), r);
    for (int64_t d = 0; d < D; ++d) r->q[d] = fmsa_load_f32(qb, dt, qo + d);
    if (p->has_alibi) {
        const float *a = (const float *)fmsa_viewn_host(&p->alibi);
        slope = a[b * p->alibi.s0 + h * p->alibi.s1];
    }
    if (p->has_mask)
        mrow = (const unsigned char *)fmsa_viewn_host(&p->mask) + b * p->mask.s0 +
               h * p->mask.s1 + i * p->mask.s2;
    for (int64_t j = 0; j < sk; ++j) {
        float acc = 0.0f, x;
        r->c[j] = 0.0f;
        r->s[j] = -INFINITY;
        if (!nv_visible(i, j, sq.sq, sk, p->window_left, p->window_right)) continue;
        if (mrow && ((mrow[j / 8] >> (j % 8)) & 1) == 0) continue;
        for (int64_t d = 0; d < D; ++d) acc += r->q[d] * r->k[j * D + d];
        x = acc * scale;
        r->c[j] = nv_softcap(x, cap);
        x = r->c[j];
        if (p->has_alibi) x += nv_alibi(slope, i, j, sq.sq, sk);
        r->s[j] = nv_round(p, x);
        if (r->s[j] > m) m = r->s[j];
    }
    if (m == -INFINITY) {
        /* no visible key: the sink alone (P_sink = 1, lse = t), or nothing */
        for (int64_t j = 0; j < sk; ++j) r->p[j] = 0.0f;
        r->lse = t;
        r->psink = t > -INFINITY ? 1.0f : 0.0f;
    } else {
        /* the sink is one more column of S: in the max and the sum, with no value */
        if (t > m) m = t;
        for (int64_t j = 0; j < sk; ++j) {
            r->p[j] = expf(r->s[j] - m);
            l += r->p[j];
        }
        r->psink = t > -INFINITY ? expf(t - m) : 0.0f;
        l += r->psink;
        for (int64_t j = 0; j < sk; ++j) r->p[j] = nv_round(p, r->p[j] / l);
        r->psink = nv_round(p, r->psink / l);
        r->lse = m + logf(l);
    }
    nv_row_times(r->o, r->p, r->v, sk, Dv);
    for (int64_t d = 0; d < Dv; ++d) r->o[d] = nv_round(p, r->o[d]);
}

void fmsa_naive_backward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                             fmsa_naive_row *r, float *dk, float *dv) {
    const fmsa_seq sq = fmsa_problem_seq(p, b);
    const int64_t D = p->head_dim, Dv = p->head_dim_v, sk = r->sk;
    const int dt = (int)p->dtype;
    const float cap = p->softcap;
    const char *gb = fmsa_view4_host(&p->dout);
    const int64_t go = fmsa_problem_q_offset(&p->dout, &sq, i, h);
    float di = 0.0f;

    for (int64_t d = 0; d < Dv; ++d) r->dout[d] = fmsa_load_f32(gb, dt, go + d);
    /* dP in place of the scores, which are no longer needed, then dS */
    for (int64_t j = 0; j < sk; ++j) {
        float acc = 0.0f;
        for (int64_t d = 0; d < Dv; ++d) acc += r->dout[d] * r->v[j * Dv + d];
        r->s[j] = nv_round(p, acc);
        di += r->p[j] * r->s[j];
    }
    /* the lse's gradient enters wherever rowsum(P dP) does (the sink column's dP is 0) */
    if (p->has_dlse)
        di -= ((const float *)fmsa_viewn_host(&p->dlse))[fmsa_problem_dlse_offset(p, &sq, i, h)];
    r->ds_sink = nv_round(p, r->psink * (0.0f - di));
    for (int64_t j = 0; j < sk; ++j) {
        r->s[j] = nv_round(p, r->p[j] * (r->s[j] - di));
        if (cap > 0.0f) r->s[j] = nv_round(p, r->s[j] * nv_softcap_grad(r->c[j], cap));
    }
    nv_row_times(r->dq, r->s, r->k, sk, D);
    for (int64_t d = 0; d < D; ++d) r->dq[d] = nv_round(p, r->dq[d] * p->softmax_scale);
    if (!dk) return;
    for (int64_t j = 0; j < sk; ++j) {
        const float ds = r->s[j], pj = r->p[j];
        for (int64_t d = 0; d < D; ++d) dk[j * D + d] += ds * r->q[d];
        for (int64_t d = 0; d < Dv; ++d) dv[j * Dv + d] += pj * r->dout[d];
    }
}

/* Dense layouts of reference.h: [Bq, total_q, Hq, n], [Bk, total_k, Hkv, n] (n = D or Dv),
 * [Bq, Hq, total_q]. */
static int64_t nv_dense_q(const fmsa_problem *p, const fmsa_seq *s, int64_t i, int64_t h,
                          int64_t n) {
    return ((s->q_batch * p->total_q + s->q_row0 + i) * p->heads_q + h) * n;
}
static int64_t nv_dense_k(const fmsa_problem *p, const fmsa_seq *s, int64_t j, int64_t hk,
                          int64_t n) {
    return ((s->k_batch * p->total_k + s->k_row0 + j) * p->heads_kv + hk) * n;
}
static int64_t nv_batch_q(const fmsa_problem *p) { return p->is_varlen ? 1 : p->batch; }
static int64_t nv_batch_k(const fmsa_problem *p) {
    return p->is_varlen ? 1 : (p->is_paged ? p->num_pages : p->batch);
}

int fmsa_naive_forward(const fmsa_problem *p, double *o, double *lse) {
    const int64_t Dv = p->head_dim_v, rows = nv_batch_q(p) * p->total_q;
    const int64_t tasks = p->batch * p->heads_q;
    int failed = 0;
    memset(o, 0, (size_t)(rows * p->heads_q * Dv) * sizeof(double));
    if (lse)
        for (int64_t n = 0; n < rows * p->heads_q; ++n) lse[n] = -INFINITY;
#ifdef _OPENMP
#pragma omp parallel reduction(| : failed)
#endif /* _OPENMP */
    {
        fmsa_naive_row r;
        const int ok = fmsa_naive_row_alloc(p, &r) == 0;
        if (!ok) failed = 1;
        /* tasks in the order of h within b, so the scratch's keys serve a GQA group */
#ifdef _OPENMP
#pragma omp for schedule(dynamic)
#endif /* _OPENMP */
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t b = t / p->heads_q, h = t % p->heads_q;
            const fmsa_seq s = fmsa_problem_seq(p, b);
            if (!ok) continue;
            for (int64_t i = 0; i < s.sq; ++i) {
                double *orow = o + nv_dense_q(p, &s, i, h, Dv);
                fmsa_naive_forward_row(p, b, h, i, &r);
                for (int64_t d = 0; d < Dv; ++d) orow[d] = r.o[d];
                if (lse) lse[(s.q_batch * p->heads_q + h) * p->total_q + s.q_row0 + i] = r.lse;
            }
        }
        fmsa_naive_row_free(&r);
    }
    return failed ? -1 : 0;
}

/// The backward of the query heads of kv head hk of sequence b: dQ rows, and
/// each head's dK/dV sums added, scaled, to the kv head's fp32 sums.
static void nv_backward_kv_head(const fmsa_problem *p, int64_t b, int64_t hk, fmsa_naive_row *r,
                                float *hk_acc, float *hv_acc, double *dq, float *dk_acc,
                                float *dv_acc) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, group = p->heads_q / p->heads_kv;
    const float scale = p->softmax_scale;
    const fmsa_seq s = fmsa_problem_seq(p, b);
    if (s.sq <= 0) return;
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        for (int64_t n = 0; n < s.sk * D; ++n) hk_acc[n] = 0.0f;
        for (int64_t n = 0; n < s.sk * Dv; ++n) hv_acc[n] = 0.0f;
        for (int64_t i = 0; i < s.sq; ++i) {
            double *row = dq + nv_dense_q(p, &s, i, h, D);
            fmsa_naive_forward_row(p, b, h, i, r);
            fmsa_naive_backward_row(p, b, h, i, r, hk_acc, hv_acc);
            for (int64_t d = 0; d < D; ++d) row[d] = r->dq[d];
        }
        for (int64_t j = 0; j < s.sk; ++j) {
            float *gk = dk_acc + nv_dense_k(p, &s, j, hk, D);
            float *gv = dv_acc + nv_dense_k(p, &s, j, hk, Dv);
            for (int64_t d = 0; d < D; ++d) gk[d] += hk_acc[j * D + d] * scale;
            for (int64_t d = 0; d < Dv; ++d) gv[d] += hv_acc[j * Dv + d];
        }
    }
}

int fmsa_naive_backward(const fmsa_problem *p, double *dq, double *dk, double *dv) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    const int64_t nq = nv_batch_q(p) * p->total_q * p->heads_q * D;
    const int64_t nk = nv_batch_k(p) * p->total_k * p->heads_kv * D;
    const int64_t nv = nv_batch_k(p) * p->total_k * p->heads_kv * Dv;
    const int64_t tasks = p->batch * p->heads_kv;
    float *dk_acc = nv_alloc(nk), *dv_acc = nv_alloc(nv);
    int failed = !dk_acc || !dv_acc;
    memset(dq, 0, (size_t)nq * sizeof(double));
    for (int64_t n = 0; n < nk && !failed; ++n) dk_acc[n] = 0.0f;
    for (int64_t n = 0; n < nv && !failed; ++n) dv_acc[n] = 0.0f;
    /* one task per (sequence, kv head): it alone adds to that head's rows of
     * dK/dV (a backward is never paged), its query heads in order */
    if (!failed) {
#ifdef _OPENMP
#pragma omp parallel reduction(| : failed)
#endif /* _OPENMP */
        {
            fmsa_naive_row r;
            float *hk_acc = nv_alloc(p->seqlen_k * D), *hv_acc = nv_alloc(p->seqlen_k * Dv);
            const int ok = fmsa_naive_row_alloc(p, &r) == 0 && hk_acc && hv_acc;
            if (!ok) failed = 1;
#ifdef _OPENMP
#pragma omp for schedule(dynamic)
#endif /* _OPENMP */
            for (int64_t t = 0; t < tasks; ++t)
                if (ok)
                    nv_backward_kv_head(p, t / p->heads_kv, t % p->heads_kv, &r, hk_acc, hv_acc,
                                        dq, dk_acc, dv_acc);
            fmsa_naive_row_free(&r);
            free(hk_acc);
            free(hv_acc);
        }
    }
    for (int64_t n = 0; n < nk && !failed; ++n) dk[n] = nv_round(p, dk_acc[n]);
    for (int64_t n = 0; n < nv && !failed; ++n) dv[n] = nv_round(p, dv_acc[n]);
    free(dk_acc);
    free(dv_acc);
    return failed ? -1 : 0;
}

/*
 * dsink as a framework gets it from autograd: the sink column's dS
 * (r->ds_sink, rounded to the dtype) summed in fp32 over sequences, then rows,
 * one head per task.  A row with no visible key has P_sink = 1 and D_i = 0
 * and adds its dlse_i.
 */
int fmsa_naive_dsink(const fmsa_problem *p, double *dsink) {
    int failed = 0;
    for (int64_t h = 0; h < p->heads_q; ++h) dsink[h] = 0.0;
    if (!p->has_sinks) return 0;
#ifdef _OPENMP
#pragma omp parallel reduction(| : failed)
#endif /* _OPENMP */
    {
        fmsa_naive_row r;
        const int ok = fmsa_naive_row_alloc(p, &r) == 0;
        if (!ok) failed = 1;
#ifdef _OPENMP
#pragma omp for schedule(dynamic)
#endif /* _OPENMP */
        for (int64_t h = 0; h < p->heads_q; ++h) {
            float acc = 0.0f;
            if (!ok) continue;
            for (int64_t b = 0; b < p->batch; ++b) {
                const fmsa_seq s = fmsa_problem_seq(p, b);
                for (int64_t i = 0; i < s.sq; ++i) {
                    fmsa_naive_forward_row(p, b, h, i, &r);
                    fmsa_naive_backward_row(p, b, h, i, &r, NULL, NULL);
                    acc += r.ds_sink;
                }
            }
            dsink[h] = acc;
        }
        fmsa_naive_row_free(&r);
    }
    return failed ? -1 : 0;
}
