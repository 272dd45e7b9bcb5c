/*
 * The Hopper (sm_90a) forward by wgmma at head_dim 128, in the library
 * behind FLASHMSA_CUDA_WGMMA_FWD (off by default): it has passed the host
 * emulation (backends/cuda/dev/emu/run_wg.sh, whose operand model the landed
 * wgmma backward anchors) but has not yet run on an H100 / H200, so its
 * planner row is UNRUN and nothing takes it unless asked (cuda_fwd_instances.h).
 * backends/cuda/dev/fmsa_wgmma_fwd_dev.cu also includes this file, checks it
 * against an fp32 reference and times it.
 *
 * One block = 128 query rows of one query head (two warpgroups of 64 rows),
 * grid (query tiles, heads_q, batch); per step of 128 keys:
 *   S = Q K^T        m64n128, Q (this warpgroup's 64 rows, loaded once) and
 *                    the K tile from shared memory, both K-major
 *   online softmax   exp2 form in registers: the row max and sum over the 4
 *                    lanes of a row, O rescaled, P packed to the A fragments
 *                    (the accumulator's elements 8 kk .. 8 kk + 7, k16 slice kk)
 *   O += P V         m64n128, A = P from registers, B = the V tile read
 *                    transposed (MN-major)
 * K and V of the next step load by cp.async during this one (2 stages).
 * Two schedules, A/B'd by the harness: serial (each step waits for S, then
 * for P V) and _ovl, where S of step n and P V of step n - 1 are issued
 * together and the softmax of step n runs while P V is in flight (FA3's
 * intra-warpgroup overlap; K then loads one step ahead of V).
 * Features: causal and sliding windows (window_left / window_right, causal
 * folded in as window_right 0), GQA, sequence tails, the natural-log LSE;
 * nothing else (no softcap, ALiBi, mask, sinks, varlen, paging, D_v != D).
 */
#include "backends/cuda/cuda_fwd_instances.h"
#include "backends/cuda/cuda_params.h"
#include "backends/cuda/kernels/fmsa_cuda_bwd_wg.cuh"
#include "common/fmsa_seq.h"

#define FMSA_FWD_WG_BM 128 /* query rows a block: two warpgroups of 64 */
/// Keys a step: 128, 64 at d256 (whose O of 64 rows x 256 takes 128 registers a thread).
#define FMSA_FWD_WG_BN(d) ((d) == 256 ? 64 : 128)
/// Dynamic shared memory: Q, 2 x K, 2 x V tiles (1024-byte aligned), and the alignment.
#define FMSA_FWD_WG_SMEM(d) FMSA_CUDA_FWD_WG_SMEM(d, FMSA_FWD_WG_BM, FMSA_FWD_WG_BN(d), 2)
/// The warp-specialised schedule: K / V stages, its shared memory (the 16 mbarriers after
/// the tiles), and the registers its loader gives its two computing warpgroups
/// (setmaxnreg: 128 x (40 + 2 x 232) <= 64 K).
#define FMSA_FWD_WG_WS_STAGES 2
#define FMSA_FWD_WG_WS_SMEM(d) (FMSA_CUDA_FWD_WG_SMEM(d, FMSA_FWD_WG_BM, FMSA_FWD_WG_BN(d), FMSA_FWD_WG_WS_STAGES) + 128)
#define FMSA_FWD_WG_WS_LOAD_REGS 40
#define FMSA_FWD_WG_WS_MATH_REGS 232

