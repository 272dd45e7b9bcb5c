/*
 * The backward's main stage: K/V-stationary mma.sync kernels (sm_80 and up).
 *
 * A block owns BN keys of one kv head of one sequence and loops over every
 * query head of that kv head and every BM-row query tile that can see its
 * keys.  Per step, five products:
 *   S^T = K Q^T, dP^T = V dO^T   warps WK (keys) x WQ (queries), tiles of
 *                                KW = BN/WK keys x QW = BM/WQ queries, so the
 *                                accumulators are already A fragments of P^T
 *                                and dS^T (keys on M);
 *   dV += P^T dO, dK += dS^T Q   the same warp keys, D split WQ ways: the
 *                                warp's own query columns of P^T / dS^T come
 *                                from registers, the other warps' from the
 *                                one copy each writes to shared memory;
 *   dQ = dS K                    warps MQ (rows) x NQ (D), dS read transposed
 *                                from that copy, added into the fp32
 *                                dq_accum by vector reductions (atomics), or
 *                                in key-tile order behind a counter per query
 *                                tile (deterministic mode, no float atomics).
 * K and V stay in shared memory; Q, dO, lse and D of the next step load by
 * cp.async while this one computes (STAGES = 2).  Rows are padded by 8
 * elements, so every ldmatrix phase and accumulator store is conflict-free.
 *
 * The score pipeline is the forward's (fmsa_score.h order): scale, softcap,
 * ALiBi, window / bit mask; P = exp2(s2 - lse2) with lse2 = +inf for a fully
 * masked row so that such rows give P = 0 and zero gradients.
 */
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_bwd_block.cuh"
#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"
#include "common/fmsa_portable.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FMSA_BWD_SM90 1
#else
#define FMSA_BWD_SM90 0
#endif /* __CUDA_ARCH__ */

/// The dQ fragment (rows g, g+8; columns c, c+1 of an n8 tile) added to
/// dq_accum: on sm_90 (V4) lane pairs swap halves so that each lane adds 4
/// consecutive floats of one row with one vector reduction.
template <int V4>
FMSA_DEV void fmsa_bwd_dq_red(float *rowa, float *rowb, int c, const float *x, int t4, int oka,
                              int okb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!V4) {
        if (oka) fmsa_red_add2(rowa + c, x[0], x[1]);
        if (okb) fmsa_red_add2(rowb + c, x[2], x[3]);
        return;
    }
    const int odd = t4 & 1;
    const float r0 = __shfl_xor_sync(0xffffffffu, odd ? x[0] : x[2], 1);
    const float r1 = __shfl_xor_sync(0xffffffffu, odd ? x[1] : x[3], 1);
    const int c4 = c - 2 * odd; /* 4-aligned: the even lane's column */
    if (odd) {
        if (okb) fmsa_red_add4(rowb + c4, r0, r1, x[2], x[3]);
    } else {
        if (oka) fmsa_red_add4(rowa + c4, x[0], x[1], r0, r1);
    }
#else
    if (oka) fmsa_red_add2(rowa + c, x[0], x[1]);
    if (okb) fmsa_red_add2(rowb + c, x[2], x[3]);
#endif /* __CUDA_ARCH__ */
}

/// The same addition without divergence (sm_90): each lane adds its 4
/// floats at its own row and column, mine = rowa + c for even lanes, rowb + c
/// - 2 for odd ones (both sides of the old branch ran serially).
FMSA_DEV void fmsa_bwd_dq_red4(float *mine, const float *x, int odd, int ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const float r0 = __shfl_xor_sync(0xffffffffu, odd ? x[0] : x[2], 1);
    const float r1 = __shfl_xor_sync(0xffffffffu, odd ? x[1] : x[3], 1);
    if (ok) fmsa_red_add4(mine, odd ? r0 : x[0], odd ? r1 : x[1], odd ? x[2] : r0, odd ? x[3] : r1);
#else
    (void)mine, (void)x, (void)odd, (void)ok;
#endif /* __CUDA_ARCH__ */
}

/// A lane's dQ fragment added where the tiled accumulator keeps it (OPT bit
/// 13): its 4 floats are consecutive, so one vector reduction on sm_90 (the
/// warp's 32 cover 512 contiguous bytes), two pairs of atomics before.
FMSA_DEV void fmsa_bwd_dq_red_t(float *at, const float *x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    fmsa_red_add4(at, x[0], x[1], x[2], x[3]);
#else
    fmsa_red_add2(at, x[0], x[1]);
    fmsa_red_add2(at + 2, x[2], x[3]);
#endif /* __CUDA_ARCH__ */
}

/// The sum of n floats (keeps the timing-only ablation's products alive).
FMSA_DEV float fmsa_bwd_sum(const float *x, int n) {
    float a = 0.0f;
#pragma unroll
    for (int i = 0; i < n; ++i) a += x[i];
    return a;
}

/// 1 for a bf16 (BF16) or f16 element pair packed in w with a non-finite half.
template <int BF16> FMSA_DEV int fmsa_bwd_nonfinite2(unsigned w) {
    const unsigned e = BF16 ? 0x7f807f80u : 0x7c007c00u;
    return (w & e & 0xffffu) == (e & 0xffffu) || (w & e & 0xffff0000u) == (e & 0xffff0000u);
}

/* DV_: the value head dim (V, dO, dV) of an instance of its own; 0 = D, the
   square rows, whose V and dO columns stay bounded by head_dim (they serve
   head_dim_v == head_dim only, so their machine code predates DV) */
