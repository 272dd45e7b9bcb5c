/*
 * The backward's main stage: K/V-stationary mma.sync kernels (sm_80 and up).
 *
 * A block owns BN = 16 * NW keys of one kv head of one sequence (and one
 * slice of D for its dK/dV/dQ outputs) and loops over every query head of
 * that kv head and every query tile that can see its keys.  Warp w owns keys
 * 16w .. 16w+15, so S^T = K Q^T and dP^T = V dO^T come out of the tensor
 * cores in the accumulator layout that is also the A-operand layout of the
 * next products: P^T and dS^T stay in registers for dV += P^T dO and
 * dK += dS^T Q; only dS^T goes through shared memory, for dQ = dS K, which
 * is added into the fp32 dq_accum (atomics, or in key-tile order behind a
 * counter per query tile in the deterministic mode).
 *
 * The score pipeline is the forward's (fmsa_score.h order): scale, softcap,
 * ALiBi, window / bit mask; P = exp2(s2 - lse2) with lse2 = +inf for a fully
 * masked row so that such rows give P = 0 and zero gradients.
 */
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"
#include "common/fmsa_portable.h"

#define FMSA_NEG_INF_F __int_as_float(0xff800000)

/// Query tiles [*mb, *me) whose rows can see keys [n0, n1) of a sequence (window bounds only).
FMSA_DEV void fmsa_bwd_mrange(long long n0, long long n1, long long sq, long long sk,
                              long long wl, long long wr, int bm, int *mb, int *me) {
    const long long off = sk - sq;
    long long ilo = 0, ihi = sq - 1;
    if (wr >= 0 && n0 - off - wr > ilo) ilo = n0 - off - wr;
    if (wl >= 0 && (n1 - 1) - off + wl < ihi) ihi = (n1 - 1) - off + wl;
    if (n1 <= n0 || ilo > ihi) {
        *mb = *me = 0;
        return;
    }
    *mb = (int)(ilo / bm);
    *me = (int)(ihi / bm) + 1;
}

