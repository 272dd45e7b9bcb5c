#include "support/fmsa_test_naive.h"

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

/// The matrices of one (sequence, query head), all fp32 holding dtype values.
typedef struct nv_head {
    int64_t sq, sk, D;
    float *q, *k, *v, *dout; ///< [sq|sk][D] inputs
    float *s;                ///< [sq][sk] scores (rounded), -inf where masked
    float *c;                ///< [sq][sk] softcapped score before ALiBi (for tanh')
    float *p;                ///< [sq][sk] probabilities (rounded)
    float *lse;              ///< [sq]
} nv_head;

static void nv_head_free(nv_head *h) {
    free(h->q);
    free(h->k);
    free(h->v);
    free(h->dout);
    free(h->s);
    free(h->c);
    free(h->p);
    free(h->lse);
    memset(h, 0, sizeof *h);
}

static float *nv_alloc(int64_t n) { return (float *)malloc(((size_t)n + 1) * sizeof(float)); }

/// Loads the head's inputs and computes S, P and lse exactly as the naive
/// framework would.
static int nv_head_forward(const fmsa_problem *p, const fmsa_seq *sq, int64_t b, int64_t h,
                           int with_dout, nv_head *w) {
    const int64_t D = p->head_dim, hk = fmsa_problem_kv_head(p, h);
    const int dt = (int)p->dtype;
    const float scale = p->softmax_scale, cap = p->softcap;
    float slope = 0.0f;
    memset(w, 0, sizeof *w);
    w->sq = sq->sq;
    w->sk = sq->sk;
    w->D = D;
    w->q = nv_alloc(w->sq * D);
    w->k = nv_alloc(w->sk * D);
    w->v = nv_alloc(w->sk * D);
    w->dout = nv_alloc(w->sq * D);
    w->s = nv_alloc(w->sq * w->sk);
    w->c = nv_alloc(w->sq * w->sk);
    w->p = nv_alloc(w->sq * w->sk);
    w->lse = nv_alloc(w->sq);
    if (!w->q || !w->k || !w->v || !w->dout || !w->s || !w->c || !w->p || !w->lse) return -1;

    for (int64_t i = 0; i < w->sq; ++i) {
        const char *qb = fmsa_view4_host(&p->q);
        int64_t off = fmsa_problem_q_offset(&p->q, sq, i, h);
        for (int64_t d = 0; d < D; ++d) w->q[i * D + d] = fmsa_load_f32(qb, dt, off + d);
        if (with_dout) {
            const char *gb = fmsa_view4_host(&p->dout);
            off = fmsa_problem_q_offset(&p->dout, sq, i, h);
            for (int64_t d = 0; d < D; ++d) w->dout[i * D + d] = fmsa_load_f32(gb, dt, off + d);
        }
    }
    for (int64_t j = 0; j < w->sk; ++j) {
        int64_t ko = fmsa_problem_k_offset(p, &p->k, sq, b, j, hk);
        int64_t vo = fmsa_problem_k_offset(p, &p->v, sq, b, j, hk);
        for (int64_t d = 0; d < D; ++d) {
            w->k[j * D + d] = fmsa_load_f32(fmsa_view4_host(&p->k), dt, ko + d);
            w->v[j * D + d] = fmsa_load_f32(fmsa_view4_host(&p->v), dt, vo + d);
        }
    }
    if (p->has_alibi) {
        const float *a = (const float *)fmsa_viewn_host(&p->alibi);
        slope = a[b * p->alibi.s0 + h * p->alibi.s1];
    }

    for (int64_t i = 0; i < w->sq; ++i) {
        float *srow = w->s + i * w->sk, *crow = w->c + i * w->sk, *prow = w->p + i * w->sk;
        const unsigned char *mrow = NULL;
        float m = -INFINITY, l = 0.0f;
        if (p->has_mask)
            mrow = (const unsigned char *)fmsa_viewn_host(&p->mask) + b * p->mask.s0 +
                   h * p->mask.s1 + i * p->mask.s2;
        for (int64_t j = 0; j < w->sk; ++j) {
            float acc = 0.0f, x;
            crow[j] = 0.0f;
            srow[j] = -INFINITY;
            if (!nv_visible(i, j, w->sq, w->sk, p->window_left, p->window_right)) continue;
            if (mrow && ((mrow[j / 8] >> (j % 8)) & 1) == 0) continue;
            for (int64_t d = 0; d < D; ++d) acc += w->q[i * D + d] * w->k[j * D + d];
            x = acc * scale;
            crow[j] = nv_softcap(x, cap);
            x = crow[j];
            if (p->has_alibi) x += nv_alibi(slope, i, j, w->sq, w->sk);
            srow[j] = nv_round(p, x);
            if (srow[j] > m) m = srow[j];
        }
        if (m == -INFINITY) {
            for (int64_t j = 0; j < w->sk; ++j) prow[j] = 0.0f;
            w->lse[i] = -INFINITY;
            continue;
        }
        for (int64_t j = 0; j < w->sk; ++j) {
            prow[j] = expf(srow[j] - m);
            l += prow[j];
        }
        for (int64_t j = 0; j < w->sk; ++j) prow[j] = nv_round(p, prow[j] / l);
        w->lse[i] = m + logf(l);
    }
    return 0;
}

