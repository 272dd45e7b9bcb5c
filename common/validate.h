/*
 * Turns the public descriptors into a validated fmsa_problem, once for every
 * backend, before any output is touched.  Messages name the field
 * ("q.shape[3] (head_dim) = 12: supported head dims are the multiples of 8 ...").
 */
#ifndef FMSA_COMMON_VALIDATE_H
#define FMSA_COMMON_VALIDATE_H

#include "common/problem.h"

/// The tensors of one call; unused ones are NULL (or have data == NULL).
typedef struct fmsa_call_tensors {
    const fmsa_tensor *q, *k, *v;  ///< inputs of both passes
    const fmsa_tensor *o;          ///< forward output / backward input
    const fmsa_tensor *lse;        ///< forward optional output / backward input
    const fmsa_tensor *dout;       ///< backward input
    const fmsa_tensor *dq, *dk, *dv; ///< backward outputs
    const fmsa_tensor *dlse;       ///< backward optional input
    const fmsa_tensor *dsink;      ///< backward optional output (with desc.sinks)
} fmsa_call_tensors;

/// Reads small metadata (cu_seqlens, seqused_k, block tables) from device
/// memory for validation; NULL reader = the data is host memory.
typedef fmsa_status (*fmsa_meta_reader)(void *state, void *dst, const void *src,
                                        size_t src_offset, size_t bytes);

/// Validates and fills *p.  shape_only != 0 (workspace queries) skips the
/// output tensors, which the caller has not provided yet.
fmsa_status fmsa_problem_build(fmsa_problem *p, fmsa_pass pass,
                               const fmsa_attention_desc *desc,
                               const fmsa_call_tensors *t, int shape_only,
                               fmsa_meta_reader reader, void *reader_state);

/// fmsa_problem_build for a backend of FMSA_META_DEFERRED metadata access
/// (defer_metadata != 0): block tables and seqused_k are never read, and
/// cu_seqlens only when max_seqlen_q or max_seqlen_k is 0; the backend checks
/// the contents on the device.
fmsa_status fmsa_problem_build_meta(fmsa_problem *p, fmsa_pass pass,
                                    const fmsa_attention_desc *desc,
                                    const fmsa_call_tensors *t, int shape_only,
                                    fmsa_meta_reader reader, void *reader_state,
                                    int defer_metadata);

/// Validates the six tensors of fmsa_merge_states and fills *mp.
fmsa_status fmsa_merge_problem_build(fmsa_merge_problem *mp, const fmsa_tensor *o_a,
                                     const fmsa_tensor *lse_a, const fmsa_tensor *o_b,
                                     const fmsa_tensor *lse_b, const fmsa_tensor *o,
                                     const fmsa_tensor *lse);

#endif /* FMSA_COMMON_VALIDATE_H */
