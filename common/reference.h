/*
 * The fp64 reference: naive O(N^2)-memory attention in double precision, for
 * every feature of fmsa_problem.  Tests and `flashmsa run --check` compare
 * every backend against it.  Never used on a hot path.
 *
 * Output arrays are dense doubles with the shape of the tensor they stand for:
 *   dq     : q.shape   (row-major, [Bq, rows_q, Hq, D])
 *   o      : o.shape   ([Bq, rows_q, Hq, Dv])
 *   dk     : k.shape   ([Bk, rows_k, Hkv, D]; paged is forward-only)
 *   dv     : v.shape   ([Bk, rows_k, Hkv, Dv])
 *   lse    : [Bq, Hq, rows_q]
 *   dsink  : [Hq]
 * where Bq/rows_q are q.shape[0]/q.shape[1] (1/total_q when varlen), D the
 * q/k head dim and Dv the value head dim (p->head_dim_v, which must be set).
 * Fully masked rows give o = 0, lse = -inf (t_h with sinks), zero gradients.
 */
#ifndef FMSA_COMMON_REFERENCE_H
#define FMSA_COMMON_REFERENCE_H

#include "common/problem.h"

/// fp64 forward.  Reads q, k, v (and metadata) from host memory.  lse may be NULL.
fmsa_status fmsa_reference_forward(const fmsa_problem *p, double *o, double *lse);

/// fp64 backward: exact gradients of the fp64 forward w.r.t. q, k, v for the
/// upstream gradient p->dout and, with p->has_dlse, p->dlse of the lse (it
/// recomputes O and LSE itself in fp64, so it does not depend on the
/// backend's forward).
fmsa_status fmsa_reference_backward(const fmsa_problem *p, double *dq, double *dk,
                                    double *dv);

/// fp64 gradient of the sink logits ([Hq] doubles; zeros without sinks):
/// dsink_h = -sum_{b,i} exp(t_h - lse_i) (D_i - dlse_i), with the reference's
/// own O and LSE.  Separate from fmsa_reference_backward (it recomputes the
/// rows) so that the callers of that one are unchanged.
fmsa_status fmsa_reference_dsink(const fmsa_problem *p, double *dsink);

/// fp64 forward of one query row (row i of sequence b, query head h): writes
/// Dv doubles to o_row and the row's natural-log LSE to *lse.  Used for
/// sampled-row checks of large benchmark shapes; the full forward uses it.
fmsa_status fmsa_reference_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                                       double *o_row, double *lse);

/// fp64 dQ of one query row (row i of sequence b, head h): D doubles.  Row-local
/// (needs only that row's P, dP, rowsum(dO*O) and dlse_i), so large shapes can be
/// spot-checked.
fmsa_status fmsa_reference_backward_dq_row(const fmsa_problem *p, int64_t b, int64_t h,
                                           int64_t i, double *dq_row);

/// Part (c) of the correctness rule (common/check_rule.h): per element of
/// the backward's dQ, dK and dV (dense, as fmsa_reference_backward writes
/// them), the extra floor that rows with exactly one visible key earn; zero
/// elsewhere.  Reads q, k, v, o and dout (the backward's inputs) from p.
fmsa_status fmsa_reference_single_key_floor(const fmsa_problem *p, double *dq_x, double *dk_x,
                                            double *dv_x);

/// Part (d) of the correctness rule (common/check_rule.h): per head, the
/// extra floor of dsink from D_i = rowsum(dO * O) over the O the backward
/// receives, rounded to its dtype; zeros without sinks.  Reads o, dout, lse
/// and the sinks from p.
fmsa_status fmsa_reference_dsink_floor(const fmsa_problem *p, double *dsink_x);

/// fp64 fmsa_merge_states: o dense [B, S, H, Dv], lse [B, H, S] (a -inf
/// side contributes nothing; both -inf give o = 0, lse = -inf).
fmsa_status fmsa_reference_merge(const fmsa_merge_problem *mp, double *o, double *lse);

#endif /* FMSA_COMMON_REFERENCE_H */