#if FMSA_WGMMA
/// Maximum over the 4 lanes of an accumulator row (lanes 4 g .. 4 g + 3).
FMSA_DEV float fmsa_fwd_wg_rowmax(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

/// Sum over the 4 lanes of an accumulator row.
FMSA_DEV float fmsa_fwd_wg_rowsum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// Whether element i of a cut S tile is visible, against the lane's bounds
/// (fmsa_bwd_wg_bounds at query r0, key n0 + 2 t4): the forward's S is not
/// transposed, so the row offset is 8 ((i >> 1) & 1), the key offset 8 (i >> 2) + (i & 1).
FMSA_DEV int fmsa_fwd_wg_vis(int i, int ri, int rj, int lo, int hi) {
    const int cr = (i & 2) ? 8 : 0, ck = 8 * (i >> 2) + (i & 1), c = ck - cr;
    return ri > cr && rj > ck && lo >= -c && hi >= c;
}

/// One tensor's BN x D tile of keys n0 .. n0 + BN - 1 by cp.async from NT
/// threads (the K or V half of fmsa_bwd_wg_load_kv): keys outside [klo, khi) zero.
template <int D, int BN, int NT>
FMSA_DEV void fmsa_fwd_wg_load_one(unsigned sT, const unsigned short *Tg, long long sb, long long ss, long long sh,
                                   int tid, int n0, long long klo, long long khi, int b, int hk) {
    constexpr int CH = D / 8, LCH = D == 256 ? 5 : D == 128 ? 4 : 3;
    for (int c = tid; c < BN * CH; c += NT) {
        const int r = c >> LCH, ch = c & (CH - 1), j = n0 + r, ok = j >= klo && j < khi;
        fmsa_bwd_wg_row16(sT, BN, r, ch, Tg + b * sb + (long long)j * ss + hk * sh + ch * 8, ok, Tg);
    }
}

/// Issues S = Q K^T (m64nBN, D / 16 k16 steps) as one wgmma group; ko: the K stage's descriptor offset.
template <int BF16, int BM, int BN, int D>
FMSA_DEV void fmsa_fwd_wg_qk(float (&s)[BN / 2], unsigned long long dQ, unsigned long long dK, unsigned ko) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const unsigned ao = (unsigned)((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4;
        const unsigned bo = ko + ((unsigned)((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4);
        if constexpr (BN == 128) fmsa_wg_ss_n128<BF16, 0, 0>(s, dQ + ao, dK + bo, kk > 0);
        else fmsa_wg_ss_n64<BF16, 0, 0>(s, dQ + ao, dK + bo, kk > 0);
    }
    fmsa_wg_commit();
}

/// Issues O += P V (BN / 16 k16 steps of m64n128 per 128 columns of O, V read
/// transposed: column chunk c of 64 at c BN 128 bytes) as one wgmma group.
template <int BF16, int BN, int D>
FMSA_DEV void fmsa_fwd_wg_pv(float (&o)[D / 128][64], const unsigned (&pa)[BN / 16][4], unsigned long long dV,
                             unsigned vo) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int c = 0; c < D / 128; ++c)
            fmsa_wg_rs_n128<BF16, 1>(o[c], pa[kk], dV + vo + ((unsigned)(kk * 16 * 128 + c * 2 * BN * 128) >> 4), 1);
    fmsa_wg_commit();
}

/// The online softmax of one step in place: S (raw scores) becomes P = exp2(S scale
/// log2 e - m), m2 / l the running max and sum, alpha the factor O needs.
/// CUT: a cut tile, hidden elements -inf first.
template <int CUT, int NS>
FMSA_DEV void fmsa_fwd_wg_softmax(float (&s)[NS], float (&m2)[2], float (&l)[2], float (&alpha)[2],
                                  float scale_log2, int ri, int rj, int lo, int hi) {
#pragma unroll
    for (int i = 0; i < NS; ++i) {
        const float x = s[i] * scale_log2;
        s[i] = !CUT || fmsa_fwd_wg_vis(i, ri, rj, lo, hi) ? x : FMSA_NEG_INF_F;
    }
    float ls[2] = {0.0f, 0.0f}, base[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        float mx = m2[hr];
#pragma unroll
        for (int i = 0; i < NS; ++i)
            if (((i >> 1) & 1) == hr) mx = fmaxf(mx, s[i]);
        mx = fmsa_fwd_wg_rowmax(mx);
        /* a row that has seen no key yet keeps -inf; its base is 0 so exp2 gives 0, not NaN */
        alpha[hr] = mx == FMSA_NEG_INF_F ? 1.0f : fmsa_ex2(m2[hr] - mx);
        m2[hr] = mx;
        base[hr] = mx == FMSA_NEG_INF_F ? 0.0f : mx;
    }
#pragma unroll
    for (int i = 0; i < NS; ++i) {
        const int hr = (i >> 1) & 1;
        s[i] = fmsa_ex2(s[i] - base[hr]);
        ls[hr] += s[i];
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) l[hr] = l[hr] * alpha[hr] + fmsa_fwd_wg_rowsum(ls[hr]);
}

/// The step's mask test and softmax: one branch a step on whether the tile is whole.
template <int NS>
FMSA_DEV void fmsa_fwd_wg_step_softmax(float (&s)[NS], float (&m2)[2], float (&l)[2], float (&alpha)[2],
                                       const fmsa_cuda_fwd_params &F, int full, int r0, int n0, int t4, int sq,
                                       int sk, long long wl, long long wr, long long off) {
    if (full) {
        fmsa_fwd_wg_softmax<0, NS>(s, m2, l, alpha, F.scale_log2, 0, 0, 0, 0);
    } else {
        int ri, rj, lo, hi;
        fmsa_bwd_wg_bounds(r0, n0 + 2 * t4, sq, sk, wl, wr, off, &ri, &rj, &lo, &hi);
        fmsa_fwd_wg_softmax<1, NS>(s, m2, l, alpha, F.scale_log2, ri, rj, lo, hi);
    }
}

/// P to the register A operand: k16 slice kk is elements 8 kk .. 8 kk + 7 in pairs.
template <int BF16, int NS> FMSA_DEV void fmsa_fwd_wg_pack(const float (&s)[NS], unsigned (&pa)[NS / 8][4]) {
#pragma unroll
    for (int kk = 0; kk < NS / 8; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) pa[kk][r] = fmsa_pack2<BF16>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

template <int KS> FMSA_DEV void fmsa_fwd_wg_touch_pa(unsigned (&pa)[KS][4]) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) fmsa_wg_touch_u(pa[kk][r]);
}

