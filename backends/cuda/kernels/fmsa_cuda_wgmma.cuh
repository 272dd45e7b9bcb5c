/*
 * Hopper's warpgroup matrix products (wgmma, sm_90a only) and their shared
 * memory operands.  A warpgroup is 4 consecutive warps starting at a warp
 * index divisible by 4; each product is issued by all 128 threads.
 *
 * Operands in shared memory use the 128-byte swizzle: a tile of R rows of 64
 * 16-bit elements (128 B a row) in 1024-byte aligned atoms of 8 rows, the
 * 16-byte chunk c of row r stored at chunk c ^ (r & 7).  Wider rows are
 * stored as column chunks of 64 elements, each an R x 128 B block.
 *   K-major operand (the reduction index contiguous in a row): rows are M
 *     (or N), the descriptor's stride byte offset is 1024 (8 rows), a k16
 *     step adds 32 B inside the chunk, the next chunk after 4 steps.
 *   MN-major operand (M or N contiguous in a row; the transposed form):
 *     rows are the reduction index, SBO = 1024 (8 rows), LBO = the distance
 *     of the 64-wide M/N chunks, a k16 step adds 16 rows (2048 B).
 * Accumulators (f32, N/2 a thread): element i of thread t is row
 * 16 (t / 32) + (t % 32) / 4 + 8 ((i >> 1) & 1), column 8 (i >> 2) +
 * 2 (t % 4) + (i & 1): per warp the mma.m16n8 accumulator repeated over
 * N / 8, and the register A operand of a k16 slice kk is the accumulator's
 * elements 8 kk .. 8 kk + 7 packed in pairs (the mma.sync A fragment).
 */
#ifndef FMSA_CUDA_WGMMA_CUH
#define FMSA_CUDA_WGMMA_CUH

#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"

/* wgmma exists only in the arch-specific sm_90a target */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FMSA_WGMMA 1
#else
#define FMSA_WGMMA 0
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

/// Byte offset of element (r, c) of a swizzled 64-column chunk (r < 8k rows).
FMSA_DEV unsigned fmsa_sw128(int r, int c) {
    return (unsigned)(r * 128 + ((((c >> 3) ^ r) & 7) << 4) + (c & 7) * 2);
}

/// The shared-memory matrix descriptor of a 128-byte swizzled operand.
FMSA_DEV unsigned long long fmsa_wg_desc(unsigned saddr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((saddr & 0x3ffffu) >> 4) | ((unsigned long long)((lbo & 0x3ffffu) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3ffffu) >> 4) << 32) | (1ull << 62);
}

#if FMSA_WGMMA
FMSA_DEV void fmsa_wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FMSA_DEV void fmsa_wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> FMSA_DEV void fmsa_wg_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Keeps the compiler from moving accumulator reads or writes across a wait.
FMSA_DEV void fmsa_wg_touch(float &x) { asm volatile("" : "+f"(x)::"memory"); }
/// The same for a register A operand: it stays live (not reused) until the wait.
FMSA_DEV void fmsa_wg_touch_u(unsigned &x) { asm volatile("" : "+r"(x)::"memory"); }

/* Producer / consumer stages: mbarriers in shared memory (8 bytes, 8-aligned),
   a named barrier one side arrives at without waiting, and the warpgroup's
   register budget moved between a producer and its consumers. */
FMSA_DEV void fmsa_mbar_init(unsigned addr, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
FMSA_DEV void fmsa_mbar_arrive(unsigned addr) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
/// Waits until the phase of parity `parity` of the mbarrier at addr has completed.
FMSA_DEV void fmsa_mbar_wait(unsigned addr, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nFMSA_MBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra FMSA_MBAR_WAIT;\n}\n" ::"r"(addr),
                 "r"(parity)
                 : "memory");
}
FMSA_DEV void fmsa_bar_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int N> FMSA_DEV void fmsa_setmaxnreg_inc(void) { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> FMSA_DEV void fmsa_setmaxnreg_dec(void) { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }

/* one m64n32k16 product from shared memory (d[0..15]); TY: the operand type suffix */
#define FMSA_WG_SS_N32(TY, d, da, db, acc, TA, TB)                                      \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32" TY " "                           \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "  \
                 "%16, %17, p, 1, 1, %19, %20;\n}\n"                                          \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),    \
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),  \
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])                        \
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB))

