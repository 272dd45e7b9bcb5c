/*
 * Split-KV decode (Flash-Decoding, Dao et al. 2023): for few query rows per
 * KV head (seqlen_q * Hq / Hkv <= 16) one block takes the 16-row tile of every
 * query head that reads one KV head (GQA packing, so K/V are read once), and
 * a key range (split) of its sequence; its warps split each key tile further.
 * The warps' states merge in shared memory (fmsa_softmax_merge); with one
 * split the block writes O and LSE, else fp32 partials (O_s normalised, lse_s)
 * that the combine kernel merges with fmsa_cuda_merge.cuh (the public merge's
 * code).  A sink is counted once: in the block's own merge with one split,
 * else as the combine's initial row (lse = t_h, O = 0).  D is the instance's
 * one head dim: it serves any head_dim, head_dim_v <= D (padded columns).
 * DTY as in fmsa_cuda_fwd.cuh (fp32: 3xTF32, rows counted in 16-bit units).
 */
#ifndef FMSA_CUDA_FWD_SPLIT_CUH
#define FMSA_CUDA_FWD_SPLIT_CUH

#include "fmsa_cuda_fwd.cuh"
#include "fmsa_cuda_merge.cuh"

/// Rows of the partials' index space: every query row of every sequence.
FMSA_DEV long long fmsa_cuda_split_rows(const fmsa_cuda_fwd_params &p) {
    return p.is_varlen ? (long long)p.total_q : (long long)p.batch * p.seqlen_q;
}

