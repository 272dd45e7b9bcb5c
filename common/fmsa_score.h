/*
 * Score transforms, shared by every kernel and the fp64 reference.  The
 * meaning is the one documented in flashmsa.h: scale -> softcap -> ALiBi ->
 * masks.  The window predicates and bounds live in fmsa_seq.h (included
 * here), with the diagonal they share with ALiBi.
 */
#ifndef FMSA_SCORE_H
#define FMSA_SCORE_H

#include "fmsa_portable.h"
#include "fmsa_seq.h"

/// ALiBi bias of (i, j): -slope * |i + sk - sq - j + off|.  off is the problem's
/// alibi_offset: 0 from the public API, the distance between a block's and the
/// whole sequence's diagonals in the ring's local passes.
FMSA_INLINE float fmsa_alibi_bias(float slope, fmsa_i64 i, fmsa_i64 j, fmsa_i64 sq, fmsa_i64 sk,
                                  fmsa_i64 off) {
    fmsa_i64 d = fmsa_seq_diag(i, sq, sk) - j + off;
    return -slope * (float)(d < 0 ? -d : d);
}

/// softcap * tanh(s / softcap); identity when softcap <= 0.
FMSA_INLINE float fmsa_softcap_apply(float s, float softcap) {
    return softcap > 0.0f ? softcap * FMSA_TANH(s / softcap) : s;
}

/// d(softcapped)/d(s) expressed through the capped value c: 1 - (c/softcap)^2.
FMSA_INLINE float fmsa_softcap_grad(float capped, float softcap) {
    float t;
    if (softcap <= 0.0f) return 1.0f;
    t = capped / softcap;
    return 1.0f - t * t;
}

/// Bit j of a bit-packed mask row (1 = key visible).  A macro so it works on
/// any OpenCL address space.
#define FMSA_MASK_BIT(row, j) ((((row)[(j) >> 3]) >> ((j) & 7)) & 1)

#endif /* FMSA_SCORE_H */