/* Dense layouts of reference.h: [Bq, total_q, Hq, D], [Bk, total_k, Hkv, D], [Bq, Hq, total_q]. */
static int64_t nv_dense_q(const fmsa_problem *p, const fmsa_seq *s, int64_t i, int64_t h) {
    return ((s->q_batch * p->total_q + s->q_row0 + i) * p->heads_q + h) * p->head_dim;
}
static int64_t nv_dense_k(const fmsa_problem *p, const fmsa_seq *s, int64_t j, int64_t hk) {
    return ((s->k_batch * p->total_k + s->k_row0 + j) * p->heads_kv + hk) * p->head_dim;
}
static int64_t nv_batch_q(const fmsa_problem *p) { return p->is_varlen ? 1 : p->batch; }
static int64_t nv_batch_k(const fmsa_problem *p) {
    return p->is_varlen ? 1 : (p->is_paged ? p->num_pages : p->batch);
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

int fmsa_test_naive_forward(const fmsa_problem *p, double *o, double *lse) {
    const int64_t D = p->head_dim, rows = nv_batch_q(p) * p->total_q;
    memset(o, 0, (size_t)(rows * p->heads_q * D) * sizeof(double));
    if (lse)
        for (int64_t n = 0; n < rows * p->heads_q; ++n) lse[n] = -INFINITY;
    for (int64_t b = 0; b < p->batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        for (int64_t h = 0; h < p->heads_q && s.sq > 0; ++h) {
            nv_head w;
            if (nv_head_forward(p, &s, b, h, 0, &w)) {
                nv_head_free(&w);
                return -1;
            }
            for (int64_t i = 0; i < s.sq; ++i) {
                double *orow = o + nv_dense_q(p, &s, i, h);
                /* w.q's row i is no longer needed: reuse it as the fp32 accumulator */
                float *acc = w.q + i * D;
                nv_row_times(acc, w.p + i * s.sk, w.v, s.sk, D);
                for (int64_t d = 0; d < D; ++d) orow[d] = nv_round(p, acc[d]);
                if (lse)
                    lse[(s.q_batch * p->heads_q + h) * p->total_q + s.q_row0 + i] = w.lse[i];
            }
            nv_head_free(&w);
        }
    }
    return 0;
}

/// dS of one head in place of w->s (the scores are no longer needed).
static void nv_head_dscores(const fmsa_problem *p, nv_head *w) {
    const int64_t D = w->D;
    const float cap = p->softcap;
    for (int64_t i = 0; i < w->sq; ++i) {
        float *prow = w->p + i * w->sk, *ds = w->s + i * w->sk, di = 0.0f;
        for (int64_t j = 0; j < w->sk; ++j) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; ++d) acc += w->dout[i * D + d] * w->v[j * D + d];
            ds[j] = nv_round(p, acc); /* dP */
            di += prow[j] * ds[j];
        }
        for (int64_t j = 0; j < w->sk; ++j) {
            ds[j] = nv_round(p, prow[j] * (ds[j] - di));
            if (cap > 0.0f) ds[j] = nv_round(p, ds[j] * nv_softcap_grad(w->c[i * w->sk + j], cap));
        }
    }
}

