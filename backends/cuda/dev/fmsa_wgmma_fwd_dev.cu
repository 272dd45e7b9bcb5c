/*
 * Development harness of the Hopper forward kernel in development
 * (kernels/fmsa_cuda_fwd_wg.cu; CUDA runtime, sm_90a; not part of the
 * library): runs it on random bf16 / f16 inputs, compares O and the LSE
 * with an fp32 reference kernel on the same inputs (bottom-right causal and
 * windows as the library's) on at most ~32768 sampled rows, scans every row
 * for non-finite values, and times it.  Not a test of the correctness
 * rule: the grids do that once the kernel is in the library.
 *
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -Iinclude \
 *        -o fwd_dev backends/cuda/dev/fmsa_wgmma_fwd_dev.cu
 *   ./fwd_dev bf16|f16[:ovl|:ws] B HQ HKV SQ SK WL WR [reps [D]]   (WL / WR -1: unlimited; WR 0: causal)
 * ":ovl" runs the overlapped schedule (fmsa_cuda_fwd_wg_*_d<D>_ovl), ":ws" the warp-specialised
 * one (_ws, 384 threads); D 128 (default) or 256.
 * prints the largest |O - O_ref|, |LSE - LSE_ref|, the count of non-finite
 * outputs, the time a call and TFLOP/s (4 B HQ D x visible (query, key) pairs).
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/dev/fmsa_dev_check.h"
#define FMSA_CUDA_FWD_WG_WS 1 /* the warp-specialised schedule too */
#include "backends/cuda/kernels/fmsa_cuda_fwd_wg.cu"

__device__ float to_f(unsigned short v, int bf16) {
    return bf16 ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}

/* one thread a (batch, head, row), every stride-th row: two passes over the visible keys in fp32 */
__global__ void reference(fmsa_cuda_fwd_params F, int bf16, long long stride, float *o_ref, float *lse_ref) {
    const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * stride;
    const int sq = F.seqlen_q, sk = F.seqlen_k, D = F.head_dim;
    if (t >= (long long)F.batch * F.heads_q * sq) return;
    const int i = (int)(t % sq), h = (int)(t / sq % F.heads_q), b = (int)(t / sq / F.heads_q);
    const int hk = h / (F.heads_q / F.heads_kv);
    const long long off = (long long)sk - sq;
    const unsigned short *q = (const unsigned short *)F.q + b * F.q_sb + i * F.q_ss + h * F.q_sh;
    float mx = -INFINITY;
    for (int j = 0; j < sk; ++j) {
        if ((F.window_left >= 0 && j < i + off - F.window_left) || (F.window_right >= 0 && j > i + off + F.window_right))
            continue;
        const unsigned short *k = (const unsigned short *)F.k + b * F.k_sb + (long long)j * F.k_ss + hk * F.k_sh;
        float s = 0.0f;
        for (int d = 0; d < D; ++d) s += to_f(q[d], bf16) * to_f(k[d], bf16);
        mx = fmaxf(mx, s * F.softmax_scale);
    }
    float *o = o_ref + t * D, l = 0.0f;
    for (int d = 0; d < D; ++d) o[d] = 0.0f;
    for (int j = 0; j < sk && mx > -INFINITY; ++j) {
        if ((F.window_left >= 0 && j < i + off - F.window_left) || (F.window_right >= 0 && j > i + off + F.window_right))
            continue;
        const unsigned short *k = (const unsigned short *)F.k + b * F.k_sb + (long long)j * F.k_ss + hk * F.k_sh;
        const unsigned short *v = (const unsigned short *)F.v + b * F.v_sb + (long long)j * F.v_ss + hk * F.v_sh;
        float s = 0.0f;
        for (int d = 0; d < D; ++d) s += to_f(q[d], bf16) * to_f(k[d], bf16);
        const float p = expf(s * F.softmax_scale - mx);
        l += p;
        for (int d = 0; d < D; ++d) o[d] += p * to_f(v[d], bf16);
    }
    for (int d = 0; d < D; ++d) o[d] = l > 0.0f ? o[d] / l : 0.0f;
    lse_ref[t] = l > 0.0f ? mx + logf(l) : -INFINITY;
}