/// The block's Q tile (BM rows from m0; rows past the sequence zero) by cp.async from NT threads.
template <int D, int BM, int NT>
FMSA_DEV void fmsa_fwd_wg_load_q(unsigned sQ, const fmsa_cuda_fwd_params &F, int tid, int m0, int b, int h) {
    constexpr int CH = D / 8;
    const unsigned short *Qg = (const unsigned short *)F.q;
    for (int c = tid; c < BM * CH; c += NT) {
        const int r = c / CH, ch = c % CH, i = m0 + r, ok = i < F.seqlen_q;
        fmsa_bwd_wg_row16(sQ, BM, r, ch, Qg + b * F.q_sb + (long long)i * F.q_ss + h * F.q_sh + ch * 8, ok, Qg);
    }
}

/// The key steps [*nb, *ne) any row of the block at m0 sees, and the keys
/// [*klo, *khi) any row of the sequence sees (hidden ones load as zero: NaN
/// there changes nothing): fmsa_seq.h's window bounds.
template <int BM, int BN>
FMSA_DEV void fmsa_fwd_wg_keys(const fmsa_cuda_fwd_params &F, int m0, int *nb, int *ne, long long *klo, long long *khi) {
    const long long sq = F.seqlen_q, sk = F.seqlen_k;
    const long long jlo = fmsa_window_key_begin(m0, sq, sk, F.window_left);
    const long long jhi = fmsa_window_key_end(m0 + BM < sq ? m0 + BM : sq, sq, sk, F.window_right);
    *nb = jlo < jhi ? (int)(jlo / BN) : 0, *ne = jlo < jhi ? (int)((jhi + BN - 1) / BN) : 0;
    *klo = fmsa_window_key_begin(0, sq, sk, F.window_left);
    *khi = fmsa_window_key_end(sq, sq, sk, F.window_right);
}

/// O / l and the natural-log LSE of a lane's two rows (r0, r0 + 8); a row
/// that saw no key gets 0 and -inf.
template <int BF16, int NC>
FMSA_DEV void fmsa_fwd_wg_store(const fmsa_cuda_fwd_params &F, const float (&o)[NC][64], const float (&l)[2],
                                const float (&m2)[2], int r0, int b, int h, int t4) {
    unsigned short *Og = (unsigned short *)F.o;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const int row = r0 + 8 * hr;
        if (row >= F.seqlen_q) continue;
        const float inv = l[hr] > 0.0f ? 1.0f / l[hr] : 0.0f;
        unsigned short *orow = Og + b * F.o_sb + (long long)row * F.o_ss + h * F.o_sh + 2 * t4;
#pragma unroll
        for (int c = 0; c < NC; ++c)
#pragma unroll
            for (int c8 = 0; c8 < 16; ++c8) {
                const int i = 4 * c8 + 2 * hr;
                *(unsigned *)(orow + 128 * c + 8 * c8) = fmsa_pack2<BF16>(o[c][i] * inv, o[c][i + 1] * inv);
            }
        if (F.lse && t4 == 0)
            F.lse[b * F.lse_sb + h * F.lse_sh + (long long)row * F.lse_ss] =
                l[hr] > 0.0f ? (m2[hr] + __log2f(l[hr])) * 0.69314718055994531f : FMSA_NEG_INF_F;
    }
}