template <int BF16, int D, int BM, int NW, int DSPLIT, int STAGES, int OPT>
FMSA_DEV void fmsa_bwd_main(const fmsa_cuda_bwd_params &P) {
    constexpr int BN = 16 * NW, DK = D / DSPLIT, LDS = D + 8, LDSS = BM + 8;
    constexpr int NT_S = BM / 8;     /* n-tiles (8 queries) of the warp's S^T */
    constexpr int NT_KV = DK / 8;    /* n-tiles of the warp's dK / dV rows */
    /* dQ warp tiles of 32 rows where the slice divides into whole k16 column
       pairs that way (half the K re-reads of 16-row tiles), else 16 rows */
    constexpr int DQ32 = (OPT & 1) && BM % 32 == 0 && NW % (BM / 32) == 0 && (DK / (NW / (BM / 32))) % 16 == 0;
    constexpr int MT = DQ32 ? 2 : 1; /* m16 tiles per dQ warp */
    constexpr int MG = BM / (16 * MT); /* dQ: warps along the query rows */
    constexpr int NG = NW / MG;      /* dQ: warps along the D slice */
    constexpr int DQN = DK / NG;     /* dQ columns per warp */
    constexpr int NT_Q = DQN / 8;
    /* small D: the warp's K and V rows stay in registers as A fragments */
    constexpr int KVREG = (OPT & 2) && D <= 64 && BM <= 64;
    constexpr int THREADS = 32 * NW;
    constexpr int CH = D / 8;        /* 16-byte chunks per row */
    static_assert(D % (16 * DSPLIT) == 0, "D slice must be whole k16 steps");
    static_assert(NW % MG == 0 && DQN % 16 == 0, "dQ warp layout");
    static_assert(2 * BM <= THREADS, "one thread per lse / D element");
    const fmsa_cuda_fwd_params &F = P.fwd;

    extern __shared__ __align__(16) unsigned char fmsa_smem[];
    unsigned short *sK = (unsigned short *)fmsa_smem;
    unsigned short *sV = sK + BN * LDS;
    unsigned short *sQ = sV + BN * LDS;
    unsigned short *sdO = sQ + STAGES * BM * LDS;
    unsigned short *sdS = sdO + STAGES * BM * LDS;
    float *sLse = (float *)(sdS + BN * LDSS);
    float *sDs = sLse + STAGES * BM;
    int *sTicket = (int *)(sDs + STAGES * BM);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int ntiles = (F.seqlen_k + BN - 1) / BN;
    int slice, n, hk, b;
    if (P.deterministic) {
        /* block order by ticket: a block that waits for a lower key tile's
           turn knows that tile's block already runs or has finished */
        int tk;
        if (tid == 0) *sTicket = atomicAdd(P.dq_sems + P.num_sems - 1, 1);
        __syncthreads();
        tk = *sTicket;
        slice = tk % DSPLIT;
        tk /= DSPLIT;
        n = tk % ntiles;
        tk /= ntiles;
        hk = tk % F.heads_kv;
        b = tk / F.heads_kv;
    } else {
        slice = blockIdx.x % DSPLIT;
        n = blockIdx.x / DSPLIT;
        hk = blockIdx.y;
        b = blockIdx.z;
    }

    /* the sequence; cu_seqlens are checked here, where they are read */
    long long q_row0 = 0, k_row0 = 0, qb = b, kb = b;
    int sq = F.seqlen_q, sk = F.seqlen_k;
    if (F.is_varlen) {
        const int q0 = F.cu_seqlens_q[(long long)b * F.cu_q_s];
        const int q1 = F.cu_seqlens_q[(long long)(b + 1) * F.cu_q_s];
        const int k0 = F.cu_seqlens_k[(long long)b * F.cu_k_s];
        const int k1 = F.cu_seqlens_k[(long long)(b + 1) * F.cu_k_s];
        int bad = q0 < 0 || q1 < q0 || q1 > F.total_q || q1 - q0 > F.seqlen_q || k0 < 0 ||
                  k1 < k0 || k1 > F.total_k || k1 - k0 > F.seqlen_k;
        if (b == 0 && (q0 != 0 || k0 != 0)) bad = 1;
        if (b == F.batch - 1 && (q1 != F.total_q || k1 != F.total_k)) bad = 1;
        if (bad) {
            if (tid == 0 && F.status) atomicOr(F.status, FMSA_CUDA_STATUS_BAD_CU_SEQLENS);
            return;
        }
        q_row0 = q0;
        k_row0 = k0;
        sq = q1 - q0;
        sk = k1 - k0;
        qb = kb = 0;
    }
    const int n0 = n * BN;
    if (n0 >= sk) return;
    const int n1 = n0 + BN < sk ? n0 + BN : sk;
    const int group = F.heads_q / F.heads_kv;
    const int dk0 = slice * DK;
    const int hd = F.head_dim;
    const long long wl = F.window_left, wr = F.window_right, off = (long long)sk - sq;
    int mb, me;
    fmsa_bwd_mrange(n0, n1, sq, sk, wl, wr, BM, &mb, &me);
    const int nm = me - mb;
    const int niter = group * nm;
    const long long rows_all = (long long)(F.is_varlen ? 1 : F.batch) * F.total_q;
    const int mtiles_max = (F.seqlen_q + BM - 1) / BM;
    const int general = F.mask != 0 || F.alibi != 0 || F.softcap > 0.0f;
    const unsigned short *Qg = (const unsigned short *)F.q;
    const unsigned short *Kg = (const unsigned short *)F.k;
    const unsigned short *Vg = (const unsigned short *)F.v;
    const unsigned short *dOg = (const unsigned short *)P.dout;

    /* K and V of the block, zero past the sequence and past head_dim */
    for (int c = tid; c < BN * CH; c += THREADS) {
        const int r = c / CH, ch = c % CH, j = n0 + r;
        const int ok = j < sk && ch * 8 < hd;
        const unsigned short *ks = ok ? Kg + kb * F.k_sb + (k_row0 + j) * F.k_ss + hk * F.k_sh + ch * 8 : Kg;
        const unsigned short *vs = ok ? Vg + kb * F.v_sb + (k_row0 + j) * F.v_ss + hk * F.v_sh + ch * 8 : Vg;
        fmsa_cp_async16(fmsa_smem_addr(sK + r * LDS + ch * 8), ks, ok ? 16 : 0);
        fmsa_cp_async16(fmsa_smem_addr(sV + r * LDS + ch * 8), vs, ok ? 16 : 0);
    }

    /* Q, dO, lse and D of iteration it into buffer st */
#define FMSA_BWD_LOAD(st, it)                                                                  \
    do {                                                                                       \
        const int h_ = hk * group + (it) / nm, i0_ = (mb + (it) % nm) * BM;                    \
        unsigned short *q_ = sQ + (st) * BM * LDS, *o_ = sdO + (st) * BM * LDS;                \
        for (int c = tid; c < BM * CH; c += THREADS) {                                         \
            const int r = c / CH, ch = c % CH, i = i0_ + r;                                    \
            const int ok = i < sq && ch * 8 < hd;                                              \
            const unsigned short *qs =                                                         \
                ok ? Qg + qb * F.q_sb + (q_row0 + i) * F.q_ss + h_ * F.q_sh + ch * 8 : Qg;     \
            const unsigned short *os =                                                         \
                ok ? dOg + qb * P.do_sb + (q_row0 + i) * P.do_ss + h_ * P.do_sh + ch * 8 : dOg; \
            fmsa_cp_async16(fmsa_smem_addr(q_ + r * LDS + ch * 8), qs, ok ? 16 : 0);            \
            fmsa_cp_async16(fmsa_smem_addr(o_ + r * LDS + ch * 8), os, ok ? 16 : 0);            \
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

    if (niter > 0) FMSA_BWD_LOAD(0, 0);
    fmsa_cp_async_commit();

    float dv[NT_KV][4], dk[NT_KV][4];
#pragma unroll
    for (int a = 0; a < NT_KV; ++a)
#pragma unroll
        for (int e = 0; e < 4; ++e) dv[a][e] = dk[a][e] = 0.0f;

    const int jw = n0 + 16 * warp + g; /* key of accumulator rows c0,c1; +8 for c2,c3 */
    const unsigned kv_row_addr = (unsigned)((16 * warp + (lane & 15)) * LDS + (lane >> 4) * 8);
    unsigned kreg[KVREG ? D / 16 : 1][4], vreg[KVREG ? D / 16 : 1][4];
    if (KVREG) {
        fmsa_cp_async_wait<0>();
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < (KVREG ? D / 16 : 0); ++kk) {
            fmsa_ldmatrix_x4(kreg[kk], fmsa_smem_addr(sK) + 2 * (kv_row_addr + kk * 16));
            fmsa_ldmatrix_x4(vreg[kk], fmsa_smem_addr(sV) + 2 * (kv_row_addr + kk * 16));
        }
    }
    /* B operand, [n][k] stored (non-trans): rows n = lane%8 + 8*(lane/16), col k 8*((lane/8)&1) */
    const unsigned bn_addr = (unsigned)(((lane & 7) + 8 * (lane >> 4)) * LDS + 8 * ((lane >> 3) & 1));
    /* B operand, [k][n] stored (trans): rows k = lane%8 + 8*((lane/8)&1), col n 8*(lane/16) */
    const unsigned bk_addr = (unsigned)(((lane & 7) + 8 * ((lane >> 3) & 1)) * LDS + 8 * (lane >> 4));

    for (int it = 0; it < niter; ++it) {
        const int st = STAGES == 2 ? (it & 1) : 0;
        const int h = hk * group + it / nm, m = mb + it % nm, m0 = m * BM;
        fmsa_cp_async_wait<0>();
        __syncthreads();
        if (STAGES == 2 && it + 1 < niter) {
            FMSA_BWD_LOAD(st ^ 1, it + 1);
            fmsa_cp_async_commit();
        }
        const unsigned short *q_s = sQ + st * BM * LDS, *do_s = sdO + st * BM * LDS;
        const unsigned sq_base = fmsa_smem_addr(q_s), sdo_base = fmsa_smem_addr(do_s);
        const unsigned sk_base = fmsa_smem_addr(sK), sv_base = fmsa_smem_addr(sV);

        /* dP^T = V dO^T and S^T = K Q^T, warp rows = its 16 keys */
        float dp[NT_S][4], s[NT_S][4];
#pragma unroll
        for (int a = 0; a < NT_S; ++a)
#pragma unroll
            for (int e = 0; e < 4; ++e) dp[a][e] = s[a][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            unsigned av[4], ak[4];
            if (KVREG) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    av[e] = vreg[KVREG ? kk : 0][e];
                    ak[e] = kreg[KVREG ? kk : 0][e];
                }
            } else {
                fmsa_ldmatrix_x4(av, sv_base + 2 * (kv_row_addr + kk * 16));
                fmsa_ldmatrix_x4(ak, sk_base + 2 * (kv_row_addr + kk * 16));
            }
#pragma unroll
            for (int np = 0; np < NT_S / 2; ++np) {
                unsigned bo[4], bq[4];
                fmsa_ldmatrix_x4(bo, sdo_base + 2 * (bn_addr + np * 16 * LDS + kk * 16));
                fmsa_mma16816<BF16>(dp[2 * np], av, bo[0], bo[1]);
                fmsa_mma16816<BF16>(dp[2 * np + 1], av, bo[2], bo[3]);
                fmsa_ldmatrix_x4(bq, sq_base + 2 * (bn_addr + np * 16 * LDS + kk * 16));
                fmsa_mma16816<BF16>(s[2 * np], ak, bq[0], bq[1]);
                fmsa_mma16816<BF16>(s[2 * np + 1], ak, bq[2], bq[3]);
            }
        }

        /* P and dS in place of S and dP */
        const int full = !general && m0 + BM <= sq && n0 + BN <= sk &&
                         (wr < 0 || (long long)(n0 + BN - 1) <= m0 + off + wr) &&
                         (wl < 0 || (long long)n0 >= (long long)(m0 + BM - 1) + off - wl);
        const float *lse_s = sLse + st * BM, *ds_s = sDs + st * BM;
        if (full) {
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt) {
                const float2 l2 = *(const float2 *)(lse_s + nt * 8 + 2 * t4);
                const float2 dd = *(const float2 *)(ds_s + nt * 8 + 2 * t4);
                const float la = l2.x == FMSA_NEG_INF_F ? __int_as_float(0x7f800000) : l2.x * FMSA_LOG2E;
                const float lb = l2.y == FMSA_NEG_INF_F ? __int_as_float(0x7f800000) : l2.y * FMSA_LOG2E;
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float pe = fmsa_ex2(fmaf(s[nt][e], F.scale_log2, -((e & 1) ? lb : la)));
                    s[nt][e] = pe;
                    dp[nt][e] = pe * (dp[nt][e] - ((e & 1) ? dd.y : dd.x));
                }
            }
        } else {
            float slope = 0.0f;
            const unsigned char *mrow0 = 0;
            if (F.alibi) slope = F.alibi[(long long)b * F.alibi_sb + (long long)h * F.alibi_sh];
            if (F.mask) mrow0 = F.mask + (long long)b * F.mask_sb + (long long)h * F.mask_sh;
            const float cap = F.softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = m0 + nt * 8 + 2 * t4 + (e & 1);
                    const int j = jw + ((e & 2) ? 8 : 0);
                    const float lraw = lse_s[nt * 8 + 2 * t4 + (e & 1)];
                    const float l2 = lraw == FMSA_NEG_INF_F ? __int_as_float(0x7f800000) : lraw * FMSA_LOG2E;
                    const long long diag = (long long)i + off;
                    int vis = i < sq && j < sk && (wl < 0 || j >= diag - wl) && (wr < 0 || j <= diag + wr);
                    if (vis && mrow0) vis = (mrow0[(long long)i * F.mask_ss + (j >> 3)] >> (j & 7)) & 1;
                    float s2, grad = 1.0f;
                    if (cap > 0.0f || F.alibi) {
                        const float x = s[nt][e] * F.softmax_scale;
                        float c = x;
                        if (cap > 0.0f) {
                            c = cap * tanhf(x * inv_cap);
                            grad = 1.0f - (c * inv_cap) * (c * inv_cap);
                        }
                        if (F.alibi) {
                            const long long dist = diag - j;
                            c += -slope * (float)(dist < 0 ? -dist : dist);
                        }
                        s2 = c * FMSA_LOG2E;
                    } else {
                        s2 = s[nt][e] * F.scale_log2;
                    }
                    const float pe = vis ? fmsa_ex2(s2 - l2) : 0.0f;
                    s[nt][e] = pe;
                    dp[nt][e] = pe * (dp[nt][e] - ds_s[nt * 8 + 2 * t4 + (e & 1)]) * grad;
                }
            }
        }

        /* P^T and dS^T as A operands (accumulator layout == A layout); dS^T to smem */
        unsigned pa[BM / 16][4], sa[BM / 16][4];
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) {
            pa[kk][0] = fmsa_pack2<BF16>(s[2 * kk][0], s[2 * kk][1]);
            pa[kk][1] = fmsa_pack2<BF16>(s[2 * kk][2], s[2 * kk][3]);
            pa[kk][2] = fmsa_pack2<BF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[kk][3] = fmsa_pack2<BF16>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
            sa[kk][0] = fmsa_pack2<BF16>(dp[2 * kk][0], dp[2 * kk][1]);
            sa[kk][1] = fmsa_pack2<BF16>(dp[2 * kk][2], dp[2 * kk][3]);
            sa[kk][2] = fmsa_pack2<BF16>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
            sa[kk][3] = fmsa_pack2<BF16>(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
            unsigned *r0 = (unsigned *)(sdS + (16 * warp + g) * LDSS + kk * 16 + 2 * t4);
            unsigned *r1 = (unsigned *)(sdS + (16 * warp + g + 8) * LDSS + kk * 16 + 2 * t4);
            r0[0] = sa[kk][0];
            r1[0] = sa[kk][1];
            r0[4] = sa[kk][2];
            r1[4] = sa[kk][3];
        }

        /* dV += P^T dO and dK += dS^T Q over the slice's columns */
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) {
#pragma unroll
            for (int np = 0; np < NT_KV / 2; ++np) {
                unsigned bo[4], bq[4];
                const unsigned o = 2 * (bk_addr + kk * 16 * LDS + dk0 + np * 16);
                fmsa_ldmatrix_x4_trans(bo, sdo_base + o);
                fmsa_mma16816<BF16>(dv[2 * np], pa[kk], bo[0], bo[1]);
                fmsa_mma16816<BF16>(dv[2 * np + 1], pa[kk], bo[2], bo[3]);
                fmsa_ldmatrix_x4_trans(bq, sq_base + o);
                fmsa_mma16816<BF16>(dk[2 * np], sa[kk], bq[0], bq[1]);
                fmsa_mma16816<BF16>(dk[2 * np + 1], sa[kk], bq[2], bq[3]);
            }
        }
        __syncthreads(); /* dS^T complete; Q/dO of this step no longer read */
        if (STAGES == 1 && it + 1 < niter) {
            FMSA_BWD_LOAD(0, it + 1);
            fmsa_cp_async_commit();
        }

        /* dQ(rows of the tile, slice) = dS K */
        {
            const int mg = warp % MG, ng = warp / MG;
            const int c0 = dk0 + ng * DQN;
            float dq[MT][NT_Q][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int a = 0; a < NT_Q; ++a)
#pragma unroll
                    for (int e = 0; e < 4; ++e) dq[mt][a][e] = 0.0f;
            /* A from dS^T [key][query] (trans): rows k = lane%8 + 8*(lane/16), col m 8*((lane/8)&1) */
            const unsigned ds_base = fmsa_smem_addr(sdS) +
                2 * (((lane & 7) + 8 * (lane >> 4)) * LDSS + 16 * MT * mg + 8 * ((lane >> 3) & 1));
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) {
                unsigned a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) fmsa_ldmatrix_x4_trans(a[mt], ds_base + 2 * (kk * 16 * LDSS + 16 * mt));
