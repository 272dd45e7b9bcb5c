/*
 * The kernel-argument structs (cuda_params.h) from a validated problem:
 * device addresses advanced by their byte offsets, strides in elements,
 * geometry narrowed to the kernels' int (fmsa_cuda_plan_make has checked
 * that it fits) and the softmax scale in exp2 form.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

/* log2(e), so that exp(x * scale) = exp2(x * scale * log2(e)). */
#define FMSA_CUDA_LOG2E 1.4426950408889634

static fmsa_cu_deviceptr fmsa_cuda_at(const void *data, int64_t byte_offset) {
    return data ? (fmsa_cu_deviceptr)(uintptr_t)data + (fmsa_cu_deviceptr)byte_offset : 0;
}

/* alibi_offset fills padding: the layout of every other field is unchanged. */
_Static_assert(offsetof(fmsa_cuda_fwd_params, alibi_offset) + sizeof(int) ==
                   offsetof(fmsa_cuda_fwd_params, window_left),
               "fmsa_cuda_fwd_params.alibi_offset must sit in the padding before window_left");

#define FMSA_CUDA_PTR(type, data, off) ((type)(uintptr_t)fmsa_cuda_at((data), (off)))
#define FMSA_CUDA_WS(type, ws, off)                                            \
    ((off) == FMSA_CUDA_WS_NONE ? (type)0 : (type)(uintptr_t)((ws) + (off)))

void fmsa_cuda_fwd_params_fill(const fmsa_problem *p, const fmsa_cuda_plan *plan,
                               fmsa_cu_deviceptr status, fmsa_cu_deviceptr workspace,
                               fmsa_cuda_fwd_params *out) {
    memset(out, 0, sizeof *out);
    out->q = FMSA_CUDA_PTR(const void *, p->q.data, p->q.byte_offset);
    out->k = FMSA_CUDA_PTR(const void *, p->k.data, p->k.byte_offset);
    out->v = FMSA_CUDA_PTR(const void *, p->v.data, p->v.byte_offset);
    out->o = FMSA_CUDA_PTR(void *, p->o.data, p->o.byte_offset);
    if (p->has_lse) out->lse = FMSA_CUDA_PTR(float *, p->lse.data, p->lse.byte_offset);
    if (p->has_alibi) out->alibi = FMSA_CUDA_PTR(const float *, p->alibi.data, p->alibi.byte_offset);
    if (p->has_mask)
        out->mask = FMSA_CUDA_PTR(const unsigned char *, p->mask.data, p->mask.byte_offset);
    if (p->is_varlen) {
        out->cu_seqlens_q = FMSA_CUDA_PTR(const int *, p->cu_seqlens_q.data,
                                          p->cu_seqlens_q.byte_offset);
        out->cu_seqlens_k = FMSA_CUDA_PTR(const int *, p->cu_seqlens_k.data,
                                          p->cu_seqlens_k.byte_offset);
    }
    if (p->is_paged)
        out->block_table = FMSA_CUDA_PTR(const int *, p->block_table.data,
                                         p->block_table.byte_offset);
    if (p->has_seqused_k)
        out->seqused_k = FMSA_CUDA_PTR(const int *, p->seqused_k.data, p->seqused_k.byte_offset);
    if (p->has_sinks) out->sinks = FMSA_CUDA_PTR(const float *, p->sinks.data, p->sinks.byte_offset);
    out->status = (unsigned int *)(uintptr_t)status;
    out->o_accum = FMSA_CUDA_WS(float *, workspace, plan->ws_o_accum);
    out->lse_accum = FMSA_CUDA_WS(float *, workspace, plan->ws_lse_accum);

    out->q_sb = p->q.sb, out->q_ss = p->q.ss, out->q_sh = p->q.sh;
    out->k_sb = p->k.sb, out->k_ss = p->k.ss, out->k_sh = p->k.sh;
    out->v_sb = p->v.sb, out->v_ss = p->v.ss, out->v_sh = p->v.sh;
    out->o_sb = p->o.sb, out->o_ss = p->o.ss, out->o_sh = p->o.sh;
    out->lse_sb = p->lse.s0, out->lse_sh = p->lse.s1, out->lse_ss = p->lse.s2;
    out->alibi_sb = p->alibi.s0, out->alibi_sh = p->alibi.s1;
    out->mask_sb = p->mask.s0, out->mask_sh = p->mask.s1, out->mask_ss = p->mask.s2;
    out->cu_q_s = p->cu_seqlens_q.s0, out->cu_k_s = p->cu_seqlens_k.s0;
    out->bt_sb = p->block_table.s0, out->bt_sp = p->block_table.s1;
    out->su_s = p->seqused_k.s0;
    out->sinks_s = p->sinks.s0;

    out->batch = (int)p->batch;
    out->seqlen_q = (int)p->seqlen_q;
    out->seqlen_k = (int)p->seqlen_k;
    out->heads_q = (int)p->heads_q;
    out->heads_kv = (int)p->heads_kv;
    out->head_dim = (int)p->head_dim;
    out->head_dim_v = (int)p->head_dim_v;
    out->total_q = (int)p->total_q;
    out->total_k = (int)p->total_k;
    out->page_size = (int)p->page_size;
    out->max_pages = (int)p->max_pages;
    out->num_pages = (int)p->num_pages;
    out->num_splits = plan->num_splits > 0 ? plan->num_splits : 1;
    out->alibi_offset = (int)p->alibi_offset; /* fmsa_cuda_plan_make checked its range */
    out->window_left = p->window_left;
    out->window_right = p->window_right;
    out->softmax_scale = p->softmax_scale;
    out->scale_log2 = (float)((double)p->softmax_scale * FMSA_CUDA_LOG2E);
    out->softcap = p->softcap;
    out->is_varlen = p->is_varlen;
    out->is_paged = p->is_paged;
    out->has_seqused_k = p->has_seqused_k;
}