/// OVL 0: each step waits for S, runs the softmax, then issues and waits for
/// P V.  OVL 1: S of step n is issued together with P V of step n - 1, and the
/// softmax of step n runs while P V is in flight (K loads one step ahead of V).
template <int BF16, int OVL, int D> FMSA_DEV void fmsa_fwd_wg_main(const fmsa_cuda_fwd_params &F) {
    constexpr int BM = FMSA_FWD_WG_BM, BN = FMSA_FWD_WG_BN(D), NS = BN / 2, NC = D / 128;
    constexpr int Q_BYTES = BM * D * 2, KV_BYTES = BN * D * 2;
    extern __shared__ unsigned char fmsa_smem_fwd_wg[];
    const unsigned base = (fmsa_smem_addr(fmsa_smem_fwd_wg) + 1023u) & ~1023u;
    const unsigned sQ = base, sK = sQ + Q_BYTES, sV = sK + 2 * KV_BYTES;

    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int wg = tid >> 7, wi = (tid >> 5) & 3; /* warpgroup (64 rows), warp in it (16 rows) */
    const int h = blockIdx.y, b = blockIdx.z, hk = h / (F.heads_q / F.heads_kv);
    const int sq = F.seqlen_q, sk = F.seqlen_k, m0 = blockIdx.x * BM;
    if (m0 >= sq) return;
    const long long wl = F.window_left, wr = F.window_right, off = (long long)sk - sq;
    int nb, ne;
    long long klo, khi;
    fmsa_fwd_wg_keys<BM, BN>(F, m0, &nb, &ne, &klo, &khi);
    const unsigned short *Kg = (const unsigned short *)F.k, *Vg = (const unsigned short *)F.v;
#define FMSA_FWD_WG_LOAD_K(st, n) \
    fmsa_fwd_wg_load_one<D, BN, 256>(sK + (st) * KV_BYTES, Kg, F.k_sb, F.k_ss, F.k_sh, tid, (n) * BN, klo, khi, b, hk)
#define FMSA_FWD_WG_LOAD_V(st, n) \
    fmsa_fwd_wg_load_one<D, BN, 256>(sV + (st) * KV_BYTES, Vg, F.v_sb, F.v_ss, F.v_sh, tid, (n) * BN, klo, khi, b, hk)

    /* Q once and K of the first step; V too unless OVL */
    fmsa_fwd_wg_load_q<D, BM, 256>(sQ, F, tid, m0, b, h);
    if (nb < ne) {
        FMSA_FWD_WG_LOAD_K(0, nb);
        if (!OVL) FMSA_FWD_WG_LOAD_V(0, nb);
    }
    fmsa_cp_async_commit();

    float o[NC][64], s[NS], m2[2] = {FMSA_NEG_INF_F, FMSA_NEG_INF_F}, l[2] = {0.0f, 0.0f}, alpha[2];
    unsigned pa[BN / 16][4];
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int i = 0; i < 64; ++i) o[c][i] = 0.0f;
    const unsigned long long dQ = fmsa_wg_desc(sQ + wg * 64 * 128, 16, 1024);
    const unsigned long long dK = fmsa_wg_desc(sK, 16, 1024);
    const unsigned long long dV = fmsa_wg_desc(sV, BN * 128, 1024);
    const int r0 = m0 + 64 * wg + 16 * wi + g; /* query row of accumulator elements i & 2 == 0 */
    const unsigned stage = (unsigned)KV_BYTES >> 4;

    if (!OVL) {
        for (int n = nb; n < ne; ++n) {
            const int st = (n - nb) & 1, n0 = n * BN;
            fmsa_cp_async_wait<0>();
            fmsa_fence_proxy_async(); /* cp.async wrote through the generic proxy; wgmma reads async */
            __syncthreads();         /* this step's K / V landed; last step's readers are done */
            if (n + 1 < ne) {
                FMSA_FWD_WG_LOAD_K(st ^ 1, n + 1);
                FMSA_FWD_WG_LOAD_V(st ^ 1, n + 1);
            }
            fmsa_cp_async_commit();
            fmsa_wg_fence();
            fmsa_fwd_wg_qk<BF16, BM, BN, D>(s, dQ, dK, st * stage);
            fmsa_wg_wait<0>();
#pragma unroll
            for (int i = 0; i < NS; ++i) fmsa_wg_touch(s[i]);
            fmsa_fwd_wg_step_softmax(s, m2, l, alpha, F, fmsa_bwd_wg_full<BM, BN>(m0, n0, sq, sk, wl, wr, off), r0,
                                     n0, t4, sq, sk, wl, wr, off);
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int i = 0; i < 64; ++i) o[c][i] *= alpha[(i >> 1) & 1];
            fmsa_fwd_wg_pack<BF16, NS>(s, pa);
            fmsa_wg_fence();
            fmsa_fwd_wg_pv<BF16, BN, D>(o, pa, dV, st * stage);
            fmsa_wg_wait<0>();
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int i = 0; i < 64; ++i) fmsa_wg_touch(o[c][i]);
        }
    } else if (nb < ne) {
        /* step nb: S alone (O is zero, nothing to rescale); V of nb and K of nb + 1 load meanwhile */
        fmsa_cp_async_wait<0>();
        fmsa_fence_proxy_async();
        __syncthreads();
        if (nb + 1 < ne) FMSA_FWD_WG_LOAD_K(1, nb + 1);
        FMSA_FWD_WG_LOAD_V(0, nb);
        fmsa_cp_async_commit();
        fmsa_wg_fence();
        fmsa_fwd_wg_qk<BF16, BM, BN, D>(s, dQ, dK, 0);
        fmsa_wg_wait<0>();
#pragma unroll
        for (int i = 0; i < NS; ++i) fmsa_wg_touch(s[i]);
        fmsa_fwd_wg_step_softmax(s, m2, l, alpha, F, fmsa_bwd_wg_full<BM, BN>(m0, nb * BN, sq, sk, wl, wr, off), r0,
                                 nb * BN, t4, sq, sk, wl, wr, off);
        fmsa_fwd_wg_pack<BF16, NS>(s, pa);
        for (int n = nb + 1; n < ne; ++n) {
            const int st = (n - nb) & 1, n0 = n * BN;
            fmsa_cp_async_wait<0>();
            fmsa_fence_proxy_async();
            __syncthreads(); /* K of n and V of n - 1 landed; the stages loaded next are read by no one */
            if (n + 1 < ne) FMSA_FWD_WG_LOAD_K(st ^ 1, n + 1);
            FMSA_FWD_WG_LOAD_V(st, n);
            fmsa_cp_async_commit();
            fmsa_wg_fence();
            fmsa_fwd_wg_qk<BF16, BM, BN, D>(s, dQ, dK, st * stage);
            fmsa_fwd_wg_pv<BF16, BN, D>(o, pa, dV, (st ^ 1) * stage);
            fmsa_wg_wait<1>(); /* S done, P V of the last step still running */
#pragma unroll
            for (int i = 0; i < NS; ++i) fmsa_wg_touch(s[i]);
            fmsa_fwd_wg_step_softmax(s, m2, l, alpha, F, fmsa_bwd_wg_full<BM, BN>(m0, n0, sq, sk, wl, wr, off), r0,
                                     n0, t4, sq, sk, wl, wr, off);
            fmsa_wg_wait<0>();
            fmsa_fwd_wg_touch_pa(pa);
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int i = 0; i < 64; ++i) {
                    fmsa_wg_touch(o[c][i]);
                    o[c][i] *= alpha[(i >> 1) & 1];
                }
            fmsa_fwd_wg_pack<BF16, NS>(s, pa);
        }
        /* the last step's P V */
        fmsa_cp_async_wait<0>();
        fmsa_fence_proxy_async();
        __syncthreads();
        fmsa_wg_fence();
        fmsa_fwd_wg_pv<BF16, BN, D>(o, pa, dV, ((ne - 1 - nb) & 1) * stage);
        fmsa_wg_wait<0>();