template <int BF16, int D, int BM, int BN, int WK, int STAGES, int OPT, int DV_ = 0>
FMSA_DEV void fmsa_bwd_main(const fmsa_cuda_bwd_params &P) {
    constexpr int DV = DV_ ? DV_ : D, OWNV = DV_ != 0;
    constexpr int NW = FMSA_CUDA_BWD_WARPS, WQ = NW / WK;
    constexpr int KW = BN / WK, QW = BM / WQ; /* S^T warp tile: keys x queries */
    constexpr int MTK = KW / 16;              /* m16 key tiles per warp */
    constexpr int NTS = QW / 8;               /* n8 query tiles per warp (S^T) */
    constexpr int KBO = QW / 16;              /* the warp's own k16 query blocks */
    constexpr int DKW = D / WQ, NTK = DKW / 8;  /* dK columns per warp */
    constexpr int DVW = DV / WQ, NTV = DVW / 8; /* dV columns per warp */
    constexpr int NTM = NTK > NTV ? NTK : NTV;  /* the longer of the two */
    /* dQ warps: MQ along the rows, NQ along D (2 x 4 where D/4 is whole k16
       column pairs, else 4 x 2; OPT bit 2 asks for 4 x 2) */
    constexpr int MQ0 = (OPT & 4) ? 4 : 2;
    constexpr int MQ = (D / (NW / MQ0)) % 16 == 0 && BM % (16 * MQ0) == 0 ? MQ0 : 4;
    constexpr int NQ = NW / MQ, RQ = BM / MQ, DQN = D / NQ;
    constexpr int MTQ = RQ / 16, NTQ = DQN / 8;
    /* above d 256 a warp's whole dQ slice (18 n8 tiles at d 576) does not
       fit beside dK and dV: dQ then runs in NQC passes of NTQC n8 columns
       (its own block below; the rows up to 256 keep the one-pass code).
       One n8 pair a pass: at d 576 ptxas spills 28 bytes with three pairs
       (255 registers) and none with one (250) */
    constexpr int NTQC = NTQ <= 8 ? NTQ : 2;
    constexpr int NQC = NTQ / NTQC;
    constexpr int THREADS = 32 * NW;
    constexpr int LDS = D + 8, LDP = BM + 8; /* row pitches in elements */
    constexpr int CH = D / 8;                /* 16-byte chunks per row */
    constexpr int LDSV = DV + 8, CHV = DV / 8; /* the same of V and dO */
    static_assert(NW % WK == 0 && KW % 16 == 0 && QW % 16 == 0, "S^T warp layout");
    static_assert(D % (16 * WQ) == 0, "dK/dV warp columns must be whole k16 pairs");
    static_assert(DV % (16 * WQ) == 0 && DV % 16 == 0, "dV warp columns must be whole k16 pairs");
    static_assert(NW % MQ == 0 && RQ % 16 == 0 && DQN % 16 == 0, "dQ warp layout");
    static_assert(2 * BM <= THREADS, "one thread per lse / D element");
    static_assert(NTQ % NTQC == 0 && NTQC % 2 == 0, "dQ passes of whole n8 column pairs");
    /* dQ through a shared-memory staging tile and the copy engine's bulk
       reductions (sm_90, D <= 128, FMSA_CUDA_BWD_BULK_DQ or OPT bit 8; bit 9
       turns it off), else vector reductions straight from the accumulators */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int BULK = FMSA_CUDA_BWD_STAGED(D) && ((OPT & 256) || FMSA_CUDA_BWD_BULK_DQ) && !(OPT & 512);
#else
    constexpr int BULK = 0;
#endif /* __CUDA_ARCH__ */
    constexpr int LDQ = D + 8; /* staging pitch (floats): conflict-free float2 stores */
    static_assert(NQC == 1 || !BULK, "the staging tile holds one dQ pass");
    /* OPT bit 13: dq_accum in tiles of 16 rows x 8 columns (128 floats), each
       lane's accumulator fragment (rows g, g + 8; columns 2 t4, 2 t4 + 1) at
       4 lane of its tile, tiles [sequence][head][row / 16][column / 8]: a
       warp's reduction then covers 4 whole 128-byte lines instead of 16 rows'
       32 bytes each, and needs no lane swap.  Taken where every sequence's
       rows are whole 16-row groups (not varlen, seqlen_q % 16 == 0), so the
       region is the row layout's (the preprocess zeroes it unchanged) and the
       postprocess (fmsa_bwd_post_t) tests the same; else the row layout */
    constexpr int TQ = (OPT & 8192) && NQC == 1 && !BULK;
    /* OPT bit 17: no block barrier between the P^T / dS^T stores and their
       readers.  A warp's own query blocks of dV / dK come from registers, so
       they start at once; the other blocks need only the WQ warps of the same
       keys (named barrier 8 + wk), and dQ's rows only the NQ warps that wrote
       their dS^T, which are one contiguous group when the dQ warps are
       numbered rows-major (mq = warp / NQ) and a dQ warp's rows span whole
       S^T warp tiles (MQ <= WQ): named barrier 12 + mq */
    constexpr int SPLIT = (OPT & 131072) && STAGES == 2 && MQ <= WQ && !(OPT & 64) && !BULK;
    static_assert(!(OPT & 131072) || SPLIT, "OPT bit 17 needs 2 stages, MQ <= WQ, no bit 6, no bulk dQ");
    static_assert(!SPLIT || (WK <= 4 && MQ <= 4), "named barriers 8..15");
    const fmsa_cuda_fwd_params &F = P.fwd;

    extern __shared__ __align__(16) unsigned char fmsa_smem[];
    unsigned short *sK = (unsigned short *)fmsa_smem;
    unsigned short *sV = sK + BN * LDS;
    unsigned short *sQ = sV + BN * LDSV;
    unsigned short *sdO = sQ + STAGES * BM * LDS;
    unsigned short *sP = sdO + STAGES * BM * LDSV; /* P^T [key][query] */
    unsigned short *sdS = sP + BN * LDP;          /* dS^T [key][query] */
    float *sLse = (float *)(sdS + BN * LDP);
    float *sDs = sLse + STAGES * BM;
    int *sTicket = (int *)(sDs + STAGES * BM);
    float *sDq = (float *)(fmsa_smem + FMSA_CUDA_BWD_SMEM_BASE_V(D, DV, BM, BN, STAGES)); /* [BM][LDQ] */
    (void)sDq; /* unused where BULK is 0 */
    (void)LDQ;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int ntiles = (F.seqlen_k + BN - 1) / BN;
    int n, hk, b;
    /* OPT bit 16: a masked problem's grid ends on its short blocks */
    if ((OPT & 65536) && !P.deterministic && (F.window_left >= 0 || F.window_right >= 0))
        fmsa_bwd_block_coords_tail(&n, &hk, &b);
    else
        fmsa_bwd_block_coords(P, ntiles, tid, sTicket, &n, &hk, &b);
    long long q_row0, k_row0, qb, kb;
    int sq, sk;
    if (!fmsa_bwd_block_seq(F, b, tid, &q_row0, &k_row0, &qb, &kb, &sq, &sk)) return;
    const int n0 = n * BN;
    if (n0 >= sk) return;
    const int n1 = n0 + BN < sk ? n0 + BN : sk;
    const int group = F.heads_q / F.heads_kv;
    const int hd = F.head_dim;
    const int hdv = OWNV ? F.head_dim_v : hd; /* columns of V, dO, dV */
    const long long wl = F.window_left, wr = F.window_right, off = (long long)sk - sq;
    int mb, me;
    fmsa_bwd_mrange(n0, n1, sq, sk, wl, wr, BM, &mb, &me);
    const int nm = me - mb;
    const int niter = group * nm;
    const long long rows_all = (long long)(F.is_varlen ? 1 : F.batch) * F.total_q;
    const int mtiles_max = (F.seqlen_q + BM - 1) / BM;
    const int general = F.mask != 0 || F.alibi != 0 || F.softcap > 0.0f;
    const int tq = TQ && !F.is_varlen && F.seqlen_q % 16 == 0 && F.total_q == F.seqlen_q;
    const unsigned short *Qg = (const unsigned short *)F.q;
    const unsigned short *Kg = (const unsigned short *)F.k;
    const unsigned short *Vg = (const unsigned short *)F.v;
    const unsigned short *dOg = (const unsigned short *)P.dout;

    /* K and V of the block, zero past the sequence, past head_dim and for
       keys that the window hides from every row [klo, khi): such keys (often
       padding with garbage) must not reach dQ = dS K as 0 * NaN */
    long long klo = 0, khi = sk;
    if (wl >= 0 && off - wl > klo) klo = off - wl;
    if (wr >= 0 && (long long)sq + off + wr < khi) khi = (long long)sq + off + wr;
    for (int c = tid; c < BN * CH; c += THREADS) {
        const int r = c / CH, ch = c % CH, j = n0 + r;
        const int ok = j >= klo && j < khi && ch * 8 < hd;
        const int okv = OWNV ? j >= klo && j < khi && ch * 8 < hdv : ok;
        const unsigned short *ks = ok ? Kg + kb * F.k_sb + (k_row0 + j) * F.k_ss + hk * F.k_sh + ch * 8 : Kg;
        const unsigned short *vs = okv ? Vg + kb * F.v_sb + (k_row0 + j) * F.v_ss + hk * F.v_sh + ch * 8 : Vg;
        fmsa_cp_async16(fmsa_smem_addr(sK + r * LDS + ch * 8), ks, ok ? 16 : 0);
        /* V with K where DV == D (the same rows and chunks), else its own loop below */
        if (DV == D) fmsa_cp_async16(fmsa_smem_addr(sV + r * LDSV + ch * 8), vs, okv ? 16 : 0);
    }
    if (DV != D)
        for (int c = tid; c < BN * CHV; c += THREADS) {
            const int r = c / CHV, ch = c % CHV, j = n0 + r;
            const int ok = j >= klo && j < khi && ch * 8 < hdv;
            const unsigned short *vs = ok ? Vg + kb * F.v_sb + (k_row0 + j) * F.v_ss + hk * F.v_sh + ch * 8 : Vg;
            fmsa_cp_async16(fmsa_smem_addr(sV + r * LDSV + ch * 8), vs, ok ? 16 : 0);
        }

    if (F.mask) {
        /* a bit mask may hide keys from every row: their K rows may hold
           NaN/Inf that dQ = dS K would spread (0 * NaN); zero such rows (a row
           some query sees is NaN in the forward's lse anyway).  sP is free
           until the first step and holds one flag per key */
        int *bad = (int *)sP;
        fmsa_cp_async_commit();
        fmsa_cp_async_wait<0>();
        for (int r = tid; r < BN; r += THREADS) bad[r] = 0;
        __syncthreads();
        for (int c = tid; c < BN * CH; c += THREADS) {
            const uint4 w = *(const uint4 *)(sK + (c / CH) * LDS + (c % CH) * 8);
            if (fmsa_bwd_nonfinite2<BF16>(w.x) || fmsa_bwd_nonfinite2<BF16>(w.y) ||
                fmsa_bwd_nonfinite2<BF16>(w.z) || fmsa_bwd_nonfinite2<BF16>(w.w))
                bad[c / CH] = 1;
        }
        __syncthreads();
        for (int c = tid; c < BN * CH; c += THREADS)
            if (bad[c / CH]) *(uint4 *)(sK + (c / CH) * LDS + (c % CH) * 8) = make_uint4(0u, 0u, 0u, 0u);
        __syncthreads(); /* sP is written in the first step */
    }

    /* Q, dO, lse and D of iteration it into buffer st.  Thread tid copies
       chunk lch of rows lr0, lr0 + LRP, ...: the addresses are one uniform
       step base plus per-thread offsets fixed for the whole block */
    constexpr int LRP = THREADS / CH; /* rows per pass */
    const int lr0 = tid / CH, lch = tid % CH;
    const int lin = tid < LRP * CH; /* threads past LRP whole rows copy nothing */
    const int lact = lch * 8 < hd;  /* chunks past head_dim are zero-filled */
    const unsigned ls_t = (unsigned)(lr0 * LDS + lch * 8);
    const int lactv = OWNV ? lch * 8 < hdv : lact; /* dO's chunks, where they are Q's (DV == D) */
    /* dO's own copy pattern where DV != D (V: rows of CHV chunks) */
    constexpr int LRPV = THREADS / CHV;
    const int lr0v = tid / CHV, lchv = tid % CHV;
    const int linv = tid < LRPV * CHV, lactvv = lchv * 8 < hdv;
    const unsigned ls_tv = (unsigned)(lr0v * LDSV + lchv * 8);
    (void)lr0v, (void)lchv, (void)linv, (void)lactvv, (void)ls_tv, (void)lactv;
#define FMSA_BWD_LOAD_AT(st, h, i0)                                                            \
    do {                                                                                       \
        const int h_ = (h), i0_ = (i0);                                                        \
        const unsigned short *qs_ =                                                            \
            Qg + qb * F.q_sb + (q_row0 + i0_ + lr0) * F.q_ss + h_ * F.q_sh + lch * 8;          \
        const unsigned short *os_ =                                                            \
            dOg + qb * P.do_sb + (q_row0 + i0_ + lr0) * P.do_ss + h_ * P.do_sh + lch * 8;      \
        unsigned qd_ = fmsa_smem_addr(sQ + (st) * BM * LDS) + 2 * ls_t;                        \
        unsigned od_ = fmsa_smem_addr(sdO + (st) * BM * LDS) + 2 * ls_t;                       \
        _Pragma("unroll") for (int r = 0; r < BM; r += LRP) {                                  \
            if (lin && r + lr0 < BM) {                                                         \
                const int ok = lact && i0_ + r + lr0 < sq;                                     \
                const int okd = OWNV ? lactv && i0_ + r + lr0 < sq : ok;                       \
                fmsa_cp_async16(qd_, ok ? qs_ : Qg, ok ? 16 : 0);                              \
                if (DV == D) fmsa_cp_async16(od_, okd ? os_ : dOg, okd ? 16 : 0);              \
            }                                                                                  \
            qs_ += LRP * F.q_ss;                                                               \
            os_ += LRP * P.do_ss;                                                              \
            qd_ += 2 * LRP * LDS;                                                              \
            od_ += 2 * LRP * LDS;                                                              \
        }                                                                                      \
        if (DV != D) {                                                                         \
            const unsigned short *ov_ =                                                        \
                dOg + qb * P.do_sb + (q_row0 + i0_ + lr0v) * P.do_ss + h_ * P.do_sh + lchv * 8; \
            unsigned odv_ = fmsa_smem_addr(sdO + (st) * BM * LDSV) + 2 * ls_tv;                \
            _Pragma("unroll") for (int r = 0; r < BM; r += LRPV) {                             \
                if (linv && r + lr0v < BM) {                                                   \
                    const int ok = lactvv && i0_ + r + lr0v < sq;                              \
                    fmsa_cp_async16(odv_, ok ? ov_ : dOg, ok ? 16 : 0);                        \
                }                                                                              \
                ov_ += LRPV * P.do_ss;                                                         \
                odv_ += 2 * LRPV * LDSV;                                                       \
            }                                                                                  \
        }                                                                                      \
        if (tid < BM) {                                                                        \
            const int i = i0_ + tid, ok = i < sq;                                              \
            const float *ls = ok ? F.lse + qb * F.lse_sb + h_ * F.lse_sh + (q_row0 + i) * F.lse_ss \
                                 : F.lse;                                                      \
            fmsa_cp_async4(fmsa_smem_addr(sLse + (st) * BM + tid), ls, ok ? 4 : 0);            \
        } else if (tid < 2 * BM) {                                                             \
            const int i = i0_ + tid - BM, ok = i < sq;                                         \
            const float *ds = ok ? P.dsum + h_ * rows_all + qb * F.total_q + q_row0 + i : P.dsum; \
            fmsa_cp_async4(fmsa_smem_addr(sDs + (st) * BM + tid - BM), ds, ok ? 4 : 0);        \
        }                                                                                      \
    } while (0)

    /* OPT bit 0: the step's head and query tile are counted (cur_h, cur_m
       below, advanced at the top of a step, so they name the next step
       there) instead of divided out of it, for the loads as for the step */
#define FMSA_BWD_LOAD_ANY(st, it)                                                              \
    do {                                                                                       \
        if (OPT & 1) FMSA_BWD_LOAD_AT(st, cur_h, cur_m * BM);                                  \
        else FMSA_BWD_LOAD_AT(st, hk * group + (it) / nm, (mb + (it) % nm) * BM);              \
    } while (0)

    int cur_h = hk * group, cur_m = mb; /* OPT bit 0: the head and tile of the next step */
    if (niter > 0) FMSA_BWD_LOAD_ANY(0, 0);
    fmsa_cp_async_commit();

    const int wk = warp % WK, wq = warp / WK;
    const int kw0 = wk * KW, qw0 = wq * QW, cv0 = wq * DKW, cvv0 = wq * DVW;
    const int mq = SPLIT ? warp / NQ : warp % MQ, nq = SPLIT ? warp % NQ : warp / MQ;
    const int rq0 = mq * RQ, cq0 = nq * DQN;

    float dv[MTK][NTV][4], dk[MTK][NTK][4];
#pragma unroll
    for (int mt = 0; mt < MTK; ++mt)
#pragma unroll
        for (int a = 0; a < NTM; ++a)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (NTV == NTK) {
                    dv[mt][a][e] = dk[mt][a][e] = 0.0f;
                } else {
                    if (a < NTV) dv[mt][a][e] = 0.0f;
                    if (a < NTK) dk[mt][a][e] = 0.0f;
                }
            }

    /* per-lane ldmatrix offsets (elements):
       A, [m][k] stored: rows m = lane%16, col k 8*(lane/16);
       B, [n][k] stored: rows n = lane%8 + 8*(lane/16), col k 8*((lane/8)&1);
       B, [k][n] stored (trans): rows k = lane%8 + 8*((lane/8)&1), col n 8*(lane/16);
       A, [k][m] stored (trans): rows k = lane%8 + 8*(lane/16), col m 8*((lane/8)&1) */
    const unsigned sk_base = fmsa_smem_addr(sK), sv_base = fmsa_smem_addr(sV);
    const unsigned sp_base = fmsa_smem_addr(sP), sds_base = fmsa_smem_addr(sdS);
    const int a_kv = (kw0 + (lane & 15)) * LDS + (lane >> 4) * 8;
    const int b_nk = ((lane & 7) + 8 * (lane >> 4)) * LDS + 8 * ((lane >> 3) & 1);
    const int b_kn = ((lane & 7) + 8 * ((lane >> 3) & 1)) * LDS + 8 * (lane >> 4);
    /* the same three for V and dO (pitch LDSV) */
    const int a_kvv = DV == D ? a_kv : (kw0 + (lane & 15)) * LDSV + (lane >> 4) * 8;
    const int b_nkv = DV == D ? b_nk : ((lane & 7) + 8 * (lane >> 4)) * LDSV + 8 * ((lane >> 3) & 1);
    const int b_knv = DV == D ? b_kn : ((lane & 7) + 8 * ((lane >> 3) & 1)) * LDSV + 8 * (lane >> 4);
    const int a_p = (kw0 + (lane & 15)) * LDP + (lane >> 4) * 8;
    const int a_dst = ((lane & 7) + 8 * (lane >> 4)) * LDP + rq0 + 8 * ((lane >> 3) & 1);
    const int jw = n0 + kw0 + g; /* key of accumulator rows c0,c1 of key tile 0 */

    for (int it = 0; it < niter; ++it) {
        const int st = STAGES == 2 ? (it & 1) : 0;
        const int h = (OPT & 1) ? cur_h : hk * group + it / nm, m = (OPT & 1) ? cur_m : mb + it % nm;
        const int m0 = m * BM;
        if (++cur_m == me) {
            cur_m = mb;
            ++cur_h;
        }
        fmsa_cp_async_wait<0>();
        __syncthreads(); /* this step's tiles landed; last step's readers are done */
        if (STAGES == 2 && it + 1 < niter) {
            FMSA_BWD_LOAD_ANY(st ^ 1, it + 1);
            fmsa_cp_async_commit();
        }
        const unsigned sq_base = fmsa_smem_addr(sQ + st * BM * LDS);
        const unsigned sdo_base = fmsa_smem_addr(sdO + st * BM * LDSV);

        /* S^T = K Q^T over D and dP^T = V dO^T over DV, in one loop of k16 steps */
        float s[MTK][NTS][4], dp[MTK][NTS][4];
#pragma unroll
        for (int mt = 0; mt < MTK; ++mt)
#pragma unroll
            for (int a = 0; a < NTS; ++a)
#pragma unroll
                for (int e = 0; e < 4; ++e) dp[mt][a][e] = s[mt][a][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < (D > DV ? D : DV) / 16; ++kk) {
            const int qk = kk < D / 16, vk = kk < DV / 16; /* compile-time after unrolling */
            unsigned ak[MTK][4], av[MTK][4];
#pragma unroll
            for (int mt = 0; mt < MTK; ++mt) {
                if (qk) fmsa_ldmatrix_x4(ak[mt], sk_base + 2 * (a_kv + mt * 16 * LDS + kk * 16));
                if (vk) fmsa_ldmatrix_x4(av[mt], sv_base + 2 * (a_kvv + mt * 16 * LDSV + kk * 16));
            }
#pragma unroll
            for (int np = 0; np < NTS / 2; ++np) {
                unsigned bq[4], bo[4];
                const unsigned o = 2 * (b_nk + (qw0 + np * 16) * LDS + kk * 16);
                const unsigned ov = DV == D ? o : 2 * (b_nkv + (qw0 + np * 16) * LDSV + kk * 16);
                if (qk) fmsa_ldmatrix_x4(bq, sq_base + o);
                if (vk) fmsa_ldmatrix_x4(bo, sdo_base + ov);
#pragma unroll
                for (int mt = 0; mt < MTK; ++mt) {
                    if (qk) {
                        fmsa_mma16816<BF16>(s[mt][2 * np], ak[mt], bq[0], bq[1]);
                        fmsa_mma16816<BF16>(s[mt][2 * np + 1], ak[mt], bq[2], bq[3]);
                    }
                    if (vk) {
                        fmsa_mma16816<BF16>(dp[mt][2 * np], av[mt], bo[0], bo[1]);
                        fmsa_mma16816<BF16>(dp[mt][2 * np + 1], av[mt], bo[2], bo[3]);
                    }
                }
            }
        }

        /* P and dS in place of S and dP; element (mt, nt, e) is key
           jw + 16 mt + 8 (e / 2), query m0 + qw0 + 8 nt + 2 t4 + e % 2 */
        const int full = !general && m0 + BM <= sq && n0 + BN <= sk &&
                         (wr < 0 || (long long)(n0 + BN - 1) <= m0 + off + wr) &&
                         (wl < 0 || (long long)n0 >= (long long)(m0 + BM - 1) + off - wl);
        const float *lse_s = sLse + st * BM + qw0, *ds_s = sDs + st * BM + qw0;
        if (full) {
            fmsa_bwd_softmax_tile<0, OPT>(s, dp, lse_s, ds_s, F.scale_log2, t4, 0, 0, 0, 0);
        } else if ((OPT & 32768) && !general) {
            /* OPT bit 15: a tile that a causal diagonal, a window or a sequence
               end cuts, without mask, ALiBi or softcap: the full tile's
               arithmetic and one select per element, against bounds taken at
               this lane's fragment origin (the general path below reloads lse
               and tests every feature) */
            const int i0 = m0 + qw0 + 2 * t4;
            const long long d0 = (long long)jw - i0, cl = 1LL << 30;
            long long dlo = wl >= 0 ? d0 - (off - wl) : cl, dhi = wr >= 0 ? (off + wr) - d0 : cl;
            dlo = dlo > cl ? cl : dlo < -cl ? -cl : dlo;
            dhi = dhi > cl ? cl : dhi < -cl ? -cl : dhi;
            fmsa_bwd_softmax_tile<1, OPT>(s, dp, lse_s, ds_s, F.scale_log2, t4, sq - i0, sk - jw, (int)dlo,
                                          (int)dhi);
        } else {
            float slope = 0.0f;
            const unsigned char *mrow0 = 0;
            if (F.alibi) slope = F.alibi[(long long)b * F.alibi_sb + (long long)h * F.alibi_sh];
            if (F.mask) mrow0 = F.mask + (long long)b * F.mask_sb + (long long)h * F.mask_sh;
            const float cap = F.softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
                for (int mt = 0; mt < MTK; ++mt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int il = nt * 8 + 2 * t4 + (e & 1);
                        const int i = m0 + qw0 + il;
                        const int j = jw + 16 * mt + ((e & 2) ? 8 : 0);
                        const float lraw = lse_s[il];
                        const float l2 = lraw == FMSA_NEG_INF_F ? FMSA_POS_INF_F : lraw * FMSA_LOG2E;
                        const long long diag = (long long)i + off;
                        int vis = i < sq && j < sk && (wl < 0 || j >= diag - wl) && (wr < 0 || j <= diag + wr);
                        if (vis && mrow0) vis = (mrow0[(long long)i * F.mask_ss + (j >> 3)] >> (j & 7)) & 1;
                        float s2, grad = 1.0f;
                        if (cap > 0.0f || F.alibi) {
                            const float x = s[mt][nt][e] * F.softmax_scale;
                            float c = x;
                            if (cap > 0.0f) {
                                c = cap * tanhf(x * inv_cap);
                                grad = 1.0f - (c * inv_cap) * (c * inv_cap);
                            }
                            if (F.alibi) {
                                const long long dist = diag - j + F.alibi_offset;
                                c += -slope * (float)(dist < 0 ? -dist : dist);
                            }
                            s2 = c * FMSA_LOG2E;
                        } else {
                            s2 = s[mt][nt][e] * F.scale_log2;
                        }
                        const float pe = vis ? fmsa_ex2(s2 - l2) : 0.0f;
                        const float dse = pe * (dp[mt][nt][e] - ds_s[il]) * grad;
                        s[mt][nt][e] = pe;
                        dp[mt][nt][e] = vis ? dse : 0.0f; /* select: dP of a hidden key may be NaN */
                    }
        }

        /* P^T and dS^T as A fragments (accumulator layout == A layout), and
           one copy of each in shared memory for the other warps */
        unsigned pa[MTK][KBO][4], sa[MTK][KBO][4];
#pragma unroll
        for (int mt = 0; mt < MTK; ++mt)
#pragma unroll
            for (int kb2 = 0; kb2 < KBO; ++kb2) {
                pa[mt][kb2][0] = fmsa_pack2<BF16>(s[mt][2 * kb2][0], s[mt][2 * kb2][1]);
                pa[mt][kb2][1] = fmsa_pack2<BF16>(s[mt][2 * kb2][2], s[mt][2 * kb2][3]);
                pa[mt][kb2][2] = fmsa_pack2<BF16>(s[mt][2 * kb2 + 1][0], s[mt][2 * kb2 + 1][1]);
                pa[mt][kb2][3] = fmsa_pack2<BF16>(s[mt][2 * kb2 + 1][2], s[mt][2 * kb2 + 1][3]);
                sa[mt][kb2][0] = fmsa_pack2<BF16>(dp[mt][2 * kb2][0], dp[mt][2 * kb2][1]);
                sa[mt][kb2][1] = fmsa_pack2<BF16>(dp[mt][2 * kb2][2], dp[mt][2 * kb2][3]);
                sa[mt][kb2][2] = fmsa_pack2<BF16>(dp[mt][2 * kb2 + 1][0], dp[mt][2 * kb2 + 1][1]);
                sa[mt][kb2][3] = fmsa_pack2<BF16>(dp[mt][2 * kb2 + 1][2], dp[mt][2 * kb2 + 1][3]);
                const int r0 = (kw0 + 16 * mt + g) * LDP + qw0 + 16 * kb2 + 2 * t4;
                const int r1 = r0 + 8 * LDP;
                *(unsigned *)(sP + r0) = pa[mt][kb2][0];
                *(unsigned *)(sP + r1) = pa[mt][kb2][1];
                *(unsigned *)(sP + r0 + 8) = pa[mt][kb2][2];
                *(unsigned *)(sP + r1 + 8) = pa[mt][kb2][3];
                *(unsigned *)(sdS + r0) = sa[mt][kb2][0];
                *(unsigned *)(sdS + r1) = sa[mt][kb2][1];
                *(unsigned *)(sdS + r0 + 8) = sa[mt][kb2][2];
                *(unsigned *)(sdS + r1 + 8) = sa[mt][kb2][3];
            }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        /* the last step's bulk reductions have read the staging tile */
        if (BULK && warp < MQ) fmsa_bulk_wait_read();
#endif /* __CUDA_ARCH__ */
        if (!SPLIT) __syncthreads(); /* P^T, dS^T complete */

        /* dV += P^T dO (WH bit 0) and dK += dS^T Q (bit 1): the warp's own
           query blocks from registers, the other warps' from shared memory */
#define FMSA_BWD_DKDV_OWN(WH)                                                                  \
    do {                                                                                       \
        _Pragma("unroll") for (int kb2 = 0; kb2 < KBO; ++kb2) {                                \
            const int qrow = qw0 + 16 * kb2;                                                   \
            _Pragma("unroll") for (int np = 0; np < NTM / 2; ++np) {                           \
                unsigned bo[4], bq[4];                                                         \
                const int on_v = ((WH) & 1) && np < NTV / 2, on_k = ((WH) & 2) && np < NTK / 2; \
                const unsigned o = 2 * (b_kn + qrow * LDS + cv0 + np * 16);                    \
                const unsigned ov = DV == D ? o : 2 * (b_knv + qrow * LDSV + cvv0 + np * 16);  \
                if (on_v) fmsa_ldmatrix_x4_trans(bo, sdo_base + ov);                           \
                if (on_k) fmsa_ldmatrix_x4_trans(bq, sq_base + o);                             \
                _Pragma("unroll") for (int mt = 0; mt < MTK; ++mt) {                           \
                    if (on_v) {                                                                \
                        fmsa_mma16816<BF16>(dv[mt][2 * np], pa[mt][kb2], bo[0], bo[1]);        \
                        fmsa_mma16816<BF16>(dv[mt][2 * np + 1], pa[mt][kb2], bo[2], bo[3]);    \
                    }                                                                          \
                    if (on_k) {                                                                \
                        fmsa_mma16816<BF16>(dk[mt][2 * np], sa[mt][kb2], bq[0], bq[1]);        \
                        fmsa_mma16816<BF16>(dk[mt][2 * np + 1], sa[mt][kb2], bq[2], bq[3]);    \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    } while (0)
#define FMSA_BWD_DKDV_OTHER(WH)                                                                \
    do {                                                                                       \
        _Pragma("unroll") for (int ob = 0; ob < (BM - QW) / 16; ++ob) {                        \
            const int kb2 = ob < qw0 / 16 ? ob : ob + KBO;                                     \
            unsigned ap[MTK][4], as[MTK][4];                                                   \
            _Pragma("unroll") for (int mt = 0; mt < MTK; ++mt) {                               \
                if ((WH) & 1) fmsa_ldmatrix_x4(ap[mt], sp_base + 2 * (a_p + mt * 16 * LDP + kb2 * 16)); \
                if ((WH) & 2) fmsa_ldmatrix_x4(as[mt], sds_base + 2 * (a_p + mt * 16 * LDP + kb2 * 16)); \
            }                                                                                  \
            _Pragma("unroll") for (int np = 0; np < NTM / 2; ++np) {                           \
                unsigned bo[4], bq[4];                                                         \
                const int on_v = ((WH) & 1) && np < NTV / 2, on_k = ((WH) & 2) && np < NTK / 2; \
                const unsigned o = 2 * (b_kn + kb2 * 16 * LDS + cv0 + np * 16);                \
                const unsigned ov = DV == D ? o : 2 * (b_knv + kb2 * 16 * LDSV + cvv0 + np * 16); \
                if (on_v) fmsa_ldmatrix_x4_trans(bo, sdo_base + ov);                           \
                if (on_k) fmsa_ldmatrix_x4_trans(bq, sq_base + o);                             \
                _Pragma("unroll") for (int mt = 0; mt < MTK; ++mt) {                           \
                    if (on_v) {                                                                \
                        fmsa_mma16816<BF16>(dv[mt][2 * np], ap[mt], bo[0], bo[1]);             \
                        fmsa_mma16816<BF16>(dv[mt][2 * np + 1], ap[mt], bo[2], bo[3]);         \
                    }                                                                          \
                    if (on_k) {                                                                \
                        fmsa_mma16816<BF16>(dk[mt][2 * np], as[mt], bq[0], bq[1]);             \
                        fmsa_mma16816<BF16>(dk[mt][2 * np + 1], as[mt], bq[2], bq[3]);         \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    } while (0)
#define FMSA_BWD_DKDV(WH)                                                                      \
    do {                                                                                       \
        FMSA_BWD_DKDV_OWN(WH);                                                                 \
        FMSA_BWD_DKDV_OTHER(WH);                                                               \
    } while (0)

        if (SPLIT) {
            FMSA_BWD_DKDV_OWN(3);
            fmsa_bar_sync(8 + wk, 32 * WQ); /* the other warps of these keys stored theirs */
            FMSA_BWD_DKDV_OTHER(3);
            fmsa_bar_sync(12 + mq, 32 * NQ); /* dQ's rows of dS^T stored */
        } else {
            /* OPT bit 6: dQ between dV and dK, so its reductions drain behind dK's products */
            FMSA_BWD_DKDV((OPT & 64) ? 1 : 3);
        }
        if (STAGES == 1 && !(OPT & 64) && it + 1 < niter) {
            __syncthreads(); /* Q/dO of this step no longer read */
            FMSA_BWD_LOAD_ANY(0, it + 1);
            fmsa_cp_async_commit();
        }

        /* dQ(rows rq0.., columns cq0..) = dS K */
        if (NQC > 1 && !(OPT & 16)) {
            /* in NQC passes of NTQC n8 columns (above d 256), each added as
               the one-pass code below adds its slice (no staging tile here);
               deterministic mode waits once for the tile's turn and releases
               it after the last pass */
            int *sem = P.dq_sems + ((long long)b * F.heads_q + h) * mtiles_max + m;
            if (P.deterministic) {
                if (tid == 0) {
                    int turn = 0; /* how many lower key tiles of this sequence visit tile m */
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
            }
            const int ia0 = m0 + rq0 + g;
            const long long rstride = (long long)F.heads_q * P.accum_dim;
            float *rowa0 = P.dq_accum + ((qb * F.total_q + q_row0 + ia0) * F.heads_q + h) * (long long)P.accum_dim;
#pragma unroll 1
            for (int qc = 0; qc < NQC; ++qc) {
                const int cq = cq0 + qc * 8 * NTQC;
                float dq[MTQ][NTQC][4];
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt)
#pragma unroll
                    for (int a = 0; a < NTQC; ++a)
#pragma unroll
                        for (int e = 0; e < 4; ++e) dq[mt][a][e] = 0.0f;
#pragma unroll
                for (int kb2 = 0; kb2 < BN / 16; ++kb2) {
                    unsigned a[MTQ][4];
#pragma unroll
                    for (int mt = 0; mt < MTQ; ++mt)
                        fmsa_ldmatrix_x4_trans(a[mt], sds_base + 2 * (a_dst + kb2 * 16 * LDP + 16 * mt));
#pragma unroll
                    for (int np = 0; np < NTQC / 2; ++np) {
                        unsigned bk[4];
                        fmsa_ldmatrix_x4_trans(bk, sk_base + 2 * (b_kn + kb2 * 16 * LDS + cq + np * 16));
#pragma unroll
                        for (int mt = 0; mt < MTQ; ++mt) {
                            fmsa_mma16816<BF16>(dq[mt][2 * np], a[mt], bk[0], bk[1]);
                            fmsa_mma16816<BF16>(dq[mt][2 * np + 1], a[mt], bk[2], bk[3]);
                        }
                    }
                }
                if (!P.deterministic && FMSA_BWD_SM90) {
                    const int odd = t4 & 1; /* as the one-pass code's OPT bit 1 */
#pragma unroll
                    for (int mt = 0; mt < MTQ; ++mt) {
                        float *mine = rowa0 + (16 * mt + 8 * odd) * rstride + cq + 2 * t4 - 2 * odd;
                        const int ok = ia0 + 16 * mt + 8 * odd < sq;
#pragma unroll
                        for (int nt = 0; nt < NTQC; ++nt) fmsa_bwd_dq_red4(mine + nt * 8, dq[mt][nt], odd, ok);
                    }
                } else if (!P.deterministic) {
#pragma unroll
                    for (int mt = 0; mt < MTQ; ++mt) {
                        const int ia = ia0 + 16 * mt;
                        float *rowa = rowa0 + 16 * mt * rstride, *rowb = rowa + 8 * rstride;
#pragma unroll
                        for (int nt = 0; nt < NTQC; ++nt)
                            fmsa_bwd_dq_red<1>(rowa, rowb, cq + nt * 8 + 2 * t4, dq[mt][nt], t4, ia < sq, ia + 8 < sq);
                    }
                } else {
#pragma unroll
                    for (int mt = 0; mt < MTQ; ++mt) {
                        const int ia = ia0 + 16 * mt, ib = ia + 8;
                        float *rowa = rowa0 + 16 * mt * rstride, *rowb = rowa + 8 * rstride;
#pragma unroll
                        for (int nt = 0; nt < NTQC; ++nt) {
                            const int c = cq + nt * 8 + 2 * t4;
                            if (ia < sq) {
                                float2 v = __ldcg((const float2 *)(rowa + c));
                                v.x += dq[mt][nt][0];
                                v.y += dq[mt][nt][1];
                                __stcg((float2 *)(rowa + c), v);
                            }
                            if (ib < sq) {
                                float2 v = __ldcg((const float2 *)(rowb + c));
                                v.x += dq[mt][nt][2];
                                v.y += dq[mt][nt][3];
                                __stcg((float2 *)(rowb + c), v);
                            }
                        }
                    }
                }
            }
            if (P.deterministic) {
                __threadfence();
                __syncthreads();
                if (tid == 0) atomicAdd(sem, 1);
            }
        } else if (NQC == 1 && !(OPT & 16)) {
            float dq[MTQ][NTQ][4];
#pragma unroll
            for (int mt = 0; mt < MTQ; ++mt)
#pragma unroll
                for (int a = 0; a < NTQ; ++a)
#pragma unroll
                    for (int e = 0; e < 4; ++e) dq[mt][a][e] = 0.0f;
#pragma unroll
            for (int kb2 = 0; kb2 < ((OPT & 1024) ? 0 : BN / 16); ++kb2) {
                unsigned a[MTQ][4];
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt)
                    fmsa_ldmatrix_x4_trans(a[mt], sds_base + 2 * (a_dst + kb2 * 16 * LDP + 16 * mt));
#pragma unroll
                for (int np = 0; np < NTQ / 2; ++np) {
                    unsigned bk[4];
                    fmsa_ldmatrix_x4_trans(bk, sk_base + 2 * (b_kn + kb2 * 16 * LDS + cq0 + np * 16));
#pragma unroll
                    for (int mt = 0; mt < MTQ; ++mt) {
                        fmsa_mma16816<BF16>(dq[mt][2 * np], a[mt], bk[0], bk[1]);
                        fmsa_mma16816<BF16>(dq[mt][2 * np + 1], a[mt], bk[2], bk[3]);
                    }
                }
            }
            if (OPT & 1024) /* timing-only ablation: the reductions of values at hand */
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NTQ; ++nt)
#pragma unroll
                        for (int e = 0; e < 4; ++e) dq[mt][nt][e] = __uint_as_float(sa[0][0][e] & 0x3fffffffu);
            const int ia0 = m0 + rq0 + g;
            const long long rstride = (long long)F.heads_q * P.accum_dim;
            float *rowa0 = P.dq_accum + ((qb * F.total_q + q_row0 + ia0) * F.heads_q + h) * (long long)P.accum_dim;
            /* OPT bit 13: this lane's float4 of its (mt 0, nt 0) tile */
            float *tq_at = P.dq_accum + ((long long)(b * F.heads_q + h) * (sq / 16) + (m0 + rq0) / 16) * (16 * D) +
                           (cq0 / 8) * 128 + lane * 4;
            (void)tq_at;
            if (BULK && !P.deterministic) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
                /* rows rq0.. of the tile: the NQ warps of this mq write their
                   columns, then warp mq has the copy engine add each row */
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NTQ; ++nt) {
                        float *d0 = sDq + (rq0 + 16 * mt + g) * LDQ + cq0 + nt * 8 + 2 * t4;
                        *(float2 *)d0 = make_float2(dq[mt][nt][0], dq[mt][nt][1]);
                        *(float2 *)(d0 + 8 * LDQ) = make_float2(dq[mt][nt][2], dq[mt][nt][3]);
                    }
                fmsa_fence_proxy_async();
                fmsa_bar_sync(1 + mq, 32 * NQ);
                if (nq == 0) {
                    for (int r = lane; r < RQ; r += 32)
                        if (m0 + rq0 + r < sq)
                            fmsa_bulk_red_add_f32(rowa0 + (r - g) * rstride,
                                                  fmsa_smem_addr(sDq + (rq0 + r) * LDQ), 4 * D);
                    fmsa_bulk_commit();
                }
#endif /* __CUDA_ARCH__ */
            } else if ((OPT & 8) && fmsa_bwd_sum(&dq[0][0][0], MTQ * NTQ * 4) != 1.0e-30f) {
                /* timing-only ablation: dQ's products without their reductions */
            } else if (TQ && tq && !P.deterministic) {
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt)
                    if (m0 + rq0 + 16 * mt < sq)
#pragma unroll
                        for (int nt = 0; nt < NTQ; ++nt) fmsa_bwd_dq_red_t(tq_at + mt * 16 * D + nt * 128, dq[mt][nt]);
            } else if (!P.deterministic && (OPT & 2) && !(OPT & 128) && FMSA_BWD_SM90) {
                /* each lane one row (odd lanes the row 8 below), one vector
                   reduction per n8 tile at a fixed offset: no divergence */
                const int odd = t4 & 1;
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt) {
                    float *mine = rowa0 + (16 * mt + 8 * odd) * rstride + cq0 + 2 * t4 - 2 * odd;
                    const int ok = ia0 + 16 * mt + 8 * odd < sq;
#pragma unroll
                    for (int nt = 0; nt < NTQ; ++nt) fmsa_bwd_dq_red4(mine + nt * 8, dq[mt][nt], odd, ok);
                }
            } else if (!P.deterministic) {
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt) {
                    const int ia = ia0 + 16 * mt;
                    float *rowa = rowa0 + 16 * mt * rstride, *rowb = rowa + 8 * rstride;
#pragma unroll
                    for (int nt = 0; nt < NTQ; ++nt)
                        fmsa_bwd_dq_red<!(OPT & 128)>(rowa, rowb, cq0 + nt * 8 + 2 * t4, dq[mt][nt], t4, ia < sq,
                                        ia + 8 < sq);
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
                if (TQ && tq) {
                    /* the tiled accumulator (OPT bit 13): one float4 per lane and tile */
#pragma unroll
                    for (int mt = 0; mt < MTQ; ++mt)
                        if (m0 + rq0 + 16 * mt < sq)
#pragma unroll
                            for (int nt = 0; nt < NTQ; ++nt) {
                                float4 *at = (float4 *)(tq_at + mt * 16 * D + nt * 128);
                                float4 v = __ldcg(at);
                                v.x += dq[mt][nt][0];
                                v.y += dq[mt][nt][1];
                                v.z += dq[mt][nt][2];
                                v.w += dq[mt][nt][3];
                                __stcg(at, v);
                            }
                } else {
#pragma unroll
                for (int mt = 0; mt < MTQ; ++mt) {
                    const int ia = ia0 + 16 * mt, ib = ia + 8;
                    float *rowa = rowa0 + 16 * mt * rstride, *rowb = rowa + 8 * rstride;
#pragma unroll
                    for (int nt = 0; nt < NTQ; ++nt) {
                        const int c = cq0 + nt * 8 + 2 * t4;
                        if (ia < sq) {
                            float2 v = __ldcg((const float2 *)(rowa + c));
                            v.x += dq[mt][nt][0];
                            v.y += dq[mt][nt][1];
                            __stcg((float2 *)(rowa + c), v);
                        }
                        if (ib < sq) {
                            float2 v = __ldcg((const float2 *)(rowb + c));
                            v.x += dq[mt][nt][2];
                            v.y += dq[mt][nt][3];
                            __stcg((float2 *)(rowb + c), v);
                        }
                    }
                }
                }
                __threadfence();
                __syncthreads();
                if (tid == 0) atomicAdd(sem, 1);
            }
        }
        if (OPT & 64) {
            FMSA_BWD_DKDV(2);
            if (STAGES == 1 && it + 1 < niter) {
                __syncthreads(); /* Q/dO of this step no longer read */
                FMSA_BWD_LOAD_ANY(0, it + 1);
                fmsa_cp_async_commit();
            }
        }
    }
#undef FMSA_BWD_DKDV
#undef FMSA_BWD_DKDV_OWN
#undef FMSA_BWD_DKDV_OTHER
#undef FMSA_BWD_LOAD_AT
#undef FMSA_BWD_LOAD_ANY
    fmsa_cp_async_wait<0>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (BULK) fmsa_bulk_wait(); /* the staging tile stays valid until the engine is done */
#endif /* __CUDA_ARCH__ */

    /* dV, and dK times the softmax scale, straight from the accumulators */
    {
        unsigned short *dVg = (unsigned short *)P.dv, *dKg = (unsigned short *)P.dk;
        const float sc = F.softmax_scale;
#pragma unroll
        for (int mt = 0; mt < MTK; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int j = jw + 16 * mt + 8 * half;
                if (j >= sk) continue;
                unsigned short *vr = dVg + kb * P.dv_sb + (k_row0 + j) * P.dv_ss + hk * P.dv_sh;
                unsigned short *kr = dKg + kb * P.dk_sb + (k_row0 + j) * P.dk_ss + hk * P.dk_sh;
                if (!OWNV) {
#pragma unroll
                    for (int nt = 0; nt < NTV; ++nt) {
                        const int c = cv0 + nt * 8 + 2 * t4;
                        if (c < hd) {
                            *(unsigned *)(vr + c) =
                                fmsa_pack2<BF16>(dv[mt][nt][2 * half], dv[mt][nt][2 * half + 1]);
                            *(unsigned *)(kr + c) = fmsa_pack2<BF16>(dk[mt][nt][2 * half] * sc,
                                                                     dk[mt][nt][2 * half + 1] * sc);
                        }
                    }
                } else {
                    /* dV over its own columns (cvv0.., head_dim_v), dK over D's */
#pragma unroll
                    for (int nt = 0; nt < NTV; ++nt) {
                        const int c = cvv0 + nt * 8 + 2 * t4;
                        if (c < hdv)
                            *(unsigned *)(vr + c) =
                                fmsa_pack2<BF16>(dv[mt][nt][2 * half], dv[mt][nt][2 * half + 1]);
                    }
#pragma unroll
                    for (int nt = 0; nt < NTK; ++nt) {
                        const int c = cv0 + nt * 8 + 2 * t4;
                        if (c < hd)
                            *(unsigned *)(kr + c) = fmsa_pack2<BF16>(dk[mt][nt][2 * half] * sc,
                                                                     dk[mt][nt][2 * half + 1] * sc);
                    }
                }
            }
    }
}

#define FMSA_BWD_MAIN_KERNEL(dt, BF16, D, BM, BN, WK, ST, OPT)                               \
    extern "C" __global__ void __launch_bounds__(32 * FMSA_CUDA_BWD_WARPS, 1)              \
        FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT)(const fmsa_cuda_bwd_params p) {  \
        fmsa_bwd_main<BF16, D, BM, BN, WK, ST, OPT>(p);                                     \
    }

