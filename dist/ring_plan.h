/*
 * Which local passes one ring step runs: from the layout's global token
 * positions, each (query segment, key segment) pair of a step is skipped,
 * run in full, or run causally on row sub-ranges, so that the local kernels'
 * own causal flag (bottom-right aligned) reproduces "key position <= query
 * position" over the whole sequence.
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
} fmsa_ring_call;

enum { FMSA_RING_MAX_CALLS = 4 };

/// The calls of step s (0 <= s < P) of rank r, which then holds the block of
/// rank (r - s) mod P; c rows per rank.  Returns the number of calls written,
/// or -1 if the layout cannot hold c (zigzag needs c even).
int fmsa_ring_plan_step(fmsa_ring_layout layout, int P, int r, int s, int64_t c, int causal,
                        fmsa_ring_call out[FMSA_RING_MAX_CALLS]);

#endif /* FMSA_DIST_RING_PLAN_H */