template <int DTY, int D, int NW, int BNW, int STAGES, int FULL>
FMSA_DEV void fmsa_cuda_fwd_split_block(const fmsa_cuda_fwd_params &p) {
    enum {
        F32 = DTY == FMSA_CUDA_DT_F32, EU = FMSA_CUDA_FWD_EU(DTY), D16 = D * EU,
        T = NW * 32, BNT = NW * BNW, ROWB = FMSA_CUDA_FWD_PITCH(D16) * 2, CPR = D16 / 8,
        KS = D16 / 16, NT = BNW / 8, DT = D / 8, STAGE_B = 2 * BNT * ROWB,
        /* d256: Q fragments would push the 128 accumulators into spills; fp32
         * reads Q from shared memory (its S runs on fmsa_cuda_fwd_qk_f32) */
        QREG = D16 <= 128 && !F32
    };
    static_assert(BNW % 16 == 0 && STAGES >= 2 && (BNT * CPR) % T == 0, "tile");
    static_assert(NW * 16 * (D + 2) * 4 <= STAGES * STAGE_B, "the warps' states fit the stages");
    extern __shared__ __align__(128) unsigned char fmsa_smem[];
    typedef unsigned short elem;

    const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int split = (int)blockIdx.x, hk = (int)blockIdx.y;
    const int group = p.heads_q / p.heads_kv;
    fmsa_cuda_fwd_rows w;
    long long q_row0, k_row0, qb, kb;
    if (!fmsa_cuda_fwd_seq<FULL>(p, (int)blockIdx.z, &w, &q_row0, &k_row0, &qb, &kb)) return;
    const int sq = w.sq, sk = w.sk, b = w.b;
    if (sq == 0) return;
    const int rows = group * sq < 16 ? group * sq : 16; /* the picker keeps group * sq <= 16 */

    /* this split's key tiles among those any row sees */
    const long long kbeg = fmsa_window_key_begin(0, sq, sk, w.wl);
    const long long kend = fmsa_window_key_end(sq, sq, sk, w.wr);
    const int t_all0 = (int)(kbeg / BNT);
    const int t_all = kend > kbeg ? (int)((kend + BNT - 1) / BNT) - t_all0 : 0;
    const int chunk = (t_all + p.num_splits - 1) / p.num_splits;
    int t_beg = t_all0 + split * chunk, t_end = t_beg + chunk;
    if (t_end > t_all0 + t_all) t_end = t_all0 + t_all;
    const int ntiles = t_end > t_beg ? t_end - t_beg : 0;
    const int klo = (int)kbeg, khi = (int)kend; /* keys no row sees load as 0 */

    /* addresses and strides in 16-bit units (EU per element) */
    const elem *kg = (const elem *)p.k + (kb * p.k_sb + k_row0 * p.k_ss + (long long)hk * p.k_sh) * EU;
    const elem *vg = (const elem *)p.v + (kb * p.v_sb + k_row0 * p.v_ss + (long long)hk * p.v_sh) * EU;
    const long long k_sb = p.k_sb * EU, k_ss = p.k_ss * EU, v_sb = p.v_sb * EU, v_ss = p.v_ss * EU;
    const int dim_k = p.head_dim * EU, dim_v = p.head_dim_v * EU;
    const unsigned sQ = fmsa_smem_addr(fmsa_smem), sKV = sQ + 16 * ROWB;

    /* Q: row r is (query head hk * group + r / sq, row r % sq) */
#pragma unroll
    for (int it = 0; it < (16 * CPR + T - 1) / T; ++it) {
        const int idx = tid + it * T, r = idx / CPR, c = idx % CPR;
        if (idx < 16 * CPR) {
            const int ok = r < rows && c * 8 < dim_k;
            const elem *src = (const elem *)p.q +
                              (qb * p.q_sb + (q_row0 + r % sq) * p.q_ss +
                               (long long)(hk * group + r / sq) * p.q_sh) * EU + c * 8;
            fmsa_cp_async16(sQ + fmsa_swizzle(r, c, ROWB), ok ? (const void *)src : p.q, ok ? 16 : 0);
        }
    }
    fmsa_cp_async_commit();
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        const unsigned sK = sKV + st * STAGE_B;
        if (st < ntiles) {
            fmsa_cuda_fwd_load_tile<D16, BNT, T, FULL, 1>(p, sK, kg, k_sb, k_ss, (t_beg + st) * BNT, klo, khi, b,
                                                       dim_k);
            fmsa_cuda_fwd_load_tile<D16, BNT, T, FULL, 1>(p, sK + BNT * ROWB, vg, v_sb, v_ss,
                                                       (t_beg + st) * BNT, klo, khi, b, dim_v);
        }
        fmsa_cp_async_commit();
    }
    /* the zero row after the stages (pv_any's V for keys no row sees) */
    const unsigned sZ = sKV + STAGES * STAGE_B;
    fmsa_cuda_fwd_zero_row<ROWB, T>(fmsa_smem + 16 * ROWB + STAGES * STAGE_B);
    fmsa_cp_async_wait<STAGES - 1>(); /* Q landed */
    if (p.softmax_scale < 0.0f)
        fmsa_cuda_fwd_q_negate<16, D16, T, ROWB, F32 ? 0x80000000u : 0x80008000u>(fmsa_smem);
    __syncthreads();

    unsigned offA[4], offB[4], kRow, vRow;
    fmsa_cuda_fwd_lane_addr(ROWB, offA, offB, &kRow, &vRow);
    const unsigned aRow = sQ + (unsigned)((lane & 15) * ROWB);
    unsigned qf[1][QREG ? KS : 1][4];
    if (QREG) {
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
            fmsa_ldmatrix_x4(qf[0][QREG ? ks : 0], aRow + (ks >> 2) * 128 + offA[ks & 3]);
    }

    fmsa_cuda_fwd_row rw[1][2];
    float acc[1][DT][4], m[1][2], l[1][2], s[1][NT][4];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const int r = g + 8 * hr < rows ? g + 8 * hr : 0; /* padding rows alias row 0, unused */
        fmsa_softmax_init(&m[0][hr], &l[0][hr]);
        fmsa_cuda_fwd_row_init<FULL>(p, w, r % sq, hk * group + r / sq, &rw[0][hr]);
    }
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][dt][e] = 0.0f;

    int stage = 0, lstage = STAGES - 1;
    for (int it = 0; it < ntiles; ++it) {
        fmsa_cp_async_wait<STAGES - 2>();
        __syncthreads(); /* tile it visible; every warp is done with stage lstage */
        if (it + STAGES - 1 < ntiles) {
            const unsigned sK = sKV + lstage * STAGE_B;
            const int n1 = (t_beg + it + STAGES - 1) * BNT;
            fmsa_cuda_fwd_load_tile<D16, BNT, T, FULL, 1>(p, sK, kg, k_sb, k_ss, n1, klo, khi, b, dim_k);
            fmsa_cuda_fwd_load_tile<D16, BNT, T, FULL, 1>(p, sK + BNT * ROWB, vg, v_sb, v_ss, n1, klo, khi, b,
                                                       dim_v);
        }
        fmsa_cp_async_commit();
        lstage = lstage + 1 == STAGES ? 0 : lstage + 1;
        const unsigned sK = sKV + stage * STAGE_B + warp * BNW * ROWB;
        const int n0 = (t_beg + it) * BNT + warp * BNW;
        const int edge = n0 + BNW > khi || (w.wr >= 0 && n0 + BNW - 1 > w.off + w.wr) ||
                         (w.wl >= 0 && n0 < sq - 1 + w.off - w.wl);
        if (F32) fmsa_cuda_fwd_qk_f32<D16, BNW, 1, ROWB, ROWB>(s, aRow, sK, kRow, offA, offB);
        else fmsa_cuda_fwd_qk<DTY, D16, BNW, 1, QREG, ROWB, ROWB>(s, qf, aRow, sK, kRow, offA, offB);
        fmsa_cuda_fwd_softmax<D, BNW, 1, FULL, F32>(p, w, rw, n0, edge, s, m, l, acc);
        fmsa_cuda_fwd_pv_any<DTY, D, BNW, 1, ROWB>(acc, s, sK + BNT * ROWB, vRow, offA, 0,
                                                   FULL && p.mask, sZ);
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    fmsa_cp_async_wait<0>();
    __syncthreads(); /* the stages are free: the warps' states go there */

    float *sm_m = (float *)(fmsa_smem + 16 * ROWB), *sm_l = sm_m + NW * 16, *sm_acc = sm_l + NW * 16;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        float lsum = l[0][hr];
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
        const int r = g + 8 * hr;
        if (tig == 0) {
            sm_m[warp * 16 + r] = m[0][hr];
            sm_l[warp * 16 + r] = lsum;
        }
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
            *(float2 *)(sm_acc + (warp * 16 + r) * D + dt * 8 + 2 * tig) =
                make_float2(acc[0][dt][2 * hr], acc[0][dt][2 * hr + 1]);
    }
    __syncthreads();

    const long long R = fmsa_cuda_split_rows(p);
    for (int idx = tid; idx < rows * D; idx += T) {
        const int r = idx / D, c = idx % D, i = r % sq, head = hk * group + r / sq;
        float mm, ll, o = 0.0f, ca, cb, lse;
        fmsa_softmax_init(&mm, &ll);
        if (p.sinks && p.num_splits == 1) { /* the sink's state (l = 1, acc = 0), once */
            mm = p.sinks[(long long)head * p.sinks_s] * FMSA_LOG2E;
            ll = 1.0f;
        }
#pragma unroll
        for (int k = 0; k < NW; ++k) {
            fmsa_softmax_merge(&mm, &ll, sm_m[k * 16 + r], sm_l[k * 16 + r], &ca, &cb);
            o = ca * o + cb * sm_acc[(k * 16 + r) * D + c];
        }
        const float inv = fmsa_softmax_finalize(mm, ll, &lse);
        if (c >= p.head_dim_v) continue;
        if (p.num_splits == 1) {
            const long long oi = qb * p.o_sb + (q_row0 + i) * p.o_ss + (long long)head * p.o_sh + c;
            if (F32) {
                ((float *)p.o)[oi] = o * inv;
            } else {
                const unsigned v = fmsa_pack2<DTY == FMSA_CUDA_DT_BF16>(o * inv, 0.0f);
                ((elem *)p.o)[oi] = (elem)(v & 0xffffu);
            }
            if (c == 0 && p.lse)
                p.lse[qb * p.lse_sb + (long long)head * p.lse_sh + (q_row0 + i) * p.lse_ss] = lse;
        } else {
            const long long row = (p.is_varlen ? q_row0 : (long long)b * p.seqlen_q) + i;
            const long long pr = ((long long)split * p.heads_q + head) * R + row;
            p.o_accum[pr * p.head_dim_v + c] = o * inv;
            if (c == 0) p.lse_accum[pr] = lse;
        }
    }
}

