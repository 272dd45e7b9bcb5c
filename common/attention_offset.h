/*
 * The attention passes with an ALiBi distance offset (fmsa_problem.alibi_offset),
 * for the ring driver (dist/ring.c).  A local pass of the ring runs query rows
 * at global positions Q0 + i against keys at K0 + j, and ALiBi must see the
 * whole sequence's distance -slope * |(Q0 + i) - (K0 + j)|; the local
 * problem's bottom-right-aligned distance i + sk - sq - j differs from it by
 * a constant, which these entries add.
 *
 * Internal, not public: an offset means something only for a block of a
 * longer sequence, which the public API has no notion of (its ALiBi is the
 * sequence's own); the ring, which lives in libflashmsa, reaches it through
 * this header, as it reaches fmsa_accumulate.
 */
#ifndef FMSA_COMMON_ATTENTION_OFFSET_H
#define FMSA_COMMON_ATTENTION_OFFSET_H

#include <stdint.h>

#include "flashmsa/flashmsa.h"

/// fmsa_forward with ALiBi's distance shifted by alibi_offset (ignored
/// without desc->alibi_slopes); 0 is fmsa_forward exactly.
fmsa_status fmsa_forward_offset(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                int64_t alibi_offset, const fmsa_tensor *q, const fmsa_tensor *k,
                                const fmsa_tensor *v, const fmsa_tensor *o, const fmsa_tensor *lse,
                                void *workspace, size_t workspace_bytes, void *stream);

/// fmsa_backward with ALiBi's distance shifted by alibi_offset, likewise.
fmsa_status fmsa_backward_offset(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                 int64_t alibi_offset, const fmsa_backward_tensors *t,
                                 void *workspace, size_t workspace_bytes, void *stream);

#endif /* FMSA_COMMON_ATTENTION_OFFSET_H */