void fmsa_cuda_bwd_params_fill(const fmsa_problem *p, const fmsa_cuda_plan *plan,
                               fmsa_cu_deviceptr status, fmsa_cu_deviceptr workspace,
                               fmsa_cuda_bwd_params *out) {
    memset(out, 0, sizeof *out);
    fmsa_cuda_fwd_params_fill(p, plan, status, workspace, &out->fwd);
    /* o is an input of the backward, lse too (validation requires it) */
    out->dout = FMSA_CUDA_PTR(const void *, p->dout.data, p->dout.byte_offset);
    out->dq = FMSA_CUDA_PTR(void *, p->dq.data, p->dq.byte_offset);
    out->dk = FMSA_CUDA_PTR(void *, p->dk.data, p->dk.byte_offset);
    out->dv = FMSA_CUDA_PTR(void *, p->dv.data, p->dv.byte_offset);
    out->do_sb = p->dout.sb, out->do_ss = p->dout.ss, out->do_sh = p->dout.sh;
    out->dq_sb = p->dq.sb, out->dq_ss = p->dq.ss, out->dq_sh = p->dq.sh;
    out->dk_sb = p->dk.sb, out->dk_ss = p->dk.ss, out->dk_sh = p->dk.sh;
    out->dv_sb = p->dv.sb, out->dv_ss = p->dv.ss, out->dv_sh = p->dv.sh;
    out->dsum = FMSA_CUDA_WS(float *, workspace, plan->ws_dsum);
    out->dq_accum = FMSA_CUDA_WS(float *, workspace, plan->ws_dq_accum);
    out->dk_accum = FMSA_CUDA_WS(float *, workspace, plan->ws_dk_accum);
    out->dv_accum = FMSA_CUDA_WS(float *, workspace, plan->ws_dv_accum);
    if (p->has_dlse) {
        out->dlse = FMSA_CUDA_PTR(const float *, p->dlse.data, p->dlse.byte_offset);
        out->dlse_sb = p->dlse.s0, out->dlse_sh = p->dlse.s1, out->dlse_ss = p->dlse.s2;
    }
    if (p->has_sinks) {
        out->sink_logits = FMSA_CUDA_PTR(const float *, p->sinks.data, p->sinks.byte_offset);
        out->sink_logits_s = p->sinks.s0;
    }
    if (p->has_dsink) {
        out->dsinks = FMSA_CUDA_PTR(float *, p->dsink.data, p->dsink.byte_offset);
        out->dsinks_s = p->dsink.s0;
    }
    out->deterministic = p->deterministic;
}