/// d (+)= A B, m64n32k16, both operands from shared memory (TA / TB: MN-major).
template <int BF16, int TA, int TB>
FMSA_DEV void fmsa_wg_ss_n32(float (&d)[16], unsigned long long da, unsigned long long db, int acc) {
    if (BF16) FMSA_WG_SS_N32(".bf16.bf16", d, da, db, acc, TA, TB);
    else FMSA_WG_SS_N32(".f16.f16", d, da, db, acc, TA, TB);
}

/* the accumulator operands of an m64n64 product: d[0..31] */
#define FMSA_WG_ACC32(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

/* one m64n64k16 product from shared memory; TY: the operand type suffix */
#define FMSA_WG_SS_N64(TY, d, da, db, acc, TA, TB)                                      \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" TY " "                           \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "  \
                 "%32, %33, p, 1, 1, %35, %36;\n}\n"                                          \
                 : FMSA_WG_ACC32(d)                                                          \
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB))

/// d (+)= A B, m64n64k16, both operands from shared memory (TA / TB: MN-major).
template <int BF16, int TA, int TB>
FMSA_DEV void fmsa_wg_ss_n64(float (&d)[32], unsigned long long da, unsigned long long db, int acc) {
    if (BF16) FMSA_WG_SS_N64(".bf16.bf16", d, da, db, acc, TA, TB);
    else FMSA_WG_SS_N64(".f16.f16", d, da, db, acc, TA, TB);
}

/* one m64n64k16 product, A from registers; TY: the operand type suffix */
#define FMSA_WG_RS_N64(TY, d, a, db, acc, TB)                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" TY " "                           \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "  \
                 "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                              \
                 : FMSA_WG_ACC32(d)                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc), "n"(TB))

/// d (+)= A B, m64n64k16, A from registers (the k16 slice a[4]), B from shared memory.
template <int BF16, int TB>
FMSA_DEV void fmsa_wg_rs_n64(float (&d)[32], const unsigned (&a)[4], unsigned long long db, int acc) {
    if (BF16) FMSA_WG_RS_N64(".bf16.bf16", d, a, db, acc, TB);
    else FMSA_WG_RS_N64(".f16.f16", d, a, db, acc, TB);
}

/* the accumulator operands of an m64n128 product: d[0..63] */
#define FMSA_WG_ACC64(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

/* one m64n128k16 product, A from registers; TY: the operand type suffix */
#define FMSA_WG_RS_N128(TY, d, a, db, acc, TB)                                           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" TY " "                          \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "  \
                 "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"                              \
                 : FMSA_WG_ACC64(d)                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc), "n"(TB))

/* one m64n128k16 product from shared memory; TY: the operand type suffix */
#define FMSA_WG_SS_N128(TY, d, da, db, acc, TA, TB)                                     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" TY " "                          \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "  \
                 "%64, %65, p, 1, 1, %67, %68;\n}\n"                                          \
                 : FMSA_WG_ACC64(d)                                                          \
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB))

/// d (+)= A B, m64n128k16, both operands from shared memory (TA / TB: MN-major).
template <int BF16, int TA, int TB>
FMSA_DEV void fmsa_wg_ss_n128(float (&d)[64], unsigned long long da, unsigned long long db, int acc) {
    if (BF16) FMSA_WG_SS_N128(".bf16.bf16", d, da, db, acc, TA, TB);
    else FMSA_WG_SS_N128(".f16.f16", d, da, db, acc, TA, TB);
}

/// d (+)= A B, m64n128k16, A from registers (the k16 slice a[4]), B from shared memory.
template <int BF16, int TB>
FMSA_DEV void fmsa_wg_rs_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long db, int acc) {
    if (BF16) FMSA_WG_RS_N128(".bf16.bf16", d, a, db, acc, TB);
    else FMSA_WG_RS_N128(".f16.f16", d, a, db, acc, TB);
}

#endif /* FMSA_WGMMA */
#endif /* FMSA_CUDA_WGMMA_CUH */
