/*
 * What the Hopper backward kernels (fmsa_cuda_bwd_wg.cu: d64, d128;
 * fmsa_cuda_bwd_wg256.cu: d256) share: the swizzled cp.async tile loads,
 * the elementwise P^T / dS^T of an S^T accumulator (key rows, query
 * columns: the wgmma accumulator layout of fmsa_cuda_wgmma.cuh) and the dQ
 * reductions into the tiled accumulator (the forward in development,
 * fmsa_cuda_fwd_wg.cu, takes its loads and full-tile test).  sm_90a only.
 */
#ifndef FMSA_CUDA_BWD_WG_CUH
#define FMSA_CUDA_BWD_WG_CUH

#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_bwd_block.cuh"
#include "backends/cuda/kernels/fmsa_cuda_wgmma.cuh"

#if FMSA_WGMMA
/// Copies 16-byte chunk ch (0..D/8-1) of row r from src (zeros where ok is
/// 0; `any` is a valid address for that case) into a swizzled tile of `rows`
/// rows of D columns: column chunk ch / 8, position (ch % 8) ^ (r % 8).
FMSA_DEV void fmsa_bwd_wg_row16(unsigned tile, int rows, int r, int ch, const unsigned short *src, int ok,
                                const unsigned short *any) {
    const unsigned dst = tile + (unsigned)((ch >> 3) * rows * 128 + r * 128 + ((((ch & 7) ^ r) & 7) << 4));
    fmsa_cp_async16(dst, ok ? src : any, ok ? 16 : 0);
}

/// Whether accumulator element i of a cut tile is visible, against the
/// lane's bounds (fmsa_bwd_softmax_tile's): ri = sq - i0, rj = sk - j0, lo /
/// hi the window's at the origin; each test one compare with a constant.
FMSA_DEV int fmsa_bwd_wg_vis(int i, int ri, int rj, int lo, int hi) {
    const int ci = 8 * (i >> 2) + (i & 1), cj = (i & 2) ? 8 : 0, c = cj - ci;
    return ri > ci && rj > cj && lo >= -c && hi >= c;
}

/// P^T in place of S^T: exp2 against the forward's lse (shared memory, the
/// step's BM rows); CUT: a cut tile, hidden elements 0.  The caller branches
/// on whether the tile is full once a step, so a full tile runs no
/// per-element test (compiled as selects in every tile, the test held the
/// d64 kernel to 0.59-0.71x: bench/RESULTS.md, 2026-12-04).
template <int BM, int CUT>
FMSA_DEV void fmsa_bwd_wg_p(float (&s)[BM / 2], const float *lse_s, float scale_log2, int t4, int ri, int rj,
                            int lo, int hi) {
#pragma unroll
    for (int q8 = 0; q8 < BM / 8; ++q8) {
        const float2 l2 = *(const float2 *)(lse_s + q8 * 8 + 2 * t4);
        const float la = l2.x == FMSA_NEG_INF_F ? FMSA_POS_INF_F : l2.x * FMSA_LOG2E;
        const float lb = l2.y == FMSA_NEG_INF_F ? FMSA_POS_INF_F : l2.y * FMSA_LOG2E;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = 4 * q8 + e;
            const float pe = fmsa_ex2(fmaf(s[i], scale_log2, -((e & 1) ? lb : la)));
            s[i] = !CUT || fmsa_bwd_wg_vis(i, ri, rj, lo, hi) ? pe : 0.0f;
        }
    }
}

/// dS^T = P^T (dP^T - D) in place of dP^T, D from shared memory; CUT as above.
template <int BM, int CUT>
FMSA_DEV void fmsa_bwd_wg_ds(float (&dp)[BM / 2], const float (&s)[BM / 2], const float *ds_s, int t4, int ri,
                             int rj, int lo, int hi) {
#pragma unroll
    for (int q8 = 0; q8 < BM / 8; ++q8) {
        const float2 dd = *(const float2 *)(ds_s + q8 * 8 + 2 * t4);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = 4 * q8 + e;
            /* a hidden key's dS is a select: its dP may be NaN */
            const float dse = s[i] * (dp[i] - ((e & 1) ? dd.y : dd.x));
            dp[i] = !CUT || fmsa_bwd_wg_vis(i, ri, rj, lo, hi) ? dse : 0.0f;
        }
    }
}

/// A warp's dQ (16 rows x 8 NT columns, the accumulator fragments) added
/// to its NT tiles of the tiled accumulator from `at` (lane * 4 of the
/// first): one 512-byte vector reduction a warp and tile.
template <int NT> FMSA_DEV void fmsa_bwd_wg_dq_red(float (&dq)[4 * NT], float *at) {
#pragma unroll
    for (int j = 0; j < NT; ++j) fmsa_red_add4(at + j * 128, dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]);
}

