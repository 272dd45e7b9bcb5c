/*
 * The backward's main stage on Hopper (sm_90a): the five products by wgmma.
 *
 * One block = 128 keys of one kv head (two warpgroups of 64 keys each), the
 * grid, the step order and the workspace of the mma.sync row of the same D
 * and tile it replaces (fmsa_cuda_bwd.cu: d64 m128 n128 and d128 m64 n128,
 * both 2-stage; pre, the tiled dQ accumulator of OPT bit 13 and its
 * postprocess are shared).  Per step of BM query rows (BM x D = 64 x 128 or
 * 128 x 64), in each warpgroup:
 *   S^T = K Q^T, dP^T = V dO^T   m64nBM, both operands from shared memory;
 *                                the accumulators hold 16 keys x BM queries
 *                                a warp, i.e. the A fragments of P^T, dS^T
 *   P^T, dS^T                    in registers (exp2 form, the forward's lse)
 *   dV += P^T dO, dK += dS^T Q   m64nD, A from registers, B = dO / Q read
 *                                transposed (MN-major) from shared memory
 *   dQ = dS K                    one 64 x 64 block of the BM x D tile a
 *                                warpgroup (columns 64 w at d128, rows 64 w
 *                                at d64), m64n64 over all 128 keys: dS^T of
 *                                both warpgroups stored once to shared
 *                                memory, A and B read transposed; added to
 *                                dq_accum by one 512-byte vector reduction a
 *                                warp and n8 tile (the tiled layout), issued
 *                                in the next step after its proxy fence (OPT
 *                                bit 6)
 * Q, dO, lse and D of the next step load by cp.async during this one (2
 * stages).  Served (cuda_bwd_pick.c): bf16 / f16, head_dim = head_dim_v =
 * 64 or 128, no ALiBi, softcap or bit mask (causal and windows are), not
 * varlen, seqlen_q % 16 == 0, not the deterministic mode.  Every other
 * backward and other architectures keep the mma.sync kernels; where the
 * build has no sm_90a code the kernel is a trap that the pick never launches.
 */
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_bwd_block.cuh"
#include "backends/cuda/kernels/fmsa_cuda_bwd_wg.cuh"

#define FMSA_BWD_WG_BN 128 /* keys per block: two warpgroups of 64 */

#if FMSA_WGMMA
/// acc = A B^T over the head dim D (S^T = K Q^T, dP^T = V dO^T): A = 64 key
/// rows of a 128-key tile, B = a BM-row query tile, both K-major in D / 64
/// column chunks (descriptors of their first k16 step).
template <int BF16, int D, int BM>
FMSA_DEV void fmsa_bwd_wg_st(float (&acc)[BM / 2], unsigned long long da, unsigned long long db) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const unsigned ao = (unsigned)((kk >> 2) * FMSA_BWD_WG_BN * 128 + (kk & 3) * 32) >> 4;
        const unsigned bo = (unsigned)((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4;
        if constexpr (BM == 64) fmsa_wg_ss_n64<BF16, 0, 0>(acc, da + ao, db + bo, kk > 0);
        else fmsa_wg_ss_n128<BF16, 0, 0>(acc, da + ao, db + bo, kk > 0);
    }
}

/// d += A B over a k16 step, A the registers a (a P^T / dS^T slice), B a
/// D-wide MN-major tile (dO, Q): dV, dK.
template <int BF16, int D>
FMSA_DEV void fmsa_bwd_wg_kv(float (&d)[D / 2], const unsigned (&a)[4], unsigned long long db) {
    if constexpr (D == 128) fmsa_wg_rs_n128<BF16, 1>(d, a, db, 1);
    else fmsa_wg_rs_n64<BF16, 1>(d, a, db, 1);
}

/* OPT (cuda_bwd_instances.h): bit 6 (the instances) issues a step's dQ
   reductions in the next step, after its proxy fence and barrier: a
   fence.proxy.async is a CTA memory barrier in SASS (MEMBAR.ALL.CTA) and
   waits for this thread's reductions in flight.  The development variants
   (FMSA_CUDA_BWD_WG_VARIANTS): OPT 0, the reductions in their own step; bit
   2, a timing-only ablation (wrong results), dQ computed and not added */
