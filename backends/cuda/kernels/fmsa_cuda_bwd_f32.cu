/*
 * The backward's main stage for fp32 tensors (cuda_bwd_f32_instances.h; its
 * pre and post are fmsa_cuda_bwd_pre_post.cu's, in fp32): the 16-bit
 * backward's design with every product on the tensor cores by 3xTF32
 * (mma.sync m16n8k8; fmsa_cuda_mma.cuh) and fp32 tiles in shared memory.
 *
 * main: a block owns BN keys of one kv head of one sequence (16 keys per warp
 * along the keys, WK = BN / 16 such warps, WQ = 8 / WK across) and loops over
 * every query head of the kv head and every BM-row query tile the window
 * allows.  Per step:
 *   S^T = K Q^T, dP^T = V dO^T  warp (wk, wq): keys 16 wk.., queries
 *                               BM / WQ of them; P = exp2(...) and dS in the
 *                               accumulators, then P^T and dS^T to shared
 *                               memory ([key][query]);
 *   dV += P^T dO, dK += dS^T Q  warp (wk, wq): the same 16 keys, columns
 *                               DV / WQ (D / WQ) of them, over all BM queries;
 *                               dK and dV stay in registers for the block;
 *   dQ = dS K                   warps BM / 16 along the rows x the rest along
 *                               D, added to the fp32 dq_accum by reductions,
 *                               or in key-tile order behind a counter per
 *                               query tile (deterministic: no float atomics).
 * Fragments are loaded with plain 32-bit (or 64-bit) shared loads: the tf32
 * fragments are single elements, so a transposed operand costs nothing.  Where
 * k runs along the rows of a stored operand, each k8 step takes its rows in
 * the order (0, 2, 4, 6 | 1, 3, 5, 7): k = t holds row 2t, k = t + 4 row 2t + 1
 * (both operands alike, so the product is unchanged); then an accumulator's
 * element pair is one A fragment pair, and with row pitches of 4 mod 16
 * floats every such load, (row g, column t) and (row 2t, column g), meets 32
 * different banks.
 *
 * Precision (backends/cuda/NOTES_BWD.md, "fp32 tensors"): each operand x =
 * hi + lo in tf32 (|x - hi - lo| <= 2^-22 |x|), a b = a_lo b_hi + a_hi b_lo +
 * a_hi b_hi, and every chunk of at most 8 k-steps accumulates from zero in two
 * registers of its own (tb: a_hi b_hi, ts: the small products) that are added
 * to S, dP, dK, dV or dQ by ordinary fp32 adds, so the tensor core's truncating
 * accumulation rounds at most 8 k-steps of one chunk, as in the forward.
 */
#include "backends/cuda/cuda_bwd_f32_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_bwd_block.cuh"
#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"
#include "common/fmsa_portable.h"


/// The three tf32 mma of one k8 step: ts += a_lo b_hi + a_hi b_lo, tb += a_hi b_hi.
FMSA_DEV void fmsa_bwd_f32_mma3(float tb[4], float ts[4], const unsigned ah[4], const unsigned al[4],
                                unsigned bh0, unsigned bl0, unsigned bh1, unsigned bl1) {
    fmsa_mma1688_tf32(ts, al, bh0, bh1);
    fmsa_mma1688_tf32(ts, ah, bl0, bl1);
    fmsa_mma1688_tf32(tb, ah, bh0, bh1);
}

FMSA_DEV void fmsa_bwd_f32_split(float x, unsigned *hi, unsigned *lo) {
    fmsa_tf32_split(__float_as_uint(x), hi, lo);
}

/// c = A B^T for 16 rows of A ([m][k], pitch LDA) and 8 NT rows of B ([n][k],
/// pitch LDB) over KS k8 steps, in chunks of 8 k-steps (S^T and dP^T).
template <int KS, int NT, int LDA, int LDB>
FMSA_DEV void fmsa_bwd_f32_nt(float c[][4], const float *a, const float *b, int g, int t) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[nt][e] = 0.0f;
    static_assert(KS % 8 == 0, "whole chunks of 8 k-steps");
    /* chunks not unrolled: each is one long unrolled run of loads and mma */
