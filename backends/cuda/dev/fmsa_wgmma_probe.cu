/*
 * Development probe of the wgmma conventions in fmsa_cuda_wgmma.cuh, on one
 * warpgroup (sm_90a, CUDA runtime; not part of the library):
 *   ss   C = A B^T, A [64][128] and B [64][128] K-major (S^T = K Q^T)
 *   rs   C = A B, A [64][64] from registers, B [64][128] MN-major (dV += P^T dO)
 *   sst  C = A B, A stored [128][64] (MN-major), B [128][64 of 128] MN-major
 *        (dQ = dS K with dS^T and K as stored)
 * each in bf16 and f16, and rs with the other reading of LBO / SBO (swap=1,
 * which fails on the H200: LBO is the distance of the 64-wide chunks; sst's
 * swap=1 reads past its tile and faults, so it is not run); values are multiples of 1/4 in [-1, 1], so every product and sum
 * is exact in fp32 and the comparison is exact.
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O2 -I. -o probe backends/cuda/dev/fmsa_wgmma_probe.cu
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/dev/fmsa_dev_check.h"
#include "backends/cuda/kernels/fmsa_cuda_wgmma.cuh"

/* element (r, c) of a [rows][cols] matrix stored as 64-column swizzled chunks */
__device__ unsigned chunked(int r, int c, int rows) { return (c / 64) * rows * 128 + fmsa_sw128(r, c % 64); }

/* MODE 0: ss; 1: rs; 2: sst.  SWAP: LBO and SBO exchanged for the MN-major operands */
template <int BF16, int MODE, int SWAP>
__global__ void probe(const unsigned short *a, const unsigned short *b, float *c) {
    __shared__ __align__(1024) unsigned char sa[16384];
    __shared__ __align__(1024) unsigned char sb[32768];
    const int t = threadIdx.x, w = t / 32, l = t % 32, g = l / 4, t4 = l % 4;
    if (MODE == 0) {
        for (int i = t; i < 64 * 128; i += 128) {
            const int r = i / 128, k = i % 128;
            *(unsigned short *)(sa + chunked(r, k, 64)) = a[i];
            *(unsigned short *)(sb + chunked(r, k, 64)) = b[i];
        }
    } else if (MODE == 1) {
        for (int i = t; i < 64 * 128; i += 128) { /* B [k 64][n 128] */
            const int k = i / 128, n = i % 128;
            *(unsigned short *)(sb + chunked(k, n, 64)) = b[i];
        }
    } else {
        for (int i = t; i < 128 * 64; i += 128) { /* A^T stored [k 128][m 64] */
            const int k = i / 64, m = i % 64;
            *(unsigned short *)(sa + chunked(k, m, 128)) = a[m * 128 + k];
        }
        for (int i = t; i < 128 * 128; i += 128) { /* B [k 128][n 128], the product takes n 64..127 */
            const int k = i / 128, n = i % 128;
            *(unsigned short *)(sb + chunked(k, n, 128)) = b[i];
        }
    }
#if FMSA_WGMMA
    fmsa_fence_proxy_async();
    __syncthreads();
    const unsigned ab = fmsa_smem_addr(sa), bb = fmsa_smem_addr(sb);
    if (MODE == 0 || MODE == 2) {
        float d[32];
        fmsa_wg_fence();
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            unsigned long long da, db;
            if (MODE == 0) {
                da = fmsa_wg_desc(ab + (kk / 4) * 64 * 128 + (kk % 4) * 32, 16, 1024);
                db = fmsa_wg_desc(bb + (kk / 4) * 64 * 128 + (kk % 4) * 32, 16, 1024);
                fmsa_wg_ss_n64<BF16, 0, 0>(d, da, db, kk > 0);
            } else {
                const unsigned lbo_a = SWAP ? 1024 : 128 * 128, sbo_a = SWAP ? 128 * 128 : 1024;
                da = fmsa_wg_desc(ab + kk * 2048, lbo_a, sbo_a);
                db = fmsa_wg_desc(bb + 128 * 128 + kk * 2048, lbo_a, sbo_a);
                fmsa_wg_ss_n64<BF16, 1, 1>(d, da, db, kk > 0);
            }
        }
        fmsa_wg_commit();
        fmsa_wg_wait<0>();
        for (int i = 0; i < 32; ++i) {
            const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t4 + (i & 1);
            c[row * 64 + col] = d[i];
        }
    } else {
        float d[64];
        fmsa_wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            unsigned fr[4];
            const int r0 = 16 * w + g, k0 = 16 * kk + 2 * t4;
            const unsigned short *ar = a + r0 * 64 + k0;
            fr[0] = ar[0] | (unsigned)ar[1] << 16;
            fr[1] = ar[8 * 64] | (unsigned)ar[8 * 64 + 1] << 16;
            fr[2] = ar[8] | (unsigned)ar[9] << 16;
            fr[3] = ar[8 * 64 + 8] | (unsigned)ar[8 * 64 + 9] << 16;
            const unsigned lbo = SWAP ? 1024 : 64 * 128, sbo = SWAP ? 64 * 128 : 1024;
            fmsa_wg_rs_n128<BF16, 1>(d, fr, fmsa_wg_desc(bb + kk * 2048, lbo, sbo), kk > 0);
        }
        fmsa_wg_commit();
        fmsa_wg_wait<0>();
        for (int i = 0; i < 64; ++i) {
            const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t4 + (i & 1);
            c[row * 128 + col] = d[i];
        }
    }
