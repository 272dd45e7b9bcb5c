/*
 * The fp64 reference: the oracle every backend is compared against.
 *
 * It is deliberately naive.  Inputs (f32/f16/bf16) are widened to double
 * exactly, every sum and every transcendental is taken in double, and the
 * softmax of a row is computed with all of that row's scores at hand (max
 * first, then exp, then the sum): no tiling, no online rescaling, no exp2
 * folding.  Its own rounding error (~1e-16 relative) is therefore far below
 * that of any fp32 implementation, which is what lets the tests measure a
 * backend's error as |backend - reference|.
 *
 * The semantics are exactly those of the comment in flashmsa.h:
 *   s = scale * q.k;  s = softcap * tanh(s / softcap);  s -= slope * |i + sk - sq - j|;
 *   key j visible iff inside the bottom-right aligned window and its mask bit is 1.
 * Fully masked rows give O = 0, LSE = -inf and contribute zero gradients.
 * Attention sinks add the value-less term exp(t_h) to every row's softmax
 * sum (a row with no visible key then has LSE = t_h); D is the q/k head dim
 * (scores), Dv the value head dim (V, O, dO, dV).
 *
 * Nothing here comes from the kernels' shared headers (fmsa_score.h,
 * fmsa_softmax.h): the visibility rule, ALiBi and softcap are transcribed
 * from flashmsa.h so that a mistake there cannot cancel out.
 *
 * Work is organised per (sequence b, query head h): the key and value rows of
 * that sequence's kv head are gathered once into dense double matrices, then
 * every query row is handled on its own (row functions below).  Memory is
 * O(sk * D) per head plus O(sk) per row.
 */
#include "common/reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/check_rule.h"
#include "common/fmsa_half.h"

/* ------------------------------------------------------------------------ */
/* Reading inputs                                                           */
/* ------------------------------------------------------------------------ */

/// Element idx (relative to the view's origin) of a q/k/v/o/dout view as double.
static double ref_load(const fmsa_problem *p, const fmsa_view4 *v, int64_t idx) {
    return (double)fmsa_load_f32(fmsa_view4_host(v), (int)p->dtype, idx);
}

/// One row of n elements of a view into a double array (n = D for q/k/dq/dk, Dv otherwise).
static void ref_load_row(const fmsa_problem *p, const fmsa_view4 *v, int64_t off, double *dst,
                         int64_t n) {
    for (int64_t d = 0; d < n; ++d) dst[d] = ref_load(p, v, off + d);
}

/// The sink logit t_h of query head h (-inf when there are no sinks: exp(-inf) = 0).
static double ref_sink(const fmsa_problem *p, int64_t h) {
    if (!p->has_sinks) return -INFINITY;
    return (double)((const float *)fmsa_viewn_host(&p->sinks))[h * p->sinks.s0];
}

/// dlse of row i of head h (0 without dlse): the backward uses D_i - dlse_i.
static double ref_dlse(const fmsa_problem *p, const fmsa_seq *s, int64_t i, int64_t h) {
    if (!p->has_dlse) return 0.0;
    return (double)((const float *)fmsa_viewn_host(&p->dlse))[fmsa_problem_dlse_offset(p, s, i, h)];
}

/// The K and V rows of one sequence and one kv head, densely as [sk][D] and [sk][Dv] doubles.
typedef struct ref_kv {
    double *k; ///< sk * D
    double *v; ///< sk * Dv
} ref_kv;

static void ref_kv_free(ref_kv *kv) {
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

/// Gathers K and V of sequence b, kv head hk (following the block table when paged).
static fmsa_status ref_kv_load(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t hk,
                               ref_kv *kv) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    /* +1 so that an empty sequence still gets a valid (unused) allocation */
    size_t n = (size_t)(s->sk * D + 1), nv = (size_t)(s->sk * Dv + 1);
    kv->k = (double *)malloc(n * sizeof(double));
    kv->v = (double *)malloc(nv * sizeof(double));
    if (!kv->k || !kv->v) {
        ref_kv_free(kv);
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "reference: %zu bytes for K/V of one head",
                         (n + nv) * sizeof(double));
    }
    for (int64_t j = 0; j < s->sk; ++j) {
        ref_load_row(p, &p->k, fmsa_problem_k_offset(p, &p->k, s, b, j, hk), kv->k + j * D, D);
        ref_load_row(p, &p->v, fmsa_problem_k_offset(p, &p->v, s, b, j, hk), kv->v + j * Dv,
                     Dv);
    }
    return FMSA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Scores and probabilities of one query row                                */
