/*
 * The public attention entry points: validate once, ask the backend whether
 * it supports the problem and how much workspace it needs, then run.  All
 * checks precede the backend call, so a failure writes nothing.  The passes
 * with an ALiBi offset (attention_offset.h, the ring's) are the same code.
 */
#include "common/accumulate.h"
#include "common/attention_offset.h"
#include "common/context.h"
#include "common/error.h"
#include "common/validate.h"
#include "common/validate_memory.h"

static fmsa_status fmsa_ctx_reader(void *state, void *dst, const void *src, size_t src_offset,
                                   size_t bytes) {
    const fmsa_context *ctx = (const fmsa_context *)state;
    return ctx->vt->copy_to_host(ctx->state, dst, src, src_offset, bytes);
}

/* Validation + support check, shared by the three entry points. */
/* How the memory checks may look at this context's tensor data. */
static fmsa_mem_policy fmsa_ctx_mem_policy(fmsa_context *ctx) {
    fmsa_mem_policy pol;
    pol.handles = ctx->vt->data_handles;
    pol.mem_size = ctx->vt->mem_size;
    pol.mem_range = ctx->vt->mem_range;
    pol.state = ctx->state;
    return pol;
}

static fmsa_status fmsa_prepare(fmsa_context *ctx, fmsa_pass pass,
                                const fmsa_attention_desc *desc, const fmsa_call_tensors *t,
                                int shape_only, fmsa_problem *p) {
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    FMSA_TRY(fmsa_problem_build_meta(p, pass, desc, t, shape_only, fmsa_ctx_reader, ctx,
                                     ctx->vt->meta_access == FMSA_META_DEFERRED));
    /* a malformed view (misaligned, past its buffer, overlapping) is the
     * caller's error on every backend, before any backend's own limits: the
     * tensors now, the workspace once its size is known (fmsa_check_workspace) */
    if (!shape_only) {
        const fmsa_mem_policy pol = fmsa_ctx_mem_policy(ctx);
        FMSA_TRY(fmsa_check_call_memory(pass, desc, t, &pol));
    }
    if (ctx->vt->supports) FMSA_TRY(ctx->vt->supports(ctx->state, p));
    return FMSA_SUCCESS;
}

/* The workspace: large enough, present, and sharing no byte with the call's
 * tensors (asked of the backend once per call). */
static fmsa_status fmsa_check_workspace(fmsa_context *ctx, const fmsa_problem *p,
                                        const fmsa_attention_desc *desc,
                                        const fmsa_call_tensors *t, void *ws, size_t ws_bytes) {
    size_t need = 0;
    fmsa_mem_policy pol;
    FMSA_TRY(ctx->vt->workspace_size(ctx->state, p, &need));
    if (ws_bytes < need)
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "workspace_bytes = %zu: this problem needs %zu (fmsa_workspace_size)",
                         ws_bytes, need);
    if (need > 0 && !ws)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "workspace is NULL but %zu bytes are needed",
                         need);
    pol = fmsa_ctx_mem_policy(ctx);
    return fmsa_check_workspace_memory(p->pass, desc, t, ws, need, &pol);
}

fmsa_status fmsa_workspace_size(fmsa_context *ctx, fmsa_pass pass,
                                const fmsa_attention_desc *desc, const fmsa_tensor *q,
                                const fmsa_tensor *k, const fmsa_tensor *v, size_t *bytes) {
    fmsa_call_tensors t = {0};
    fmsa_problem p;
    fmsa_clear_error();
    if (!bytes) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = 0;
    t.q = q;
    t.k = k;
    t.v = v;
    FMSA_TRY(fmsa_prepare(ctx, pass, desc, &t, 1, &p));
    return ctx->vt->workspace_size(ctx->state, &p, bytes);
}

fmsa_status fmsa_forward(fmsa_context *ctx, const fmsa_attention_desc *desc, const fmsa_tensor *q,
                         const fmsa_tensor *k, const fmsa_tensor *v, const fmsa_tensor *o,
                         const fmsa_tensor *lse, void *workspace, size_t workspace_bytes,
                         void *stream) {
    return fmsa_forward_offset(ctx, desc, 0, q, k, v, o, lse, workspace, workspace_bytes, stream);
}

