/*
 * Score transforms and visibility predicates, shared by every kernel and the
 * fp64 reference's integer logic.  The meaning is the one documented in
 * flashmsa.h: scale -> softcap -> ALiBi -> masks.  Positions are 0-based within
 * one sequence; bottom-right alignment uses (sk - sq) as the diagonal offset,
 * as FlashAttention 2.1+ does, so decode (sq = 1) sees every key.
 */
#ifndef FMSA_SCORE_H
#define FMSA_SCORE_H

#include "fmsa_portable.h"

/// True when key j is inside the (left, right) window of query i.
/// window < 0 means unlimited on that side.
FMSA_INLINE int fmsa_window_visible(fmsa_i64 i, fmsa_i64 j, fmsa_i64 sq, fmsa_i64 sk,
                                    fmsa_i64 window_left, fmsa_i64 window_right) {
    fmsa_i64 diag = i + sk - sq;
    if (window_left >= 0 && j < diag - window_left) return 0;
    if (window_right >= 0 && j > diag + window_right) return 0;
    return 1;
}

/// First key index any query in rows [i0, i1) may see (window_left bound), clamped to [0, sk].
/// Lets tiled kernels skip whole key tiles without testing every element.
FMSA_INLINE fmsa_i64 fmsa_window_key_begin(fmsa_i64 i0, fmsa_i64 sq, fmsa_i64 sk,
                                           fmsa_i64 window_left) {
    fmsa_i64 b;
    if (window_left < 0) return 0;
    b = i0 + sk - sq - window_left;
    return b < 0 ? 0 : (b > sk ? sk : b);
}

/// One past the last key any query in rows [i0, i1) may see, clamped to [0, sk].
FMSA_INLINE fmsa_i64 fmsa_window_key_end(fmsa_i64 i1, fmsa_i64 sq, fmsa_i64 sk,
                                         fmsa_i64 window_right) {
    fmsa_i64 e;
    if (window_right < 0) return sk;
    e = (i1 - 1) + sk - sq + window_right + 1;
    return e < 0 ? 0 : (e > sk ? sk : e);
}

/// ALiBi bias of (i, j): -slope * |i + sk - sq - j|.
FMSA_INLINE float fmsa_alibi_bias(float slope, fmsa_i64 i, fmsa_i64 j, fmsa_i64 sq,
                                  fmsa_i64 sk) {
    fmsa_i64 d = i + sk - sq - j;
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
