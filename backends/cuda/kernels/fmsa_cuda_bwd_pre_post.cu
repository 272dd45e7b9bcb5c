/*
 * The backward's preprocess, postprocess and dsink stages: a group of lanes per
 * (row of the q tensor, query head), so neither reads cu_seqlens (every row
 * of a varlen tensor belongs to some sequence; rows are never skipped).
 */
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"

/// Lanes per (row, head) of pre and post: one 8-element chunk each, the
/// next power of two of head_dim / 8, at most 32 (larger D loops); the host
/// sizes the grids with fmsa_cuda_bwd_aux_lanes, the same rule.
FMSA_DEV int fmsa_bwd_aux_lanes(int head_dim) {
    int l = 1;
    while (l < 32 && l * 8 < head_dim) l *= 2;
    return l;
}

/// The element type argument of pre and post for fp32 tensors (BF16 = 1 bf16, 0 f16).
#define FMSA_BWD_AUX_F32 2

/// D_i = rowsum(dO * O) (- dlse_i) in fp32; zeroes the row's dq_accum and,
/// from the first threads of the grid, the deterministic counters.  OWNV: the
/// rows of O and dO have head_dim_v columns (the _V instances' preprocess);
/// 0 reads head_dim, as the square rows always have (their kernel unchanged).
/// BF16 = FMSA_BWD_AUX_F32: fp32 O and dO (the fp32 list's rows, OWNV 1).
template <int BF16, int OWNV = 0>
FMSA_DEV void fmsa_bwd_pre(const fmsa_cuda_bwd_params &P) {
    const fmsa_cuda_fwd_params &F = P.fwd;
    const int L = fmsa_bwd_aux_lanes(F.head_dim);
    const int lane = threadIdx.x & (L - 1);
    const long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long rows = (long long)(F.is_varlen ? 1 : F.batch) * F.total_q;
    const long long w = gtid / L;
    for (long long i = gtid; i < P.num_sems; i += (long long)gridDim.x * blockDim.x) P.dq_sems[i] = 0;
    const int live = w < rows * F.heads_q;
    const long long row = live ? w / F.heads_q : 0;
    const int h = live ? (int)(w % F.heads_q) : 0;
    const long long qb = row / F.total_q, r = row % F.total_q;
    float acc = 0.0f;
    if (BF16 == FMSA_BWD_AUX_F32 && live) {
        const float *o = (const float *)F.o + qb * F.o_sb + r * F.o_ss + h * F.o_sh;
        const float *d = (const float *)P.dout + qb * P.do_sb + r * P.do_ss + h * P.do_sh;
        for (int c = lane * 8; c < (OWNV ? F.head_dim_v : F.head_dim); c += 8 * L) {
            const float4 o0 = *(const float4 *)(o + c), o1 = *(const float4 *)(o + c + 4);
            const float4 d0 = *(const float4 *)(d + c), d1 = *(const float4 *)(d + c + 4);
            acc += o0.x * d0.x;
            acc += o0.y * d0.y;
            acc += o0.z * d0.z;
            acc += o0.w * d0.w;
            acc += o1.x * d1.x;
            acc += o1.y * d1.y;
            acc += o1.z * d1.z;
            acc += o1.w * d1.w;
        }
    } else if (live) {
        const unsigned short *o = (const unsigned short *)F.o + qb * F.o_sb + r * F.o_ss + h * F.o_sh;
        const unsigned short *d = (const unsigned short *)P.dout + qb * P.do_sb + r * P.do_ss + h * P.do_sh;
        for (int c = lane * 8; c < (OWNV ? F.head_dim_v : F.head_dim); c += 8 * L) {
            const uint4 ov = *(const uint4 *)(o + c), dv = *(const uint4 *)(d + c);
            const unsigned ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc += fmsa_half_to_float<BF16>((unsigned short)(ow[e] & 0xffffu)) *
                       fmsa_half_to_float<BF16>((unsigned short)(dw[e] & 0xffffu));
                acc += fmsa_half_to_float<BF16>((unsigned short)(ow[e] >> 16)) *
                       fmsa_half_to_float<BF16>((unsigned short)(dw[e] >> 16));
            }
        }
    }
    /* groups of L lanes are aligned, so xor within them stays inside */
    for (int sh = L / 2; sh > 0; sh >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, sh);
    if (!live) return;
    if (lane == 0) {
        if (P.dlse) acc -= P.dlse[qb * P.dlse_sb + h * P.dlse_sh + r * P.dlse_ss];
        P.dsum[(long long)h * rows + row] = acc;
    }
    float4 *z = (float4 *)(P.dq_accum + (row * F.heads_q + h) * (long long)P.accum_dim);
    for (int c = lane; c < P.accum_dim / 4; c += L) z[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

/// dq = dq_accum * softmax_scale, rounded to the dtype (BF16 = FMSA_BWD_AUX_F32: fp32).
template <int BF16>
FMSA_DEV void fmsa_bwd_post(const fmsa_cuda_bwd_params &P) {
    const fmsa_cuda_fwd_params &F = P.fwd;
    const int L = fmsa_bwd_aux_lanes(F.head_dim);
    const int lane = threadIdx.x & (L - 1);
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / L;
    const long long rows = (long long)(F.is_varlen ? 1 : F.batch) * F.total_q;
    if (w >= rows * F.heads_q) return;
    const long long row = w / F.heads_q;
    const int h = (int)(w % F.heads_q);
    const long long qb = row / F.total_q, r = row % F.total_q;
    const float *a = P.dq_accum + (row * F.heads_q + h) * (long long)P.accum_dim;
    if (BF16 == FMSA_BWD_AUX_F32) {
        float *dqf = (float *)P.dq + qb * P.dq_sb + r * P.dq_ss + h * P.dq_sh;
        const float sc = F.softmax_scale;
        for (int c = lane * 8; c < F.head_dim; c += 8 * L) {
            const float4 x = __ldcg((const float4 *)(a + c)), y = __ldcg((const float4 *)(a + c + 4));
            *(float4 *)(dqf + c) = make_float4(x.x * sc, x.y * sc, x.z * sc, x.w * sc);
            *(float4 *)(dqf + c + 4) = make_float4(y.x * sc, y.y * sc, y.z * sc, y.w * sc);
        }
        return;
    }
    unsigned short *dq = (unsigned short *)P.dq + qb * P.dq_sb + r * P.dq_ss + h * P.dq_sh;
    const float sc = F.softmax_scale;
    for (int c = lane * 8; c < F.head_dim; c += 8 * L) {
        const float4 x = __ldcg((const float4 *)(a + c)), y = __ldcg((const float4 *)(a + c + 4));
        uint4 o;
        o.x = fmsa_pack2<BF16>(x.x * sc, x.y * sc);
        o.y = fmsa_pack2<BF16>(x.z * sc, x.w * sc);
        o.z = fmsa_pack2<BF16>(y.x * sc, y.y * sc);
        o.w = fmsa_pack2<BF16>(y.z * sc, y.w * sc);
        *(uint4 *)(dq + c) = o;
    }
}

/// dq = dq_accum * softmax_scale for the rows with OPT bit 13 (fmsa_bwd_main's
/// tiled accumulator: tiles of 16 rows x 8 columns, [sequence][head][row / 16]
/// [column / 8], lane g * 4 + t4 of a tile holding rows g, g + 8 at columns
/// 2 t4, 2 t4 + 1), where the main stage uses it (the same test: not varlen,
/// seqlen_q a multiple of 16); elsewhere the row layout of fmsa_bwd_post.  A
/// thread reads the 64 contiguous bytes of rows rr, rr + 8 of one tile and
/// writes 8 columns of each; consecutive threads take consecutive columns.
template <int BF16>
FMSA_DEV void fmsa_bwd_post_t(const fmsa_cuda_bwd_params &P) {
    const fmsa_cuda_fwd_params &F = P.fwd;
    if (F.is_varlen || F.seqlen_q % 16 || F.total_q != F.seqlen_q) {
        fmsa_bwd_post<BF16>(P);
        return;
    }
    const int nch = F.head_dim / 8, g16 = F.seqlen_q / 16;
    const long long n = (long long)F.batch * F.heads_q * g16 * 8 * nch;
    const float sc = F.softmax_scale;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < n;
         w += (long long)gridDim.x * blockDim.x) {
        const int c8 = (int)(w % nch);
        long long rest = w / nch;
        const int rr = (int)(rest % 8);
        rest /= 8;
        const int r16 = (int)(rest % g16);
        const long long bh = rest / g16;
        const int h = (int)(bh % F.heads_q);
        const long long qb = bh / F.heads_q;
        const float4 *t = (const float4 *)(P.dq_accum + (bh * g16 + r16) * 16LL * P.accum_dim + c8 * 128 + rr * 16);
        const float4 v0 = __ldcg(t), v1 = __ldcg(t + 1), v2 = __ldcg(t + 2), v3 = __ldcg(t + 3);
        const long long ra = (long long)r16 * 16 + rr;
        unsigned short *da = (unsigned short *)P.dq + qb * P.dq_sb + ra * P.dq_ss + h * P.dq_sh + c8 * 8;
        uint4 oa, ob;
        oa.x = fmsa_pack2<BF16>(v0.x * sc, v0.y * sc);
        oa.y = fmsa_pack2<BF16>(v1.x * sc, v1.y * sc);
        oa.z = fmsa_pack2<BF16>(v2.x * sc, v2.y * sc);
        oa.w = fmsa_pack2<BF16>(v3.x * sc, v3.y * sc);
        ob.x = fmsa_pack2<BF16>(v0.z * sc, v0.w * sc);
        ob.y = fmsa_pack2<BF16>(v1.z * sc, v1.w * sc);
        ob.z = fmsa_pack2<BF16>(v2.z * sc, v2.w * sc);
        ob.w = fmsa_pack2<BF16>(v3.z * sc, v3.w * sc);
        *(uint4 *)da = oa;
        *(uint4 *)(da + 8 * P.dq_ss) = ob;
    }
}

