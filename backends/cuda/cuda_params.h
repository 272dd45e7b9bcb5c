/*
 * The kernel ABI of the CUDA backend: one flat parameter struct per pass,
 * passed by value to every kernel (FlashAttention's params-struct idea), so a
 * launch is one cuLaunchKernel with one argument.  The host fills it from the
 * validated fmsa_problem; the CUDA C kernels read it.  Plain C99 so that it
 * compiles as host C11 and as CUDA C; no pointers to host memory ever.
 *
 * Every pointer is a device address already advanced by its view's byte
 * offset; every stride is in elements.  Reserved fields (sinks, dlse, dsinks,
 * head_dim_v != head_dim) are part of the ABI from the start so the kernels of
 * the 2026-models features need no new layout; until they land the host sets
 * them to NULL / head_dim.
 */
#ifndef FMSA_CUDA_PARAMS_H
#define FMSA_CUDA_PARAMS_H

/// Device-side status bits (fmsa_cuda_fwd_params.status): metadata the host
/// cannot read without a copy (cu_seqlens, block tables) is checked in the
/// kernels, which OR these in; the next fmsa_synchronize reports them.
#define FMSA_CUDA_STATUS_BAD_CU_SEQLENS 1u  ///< cu_seqlens decreasing or past max_seqlen
#define FMSA_CUDA_STATUS_BAD_PAGE 2u        ///< block table entry outside [0, num_pages)
#define FMSA_CUDA_STATUS_BAD_SEQUSED 4u     ///< seqused_k outside [0, max_pages * page_size]

typedef struct fmsa_cuda_fwd_params {
    const void *q, *k, *v;          ///< [B, S, H, D] inputs (paged: k/v are page pools)
    void *o;                        ///< [B, Sq, Hq, Dv] output
    float *lse;                     ///< [B, Hq, Sq] natural-log LSE; NULL when not requested
    const float *alibi;             ///< [Hq] or [B, Hq]; NULL when absent
    const unsigned char *mask;      ///< bit-packed [B|1, Hq|1, Sq, ceil(Sk/8)]; NULL when absent
    const int *cu_seqlens_q;        ///< varlen [B+1]; NULL otherwise
    const int *cu_seqlens_k;        ///< varlen [B+1]; NULL otherwise
    const int *block_table;         ///< paged [B, max_pages]; NULL otherwise
    const int *seqused_k;           ///< paged, optional [B]; NULL otherwise
    const float *sinks;             ///< per-head sink logits [Hq] (stride sinks_s); NULL when absent
    unsigned int *status;           ///< device-side status word (FMSA_CUDA_STATUS_*), in workspace
    float *o_accum;                 ///< split-KV partial outputs (workspace), fp32
    float *lse_accum;               ///< split-KV partial LSEs (workspace), fp32

    long long q_sb, q_ss, q_sh;     ///< q strides: batch, seq, head
    long long k_sb, k_ss, k_sh;     ///< k strides (paged: page, row-in-page, head)
    long long v_sb, v_ss, v_sh;     ///< v strides
    long long o_sb, o_ss, o_sh;     ///< o strides
    long long lse_sb, lse_sh, lse_ss; ///< lse strides: batch, head, row
    long long alibi_sb, alibi_sh;   ///< alibi strides (batch stride 0 for [Hq])
    long long mask_sb, mask_sh, mask_ss; ///< mask strides in bytes (0 broadcasts)
    long long cu_q_s, cu_k_s;       ///< cu_seqlens element strides
    long long bt_sb, bt_sp;         ///< block table strides: batch, page
    long long su_s;                 ///< seqused_k stride
    long long sinks_s;              ///< sinks head stride

    int batch;                      ///< sequences
    int seqlen_q, seqlen_k;         ///< per-sequence lengths (varlen: max; paged: max keys)
    int heads_q, heads_kv;          ///< heads_q % heads_kv == 0
    int head_dim;                   ///< D of q and k
    int head_dim_v;                 ///< D of v and o
    int total_q, total_k;           ///< rows along dim 1 of q and k
    int page_size, max_pages, num_pages; ///< paged KV geometry (0 otherwise)
    int num_splits;                 ///< split-KV: key ranges per (row tile, head); 1 = no split
    /// Added to ALiBi's distance (fmsa_problem.alibi_offset; 0 but in the ring's passes).  In
    /// the 4 bytes of padding before window_left, so that the struct's size and every other
    /// field's offset stay as they were (the backward embeds it; cuda_params.c checks).
    int alibi_offset;
    long long window_left;          ///< -1 = unlimited
    long long window_right;         ///< -1 = unlimited; causal folded in as 0
    float softmax_scale;            ///< multiplies q.k
    float scale_log2;               ///< softmax_scale * log2(e), for the exp2 form
    float softcap;                  ///< > 0: s = softcap * tanh(s / softcap)
    int is_varlen, is_paged, has_seqused_k; ///< metadata present
} fmsa_cuda_fwd_params;