/// A row of a value head dim of its own (FMSA_CUDA_BWD_INSTANCES_V).
#define FMSA_BWD_MAIN_KERNEL_V(dt, BF16, D, DV, BM, BN, WK, ST, OPT)                         \
    extern "C" __global__ void __launch_bounds__(32 * FMSA_CUDA_BWD_WARPS, 1)              \
        FMSA_CUDA_BWD_MAIN_SYM_V(dt, D, DV, BM, BN, WK, ST, OPT)(const fmsa_cuda_bwd_params p) { \
        fmsa_bwd_main<BF16, D, BM, BN, WK, ST, OPT, DV>(p);                                 \
    }

#if defined(FMSA_CUDA_BWD_ONLY) || defined(FMSA_CUDA_BWD_ONLY_V)
/* resource checks of single instances: a file defines FMSA_CUDA_BWD_ONLY(X)
   and/or FMSA_CUDA_BWD_ONLY_V(X) (rows of the _V form) and includes this one */
#if defined(FMSA_CUDA_BWD_ONLY)
FMSA_CUDA_BWD_ONLY(FMSA_BWD_MAIN_KERNEL)
#endif /* FMSA_CUDA_BWD_ONLY */
#if defined(FMSA_CUDA_BWD_ONLY_V)
FMSA_CUDA_BWD_ONLY_V(FMSA_BWD_MAIN_KERNEL_V)
#endif /* FMSA_CUDA_BWD_ONLY_V */
#else
FMSA_CUDA_BWD_INSTANCES(FMSA_BWD_MAIN_KERNEL)
FMSA_CUDA_BWD_INSTANCES_V(FMSA_BWD_MAIN_KERNEL_V)
#endif /* FMSA_CUDA_BWD_ONLY */
#if defined(FMSA_CUDA_BWD_WITH_VARIANTS)
FMSA_CUDA_BWD_VARIANTS(FMSA_BWD_MAIN_KERNEL)
#endif /* FMSA_CUDA_BWD_WITH_VARIANTS */
