/*
 * The online-softmax state machine, one definition for every backend.
 *
 * Per query row the state is (m, l, acc): running maximum of the scores seen
 * so far, running sum of exp(s - m), and the unnormalised output row.  Scores
 * are handled in base 2 (s2 = s * log2(e), folded into the softmax scale by the
 * caller) so every exponential is an exp2 (Milakov & Gimelshein 2018;
 * FlashAttention-2 §3.1).
 *
 *   init      m = -inf, l = 0, acc = 0
 *   update    m' = max(m, rowmax(tile));  c = exp2(m - m');  p_j = exp2(s2_j - m')
 *             l  = c * l + sum_j p_j;  acc = c * acc + p · V  (the caller does p · V)
 *   keeps     lazy rescaling: skip the update while a tile climbs by <= 8 bits
 *   merge     two states over disjoint key sets -> the state over their union
 *             (split-KV decode, ring attention)
 *   finalize  O = acc / l,  lse = (m + log2 l) * ln 2   (natural-log LSE, as FA)
 *
 * A row that saw only masked keys keeps m = -inf and l = 0; every function
 * here maps that to "contributes nothing" (never exp2(-inf - -inf) = NaN),
 * and finalize maps it to O = 0, lse = -inf.
 */
#ifndef FMSA_SOFTMAX_H
#define FMSA_SOFTMAX_H

#include "fmsa_portable.h"

/// -inf as a float expression that every language accepts.
#define FMSA_NEG_INF (-INFINITY)

/// Starts an empty row state.
FMSA_INLINE void fmsa_softmax_init(FMSA_PRIVATE float *m, FMSA_PRIVATE float *l) {
    *m = FMSA_NEG_INF;
    *l = 0.0f;
}

/// fmsa_softmax_update without its exponential, for kernels with their own
/// exp2 (the CPU backend's polynomial): moves m to the new running maximum and
/// returns e with c = exp2(e); e = 0 (c = 1) while nothing is visible and
/// whenever m stays, e = -inf (c = 0) on the first visible tile.
FMSA_INLINE float fmsa_softmax_update_exponent(FMSA_PRIVATE float *m, float tile_max) {
    float m_new = FMSA_FMAX(*m, tile_max);
    float e;
    if (m_new == FMSA_NEG_INF) return 0.0f; /* nothing visible yet: keep zeros */
    e = *m - m_new;                         /* -inf for the first visible tile */
    *m = m_new;
    return e;
}

/// Takes the new tile's row maximum (base-2 scores, -inf if every key of the
/// tile is masked), moves m to the new running maximum and returns the factor
/// c by which the caller must rescale l and acc (exactly 1 when m stays).  The
/// caller then adds exp2(s2_j - *m) for each key to l (fmsa_softmax_p) and
/// p · V to acc.
FMSA_INLINE float fmsa_softmax_update(FMSA_PRIVATE float *m, float tile_max) {
    const float e = fmsa_softmax_update_exponent(m, tile_max);
    return e == 0.0f ? 1.0f : FMSA_EXP2(e); /* exp2(-inf) = 0 for the first tile */
}

/// Lazy rescaling (as FlashAttention-4 does on Blackwell): the running maximum m
/// may stay for a tile whose maximum exceeds it by at most this much (base 2).
/// The tile's probabilities against the stale m are then below 2^8, far from
/// any fp32 or bf16 range limit, and finalize divides acc by the l summed
/// against the same m, so the softmax is the same: the rescale of l and acc
/// (and on some kernels the max reduction ahead of the exponentials) is
/// skipped for every tile that does not climb by more than 8 bits.
#define FMSA_SOFTMAX_STALE_MAX 8.0f

/// 1 when a row whose running maximum is m may treat a tile of maximum
/// tile_max without fmsa_softmax_update (c = 1, m kept); 0 when it must update
/// (first visible tile: m = -inf; or tile_max > m + FMSA_SOFTMAX_STALE_MAX).
/// A NaN tile maximum keeps m, so the NaN reaches l and the output.
FMSA_INLINE int fmsa_softmax_keeps(float m, float tile_max) {
    return m != FMSA_NEG_INF && !(tile_max > m + FMSA_SOFTMAX_STALE_MAX);
}

/// Probability weight of one base-2 score under the running maximum m;
/// masked scores (-inf) give exactly 0.
FMSA_INLINE float fmsa_softmax_p(float s2, float m) {
    return m == FMSA_NEG_INF ? 0.0f : FMSA_EXP2(s2 - m);
}

/// Merges state b into state a.  Returns through *ca / *cb the factors the
/// caller applies to acc_a and acc_b: acc = ca * acc_a + cb * acc_b.
FMSA_INLINE void fmsa_softmax_merge(FMSA_PRIVATE float *m_a, FMSA_PRIVATE float *l_a,
                                    float m_b, float l_b, FMSA_PRIVATE float *ca,
                                    FMSA_PRIVATE float *cb) {
    float m = FMSA_FMAX(*m_a, m_b);
    if (m == FMSA_NEG_INF) { /* both empty */
        *ca = 1.0f;
        *cb = 0.0f;
        return;
    }
    *ca = FMSA_EXP2(*m_a - m);
    *cb = FMSA_EXP2(m_b - m);
    *l_a = *l_a * *ca + l_b * *cb;
    *m_a = m;
}

/// Finishes a row: returns the factor to multiply acc by (1/l, or 0 for a
/// fully masked row) and writes the natural-log LSE (-inf for a masked row).
FMSA_INLINE float fmsa_softmax_finalize(float m, float l, FMSA_PRIVATE float *lse) {
    if (l == 0.0f || m == FMSA_NEG_INF) {
        *lse = FMSA_NEG_INF;
        return 0.0f;
    }
    *lse = (m + FMSA_LOG2(l)) * FMSA_LN2;
    return 1.0f / l;
}

/// Merges two finished rows over disjoint key sets (fmsa_merge_states): from
/// their natural-log LSEs returns the merged LSE and through *wa / *wb the
/// weights of the normalised outputs, o = wa * o_a + wb * o_b.  A side with
/// lse = -inf (no visible key) gets weight 0; both -inf give weights 0 and
/// lse = -inf, so o = 0.
FMSA_INLINE float fmsa_softmax_merge_lse(float lse_a, float lse_b, FMSA_PRIVATE float *wa,
                                         FMSA_PRIVATE float *wb) {
    const float m = FMSA_FMAX(lse_a, lse_b);
    float ea, eb, sum;
    if (m == FMSA_NEG_INF) {
        *wa = 0.0f;
        *wb = 0.0f;
        return FMSA_NEG_INF;
    }
    ea = FMSA_EXP2((lse_a - m) * FMSA_LOG2E); /* one of the two is exactly 1 */
    eb = FMSA_EXP2((lse_b - m) * FMSA_LOG2E);
    sum = ea + eb;
    *wa = ea / sum;
    *wb = eb / sum;
    return m + FMSA_LOG2(sum) * FMSA_LN2;
}

/// The backward's recomputed probability: P = exp(s - lse) in base 2, where
/// s2 is the base-2 score and lse2 = lse * log2(e).  A masked row (lse = -inf)
/// or masked key (s2 = -inf) gives 0.
FMSA_INLINE float fmsa_softmax_p_from_lse(float s2, float lse2) {
    return (lse2 == FMSA_NEG_INF || s2 == FMSA_NEG_INF) ? 0.0f : FMSA_EXP2(s2 - lse2);
}

#endif /* FMSA_SOFTMAX_H */