/* ------------------------------------------------------------------------ */

/// True when key j is visible to query row i of sequence b, head h, written
/// out from the definition in flashmsa.h rather than taken from fmsa_score.h:
/// the kernels share that header, so an oracle built on it could not see a
/// mistake in it.  The mask is indexed by sequence, query head and the row
/// within the sequence; stride 0 broadcasts.
static int ref_visible(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t h, int64_t i,
                       int64_t j) {
    const int64_t diag = i + s->sk - s->sq; /* bottom-right aligned diagonal */
    if (p->window_left >= 0 && j < diag - p->window_left) return 0;
    if (p->window_right >= 0 && j > diag + p->window_right) return 0;
    if (p->has_mask) {
        const unsigned char *row = (const unsigned char *)fmsa_viewn_host(&p->mask) +
                                   b * p->mask.s0 + h * p->mask.s1 + i * p->mask.s2;
        if (((row[j / 8] >> (j % 8)) & 1) == 0) return 0;
    }
    return 1;
}

/// ALiBi slope of (sequence b, head h); alibi.s0 = 0 for a [Hq] tensor.
static double ref_alibi_slope(const fmsa_problem *p, int64_t b, int64_t h) {
    const float *a = (const float *)fmsa_viewn_host(&p->alibi);
    return (double)a[b * p->alibi.s0 + h * p->alibi.s1];
}

/// What the row computations leave behind for one query row.
typedef struct ref_row {
    double *raw;  ///< [sk] scale * q.k before softcap (needed by the softcap chain rule)
    double *prob; ///< [sk] softmax probabilities; exactly 0 for masked keys
    double lse;   ///< natural-log LSE (with the sink term); -inf when nothing is visible and no sink
    double psink; ///< exp(t_h - lse): the sink's share of the row (0 without sinks)
    int any;      ///< at least one key visible
} ref_row;

/// Scores of row i (q_row, D doubles) against every key, then the softmax.
/// The maximum is taken over visible keys (and the sink logit) first so exp
/// never overflows and the sum is at least 1; a row with no visible key
/// yields prob = 0 and lse = t_h (-inf without sinks).  The sink term is
/// added after the keys' sum so that without sinks nothing changes.
static void ref_row_softmax(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t h,
                           int64_t i, const double *q_row, const ref_kv *kv, ref_row *r) {
    const int64_t D = p->head_dim;
    const double scale = (double)p->softmax_scale;
    const double cap = (double)p->softcap;
    const double slope = p->has_alibi ? ref_alibi_slope(p, b, h) : 0.0;
    const double t = ref_sink(p, h);
    double m = -INFINITY;
    double l = 0.0;

    for (int64_t j = 0; j < s->sk; ++j) {
        double dot = 0.0, score;
        r->prob[j] = -INFINITY; /* holds the score until normalised below */
        r->raw[j] = 0.0;
        if (!ref_visible(p, s, b, h, i, j)) continue;
        for (int64_t d = 0; d < D; ++d) dot += q_row[d] * kv->k[j * D + d];
        r->raw[j] = scale * dot;
        score = cap > 0.0 ? cap * tanh(r->raw[j] / cap) : r->raw[j];
        if (p->has_alibi) {
            int64_t dist = i + s->sk - s->sq - j;
            score -= slope * (double)(dist < 0 ? -dist : dist);
        }
        r->prob[j] = score;
        if (score > m) m = score;
    }

    r->any = m > -INFINITY;
    if (!r->any) {
        for (int64_t j = 0; j < s->sk; ++j) r->prob[j] = 0.0;
        r->lse = t; /* log exp(t_h): the sink alone; -inf without sinks */
        r->psink = t > -INFINITY ? 1.0 : 0.0;
        return;
    }
    if (t > m) m = t;
    for (int64_t j = 0; j < s->sk; ++j) {
        /* exp(-inf - m) = 0 exactly for masked keys */
        r->prob[j] = exp(r->prob[j] - m);
        l += r->prob[j];
    }
    if (t > -INFINITY) l += exp(t - m);
    for (int64_t j = 0; j < s->sk; ++j) r->prob[j] /= l;
    r->lse = m + log(l);
    r->psink = t > -INFINITY ? exp(t - r->lse) : 0.0;
}

