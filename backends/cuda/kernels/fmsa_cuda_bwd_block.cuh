/*
 * What every backward main kernel (16-bit and fp32) derives first: its block's
 * key tile, kv head and sequence (ticket order in the deterministic mode),
 * the sequence's rows (cu_seqlens checked where they are read), and the query
 * tiles its keys meet; and the full / cut tile's P and dS from S and dP.  One
 * copy, so the two kernels cannot drift apart.
 */
#ifndef FMSA_CUDA_BWD_BLOCK_CUH
#define FMSA_CUDA_BWD_BLOCK_CUH

#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"
#include "common/fmsa_portable.h"

#define FMSA_NEG_INF_F __int_as_float(0xff800000)
#define FMSA_POS_INF_F __int_as_float(0x7f800000)

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

/// The block's key tile *n, kv head *hk and sequence *b: the grid's indices,
/// or in the deterministic mode a ticket taken in launch order, so that a
/// block waiting for a lower key tile's turn knows that tile's block already
/// runs or has finished.  Every thread of the block calls it (one barrier).
FMSA_DEV void fmsa_bwd_block_coords(const fmsa_cuda_bwd_params &P, int ntiles, int tid,
                                    int *sTicket, int *n, int *hk, int *b) {
    if (P.deterministic) {
        int tk;
        if (tid == 0) *sTicket = atomicAdd(P.dq_sems + P.num_sems - 1, 1);
        __syncthreads();
        tk = *sTicket;
        *n = tk % ntiles;
        tk /= ntiles;
        *hk = tk % P.fwd.heads_kv;
        *b = tk / P.fwd.heads_kv;
    } else {
        *n = blockIdx.x;
        *hk = blockIdx.y;
        *b = blockIdx.z;
    }
}

#ifndef FMSA_CUDA_BWD_SM_COUNT
/// The device's SM count as the hardware reports it (%nsmid; the host
/// emulator defines its own).
FMSA_DEV unsigned fmsa_bwd_sm_count(void) {
    unsigned n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return n;
}
#endif /* FMSA_CUDA_BWD_SM_COUNT */

/// The non-deterministic block order of a masked problem (causal, window),
/// whose key tiles meet different numbers of query tiles: the grid's linear
/// index takes (sequence, kv head) pairs in order, key tiles ascending, as
/// the plain order does, except for the last pairs that hold about three
/// waves of blocks (3 x the SM count), which go key tile by key tile across
/// those pairs, so that the grid ends on short blocks instead of one pair's
/// longest (greedy dispatch then approximates longest-first at the tail
/// while the pairs before it keep their tiles' reuse in L2).
FMSA_DEV void fmsa_bwd_block_coords_tail(int *n, int *hk, int *b) {
    const unsigned nt = gridDim.x, np = gridDim.y * gridDim.z;
    const unsigned pr = blockIdx.y + gridDim.y * blockIdx.z;
    const unsigned nsm = fmsa_bwd_sm_count();
    unsigned g, pair;
    g = (3u * nsm + nt - 1u) / nt;
    if (g > np) g = np;
    if (pr < np - g) {
        *n = (int)blockIdx.x;
        pair = pr;
    } else {
        const unsigned r = (pr - (np - g)) * nt + blockIdx.x; /* index within the tail */
        *n = (int)(r / g);
        pair = np - g + r % g;
    }
    *hk = (int)(pair % gridDim.y);
    *b = (int)(pair / gridDim.y);
}

/// P and dS of a tile in place of S and dP (the full tile's arithmetic: lse
/// and D as float2 pairs once per n8 column, one exp2 and one fma per
/// element).  Element (mt, nt, e) is row i = i0 + 8 nt + (e & 1) and key j =
/// jw + 16 mt + 8 (e >> 1), with i0 = m0 + qw0 + 2 t4.  CUT (OPT bit 15 of the 16-bit
/// kernel, a
/// tile a causal diagonal, a window or a sequence end cuts): also one
/// visibility select per element against per-step bounds, ri = sq - i0, rj =
/// sk - jw, dlo = j - i - (off - wl) and dhi = (off + wr) - (j - i) taken at
/// the fragment's origin (clamped to +-2^30), so that every per-element test
/// is one integer compare with a compile-time constant.
template <int CUT, int OPT, int MTK, int NTS>
FMSA_DEV void fmsa_bwd_softmax_tile(float (&s)[MTK][NTS][4], float (&dp)[MTK][NTS][4], const float *lse_s,
                                    const float *ds_s, float scale_log2, int t4, int ri, int rj, int dlo,
                                    int dhi) {
#pragma unroll
    for (int nt = 0; nt < NTS; ++nt) {
        const float2 l2 = *(const float2 *)(lse_s + nt * 8 + 2 * t4);
        const float2 dd = *(const float2 *)(ds_s + nt * 8 + 2 * t4);
        const float la = l2.x == FMSA_NEG_INF_F ? FMSA_POS_INF_F : l2.x * FMSA_LOG2E;
        const float lb = l2.y == FMSA_NEG_INF_F ? FMSA_POS_INF_F : l2.y * FMSA_LOG2E;
#pragma unroll
        for (int mt = 0; mt < MTK; ++mt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float x2 = fmaf(s[mt][nt][e], scale_log2, -((e & 1) ? lb : la));
                if (CUT) {
                    const int ci = nt * 8 + (e & 1), cj = 16 * mt + ((e & 2) ? 8 : 0), c = cj - ci;
                    const int vis = ri > ci && rj > cj && dlo >= -c && dhi >= c;
                    const float pe = vis ? fmsa_ex2(x2) : 0.0f;
                    const float dse = pe * (dp[mt][nt][e] - ((e & 1) ? dd.y : dd.x));
                    s[mt][nt][e] = pe;
                    dp[mt][nt][e] = vis ? dse : 0.0f; /* select: dP of a hidden key may be NaN */
                } else {
                    const float pe = (OPT & 32) ? x2 : fmsa_ex2(x2);
                    s[mt][nt][e] = pe;
                    dp[mt][nt][e] = pe * (dp[mt][nt][e] - ((e & 1) ? dd.y : dd.x));
                }
            }
    }
}

/// Sequence b's first query / key rows, batch indices and lengths (varlen:
/// from cu_seqlens, checked here, where they are read).  Returns 0 when they
/// are malformed (thread 0 has set the status bit): the block then exits.
FMSA_DEV int fmsa_bwd_block_seq(const fmsa_cuda_fwd_params &F, int b, int tid,
                                long long *q_row0, long long *k_row0, long long *qb,
                                long long *kb, int *sq, int *sk) {
    *q_row0 = 0, *k_row0 = 0, *qb = b, *kb = b;
    *sq = F.seqlen_q, *sk = F.seqlen_k;
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
            return 0;
        }
        *q_row0 = q0;
        *k_row0 = k0;
        *sq = q1 - q0;
        *sk = k1 - k0;
        *qb = *kb = 0;
    }
    return 1;
}

#endif /* FMSA_CUDA_BWD_BLOCK_CUH */
