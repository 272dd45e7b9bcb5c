/*
 * fmsa_merge_states on the device: one warp per (sequence, row, head), the
 * lanes over the value columns, 4 consecutive columns a lane (8- or 16-byte
 * accesses) where every row starts 4-element aligned, else one.  Every element is read before the same thread
 * writes it and the row's LSEs are read by every lane before lane 0 writes
 * the merged one, so o may be o_a or o_b and lse may be lse_a or lse_b.
 */
#include "../cuda_params.h"
#include "fmsa_cuda_elem.cuh"
#include "fmsa_cuda_merge.cuh"

/* Four consecutive elements, i a multiple of 4 and the address 4-element aligned. */
FMSA_DEV void fmsa_cuda_merge_load4(const void *base, long long i, int dtype, float x[4]) {
    if (dtype == FMSA_CUDA_MERGE_F32) {
        const float4 v = ((const float4 *)base)[i >> 2];
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
        return;
    }
    const uint2 v = ((const uint2 *)base)[i >> 2];
    const unsigned w[2] = {v.x, v.y};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const unsigned short u = (unsigned short)(w[k >> 1] >> (16 * (k & 1)));
        if (dtype == FMSA_CUDA_MERGE_BF16) x[k] = __uint_as_float((unsigned)u << 16);
        else asm("cvt.f32.f16 %0, %1;\n" : "=f"(x[k]) : "h"(u));
    }
}

FMSA_DEV void fmsa_cuda_merge_store4(void *base, long long i, int dtype, const float x[4]) {
    if (dtype == FMSA_CUDA_MERGE_F32) {
        ((float4 *)base)[i >> 2] = make_float4(x[0], x[1], x[2], x[3]);
        return;
    }
    unsigned short u[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if (dtype == FMSA_CUDA_MERGE_BF16) asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(u[k]) : "f"(x[k]));
        else asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(u[k]) : "f"(x[k]));
    }
    ((uint2 *)base)[i >> 2] = make_uint2((unsigned)u[0] | (unsigned)u[1] << 16,
                                         (unsigned)u[2] | (unsigned)u[3] << 16);
}

extern "C" __global__ void __launch_bounds__(128) fmsa_cuda_merge(const fmsa_cuda_merge_params p) {
    const int lane = (int)threadIdx.x & 31;
    const unsigned long long row =
        (unsigned long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    long long b, i, h;
    if (row >= p.rows) return;
    if (p.rows <= 0xffffffffull) { /* 32-bit divisions: a 64-bit one is a long subroutine */
        const unsigned r = (unsigned)row, t = r / (unsigned)p.heads;
        h = r - t * (unsigned)p.heads, i = t % (unsigned)p.seqlen, b = t / (unsigned)p.seqlen;
    } else {
        h = (long long)(row % (unsigned long long)p.heads);
        i = (long long)(row / (unsigned long long)p.heads % (unsigned long long)p.seqlen);
        b = (long long)(row / ((unsigned long long)p.heads * (unsigned long long)p.seqlen));
    }
    const float la = p.lse_a[b * p.la_sb + h * p.la_sh + i * p.la_ss];
    const float lb = p.lse_b[b * p.lb_sb + h * p.lb_sh + i * p.lb_ss];
    __syncwarp(); /* every lane has read the LSEs (lse may be lse_a or lse_b) */
    const long long ia = b * p.oa_sb + i * p.oa_ss + h * p.oa_sh;
    const long long ib = b * p.ob_sb + i * p.ob_ss + h * p.ob_sh;
    const long long io = b * p.o_sb + i * p.o_ss + h * p.o_sh;
    if (p.vec4) {
        for (int c = 4 * lane; c < p.head_dim_v; c += 128) {
            float lse = la, o[4], ob[4];
            fmsa_cuda_merge_load4(p.o_a, ia + c, p.dtype_a, o);
            fmsa_cuda_merge_load4(p.o_b, ib + c, p.dtype_b, ob);
            fmsa_cuda_merge_step<4>(&lse, o, lb, ob);
            fmsa_cuda_merge_store4(p.o, io + c, p.dtype_o, o);
        }
    } else {
        for (int c = lane; c < p.head_dim_v; c += 32) {
            float lse = la, o[1], ob[1];
            o[0] = fmsa_cuda_elem_load(p.o_a, ia + c, p.dtype_a);
            ob[0] = fmsa_cuda_elem_load(p.o_b, ib + c, p.dtype_b);
            fmsa_cuda_merge_step<1>(&lse, o, lb, ob);
            fmsa_cuda_elem_store(p.o, io + c, p.dtype_o, o[0]);
        }
    }
    if (lane == 0) {
        float wa, wb;
        p.lse[b * p.l_sb + h * p.l_sh + i * p.l_ss] = fmsa_softmax_merge_lse(la, lb, &wa, &wb);
    }
}
