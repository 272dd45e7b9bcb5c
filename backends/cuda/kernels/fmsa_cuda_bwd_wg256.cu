/*
 * The backward's main stage on Hopper (sm_90a) at head_dim 256: the five
 * products by wgmma, in the grid, step order and workspace of the d256 m64
 * n64 2-stage mma.sync row it replaces (fmsa_cuda_bwd.cu; pre, the tiled dQ
 * accumulator and its postprocess shared).
 *
 * One block = 64 keys of one kv head, two warpgroups.  dV and dK of 64 keys
 * x 256 columns do not fit one warpgroup's registers, so the warpgroups
 * split the columns (128 each) and share the keys; per step of 64 query
 * rows:
 *   S^T = K Q^T, dP^T = V dO^T   m64n32, both from shared memory: all 64
 *                                keys x this warpgroup's 32 queries
 *   P^T, dS^T                    in registers (fmsa_cuda_bwd_wg.cuh), both
 *                                stored to shared memory, 64 x 64 each
 *   dV += P^T dO, dK += dS^T Q   m64n128 over the 64 queries, A = P^T / dS^T,
 *                                B = dO / Q read transposed (its 128 columns)
 *   dQ(:, 128 w ..) = dS K       m64n128 over the 64 keys, A = dS^T and B = K
 *                                read transposed; added to dq_accum by one
 *                                512-byte vector reduction a warp and n8
 *                                tile, issued in the next step after its
 *                                barrier (OPT bit 6, as fmsa_cuda_bwd_wg.cu)
 * Q, dO, lse and D of the next step load by cp.async during this one.
 * Served as fmsa_cuda_bwd_wg.cu's kernels are (cuda_bwd_instances.h,
 * fmsa_cuda_bwd_wg_serves), with head_dim = head_dim_v = 256.
 */
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_bwd_wg.cuh"

#if FMSA_WGMMA
/// acc = A B^T over the 256 columns (S^T = K Q^T, dP^T = V dO^T): A = the 64
/// keys, B = 32 query rows, both K-major in 4 chunks of 4 k16 steps
/// (descriptors of their first step).
template <int BF16> FMSA_DEV void fmsa_bwd_wg256_st(float (&acc)[16], unsigned long long da, unsigned long long db) {
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
        const unsigned ao = (unsigned)((kk >> 2) * 64 * 128 + (kk & 3) * 32) >> 4;
        fmsa_wg_ss_n32<BF16, 0, 0>(acc, da + ao, db + ao, kk > 0); /* K and Q tiles: 64 rows a chunk */
    }
}

/* OPT: bit 6 as in fmsa_cuda_bwd_wg.cu (the deferred dQ reductions); bit 2
   the same timing-only ablation */
