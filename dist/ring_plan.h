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
    /// ALiBi: what the local pass adds to its distance (fmsa_problem.alibi_offset).  Contiguous
    /// segments: row i and key j of the call are then at the global distance q_pos(i) - k_pos(j).
    /// Striped: at the distance x = (i - j) of the rank-local indices (see alibi_scale)
    int64_t alibi_offset;
    /// ALiBi: the local pass's slopes are the description's times alibi_scale (1; P in the
    /// striped layout), and alibi_add * slope is the constant its scores then lack, which the
    /// driver adds to the call's lse (forward) and takes from the lse it reads (backward):
    /// -slope |P x + d| = -(P slope) |x| + alibi_add slope on one side of x = 0 (d = r - j)
    int alibi_scale;
    int64_t alibi_add;
    /// Global position of key k_row0 (stride 1 in the contiguous and zigzag layouts: with a
    /// bit mask, the mask column where the call's keys start, a multiple of 8)
    int64_t k_pos0;
} fmsa_ring_call;

enum { FMSA_RING_MAX_CALLS = 4 };

/// The global mask: causal, and the window of the description (-1 = none);
/// alibi: the passes carry ALiBi, so every call is one (query segment, key
/// segment) pair, whose distances differ from the global ones by a constant
/// (contiguous segments) or, striped, one side of the local diagonal
/// (alibi_scale, alibi_add); mask: the passes carry a bit mask over the global
/// key columns, so every call is one pair of contiguous segments whose keys
/// start at a column that is a multiple of 8 (a byte of the mask; striped
/// keys are no run of columns: no plan).
typedef struct fmsa_ring_mask {
    int causal;
    int64_t window_left, window_right;
    int alibi;
    int mask;
} fmsa_ring_mask;

/// The calls of step s (0 <= s < P) of rank r, which then holds the block of
/// rank (r - s) mod P; c rows per rank.  Returns the number of calls written,
/// or -1 if the layout cannot hold c (zigzag needs c even) or the mask (a bit
/// mask with the striped layout, or with a segment starting off a byte).
int fmsa_ring_plan_step(fmsa_ring_layout layout, int P, int r, int s, int64_t c,
                        const fmsa_ring_mask *mask, fmsa_ring_call out[FMSA_RING_MAX_CALLS]);

#endif /* FMSA_DIST_RING_PLAN_H */