fmsa_status fmsa_forward_offset(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                int64_t alibi_offset, const fmsa_tensor *q, const fmsa_tensor *k,
                                const fmsa_tensor *v, const fmsa_tensor *o, const fmsa_tensor *lse,
                                void *workspace, size_t workspace_bytes, void *stream) {
    fmsa_call_tensors t = {0};
    fmsa_problem p;
    fmsa_clear_error();
    t.q = q;
    t.k = k;
    t.v = v;
    t.o = o;
    t.lse = lse;
    FMSA_TRY(fmsa_prepare(ctx, FMSA_PASS_FORWARD, desc, &t, 0, &p));
    if (p.has_alibi) p.alibi_offset = alibi_offset;
    FMSA_TRY(fmsa_check_workspace(ctx, &p, desc, &t, workspace, workspace_bytes));
    if (p.batch == 0 || p.total_q == 0) return FMSA_SUCCESS; /* nothing to compute or write */
    return ctx->vt->forward(ctx->state, &p, workspace, workspace_bytes, stream);
}

/* dsink of a problem with no rows: zeros, on the call's stream where the
 * backend has the elementwise fill (a kernel, so the call stays graph-safe
 * and ordered with the caller's work), else through host-to-device copies. */
static fmsa_status fmsa_zero_dsink(fmsa_context *ctx, const fmsa_problem *p,
                                   const fmsa_tensor *dsink, void *stream) {
    const float zero = 0.0f;
    if (!p->has_dsink) return FMSA_SUCCESS;
    if (ctx->vt->accumulate) return fmsa_accumulate(ctx, FMSA_ACC_FILL, dsink, NULL, 0.0f, stream);
    for (int64_t h = 0; h < p->heads_q; ++h)
        FMSA_TRY(ctx->vt->copy_to_device(
            ctx->state, p->dsink.data,
            (size_t)(p->dsink.byte_offset + h * p->dsink.s0 * (int64_t)sizeof zero), &zero,
            sizeof zero));
    return FMSA_SUCCESS;
}

fmsa_status fmsa_backward(fmsa_context *ctx, const fmsa_attention_desc *desc,
                          const fmsa_backward_tensors *bt, void *workspace,
                          size_t workspace_bytes, void *stream) {
    return fmsa_backward_offset(ctx, desc, 0, bt, workspace, workspace_bytes, stream);
}

fmsa_status fmsa_backward_offset(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                 int64_t alibi_offset, const fmsa_backward_tensors *bt,
                                 void *workspace, size_t workspace_bytes, void *stream) {
    fmsa_call_tensors t;
    fmsa_problem p;
    fmsa_clear_error();
    if (!bt) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "t (the backward's tensors) is NULL");
    t = fmsa_call_tensors_of_backward(bt);
    FMSA_TRY(fmsa_prepare(ctx, FMSA_PASS_BACKWARD, desc, &t, 0, &p));
    if (p.has_alibi) p.alibi_offset = alibi_offset;
    FMSA_TRY(fmsa_check_workspace(ctx, &p, desc, &t, workspace, workspace_bytes));
    /* nothing to compute, but dsink is still owed its value: the sum over no rows */
    if (p.batch == 0 || (p.total_q == 0 && p.total_k == 0)) return fmsa_zero_dsink(ctx, &p, &bt->dsink, stream);
    return ctx->vt->backward(ctx->state, &p, workspace, workspace_bytes, stream);
}

fmsa_status fmsa_merge_states(fmsa_context *ctx, const fmsa_tensor *o_a, const fmsa_tensor *lse_a,
                              const fmsa_tensor *o_b, const fmsa_tensor *lse_b,
                              const fmsa_tensor *o, const fmsa_tensor *lse, void *stream) {
    fmsa_merge_problem mp;
    fmsa_clear_error();
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    FMSA_TRY(fmsa_merge_problem_build(&mp, o_a, lse_a, o_b, lse_b, o, lse));
    {
        const fmsa_mem_policy pol = fmsa_ctx_mem_policy(ctx);
        FMSA_TRY(fmsa_check_merge_memory(o_a, lse_a, o_b, lse_b, o, lse, &pol));
    }
    if (!ctx->vt->merge)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: fmsa_merge_states is not supported by this backend", ctx->vt->name);
    if (mp.batch == 0 || mp.seqlen == 0 || mp.heads == 0) return FMSA_SUCCESS;
    return ctx->vt->merge(ctx->state, &mp, stream);
}
