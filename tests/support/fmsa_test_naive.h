/*
 * The naive same-precision implementation: the yardstick of the correctness
 * rule (ARCHITECTURE.md).  It is what a framework computes when attention is
 * written out with materialised matrices in the input dtype:
 *
 *   S  = round(fp32 sum_d q k * scale, softcap, + ALiBi)   masked -> -inf
 *   P  = round(fp32 softmax(S))        lse = fp32 (max S + log sum exp)
 *   O  = round(fp32 sum_j P V)
 *   dP = round(fp32 dO V^T)            dS = round(P (dP - rowsum(P dP)))
 *   dS = round(dS * (1 - tanh^2))      (softcap only, a separate op)
 *   dQ = round(fp32 scale dS K)   dK = round(fp32 scale dS^T Q)   dV = round(fp32 P^T dO)
 *
 * round() is the identity for f32 (everything is then plain fp32) and
 * round-to-nearest-even to f16/bf16 otherwise.  With GQA, dK/dV are summed
 * over the query heads of a group in fp32 and rounded once.  Dense outputs in
 * the layout of reference.h, so they compare element by element.
 */
#ifndef FMSA_TEST_NAIVE_H
#define FMSA_TEST_NAIVE_H

#include "common/problem.h"

/// Naive forward; lse may be NULL.  0, or -1 if host memory ran out.
int fmsa_test_naive_forward(const fmsa_problem *p, double *o, double *lse);
/// Naive backward of p->dout (recomputes its own S and P).  0 or -1.
int fmsa_test_naive_backward(const fmsa_problem *p, double *dq, double *dk, double *dv);

#endif /* FMSA_TEST_NAIVE_H */