template <int BF16, int OPT, int D, int BM> FMSA_DEV void fmsa_bwd_wg_main(const fmsa_cuda_bwd_params &P) {
    constexpr int BN = FMSA_BWD_WG_BN;
    constexpr int KV_BYTES = BN * D * 2, QT_BYTES = BM * D * 2; /* one K / V tile, one Q / dO tile */
    constexpr int CH = D / 8, LCH = D == 128 ? 4 : 3; /* 16-byte chunks of a row, log2 */
    /* dQ (BM x D) is two 64 x 64 blocks, one a warpgroup: by columns at d128
       (BM 64), by rows at d64 (BM 128) */
    static_assert(BM * D == 64 * 128 && (D == 64 || D == 128), "the shapes of the instances");
    const fmsa_cuda_fwd_params &F = P.fwd;
    extern __shared__ unsigned char fmsa_smem_wg[];
    /* 1024-byte aligned tiles: K, V, 2 x Q, 2 x dO, dS^T; then lse, D */
    const unsigned base = (fmsa_smem_addr(fmsa_smem_wg) + 1023u) & ~1023u;
    unsigned char *gen = fmsa_smem_wg + (base - fmsa_smem_addr(fmsa_smem_wg));
    const unsigned sK = base, sV = sK + KV_BYTES, sQ = sV + KV_BYTES, sdO = sQ + 2 * QT_BYTES;
    const unsigned sdS = sdO + 2 * QT_BYTES;
    unsigned char *gdS = gen + (sdS - base);
    float *sLse = (float *)(gen + (sdS - base) + BN * BM * 2), *sDs = sLse + 2 * BM;

    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int wg = tid >> 7, wi = (tid >> 5) & 3; /* warpgroup (64 keys), warp in it (16 keys) */
    const int rq = BM == 128 ? wg : 0, cq = D == 128 ? wg : 0; /* this warpgroup's dQ block */
    fmsa_bwd_wg_blk k;
    if (!fmsa_bwd_wg_block<BM, BN>(P, tid, (int *)sDs, &k)) return;
    const long long q_row0 = k.q_row0, k_row0 = k.k_row0, qb = k.qb, kb = k.kb, wl = k.wl, wr = k.wr, off = k.off;
    const int n0 = k.n0, hk = k.hk, b = k.b, sq = k.sq, sk = k.sk, group = k.group, mb = k.mb, me = k.me;
    const int niter = group * (me - mb);
    const long long rows_all = (long long)F.batch * F.total_q;
    const unsigned short *Qg = (const unsigned short *)F.q, *Kg = (const unsigned short *)F.k;
    const unsigned short *Vg = (const unsigned short *)F.v, *dOg = (const unsigned short *)P.dout;

    fmsa_bwd_wg_load_kv<D, BN>(F, Kg, Vg, sK, sV, tid, n0, sq, sk, wl, wr, off, kb, k_row0, hk);

    /* Q, dO of a step: rows lr0 + (256 / CH) p, chunk lch (fmsa_bwd_wg_load_step) */
    const int lr0 = tid >> LCH, lch = tid & (CH - 1);
    int cur_h = hk * group, cur_m = mb; /* the head and query tile of the next load */
    if (niter > 0)
        fmsa_bwd_wg_load_step<D, BM>(P, Qg, dOg, sQ, sdO, sLse, sDs, 0, cur_h, cur_m * BM, tid, lr0, lch, sq, qb, q_row0, rows_all);
    fmsa_cp_async_commit();

    float dv[D / 2], dk[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dv[i] = dk[i] = 0.0f;
    /* descriptors (start address in 16-byte units in the low bits, so an
       offset in bytes / 16 is added to them): K-major K / V rows of this
       warpgroup's keys, Q / dO K-major and MN-major, dS^T and K MN-major */
    const unsigned long long dK_k = fmsa_wg_desc(sK + wg * 64 * 128, 16, 1024);
    const unsigned long long dV_k = fmsa_wg_desc(sV + wg * 64 * 128, 16, 1024);
    const unsigned long long dQ_k = fmsa_wg_desc(sQ, 16, 1024), dO_k = fmsa_wg_desc(sdO, 16, 1024);
    const unsigned long long dQ_t = fmsa_wg_desc(sQ, BM * 128, 1024), dO_t = fmsa_wg_desc(sdO, BM * 128, 1024);
    const unsigned long long dS_t = fmsa_wg_desc(sdS + rq * (BN * 128), BN * 128, 1024);
    const unsigned long long dKc_t = fmsa_wg_desc(sK + cq * (BN * 128), BN * 128, 1024);
    const int kr0 = 64 * wg + 16 * wi + g; /* key (in the block) of accumulator rows i & 2 == 0 */
    float dq[32];
    float *dq_at = 0; /* OPT bit 6: where the dQ in dq goes, 0 for nowhere */

    for (int it = 0; it < niter; ++it) {
        const int st = it & 1, h = cur_h, m0 = cur_m * BM;
        if (++cur_m == me) {
            cur_m = mb;
            ++cur_h;
        }
        fmsa_cp_async_wait<0>();
        fmsa_fence_proxy_async(); /* cp.async wrote through the generic proxy; wgmma reads async */
        __syncthreads();         /* this step's tiles landed; last step's readers are done */
        if (it + 1 < niter)
            fmsa_bwd_wg_load_step<D, BM>(P, Qg, dOg, sQ, sdO, sLse, sDs, st ^ 1, cur_h, cur_m * BM, tid, lr0, lch, sq, qb, q_row0,
                                         rows_all);
        fmsa_cp_async_commit();
        if ((OPT & 64) && dq_at) fmsa_bwd_wg_dq_red<8>(dq, dq_at); /* the last step's dQ */

        float s[BM / 2], dp[BM / 2];
        const unsigned qo = (unsigned)(st * QT_BYTES) >> 4;
        fmsa_wg_fence();
        fmsa_bwd_wg_st<BF16, D, BM>(s, dK_k, dQ_k + qo);
        fmsa_wg_commit();
        fmsa_bwd_wg_st<BF16, D, BM>(dp, dV_k, dO_k + qo);
        fmsa_wg_commit();

        /* element i: key n0 + kr0 + 8 ((i >> 1) & 1), query m0 + 8 (i >> 2) + 2 t4 + (i & 1) */
        const float *lse_s = sLse + st * BM, *ds_s = sDs + st * BM;
        const int full = fmsa_bwd_wg_full<BM, BN>(m0, n0, sq, sk, wl, wr, off);
        int ri, rj, lo, hi; /* a cut tile's bounds at this lane's origin */
        fmsa_bwd_wg_bounds(m0 + 2 * t4, n0 + kr0, sq, sk, wl, wr, off, &ri, &rj, &lo, &hi);
        fmsa_wg_wait<1>();
#pragma unroll
        for (int i = 0; i < BM / 2; ++i) fmsa_wg_touch(s[i]);
        if (full) fmsa_bwd_wg_p<BM, 0>(s, lse_s, F.scale_log2, t4, ri, rj, lo, hi);
        else fmsa_bwd_wg_p<BM, 1>(s, lse_s, F.scale_log2, t4, ri, rj, lo, hi);
        fmsa_wg_wait<0>();
#pragma unroll
        for (int i = 0; i < BM / 2; ++i) fmsa_wg_touch(dp[i]);
        unsigned pa[BM / 16][4], sa[BM / 16][4];
        if (full) fmsa_bwd_wg_ds<BM, 0>(dp, s, ds_s, t4, ri, rj, lo, hi);
        else fmsa_bwd_wg_ds<BM, 1>(dp, s, ds_s, t4, ri, rj, lo, hi);
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                pa[kk][r] = fmsa_pack2<BF16>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
                sa[kk][r] = fmsa_pack2<BF16>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
            }
        /* dS^T [key][query] for dQ: 4-byte pairs, rows kr0 and kr0 + 8, in
           BM / 64 column chunks */
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) {
            unsigned char *c = gdS + (kk >> 2) * (BN * 128);
            const int q = 16 * (kk & 3) + 2 * t4;
            *(unsigned *)(c + fmsa_sw128(kr0, q)) = sa[kk][0];
            *(unsigned *)(c + fmsa_sw128(kr0 + 8, q)) = sa[kk][1];
            *(unsigned *)(c + fmsa_sw128(kr0, q + 8)) = sa[kk][2];
            *(unsigned *)(c + fmsa_sw128(kr0 + 8, q + 8)) = sa[kk][3];
        }
        fmsa_fence_proxy_async();

        /* dV += P^T dO, dK += dS^T Q over this step's 64 queries */
        fmsa_wg_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) {
            const unsigned ro = qo + ((unsigned)(kk * 16 * 128) >> 4);
            fmsa_bwd_wg_kv<BF16, D>(dv, pa[kk], dO_t + ro);
            fmsa_bwd_wg_kv<BF16, D>(dk, sa[kk], dQ_t + ro);
        }
        fmsa_wg_commit();
        __syncthreads(); /* both warpgroups' dS^T stored */

        /* dQ rows m0 + 64 rq.., columns 64 cq.. = dS K over the block's 128 keys */
        fmsa_wg_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            const unsigned ro = (unsigned)(kk * 16 * 128) >> 4;
            fmsa_wg_ss_n64<BF16, 1, 1>(dq, dS_t + ro, dKc_t + ro, kk > 0);
        }
        fmsa_wg_commit();
        fmsa_wg_wait<0>();
