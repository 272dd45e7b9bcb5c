/*
 * The correctness rule (ARCHITECTURE.md, STYLE.md habit 11), in one place:
 *
 *   max |backend - ref|  <=  factor * max |naive - ref|  +  floor
 *
 * ref is the fp64 reference, naive the same-precision naive implementation
 * (common/naive.h, whole tensors or row by row), factor 2 for forward outputs (O, LSE) and 3 for
 * gradients (FlashAttention's rule: a fused kernel may be a little worse than
 * the unfused one, not an order of magnitude).  Any NaN fails; where the
 * reference is infinite (the -inf LSE of a fully masked row) the backend must
 * produce exactly that value.
 *
 * The floor (derived, not tuned) has two parts, both in units of the unit
 * roundoff u (2^-24 f32, 2^-11 f16, 2^-8 bf16):
 *
 * (a) storage: (2 u(stored dtype) + 2 u_f32) * max |ref|.  For cases where
 *     the naive error is a poor estimate because it is (nearly) zero -- d = 8,
 *     values that happen to round exactly -- while a correct backend still
 *     carries 1 u(dtype) for the final rounding of its result, 1 u(dtype) for
 *     one more dtype rounding of an intermediate (P or dS converted to
 *     f16/bf16 for matrix units, as on GPUs), and 2 u_f32 for accumulating in
 *     another order (tiles, split-KV merge, online rescale; accumulation is
 *     fp32 by the API contract, so this part never scales with the dtype).
 *
 * (b) softmax argument: u_f32 * K * (1 + A) relative, A = max |LSE| of the
 *     reference (>= the largest score that carries weight).  exp() turns an
 *     absolute error e of its argument into a relative error e of P, and a
 *     flash kernel's argument carries errors proportional to the size of the
 *     scores, which the naive's does not: the naive forms s - max(s) with one
 *     subtraction of nearby values (exact near the maximum, Sterbenz), and
 *     with one visible key its P is exactly 1.  Counting fp32 roundings:
 *       forward  (K = 3): s * (scale log2 e) -- the constant and the product,
 *                2 u|s| -- and the running max subtracted, 1 u|s|;
 *       backward (K = 6): the same 2 u|s| recomputing S, the LSE handed over
 *                in fp32 (1 u|lse|) and multiplied by log2 e (1 u|lse|), the
 *                subtraction (1 u), and exp2 itself (1 u).
 *     Every output of the pass is a P-weighted sum, so this relative error
 *     applies at the magnitude of the output (max |ref|); for the LSE it is
 *     absolute (log of a sum of P-weighted terms).  It is negligible next to
 *     the naive error for f16/bf16 and matters only for f32.
 *
 * (c) rows with exactly one visible key, backward, per element they touch
 *     (fmsa_reference_single_key_floor adds these to the tolerance of those
 *     elements only; every other element keeps (a) and (b)).  The naive has
 *     no error there to scale: its P = exp(s - max(s)) is exactly 1 and its
 *     dS = P (dP - D) exactly 0 (O = V, dP and D the same products in the same
 *     order), so the reference's dQ is 0 and its dV = dO exactly, and a
 *     factor of a zero error allows nothing.  A flash backward recomputes
 *     S = scale q.k from the saved LSE; where the forward summed q.k in
 *     another order (all backends but one whose passes share a score
 *     routine), the two sums differ by up to 2 gamma_D M, gamma_D = D u_f32 /
 *     (1 - D u_f32) (Higham's bound for each order), M = scale sum_d |q_d k_d|
 *     -- not |S|: q.k can cancel, so |S| alone bounds nothing, and (b)'s
 *     |LSE| = |S| misses it.  That is a relative error eps = 2 gamma_D M of
 *     P, which dV_j = sum P dO carries as eps |dO| per such row.  And dP - D
 *     is a difference of two fp32 dot products of (nearly) the same terms:
 *     delta = gamma_D N, N = sum_d |dO_d| (|V_d| + |O_d|), which dQ of the row
 *     carries times scale |K_j| and dK_j times scale |Q| per such row
 *     (softcap's factor is <= 1).  CUDA's four grid excursions were of this
 *     kind: ~1e-7 in dQ against a bound of 0.
 *
 * (d) dsink, per head (fmsa_reference_dsink_floor): the backward receives O
 *     as stored, rounded to its dtype, so D_i = rowsum(dO_i * O_i) carries up
 *     to u(dtype) sum_d |dO_id| |O_id| that the naive, whose D_i is
 *     rowsum(P dP) of its own unrounded products, never sees; dsink_h =
 *     -sum_i exp(t_h - lse_i) (D_i - dlse_i) sums it with the sink's weight:
 *     u(dtype) sum_{b,i} exp(t_h - lse_i) sum_d |dO_id| |O_id|.  dQ/dK carry
 *     the same D_i times P, within their factor; dsink is D_i's sum alone.
 *
 * Exactly zero outputs (fully masked rows) have ref = naive = 0 and a zero
 * floor, so they must be exactly zero.
 */
#ifndef FMSA_COMMON_CHECK_RULE_H
#define FMSA_COMMON_CHECK_RULE_H

#include <stdint.h>

#include "flashmsa/flashmsa.h"

#define FMSA_RULE_FLOOR_UNITS 2.0       ///< (a) above: units of the stored dtype
#define FMSA_RULE_FLOOR_F32_UNITS 2.0   ///< (a) above: units of fp32
#define FMSA_RULE_SOFTMAX_UNITS_FWD 3.0 ///< K of (b) for the forward
#define FMSA_RULE_SOFTMAX_UNITS_BWD 6.0 ///< K of (b) for the backward
#define FMSA_RULE_FACTOR_FWD 2.0        ///< outputs: O, LSE
#define FMSA_RULE_FACTOR_BWD 3.0        ///< gradients: dQ, dK, dV

/// Unit roundoff of a float dtype: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16).
double fmsa_rule_unit_roundoff(fmsa_dtype dtype);

/// What the floor of one tensor depends on.
typedef struct fmsa_rule_floor_spec {
    fmsa_dtype store_dtype; ///< dtype the backend stores the tensor in (f32 for LSE)
    double softmax_units;   ///< K: FMSA_RULE_SOFTMAX_UNITS_FWD or _BWD
    double lse_max;         ///< A: max |LSE| of the reference over rows with a visible key
    int is_lse;             ///< the tensor is the LSE: part (b) is absolute
} fmsa_rule_floor_spec;

/// The floor for a tensor whose largest reference magnitude is ref_max.
double fmsa_rule_floor(const fmsa_rule_floor_spec *f, double ref_max);

/// A = max |x| over the finite elements of a reference LSE (0 if none).
double fmsa_rule_lse_max(const double *lse, int64_t n);

/// Part (c) for one row with a single visible key: eps = 2 gamma_D M (the
/// relative error of the recomputed P; M = scale sum_d |q_d k_d|) and delta =
/// gamma_D N (the error of dP - D; N = sum_d |dO_d| (|V_d| + |O_d|)).
void fmsa_rule_single_key_terms(int64_t head_dim, double m, double n, double *eps,
                                double *delta);

#endif /* FMSA_COMMON_CHECK_RULE_H */
