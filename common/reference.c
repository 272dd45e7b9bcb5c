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

/// One row of D elements of a view into a double array.
static void ref_load_row(const fmsa_problem *p, const fmsa_view4 *v, int64_t off, double *dst) {
    for (int64_t d = 0; d < p->head_dim; ++d) dst[d] = ref_load(p, v, off + d);
}

/// The K and V rows of one sequence and one kv head, densely as [sk][D] doubles.
typedef struct ref_kv {
    double *k; ///< sk * D
    double *v; ///< sk * D
} ref_kv;

static void ref_kv_free(ref_kv *kv) {
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

/// Gathers K and V of sequence b, kv head hk (following the block table when paged).
static fmsa_status ref_kv_load(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t hk,
                               ref_kv *kv) {
    const int64_t D = p->head_dim;
    /* +1 so that an empty sequence still gets a valid (unused) allocation */
    size_t n = (size_t)(s->sk * D + 1);
    kv->k = (double *)malloc(n * sizeof(double));
    kv->v = (double *)malloc(n * sizeof(double));
    if (!kv->k || !kv->v) {
        ref_kv_free(kv);
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "reference: %zu bytes for K/V of one head",
                         2 * n * sizeof(double));
    }
    for (int64_t j = 0; j < s->sk; ++j) {
        ref_load_row(p, &p->k, fmsa_problem_k_offset(p, &p->k, s, b, j, hk), kv->k + j * D);
        ref_load_row(p, &p->v, fmsa_problem_k_offset(p, &p->v, s, b, j, hk), kv->v + j * D);
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
    double lse;   ///< natural-log LSE, -inf when nothing is visible
    int any;      ///< at least one key visible
} ref_row;

/// Scores of row i (q_row, D doubles) against every key, then the softmax.
/// The maximum is taken over visible keys first so exp never overflows and
/// the sum is at least 1; a row with no visible key yields prob = 0, lse = -inf.
static void ref_row_softmax(const fmsa_problem *p, const fmsa_seq *s, int64_t b, int64_t h,
                           int64_t i, const double *q_row, const ref_kv *kv, ref_row *r) {
    const int64_t D = p->head_dim;
    const double scale = (double)p->softmax_scale;
    const double cap = (double)p->softcap;
    const double slope = p->has_alibi ? ref_alibi_slope(p, b, h) : 0.0;
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
        r->lse = -INFINITY;
        return;
    }
    for (int64_t j = 0; j < s->sk; ++j) {
        /* exp(-inf - m) = 0 exactly for masked keys */
        r->prob[j] = exp(r->prob[j] - m);
        l += r->prob[j];
    }
    for (int64_t j = 0; j < s->sk; ++j) r->prob[j] /= l;
    r->lse = m + log(l);
}

/// o_row = sum_j P_j V_j (zero for a fully masked row, since every P_j is 0).
static void ref_row_output(const fmsa_problem *p, const fmsa_seq *s, const ref_kv *kv,
                           const ref_row *r, double *o_row) {
    const int64_t D = p->head_dim;
    for (int64_t d = 0; d < D; ++d) o_row[d] = 0.0;
    for (int64_t j = 0; j < s->sk; ++j) {
        if (r->prob[j] == 0.0) continue;
        for (int64_t d = 0; d < D; ++d) o_row[d] += r->prob[j] * kv->v[j * D + d];
    }
}

/// Scratch for one row: raw scores, probabilities, dP, and D-length vectors.
typedef struct ref_scratch {
    ref_row row;
    double *dp;   ///< [sk] dO . V_j, then reused as dS_raw
    double *q;    ///< [D] query row
    double *o;    ///< [D] output row
    double *dout; ///< [D] upstream gradient row
} ref_scratch;

static void ref_scratch_free(ref_scratch *w) {
    free(w->row.raw);
    free(w->row.prob);
    free(w->dp);
    free(w->q);
    memset(w, 0, sizeof *w);
}

static fmsa_status ref_scratch_alloc(const fmsa_problem *p, int64_t sk, ref_scratch *w) {
    size_t nk = (size_t)sk + 1, nd = (size_t)p->head_dim;
    memset(w, 0, sizeof *w);
    w->row.raw = (double *)malloc(nk * sizeof(double));
    w->row.prob = (double *)malloc(nk * sizeof(double));
    w->dp = (double *)malloc(nk * sizeof(double));
    w->q = (double *)malloc(3 * nd * sizeof(double)); /* q, o, dout share one block */
    if (!w->row.raw || !w->row.prob || !w->dp || !w->q) {
        ref_scratch_free(w);
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "reference: scratch for a row of %lld keys",
                         (long long)sk);
    }
    w->o = w->q + nd;
    w->dout = w->o + nd;
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

static int64_t ref_dense_q(const fmsa_problem *p, const fmsa_seq *s, int64_t i, int64_t h) {
    return ((s->q_batch * ref_rows_q(p) + s->q_row0 + i) * p->heads_q + h) * p->head_dim;
}

static int64_t ref_dense_k(const fmsa_problem *p, const fmsa_seq *s, int64_t j, int64_t hk) {
    return ((s->k_batch * ref_rows_k(p) + s->k_row0 + j) * p->heads_kv + hk) * p->head_dim;
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
        ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, s, i, h), w->q);
        ref_row_softmax(p, s, b, h, i, w->q, kv, &w->row);
        ref_row_output(p, s, kv, &w->row, o + ref_dense_q(p, s, i, h));
        if (lse) lse[ref_dense_lse(p, s, i, h)] = w->row.lse;
    }
}

