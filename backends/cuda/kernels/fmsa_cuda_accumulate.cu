/*
 * The ring's elementwise op on the device (common/accumulate.h): one thread
 * per element in a grid-stride loop over a 4-d strided view.  Each element is
 * read and written by the same thread only, so dst may be the same view as src.
 * A copy between equal dtypes moves the bits (no round trip through fp32).
 */
#include "../cuda_params.h"
#include "fmsa_cuda_elem.cuh"

/* Element n's coordinates: 32-bit division where the extents allow (64-bit
 * division is a long software sequence), none for a flat run (the common
 * layer collapses the dims both views walk alike: n1 = n2 = 1). */
static __device__ __forceinline__ void fmsa_acc_coords(const fmsa_cuda_acc_params &p, long long n,
                                                       long long *a, long long *b, long long *c,
                                                       long long *e) {
    if (p.n1 == 1 && p.n2 == 1 && p.count == p.n3) {
        *a = *b = *c = 0;
        *e = n;
    } else if (p.count <= 0x7fffffffll) {
        const unsigned m = (unsigned)n, n3 = (unsigned)p.n3, n2 = (unsigned)p.n2, n1 = (unsigned)p.n1;
        const unsigned q3 = m / n3, q2 = q3 / n2;
        *e = m - q3 * n3;
        *c = q3 - q2 * n2;
        *b = q2 % n1;
        *a = q2 / n1;
    } else {
        *e = n % p.n3;
        *c = (n / p.n3) % p.n2;
        *b = (n / (p.n3 * p.n2)) % p.n1;
        *a = n / (p.n3 * p.n2 * p.n1);
    }
}

extern "C" __global__ void __launch_bounds__(256) fmsa_cuda_accumulate(const fmsa_cuda_acc_params p) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long n = (long long)blockIdx.x * blockDim.x + threadIdx.x; n < p.count; n += stride) {
        long long a, b, c, e;
        fmsa_acc_coords(p, n, &a, &b, &c, &e);
        const long long di = a * p.ds[0] + b * p.ds[1] + c * p.ds[2] + e * p.ds[3];
        const long long si = a * p.ss[0] + b * p.ss[1] + c * p.ss[2] + e * p.ss[3];
        if (p.mode == 0 && p.dtype_dst == p.dtype_src) {
            if (p.dtype_dst == FMSA_CUDA_MERGE_F32) ((float *)p.dst)[di] = ((const float *)p.src)[si];
            else ((unsigned short *)p.dst)[di] = ((const unsigned short *)p.src)[si];
            continue;
        }
        float x = p.mode == 2 ? p.fill : fmsa_cuda_elem_load(p.src, si, p.dtype_src);
        if (p.mode == 3) x = fmaf(x, p.fill, fmsa_cuda_elem_load(p.dst, di, p.dtype_dst)); /* ADD_SCALED */
        if (p.mode == 1) x += fmsa_cuda_elem_load(p.dst, di, p.dtype_dst);
        fmsa_cuda_elem_store(p.dst, di, p.dtype_dst, x);
    }
}