#pragma unroll
        for (int i = 0; i < 32; ++i) fmsa_wg_touch(dq[i]);
#pragma unroll
        for (int i = 0; i < D / 2; ++i) {
            fmsa_wg_touch(dv[i]);
            fmsa_wg_touch(dk[i]);
        }
        /* tile (row / 16, column / 8) of the tiled accumulator: the warp's 8
           tiles are 4 KB in a row, at tile (4 rq + wi, 8 cq) */
        float *at = (OPT & 4) || m0 + 64 * rq + 16 * wi >= sq
                        ? 0
                        : P.dq_accum + ((long long)(b * F.heads_q + h) * (sq / 16) + m0 / 16 + 4 * rq + wi) * (16 * D) +
                              (8 * cq) * 128 + lane * 4;
        if (OPT & 64) dq_at = at;
        else if (at) fmsa_bwd_wg_dq_red<8>(dq, at);
    }
    if ((OPT & 64) && dq_at) fmsa_bwd_wg_dq_red<8>(dq, dq_at);
    fmsa_cp_async_wait<0>();

    fmsa_bwd_wg_store_kv<BF16, D>(P, k, dv, dk, kr0, 0, t4);
}
#endif /* FMSA_WGMMA */

#define FMSA_BWD_WG_KERNEL(name, BF16, OPT, D, BM)                                                \
    extern "C" __global__ void __launch_bounds__(256, 1) name(const fmsa_cuda_bwd_params p) {     \
        FMSA_BWD_WG_BODY(BF16, OPT, D, BM);                                                       \
    }
#if FMSA_WGMMA
#define FMSA_BWD_WG_BODY(BF16, OPT, D, BM) fmsa_bwd_wg_main<BF16, OPT, D, BM>(p)
#else
/* no sm_90a code in this image: never picked (cuda_bwd_pick.c); a trap, not silent zeros */
#define FMSA_BWD_WG_BODY(BF16, OPT, D, BM) ((void)p, __trap())
#endif /* FMSA_WGMMA */
#define FMSA_BWD_WG_ROW(name, BF16, OPT, D, BM, BN, SMEM) FMSA_BWD_WG_KERNEL(name, BF16, OPT, D, BM)
FMSA_CUDA_BWD_WG_INSTANCES(FMSA_BWD_WG_ROW)
#if defined(FMSA_CUDA_BWD_WG_VARIANTS)
FMSA_CUDA_BWD_WG_VARIANT_LIST(FMSA_BWD_WG_ROW)
#endif /* FMSA_CUDA_BWD_WG_VARIANTS */