/// o_row = sum_j P_j V_j (zero for a fully masked row, since every P_j is 0).
static void ref_row_output(const fmsa_problem *p, const fmsa_seq *s, const ref_kv *kv,
                           const ref_row *r, double *o_row) {
    const int64_t Dv = p->head_dim_v;
    for (int64_t d = 0; d < Dv; ++d) o_row[d] = 0.0;
    for (int64_t j = 0; j < s->sk; ++j) {
        if (r->prob[j] == 0.0) continue;
        for (int64_t d = 0; d < Dv; ++d) o_row[d] += r->prob[j] * kv->v[j * Dv + d];
    }
}

/// Scratch for one row: raw scores, probabilities, dP, and D-length vectors.
typedef struct ref_scratch {
    ref_row row;
    double *dp;   ///< [sk] dO . V_j, then reused as dS_raw
    double *q;    ///< [D] query row
    double *o;    ///< [Dv] output row
    double *dout; ///< [Dv] upstream gradient row
    double di;    ///< backward: D_i - dlse_i of the last row (rowsum(dO * O) - dlse_i)
} ref_scratch;

static void ref_scratch_free(ref_scratch *w) {
    free(w->row.raw);
    free(w->row.prob);
    free(w->dp);
    free(w->q);
    memset(w, 0, sizeof *w);
}

static fmsa_status ref_scratch_alloc(const fmsa_problem *p, int64_t sk, ref_scratch *w) {
    size_t nk = (size_t)sk + 1, nd = (size_t)p->head_dim, ndv = (size_t)p->head_dim_v;
    memset(w, 0, sizeof *w);
    w->row.raw = (double *)malloc(nk * sizeof(double));
    w->row.prob = (double *)malloc(nk * sizeof(double));
    w->dp = (double *)malloc(nk * sizeof(double));
    w->q = (double *)malloc((nd + 2 * ndv) * sizeof(double)); /* q, o, dout share one block */
    if (!w->row.raw || !w->row.prob || !w->dp || !w->q) {
        ref_scratch_free(w);
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "reference: scratch for a row of %lld keys",
                         (long long)sk);
    }
    w->o = w->q + nd;
    w->dout = w->o + ndv;
    return FMSA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Dense output layout (reference.h)                                        */
/* ------------------------------------------------------------------------ */

/// Rows of q along dim 1 as the dense outputs lay them out.
static int64_t ref_rows_q(const fmsa_problem *p) {
    return p->is_varlen ? p->total_q : p->seqlen_q;
}

/// Rows of k along dim 1 (dk/dv; paged KV has no backward).
static int64_t ref_rows_k(const fmsa_problem *p) {
    return p->is_varlen ? p->total_k : p->seqlen_k;
}

/// Batch extent of q (1 when varlen).
static int64_t ref_batch_q(const fmsa_problem *p) { return p->is_varlen ? 1 : p->batch; }

/// Row (i, h) of a q-shaped dense array whose rows hold n doubles (D for dq, Dv for o).
static int64_t ref_dense_q(const fmsa_problem *p, const fmsa_seq *s, int64_t i, int64_t h,
                           int64_t n) {
    return ((s->q_batch * ref_rows_q(p) + s->q_row0 + i) * p->heads_q + h) * n;
}

/// Row (j, hk) of a k-shaped dense array whose rows hold n doubles (D for dk, Dv for dv).
static int64_t ref_dense_k(const fmsa_problem *p, const fmsa_seq *s, int64_t j, int64_t hk,
                           int64_t n) {
    return ((s->k_batch * ref_rows_k(p) + s->k_row0 + j) * p->heads_kv + hk) * n;
}

static int64_t ref_dense_lse(const fmsa_problem *p, const fmsa_seq *s, int64_t i, int64_t h) {
    return (s->q_batch * p->heads_q + h) * ref_rows_q(p) + s->q_row0 + i;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

/// Forward of every row of (sequence b, head h) with K/V already gathered.
static void ref_forward_head(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t h,
                             const ref_kv *kv, ref_scratch *w, double *o, double *lse) {
    for (int64_t i = 0; i < s->sq; ++i) {
        ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, s, i, h), w->q, p->head_dim);
        ref_row_softmax(p, s, b, h, i, w->q, kv, &w->row);
        ref_row_output(p, s, kv, &w->row, o + ref_dense_q(p, s, i, h, p->head_dim_v));
        if (lse) lse[ref_dense_lse(p, s, i, h)] = w->row.lse;
    }
}

