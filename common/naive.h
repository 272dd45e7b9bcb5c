/*
 * The naive same-precision implementation: the yardstick of the correctness
 * rule (ARCHITECTURE.md, common/check_rule.h), shared by the test suites and
 * `flashmsa run --check`.  It is what a framework computes when attention is
 * written out with materialised matrices in the input dtype:
 *
 *   S  = round(fp32 sum_d q k * scale, softcap, + ALiBi)   masked -> -inf
 *   P  = round(fp32 softmax([S, t]))   lse = fp32 (max + log sum exp), t the
 *                                      fp32 sink logit (a column with no value)
 *   O  = round(fp32 sum_j P V)
 *   dP = round(fp32 dO V^T)            dS = round(P (dP - (rowsum(P dP) - dlse)))
 *   dsink = fp32 sum over b, i of round(-P_sink (rowsum(P dP) - dlse))
 *   dS = round(dS * (1 - tanh^2))      (softcap only, a separate op)
 *   dQ = round(fp32 scale dS K)   dK = round(fp32 scale dS^T Q)   dV = round(fp32 P^T dO)
 *
 * round() is the identity for f32 (everything is then plain fp32) and
 * round-to-nearest-even to f16/bf16 otherwise.  With GQA, dK/dV are summed
 * over the query heads of a group in fp32 and rounded once.  Not the reference
 * (that is fp64, reference.h) and not a kernel: it answers "how wrong is an
 * honest implementation in this precision", which is what a backend is held to.
 *
 * Two entry points over the same code: whole tensors (the suites, the full
 * check) and one query row (spot checks of benchmark shapes, whose whole
 * score matrices would not fit).  Host memory only; every feature of
 * fmsa_problem (varlen, paged KV, ALiBi, bit masks, windows, softcap, sinks,
 * dlse, Dv != D).
 */
#ifndef FMSA_COMMON_NAIVE_H
#define FMSA_COMMON_NAIVE_H

#include "common/problem.h"

/// Naive forward into the dense layouts of reference.h (o: [Bq, total_q, Hq, Dv],
/// lse: [Bq, Hq, total_q]); lse may be NULL.  0, or -1 if host memory ran out.
int fmsa_naive_forward(const fmsa_problem *p, double *o, double *lse);
/// Naive backward of p->dout (recomputes its own S and P) into the dense
/// layouts of reference.h.  0, or -1 if host memory ran out.
int fmsa_naive_backward(const fmsa_problem *p, double *dq, double *dk, double *dv);
/// Naive dsink ([Hq]; zeros without sinks).  0, or -1 if host memory ran out.
int fmsa_naive_dsink(const fmsa_problem *p, double *dsink);

/// Scratch and results of one query row; all fp32 holding dtype values.
typedef struct fmsa_naive_row {
    int64_t D, sk_max;       ///< head dim; keys the buffers hold (p->seqlen_k)
    int64_t Dv;              ///< value head dim
    int64_t kv_b, kv_h;      ///< (sequence, kv head) whose keys k/v hold; -1 = none
    int64_t sk;              ///< keys of the row's sequence
    float *k, *v;            ///< [sk][D] keys, [sk][Dv] values of kv head kv_h
    float *q, *dout;         ///< [D] query, [Dv] upstream gradient of the row
    float *s;                ///< [sk] scores (rounded), -inf where masked; dS after backward
    float *c;                ///< [sk] softcapped score before ALiBi (for tanh')
    float *p;                ///< [sk] probabilities (rounded)
    float *o;                ///< [Dv] output row (rounded)
    float *dq;               ///< [D] dQ row (rounded)
    float lse;               ///< natural-log LSE (-inf when fully masked; t_h with sinks)
    float psink;             ///< the sink column's probability (rounded; 0 without sinks)
    float ds_sink;           ///< after backward: the sink column's dS (rounded)
} fmsa_naive_row;

/// Allocates the scratch of rows of p (one problem: it keeps the last keys
/// it loaded); 0, or -1 if host memory ran out.
int fmsa_naive_row_alloc(const fmsa_problem *p, fmsa_naive_row *r);
/// Frees what fmsa_naive_row_alloc allocated.
void fmsa_naive_row_free(fmsa_naive_row *r);

/// Forward of query row i of sequence b, query head h: r->s, c, p, o, lse.
void fmsa_naive_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                            fmsa_naive_row *r);

/// Backward of the same row, right after fmsa_naive_forward_row: r->dq,
/// r->ds_sink, and when dk/dv are not NULL adds this row's dS^T q and P^T dO
/// (before the scale) to the head's fp32 sums dk ([sk][D]) and dv ([sk][Dv]).
void fmsa_naive_backward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                             fmsa_naive_row *r, float *dk, float *dv);

#endif /* FMSA_COMMON_NAIVE_H */
