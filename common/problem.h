/*
 * The validated attention problem every backend receives.
 *
 * fmsa_validate_* (validate.c) turns the public descriptors into this flat
 * struct once, for all backends, before anything is written.  Backends never
 * look at fmsa_tensor again: every pointer here is already "base + byte
 * offset" for host-addressable backends and every stride is in elements.  All
 * index arithmetic is int64 (tensors past 2^31 elements are legal).
 */
#ifndef FMSA_COMMON_PROBLEM_H
#define FMSA_COMMON_PROBLEM_H

#include "flashmsa/flashmsa.h"

#include "common/fmsa_limits.h"
#include "common/fmsa_seq.h"

/// A validated [batch, seq, head, dim] view; the dim stride is 1.
typedef struct fmsa_view4 {
    void *data;          ///< fmsa_tensor.data (device pointer / cl_mem; host pointer on CPU)
    int64_t byte_offset; ///< fmsa_tensor.byte_offset
    int64_t sb, ss, sh;  ///< strides of batch, seq, head in elements
} fmsa_view4;

/// A validated view of a small auxiliary tensor (lse, alibi, mask, int32 tables).
typedef struct fmsa_viewn {
    void *data;          ///< NULL when absent
    int64_t byte_offset; ///< fmsa_tensor.byte_offset
    int64_t s0, s1, s2;  ///< strides in elements of the first three dims (0 = broadcast)
} fmsa_viewn;

typedef struct fmsa_problem {
    fmsa_pass pass;       ///< forward or backward
    fmsa_dtype dtype;     ///< dtype of q/k/v/o/dout/dq/dk/dv (f32, f16, bf16)

    int64_t batch;        ///< sequences (varlen: entries of cu_seqlens - 1)
    int64_t seqlen_q;     ///< per-sequence query length; varlen: max_seqlen_q
    int64_t seqlen_k;     ///< per-sequence key length; varlen/paged: max keys of any sequence
    int64_t heads_q;      ///< query heads
    int64_t heads_kv;     ///< key/value heads (heads_q % heads_kv == 0)
    int64_t head_dim;     ///< D (q/k): a multiple of 8 up to FMSA_HEAD_DIM_MAX (fmsa_limits.h)
    int64_t head_dim_v;   ///< Dv (v/o/dout/dv): likewise; often == head_dim
    int64_t total_q;      ///< rows of q along dim 1 (varlen: cu_seqlens_q[batch])
    int64_t total_k;      ///< rows of k along dim 1 (varlen: cu_seqlens_k[batch]; paged: page_size)

    float softmax_scale;  ///< multiplies q·k
    float softcap;        ///< > 0: s = softcap * tanh(s / softcap)
    int64_t window_left;  ///< -1 = unlimited
    int64_t window_right; ///< -1 = unlimited; causal already folded in as 0
    int causal;           ///< informational: the caller asked for causal
    int deterministic;    ///< backward: no run-to-run variation wanted

    int is_varlen;        ///< cu_seqlens given
    int is_paged;         ///< block_table given (forward only)
    int has_lse;          ///< forward: lse requested; backward: always 1
    int has_alibi;        ///< alibi.data != NULL
    int has_mask;         ///< mask.data != NULL
    int has_seqused_k;    ///< seqused_k.data != NULL
    int has_sinks;        ///< desc.sinks given: one value-less softmax term per head
    int has_dlse;         ///< backward: dlse given (else dlse = 0)
    int has_dsink;        ///< backward: dsink requested (only with sinks)

    fmsa_view4 q, k, v;          ///< inputs
    fmsa_view4 o;                ///< forward output; backward input
    fmsa_view4 dout;             ///< backward input
    fmsa_view4 dq, dk, dv;       ///< backward outputs
    fmsa_viewn lse;              ///< fp32 [B, Hq, Sq]: s0 = batch, s1 = head, s2 = row
    fmsa_viewn alibi;            ///< fp32: s0 = batch stride (0 if [Hq]), s1 = head
    fmsa_viewn mask;             ///< u8: s0 batch, s1 head, s2 row (bytes); 0 broadcasts
    fmsa_viewn cu_seqlens_q;     ///< int32 [B+1]
    fmsa_viewn cu_seqlens_k;     ///< int32 [B+1]
    fmsa_viewn block_table;      ///< int32 [B, max_pages]: s0 = batch stride
    fmsa_viewn seqused_k;        ///< int32 [B]
    fmsa_viewn sinks;            ///< fp32 [Hq]: s0 = head stride
    fmsa_viewn dlse;             ///< fp32 [B, Hq, Sq]: strides as lse
    fmsa_viewn dsink;            ///< fp32 [Hq] output: s0 = head stride
    int64_t page_size;           ///< paged: keys per page
    int64_t max_pages;           ///< paged: block_table.shape[1]
    int64_t num_pages;           ///< paged: k.shape[0]
    /// Added to ALiBi's distance: the bias of (i, j) is -slope * |i + sk - sq - j + alibi_offset|.
    /// 0 from the public API; the ring's local passes over blocks of a longer sequence set it so
    /// that the distance is the global one (common/attention_offset.h).
    int64_t alibi_offset;
} fmsa_problem;