#pragma unroll
        for (int c = 0; c < NC; ++c)
#pragma unroll
            for (int i = 0; i < 64; ++i) fmsa_wg_touch(o[c][i]);
    }
#undef FMSA_FWD_WG_LOAD_K
#undef FMSA_FWD_WG_LOAD_V
    fmsa_cp_async_wait<0>();

    fmsa_fwd_wg_store<BF16, NC>(F, o, l, m2, r0, b, h, t4);
}

/// The warp-specialised schedule (FA3's): warpgroup 0 only loads (Q, then K
/// and V of each step, cp.async into STAGES stages each, full / empty
/// mbarriers a stage), warpgroups 1 and 2 only compute (the overlapped
/// schedule of fmsa_fwd_wg_main, 64 rows each) and take turns at issuing
/// their products (named barriers 1 and 2), so one's softmax runs while the
/// other's products do.  setmaxnreg moves registers from the loader to them.
/// No block barrier after the start: the roles only meet at the mbarriers.
template <int BF16, int D> FMSA_DEV void fmsa_fwd_wg_ws_main(const fmsa_cuda_fwd_params &F) {
    constexpr int BM = FMSA_FWD_WG_BM, BN = FMSA_FWD_WG_BN(D), NS = BN / 2, NC = D / 128, ST = FMSA_FWD_WG_WS_STAGES;
    constexpr int Q_BYTES = BM * D * 2, KV_BYTES = BN * D * 2;
    extern __shared__ unsigned char fmsa_smem_fwd_wg[];
    const unsigned base = (fmsa_smem_addr(fmsa_smem_fwd_wg) + 1023u) & ~1023u;
    const unsigned sQ = base, sK = sQ + Q_BYTES, sV = sK + ST * KV_BYTES, sBar = sV + ST * KV_BYTES;
    /* mbarriers: K full, V full (128 loader arrivals), K empty, V empty (256 consumer arrivals) */
#define FMSA_FWD_WG_BAR(kind, st) (sBar + 8u * (unsigned)((kind) * ST + (st)))
    const int tid = threadIdx.x, wg = tid >> 7;
    const int h = blockIdx.y, b = blockIdx.z, hk = h / (F.heads_q / F.heads_kv);
    const int sq = F.seqlen_q, sk = F.seqlen_k, m0 = blockIdx.x * BM;
    if (m0 >= sq) return;
    int nb, ne;
    long long klo, khi;
    fmsa_fwd_wg_keys<BM, BN>(F, m0, &nb, &ne, &klo, &khi);
    if (tid < 4 * ST) fmsa_mbar_init(FMSA_FWD_WG_BAR(tid / ST, tid % ST), tid < 2 * ST ? 128u : 256u);
    __syncthreads();
    if (nb >= ne) { /* no key: O = 0, LSE = -inf, no loads */
        if (wg > 0) {
            float o[NC][64] = {}, l[2] = {0.0f, 0.0f}, m2[2] = {FMSA_NEG_INF_F, FMSA_NEG_INF_F};
            const int lane = tid & 31;
            fmsa_fwd_wg_store<BF16, NC>(F, o, l, m2, m0 + 64 * (wg - 1) + 16 * ((tid >> 5) & 3) + (lane >> 2), b, h,
                                        lane & 3);
        }
        return;
    }
    if (wg == 0) {
        /* the loader: groups K_nb (with Q), V_nb, K_nb+1, V_nb+1, ...; each stage
           reused once the consumers' empty barrier says its last reader is done,
           and each group's full barrier arrived once the next one is issued */
        fmsa_setmaxnreg_dec<FMSA_FWD_WG_WS_LOAD_REGS>();
        const unsigned short *Kg = (const unsigned short *)F.k, *Vg = (const unsigned short *)F.v;
        unsigned prev = 0;
        for (int g = 0; g < 2 * (ne - nb); ++g) {
            const int n = nb + g / 2, v = g & 1, st = (n - nb) % ST, use = (n - nb) / ST;
            if (use > 0) fmsa_mbar_wait(FMSA_FWD_WG_BAR(2 + v, st), (unsigned)(use - 1) & 1u);
            if (g == 0) fmsa_fwd_wg_load_q<D, BM, 128>(sQ, F, tid, m0, b, h);
            if (v) fmsa_fwd_wg_load_one<D, BN, 128>(sV + st * KV_BYTES, Vg, F.v_sb, F.v_ss, F.v_sh, tid, n * BN, klo, khi, b, hk);
            else fmsa_fwd_wg_load_one<D, BN, 128>(sK + st * KV_BYTES, Kg, F.k_sb, F.k_ss, F.k_sh, tid, n * BN, klo, khi, b, hk);
            fmsa_cp_async_commit();
            if (g > 0) {
                fmsa_cp_async_wait<1>();
                fmsa_fence_proxy_async(); /* cp.async wrote through the generic proxy; wgmma reads async */
                fmsa_mbar_arrive(prev);
            }
            prev = FMSA_FWD_WG_BAR(v, st);
        }
        fmsa_cp_async_wait<0>();
        fmsa_fence_proxy_async();
        fmsa_mbar_arrive(prev);
        return;
    }
    fmsa_setmaxnreg_inc<FMSA_FWD_WG_WS_MATH_REGS>();
    const int c = wg - 1, lane = tid & 31, g = lane >> 2, t4 = lane & 3, wi = (tid >> 5) & 3;
    const long long wl = F.window_left, wr = F.window_right, off = (long long)sk - sq;
    float o[NC][64], s[NS], m2[2] = {FMSA_NEG_INF_F, FMSA_NEG_INF_F}, l[2] = {0.0f, 0.0f}, alpha[2];
    unsigned pa[BN / 16][4];
#pragma unroll
    for (int cc = 0; cc < NC; ++cc)
#pragma unroll
        for (int i = 0; i < 64; ++i) o[cc][i] = 0.0f;
    const unsigned long long dQ = fmsa_wg_desc(sQ + c * 64 * 128, 16, 1024);
    const unsigned long long dK = fmsa_wg_desc(sK, 16, 1024);
    const unsigned long long dV = fmsa_wg_desc(sV, BN * 128, 1024);
    const int r0 = m0 + 64 * c + 16 * wi + g;
    const unsigned stage = (unsigned)KV_BYTES >> 4;
    /* turns: this warpgroup issues after the other's arrival at barrier 1 + c;
       warpgroup 1 (c = 1) lets warpgroup 0 go first */
    if (c == 1) fmsa_bar_arrive(1, 256);
    /* step nb: S alone */
    fmsa_mbar_wait(FMSA_FWD_WG_BAR(0, 0), 0u);
    fmsa_bar_sync(1 + c, 256);
    fmsa_wg_fence();
    fmsa_fwd_wg_qk<BF16, BM, BN, D>(s, dQ, dK, 0);
    fmsa_bar_arrive(2 - c, 256);
    fmsa_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < NS; ++i) fmsa_wg_touch(s[i]);
    fmsa_mbar_arrive(FMSA_FWD_WG_BAR(2, 0));
    fmsa_fwd_wg_step_softmax(s, m2, l, alpha, F, fmsa_bwd_wg_full<BM, BN>(m0, nb * BN, sq, sk, wl, wr, off), r0,
                             nb * BN, t4, sq, sk, wl, wr, off);
    fmsa_fwd_wg_pack<BF16, NS>(s, pa);
    for (int n = nb + 1; n < ne; ++n) {
        const int st = (n - nb) % ST, sp = (n - 1 - nb) % ST, n0 = n * BN;
        fmsa_mbar_wait(FMSA_FWD_WG_BAR(0, st), (unsigned)((n - nb) / ST) & 1u);
        fmsa_mbar_wait(FMSA_FWD_WG_BAR(1, sp), (unsigned)((n - 1 - nb) / ST) & 1u);
        fmsa_bar_sync(1 + c, 256);
        fmsa_wg_fence();
        fmsa_fwd_wg_qk<BF16, BM, BN, D>(s, dQ, dK, st * stage);
        fmsa_fwd_wg_pv<BF16, BN, D>(o, pa, dV, sp * stage);
        fmsa_bar_arrive(2 - c, 256);
        fmsa_wg_wait<1>(); /* S done, P V of the last step still running */
#pragma unroll
        for (int i = 0; i < NS; ++i) fmsa_wg_touch(s[i]);
        fmsa_mbar_arrive(FMSA_FWD_WG_BAR(2, st));
        fmsa_fwd_wg_step_softmax(s, m2, l, alpha, F, fmsa_bwd_wg_full<BM, BN>(m0, n0, sq, sk, wl, wr, off), r0, n0,
                                 t4, sq, sk, wl, wr, off);
        fmsa_wg_wait<0>();
        fmsa_fwd_wg_touch_pa(pa);
        fmsa_mbar_arrive(FMSA_FWD_WG_BAR(3, sp));
#pragma unroll
        for (int cc = 0; cc < NC; ++cc)
#pragma unroll
            for (int i = 0; i < 64; ++i) {
                fmsa_wg_touch(o[cc][i]);
                o[cc][i] *= alpha[(i >> 1) & 1];
            }
        fmsa_fwd_wg_pack<BF16, NS>(s, pa);
    }
    {
        /* the last step's P V */
        const int sp = (ne - 1 - nb) % ST;
        fmsa_mbar_wait(FMSA_FWD_WG_BAR(1, sp), (unsigned)((ne - 1 - nb) / ST) & 1u);
        fmsa_bar_sync(1 + c, 256);
        fmsa_wg_fence();
        fmsa_fwd_wg_pv<BF16, BN, D>(o, pa, dV, sp * stage);
        fmsa_bar_arrive(2 - c, 256);
        fmsa_wg_wait<0>();
#pragma unroll
        for (int cc = 0; cc < NC; ++cc)
#pragma unroll
            for (int i = 0; i < 64; ++i) fmsa_wg_touch(o[cc][i]);
        fmsa_mbar_arrive(FMSA_FWD_WG_BAR(3, sp));
    }
    /* warpgroup 0's last turn takes warpgroup 1's last arrival, so no barrier is left part-arrived */
    if (c == 0) fmsa_bar_sync(1, 256);