#pragma unroll 1
    for (int k0 = 0; k0 < KS; k0 += 8) {
        float tb[NT][4], ts[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) tb[nt][e] = ts[nt][e] = 0.0f;
#pragma unroll
        for (int ks = k0; ks < k0 + 8; ++ks) {
            const float *ap = a + g * LDA + 8 * ks + t;
            unsigned ah[4], al[4];
            fmsa_bwd_f32_split(ap[0], &ah[0], &al[0]);
            fmsa_bwd_f32_split(ap[8 * LDA], &ah[1], &al[1]);
            fmsa_bwd_f32_split(ap[4], &ah[2], &al[2]);
            fmsa_bwd_f32_split(ap[8 * LDA + 4], &ah[3], &al[3]);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const float *bp = b + (8 * nt + g) * LDB + 8 * ks + t;
                unsigned bh0, bl0, bh1, bl1;
                fmsa_bwd_f32_split(bp[0], &bh0, &bl0);
                fmsa_bwd_f32_split(bp[4], &bh1, &bl1);
                fmsa_bwd_f32_mma3(tb[nt], ts[nt], ah, al, bh0, bl0, bh1, bl1);
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) c[nt][e] += tb[nt][e] + ts[nt][e];
    }
}

/// c += A B for 16 rows of A ([m][k], pitch LDA, k taken in the permuted row
/// order of the file comment) and B ([k][n], pitch LDB, 8 NT columns) over KS
/// <= 8 k8 steps: one chunk per output tile (dV += P^T dO, dK += dS^T Q).
template <int KS, int NT, int LDA, int LDB>
FMSA_DEV void fmsa_bwd_f32_pk(float c[][4], const float *a, const float *b, int g, int t) {
    static_assert(KS <= 8, "one chunk of at most 8 k-steps");
    unsigned ah[KS][4], al[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        const float2 x0 = *(const float2 *)(a + g * LDA + 8 * ks + 2 * t);
        const float2 x1 = *(const float2 *)(a + (g + 8) * LDA + 8 * ks + 2 * t);
        fmsa_bwd_f32_split(x0.x, &ah[ks][0], &al[ks][0]); /* (g, k = t): column 2t */
        fmsa_bwd_f32_split(x1.x, &ah[ks][1], &al[ks][1]); /* (g + 8, k = t) */
        fmsa_bwd_f32_split(x0.y, &ah[ks][2], &al[ks][2]); /* (g, k = t + 4): column 2t + 1 */
        fmsa_bwd_f32_split(x1.y, &ah[ks][3], &al[ks][3]);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        float tb[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ts[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const float *bp = b + (8 * ks + 2 * t) * LDB + 8 * nt + g;
            unsigned bh0, bl0, bh1, bl1;
            fmsa_bwd_f32_split(bp[0], &bh0, &bl0);
            fmsa_bwd_f32_split(bp[LDB], &bh1, &bl1);
            fmsa_bwd_f32_mma3(tb, ts, ah[ks], al[ks], bh0, bl0, bh1, bl1);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) c[nt][e] += tb[e] + ts[e];
    }
}

/// c = A B with A stored transposed ([k][m], pitch LDA: the 16 columns at a)
/// and B ([k][n], pitch LDB), both k in the permuted row order, KS <= 8 k8
/// steps: one chunk (dQ = dS K from dS^T and K).
template <int KS, int NT, int LDA, int LDB>
FMSA_DEV void fmsa_bwd_f32_tk(float c[][4], const float *a, const float *b, int g, int t) {
    static_assert(KS <= 8, "one chunk of at most 8 k-steps");
    float tb[NT][4], ts[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) tb[nt][e] = ts[nt][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        const float *ap = a + (8 * ks + 2 * t) * LDA + g;
        unsigned ah[4], al[4];
        fmsa_bwd_f32_split(ap[0], &ah[0], &al[0]);       /* (m = g, k = t): row 2t */
        fmsa_bwd_f32_split(ap[8], &ah[1], &al[1]);       /* (g + 8, t) */
        fmsa_bwd_f32_split(ap[LDA], &ah[2], &al[2]);     /* (g, t + 4): row 2t + 1 */
        fmsa_bwd_f32_split(ap[LDA + 8], &ah[3], &al[3]); /* (g + 8, t + 4) */
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const float *bp = b + (8 * ks + 2 * t) * LDB + 8 * nt + g;
            unsigned bh0, bl0, bh1, bl1;
            fmsa_bwd_f32_split(bp[0], &bh0, &bl0);
            fmsa_bwd_f32_split(bp[LDB], &bh1, &bl1);
            fmsa_bwd_f32_mma3(tb[nt], ts[nt], ah, al, bh0, bl0, bh1, bl1);
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[nt][e] = tb[nt][e] + ts[nt][e];
}

/// Q, dO (BM rows from i0 of head h; zero past the sequence and past
/// head_dim / head_dim_v), lse and D of one step into buffer st.
template <int D, int DV, int BM, int THREADS>
FMSA_DEV void fmsa_bwd_f32_load(const fmsa_cuda_bwd_params &P, float *sQ, float *sdO, float *sLse,
                                float *sDs, long long qb, long long q_row0, int sq, int h, int i0,
                                long long rows_all) {
    constexpr int LDK = D + 4, LDV = DV + 4, CQ = D / 4, CV = DV / 4;
    const fmsa_cuda_fwd_params &F = P.fwd;
    const float *Qg = (const float *)F.q, *dOg = (const float *)P.dout;
    const int tid = threadIdx.x, hd = F.head_dim, hdv = F.head_dim_v;
    for (int c = tid; c < BM * CQ; c += THREADS) {
        const int r = c / CQ, ch = c % CQ, i = i0 + r;
        const int ok = i < sq && ch * 4 < hd;
        const float *src = ok ? Qg + qb * F.q_sb + (q_row0 + i) * F.q_ss + h * F.q_sh + ch * 4 : Qg;
        fmsa_cp_async16(fmsa_smem_addr(sQ + r * LDK + ch * 4), src, ok ? 16 : 0);
    }
    for (int c = tid; c < BM * CV; c += THREADS) {
        const int r = c / CV, ch = c % CV, i = i0 + r;
        const int ok = i < sq && ch * 4 < hdv;
        const float *src = ok ? dOg + qb * P.do_sb + (q_row0 + i) * P.do_ss + h * P.do_sh + ch * 4 : dOg;
        fmsa_cp_async16(fmsa_smem_addr(sdO + r * LDV + ch * 4), src, ok ? 16 : 0);
    }
    if (tid < BM) {
        const int i = i0 + tid, ok = i < sq;
        const float *ls = ok ? F.lse + qb * F.lse_sb + h * F.lse_sh + (q_row0 + i) * F.lse_ss : F.lse;
        fmsa_cp_async4(fmsa_smem_addr(sLse + tid), ls, ok ? 4 : 0);
    } else if (tid < 2 * BM) {
        const int i = i0 + tid - BM, ok = i < sq;
        const float *ds = ok ? P.dsum + h * rows_all + qb * F.total_q + q_row0 + i : P.dsum;
        fmsa_cp_async4(fmsa_smem_addr(sDs + tid - BM), ds, ok ? 4 : 0);
    }
}

template <int D, int DV, int BM, int BN, int STAGES>
FMSA_DEV void fmsa_bwd_f32_main(const fmsa_cuda_bwd_params &P) {
    constexpr int NW = FMSA_CUDA_BWD_WARPS, THREADS = 32 * NW;
    constexpr int WK = BN / 16, WQ = NW / WK;   /* S^T / dK / dV warps: keys x the rest */
    constexpr int QW = BM / WQ, NTS = QW / 8;   /* queries per warp in S^T */
    constexpr int DKW = D / WQ, NTK = DKW / 8;  /* dK columns per warp */
    constexpr int DVW = DV / WQ, NTV = DVW / 8; /* dV columns per warp */
    constexpr int MQ = BM / 16, NQ = NW / MQ;   /* dQ warps: rows x columns */
    constexpr int DQN = D / NQ, NTQ = DQN / 8;
    constexpr int LDK = D + 4, LDV = DV + 4, LDP = BM + 4; /* pitches in floats, 4 mod 16 */
    constexpr int CK = D / 4;                              /* 16-byte chunks of a K row */
    static_assert(BN % 16 == 0 && NW % WK == 0 && QW % 8 == 0, "S^T warp layout");
    static_assert(D % (8 * WQ) == 0 && DV % (8 * WQ) == 0, "dK/dV warp columns");
    static_assert(BM % 16 == 0 && NW % MQ == 0 && D % (8 * NQ) == 0, "dQ warp layout");
    static_assert(D % 16 == 0 && DV % 16 == 0 && BM % 16 == 0, "pitches of 4 mod 16");
    static_assert(BM / 8 <= 8 && BN / 8 <= 8, "dK/dV/dQ chunks of one step");
    static_assert(2 * BM <= THREADS && BN <= THREADS, "one thread per lse / D element");
    const fmsa_cuda_fwd_params &F = P.fwd;

    extern __shared__ __align__(16) unsigned char fmsa_smem[];
    float *sK = (float *)fmsa_smem;
    float *sV = sK + BN * LDK;
    float *sQ = sV + BN * LDV;
    float *sdO = sQ + STAGES * BM * LDK;
    float *sP = sdO + STAGES * BM * LDV; /* P^T [key][query] */
    float *sdS = sP + BN * LDP;          /* dS^T [key][query] */
    float *sLse = sdS + BN * LDP;
    float *sDs = sLse + STAGES * BM;
    int *sTicket = (int *)(sDs + STAGES * BM);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int ntiles = (F.seqlen_k + BN - 1) / BN;
    int n, hk, b;
    fmsa_bwd_block_coords(P, ntiles, tid, sTicket, &n, &hk, &b);
    long long q_row0, k_row0, qb, kb;
    int sq, sk;
    if (!fmsa_bwd_block_seq(F, b, tid, &q_row0, &k_row0, &qb, &kb, &sq, &sk)) return;
    const int n0 = n * BN;
    if (n0 >= sk) return;
    const int n1 = n0 + BN < sk ? n0 + BN : sk;
    const int group = F.heads_q / F.heads_kv;
    const int hd = F.head_dim, hdv = F.head_dim_v;
    const long long wl = F.window_left, wr = F.window_right, off = (long long)sk - sq;
    int mb, me;
    fmsa_bwd_mrange(n0, n1, sq, sk, wl, wr, BM, &mb, &me);
    const int nm = me - mb;
    const int niter = group * nm;
    const long long rows_all = (long long)(F.is_varlen ? 1 : F.batch) * F.total_q;
    const int mtiles_max = (F.seqlen_q + BM - 1) / BM;
    const int general = F.mask != 0 || F.alibi != 0 || F.softcap > 0.0f;
    const float *Kg = (const float *)F.k, *Vg = (const float *)F.v;

    /* K and V of the block, zero past the sequence, past the head dims and
       for keys the window hides from every row [klo, khi): such keys (often
       padding with garbage) must not reach dQ = dS K as 0 * NaN */
    long long klo = 0, khi = sk;
    if (wl >= 0 && off - wl > klo) klo = off - wl;
    if (wr >= 0 && (long long)sq + off + wr < khi) khi = (long long)sq + off + wr;
    for (int c = tid; c < BN * CK; c += THREADS) {
        const int r = c / CK, ch = c % CK, j = n0 + r;
        const int ok = j >= klo && j < khi && ch * 4 < hd;
        const float *ks = ok ? Kg + kb * F.k_sb + (k_row0 + j) * F.k_ss + hk * F.k_sh + ch * 4 : Kg;
        fmsa_cp_async16(fmsa_smem_addr(sK + r * LDK + ch * 4), ks, ok ? 16 : 0);
    }
    for (int c = tid; c < BN * (DV / 4); c += THREADS) {
        const int r = c / (DV / 4), ch = c % (DV / 4), j = n0 + r;
        const int ok = j >= klo && j < khi && ch * 4 < hdv;
        const float *vs = ok ? Vg + kb * F.v_sb + (k_row0 + j) * F.v_ss + hk * F.v_sh + ch * 4 : Vg;
        fmsa_cp_async16(fmsa_smem_addr(sV + r * LDV + ch * 4), vs, ok ? 16 : 0);
    }
    if (F.mask) {
        /* a bit mask may hide keys from every row: their K rows may hold
           NaN/Inf that dQ = dS K would spread; zero such rows (a row some
           query sees is NaN through the forward's lse anyway).  sP is free
           until the first step and holds one flag per key */
        int *bad = (int *)sP;
        fmsa_cp_async_commit();
        fmsa_cp_async_wait<0>();
        for (int r = tid; r < BN; r += THREADS) bad[r] = 0;
        __syncthreads();
        for (int c = tid; c < BN * D; c += THREADS)
            if ((__float_as_uint(sK[(c / D) * LDK + c % D]) & 0x7f800000u) == 0x7f800000u) bad[c / D] = 1;
        __syncthreads();
        for (int c = tid; c < BN * D; c += THREADS)
            if (bad[c / D]) sK[(c / D) * LDK + c % D] = 0.0f;
        __syncthreads(); /* sP is written in the first step */
    }

    if (niter > 0)
        fmsa_bwd_f32_load<D, DV, BM, THREADS>(P, sQ, sdO, sLse, sDs, qb, q_row0, sq, hk * group,
                                              mb * BM, rows_all);
    fmsa_cp_async_commit();

    const int wk = warp % WK, wq = warp / WK;
    const int kw0 = 16 * wk, qw0 = wq * QW, ck0 = wq * DKW, cv0 = wq * DVW;
    const int mq = warp % MQ, nq = warp / MQ;
    const int rq0 = 16 * mq, cq0 = nq * DQN;
    const int jw = n0 + kw0 + g; /* key of accumulator elements 0, 1 */

    float dv[NTV][4], dk[NTK][4];
#pragma unroll
    for (int a = 0; a < NTV; ++a)
#pragma unroll
        for (int e = 0; e < 4; ++e) dv[a][e] = 0.0f;
#pragma unroll
    for (int a = 0; a < NTK; ++a)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk[a][e] = 0.0f;

    for (int it = 0; it < niter; ++it) {
        const int st = STAGES == 2 ? (it & 1) : 0;
        const int h = hk * group + it / nm, m = mb + it % nm;
        const int m0 = m * BM;
        fmsa_cp_async_wait<0>();
        __syncthreads(); /* this step's tiles landed; last step's readers are done */
        if (STAGES == 2 && it + 1 < niter) {
            const int st1 = st ^ 1;
            fmsa_bwd_f32_load<D, DV, BM, THREADS>(P, sQ + st1 * BM * LDK, sdO + st1 * BM * LDV,
                                                  sLse + st1 * BM, sDs + st1 * BM, qb, q_row0, sq,
                                                  hk * group + (it + 1) / nm,
                                                  (mb + (it + 1) % nm) * BM, rows_all);
            fmsa_cp_async_commit();
        }
        const float *q_s = sQ + st * BM * LDK, *do_s = sdO + st * BM * LDV;

        /* S^T and dP^T of the warp's 16 keys x QW queries */
        float s[NTS][4], dp[NTS][4];
        fmsa_bwd_f32_nt<D / 8, NTS, LDK, LDK>(s, sK + kw0 * LDK, q_s + qw0 * LDK, g, t4);
        fmsa_bwd_f32_nt<DV / 8, NTS, LDV, LDV>(dp, sV + kw0 * LDV, do_s + qw0 * LDV, g, t4);

        /* P and dS in place of S and dP; element (nt, e) is key jw + 8 (e / 2),
           query m0 + qw0 + 8 nt + 2 t4 + e % 2 */
        const int full = !general && m0 + BM <= sq && n0 + BN <= sk &&
                         (wr < 0 || (long long)(n0 + BN - 1) <= m0 + off + wr) &&
                         (wl < 0 || (long long)n0 >= (long long)(m0 + BM - 1) + off - wl);
        const float *lse_s = sLse + st * BM + qw0, *ds_s = sDs + st * BM + qw0;
        if (full) {
            /* the 16-bit kernel's full tile, one 16-key row of fragments */
            fmsa_bwd_softmax_tile<0, 0>((float(&)[1][NTS][4])s, (float(&)[1][NTS][4])dp, lse_s, ds_s,
                                        F.scale_log2, t4, 0, 0, 0, 0);
        } else {
            float slope = 0.0f;
            const unsigned char *mrow0 = 0;
            if (F.alibi) slope = F.alibi[(long long)b * F.alibi_sb + (long long)h * F.alibi_sh];
            if (F.mask) mrow0 = F.mask + (long long)b * F.mask_sb + (long long)h * F.mask_sh;
            const float cap = F.softcap;
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int il = nt * 8 + 2 * t4 + (e & 1);
                    const int i = m0 + qw0 + il;
                    const int j = jw + ((e & 2) ? 8 : 0);
                    const float lraw = lse_s[il];
                    const float l2 = lraw == FMSA_NEG_INF_F ? FMSA_POS_INF_F : lraw * FMSA_LOG2E;
                    const long long diag = (long long)i + off;
                    int vis = i < sq && j < sk && (wl < 0 || j >= diag - wl) && (wr < 0 || j <= diag + wr);
                    if (vis && mrow0) vis = (mrow0[(long long)i * F.mask_ss + (j >> 3)] >> (j & 7)) & 1;
                    float s2, grad = 1.0f;
                    if (cap > 0.0f || F.alibi) {
                        const float x = s[nt][e] * F.softmax_scale;
                        float c = x;
                        if (cap > 0.0f) {
                            /* the library tanh and the division, as the fp32 forward */
                            c = cap * tanhf(x / cap);
                            grad = 1.0f - (c / cap) * (c / cap);
                        }
                        if (F.alibi) {
                            const long long dist = diag - j + F.alibi_offset; /* the ring's shift, 0 otherwise */
                            c += -slope * (float)(dist < 0 ? -dist : dist);
                        }
                        s2 = c * FMSA_LOG2E;
                    } else {
                        s2 = s[nt][e] * F.scale_log2;
                    }
                    const float pe = vis ? fmsa_ex2(s2 - l2) : 0.0f;
                    const float dse = pe * (dp[nt][e] - ds_s[il]) * grad;
                    s[nt][e] = pe;
                    dp[nt][e] = vis ? dse : 0.0f; /* select: dP of a hidden key may be NaN */
                }
        }
#pragma unroll
        for (int nt = 0; nt < NTS; ++nt) {
            const int r0 = kw0 * LDP + g * LDP + qw0 + 8 * nt + 2 * t4;
            *(float2 *)(sP + r0) = make_float2(s[nt][0], s[nt][1]);
            *(float2 *)(sP + r0 + 8 * LDP) = make_float2(s[nt][2], s[nt][3]);
            *(float2 *)(sdS + r0) = make_float2(dp[nt][0], dp[nt][1]);
            *(float2 *)(sdS + r0 + 8 * LDP) = make_float2(dp[nt][2], dp[nt][3]);
        }
        __syncthreads(); /* P^T, dS^T complete */

        /* dV += P^T dO and dK += dS^T Q: the warp's 16 keys, its columns, all BM queries */
        fmsa_bwd_f32_pk<BM / 8, NTV, LDP, LDV>(dv, sP + kw0 * LDP, do_s + cv0, g, t4);
        fmsa_bwd_f32_pk<BM / 8, NTK, LDP, LDK>(dk, sdS + kw0 * LDP, q_s + ck0, g, t4);
        if (STAGES == 1 && it + 1 < niter) {
            __syncthreads(); /* Q/dO of this step no longer read */
            fmsa_bwd_f32_load<D, DV, BM, THREADS>(P, sQ, sdO, sLse, sDs, qb, q_row0, sq,
                                                  hk * group + (it + 1) / nm,
                                                  (mb + (it + 1) % nm) * BM, rows_all);
            fmsa_cp_async_commit();
        }

        /* dQ(rows rq0.., columns cq0..) = dS K over the block's BN keys */
        float dq[NTQ][4];
        fmsa_bwd_f32_tk<BN / 8, NTQ, LDP, LDK>(dq, sdS + rq0, sK + cq0, g, t4);
        const int ia = m0 + rq0 + g, ib = ia + 8;
        const long long rstride = (long long)F.heads_q * P.accum_dim;
        float *rowa = P.dq_accum + ((qb * F.total_q + q_row0 + ia) * F.heads_q + h) * (long long)P.accum_dim;
        float *rowb = rowa + 8 * rstride;
        if (!P.deterministic) {
#pragma unroll
            for (int nt = 0; nt < NTQ; ++nt) {
                const int c = cq0 + nt * 8 + 2 * t4;
                if (ia < sq) fmsa_red_add2(rowa + c, dq[nt][0], dq[nt][1]);
                if (ib < sq) fmsa_red_add2(rowb + c, dq[nt][2], dq[nt][3]);
            }
        } else {
            int *sem = P.dq_sems + ((long long)b * F.heads_q + h) * mtiles_max + m;
            if (tid == 0) {
                /* turn = how many lower key tiles of this sequence visit tile m */
                int turn = 0;
                for (int n2 = 0; n2 < n; ++n2) {
                    int b2, e2;
                    const int a2 = n2 * BN, z2 = a2 + BN < sk ? a2 + BN : sk;
                    fmsa_bwd_mrange(a2, z2, sq, sk, wl, wr, BM, &b2, &e2);
                    turn += (m >= b2 && m < e2);
                }
                while (fmsa_ld_acquire(sem) != turn) {
                }
            }
            __syncthreads();
#pragma unroll
            for (int nt = 0; nt < NTQ; ++nt) {
                const int c = cq0 + nt * 8 + 2 * t4;
                if (ia < sq) {
                    float2 v = __ldcg((const float2 *)(rowa + c));
                    v.x += dq[nt][0];
                    v.y += dq[nt][1];
                    __stcg((float2 *)(rowa + c), v);
                }
                if (ib < sq) {
                    float2 v = __ldcg((const float2 *)(rowb + c));
                    v.x += dq[nt][2];
                    v.y += dq[nt][3];
                    __stcg((float2 *)(rowb + c), v);
                }
            }
            __threadfence();
            __syncthreads();
            if (tid == 0) atomicAdd(sem, 1);
        }
    }
    fmsa_cp_async_wait<0>();

    /* dV, and dK times the softmax scale, straight from the accumulators */
    {
        float *dVg = (float *)P.dv, *dKg = (float *)P.dk;
        const float sc = F.softmax_scale;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int j = jw + 8 * half;
            if (j >= sk) continue;
            float *vr = dVg + kb * P.dv_sb + (k_row0 + j) * P.dv_ss + hk * P.dv_sh;
            float *kr = dKg + kb * P.dk_sb + (k_row0 + j) * P.dk_ss + hk * P.dk_sh;
#pragma unroll
            for (int nt = 0; nt < NTV; ++nt) {
                const int c = cv0 + nt * 8 + 2 * t4;
                if (c < hdv) *(float2 *)(vr + c) = make_float2(dv[nt][2 * half], dv[nt][2 * half + 1]);
            }
#pragma unroll
            for (int nt = 0; nt < NTK; ++nt) {
                const int c = ck0 + nt * 8 + 2 * t4;
                if (c < hd)
                    *(float2 *)(kr + c) = make_float2(dk[nt][2 * half] * sc, dk[nt][2 * half + 1] * sc);
            }
        }
    }
}

#define FMSA_BWD_F32_KERNEL(D, DV, BM, BN, ST)                                                 \
    extern "C" __global__ void __launch_bounds__(32 * FMSA_CUDA_BWD_WARPS, 1)                \
        FMSA_CUDA_BWD_F32_SYM(D, DV, BM, BN, ST)(const fmsa_cuda_bwd_params p) {             \
        fmsa_bwd_f32_main<D, DV, BM, BN, ST>(p);                                             \
    }

#if defined(FMSA_CUDA_BWD_F32_ONLY)
/* single instances (the host emulation, resource checks): a file defines
   FMSA_CUDA_BWD_F32_ONLY(X) and includes this one */
FMSA_CUDA_BWD_F32_ONLY(FMSA_BWD_F32_KERNEL)
#else
FMSA_CUDA_BWD_F32_INSTANCES(FMSA_BWD_F32_KERNEL)
#endif /* FMSA_CUDA_BWD_F32_ONLY */