fmsa_status fmsa_reference_forward(const fmsa_problem *p, double *o, double *lse) {
    const int64_t rows = ref_batch_q(p) * ref_rows_q(p);
    /* Rows no sequence covers cannot exist (cu_seqlens spans 0..total), but
     * start from zeros anyway so the arrays are fully defined. */
    memset(o, 0, (size_t)(rows * p->heads_q * p->head_dim_v) * sizeof(double));
    if (lse)
        for (int64_t n = 0; n < rows * p->heads_q; ++n) lse[n] = -INFINITY;

    for (int64_t b = 0; b < p->batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        if (s.sq == 0) continue;
        for (int64_t h = 0; h < p->heads_q; ++h) {
            ref_kv kv;
            ref_scratch w;
            FMSA_TRY(ref_kv_load(p, &s, b, fmsa_problem_kv_head(p, h), &kv));
            if (ref_scratch_alloc(p, s.sk, &w) != FMSA_SUCCESS) {
                ref_kv_free(&kv);
                return FMSA_ERR_OUT_OF_MEMORY;
            }
            ref_forward_head(p, &s, b, h, &kv, &w, o, lse);
            ref_scratch_free(&w);
            ref_kv_free(&kv);
        }
    }
    return FMSA_SUCCESS;
}

/* The keys/values and scratch one row of sequence b, head h needs (the row
 * functions' common setup); on failure nothing is left allocated. */
static fmsa_status ref_row_begin(const fmsa_problem *p, int64_t b, int64_t h, fmsa_seq *s,
                                 ref_kv *kv, ref_scratch *w) {
    *s = fmsa_problem_seq(p, b);
    FMSA_TRY(ref_kv_load(p, s, b, fmsa_problem_kv_head(p, h), kv));
    if (ref_scratch_alloc(p, s->sk, w) != FMSA_SUCCESS) {
        ref_kv_free(kv);
        return FMSA_ERR_OUT_OF_MEMORY;
    }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_reference_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                                       double *o_row, double *lse) {
    fmsa_seq s;
    ref_kv kv;
    ref_scratch w;
    FMSA_TRY(ref_row_begin(p, b, h, &s, &kv, &w));
    ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, &s, i, h), w.q, p->head_dim);
    ref_row_softmax(p, &s, b, h, i, w.q, &kv, &w.row);
    ref_row_output(p, &s, &kv, &w.row, o_row);
    if (lse) *lse = w.row.lse;
    ref_scratch_free(&w);
    ref_kv_free(&kv);
    return FMSA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * For one query row with probabilities P_j (recomputed above in fp64, so the
 * gradients are those of the fp64 forward, independent of any backend):
 *   O      = sum_j P_j V_j
 *   dP_j   = dO . V_j
 *   Di     = dO . O - dlse_i   (dO . O = sum_j P_j dP_j; dlse_i = 0 without dlse)
 *   dS_j   = P_j (dP_j - Di)   gradient w.r.t. the final score
 *   dsink  = -P_sink Di        the sink's score gradient (its dP is 0: no value)
 *   dR_j   = dS_j * (1 - tanh^2(raw_j / softcap))   through the softcap (ALiBi
 *            is an additive constant and the mask a selection: no factor)
 *   dQ    += scale * dR_j K_j,   dK_j += scale * dR_j Q,   dV_j += P_j dO
 * Masked keys have P_j = 0, hence dS_j = 0: fully masked rows add nothing.
 * dR is left in w->dp.
 */
static void ref_row_dscores(const fmsa_problem *p, const fmsa_seq *s, int64_t h, int64_t i,
                            const ref_kv *kv, ref_scratch *w) {
    const int64_t Dv = p->head_dim_v;
    const double cap = (double)p->softcap;
    double di = 0.0;
    ref_row_output(p, s, kv, &w->row, w->o);
    for (int64_t d = 0; d < Dv; ++d) di += w->dout[d] * w->o[d];
    if (p->has_dlse) di -= ref_dlse(p, s, i, h);
    w->di = di;
    for (int64_t j = 0; j < s->sk; ++j) {
        double dp = 0.0, ds;
        if (w->row.prob[j] == 0.0) {
            w->dp[j] = 0.0;
            continue;
        }
        for (int64_t d = 0; d < Dv; ++d) dp += w->dout[d] * kv->v[j * Dv + d];
        ds = w->row.prob[j] * (dp - di);
        if (cap > 0.0) {
            double t = tanh(w->row.raw[j] / cap);
            ds *= 1.0 - t * t;
        }
        w->dp[j] = ds;
    }
}