#endif /* FMSA_WGMMA */
}

static unsigned short enc(float x, int bf16) {
    if (bf16) {
        __nv_bfloat16 h = __float2bfloat16(x);
        unsigned short u;
        memcpy(&u, &h, 2);
        return u;
    }
    __half h = __float2half(x);
    unsigned short u;
    memcpy(&u, &h, 2);
    return u;
}

template <int BF16, int MODE, int SWAP> static int run(const char *name) {
    /* A: 64 x 128 (ss, sst) or 64 x 64 (rs); B: 64 x 128 (ss: [n][k]; rs: [k][n]) or 128 x 128 (sst: [k][n]) */
    const int na = 64 * 128, nb = 128 * 128, nc = 64 * 128;
    float *fa = (float *)malloc(na * 4), *fb = (float *)malloc(nb * 4), *ref = (float *)calloc(nc, 4);
    unsigned short *ha = (unsigned short *)malloc(na * 2), *hb = (unsigned short *)malloc(nb * 2);
    srand(7 + MODE);
    for (int i = 0; i < na; ++i) ha[i] = enc(fa[i] = (rand() % 9 - 4) * 0.25f, BF16);
    for (int i = 0; i < nb; ++i) hb[i] = enc(fb[i] = (rand() % 9 - 4) * 0.25f, BF16);
    int ncol;
    if (MODE == 0) {
        ncol = 64;
        for (int m = 0; m < 64; ++m)
            for (int n = 0; n < 64; ++n)
                for (int k = 0; k < 128; ++k) ref[m * 64 + n] += fa[m * 128 + k] * fb[n * 128 + k];
    } else if (MODE == 1) {
        ncol = 128;
        for (int m = 0; m < 64; ++m)
            for (int n = 0; n < 128; ++n)
                for (int k = 0; k < 64; ++k) ref[m * 128 + n] += fa[m * 64 + k] * fb[k * 128 + n];
    } else {
        ncol = 64;
        for (int m = 0; m < 64; ++m)
            for (int n = 0; n < 64; ++n)
                for (int k = 0; k < 128; ++k) ref[m * 64 + n] += fa[m * 128 + k] * fb[k * 128 + 64 + n];
    }
    unsigned short *da, *db;
    float *dc;
    CK(cudaMalloc(&da, na * 2));
    CK(cudaMalloc(&db, nb * 2));
    CK(cudaMalloc(&dc, nc * 4));
    CK(cudaMemcpy(da, ha, na * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb, nb * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dc, 0xff, nc * 4)); /* NaN poison */
    probe<BF16, MODE, SWAP><<<1, 128>>>(da, db, dc);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    float *hc = (float *)malloc(nc * 4);
    CK(cudaMemcpy(hc, dc, nc * 4, cudaMemcpyDeviceToHost));
    int bad = 0, first = -1;
    for (int i = 0; i < 64 * ncol; ++i)
        if (!(hc[i] == ref[i])) {
            if (first < 0) first = i;
            ++bad;
        }
    printf("%-4s %s swap=%d: %s (%d of %d differ", name, BF16 ? "bf16" : "f16 ", SWAP, bad ? "FAIL" : "ok",
           bad, 64 * ncol);
    if (first >= 0) printf("; first (%d, %d): %g vs %g", first / ncol, first % ncol, hc[first], ref[first]);
    printf(")\n");
    cudaFree(da), cudaFree(db), cudaFree(dc);
    free(fa), free(fb), free(ref), free(ha), free(hb), free(hc);
    return bad != 0;
}

int main(void) {
    int f = 0;
    f += run<1, 0, 0>("ss");
    f += run<0, 0, 0>("ss");
    f += run<1, 1, 0>("rs");
    f += run<1, 1, 1>("rs");
    f += run<0, 1, 0>("rs");
    f += run<1, 2, 0>("sst");
    f += run<0, 2, 0>("sst");
    printf("probe: %d of 7 failed (the swap=1 line is the other LBO/SBO reading and fails; every swap=0 line must pass)\n", f);
    return 0;
}
