/*
 * PTX wrappers the mma.sync kernels (forward, backward, decode) share: shared
 * memory addresses, cp.async with zero fill, ldmatrix, mma.sync m16n8k16 with
 * fp32 accumulators, 16-bit packing, exp2, the 16-byte-chunk swizzle, and
 * the backward's fp32 reductions into global memory.
 * Fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16"
 * with 16-bit types): with g = lane / 4 and t = lane % 4,
 *   A (16x16, row): a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
 *   B (16x8, col):  b0 (k = 2t..2t+1, n = g)          b1 (k = 2t+8.., n = g)
 *   C (16x8, f32):  c0,c1 (g, 2t..2t+1)               c2,c3 (g+8, 2t..2t+1)
 * and ldmatrix.x4 takes row addresses from lanes 8i..8i+7 for matrix i and
 * returns in register i the element pair (lane / 4, 2 (lane % 4)..) of matrix
 * i (.trans: the pair (2 (lane % 4).., lane / 4)).
 */
#ifndef FMSA_CUDA_MMA_CUH
#define FMSA_CUDA_MMA_CUH

#define FMSA_DEV static __device__ __forceinline__

/// 32-bit shared-window address of a generic pointer into shared memory.
FMSA_DEV unsigned fmsa_smem_addr(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

/// 16-byte global -> shared copy that bypasses L1; src_bytes = 0 writes 16
/// zero bytes and reads nothing (rows past the sequence, padded head dims).
FMSA_DEV void fmsa_cp_async16(unsigned dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

FMSA_DEV void fmsa_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// Waits until at most N of this thread's committed groups are still in flight.
template <int N> FMSA_DEV void fmsa_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

FMSA_DEV void fmsa_ldmatrix_x4(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

FMSA_DEV void fmsa_ldmatrix_x4_trans(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

FMSA_DEV void fmsa_ldmatrix_x2(unsigned r[2], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}

FMSA_DEV void fmsa_ldmatrix_x2_trans(unsigned r[2], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}

/// d += a * b for one m16n8k16 tile; IS_BF16 picks bf16 or fp16 inputs.
template <int IS_BF16>
FMSA_DEV void fmsa_mma16816(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
    if (IS_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two fp32 values rounded to nearest into one 16-bit pair, lo in the low half
/// (the element with the lower column index in every fragment above).
template <int IS_BF16> FMSA_DEV unsigned fmsa_pack2(float lo, float hi) {
    unsigned r;
    if (IS_BF16)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/// 2^x on the special-function unit (relative error ~2^-22; 2^-inf = +0).
FMSA_DEV float fmsa_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/// Byte offset of 16-byte chunk c of row r in a tile whose rows are a multiple
/// of 128 bytes: the chunk's low three bits are XORed with the row's, so the 8
/// rows one ldmatrix phase reads (same logical chunk) hit 8 different bank
/// groups, and 8 threads writing one row's 8 chunks do too.
FMSA_DEV unsigned fmsa_swizzle(int r, int c, int row_bytes) {
    return (unsigned)(r * row_bytes + (((c & ~7) | ((c & 7) ^ (r & 7))) << 4));
}

/// 4-byte global -> shared copy through L1 with the same zero fill (per-row
/// lse / D of the backward).
FMSA_DEV void fmsa_cp_async4(unsigned dst, const void *src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/// One 16-bit value of the dtype to float.
template <int IS_BF16> FMSA_DEV float fmsa_half_to_float(unsigned short h) {
    if (IS_BF16) return __uint_as_float(((unsigned)h) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

/// fp32 pair added to global memory without a return value (one vector
/// reduction on sm_90, two atomics before); addr 8-byte aligned.
FMSA_DEV void fmsa_red_add2(float *addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(addr, a);
    atomicAdd(addr + 1, b);
#endif /* __CUDA_ARCH__ */
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// fp32 quadruple added to global memory (sm_90 vector reduction); addr 16-byte aligned.
FMSA_DEV void fmsa_red_add4(float *addr, float a, float b, float c, float d) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(a), "f"(b),
                 "f"(c), "f"(d)
                 : "memory");
}
#endif /* __CUDA_ARCH__ */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// Orders this thread's ordinary shared-memory writes before later reads of
/// the async proxy (the bulk copy engine), once a barrier follows.
FMSA_DEV void fmsa_fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Bulk reduction by the copy engine: global[dst..] += shared[src..] (fp32),
/// bytes a multiple of 16, both ends 16-byte aligned; joins this thread's
/// open bulk group.
FMSA_DEV void fmsa_bulk_red_add_f32(float *dst, unsigned src, int bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}

FMSA_DEV void fmsa_bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

/// Waits until the copy engine has read the shared memory of all this thread's bulk groups.
FMSA_DEV void fmsa_bulk_wait_read(void) {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

/// Waits until all this thread's bulk groups have completed.
FMSA_DEV void fmsa_bulk_wait(void) { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
#endif /* __CUDA_ARCH__ */

/// Barrier of the `threads` threads (whole warps) that name barrier `id` (1..15).
FMSA_DEV void fmsa_bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Load of an int that another block releases (acquire at gpu scope).
FMSA_DEV int fmsa_ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/*
 * fp32 inputs on the tensor cores by 3xTF32 (split precision): x = hi + lo
 * with hi = tf32(x) and lo = tf32(x - hi) (x - hi is exact in fp32), and
 * a b ~ a_lo b_hi + a_hi b_lo + a_hi b_hi, the dropped a_lo b_lo and the
 * rounding of lo each below 2^-22 |a b| (backends/cuda/NOTES_FWD.md; the
 * forward's fmsa_cuda_fwd_mma_f32 issues the three mma).  The
 * m16n8k8 tf32 fragments are the 16-bit ones' with 32-bit elements: with
 * g = lane / 4 and t = lane % 4,
 *   A (16x8, row): a0 (g, t)  a1 (g+8, t)  a2 (g, t+4)  a3 (g+8, t+4)
 *   B (8x8, col):  b0 (k = t, n = g)       b1 (k = t+4, n = g)
 *   C (16x8, f32): as m16n8k16's.
 * ldmatrix.x4 (b16) on fp32 rows returns element (lane / 4, lane % 4) of each
 * 8 x 4 block, i.e. exactly these A and B fragments, with the addresses of the
 * 16-bit k16 step: one fp32 k8 step is one 16-bit k16 step of the same bytes.
 */

/// Rounds an fp32 value to tf32 (nearest, ties away), as a 32-bit pattern.
FMSA_DEV unsigned fmsa_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

/// x (fp32 bits) = hi + lo, both tf32.
FMSA_DEV void fmsa_tf32_split(unsigned x, unsigned *hi, unsigned *lo) {
    *hi = fmsa_tf32(__uint_as_float(x));
    *lo = fmsa_tf32(__uint_as_float(x) - __uint_as_float(*hi));
}

/// d += a * b for one m16n8k8 tile of tf32 inputs.
FMSA_DEV void fmsa_mma1688_tf32(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif /* FMSA_CUDA_MMA_CUH */