#pragma unroll
                for (int np = 0; np < NT_Q / 2; ++np) {
                    unsigned bk[4];
                    fmsa_ldmatrix_x4_trans(bk, sk_base + 2 * (bk_addr + kk * 16 * LDS + c0 + np * 16));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        fmsa_mma16816<BF16>(dq[mt][2 * np], a[mt], bk[0], bk[1]);
                        fmsa_mma16816<BF16>(dq[mt][2 * np + 1], a[mt], bk[2], bk[3]);
                    }
                }
            }
            const int ia0 = m0 + 16 * MT * mg + g;
            const long long rstride = (long long)F.heads_q * P.accum_dim;
            float *rowa0 = P.dq_accum + ((qb * F.total_q + q_row0 + ia0) * F.heads_q + h) * (long long)P.accum_dim;
            if (!P.deterministic) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const int ia = ia0 + 16 * mt, ib = ia + 8;
                    float *rowa = rowa0 + 16 * mt * rstride, *rowb = rowa + 8 * rstride;
#pragma unroll
                    for (int nt = 0; nt < NT_Q; ++nt) {
                        const int c = c0 + nt * 8 + 2 * t4;
                        if (c < hd) {
                            if (ia < sq) fmsa_red_add2(rowa + c, dq[mt][nt][0], dq[mt][nt][1]);
                            if (ib < sq) fmsa_red_add2(rowb + c, dq[mt][nt][2], dq[mt][nt][3]);
                        }
                    }
                }
            } else {
                int *sem = P.dq_sems + (((long long)b * F.heads_q + h) * mtiles_max + m) * DSPLIT + slice;
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
                for (int mt = 0; mt < MT; ++mt) {
                    const int ia = ia0 + 16 * mt, ib = ia + 8;
                    float *rowa = rowa0 + 16 * mt * rstride, *rowb = rowa + 8 * rstride;
#pragma unroll
                    for (int nt = 0; nt < NT_Q; ++nt) {
                        const int c = c0 + nt * 8 + 2 * t4;
                        if (c < hd) {
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
    }
#undef FMSA_BWD_LOAD
    fmsa_cp_async_wait<0>();

    /* dV, and dK times the softmax scale, straight from the accumulators */
    {
        unsigned short *dVg = (unsigned short *)P.dv, *dKg = (unsigned short *)P.dk;
        const float sc = F.softmax_scale;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int j = jw + 8 * half;
            if (j >= sk) continue;
            unsigned short *vr = dVg + kb * P.dv_sb + (k_row0 + j) * P.dv_ss + hk * P.dv_sh;
            unsigned short *kr = dKg + kb * P.dk_sb + (k_row0 + j) * P.dk_ss + hk * P.dk_sh;
#pragma unroll
            for (int nt = 0; nt < NT_KV; ++nt) {
                const int c = dk0 + nt * 8 + 2 * t4;
                if (c < hd) {
                    *(unsigned *)(vr + c) = fmsa_pack2<BF16>(dv[nt][2 * half], dv[nt][2 * half + 1]);
                    *(unsigned *)(kr + c) =
                        fmsa_pack2<BF16>(dk[nt][2 * half] * sc, dk[nt][2 * half + 1] * sc);
                }
            }
        }
    }
}

#define FMSA_BWD_MAIN_KERNEL(dt, BF16, D, BM, NW, DS, ST, OPT)                               \
    extern "C" __global__ void __launch_bounds__(32 * NW, 1)                               \
        FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, NW, DS, ST, OPT)(const fmsa_cuda_bwd_params p) {  \
        fmsa_bwd_main<BF16, D, BM, NW, DS, ST, OPT>(p);                                     \
    }

FMSA_CUDA_BWD_INSTANCES(FMSA_BWD_MAIN_KERNEL)
#if defined(FMSA_CUDA_BWD_WITH_VARIANTS)
FMSA_CUDA_BWD_VARIANTS(FMSA_BWD_MAIN_KERNEL)
#endif /* FMSA_CUDA_BWD_WITH_VARIANTS */
