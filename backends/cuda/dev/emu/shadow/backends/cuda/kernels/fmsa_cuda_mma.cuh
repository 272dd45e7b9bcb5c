/* Host emulation of the mma.sync wrappers (the real ones: backends/cuda/kernels/fmsa_cuda_mma.cuh)
   for ../../../../fmsa_cuda_emu_bwd.cpp: same names and fragment layouts, collectives by emu_yield. */
#ifndef FMSA_CUDA_MMA_CUH
#define FMSA_CUDA_MMA_CUH
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ucontext.h>

#define __device__
#define __forceinline__ inline
#define __global__
#define __shared__
#define __align__(n)
#define __launch_bounds__(...)
#define FMSA_DEV static inline
/* a small SM count, so that small problems reach the masked grid's tail order */
#define FMSA_CUDA_BWD_SM_COUNT 1
FMSA_DEV unsigned fmsa_bwd_sm_count(void) { return 4u; }

struct emu_u3 { unsigned x, y, z; };
struct uint4 { unsigned x, y, z, w; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline float2 make_float2(float a, float b) { return float2{a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }

/* threads a block may have: three warpgroups */
#define EMU_MAXT 384
extern unsigned char fmsa_smem[];
extern emu_u3 emu_tidx[EMU_MAXT];
extern int emu_cur;
extern emu_u3 blockIdx, blockDim, gridDim;
#define threadIdx (emu_tidx[emu_cur])

enum { OP_NONE, OP_SYNC, OP_LDM4, OP_LDM4T, OP_LDM2, OP_LDM2T, OP_MMA1, OP_MMA0, OP_SHFL, OP_MMATF32,
       OP_SHFLI, OP_VOTE, OP_WSYNC, OP_BAR, OP_WGMMA, OP_WGWAIT, OP_MBAR };
/* sv: __syncthreads_or's predicate in, the block's OR out (0 for a plain barrier) */
struct emu_slot { unsigned addr; unsigned r[4]; unsigned a[4], b0, b1; float c[4]; float fv; int mask; int sv; };
extern emu_slot emu_slots[EMU_MAXT];
void emu_yield(int op);

static inline float __int_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
static inline void __syncthreads(void) { emu_slots[emu_cur].sv = 0; emu_yield(OP_SYNC); }
/* the forward emulator's scheduler ORs sv over the block when every thread is at the barrier */
static inline int __syncthreads_or(int pred) {
    emu_slots[emu_cur].sv = pred != 0; emu_yield(OP_SYNC); return emu_slots[emu_cur].sv;
}
static inline void __syncwarp(void) { emu_yield(OP_WSYNC); }
static inline void __threadfence(void) {}
static inline float __shfl_xor_sync(unsigned, float v, int m) {
    emu_slots[emu_cur].fv = v; emu_slots[emu_cur].mask = m; emu_yield(OP_SHFL); return emu_slots[emu_cur].fv;
}
static inline unsigned __shfl_xor_sync(unsigned mk, unsigned v, int m) {
    return __float_as_uint(__shfl_xor_sync(mk, __uint_as_float(v), m));
}
static inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
    emu_slots[emu_cur].fv = __uint_as_float(v); emu_slots[emu_cur].mask = src; emu_yield(OP_SHFLI);
    return __float_as_uint(emu_slots[emu_cur].fv);
}
static inline int __all_sync(unsigned, int pred) {
    emu_slots[emu_cur].mask = pred != 0; emu_yield(OP_VOTE); return emu_slots[emu_cur].mask;
}
static inline float __fdividef(float a, float b) { return a / b; }
static inline int atomicAdd(int *p, int v) { int o = *p; *p += v; return o; }
static inline float atomicAdd(float *p, float v) { float o = *p; *p += v; return o; }
static inline unsigned atomicOr(unsigned *p, unsigned v) { unsigned o = *p; *p |= v; return o; }
static inline float2 __ldcg(const float2 *p) { return *p; }
static inline float4 __ldcg(const float4 *p) { return *p; }
static inline void __stcg(float2 *p, float2 v) { *p = v; }
static inline void __stcg(float4 *p, float4 v) { *p = v; }

FMSA_DEV unsigned fmsa_swizzle(int r, int c, int row_bytes) {
    return (unsigned)(r * row_bytes + (((c & ~7) | ((c & 7) ^ (r & 7))) << 4));
}
FMSA_DEV unsigned fmsa_smem_addr(const void *p) { return (unsigned)((const unsigned char *)p - fmsa_smem); }
#ifdef EMU_CP_ASYNC_DEFER
/* EMU_CP_ASYNC_DEFER: a copy lands in shared memory only when its thread's
   cp.async.wait_group retires its group (fmsa_cuda_emu_sched.h), so a read
   before the wait and the barrier sees the garbage the block started with */
void emu_cp_async(unsigned dst, const void *src, int src_bytes, int size);
void emu_cp_commit(void);
void emu_cp_wait(int n);
FMSA_DEV void fmsa_cp_async16(unsigned dst, const void *src, int src_bytes) { emu_cp_async(dst, src, src_bytes, 16); }
FMSA_DEV void fmsa_cp_async4(unsigned dst, const void *src, int src_bytes) { emu_cp_async(dst, src, src_bytes, 4); }
FMSA_DEV void fmsa_cp_async_commit(void) { emu_cp_commit(); }
template <int N> FMSA_DEV void fmsa_cp_async_wait(void) { emu_cp_wait(N); }
#else
FMSA_DEV void fmsa_cp_async16(unsigned dst, const void *src, int src_bytes) {
    memset(fmsa_smem + dst, 0, 16);
    if (src_bytes) memcpy(fmsa_smem + dst, src, (size_t)src_bytes);
}
FMSA_DEV void fmsa_cp_async4(unsigned dst, const void *src, int src_bytes) {
    memset(fmsa_smem + dst, 0, 4);
    if (src_bytes) memcpy(fmsa_smem + dst, src, (size_t)src_bytes);
}
FMSA_DEV void fmsa_cp_async_commit(void) {}
template <int N> FMSA_DEV void fmsa_cp_async_wait(void) {}
#endif /* EMU_CP_ASYNC_DEFER */
FMSA_DEV void emu_ldm(unsigned *r, int n, unsigned addr, int op) {
    emu_slots[emu_cur].addr = addr; emu_yield(op);
    for (int i = 0; i < n; ++i) r[i] = emu_slots[emu_cur].r[i];
}
FMSA_DEV void fmsa_ldmatrix_x4(unsigned r[4], unsigned addr) { emu_ldm(r, 4, addr, OP_LDM4); }
FMSA_DEV void fmsa_ldmatrix_x4_trans(unsigned r[4], unsigned addr) { emu_ldm(r, 4, addr, OP_LDM4T); }
FMSA_DEV void fmsa_ldmatrix_x2(unsigned r[2], unsigned addr) { emu_ldm(r, 2, addr, OP_LDM2); }
FMSA_DEV void fmsa_ldmatrix_x2_trans(unsigned r[2], unsigned addr) { emu_ldm(r, 2, addr, OP_LDM2T); }
template <int IS_BF16>
FMSA_DEV void fmsa_mma16816(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
    emu_slot *s = &emu_slots[emu_cur];
    for (int i = 0; i < 4; ++i) s->a[i] = a[i], s->c[i] = d[i];
    s->b0 = b0, s->b1 = b1;
    emu_yield(IS_BF16 ? OP_MMA1 : OP_MMA0);
    for (int i = 0; i < 4; ++i) d[i] = emu_slots[emu_cur].c[i];
}
static inline unsigned short emu_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
static inline unsigned short emu_f16(float f) { _Float16 h = (_Float16)f; unsigned short x; memcpy(&x, &h, 2); return x; }
template <int IS_BF16> FMSA_DEV unsigned fmsa_pack2(float lo, float hi) {
    return IS_BF16 ? (unsigned)emu_bf16(lo) | ((unsigned)emu_bf16(hi) << 16)
                   : (unsigned)emu_f16(lo) | ((unsigned)emu_f16(hi) << 16);
}
FMSA_DEV float fmsa_ex2(float x) { return exp2f(x); }
template <int IS_BF16> FMSA_DEV float fmsa_half_to_float(unsigned short h) {
    if (IS_BF16) return __uint_as_float(((unsigned)h) << 16);
    _Float16 f; memcpy(&f, &h, 2); return (float)f;
}
FMSA_DEV void fmsa_red_add2(float *addr, float a, float b) { addr[0] += a; addr[1] += b; }
/* a named barrier: the scheduler releases the threads waiting at id once `threads` of them wait */
FMSA_DEV void fmsa_bar_sync(int id, int threads) {
    emu_slots[emu_cur].mask = id;
    emu_slots[emu_cur].sv = threads;
    emu_yield(OP_BAR);
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* the sm_90 paths (-D__CUDA_ARCH__=900): the vector reduction; the bulk copies are not emulated */
FMSA_DEV void fmsa_red_add4(float *addr, float a, float b, float c, float d) {
    addr[0] += a; addr[1] += b; addr[2] += c; addr[3] += d;
}
FMSA_DEV void emu_no_bulk(void) { fprintf(stderr, "bulk copies not emulated\n"); abort(); }
#ifdef EMU_WGMMA
/* the wgmma kernels fence their cp.async writes for the products' async proxy: nothing to emulate */
FMSA_DEV void fmsa_fence_proxy_async(void) {}
#else
FMSA_DEV void fmsa_fence_proxy_async(void) { emu_no_bulk(); }
#endif /* EMU_WGMMA */
FMSA_DEV void fmsa_bulk_red_add_f32(float *, unsigned, int) { emu_no_bulk(); }
FMSA_DEV void fmsa_bulk_commit(void) { emu_no_bulk(); }
FMSA_DEV void fmsa_bulk_wait_read(void) { emu_no_bulk(); }
FMSA_DEV void fmsa_bulk_wait(void) { emu_no_bulk(); }
#endif
FMSA_DEV int fmsa_ld_acquire(const int *p) { return *p; }

/* tf32 (the fp32 backward): cvt.rna.tf32.f32 and mma.sync m16n8k8 tf32, the
   accumulation rounded toward zero (the truncating tensor core's pessimistic model) */
FMSA_DEV unsigned fmsa_tf32(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return u;
    return (u + 0x1000u) & ~0x1fffu;
}
FMSA_DEV void fmsa_tf32_split(unsigned x, unsigned *hi, unsigned *lo) {
    *hi = fmsa_tf32(__uint_as_float(x));
    *lo = fmsa_tf32(__uint_as_float(x) - __uint_as_float(*hi));
}
FMSA_DEV void fmsa_mma1688_tf32(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
    emu_slot *s = &emu_slots[emu_cur];
    for (int i = 0; i < 4; ++i) s->a[i] = a[i], s->c[i] = d[i];
    s->b0 = b0, s->b1 = b1;
    emu_yield(OP_MMATF32);
    for (int i = 0; i < 4; ++i) d[i] = emu_slots[emu_cur].c[i];
}
#endif
