/* Host emulation of the wgmma wrappers (the real ones: backends/cuda/kernels/fmsa_cuda_wgmma.cuh)
   for ../../../../fmsa_cuda_emu_wg.cpp.  A product is a warpgroup collective (all 128 threads at
   OP_WGMMA), read from shared memory through the descriptor's 128-byte swizzle as the real
   header documents, and asynchronous as on the hardware: the accumulators are written only when
   a wgmma.wait_group (also a warpgroup collective here) retires the product's group, so a read
   of an accumulator before its wait, or a write to one while a product is in flight, gives a
   wrong result; at retirement the product is recomputed from the shared memory of that moment,
   and a difference (an operand overwritten in flight) stops the run. */
#ifndef FMSA_CUDA_WGMMA_CUH
#define FMSA_CUDA_WGMMA_CUH

#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"

#define FMSA_WGMMA 1
/* the wgmma kernels' dynamic shared memory is the emulator's one array */
#define fmsa_smem_wg fmsa_smem
#define fmsa_smem_fwd_wg fmsa_smem
#define __log2f(x) log2f(x)

FMSA_DEV unsigned fmsa_sw128(int r, int c) {
    return (unsigned)(r * 128 + ((((c >> 3) ^ r) & 7) << 4) + (c & 7) * 2);
}
FMSA_DEV unsigned long long fmsa_wg_desc(unsigned saddr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((saddr & 0x3ffffu) >> 4) | ((unsigned long long)((lbo & 0x3ffffu) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3ffffu) >> 4) << 32) | (1ull << 62);
}

/* what a thread hands the collective (in its emu_wg_slot; emu_slots is the warp ops') */
struct emu_wg_slot {
    int n, rs, ta, tb, acc, bf16;
    unsigned long long da, db;
    unsigned a[4];
    float *d;
    int wait_n;
    unsigned mbar, parity; /* an mbarrier wait */
};
extern emu_wg_slot emu_wg_slots[];
extern int emu_wg_open[];      /* per thread: products issued since its last commit */
extern int emu_wg_committed[]; /* per thread: groups committed */

FMSA_DEV void fmsa_wg_fence(void) {}
FMSA_DEV void fmsa_wg_commit(void) { emu_wg_open[emu_cur] = 0, ++emu_wg_committed[emu_cur]; }
template <int N> FMSA_DEV void fmsa_wg_wait(void) {
    emu_wg_slots[emu_cur].wait_n = N;
    emu_yield(OP_WGWAIT);
}
FMSA_DEV void fmsa_wg_touch(float &) {}
FMSA_DEV void fmsa_wg_touch_u(unsigned &) {}

/* mbarriers (the runtime keeps their count, pending arrivals and phase by
   address), the named barrier's arrive, and setmaxnreg (nothing to emulate) */
void fmsa_mbar_init(unsigned addr, unsigned count);
void fmsa_mbar_arrive(unsigned addr);
FMSA_DEV void fmsa_mbar_wait(unsigned addr, unsigned parity) {
    emu_wg_slots[emu_cur].mbar = addr, emu_wg_slots[emu_cur].parity = parity;
    emu_yield(OP_MBAR);
}
void fmsa_bar_arrive(int id, int threads);
template <int N> FMSA_DEV void fmsa_setmaxnreg_inc(void) {}
template <int N> FMSA_DEV void fmsa_setmaxnreg_dec(void) {}

FMSA_DEV void emu_wg_issue(int n, int rs, int ta, int tb, int acc, int bf16, unsigned long long da,
                           unsigned long long db, const unsigned *a, float *d) {
    emu_wg_slot *s = &emu_wg_slots[emu_cur];
    s->n = n, s->rs = rs, s->ta = ta, s->tb = tb, s->acc = acc, s->bf16 = bf16, s->da = da, s->db = db, s->d = d;
    for (int i = 0; i < 4; ++i) s->a[i] = rs ? a[i] : 0u;
    ++emu_wg_open[emu_cur];
    emu_yield(OP_WGMMA);
}
template <int BF16, int TA, int TB>
FMSA_DEV void fmsa_wg_ss_n32(float (&d)[16], unsigned long long da, unsigned long long db, int acc) {
    emu_wg_issue(32, 0, TA, TB, acc, BF16, da, db, nullptr, d);
}
template <int BF16, int TA, int TB>
FMSA_DEV void fmsa_wg_ss_n64(float (&d)[32], unsigned long long da, unsigned long long db, int acc) {
    emu_wg_issue(64, 0, TA, TB, acc, BF16, da, db, nullptr, d);
}
template <int BF16, int TB>
FMSA_DEV void fmsa_wg_rs_n64(float (&d)[32], const unsigned (&a)[4], unsigned long long db, int acc) {
    emu_wg_issue(64, 1, 0, TB, acc, BF16, 0, db, a, d);
}
template <int BF16, int TA, int TB>
FMSA_DEV void fmsa_wg_ss_n128(float (&d)[64], unsigned long long da, unsigned long long db, int acc) {
    emu_wg_issue(128, 0, TA, TB, acc, BF16, da, db, nullptr, d);
}
template <int BF16, int TB>
FMSA_DEV void fmsa_wg_rs_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long db, int acc) {
    emu_wg_issue(128, 1, 0, TB, acc, BF16, 0, db, a, d);
}

#endif /* FMSA_CUDA_WGMMA_CUH */
