/*
 * Builds everything one case needs from its spec: seeded random inputs in
 * guarded host images, the device descriptors for the public API, and a
 * host-side fmsa_problem over the same images for the fp64 reference and the
 * naive same-precision implementation.
 *
 * The host fmsa_problem is filled here from the spec, independently of
 * common/validate.c, so a wrong stride or sequence interpretation in the
 * validation layer shows up as a mismatch instead of being shared by the
 * backend and the oracle.
 */
#ifndef FMSA_TEST_PROBLEM_H
#define FMSA_TEST_PROBLEM_H

#include "common/problem.h"
#include "support/fmsa_test_buffer.h"
#include "support/fmsa_test_spec.h"

typedef struct fmsa_test_problem {
    fmsa_test_spec spec;
    /* attention tensors */
    fmsa_test_buf q, k, v, o, lse, dout, dq, dk, dv;
    /* metadata (only those the spec uses are initialised: count > 0 or dev) */
    fmsa_test_buf alibi, mask, cu_q, cu_k, block_table, seqused;
    /* issue-13 features: sink logits (input), dlse (backward input), dsink (backward output) */
    fmsa_test_buf sinks, dlse, dsink;
    int has_alibi, has_mask, has_varlen, has_paged, has_seqused;
    int has_sinks, has_dlse, has_dsink;
    fmsa_problem host;         ///< views onto the host images (for reference/naive)
    int64_t n_q, n_k, n_lse;   ///< elements of dense q-shaped, k-shaped and lse arrays
    int64_t n_o, n_v;          ///< elements of dense o-shaped and v-shaped arrays (Dv)
    int64_t max_seqlen_q;      ///< desc value (0 = let the library compute it)
    int64_t max_seqlen_k;      ///< desc value
} fmsa_test_problem;

/// Creates host images and random inputs.  Returns 0, or -1 (out of host memory).
int fmsa_test_problem_create(fmsa_test_problem *tp, const fmsa_test_spec *spec);
/// Frees host and device memory.
void fmsa_test_problem_destroy(fmsa_context *ctx, fmsa_test_problem *tp);

/// Calls fn on every buffer in use (inputs and outputs of the spec's pass).
void fmsa_test_problem_each(fmsa_test_problem *tp, void (*fn)(fmsa_test_buf *, void *),
                            void *user);
/// Uploads every buffer in use (first failure returned).
fmsa_status fmsa_test_problem_upload(fmsa_context *ctx, fmsa_test_problem *tp);
/// The public descriptor over the uploaded buffers.
fmsa_attention_desc fmsa_test_problem_desc(const fmsa_test_problem *tp);

#endif /* FMSA_TEST_PROBLEM_H */
