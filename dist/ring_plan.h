/*
 * Which local passes one ring step runs: from the layout's global token
 * positions, each (query segment, key segment) pair of a step is skipped or
 * run on row sub-ranges with a local causal flag and window, chosen so that
 * the local kernels' own bottom-right-aligned masking reproduces "key
 * position in [query position - window_left, query position + window_right]"
 * (causal: window_right = 0) over the whole sequence.
 */
#ifndef FMSA_DIST_RING_PLAN_H
#define FMSA_DIST_RING_PLAN_H

#include <stdint.h>

#include "flashmsa/flashmsa_dist.h"

/// One local pass of a step.
typedef struct fmsa_ring_call {
    int64_t q_row0, q_rows; ///< this rank's query rows
    int64_t k_row0, k_rows; ///< rows of the key/value block held at this step
    int causal;             ///< the local pass's causal flag on those rows
    int sinks;              ///< this call carries the sink term of its rows (step 0, once per row)
    int64_t window_left;    ///< the local pass's window (-1 = unlimited)
    int64_t window_right;   ///< (-1 = unlimited; with causal always -1)
    /// ALiBi: what the local pass adds to its distance (fmsa_problem.alibi_offset) so that
    /// row i and key j of the call are at the global distance q_pos(i) - k_pos(j); 0 without
    int64_t alibi_offset;
} fmsa_ring_call;

enum { FMSA_RING_MAX_CALLS = 4 };

/// The global mask: causal, and the window of the description (-1 = none);
/// alibi: the passes carry ALiBi, so every call must be one contiguous
/// (query segment, key segment) pair, whose distances differ from the global
/// ones by a constant (the striped layout has no such form: no plan).
typedef struct fmsa_ring_mask {
    int causal;
    int64_t window_left, window_right;
    int alibi;
} fmsa_ring_mask;

/// The calls of step s (0 <= s < P) of rank r, which then holds the block of
/// rank (r - s) mod P; c rows per rank.  Returns the number of calls written,
/// or -1 if the layout cannot hold c (zigzag needs c even) or the mask
/// (striped with ALiBi).
int fmsa_ring_plan_step(fmsa_ring_layout layout, int P, int r, int s, int64_t c,
                        const fmsa_ring_mask *mask, fmsa_ring_call out[FMSA_RING_MAX_CALLS]);

#endif /* FMSA_DIST_RING_PLAN_H */