#undef FMSA_FWD_WG_BAR
    fmsa_fwd_wg_store<BF16, NC>(F, o, l, m2, r0, b, h, t4);
}
#endif /* FMSA_WGMMA */

#define FMSA_FWD_WG_KERNEL(name, BF16, OVL, D)                                                    \
    extern "C" __global__ void __launch_bounds__(256, 1) name(const fmsa_cuda_fwd_params p) {     \
        FMSA_FWD_WG_BODY(BF16, OVL, D);                                                           \
    }
#if FMSA_WGMMA
#define FMSA_FWD_WG_BODY(BF16, OVL, D) fmsa_fwd_wg_main<BF16, OVL, D>(p)
#else
#define FMSA_FWD_WG_BODY(BF16, OVL, D) ((void)p, __trap())
#endif /* FMSA_WGMMA */
/* every instance of the list (the overlapped schedule) and its serial schedule */
#define FMSA_FWD_WG_DEFINE(name, serial, dt, d, bm, bn, threads, stages)                               \
    static_assert(((d) == 128 || (d) == 256) && (bm) == FMSA_FWD_WG_BM && (bn) == FMSA_FWD_WG_BN(d) &&  \
                      (threads) == 256 && (stages) == 2,                                                \
                  "the list's Hopper forward is a tile this file compiles");                           \
    FMSA_FWD_WG_KERNEL(name, (dt) == FMSA_CUDA_DT_BF16, 1, d)                                          \
    FMSA_FWD_WG_KERNEL(serial, (dt) == FMSA_CUDA_DT_BF16, 0, d)