/// Merges the num_splits partials of every (query head, row), one warp per
/// row, 4 columns per lane, starting from the sink's row (lse = t_h, O = 0) or
/// the empty row (lse = -inf).
template <int DTY> FMSA_DEV void fmsa_cuda_fwd_combine_block(const fmsa_cuda_fwd_params &p) {
    typedef unsigned short elem;
    const int lane = (int)threadIdx.x & 31;
    const long long R = fmsa_cuda_split_rows(p);
    const long long idx = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (idx >= R * p.heads_q) return;
    const int head = (int)(idx / R);
    const long long row = idx % R;
    const long long qb = p.is_varlen ? 0 : row / p.seqlen_q, i = p.is_varlen ? row : row % p.seqlen_q;
    for (int c = lane * 4; c < p.head_dim_v; c += 128) {
        float lse = p.sinks ? p.sinks[(long long)head * p.sinks_s] : FMSA_NEG_INF;
        float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s = 0; s < p.num_splits; ++s) {
            const long long pr = ((long long)s * p.heads_q + head) * R + row;
            const float4 os = *(const float4 *)(p.o_accum + pr * p.head_dim_v + c);
            const float ob[4] = {os.x, os.y, os.z, os.w};
            fmsa_cuda_merge_step<4>(&lse, o, p.lse_accum[pr], ob);
        }
        const long long oi = qb * p.o_sb + i * p.o_ss + (long long)head * p.o_sh + c;
        if (DTY == FMSA_CUDA_DT_F32)
            *(float4 *)((float *)p.o + oi) = make_float4(o[0], o[1], o[2], o[3]);
        else
            *(uint2 *)((elem *)p.o + oi) =
                make_uint2(fmsa_pack2<DTY == FMSA_CUDA_DT_BF16>(o[0], o[1]),
                           fmsa_pack2<DTY == FMSA_CUDA_DT_BF16>(o[2], o[3]));
        if (c == 0 && p.lse) p.lse[qb * p.lse_sb + (long long)head * p.lse_sh + i * p.lse_ss] = lse;
    }
}

#define FMSA_CUDA_FWD_SPLIT_DEFINE(name, dt, d, variant, threads, bnw, stages)                  \
    extern "C" __global__ void __launch_bounds__(threads, 1) name(const fmsa_cuda_fwd_params p) { \
        fmsa_cuda_fwd_split_block<dt, d, (threads) / 32, bnw, stages, variant>(p);              \
    }

#define FMSA_CUDA_FWD_COMBINE_DEFINE(name, dt, threads)                                         \
    extern "C" __global__ void __launch_bounds__(threads) name(const fmsa_cuda_fwd_params p) {  \
        fmsa_cuda_fwd_combine_block<dt>(p);                                                     \
    }

#endif /* FMSA_CUDA_FWD_SPLIT_CUH */