template <int BF16, int OPT> FMSA_DEV void fmsa_bwd_wg256_main(const fmsa_cuda_bwd_params &P) {
    constexpr int D = 256, BM = 64, BN = 64, CH = D / 8, LCH = 5; /* 16-byte chunks of a row, log2 */
    constexpr int KV_BYTES = BN * D * 2, QT_BYTES = BM * D * 2, PT_BYTES = BN * BM * 2;
    const fmsa_cuda_fwd_params &F = P.fwd;
    extern __shared__ unsigned char fmsa_smem_wg[];
    /* 1024-byte aligned tiles: K, V, 2 x Q, 2 x dO, P^T, dS^T; then lse, D */
    const unsigned base = (fmsa_smem_addr(fmsa_smem_wg) + 1023u) & ~1023u;
    unsigned char *gen = fmsa_smem_wg + (base - fmsa_smem_addr(fmsa_smem_wg));
    const unsigned sK = base, sV = sK + KV_BYTES, sQ = sV + KV_BYTES, sdO = sQ + 2 * QT_BYTES;
    const unsigned sP = sdO + 2 * QT_BYTES, sdS = sP + PT_BYTES;
    unsigned char *gP = gen + (sP - base), *gdS = gen + (sdS - base);
    float *sLse = (float *)(gen + (sdS - base) + PT_BYTES), *sDs = sLse + 2 * BM;

    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int wg = tid >> 7, wi = (tid >> 5) & 3; /* warpgroup (queries 32 wg.. of S^T, columns 128 wg..) */
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

    float dv[64], dk[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) dv[i] = dk[i] = 0.0f;
    /* descriptors: K / V K-major (all 64 keys), Q / dO K-major from this
       warpgroup's 32 query rows and MN-major from its 128 columns, P^T / dS^T
       K-major (keys x queries), dS^T and K MN-major (K: its 128 columns) */
    const unsigned long long dK_k = fmsa_wg_desc(sK, 16, 1024), dV_k = fmsa_wg_desc(sV, 16, 1024);
    const unsigned long long dQ_k = fmsa_wg_desc(sQ + wg * 32 * 128, 16, 1024);
    const unsigned long long dO_k = fmsa_wg_desc(sdO + wg * 32 * 128, 16, 1024);
    const unsigned long long dQ_t = fmsa_wg_desc(sQ + wg * 2 * BM * 128, BM * 128, 1024);
    const unsigned long long dO_t = fmsa_wg_desc(sdO + wg * 2 * BM * 128, BM * 128, 1024);
    const unsigned long long dP_k = fmsa_wg_desc(sP, 16, 1024), dS_k = fmsa_wg_desc(sdS, 16, 1024);
    const unsigned long long dS_t = fmsa_wg_desc(sdS, BN * 128, 1024);
    const unsigned long long dKc_t = fmsa_wg_desc(sK + wg * 2 * BN * 128, BN * 128, 1024);
    const int kr0 = 16 * wi + g; /* key (in the block) of accumulator rows i & 2 == 0 */
    float dq[64];
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
        if ((OPT & 64) && dq_at) fmsa_bwd_wg_dq_red<16>(dq, dq_at); /* the last step's dQ */

        /* S^T, dP^T over the 256 columns */
        float s[16], dp[16];
        const unsigned qo = (unsigned)(st * QT_BYTES) >> 4;
        fmsa_wg_fence();
        fmsa_bwd_wg256_st<BF16>(s, dK_k, dQ_k + qo);
        fmsa_wg_commit();
        fmsa_bwd_wg256_st<BF16>(dp, dV_k, dO_k + qo);
        fmsa_wg_commit();

        /* element i: key n0 + kr0 + 8 ((i >> 1) & 1), query m0 + 32 wg + 8 (i >> 2) + 2 t4 + (i & 1) */
        const float *lse_s = sLse + st * BM + 32 * wg, *ds_s = sDs + st * BM + 32 * wg;
        const int full = fmsa_bwd_wg_full<BM, BN>(m0, n0, sq, sk, wl, wr, off);
        int ri, rj, lo, hi; /* a cut tile's bounds at this lane's origin */
        fmsa_bwd_wg_bounds(m0 + 32 * wg + 2 * t4, n0 + kr0, sq, sk, wl, wr, off, &ri, &rj, &lo, &hi);
        fmsa_wg_wait<1>();
#pragma unroll
        for (int i = 0; i < 16; ++i) fmsa_wg_touch(s[i]);
        if (full) fmsa_bwd_wg_p<32, 0>(s, lse_s, F.scale_log2, t4, ri, rj, lo, hi);
        else fmsa_bwd_wg_p<32, 1>(s, lse_s, F.scale_log2, t4, ri, rj, lo, hi);
        fmsa_wg_wait<0>();
#pragma unroll
        for (int i = 0; i < 16; ++i) fmsa_wg_touch(dp[i]);
        if (full) fmsa_bwd_wg_ds<32, 0>(dp, s, ds_s, t4, ri, rj, lo, hi);
        else fmsa_bwd_wg_ds<32, 1>(dp, s, ds_s, t4, ri, rj, lo, hi);
        /* P^T, dS^T [key][query]: 4-byte pairs, rows kr0 and kr0 + 8 */
#pragma unroll
        for (int kk = 0; kk < 2; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int key = kr0 + 8 * (r & 1), q = 32 * wg + 16 * kk + 8 * (r >> 1) + 2 * t4;
                *(unsigned *)(gP + fmsa_sw128(key, q)) = fmsa_pack2<BF16>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
                *(unsigned *)(gdS + fmsa_sw128(key, q)) = fmsa_pack2<BF16>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
            }
        fmsa_fence_proxy_async();
        __syncthreads(); /* both warpgroups' P^T / dS^T stored */

        /* dV += P^T dO, dK += dS^T Q over the 64 queries (this warpgroup's
           128 columns); dQ = dS K over the 64 keys */
        fmsa_wg_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) {
            const unsigned ao = (unsigned)(kk * 32) >> 4, ro = qo + ((unsigned)(kk * 16 * 128) >> 4);
            fmsa_wg_ss_n128<BF16, 0, 1>(dv, dP_k + ao, dO_t + ro, 1);
            fmsa_wg_ss_n128<BF16, 0, 1>(dk, dS_k + ao, dQ_t + ro, 1);
        }
        fmsa_wg_commit();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            const unsigned ro = (unsigned)(kk * 16 * 128) >> 4;
            fmsa_wg_ss_n128<BF16, 1, 1>(dq, dS_t + ro, dKc_t + ro, kk > 0);
        }
        fmsa_wg_commit();
        fmsa_wg_wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) {
            fmsa_wg_touch(dq[i]);
            fmsa_wg_touch(dv[i]);
            fmsa_wg_touch(dk[i]);
        }
        /* the warp's 16 tiles of the tiled accumulator, at tile (wi, 16 wg) */
        float *at = (OPT & 4) || m0 + 16 * wi >= sq
                        ? 0
                        : P.dq_accum + ((long long)(b * F.heads_q + h) * (sq / 16) + m0 / 16 + wi) * (16 * D) +
                              (16 * wg) * 128 + lane * 4;
        if (OPT & 64) dq_at = at;
        else if (at) fmsa_bwd_wg_dq_red<16>(dq, at);
    }
    if ((OPT & 64) && dq_at) fmsa_bwd_wg_dq_red<16>(dq, dq_at);
    fmsa_cp_async_wait<0>();

    fmsa_bwd_wg_store_kv<BF16, 128>(P, k, dv, dk, kr0, 128 * wg, t4);
}
#endif /* FMSA_WGMMA */

#define FMSA_BWD_WG256_KERNEL(name, BF16, OPT)                                                    \
    extern "C" __global__ void __launch_bounds__(256, 1) name(const fmsa_cuda_bwd_params p) {     \
        FMSA_BWD_WG256_BODY(BF16, OPT);                                                           \
    }
#if FMSA_WGMMA
#define FMSA_BWD_WG256_BODY(BF16, OPT) fmsa_bwd_wg256_main<BF16, OPT>(p)
#else
/* no sm_90a code in this image: never picked (cuda_bwd_pick.c); a trap, not silent zeros */
#define FMSA_BWD_WG256_BODY(BF16, OPT) ((void)p, __trap())
#endif /* FMSA_WGMMA */
#define FMSA_BWD_WG256_ROW(name, BF16, OPT, D, BM, BN, SMEM) FMSA_BWD_WG256_KERNEL(name, BF16, OPT)
FMSA_CUDA_BWD_WG256_INSTANCES(FMSA_BWD_WG256_ROW)
#if defined(FMSA_CUDA_BWD_WG_VARIANTS)
FMSA_CUDA_BWD_WG256_VARIANT_LIST(FMSA_BWD_WG256_ROW)
#endif /* FMSA_CUDA_BWD_WG_VARIANTS */
