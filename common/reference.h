/*
 * The fp64 reference: naive O(N^2)-memory attention in double precision, for
 * every feature of fmsa_problem.  Tests and `flashmsa run --check` compare
 * every backend against it.  Never used on a hot path.
 *
 * Output arrays are dense doubles with the shape of the tensor they stand for:
 *   o, dq  : q.shape   (row-major, [Bq, rows_q, Hq, D])
 *   dk, dv : k.shape   ([Bk, rows_k, Hkv, D]; paged is forward-only)
 *   lse    : [Bq, Hq, rows_q]
 * where Bq/rows_q are q.shape[0]/q.shape[1] (1/total_q when varlen).
 * Fully masked rows give o = 0, lse = -inf, zero gradients.
 */
#ifndef FMSA_COMMON_REFERENCE_H
#define FMSA_COMMON_REFERENCE_H

#include "common/problem.h"

/// fp64 forward.  Reads q, k, v (and metadata) from host memory.  lse may be NULL.
fmsa_status fmsa_reference_forward(const fmsa_problem *p, double *o, double *lse);

/// fp64 backward: exact gradients of the fp64 forward w.r.t. q, k, v for the
/// upstream gradient p->dout (it recomputes O and LSE itself in fp64, so it
/// does not depend on the backend's forward).
fmsa_status fmsa_reference_backward(const fmsa_problem *p, double *dq, double *dk,
                                    double *dv);

/// fp64 forward of one query row (row i of sequence b, query head h): writes
/// D doubles to o_row and the row's natural-log LSE to *lse.  Used for
/// sampled-row checks of large benchmark shapes; the full forward uses it.
fmsa_status fmsa_reference_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                                       double *o_row, double *lse);

/// fp64 dQ of one query row (row i of sequence b, head h): D doubles.  Row-local
/// (needs only that row's P, dP and rowsum(dO*O)), so large shapes can be
/// spot-checked.
fmsa_status fmsa_reference_backward_dq_row(const fmsa_problem *p, int64_t b, int64_t h,
                                           int64_t i, double *dq_row);

/// Part (c) of the correctness rule (common/check_rule.h): per element of
/// the backward's dQ, dK and dV (dense, as fmsa_reference_backward writes
/// them), the extra floor that rows with exactly one visible key earn; zero
/// elsewhere.  Reads q, k, v, o and dout (the backward's inputs) from p.
fmsa_status fmsa_reference_single_key_floor(const fmsa_problem *p, double *dq_x, double *dk_x,
                                            double *dv_x);

#endif /* FMSA_COMMON_REFERENCE_H */