int fmsa_test_naive_backward(const fmsa_problem *p, double *dq, double *dk, double *dv) {
    const int64_t D = p->head_dim;
    const int64_t nq = nv_batch_q(p) * p->total_q * p->heads_q * D;
    const int64_t nk = nv_batch_k(p) * p->total_k * p->heads_kv * D;
    const float scale = p->softmax_scale;
    float *dk_acc = nv_alloc(nk), *dv_acc = nv_alloc(nk);
    int rc = 0;
    if (!dk_acc || !dv_acc) rc = -1;
    memset(dq, 0, (size_t)nq * sizeof(double));
    for (int64_t n = 0; n < nk && !rc; ++n) dk_acc[n] = dv_acc[n] = 0.0f;

    for (int64_t b = 0; b < p->batch && !rc; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        for (int64_t h = 0; h < p->heads_q && s.sq > 0 && !rc; ++h) {
            const int64_t hk = fmsa_problem_kv_head(p, h);
            nv_head w;
            if (nv_head_forward(p, &s, b, h, 1, &w)) {
                nv_head_free(&w);
                rc = -1;
                break;
            }
            nv_head_dscores(p, &w);
            {
                float *acc = nv_alloc(D);
                if (!acc) rc = -1;
                for (int64_t i = 0; i < s.sq && !rc; ++i) {
                    double *row = dq + nv_dense_q(p, &s, i, h);
                    nv_row_times(acc, w.s + i * s.sk, w.k, s.sk, D);
                    for (int64_t d = 0; d < D; ++d) row[d] = nv_round(p, acc[d] * scale);
                }
                free(acc);
            }
            /* dK_h = dS^T Q and dV_h = P^T dO of this query head, each element
             * summed over i in order, then added to the kv head's fp32 sums */
            {
                float *hk_acc = nv_alloc(s.sk * D), *hv_acc = nv_alloc(s.sk * D);
                if (!hk_acc || !hv_acc) rc = -1;
                for (int64_t n = 0; n < s.sk * D && !rc; ++n) hk_acc[n] = hv_acc[n] = 0.0f;
                for (int64_t i = 0; i < s.sq && !rc; ++i)
                    for (int64_t j = 0; j < s.sk; ++j) {
                        const float ds = w.s[i * s.sk + j], pj = w.p[i * s.sk + j];
                        for (int64_t d = 0; d < D; ++d) {
                            hk_acc[j * D + d] += ds * w.q[i * D + d];
                            hv_acc[j * D + d] += pj * w.dout[i * D + d];
                        }
                    }
                for (int64_t j = 0; j < s.sk && !rc; ++j) {
                    float *gk = dk_acc + nv_dense_k(p, &s, j, hk), *gv = dv_acc + nv_dense_k(p, &s, j, hk);
                    for (int64_t d = 0; d < D; ++d) {
                        gk[d] += hk_acc[j * D + d] * scale;
                        gv[d] += hv_acc[j * D + d];
                    }
                }
                free(hk_acc);
                free(hv_acc);
            }
            nv_head_free(&w);
        }
    }
    for (int64_t n = 0; n < nk && !rc; ++n) {
        dk[n] = nv_round(p, dk_acc[n]);
        dv[n] = nv_round(p, dv_acc[n]);
    }
    free(dk_acc);
    free(dv_acc);
    return rc;
}