static unsigned short from_f(float x, int bf16) {
    if (bf16) {
        __nv_bfloat16 v = __float2bfloat16(x);
        return *(unsigned short *)&v;
    }
    __half v = __float2half(x);
    return *(unsigned short *)&v;
}

int main(int argc, char **argv) {
    if (argc < 9) {
        printf("usage: %s bf16|f16[:ovl|:ws] B HQ HKV SQ SK WL WR [reps [D]]\n", argv[0]);
        return 2;
    }
    const int bf16 = strncmp(argv[1], "f16", 3) != 0, ovl = strstr(argv[1], ":ovl") ? 1 : strstr(argv[1], ":ws") ? 2 : 0;
    const int B = atoi(argv[2]), HQ = atoi(argv[3]), HKV = atoi(argv[4]);
    const int SQ = atoi(argv[5]), SK = atoi(argv[6]), WL = atoi(argv[7]), WR = atoi(argv[8]);
    const int reps = argc > 9 ? atoi(argv[9]) : 20, D = argc > 10 ? atoi(argv[10]) : 128;
    if (D != 128 && D != 256) {
        printf("D %d: the Hopper forward has d128 and d256\n", D);
        return 2;
    }
    const size_t nq = (size_t)B * SQ * HQ * D, nk = (size_t)B * SK * HKV * D;
    std::vector<unsigned short> hq(nq), hk(nk), hv(nk);
    srand(1);
    for (auto &x : hq) x = from_f(2.0f * rand() / RAND_MAX - 1.0f, bf16);
    for (auto &x : hk) x = from_f(2.0f * rand() / RAND_MAX - 1.0f, bf16);
    for (auto &x : hv) x = from_f(2.0f * rand() / RAND_MAX - 1.0f, bf16);
    unsigned short *q, *k, *v, *o;
    float *lse, *o_ref, *lse_ref;
    CK(cudaMalloc(&q, nq * 2));
    CK(cudaMalloc(&k, nk * 2));
    CK(cudaMalloc(&v, nk * 2));
    CK(cudaMalloc(&o, nq * 2));
    CK(cudaMalloc(&lse, (size_t)B * HQ * SQ * 4));
    CK(cudaMalloc(&o_ref, nq * 4));
    CK(cudaMalloc(&lse_ref, (size_t)B * HQ * SQ * 4));
    CK(cudaMemcpy(q, hq.data(), nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, hk.data(), nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, hv.data(), nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(o, 0xff, nq * 2)); /* poisoned: NaN in both dtypes */
    CK(cudaMemset(lse, 0xff, (size_t)B * HQ * SQ * 4));

    fmsa_cuda_fwd_params F;
    memset(&F, 0, sizeof F);
    F.q = q, F.k = k, F.v = v, F.o = o, F.lse = lse;
    F.q_sb = (long long)SQ * HQ * D, F.q_ss = (long long)HQ * D, F.q_sh = D;
    F.k_sb = F.v_sb = (long long)SK * HKV * D, F.k_ss = F.v_ss = (long long)HKV * D, F.k_sh = F.v_sh = D;
    F.o_sb = F.q_sb, F.o_ss = F.q_ss, F.o_sh = F.q_sh;
    F.lse_sb = (long long)HQ * SQ, F.lse_sh = SQ, F.lse_ss = 1;
    F.batch = B, F.seqlen_q = F.total_q = SQ, F.seqlen_k = F.total_k = SK, F.heads_q = HQ, F.heads_kv = HKV;
    F.head_dim = F.head_dim_v = D, F.num_splits = 1, F.window_left = WL, F.window_right = WR;
    F.softmax_scale = 1.0f / sqrtf((float)D), F.scale_log2 = F.softmax_scale * 1.4426950408889634f;

    void (*const kerns[2][2][3])(const fmsa_cuda_fwd_params) = {
        {{fmsa_cuda_fwd_wg_f16_d128, fmsa_cuda_fwd_wg_f16_d128_ovl, fmsa_cuda_fwd_wg_f16_d128_ws},
         {fmsa_cuda_fwd_wg_bf16_d128, fmsa_cuda_fwd_wg_bf16_d128_ovl, fmsa_cuda_fwd_wg_bf16_d128_ws}},
        {{fmsa_cuda_fwd_wg_f16_d256, fmsa_cuda_fwd_wg_f16_d256_ovl, fmsa_cuda_fwd_wg_f16_d256_ws},
         {fmsa_cuda_fwd_wg_bf16_d256, fmsa_cuda_fwd_wg_bf16_d256_ovl, fmsa_cuda_fwd_wg_bf16_d256_ws}}};
    void (*kern)(const fmsa_cuda_fwd_params) = kerns[D == 256][bf16][ovl];
    const int smem = ovl == 2 ? FMSA_FWD_WG_WS_SMEM(D) : FMSA_FWD_WG_SMEM(D), threads = ovl == 2 ? 384 : 256;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid((SQ + FMSA_FWD_WG_BM - 1) / FMSA_FWD_WG_BM, HQ, B);
    kern<<<grid, threads, smem>>>(F);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    /* an odd stride keeps every row index of every head in the sample once SQ is a power of 2 */
    const long long rows = (long long)B * HQ * SQ, stride = rows / 32768 | 1, checked = (rows + stride - 1) / stride;
    reference<<<(unsigned)((checked + 127) / 128), 128>>>(F, bf16, stride, o_ref, lse_ref);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    std::vector<unsigned short> ho(nq);
    std::vector<float> hl(rows), hor(nq), hlr(rows);
    CK(cudaMemcpy(ho.data(), o, nq * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl.data(), lse, rows * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hor.data(), o_ref, nq * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hlr.data(), lse_ref, rows * 4, cudaMemcpyDeviceToHost));
    double eo = 0.0, el = 0.0;
    long long bad = 0, pairs = 0;
    for (long long r = 0; r < rows; ++r) { /* r = (b, h, i); O is [B, SQ, HQ, D]; every row for non-finite values */
        const bool sampled = r % stride == 0;
        const int i = (int)(r % SQ), h = (int)(r / SQ % HQ), b = (int)(r / SQ / HQ);
        for (int d = 0; d < D; ++d) {
            const size_t at = (((size_t)b * SQ + i) * HQ + h) * D + d;
            unsigned short u = ho[at];
            float x;
            if (bf16) {
                unsigned w = (unsigned)u << 16;
                memcpy(&x, &w, 4);
            } else
                x = __half2float(*(__half *)&u);
            if (!std::isfinite(x)) ++bad;
            else if (sampled) eo = fmax(eo, fabs(x - hor[r * D + d]));
        }
        if (!sampled) bad += std::isnan(hl[r]);
        else if (std::isinf(hlr[r]) ? hl[r] != hlr[r] : !(fabs(hl[r] - hlr[r]) <= 1e30)) ++bad;
        else if (!std::isinf(hlr[r])) el = fmax(el, fabs(hl[r] - hlr[r]));
    }
    for (int i = 0; i < SQ; ++i) { /* visible pairs, for the FLOP count */
        const long long off = (long long)SK - SQ, lo = WL >= 0 ? i + off - WL : 0, hi = WR >= 0 ? i + off + WR : SK - 1;
        pairs += std::max(0LL, std::min(hi, (long long)SK - 1) - std::max(lo, 0LL) + 1);
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) kern<<<grid, threads, smem>>>(F);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= reps;
    const double tflops = 4.0 * B * HQ * D * (double)pairs / (ms * 1e-3) / 1e12;
    printf("d%d %s%s b%d h%d/%d sq%d sk%d wl%d wr%d: max|O-ref| %.3e  max|LSE-ref| %.3e  non-finite %lld  %.3f ms  %.1f TFLOP/s  %s\n",
           D, bf16 ? "bf16" : "f16", ovl == 2 ? ":ws" : ovl ? ":ovl" : "", B, HQ, HKV, SQ, SK, WL, WR, eo, el, bad, ms, tflops,
           bad == 0 && eo < 2e-2 && el < 1e-3 ? "ok" : "CHECK");
    return 0;
}