/// Loads q and dout of row i, recomputes its softmax and dR (in w->dp).
static void ref_row_backward(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t h,
                             int64_t i, const ref_kv *kv, ref_scratch *w) {
    ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, s, i, h), w->q, p->head_dim);
    ref_load_row(p, &p->dout, fmsa_problem_q_offset(&p->dout, s, i, h), w->dout,
                 p->head_dim_v);
    ref_row_softmax(p, s, b, h, i, w->q, kv, &w->row);
    ref_row_dscores(p, s, h, i, kv, w);
}

/// dq_row = scale * sum_j dR_j K_j.
static void ref_row_dq(const fmsa_problem *p, const fmsa_seq *s, const ref_kv *kv,
                       const ref_scratch *w, double *dq_row) {
    const int64_t D = p->head_dim;
    const double scale = (double)p->softmax_scale;
    for (int64_t d = 0; d < D; ++d) dq_row[d] = 0.0;
    for (int64_t j = 0; j < s->sk; ++j) {
        if (w->dp[j] == 0.0) continue;
        for (int64_t d = 0; d < D; ++d) dq_row[d] += w->dp[j] * kv->k[j * D + d];
    }
    for (int64_t d = 0; d < D; ++d) dq_row[d] *= scale;
}

/// Adds row i's dK/dV terms (scale dR_j q, P_j dO) to the dense sums of kv head hk.
static void ref_row_dkdv(const fmsa_problem *p, const fmsa_seq *s, int64_t hk,
                         const ref_scratch *w, double *dk, double *dv) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    const double scale = (double)p->softmax_scale;
    for (int64_t j = 0; j < s->sk; ++j) {
        double *dk_row = dk + ref_dense_k(p, s, j, hk, D);
        double *dv_row = dv + ref_dense_k(p, s, j, hk, Dv);
        const double dr = w->dp[j] * scale, pj = w->row.prob[j];
        if (pj == 0.0) continue;
        for (int64_t d = 0; d < D; ++d) dk_row[d] += dr * w->q[d];
        for (int64_t d = 0; d < Dv; ++d) dv_row[d] += pj * w->dout[d];
    }
}

/*
 * The whole backward; any of dq/dk/dv (all three or none) and dsink may be
 * NULL.  dsink_h = -sum_{b,i} P_sink (D_i - dlse_i): a row with no visible
 * key has P_sink = 1 and D_i = 0 (O = 0), so it adds dlse_i, the gradient of
 * its lse = t_h; with t_h = -inf every term is 0.
 */
static fmsa_status ref_backward(const fmsa_problem *p, double *dq, double *dk, double *dv,
                                double *dsink) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    const size_t nq = (size_t)(ref_batch_q(p) * ref_rows_q(p) * p->heads_q * D);
    const size_t nk = (size_t)((p->is_varlen ? 1 : p->batch) * ref_rows_k(p) * p->heads_kv);
    if (dq) {
        memset(dq, 0, nq * sizeof(double));
        /* dK/dV accumulate over the query heads of each kv head (GQA), so they
         * must start at zero; keys no query sees keep a zero gradient. */
        memset(dk, 0, nk * (size_t)D * sizeof(double));
        memset(dv, 0, nk * (size_t)Dv * sizeof(double));
    }
    if (dsink)
        for (int64_t h = 0; h < p->heads_q; ++h) dsink[h] = 0.0;

    for (int64_t b = 0; b < p->batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        if (s.sq == 0) continue;
        /* no key: all-zero dq/dk/dv; only a sink's gradient can be non-zero */
        if (s.sk == 0 && !(dsink && p->has_sinks)) continue;
        for (int64_t h = 0; h < p->heads_q; ++h) {
            const int64_t hk = fmsa_problem_kv_head(p, h);
            ref_kv kv;
            ref_scratch w;
            FMSA_TRY(ref_kv_load(p, &s, b, hk, &kv));
            if (ref_scratch_alloc(p, s.sk, &w) != FMSA_SUCCESS) {
                ref_kv_free(&kv);
                return FMSA_ERR_OUT_OF_MEMORY;
            }
            for (int64_t i = 0; i < s.sq; ++i) {
                ref_row_backward(p, &s, b, h, i, &kv, &w);
                if (dsink) dsink[h] -= w.row.psink * w.di;
                if (!w.row.any || !dq) continue;
                ref_row_dq(p, &s, &kv, &w, dq + ref_dense_q(p, &s, i, h, D));
                ref_row_dkdv(p, &s, hk, &w, dk, dv);
            }
            ref_scratch_free(&w);
            ref_kv_free(&kv);
        }
    }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_reference_backward(const fmsa_problem *p, double *dq, double *dk, double *dv) {
    return ref_backward(p, dq, dk, dv, NULL);
}