fmsa_status fmsa_reference_forward(const fmsa_problem *p, double *o, double *lse) {
    const int64_t rows = ref_batch_q(p) * ref_rows_q(p);
    /* Rows no sequence covers cannot exist (cu_seqlens spans 0..total), but
     * start from zeros anyway so the arrays are fully defined. */
    memset(o, 0, (size_t)(rows * p->heads_q * p->head_dim) * sizeof(double));
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
    ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, &s, i, h), w.q);
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
 *   Di     = dO . O            (= sum_j P_j dP_j)
 *   dS_j   = P_j (dP_j - Di)   gradient w.r.t. the final score
 *   dR_j   = dS_j * (1 - tanh^2(raw_j / softcap))   through the softcap (ALiBi
 *            is an additive constant and the mask a selection: no factor)
 *   dQ    += scale * dR_j K_j,   dK_j += scale * dR_j Q,   dV_j += P_j dO
 * Masked keys have P_j = 0, hence dS_j = 0: fully masked rows add nothing.
 * dR is left in w->dp.
 */
static void ref_row_dscores(const fmsa_problem *p, const fmsa_seq *s, const ref_kv *kv,
                            ref_scratch *w) {
    const int64_t D = p->head_dim;
    const double cap = (double)p->softcap;
    double di = 0.0;
    ref_row_output(p, s, kv, &w->row, w->o);
    for (int64_t d = 0; d < D; ++d) di += w->dout[d] * w->o[d];
    for (int64_t j = 0; j < s->sk; ++j) {
        double dp = 0.0, ds;
        if (w->row.prob[j] == 0.0) {
            w->dp[j] = 0.0;
            continue;
        }
        for (int64_t d = 0; d < D; ++d) dp += w->dout[d] * kv->v[j * D + d];
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
    ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, s, i, h), w->q);
    ref_load_row(p, &p->dout, fmsa_problem_q_offset(&p->dout, s, i, h), w->dout);
    ref_row_softmax(p, s, b, h, i, w->q, kv, &w->row);
    ref_row_dscores(p, s, kv, w);
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

fmsa_status fmsa_reference_backward(const fmsa_problem *p, double *dq, double *dk, double *dv) {
    const int64_t D = p->head_dim;
    const double scale = (double)p->softmax_scale;
    const size_t nq = (size_t)(ref_batch_q(p) * ref_rows_q(p) * p->heads_q * D);
    const size_t nk = (size_t)((p->is_varlen ? 1 : p->batch) * ref_rows_k(p) * p->heads_kv * D);
    memset(dq, 0, nq * sizeof(double));
    /* dK/dV accumulate over the query heads of each kv head (GQA), so they
     * must start at zero; keys no query sees keep a zero gradient. */
    memset(dk, 0, nk * sizeof(double));
    memset(dv, 0, nk * sizeof(double));

    for (int64_t b = 0; b < p->batch; ++b) {
        fmsa_seq s = fmsa_problem_seq(p, b);
        if (s.sq == 0 || s.sk == 0) continue; /* nothing visible: all-zero gradients */
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
                if (!w.row.any) continue;
                ref_row_dq(p, &s, &kv, &w, dq + ref_dense_q(p, &s, i, h));
                for (int64_t j = 0; j < s.sk; ++j) {
                    double *dk_row = dk + ref_dense_k(p, &s, j, hk);
                    double *dv_row = dv + ref_dense_k(p, &s, j, hk);
                    const double dr = w.dp[j] * scale, pj = w.row.prob[j];
                    if (pj == 0.0) continue;
                    for (int64_t d = 0; d < D; ++d) {
                        dk_row[d] += dr * w.q[d];
                        dv_row[d] += pj * w.dout[d];
                    }
                }
            }
            ref_scratch_free(&w);
            ref_kv_free(&kv);
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
/* Single-key rows, for the correctness rule's part (c)                     */
/* ------------------------------------------------------------------------ */

fmsa_status fmsa_reference_single_key_floor(const fmsa_problem *p, double *dq_x, double *dk_x,
                                            double *dv_x) {
    const int64_t D = p->head_dim;
    const size_t nq = (size_t)((p->is_varlen ? 1 : p->batch) * p->total_q * p->heads_q * D);
    const size_t nk = (size_t)((p->is_varlen ? 1 : p->batch) * ref_rows_k(p) * p->heads_kv * D);
    const double scale = (double)p->softmax_scale;
    memset(dq_x, 0, nq * sizeof(double));
    memset(dk_x, 0, nk * sizeof(double));
    memset(dv_x, 0, nk * sizeof(double));
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
                ref_load_row(p, &p->q, fmsa_problem_q_offset(&p->q, &s, i, h), w.q);
                ref_load_row(p, &p->o, fmsa_problem_q_offset(&p->o, &s, i, h), w.o);
                ref_load_row(p, &p->dout, fmsa_problem_q_offset(&p->dout, &s, i, h), w.dout);
                for (int64_t d = 0; d < D; ++d) {
                    dot += fabs(w.q[d] * kv.k[j * D + d]);
                    dd += fabs(w.dout[d]) * (fabs(kv.v[j * D + d]) + fabs(w.o[d]));
                }
                fmsa_rule_single_key_terms(D, scale * dot, dd, &eps, &delta);
                {
                    double *xq = dq_x + ref_dense_q(p, &s, i, h);
                    double *xk = dk_x + ref_dense_k(p, &s, j, hk);
                    double *xv = dv_x + ref_dense_k(p, &s, j, hk);
                    for (int64_t d = 0; d < D; ++d) {
                        xq[d] += delta * scale * fabs(kv.k[j * D + d]);
                        xk[d] += delta * scale * fabs(w.q[d]);
                        xv[d] += eps * fabs(w.dout[d]);
                    }
                }
            }
            ref_scratch_free(&w);
            ref_kv_free(&kv);
        }
    }
    return FMSA_SUCCESS;
}
