/*
 * One ring-attention test case, shared by the loopback suite (P ranks as
 * threads) and the MPI suite (P processes): the whole sequence is drawn from a
 * seed on every rank, the fp64 reference and the naive oracle of the whole
 * problem give the yardstick, each rank runs fmsa_ring_forward/backward on its
 * shard of the layout, and its rows of O, LSE, dQ, dK, dV (and dsink) are
 * held to the project's rule against the whole problem's reference.
 */
#ifndef FMSA_TEST_RING_CASE_H
#define FMSA_TEST_RING_CASE_H

#include <stddef.h>

#include "flashmsa/flashmsa_dist.h"

typedef struct fmsa_ring_spec {
    int P;                   ///< ranks
    fmsa_ring_layout layout; ///< shard layout
    int causal;              ///< causal over the whole sequence
    fmsa_dtype dtype;        ///< f32, f16 or bf16
    int64_t B, c, Hq, Hkv, D, Dv; ///< batch, rows per rank, heads, head dims
    int sinks;               ///< per-head sink logits (and dsink)
    int dlse;                ///< an lse gradient in the backward
    float softcap;           ///< 0 = off
    int window;              ///< window_left/right below are set (0: no window)
    int64_t window_left, window_right; ///< with window: the whole sequence's window (-1 = none)
    unsigned seed;           ///< data
    fmsa_backend backend;    ///< the ranks' backend (0 = the CPU) for fmsa_ring_case_run
    int alibi;               ///< ALiBi slopes over the whole sequence: 0 none, 1 [Hq], 2 [B, Hq]
    /// A bit mask over the whole sequence (about 1 pair in 4 masked, and global row 1 of
    /// sequence 0 fully masked): 0 none, 1 [B, Hq, S, ceil(S/8)], 2 [1, 1, S, ceil(S/8)]; each
    /// rank passes its own rows of it, [., ., c, ceil(S/8)] (flashmsa_dist.h)
    int mask;
} fmsa_ring_spec;

/// The whole problem and its yardsticks, identical on every rank.
typedef struct fmsa_ring_case fmsa_ring_case;

/// Draws the data and computes reference and naive results; NULL on failure
/// (out of memory, or the reference refused the problem: a harness bug).
fmsa_ring_case *fmsa_ring_case_make(const fmsa_ring_spec *spec);
void fmsa_ring_case_free(fmsa_ring_case *rc);

/// Rank r's part: shards, runs the ring forward and backward on comm with a
/// context of the spec's backend (its own, device 0), checks its rows.
/// Returns 0 when every check passed, 1 when a check failed, 77 when the
/// backend refused a feature of the case with FMSA_ERR_NOT_SUPPORTED naming
/// itself (printed), -1 on a harness failure; writes what happened into msg.
int fmsa_ring_case_run(const fmsa_ring_case *rc, fmsa_dist_comm *comm, char *msg, size_t len);

/// The same on the caller's context ctx (any backend; NULL = make one as
/// above).  Shards, outputs and workspace live in ctx's memory (fmsa_malloc),
/// each with guard bytes on both sides that must come back intact.
int fmsa_ring_case_run_on(const fmsa_ring_case *rc, fmsa_dist_comm *comm, fmsa_context *ctx,
                          char *msg, size_t len);

/// A short name of the spec for messages.
void fmsa_ring_spec_name(const fmsa_ring_spec *s, char *buf, size_t len);

#endif /* FMSA_TEST_RING_CASE_H */
