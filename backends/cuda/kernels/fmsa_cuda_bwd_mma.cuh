/*
 * PTX wrappers the backward kernels use: ldmatrix (plain and .trans),
 * mma.sync m16n8k16 (bf16 / f16 in, fp32 accumulate), cp.async with zero
 * fill, packing two floats into a bf16x2 / f16x2 register, ex2.approx.
 * The forward's helper writes the same set in fmsa_cuda_mma.cuh; the two are
 * to be merged into one file (this one exists because that one was not yet
 * committed when the backward was written).
 */
#ifndef FMSA_CUDA_BWD_MMA_CUH
#define FMSA_CUDA_BWD_MMA_CUH

#define FMSA_DEV static __device__ __forceinline__

/// Shared-memory address of a generic pointer into shared memory.
FMSA_DEV unsigned fmsa_smem_addr(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

/// Four 8x8 b16 matrices; lane i gives the row address of matrix i/8, row i%8.
FMSA_DEV void fmsa_ldsm_x4(unsigned *r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/// The same, each matrix transposed on the way into registers.
FMSA_DEV void fmsa_ldsm_x4_t(unsigned *r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/// c += a * b for one m16n8k16 tile; BF16 selects bf16 inputs, else f16.
template <int BF16>
FMSA_DEV void fmsa_mma16816(float *c, const unsigned *a, const unsigned *b) {
    if (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// 16-byte async copy global -> shared; bytes < 16 zero-fills the rest (0: all zeros).
FMSA_DEV void fmsa_cp_async16(unsigned dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

/// 4-byte async copy global -> shared with the same zero fill.
FMSA_DEV void fmsa_cp_async4(unsigned dst, const void *src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

FMSA_DEV void fmsa_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }

/// Waits until every committed group of this thread has landed.
FMSA_DEV void fmsa_cp_async_wait_all(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/// Two floats rounded to nearest into one bf16x2 / f16x2 register, lo in the low half.
template <int BF16>
FMSA_DEV unsigned fmsa_pack2(float lo, float hi) {
    unsigned r;
    if (BF16)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/// One 16-bit value of the dtype to float.
template <int BF16>
FMSA_DEV float fmsa_half_to_float(unsigned short h) {
    if (BF16) return __uint_as_float(((unsigned)h) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

/// 2^x by the special function unit (exp2(-inf) = 0, as the masked keys need).
FMSA_DEV float fmsa_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/// fp32 pair added to global memory without returning (vector form on sm_90).
FMSA_DEV void fmsa_red_add2(float *addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(addr, a);
    atomicAdd(addr + 1, b);
#endif /* __CUDA_ARCH__ */
}

/// Load of an int that another block releases (acquire at gpu scope).
FMSA_DEV int fmsa_ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

#endif /* FMSA_CUDA_BWD_MMA_CUH */