/// A block's work, what both Hopper kernels derive first (the mma.sync
/// kernels' order, fmsa_cuda_bwd_block.cuh): its key tile from n0 (BN keys
/// to n1), kv head hk, sequence b and its rows, the window, and the query
/// tiles mb..me-1 of BM rows that see its keys, for each of `group` heads.
typedef struct fmsa_bwd_wg_blk {
    long long q_row0, k_row0, qb, kb, wl, wr, off;
    int n0, hk, b, sq, sk, group, mb, me;
} fmsa_bwd_wg_blk;

/// Fills k for this block (scratch: 4 bytes of shared memory for the
/// ticket); 0 where the block has no keys (then it returns at once).
template <int BM, int BN>
FMSA_DEV int fmsa_bwd_wg_block(const fmsa_cuda_bwd_params &P, int tid, int *scratch, fmsa_bwd_wg_blk *k) {
    const fmsa_cuda_fwd_params &F = P.fwd;
    const int ntiles = (F.seqlen_k + BN - 1) / BN;
    int n;
    if (F.window_left >= 0 || F.window_right >= 0)
        fmsa_bwd_block_coords_tail(&n, &k->hk, &k->b);
    else
        fmsa_bwd_block_coords(P, ntiles, tid, scratch, &n, &k->hk, &k->b);
    if (!fmsa_bwd_block_seq(F, k->b, tid, &k->q_row0, &k->k_row0, &k->qb, &k->kb, &k->sq, &k->sk)) return 0;
    k->n0 = n * BN;
    if (k->n0 >= k->sk) return 0;
    const int n1 = k->n0 + BN < k->sk ? k->n0 + BN : k->sk;
    k->group = F.heads_q / F.heads_kv;
    k->wl = F.window_left, k->wr = F.window_right, k->off = (long long)k->sk - k->sq;
    fmsa_bwd_mrange(k->n0, n1, k->sq, k->sk, k->wl, k->wr, BM, &k->mb, &k->me);
    return 1;
}

/// K and V of the block's BN keys from n0 into their swizzled tiles, zero
/// past the sequence and for keys the window hides from every row (their
/// rows may hold garbage that dQ = dS K must not see).
template <int D, int BN>
FMSA_DEV void fmsa_bwd_wg_load_kv(const fmsa_cuda_fwd_params &F, const unsigned short *Kg, const unsigned short *Vg,
                                  unsigned sK, unsigned sV, int tid, int n0, int sq, int sk, long long wl, long long wr,
                                  long long off, long long kb, long long k_row0, int hk) {
    constexpr int CH = D / 8, LCH = D == 256 ? 5 : D == 128 ? 4 : 3;
    long long klo = 0, khi = sk;
    if (wl >= 0 && off - wl > klo) klo = off - wl;
    if (wr >= 0 && (long long)sq + off + wr < khi) khi = (long long)sq + off + wr;
    for (int c = tid; c < BN * CH; c += 256) {
        const int r = c >> LCH, ch = c & (CH - 1), j = n0 + r, ok = j >= klo && j < khi;
        fmsa_bwd_wg_row16(sK, BN, r, ch, Kg + kb * F.k_sb + (k_row0 + j) * F.k_ss + hk * F.k_sh + ch * 8, ok, Kg);
        fmsa_bwd_wg_row16(sV, BN, r, ch, Vg + kb * F.v_sb + (k_row0 + j) * F.v_ss + hk * F.v_sh + ch * 8, ok, Vg);
    }
}

/// Whether the BM x BN tile at query m0, key n0 is whole: inside both
/// sequences and wholly visible to the window (no test per element).
template <int BM, int BN>
FMSA_DEV int fmsa_bwd_wg_full(int m0, int n0, int sq, int sk, long long wl, long long wr, long long off) {
    return m0 + BM <= sq && n0 + BN <= sk && (wr < 0 || (long long)(n0 + BN - 1) <= m0 + off + wr) &&
           (wl < 0 || (long long)n0 >= (long long)(m0 + BM - 1) + off - wl);
}

/// A cut tile's bounds at a lane's origin (query i0, key j0; as
/// fmsa_bwd_softmax_tile's), the arguments of fmsa_bwd_wg_vis.
FMSA_DEV void fmsa_bwd_wg_bounds(int i0, int j0, int sq, int sk, long long wl, long long wr, long long off, int *ri,
                                 int *rj, int *lo, int *hi) {
    const long long d0 = (long long)j0 - i0, cl = 1LL << 30;
    long long dlo = wl >= 0 ? d0 - (off - wl) : cl, dhi = wr >= 0 ? (off + wr) - d0 : cl;
    dlo = dlo > cl ? cl : dlo < -cl ? -cl : dlo;
    dhi = dhi > cl ? cl : dhi < -cl ? -cl : dhi;
    *ri = sq - i0, *rj = sk - j0, *lo = (int)dlo, *hi = (int)dhi;
}