FMSA_CUDA_FWD_WG_INSTANCES(FMSA_FWD_WG_DEFINE)

/* Development: the warp-specialised schedule (3 warpgroups), compiled only where
   FMSA_CUDA_FWD_WG_WS is defined: the harness (backends/cuda/dev/fmsa_wgmma_fwd_dev.cu)
   and the emulation; the library's fatbin leaves it out. */
#ifdef FMSA_CUDA_FWD_WG_WS
#if FMSA_WGMMA
#define FMSA_FWD_WG_WS_BODY(BF16, D) fmsa_fwd_wg_ws_main<BF16, D>(p)
#else
#define FMSA_FWD_WG_WS_BODY(BF16, D) ((void)p, __trap())
#endif /* FMSA_WGMMA */
#define FMSA_FWD_WG_WS_KERNEL(name, BF16, D)                                                      \
    extern "C" __global__ void __launch_bounds__(384, 1) name(const fmsa_cuda_fwd_params p) {     \
        FMSA_FWD_WG_WS_BODY(BF16, D);                                                             \
    }
FMSA_FWD_WG_WS_KERNEL(fmsa_cuda_fwd_wg_bf16_d128_ws, 1, 128)
FMSA_FWD_WG_WS_KERNEL(fmsa_cuda_fwd_wg_f16_d128_ws, 0, 128)
FMSA_FWD_WG_WS_KERNEL(fmsa_cuda_fwd_wg_bf16_d256_ws, 1, 256)
FMSA_FWD_WG_WS_KERNEL(fmsa_cuda_fwd_wg_f16_d256_ws, 0, 256)
#endif /* FMSA_CUDA_FWD_WG_WS */