/// A validated fmsa_merge_states call: two partial results of the same
/// queries and the merged one, all [batch, seqlen, heads, head_dim_v].
typedef struct fmsa_merge_problem {
    int64_t batch, seqlen, heads, head_dim_v; ///< extents of o_a (and every other)
    fmsa_dtype dtype_a, dtype_b, dtype_o;     ///< f32, f16 or bf16 each
    fmsa_view4 o_a, o_b, o;                   ///< partials and result
    fmsa_viewn lse_a, lse_b, lse;             ///< fp32: s0 = batch, s1 = head, s2 = row
} fmsa_merge_problem;

/// Bytes per element of the problem's attention dtype.
static inline size_t fmsa_problem_elem_size(const fmsa_problem *p) {
    return fmsa_dtype_size(p->dtype);
}

/// Host address of a view's origin; only meaningful where data is host memory
/// (the CPU backend, the fp64 reference and tests).
static inline char *fmsa_view4_host(const fmsa_view4 *v) {
    return (char *)v->data + v->byte_offset;
}
static inline char *fmsa_viewn_host(const fmsa_viewn *v) {
    return (char *)v->data + v->byte_offset;
}

/// Host address of an int32 metadata view (cu_seqlens, seqused_k, block
/// table), NULL when absent, so that no offset is ever added to NULL.
static inline const int *fmsa_problem_meta(const fmsa_viewn *v) {
    return v->data ? (const int *)fmsa_viewn_host(v) : NULL;
}

/// Sequence b, resolved by fmsa_seq.h's rule from host-addressable metadata.
static inline fmsa_seq fmsa_problem_seq(const fmsa_problem *p, int64_t b) {
    return fmsa_seq_resolve(b, p->is_varlen, p->is_paged, p->has_seqused_k, p->seqlen_q,
                            p->seqlen_k, fmsa_problem_meta(&p->cu_seqlens_q),
                            p->cu_seqlens_q.s0, fmsa_problem_meta(&p->cu_seqlens_k),
                            p->cu_seqlens_k.s0, fmsa_problem_meta(&p->seqused_k),
                            p->seqused_k.s0);
}

/// Element offset of key row j (0-based within sequence) of head h for k/v
/// views, following the block table when paged.  Host metadata only.
static inline int64_t fmsa_problem_k_offset(const fmsa_problem *p, const fmsa_view4 *kv,
                                            const fmsa_seq *s, int64_t b, int64_t j,
                                            int64_t h) {
    return fmsa_seq_k_offset(s, b, j, h, kv->sb, kv->ss, kv->sh, p->is_paged,
                             fmsa_problem_meta(&p->block_table), p->block_table.s0,
                             p->block_table.s1, p->page_size);
}

/// Element offset of query row i of head h in q/o/dout/dq views.
static inline int64_t fmsa_problem_q_offset(const fmsa_view4 *qv, const fmsa_seq *s,
                                            int64_t i, int64_t h) {
    return fmsa_seq_q_offset(s, i, h, qv->sb, qv->ss, qv->sh);
}

/// Element offset of lse for query row i of head h (lse is [B, Hq, Sq]; varlen [1, Hq, total_q]).
static inline int64_t fmsa_problem_lse_offset(const fmsa_problem *p, const fmsa_seq *s,
                                              int64_t i, int64_t h) {
    return fmsa_seq_q_offset(s, i, h, p->lse.s0, p->lse.s2, p->lse.s1);
}

/// Element offset of dlse for query row i of head h (dlse is laid out as lse).
static inline int64_t fmsa_problem_dlse_offset(const fmsa_problem *p, const fmsa_seq *s,
                                               int64_t i, int64_t h) {
    return fmsa_seq_q_offset(s, i, h, p->dlse.s0, p->dlse.s2, p->dlse.s1);
}

/// Key/value head read by query head h (GQA/MQA).
static inline int64_t fmsa_problem_kv_head(const fmsa_problem *p, int64_t h) {
    return h / (p->heads_q / p->heads_kv);
}

#endif /* FMSA_COMMON_PROBLEM_H */
