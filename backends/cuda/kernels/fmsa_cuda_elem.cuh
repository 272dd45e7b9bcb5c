/*
 * One element of an f32, f16 or bf16 tensor (FMSA_CUDA_MERGE_* codes) read as
 * fp32 and written back rounded to nearest: the merge and the ring's
 * elementwise op share these.
 */
#ifndef FMSA_CUDA_ELEM_CUH
#define FMSA_CUDA_ELEM_CUH

#include "../cuda_params.h"

static __device__ __forceinline__ float fmsa_cuda_elem_load(const void *base, long long i,
                                                            int dtype) {
    if (dtype == FMSA_CUDA_MERGE_F32) return ((const float *)base)[i];
    const unsigned short u = ((const unsigned short *)base)[i];
    if (dtype == FMSA_CUDA_MERGE_BF16) return __uint_as_float((unsigned)u << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(u));
    return f;
}

static __device__ __forceinline__ void fmsa_cuda_elem_store(void *base, long long i, int dtype,
                                                            float x) {
    unsigned short u;
    if (dtype == FMSA_CUDA_MERGE_F32) {
        ((float *)base)[i] = x;
        return;
    }
    if (dtype == FMSA_CUDA_MERGE_BF16) asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(u) : "f"(x));
    else asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(u) : "f"(x));
    ((unsigned short *)base)[i] = u;
}

#endif /* FMSA_CUDA_ELEM_CUH */