/// dV and dK (times the softmax scale) of a warpgroup's accumulators, NC
/// columns from column c0: element i is key k.n0 + kr0 + 8 ((i >> 1) & 1),
/// column c0 + 8 (i >> 2) + 2 t4 + (i & 1); keys past the sequence are not
/// written.
template <int BF16, int NC>
FMSA_DEV void fmsa_bwd_wg_store_kv(const fmsa_cuda_bwd_params &P, const fmsa_bwd_wg_blk &k, const float (&dv)[NC / 2],
                                   const float (&dk)[NC / 2], int kr0, int c0, int t4) {
    unsigned short *dVg = (unsigned short *)P.dv, *dKg = (unsigned short *)P.dk;
    const float sc = P.fwd.softmax_scale;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int j = k.n0 + kr0 + 8 * half;
        if (j >= k.sk) continue;
        unsigned short *vr = dVg + k.kb * P.dv_sb + (k.k_row0 + j) * P.dv_ss + k.hk * P.dv_sh + c0 + 2 * t4;
        unsigned short *kr = dKg + k.kb * P.dk_sb + (k.k_row0 + j) * P.dk_ss + k.hk * P.dk_sh + c0 + 2 * t4;
#pragma unroll
        for (int c8 = 0; c8 < NC / 8; ++c8) {
            const int i = 4 * c8 + 2 * half;
            *(unsigned *)(vr + 8 * c8) = fmsa_pack2<BF16>(dv[i], dv[i + 1]);
            *(unsigned *)(kr + 8 * c8) = fmsa_pack2<BF16>(dk[i] * sc, dk[i + 1] * sc);
        }
    }
}

/// One step's Q and dO (BM rows of D columns into swizzled stage st of the
/// tiles at sQ / sdO; rows past sq zero), lse and D (BM each into stage st
/// of sLse / sDs): D / 8 x BM / 256 16-byte chunks a thread of 256, rows
/// lr0 + (256 / (D / 8)) p, chunk lch (lr0 = tid / (D / 8), lch = tid % (D /
/// 8), which the caller holds); lse by threads
/// 0..BM-1, D by BM..2BM-1.  Query head h, query rows i0.. of the sequence;
/// Qg / dOg: F.q / P.dout, which the caller holds (loaded once).
template <int D, int BM>
FMSA_DEV void fmsa_bwd_wg_load_step(const fmsa_cuda_bwd_params &P, const unsigned short *Qg, const unsigned short *dOg,
                                    unsigned sQ, unsigned sdO, float *sLse, float *sDs, int st, int h, int i0, int tid,
                                    int lr0, int lch, int sq, long long qb, long long q_row0, long long rows_all) {
    constexpr int CH = D / 8, QT_BYTES = BM * D * 2;
    const fmsa_cuda_fwd_params &F = P.fwd;
#pragma unroll
    for (int p = 0; p < BM * CH / 256; ++p) {
        const int r = lr0 + (256 / CH) * p, i = i0 + r, ok = i < sq;
        fmsa_bwd_wg_row16(sQ + st * QT_BYTES, BM, r, lch, Qg + qb * F.q_sb + (q_row0 + i) * F.q_ss + h * F.q_sh + lch * 8,
                          ok, Qg);
        fmsa_bwd_wg_row16(sdO + st * QT_BYTES, BM, r, lch,
                          dOg + qb * P.do_sb + (q_row0 + i) * P.do_ss + h * P.do_sh + lch * 8, ok, dOg);
    }
    if (tid < BM) {
        const int i = i0 + tid, ok = i < sq;
        const float *ls = ok ? F.lse + qb * F.lse_sb + h * F.lse_sh + (q_row0 + i) * F.lse_ss : F.lse;
        fmsa_cp_async4(fmsa_smem_addr(sLse + st * BM + tid), ls, ok ? 4 : 0);
    } else if (tid < 2 * BM) {
        const int i = i0 + tid - BM, ok = i < sq;
        const float *ds = ok ? P.dsum + h * rows_all + qb * F.total_q + q_row0 + i : P.dsum;
        fmsa_cp_async4(fmsa_smem_addr(sDs + st * BM + tid - BM), ds, ok ? 4 : 0);
    }
}

#endif /* FMSA_WGMMA */
#endif /* FMSA_CUDA_BWD_WG_CUH */