typedef struct fmsa_cuda_bwd_params {
    fmsa_cuda_fwd_params fwd;       ///< q, k, v, o and lse (an input here) and all geometry
    const void *dout;               ///< [B, Sq, Hq, Dv]
    void *dq, *dk, *dv;             ///< outputs, dtype of q
    long long do_sb, do_ss, do_sh;  ///< dout strides
    long long dq_sb, dq_ss, dq_sh;  ///< dq strides
    long long dk_sb, dk_ss, dk_sh;  ///< dk strides
    long long dv_sb, dv_ss, dv_sh;  ///< dv strides
    float *dsum;                    ///< workspace [Hq, total rows]: D_i = rowsum(dO * O) - dlse_i
    float *dq_accum;                ///< workspace fp32 dQ accumulator (rows padded to the tile)
    float *dk_accum, *dv_accum;     ///< workspace fp32 dK/dV when heads_q > heads_kv
    const float *dlse;              ///< [B, Hq, Sq] gradient of the lse output; NULL when absent
    float *dsinks;                  ///< [Hq] sink gradient output; NULL when not requested
    int deterministic;              ///< no float atomics: fixed accumulation order
    int *dq_sems;                   ///< workspace: deterministic dQ turn counters, then one block ticket
    int num_sems;                   ///< ints at dq_sems (the preprocess zeroes them)
    int accum_dim;                  ///< row width of dq_accum: the instance's head dim (>= head_dim)
    long long dlse_sb, dlse_sh, dlse_ss; ///< dlse strides: batch, head, row
    const float *sink_logits;       ///< desc.sinks [Hq] as the dsink stage reads it; NULL when absent
    long long sink_logits_s;        ///< its head stride
    long long dsinks_s;             ///< dsinks head stride
} fmsa_cuda_bwd_params;

/// Element types of fmsa_cuda_merge_params.
#define FMSA_CUDA_MERGE_F32 0
#define FMSA_CUDA_MERGE_F16 1
#define FMSA_CUDA_MERGE_BF16 2

/// fmsa_merge_states: o = merge((o_a, lse_a), (o_b, lse_b)), all [B, S, H, Dv]
/// (lse [B, H, S]); o may be o_a or o_b (each element is read before it is written).
typedef struct fmsa_cuda_merge_params {
    const void *o_a, *o_b;          ///< partials
    void *o;                        ///< result
    const float *lse_a, *lse_b;     ///< natural-log LSEs of the partials
    float *lse;                     ///< merged LSE
    long long oa_sb, oa_ss, oa_sh;  ///< o_a strides: batch, seq, head
    long long ob_sb, ob_ss, ob_sh;  ///< o_b strides
    long long o_sb, o_ss, o_sh;     ///< o strides
    long long la_sb, la_sh, la_ss;  ///< lse_a strides: batch, head, row
    long long lb_sb, lb_sh, lb_ss;  ///< lse_b strides
    long long l_sb, l_sh, l_ss;     ///< lse strides
    unsigned long long rows;        ///< batch * seqlen * heads
    int batch, seqlen, heads, head_dim_v;
    int dtype_a, dtype_b, dtype_o;  ///< FMSA_CUDA_MERGE_*
    int vec4;                       ///< 1: every row's o_a, o_b, o start 4-element aligned
} fmsa_cuda_merge_params;

/// The ring's elementwise op (common/accumulate.h): dst = src, dst += src, dst += fill * src
/// or dst = fill over a 4-d strided view, fp32 arithmetic; dtypes FMSA_CUDA_MERGE_*.
typedef struct fmsa_cuda_acc_params {
    void *dst;                      ///< written
    const void *src;                ///< read (NULL for fill)
    long long ds[4], ss[4];         ///< element strides of dst and src
    long long n1, n2, n3;           ///< extents of dims 1..3 (dim 0 follows from count)
    long long count;                ///< elements
    float fill;                     ///< the fill value (ADD_SCALED: the scale)
    int mode;                       ///< FMSA_ACC_COPY / ADD / FILL / ADD_SCALED (0 / 1 / 2 / 3)
    int dtype_dst, dtype_src;       ///< FMSA_CUDA_MERGE_*
} fmsa_cuda_acc_params;

#endif /* FMSA_CUDA_PARAMS_H */