fmsa_status fmsa_reference_dsink(const fmsa_problem *p, double *dsink) {
    return ref_backward(p, NULL, NULL, NULL, dsink);
}

fmsa_status fmsa_reference_dsink_floor(const fmsa_problem *p, double *dsink_x) {
    const double u = fmsa_rule_unit_roundoff(p->dtype);
    const float *lse = (const float *)fmsa_viewn_host(&p->lse);
    for (int64_t h = 0; h < p->heads_q; ++h) dsink_x[h] = 0.0;
    if (!p->has_sinks) return FMSA_SUCCESS;
    for (int64_t b = 0; b < p->batch; ++b) {
        const fmsa_seq s = fmsa_problem_seq(p, b);
        for (int64_t h = 0; h < p->heads_q; ++h)
            for (int64_t i = 0; i < s.sq; ++i) {
                const double l = (double)lse[fmsa_problem_lse_offset(p, &s, i, h)];
                const int64_t oo = fmsa_problem_q_offset(&p->o, &s, i, h);
                const int64_t od = fmsa_problem_q_offset(&p->dout, &s, i, h);
                double n = 0.0;
                if (isnan(l)) continue; /* the check itself fails such a run */
                for (int64_t d = 0; d < p->head_dim_v; ++d)
                    n += fabs(ref_load(p, &p->dout, od + d)) * fabs(ref_load(p, &p->o, oo + d));
                dsink_x[h] += u * exp(ref_sink(p, h) - l) * n;
            }
    }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_reference_backward_dq_row(const fmsa_problem *p, int64_t b, int64_t h,
                                           int64_t i, double *dq_row) {
    fmsa_seq s;
    ref_kv kv;
    ref_scratch w;
    FMSA_TRY(ref_row_begin(p, b, h, &s, &kv, &w));
    ref_row_backward(p, &s, b, h, i, &kv, &w);
    ref_row_dq(p, &s, &kv, &w, dq_row); /* all zero for a fully masked row */
    ref_scratch_free(&w);
    ref_kv_free(&kv);
    return FMSA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Merge of two partial states                                              */
/* ------------------------------------------------------------------------ */

static double ref_merge_lse_at(const fmsa_viewn *v, int64_t b, int64_t h, int64_t i) {
    return (double)((const float *)fmsa_viewn_host(v))[b * v->s0 + h * v->s1 + i * v->s2];
}

/*
 * In fp64 from the definition in flashmsa.h, not from fmsa_softmax.h's merge
 * (which the backends share): lse = log(exp(lse_a) + exp(lse_b)) taken about
 * the larger of the two, o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b with
 * a -inf side skipped (its row is never read, so it may hold anything).
 */
fmsa_status fmsa_reference_merge(const fmsa_merge_problem *mp, double *o, double *lse) {
    const int64_t Dv = mp->head_dim_v;
    for (int64_t b = 0; b < mp->batch; ++b)
        for (int64_t i = 0; i < mp->seqlen; ++i)
            for (int64_t h = 0; h < mp->heads; ++h) {
                const double la = ref_merge_lse_at(&mp->lse_a, b, h, i);
                const double lb = ref_merge_lse_at(&mp->lse_b, b, h, i);
                const double m = la > lb ? la : lb;
                double *orow = o + ((b * mp->seqlen + i) * mp->heads + h) * Dv;
                const char *oa = fmsa_view4_host(&mp->o_a), *ob = fmsa_view4_host(&mp->o_b);
                const int64_t ia = b * mp->o_a.sb + i * mp->o_a.ss + h * mp->o_a.sh;
                const int64_t ib = b * mp->o_b.sb + i * mp->o_b.ss + h * mp->o_b.sh;
                double ea, eb, l;
                lse[(b * mp->heads + h) * mp->seqlen + i] = -INFINITY;
                for (int64_t d = 0; d < Dv; ++d) orow[d] = 0.0;
                if (m == -INFINITY) continue; /* neither side saw a key */
                ea = la == -INFINITY ? 0.0 : exp(la - m);
                eb = lb == -INFINITY ? 0.0 : exp(lb - m);
                l = ea + eb;
                lse[(b * mp->heads + h) * mp->seqlen + i] = m + log(l);
                for (int64_t d = 0; d < Dv; ++d) {
                    if (ea != 0.0)
                        orow[d] += ea / l * (double)fmsa_load_f32(oa, (int)mp->dtype_a, ia + d);
                    if (eb != 0.0)
                        orow[d] += eb / l * (double)fmsa_load_f32(ob, (int)mp->dtype_b, ib + d);
                }
            }
    return FMSA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Single-key rows, for the correctness rule's part (c)                     */
/* ------------------------------------------------------------------------ */

fmsa_status fmsa_reference_single_key_floor(const fmsa_problem *p, double *dq_x, double *dk_x,
                                            double *dv_x) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    const size_t nq = (size_t)(ref_batch_q(p) * ref_rows_q(p) * p->heads_q * D);
    const size_t nk = (size_t)((p->is_varlen ? 1 : p->batch) * ref_rows_k(p) * p->heads_kv);
    const double scale = (double)p->softmax_scale;
    memset(dq_x, 0, nq * sizeof(double));
    memset(dk_x, 0, nk * (size_t)D * sizeof(double));
    memset(dv_x, 0, nk * (size_t)Dv * sizeof(double));
    for (int64_t b = 0; b < p->batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        if (s.sq == 0 || s.sk == 0) continue;
        for (int64_t h = 0; h < p->heads_q; ++h) {
            const int64_t hk = fmsa_problem_kv_head(p, h);
            ref_kv kv;
            ref_scratch w;
            FMSA_TRY(ref_kv_load(p, &s, b, hk, &kv));
            if (ref_scratch_alloc(p, s.sk, &w) != FMSA_SUCCESS) {
                ref_kv_free(&kv);
                return FMSA_ERR_OUT_OF_MEMORY;
            }
            for (int64_t i = 0; i < s.sq; ++i) {
                int64_t j = -1, seen = 0;
                double dot = 0.0, dd = 0.0, eps, delta;
                for (int64_t t = 0; t < s.sk && seen < 2; ++t)
                    if (ref_visible(p, &s, b, h, i, t)) j = t, ++seen;
                if (seen != 1) continue;
                ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, &s, i, h), w.q, D);
                ref_load_row(p, &p->o, fmsa_problem_q_offset(&p->o, &s, i, h), w.o, Dv);
                ref_load_row(p, &p->dout, fmsa_problem_q_offset(&p->dout, &s, i, h), w.dout, Dv);
                for (int64_t d = 0; d < D; ++d) dot += fabs(w.q[d] * kv.k[j * D + d]);
                for (int64_t d = 0; d < Dv; ++d)
                    dd += fabs(w.dout[d]) * (fabs(kv.v[j * Dv + d]) + fabs(w.o[d]));
                fmsa_rule_single_key_terms(Dv > D ? Dv : D, scale * dot, dd, &eps, &delta);
                {
                    double *xq = dq_x + ref_dense_q(p, &s, i, h, D);
                    double *xk = dk_x + ref_dense_k(p, &s, j, hk, D);
                    double *xv = dv_x + ref_dense_k(p, &s, j, hk, Dv);
                    for (int64_t d = 0; d < D; ++d) {
                        xq[d] += delta * scale * fabs(kv.k[j * D + d]);
                        xk[d] += delta * scale * fabs(w.q[d]);
                    }
                    for (int64_t d = 0; d < Dv; ++d) xv[d] += eps * fabs(w.dout[d]);
                }
            }
            ref_scratch_free(&w);
            ref_kv_free(&kv);
        }
    }
    return FMSA_SUCCESS;
}