/// dsink_h = -sum over rows i of exp(t_h - lse_i) (rowsum(dO * O)_i - dlse_i),
/// the sum over every row of every sequence of head h (block h), in a fixed
/// order: each thread adds a fixed stride of rows, then a fixed tree, so the
/// result is bitwise repeatable in both modes.
FMSA_DEV void fmsa_bwd_dsink(const fmsa_cuda_bwd_params &P) {
    __shared__ float part[FMSA_CUDA_BWD_DSINK_THREADS];
    const fmsa_cuda_fwd_params &F = P.fwd;
    const int h = blockIdx.x, tid = threadIdx.x;
    const long long rows = (long long)(F.is_varlen ? 1 : F.batch) * F.total_q;
    const float t = P.sink_logits[h * P.sink_logits_s];
    float acc = 0.0f;
    for (long long row = tid; row < rows; row += FMSA_CUDA_BWD_DSINK_THREADS) {
        const long long qb = row / F.total_q, r = row % F.total_q;
        const float lse = F.lse[qb * F.lse_sb + h * F.lse_sh + r * F.lse_ss];
        /* a sink of -inf takes no mass; nor does a row with lse = -inf (no key, no sink) */
        const float w = (t == -INFINITY || lse == -INFINITY) ? 0.0f : expf(t - lse);
        acc += w * P.dsum[(long long)h * rows + row];
    }
    part[tid] = acc;
    __syncthreads();
    for (int w = FMSA_CUDA_BWD_DSINK_THREADS / 2; w > 0; w >>= 1) {
        if (tid < w) part[tid] += part[tid + w];
        __syncthreads();
    }
    if (tid == 0) P.dsinks[h * P.dsinks_s] = -part[0];
}

extern "C" __global__ void __launch_bounds__(FMSA_CUDA_BWD_DSINK_THREADS) fmsa_cuda_bwd_dsink(
    const fmsa_cuda_bwd_params p) {
    fmsa_bwd_dsink(p);
}
/* fp32 tensors (cuda_bwd_f32_instances.h): O and dO of head_dim_v columns */
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_pre_f32(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_pre<FMSA_BWD_AUX_F32, 1>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_post_f32(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_post<FMSA_BWD_AUX_F32>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_pre_bf16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_pre<1>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_pre_f16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_pre<0>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_pre_dv_bf16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_pre<1, 1>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_pre_dv_f16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_pre<0, 1>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_post_bf16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_post<1>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_post_f16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_post<0>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_post_t_bf16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_post_t<1>(p);
}
extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_bwd_post_t_f16(const fmsa_cuda_bwd_params p) {
    fmsa_bwd_post_t<0>(p);
}
