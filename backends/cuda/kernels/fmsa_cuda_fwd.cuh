/*
 * The mma.sync forward (FlashAttention-2's algorithm, Dao 2023, §3.1): one
 * block owns BM query rows of one (sequence, query head); its warps own 16 *
 * MT rows each and walk the key tiles from the last visible one down, so the
 * tiles that cross the causal/window edge or the sequence end come first and
 * only those run the per-element mask.  K/V tiles stream through STAGES
 * cp.async stages of swizzled shared memory; S = Q K^T and O += P V run on
 * mma.m16n8k16 with fp32 accumulators; P goes from the S accumulators to the A
 * operand of P V without leaving registers.  The online softmax is
 * fmsa_softmax.h's (m, l, acc in base 2; lazy rescale while no row of the warp
 * climbs past FMSA_SOFTMAX_STALE_MAX); a sink is the row's initial state
 * (m = t_h log2 e, l = 1).  Scores run over D (Q, K tiles of pitch D), P V
 * over DV (V tiles of pitch DV); above 256, CS warps share each row group and
 * each owns DV / CS output columns (the 16 x DV accumulators of one warp would
 * not fit its registers), every one of them computing the same S.
 * DTY is the dtype code (FMSA_CUDA_DT_*): fp32 inputs keep their tiles in
 * fp32 and run both products by 3xTF32 (fmsa_cuda_mma.cuh); a tile row is
 * counted in 16-bit units throughout (an fp32 element is two, EU), so the
 * loads, the swizzle and the Q / K ldmatrix addressing are the 16-bit ones.
 */
#ifndef FMSA_CUDA_FWD_CUH
#define FMSA_CUDA_FWD_CUH

#include "../cuda_fwd_instances.h"
#include "../../../common/fmsa_score.h"
#include "../../../common/fmsa_softmax.h"
#include "fmsa_cuda_mma.cuh"

/// FAST 16-bit rows on two or more stages with the unrolled loader (d64,
/// d128) skip the row maximum on interior tiles (fmsa_cuda_fwd_softmax_stale);
/// 0 builds main's kernels of 6f8c3b5 (the A/B's and the overflow test's check).
#ifndef FMSA_CUDA_FWD_STALE
#define FMSA_CUDA_FWD_STALE 1
#endif
/// d64 (128-key tiles, Q in registers) spilled 380 B with it (16 B without).
#ifndef FMSA_CUDA_FWD_STALE_D64
#define FMSA_CUDA_FWD_STALE_D64 0
#endif
/// Causal / window grids in longest-first order over sections of heads
/// (fmsa_cuda_fwd_lpt); 0: each head's tiles longest first, heads in order.
#ifndef FMSA_CUDA_FWD_LPT
#define FMSA_CUDA_FWD_LPT 1
#endif
/// The K and V bytes of one LPT section: FlashAttention-3's 32 MB, below
/// an H100 / H200's L2 so that the Q and O streams keep a share of it.
#ifndef FMSA_CUDA_FWD_LPT_L2
#define FMSA_CUDA_FWD_LPT_L2 (32ll << 20)
#endif
/// 2^FMSA_SOFTMAX_STALE_MAX: the bound on a lane's P sum of the stale pass.
#define FMSA_CUDA_FWD_STALE_SUM 256.0f

/// Shared tanh form for the softcap: 1 - 2 / (2^(2x log2 e) + 1) is exact at
/// both saturations and its absolute error (what the exponent sees) is a few
/// fp32 ulps of 1, well under the bf16/f16 rounding of the naive's scores.
FMSA_DEV float fmsa_cuda_tanh(float x) {
    const float t = fmsa_ex2(x * (2.0f * FMSA_LOG2E));
    return 1.0f - __fdividef(2.0f, t + 1.0f);
}

/// Bit 2 nt + e set when key nt * 8 + 2 (lane % 4) + e of the tile has a
/// nonzero P in some row of the warp: the keys of this lane's P columns,
/// which are exactly those of its V B-fragment halves in P V (m16n8k16 and
/// the fp32 m16n8k8 alike).  OR over the 8 lanes that share lane % 4.
template <int BN, int MT>
FMSA_DEV unsigned fmsa_cuda_fwd_live_keys(const float s[][BN / 8][4]) {
    unsigned b = 0;
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                if (s[mt][nt][e] != 0.0f || s[mt][nt][2 + e] != 0.0f) b |= 1u << (2 * nt + e);
    b |= __shfl_xor_sync(0xffffffffu, b, 4);
    b |= __shfl_xor_sync(0xffffffffu, b, 8);
    b |= __shfl_xor_sync(0xffffffffu, b, 16);
    return b;
}

/// The live keys of fmsa_cuda_fwd_live_keys as P V's V ldmatrix.trans
/// addresses them: lane L supplies the row of key 16 kk + L % 16, so bit 4 kk
/// of the result is that key's (taken from a lane of quad column (L % 8) / 2).
FMSA_DEV unsigned fmsa_cuda_fwd_live_ldsm(unsigned live) {
    const int lane = (int)threadIdx.x & 31;
    live = __shfl_sync(0xffffffffu, live, (lane & 7) >> 1);
    return live >> (2 * ((lane >> 3) & 1) + (lane & 1));
}

FMSA_DEV void fmsa_cuda_status(const fmsa_cuda_fwd_params &p, unsigned bit) {
    if (p.status) atomicOr(p.status, bit);
}

/// One of K or V of key tile n0 into shared memory at base: rows outside
/// [klo, khi) (past the sequence, or with LO in the split kernel outside every
/// row's window; without LO, klo is not checked) and columns past head_dim are zero-filled, so 0 * V stays 0 where
/// P = 0 even when such a key holds NaN / Inf (issue 18; the main kernel
/// passes [0, sk): one more live bound spilled its d64 / d128 kernels, so its
/// FAST tiles start at the window's first key and FULL zeroes hidden keys' V
/// in P V, fmsa_cuda_fwd_pv_any); paged rows go through the block table, and
/// an entry outside the pool is reported and zero-filled instead of read.
template <int D, int BN, int T, int FULL, int LO = 0>
FMSA_DEV void fmsa_cuda_fwd_load_tile(const fmsa_cuda_fwd_params &p, unsigned base,
                                      const unsigned short *g, long long sb, long long ss,
                                      int n0, int klo, int khi, int b, int dim) {
    enum { CPR = D / 8, ROWB = FMSA_CUDA_FWD_PITCH(D) * 2, N = (BN * CPR + T - 1) / T, RS = T / CPR };
    /* A rolled loop: unrolled, every copy's tile-invariant address stayed live
     * across the key loop and the d128 tiles spilled (148 bytes at 128 x 64). */
    if (T % CPR == 0 && RS % 8 == 0 && (BN * CPR) % T == 0) {
        /* a thread's rows step by a multiple of 8: its swizzled chunk is fixed */
        const int r0 = (int)threadIdx.x / CPR, c = (int)threadIdx.x % CPR, cok = c * 8 < dim;
        const unsigned short *src = g + (long long)(n0 + r0) * ss + c * 8;
        unsigned dst = base + fmsa_swizzle(r0, c, ROWB);
#pragma unroll 1
        for (int it = 0, j = n0 + r0; it < N; ++it, j += RS, src += RS * ss, dst += RS * ROWB) {
            int ok = cok && (!LO || j >= klo) && j < khi;
            const unsigned short *from = src;
            if (FULL && p.is_paged && ok) {
                const int pg = p.block_table[b * p.bt_sb + (long long)(j / p.page_size) * p.bt_sp];
                if (pg < 0 || pg >= p.num_pages) {
                    fmsa_cuda_status(p, FMSA_CUDA_STATUS_BAD_PAGE);
                    ok = 0;
                }
                from = g + (long long)pg * sb + (long long)(j % p.page_size) * ss + c * 8;
            }
            fmsa_cp_async16(dst, ok ? (const void *)from : p.k, ok ? 16 : 0);
        }
    } else {
#pragma unroll 1
    for (int it = 0; it < N; ++it) {
        const int idx = (int)threadIdx.x + it * T, r = idx / CPR, c = idx % CPR, j = n0 + r;
        if ((BN * CPR) % T != 0 && idx >= BN * CPR) break;
        int ok = (!LO || j >= klo) && j < khi && c * 8 < dim;
        long long off = (long long)j * ss;
        if (FULL && p.is_paged && ok) {
            const int pg = p.block_table[b * p.bt_sb + (long long)(j / p.page_size) * p.bt_sp];
            if (pg < 0 || pg >= p.num_pages) {
                fmsa_cuda_status(p, FMSA_CUDA_STATUS_BAD_PAGE);
                ok = 0;
            }
            off = (long long)pg * sb + (long long)(j % p.page_size) * ss;
        }
        fmsa_cp_async16(base + fmsa_swizzle(r, c, ROWB), ok ? (const void *)(g + off + c * 8) : p.k,
                        ok ? 16 : 0);
    }
    }
}

/// fmsa_cuda_fwd_load_tile for FAST 16-bit tiles (no paging, no lower bound),
/// unrolled, for a tile of keys all below the sequence end (the caller takes
/// fmsa_cuda_fwd_load_tile for the one tile across it): a copy is a 64-bit
/// pointer step and the cp.async at an immediate shared offset, where the
/// rolled loop spent ~15 issue slots a copy (counter, pointer steps, bound,
/// the select of a safe address).  A thread whose chunk is past dim
/// zero-fills from p.k.  The pointer steps live inside the tile, so no copy's
/// address stays live across the key loop (the first unrolled loader's did,
/// and spilled: NOTES_FWD.md).
template <int D, int BN, int T>
FMSA_DEV void fmsa_cuda_fwd_load_tile_u(const fmsa_cuda_fwd_params &p, unsigned base,
                                        const unsigned short *g, long long ss, int n0, int dim,
                                        int live = 1) {
    enum { CPR = D / 8, ROWB = FMSA_CUDA_FWD_PITCH(D) * 2, N = BN * CPR / T, RS = T / CPR };
    /* the caller's rows have T % CPR == 0, RS % 4 == 0, (BN CPR) % T == 0: a
     * thread's rows step by a multiple of 4, so its swizzled chunk is one of
     * two (row r + 4 flips bit 2 of r & 7, i.e. byte 64 of the chunk offset) */
    /* live = 0: every copy zero-fills from p.k (the caller's branch-free tail) */
    const int r0 = (int)threadIdx.x / CPR, c = (int)threadIdx.x % CPR, cok = live && c * 8 < dim;
    const unsigned short *src = cok ? g + (long long)(n0 + r0) * ss + c * 8 : (const unsigned short *)p.k;
    const long long step = cok ? RS * ss : 0;
    const unsigned dst = base + fmsa_swizzle(r0, c, ROWB), dst4 = (dst - base) ^ 64u;
#pragma unroll
    for (int it = 0; it < N; ++it, src += step)
        fmsa_cp_async16((RS % 8 == 0 || it % 2 == 0) ? dst + it * RS * ROWB : base + dst4 + it * RS * ROWB,
                        src, cok ? 16 : 0);
}

/// Per-lane ldmatrix addresses: row r's chunk c sits at chunk c ^ (r & 7);
/// every row a lane addresses has r & 7 == lane & 7, so the low chunk pairs a
/// lane visits are 4 offsets fixed for the whole kernel (offA: A operands and
/// V, chunk + lane / 16; offB: K, chunk + lane / 8 % 2), and kRow / vRow are
/// the lane's row offsets within a K / V tile.
FMSA_DEV void fmsa_cuda_fwd_lane_addr(int row_bytes, unsigned offA[4], unsigned offB[4],
                                      unsigned *kRow, unsigned *vRow) {
    const int lane = (int)threadIdx.x & 31;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        offA[k] = (unsigned)(((2 * k + (lane >> 4)) ^ (lane & 7)) << 4);
        offB[k] = (unsigned)(((2 * k + ((lane >> 3) & 1)) ^ (lane & 7)) << 4);
    }
    *kRow = (unsigned)(((lane & 7) + ((lane >> 4) << 3)) * row_bytes);
    *vRow = (unsigned)((lane & 15) * row_bytes);
}

/// What the per-tile steps of one block share.
typedef struct fmsa_cuda_fwd_rows {
    long long off;    ///< sk - sq: the bottom-right diagonal
    long long wl, wr; ///< window, -1 = unlimited
    int sq, sk;       ///< lengths of this sequence
    int b;            ///< sequence
    float scale_abs;  ///< |softmax_scale| (a negative scale is folded into Q)
    float sl2;        ///< |softmax_scale| log2 e: the exponent's factor on raw products
} fmsa_cuda_fwd_rows;

/// One accumulator row of a lane: its query index, the visible key range
/// [lo, hi) (window and sequence end, clamped to +-2^30 so per-tile offsets
/// stay int), and FULL's ALiBi slope and mask row.
typedef struct fmsa_cuda_fwd_row {
    int i, lo, hi;
    float slope;
    const unsigned char *mrow; ///< NULL: nothing visible (row past the sequence)
} fmsa_cuda_fwd_row;

FMSA_DEV int fmsa_cuda_clamp30(long long x) {
    return x < -(1ll << 30) ? -(1 << 30) : (x > (1ll << 30) ? (1 << 30) : (int)x);
}

/// Fills row i (query index within the sequence) of query head h.
template <int FULL>
FMSA_DEV void fmsa_cuda_fwd_row_init(const fmsa_cuda_fwd_params &p, const fmsa_cuda_fwd_rows &w,
                                     int i, int h, fmsa_cuda_fwd_row *r) {
    long long hi = w.sk;
    if (w.wr >= 0 && i + w.off + w.wr + 1 < hi) hi = i + w.off + w.wr + 1;
    r->i = i;
    r->lo = fmsa_cuda_clamp30(w.wl >= 0 ? i + w.off - w.wl : -(1ll << 30));
    r->hi = fmsa_cuda_clamp30(hi);
    r->slope = 0.0f;
    r->mrow = 0;
    if (FULL) {
        if (p.alibi) r->slope = p.alibi[w.b * p.alibi_sb + h * p.alibi_sh];
        if (p.mask && i < w.sq) r->mrow = p.mask + w.b * p.mask_sb + h * p.mask_sh + i * p.mask_ss;
    }
}

/*
 * fp32 by 3xTF32 (fmsa_cuda_mma.cuh), with the tensor core's own fp32
 * accumulation kept short: it truncates (rounds toward zero) rather than
 * rounding to nearest, and a bias of up to an ulp per mma, summed over the
 * thousands of mma one output sees, exceeds the naive's error (a CPU model of
 * this arithmetic failed the rule at 3000 keys).  So every product chunk (64
 * head-dim columns of S, one key tile of P V) accumulates from zero in two
 * registers of its own, tb (a_hi b_hi) and ts (the two small products, 2^-11
 * of tb: their truncations are negligible), and is added to S / O by ordinary
 * fp32 adds (round to nearest); a truncating mma then rounds at most 8 k-steps
 * of one chunk.  NOTES_FWD.md has the error budget.
 */

/// The three tf32 mma of one k8 step: ts += a_lo b_hi + a_hi b_lo, tb += a_hi b_hi.
FMSA_DEV void fmsa_cuda_fwd_mma_f32(float tb[4], float ts[4], const unsigned ah[4], const unsigned al[4],
                                    unsigned bh0, unsigned bl0, unsigned bh1, unsigned bl1) {
    fmsa_mma1688_tf32(ts, al, bh0, bh1);
    fmsa_mma1688_tf32(ts, ah, bl0, bl1);
    fmsa_mma1688_tf32(tb, ah, bh0, bh1);
}

/// S = Q K^T for fp32 inputs (Q from shared memory): the 16-bit kernel's
/// ldmatrix addressing (D in 16-bit units, a k16 step of it is an fp32 k8
/// step), chunks of 8 k-steps accumulated apart and added in fp32.
template <int D, int BN, int MT, int ROWQ, int ROWK>
FMSA_DEV void fmsa_cuda_fwd_qk_f32(float s[][BN / 8][4], unsigned aRow, unsigned sK, unsigned kRow,
                                   const unsigned offA[4], const unsigned offB[4]) {
    enum { KS = D / 16, CH = 8 };
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int k0 = 0; k0 < KS; k0 += CH) {
        float tb[MT][BN / 8][4], ts[MT][BN / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) tb[mt][nt][e] = ts[mt][nt][e] = 0.0f;
#pragma unroll
        for (int ks = k0; ks < k0 + CH && ks < KS; ++ks) {
            unsigned ah[MT][4], al[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                unsigned a[4];
                fmsa_ldmatrix_x4(a, aRow + mt * 16 * ROWQ + (ks >> 2) * 128 + offA[ks & 3]);
#pragma unroll
                for (int e = 0; e < 4; ++e) fmsa_tf32_split(a[e], &ah[mt][e], &al[mt][e]);
            }
#pragma unroll
            for (int np = 0; np < BN / 16; ++np) {
                unsigned bk[4], bh[4], bl[4];
                fmsa_ldmatrix_x4(bk, sK + kRow + np * 16 * ROWK + (ks >> 2) * 128 + offB[ks & 3]);
#pragma unroll
                for (int e = 0; e < 4; ++e) fmsa_tf32_split(bk[e], &bh[e], &bl[e]);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    fmsa_cuda_fwd_mma_f32(tb[mt][2 * np], ts[mt][2 * np], ah[mt], al[mt], bh[0], bl[0],
                                          bh[1], bl[1]);
                    fmsa_cuda_fwd_mma_f32(tb[mt][2 * np + 1], ts[mt][2 * np + 1], ah[mt], al[mt], bh[2],
                                          bl[2], bh[3], bl[3]);
                }
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][nt][e] += tb[mt][nt][e] + ts[mt][nt][e];
    }
}

/// S = Q K^T for this warp's rows and one key tile at sK (16-bit inputs).
template <int DTY, int D, int BN, int MT, int QREG, int ROWQ, int ROWK>
FMSA_DEV void fmsa_cuda_fwd_qk(float s[][BN / 8][4], const unsigned qf[][QREG ? D / 16 : 1][4],
                               unsigned aRow, unsigned sK, unsigned kRow, const unsigned offA[4],
                               const unsigned offB[4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
        unsigned a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            if (QREG) {
#pragma unroll
                for (int e = 0; e < 4; ++e) a[mt][e] = qf[QREG ? mt : 0][QREG ? ks : 0][e];
            } else {
                fmsa_ldmatrix_x4(a[mt], aRow + mt * 16 * ROWQ + (ks >> 2) * 128 + offA[ks & 3]);
            }
        }
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
            unsigned bk[4];
            fmsa_ldmatrix_x4(bk, sK + kRow + np * 16 * ROWK + (ks >> 2) * 128 + offB[ks & 3]);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                fmsa_mma16816<DTY == FMSA_CUDA_DT_BF16>(s[mt][2 * np], a[mt], bk[0], bk[1]);
                fmsa_mma16816<DTY == FMSA_CUDA_DT_BF16>(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
            }
        }
    }
}

/// Scores of key tile n0 -> probabilities in s, with the state machine's
/// update of m, l and acc; edge: some key of the tile may be invisible to some
/// row (per-element mask).  FULL's transforms leave base-2 scores (mult 1);
/// otherwise the scale rides in the exponent's fma (mult = |scale| log2 e).
template <int DA, int BN, int MT, int FULL, int F32 = 0, int FRESH = 0>
FMSA_DEV void fmsa_cuda_fwd_softmax(const fmsa_cuda_fwd_params &p, const fmsa_cuda_fwd_rows &w,
                                    const fmsa_cuda_fwd_row rw[][2], int n0, int edge,
                                    float s[][BN / 8][4], float m[][2], float l[][2],
                                    float acc[][DA / 8][4]) {
    enum { NT = BN / 8, DT = DA / 8 };
    const int tig = (int)threadIdx.x & 3, cb = n0 + 2 * tig;
    float mult = w.sl2;
    if (FULL && (p.softcap > 0.0f || p.alibi)) {
        const float cap = p.softcap;
        mult = 1.0f;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                const int dist0 = (int)(rw[mt][hr].i + w.off + p.alibi_offset - cb);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float x = s[mt][nt][2 * hr + e] * w.scale_abs;
                        /* fp32: the library tanh, as the naive's (the shared form's few
                         * ulps of 1 are above an fp32 naive's score error) */
                        if (cap > 0.0f)
                            x = cap * (F32 ? tanhf(x / cap) : fmsa_cuda_tanh(__fdividef(x, cap)));
                        x -= rw[mt][hr].slope * fabsf((float)(dist0 - nt * 8 - e));
                        s[mt][nt][2 * hr + e] = x * FMSA_LOG2E;
                    }
            }
    }
    if (edge || (FULL && p.mask)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                const int lo = rw[mt][hr].lo - cb, hi = rw[mt][hr].hi - cb;
                unsigned bits = ~0u;
                if (FULL && p.mask) {
                    const unsigned char *mrow = rw[mt][hr].mrow;
                    bits = 0;
                    if (mrow) {
                        const int nbytes = (w.sk + 7) >> 3;
#pragma unroll
                        for (int nt = 0; nt < NT; ++nt)
                            if ((n0 >> 3) + nt < nbytes)
                                bits |= (((unsigned)mrow[(n0 >> 3) + nt] >> (2 * tig)) & 3u) << (2 * nt);
                    }
                }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int x = nt * 8 + e;
                        if (x < lo || x >= hi || !((bits >> (2 * nt + e)) & 1u))
                            s[mt][nt][2 * hr + e] = FMSA_NEG_INF;
                    }
            }
    }

    float tmax[MT][2];
    int keep = 1;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            float mx = FMSA_NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            tmax[mt][hr] = mx == FMSA_NEG_INF ? FMSA_NEG_INF : mx * mult;
            keep &= fmsa_softmax_keeps(m[mt][hr], tmax[mt][hr]);
        }
    /* FRESH: an interior tile that the stale pass (fmsa_cuda_fwd_softmax_stale)
     * gave back moves m to its maximum, so the next tiles pass that test again */
    if (FRESH) keep &= edge;
    /* lazy rescale, decided per warp so the skip costs no divergence */
    if (!__all_sync(0xffffffffu, keep)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                const float c = fmsa_softmax_update(&m[mt][hr], tmax[mt][hr]);
                l[mt][hr] *= c;
#pragma unroll
                for (int dt = 0; dt < DT; ++dt) {
                    acc[mt][dt][2 * hr] *= c;
                    acc[mt][dt][2 * hr + 1] *= c;
                }
            }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            /* fmsa_softmax_p: while m = -inf every score is -inf, and 2^-inf = 0 */
            const float mu = m[mt][hr] == FMSA_NEG_INF ? 0.0f : m[mt][hr];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float x = fmaf(s[mt][nt][2 * hr + e], mult, -mu);
                    const float pv = fmsa_ex2(x);
                    l[mt][hr] += pv;
                    s[mt][nt][2 * hr + e] = pv;
                }
        }
}

/// The interior tiles' softmax without the row maximum: P = 2^(s mult - m)
/// against the running m as it stands, each lane's 16 P of a row summed on the
/// way.  Every sum <= 2^FMSA_SOFTMAX_STALE_MAX bounds each P by it, which is
/// the lazy case of fmsa_cuda_fwd_softmax (its P, bit for bit), so l takes the
/// sums and 1 is returned.  Otherwise (a score above m + 8, P overflowed to
/// inf, a NaN, or m still -inf, which makes every P inf or NaN) nothing of the
/// state has changed and 0 is returned: the caller recomputes S from the K
/// tile, which stays in its stage until the warp reaches the next barrier, and
/// takes fmsa_cuda_fwd_softmax.  Warp-uniform.
template <int BN, int MT>
FMSA_DEV int fmsa_cuda_fwd_softmax_stale(float mult, float s[][BN / 8][4], const float m[][2],
                                         float l[][2]) {
    enum { NT = BN / 8 };
    float sum[MT][2];
    int ok = 1;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const float mu = m[mt][hr];
            float t = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float pv = fmsa_ex2(fmaf(s[mt][nt][2 * hr + e], mult, -mu));
                    t += pv;
                    s[mt][nt][2 * hr + e] = pv;
                }
            sum[mt][hr] = t;
            ok &= t <= FMSA_CUDA_FWD_STALE_SUM; /* false for inf and NaN */
        }
#ifndef FMSA_CUDA_FWD_STALE_UNSAFE /* the overflow test's check build: no repeat (wrong on purpose) */
    if (!__all_sync(0xffffffffu, ok)) return 0;
#endif
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) l[mt][hr] += sum[mt][hr];
    return 1;
}

/// acc += P V for one key tile at sV, output columns [16 c16, 16 c16 + DA);
/// P leaves the S accumulators as the A operand (the C fragment of two
/// adjacent n8 tiles is the A fragment of k16).  A lane whose bit 4 kk of
/// live (fmsa_cuda_fwd_live_ldsm) is clear points its V row at the zero row
/// sZ instead: that key's V enters the mma as 0, so a NaN / Inf in a key no
/// row of the warp sees never meets its P = 0 (one select per 16 keys; a
/// second, masked copy of this loop spilled the d64 / d128 kernels).
template <int IS_BF16, int DA, int BN, int MT, int ROWV>
FMSA_DEV void fmsa_cuda_fwd_pv(float acc[][DA / 8][4], const float s[][BN / 8][4], unsigned sV,
                               unsigned vRow, const unsigned offA[4], int c16, unsigned live,
                               unsigned sZ) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
        const unsigned vb = (live >> (4 * kk)) & 1u ? sV + vRow + kk * 16 * ROWV : sZ;
        unsigned pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = fmsa_pack2<IS_BF16>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][1] = fmsa_pack2<IS_BF16>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][2] = fmsa_pack2<IS_BF16>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][3] = fmsa_pack2<IS_BF16>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < DA / 16; ++dp) {
            unsigned bv[4];
            /* c16 a multiple of 4 (whole 64-column groups) keeps the lane offsets fixed */
            const int da = dp + c16, lane = (int)threadIdx.x & 31;
            const unsigned col = DA % 64 == 0
                                     ? (unsigned)((c16 >> 2) + (dp >> 2)) * 128u + offA[dp & 3]
                                     : (unsigned)(da >> 2) * 128u +
                                           (unsigned)(((2 * (da & 3) + (lane >> 4)) ^ (lane & 7)) << 4);
            fmsa_ldmatrix_x4_trans(bv, vb + col);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                fmsa_mma16816<IS_BF16>(acc[mt][2 * dp], pa[mt], bv[0], bv[1]);
                fmsa_mma16816<IS_BF16>(acc[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
            }
        }
    }
}

/// acc += P V for fp32 inputs, output columns [c0, c0 + DA): each n8 tile of S
/// is one k8 step, its keys permuted so the C fragment is the A fragment
/// (k = t holds key 2t, k = t + 4 key 2t + 1; a sum over keys does not care),
/// and V's B fragment (keys 2t, 2t + 1 of column g) is two 32-bit loads from
/// the swizzled tile (4 rows x 2 chunks per load: no bank conflict).  Per
/// output n8 tile the key tile accumulates apart (tb, ts) and is added to acc
/// in fp32 (the truncating accumulation above).  V of a key whose bit in live
/// is clear is taken as 0 (the 16-bit kernel's zero row, by select).
template <int DA, int BN, int MT, int ROWV>
FMSA_DEV void fmsa_cuda_fwd_pv_f32(float acc[][DA / 8][4], const float s[][BN / 8][4], unsigned sV,
                                   int c0, unsigned live) {
    enum { NT = BN / 8 };
    const int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    unsigned ph[MT][NT][4], pl[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int perm[4] = {0, 2, 1, 3}; /* a0 (g, key 2t), a1 (g+8, 2t), a2 (g, 2t+1), a3 */
#pragma unroll
            for (int e = 0; e < 4; ++e)
                fmsa_tf32_split(__float_as_uint(s[mt][nt][perm[e]]), &ph[mt][nt][e], &pl[mt][nt][e]);
        }
#pragma unroll
    for (int dt = 0; dt < DA / 8; ++dt) {
        const int c = c0 + dt * 8 + g;
        float tb[MT][4], ts[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int e = 0; e < 4; ++e) tb[mt][e] = ts[mt][e] = 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int r = nt * 8 + 2 * t;
            unsigned v0, v1, vh0, vl0, vh1, vl1;
            asm volatile("ld.shared.b32 %0, [%1];\n"
                         : "=r"(v0)
                         : "r"(sV + fmsa_swizzle(r, c >> 2, ROWV) + (unsigned)(c & 3) * 4u));
            asm volatile("ld.shared.b32 %0, [%1];\n"
                         : "=r"(v1)
                         : "r"(sV + fmsa_swizzle(r + 1, c >> 2, ROWV) + (unsigned)(c & 3) * 4u));
            /* keys no row of the warp sees enter as 0 (fmsa_cuda_fwd_live_keys) */
            v0 = live >> (2 * nt) & 1u ? v0 : 0u;
            v1 = live >> (2 * nt + 1) & 1u ? v1 : 0u;
            fmsa_tf32_split(v0, &vh0, &vl0);
            fmsa_tf32_split(v1, &vh1, &vl1);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                fmsa_cuda_fwd_mma_f32(tb[mt], ts[mt], ph[mt][nt], pl[mt][nt], vh0, vl0, vh1, vl1);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][dt][e] += tb[mt][e] + ts[mt][e];
    }
}

/// P V of one tile for any dtype, output columns [c0, c0 + DA); zap (warp
/// uniform: FULL with a bit mask, or a tile across a window edge or the
/// sequence end) takes the V of keys no row of the warp sees as 0 (issue 18:
/// padding keys may hold NaN / Inf, and 0 * NaN is NaN in the tensor core
/// too).  Their scores were masked by select in fmsa_cuda_fwd_softmax, so a
/// NaN in K is gone already.  sZ: a zero row of ROWV bytes.  FAST kernels
/// (zap = 0 at compile time) run the plain P V: their tiles hold no key a
/// window hides from the whole block, and keys past the sequence load as 0.
template <int DTY, int DA, int BN, int MT, int ROWV>
FMSA_DEV void fmsa_cuda_fwd_pv_any(float acc[][DA / 8][4], const float s[][BN / 8][4], unsigned sV,
                                   unsigned vRow, const unsigned offA[4], int c0, int zap,
                                   unsigned sZ) {
    const unsigned live = zap ? fmsa_cuda_fwd_live_keys<BN, MT>(s) : ~0u;
    if (DTY == FMSA_CUDA_DT_F32)
        fmsa_cuda_fwd_pv_f32<DA, BN, MT, ROWV>(acc, s, sV, c0, live);
    else
        fmsa_cuda_fwd_pv<DTY == FMSA_CUDA_DT_BF16, DA, BN, MT, ROWV>(
            acc, s, sV, vRow, offA, c0 / 16, zap ? fmsa_cuda_fwd_live_ldsm(live) : ~0u, sZ);
}

/// Zeroes the ROWB-byte row at sZ (before the block's first barrier).
template <int ROWB, int T> FMSA_DEV void fmsa_cuda_fwd_zero_row(unsigned char *z) {
    for (int i = (int)threadIdx.x; i < ROWB / 16; i += T) *(uint4 *)(z + 16 * i) = make_uint4(0u, 0u, 0u, 0u);
}

/// The block's (q tile, head, sequence) under causal / window masks, whose
/// blocks differ in work: blocks are issued in linear order, so the longest
/// tiles (last rows) of a section of heads take the lowest indices, every
/// head of the section before the next shorter tile (FlashAttention-3's LPT
/// order).  A section is as many (sequence, head) pairs as have K and V
/// within FMSA_CUDA_FWD_LPT_L2 bytes, so the blocks in flight share their
/// keys through L2; the grid's last wave then holds the shortest tiles.
FMSA_DEV void fmsa_cuda_fwd_lpt(const fmsa_cuda_fwd_params &p, int eb, int *mblk, int *h, int *bz) {
    const unsigned X = gridDim.x, Y = gridDim.y, HZ = Y * gridDim.z;
    const unsigned L = blockIdx.x + X * (blockIdx.y + Y * blockIdx.z);
    const long long head = (long long)(p.seqlen_k > 1 ? p.seqlen_k : 1) * (p.head_dim + p.head_dim_v) * eb;
    const long long fit = FMSA_CUDA_FWD_LPT_L2 / head;
    const unsigned G = fit < 1 ? 1u : fit < (long long)HZ ? (unsigned)fit : HZ;
    const unsigned s0 = L / (G * X) * G, gs = HZ - s0 < G ? HZ - s0 : G, in = L - s0 * X;
    const unsigned r = s0 + in % gs;
    *mblk = (int)(X - 1 - in / gs);
    *h = (int)(r % Y);
    *bz = (int)(r / Y);
}

/// Resolves sequence b (varlen offsets, paged key count) into w and the row
/// offsets; checks the metadata it reads and reports through p.status.
/// Returns 0 when the sequence's metadata is bad (the block then writes nothing).
template <int FULL>
FMSA_DEV int fmsa_cuda_fwd_seq(const fmsa_cuda_fwd_params &p, int b, fmsa_cuda_fwd_rows *w,
                               long long *q_row0, long long *k_row0, long long *qb, long long *kb) {
    *q_row0 = *k_row0 = 0;
    *qb = *kb = b;
    w->b = b;
    w->sq = p.seqlen_q;
    w->sk = p.seqlen_k;
    if (p.is_varlen) {
        const int q0 = p.cu_seqlens_q[b * p.cu_q_s], q1 = p.cu_seqlens_q[(b + 1) * p.cu_q_s];
        const int k0 = p.cu_seqlens_k[b * p.cu_k_s], k1 = p.cu_seqlens_k[(b + 1) * p.cu_k_s];
        if (q0 < 0 || q1 < q0 || q1 > p.total_q || q1 - q0 > p.seqlen_q || k0 < 0 || k1 < k0 ||
            k1 > p.total_k || k1 - k0 > p.seqlen_k) {
            if (threadIdx.x == 0) fmsa_cuda_status(p, FMSA_CUDA_STATUS_BAD_CU_SEQLENS);
            return 0;
        }
        *q_row0 = q0;
        *k_row0 = k0;
        *qb = *kb = 0;
        w->sq = q1 - q0;
        w->sk = k1 - k0;
    }
    if (FULL && p.is_paged) {
        const long long cap = (long long)p.max_pages * p.page_size;
        *kb = 0;
        if (w->sk > cap) w->sk = (int)cap;
        if (p.has_seqused_k) {
            const int u = p.seqused_k[b * p.su_s];
            if (u < 0 || u > cap) {
                if (threadIdx.x == 0) fmsa_cuda_status(p, FMSA_CUDA_STATUS_BAD_SEQUSED);
                return 0;
            }
            w->sk = u;
        }
    }
    w->wl = p.window_left;
    w->wr = p.window_right;
    w->off = (long long)w->sk - w->sq;
    w->scale_abs = fabsf(p.softmax_scale);
    w->sl2 = fmaxf(fabsf(p.scale_log2), 1.17549435e-38f); /* scale 0: no 0 * -inf */
    return 1;
}

/// Q's negative-scale fold: flips the sign of the 16-byte chunks this thread
/// copied (its own cp.async writes are visible to it after the wait); every
/// kernel may then take the row maximum on the raw products.  D in 16-bit
/// units; SIGN the sign bits of one 32-bit word (two 16-bit or one fp32 element).
template <int ROWS, int D, int T, int ROWB, unsigned SIGN = 0x80008000u>
FMSA_DEV void fmsa_cuda_fwd_q_negate(unsigned char *sq_tile) {
    enum { CPR = D / 8 };
#pragma unroll
    for (int it = 0; it < (ROWS * CPR + T - 1) / T; ++it) {
        const int idx = (int)threadIdx.x + it * T;
        if (idx < ROWS * CPR) {
            uint4 *q4 = (uint4 *)(sq_tile + fmsa_swizzle(idx / CPR, idx % CPR, ROWB));
            uint4 x = *q4;
            x.x ^= SIGN;
            x.y ^= SIGN;
            x.z ^= SIGN;
            x.w ^= SIGN;
            *q4 = x;
        }
    }
}

/// The sink's initial state of a row of query head h (fmsa_softmax_init
/// otherwise): m = t_h log2 e in every lane of the quad, l = 1 in one lane of
/// it only, since a row's l is summed over its quad at the end.
FMSA_DEV void fmsa_cuda_fwd_state_init(const fmsa_cuda_fwd_params &p, int h, float *m, float *l) {
    fmsa_softmax_init(m, l);
    if (p.sinks) {
        *m = p.sinks[(long long)h * p.sinks_s] * FMSA_LOG2E;
        *l = ((int)threadIdx.x & 3) == 0 ? 1.0f : 0.0f;
    }
}

/// One K or V tile of the main kernel: the unrolled loader where the row asks
/// for it (UL: FAST 16-bit rows), else the general one.
template <int D, int BN, int T, int FULL, int UL>
FMSA_DEV void fmsa_cuda_fwd_load_kv(const fmsa_cuda_fwd_params &p, unsigned base, const unsigned short *g,
                                    long long sb, long long ss, int n0, int sk, int b, int dim) {
    if (UL && n0 + BN <= sk) fmsa_cuda_fwd_load_tile_u<D, BN, T>(p, base, g, ss, n0, dim);
    else fmsa_cuda_fwd_load_tile<D, BN, T, FULL>(p, base, g, sb, ss, n0, 0, sk, b, dim);
}

/*
 * SYNC, how a block's warps meet the K/V stages (each tile is two cp.async
 * groups, K then V), its low two bits (FMSA_CUDA_FWD_SYNC_*):  0  wait for K,
 * barrier, S and softmax; wait for V, barrier, P V (FlashAttention-2's order
 * over STAGES stages);  1  wait for K and V, one barrier per tile;  2  one K
 * and one V buffer (STAGES 1, FlashAttention-2's own d256 scheme): V of tile
 * j loads during S of tile j, K of tile j + 1 during P V of tile j, so two
 * blocks fit an SM where two stages would not.  Bit 2 (FMSA_CUDA_FWD_LOAD_U)
 * takes the unrolled loader for FAST 16-bit rows.  CS: warps per row group
 * (each owns DV / CS output columns).
 */
template <int DTY, int D, int DV, int BM, int BN, int NW, int STAGES, int QREG, int FULL,
          int SYNC, int CS>
FMSA_DEV void fmsa_cuda_fwd_block(const fmsa_cuda_fwd_params &p) {
    enum {
        F32 = DTY == FMSA_CUDA_DT_F32, EU = FMSA_CUDA_FWD_EU(DTY), D16 = D * EU, DV16 = DV * EU,
        T = NW * 32, MT = BM * CS / (16 * NW), ROWQ = FMSA_CUDA_FWD_PITCH(D16 > DV16 ? D16 : DV16) * 2,
        ROWK = FMSA_CUDA_FWD_PITCH(D16) * 2, ROWV = FMSA_CUDA_FWD_PITCH(DV16) * 2, CPR = D16 / 8,
        KS = D16 / 16, NT = BN / 8, DA = DV / CS, DT = DA / 8, CPA = DA * EU / 8,
        SCHED = SYNC & 3, UL = (SYNC & FMSA_CUDA_FWD_LOAD_U) && !FULL && !F32,
        STALE = FMSA_CUDA_FWD_STALE && UL && SCHED == 0 && (D16 != 64 || FMSA_CUDA_FWD_STALE_D64),
        STAGE_B = BN * (ROWK + ROWV), WAIT_K = SCHED == 0 ? 2 * STAGES - 3 : 2 * STAGES - 4
    };
    static_assert(BM * CS % (16 * NW) == 0 && NW % CS == 0 && BN % 16 == 0 && D % 16 == 0 &&
                      DA % 16 == 0 && (SCHED == 2 ? STAGES == 1 : STAGES >= 2), "tile");
    static_assert((BM * CPR) % T == 0 && (16 * MT * CPA) % 32 == 0,
                  "every thread copies the same number of Q and O chunks");
    static_assert(BN <= 128 && SCHED <= 2, "mask bits of a tile row fit 32 bits");
    static_assert(!UL || (T % CPR == 0 && (T / CPR) % 4 == 0 && (BN * CPR) % T == 0 &&
                          T % (DV16 / 8) == 0 && (T / (DV16 / 8)) % 4 == 0 && (BN * DV16 / 8) % T == 0),
                  "the unrolled loader's rows: a thread's swizzled chunk is fixed");
    extern __shared__ __align__(128) unsigned char fmsa_smem[];
    typedef unsigned short elem;

    const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int rg = warp / CS, cp = warp % CS; /* row group, column part */
#if FMSA_CUDA_FWD_LPT
    int mblk = (int)blockIdx.x, h = (int)blockIdx.y, bz = (int)blockIdx.z;
    if (p.window_right >= 0) fmsa_cuda_fwd_lpt(p, F32 ? 4 : 2, &mblk, &h, &bz);
#else /* the A/B's old order: each head's tiles longest first */
    const int h = (int)blockIdx.y, bz = (int)blockIdx.z;
    const int mblk = p.window_right >= 0 ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x;
#endif
    fmsa_cuda_fwd_rows w;
    long long q_row0, k_row0, qb, kb;
    if (!fmsa_cuda_fwd_seq<FULL>(p, bz, &w, &q_row0, &k_row0, &qb, &kb)) return;
    const int m0 = mblk * BM;
    if (m0 >= w.sq) return;
    const int sq = w.sq, sk = w.sk, b = w.b;

    const long long kbeg = fmsa_window_key_begin(m0, sq, sk, w.wl);
    const long long kend = fmsa_window_key_end(m0 + BM < sq ? m0 + BM : sq, sq, sk, w.wr);
    /* FULL: tiles on multiples of BN (the bit mask is read by whole bytes);
     * FAST: tiles from kbeg up, so no tile holds a key that a left window
     * hides from the whole block (such a key's V may be NaN / Inf, issue 18;
     * the top tile's keys past kend are either past the sequence, zero-filled,
     * or seen by a later block's rows).  Tile t starts at key nb + t BN (this
     * form of n0 below: top - it BN made ptxas spill 32 bytes at d128). */
    const int t_beg = FULL ? (int)(kbeg / BN) : 0;
    const int ntiles = kend <= kbeg ? 0
                       : FULL ? (int)((kend + BN - 1) / BN) - t_beg : (int)((kend - kbeg + BN - 1) / BN);
    const int t_end = t_beg + ntiles, nb = FULL ? 0 : (int)kbeg;

    const int hk = h / (p.heads_q / p.heads_kv);
    /* addresses and strides in 16-bit units (EU per element) */
    const elem *qg = (const elem *)p.q + (qb * p.q_sb + (q_row0 + m0) * p.q_ss + (long long)h * p.q_sh) * EU;
    const elem *kg = (const elem *)p.k + (kb * p.k_sb + k_row0 * p.k_ss + (long long)hk * p.k_sh) * EU;
    const elem *vg = (const elem *)p.v + (kb * p.v_sb + k_row0 * p.v_ss + (long long)hk * p.v_sh) * EU;
    /* strides and dims stay expressions of p below (copies held across the key
     * loop made the 16-bit d128 kernel spill 36 bytes) */
    const unsigned sQ = fmsa_smem_addr(fmsa_smem), sKV = sQ + BM * ROWQ;

#pragma unroll
    for (int it = 0; it < BM * CPR / T; ++it) {
        const int idx = tid + it * T, r = idx / CPR, c = idx % CPR;
        const int ok = m0 + r < sq && c * 8 < p.head_dim * EU;
        fmsa_cp_async16(sQ + fmsa_swizzle(r, c, ROWQ),
                        ok ? (const void *)(qg + r * p.q_ss * EU + c * 8) : p.q, ok ? 16 : 0);
    }
    fmsa_cp_async_commit();
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        const unsigned sK = sKV + st * STAGE_B;
        if (st < ntiles)
            fmsa_cuda_fwd_load_kv<D16, BN, T, FULL, UL>(p, sK, kg, p.k_sb * EU, p.k_ss * EU,
                                                        nb + (t_end - 1 - st) * BN, sk, b, p.head_dim * EU);
        fmsa_cp_async_commit();
        if (st < ntiles)
            fmsa_cuda_fwd_load_kv<DV16, BN, T, FULL, UL>(p, sK + BN * ROWK, vg, p.v_sb * EU, p.v_ss * EU,
                                                         nb + (t_end - 1 - st) * BN, sk, b, p.head_dim_v * EU);
        fmsa_cp_async_commit();
    }
    if (SCHED == 2) { /* the single buffers take the first tile's K and V (both free) */
        if (ntiles > 0)
            fmsa_cuda_fwd_load_kv<D16, BN, T, FULL, UL>(p, sKV, kg, p.k_sb * EU, p.k_ss * EU,
                                                        nb + (t_end - 1) * BN, sk, b, p.head_dim * EU);
        fmsa_cp_async_commit();
        if (ntiles > 0)
            fmsa_cuda_fwd_load_kv<DV16, BN, T, FULL, UL>(p, sKV + BN * ROWK, vg, p.v_sb * EU, p.v_ss * EU,
                                                         nb + (t_end - 1) * BN, sk, b, p.head_dim_v * EU);
        fmsa_cp_async_commit();
    }
    /* the zero row after the stages (FULL's V for keys no row of a warp sees) */
    const unsigned sZ = sKV + STAGES * STAGE_B;
    if (FULL) fmsa_cuda_fwd_zero_row<ROWV, T>(fmsa_smem + BM * ROWQ + STAGES * STAGE_B);
    fmsa_cp_async_wait<SCHED == 2 ? 2 : 2 * (STAGES - 1)>(); /* Q landed */
    if (p.softmax_scale < 0.0f)
        fmsa_cuda_fwd_q_negate<BM, D16, T, ROWQ, F32 ? 0x80000000u : 0x80008000u>(fmsa_smem);
    __syncthreads();

    unsigned offA[4], offB[4], kRow, vRow;
    fmsa_cuda_fwd_lane_addr(ROWK, offA, offB, &kRow, &vRow);
    vRow = (unsigned)((lane & 15) * ROWV);
    const unsigned aRow = sQ + (unsigned)((rg * 16 * MT + (lane & 15)) * ROWQ);

    unsigned qf[QREG ? MT : 1][QREG ? KS : 1][4];
    if (QREG) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int ks = 0; ks < KS; ++ks)
                fmsa_ldmatrix_x4(qf[QREG ? mt : 0][QREG ? ks : 0],
                                 aRow + mt * 16 * ROWQ + (ks >> 2) * 128 + offA[ks & 3]);
    }

    const int row0 = m0 + rg * 16 * MT + g; /* row of s[0][*][0..1] */
    /* the lane's rows are row0 + 8 k: one row's bounds serve all (fewer live registers) */
    fmsa_cuda_fwd_row rw0;
    fmsa_cuda_fwd_row_init<FULL>(p, w, row0, h, &rw0);
    const int hi_lim = fmsa_cuda_clamp30(sk);
    float acc[MT][DT][4], m[MT][2], l[MT][2], s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) fmsa_cuda_fwd_state_init(p, h, &m[mt][hr], &l[mt][hr]);
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][dt][e] = 0.0f;
    }

    int stage = 0, lstage = STAGES - 1, again = 0, redo = 0; /* again, redo: STALE's repeat */
    for (int it = 0; it < ntiles; it += STALE && again ? 0 : 1) {
        const int n0 = nb + (t_end - 1 - it) * BN;
        if (SCHED == 2) {
            /* tile 0's V came with its K in the prologue (one load latency less
             * per block, which short sequences feel); later V load here */
            if (it == 0) fmsa_cp_async_wait<1>();
            else fmsa_cp_async_wait<0>();
            __syncthreads(); /* K of tile it visible; every warp is done with V of tile it - 1 */
            if (it > 0) {
                fmsa_cuda_fwd_load_kv<DV16, BN, T, FULL, UL>(p, sKV + BN * ROWK, vg, p.v_sb * EU, p.v_ss * EU,
                                                             n0, sk, b, p.head_dim_v * EU);
                fmsa_cp_async_commit();
            }
        } else {
            fmsa_cp_async_wait<WAIT_K>();
            __syncthreads(); /* tile it visible; every warp is done with stage lstage */
        }
        if (SCHED != 2 && !UL) {
            const int nx = it + STAGES - 1;
            const unsigned sK = sKV + lstage * STAGE_B;
            if (nx < ntiles)
                fmsa_cuda_fwd_load_kv<D16, BN, T, FULL, UL>(p, sK, kg, p.k_sb * EU, p.k_ss * EU,
                                                            nb + (t_end - 1 - nx) * BN, sk, b, p.head_dim * EU);
            fmsa_cp_async_commit();
            if (nx < ntiles)
                fmsa_cuda_fwd_load_kv<DV16, BN, T, FULL, UL>(p, sK + BN * ROWK, vg, p.v_sb * EU, p.v_ss * EU,
                                                             nb + (t_end - 1 - nx) * BN, sk, b, p.head_dim_v * EU);
            fmsa_cp_async_commit();
            lstage = lstage + 1 == STAGES ? 0 : lstage + 1;
        }
        const unsigned sK = sKV + stage * STAGE_B;
        /* only tiles across the sequence end or a window edge need the mask */
        const int edge = n0 + BN > sk || (w.wr >= 0 && n0 + BN - 1 > m0 + w.off + w.wr) ||
                         (w.wl >= 0 && n0 < m0 + BM - 1 + w.off - w.wl);
        fmsa_cuda_fwd_row rw[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                const int dr = mt * 16 + hr * 8;
                rw[mt][hr] = rw0;
                rw[mt][hr].i = rw0.i + dr;
                rw[mt][hr].lo = rw0.lo + dr;
                rw[mt][hr].hi = rw0.hi + dr < hi_lim ? rw0.hi + dr : hi_lim;
                if (FULL && rw0.mrow) rw[mt][hr].mrow = row0 + dr < sq ? rw0.mrow + dr * p.mask_ss : 0;
            }
        const int run = !STALE || !again || redo;
        if (STALE && run) {
            /* interior tiles take the stale pass; a warp that it gives back
             * sets redo, skips this P V, and the whole block repeats the tile
             * (the barrier before P V votes) with the full softmax for that
             * warp: its K and V are intact, the next loads went to the other
             * stage, and one S in the loop keeps the registers main's */
            fmsa_cuda_fwd_qk<DTY, D16, BN, MT, QREG, ROWQ, ROWK>(s, qf, aRow, sK, kRow, offA, offB);
            if (!again) {
                const int nx = it + STAGES - 1, live = nx < ntiles;
                const unsigned sL = sKV + lstage * STAGE_B;
                fmsa_cuda_fwd_load_tile_u<D16, BN, T>(p, sL, kg, p.k_ss * EU, nb + (t_end - 1 - nx) * BN,
                                                      p.head_dim * EU, live);
                fmsa_cp_async_commit();
                fmsa_cuda_fwd_load_tile_u<DV16, BN, T>(p, sL + BN * ROWK, vg, p.v_ss * EU,
                                                       nb + (t_end - 1 - nx) * BN, p.head_dim_v * EU, live);
                fmsa_cp_async_commit();
                lstage = lstage + 1 == STAGES ? 0 : lstage + 1;
            }
            /* the block's first tile takes the row maximum too: without a sink its
             * m is -inf, which the stale pass would only give back */
            if (edge || again || it == 0) {
                fmsa_cuda_fwd_softmax<DA, BN, MT, FULL, F32, 1>(p, w, rw, n0, edge, s, m, l, acc);
                redo = 0;
            } else {
                redo = !fmsa_cuda_fwd_softmax_stale<BN, MT>(w.sl2, s, m, l);
            }
        } else if (!STALE) {
            if (F32) fmsa_cuda_fwd_qk_f32<D16, BN, MT, ROWQ, ROWK>(s, aRow, sK, kRow, offA, offB);
            else fmsa_cuda_fwd_qk<DTY, D16, BN, MT, QREG, ROWQ, ROWK>(s, qf, aRow, sK, kRow, offA, offB);
            if (SCHED != 2 && UL) {
                /* the unrolled loads of tile it + STAGES - 1 (never the top tile) after S,
                 * branch-free (past the last tile they zero-fill a free stage): their
                 * address arithmetic may then fill the issue gaps of S's mma stream */
                const int nx = it + STAGES - 1, live = nx < ntiles;
                const unsigned sL = sKV + lstage * STAGE_B;
                fmsa_cuda_fwd_load_tile_u<D16, BN, T>(p, sL, kg, p.k_ss * EU, nb + (t_end - 1 - nx) * BN,
                                                      p.head_dim * EU, live);
                fmsa_cp_async_commit();
                fmsa_cuda_fwd_load_tile_u<DV16, BN, T>(p, sL + BN * ROWK, vg, p.v_ss * EU, nb + (t_end - 1 - nx) * BN,
                                                       p.head_dim_v * EU, live);
                fmsa_cp_async_commit();
                lstage = lstage + 1 == STAGES ? 0 : lstage + 1;
            }
            fmsa_cuda_fwd_softmax<DA, BN, MT, FULL, F32>(p, w, rw, n0, edge, s, m, l, acc);
        }
        if (SCHED == 0) {
            fmsa_cp_async_wait<2 * STAGES - 2>();
            if (STALE) again = __syncthreads_or(redo); /* V of tile it visible; repeat it? */
            else __syncthreads(); /* V of tile it visible */
        } else if (SCHED == 2) {
            fmsa_cp_async_wait<0>();
            __syncthreads(); /* V of tile it visible; every warp is done with K of tile it */
            if (it + 1 < ntiles)
                fmsa_cuda_fwd_load_kv<D16, BN, T, FULL, UL>(p, sKV, kg, p.k_sb * EU, p.k_ss * EU, n0 - BN, sk, b,
                                                            p.head_dim * EU);
            fmsa_cp_async_commit();
        }
        if (run && !(STALE && redo))
            fmsa_cuda_fwd_pv_any<DTY, DA, BN, MT, ROWV>(acc, s, sK + BN * ROWK, vRow, offA, cp * DA,
                                                       FULL && (edge || p.mask), sZ);
        if (!(STALE && again)) stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    fmsa_cp_async_wait<0>(); /* no copy may land in shared memory after the block exits */

    /* finalize, then O through this row group's own rows of the Q tile (only
     * its warps ever read them) so the global stores are 16-byte and
     * row-contiguous */
    elem *og = (elem *)p.o + (qb * p.o_sb + q_row0 * p.o_ss + (long long)h * p.o_sh) * EU;
    if (CS > 1) __syncthreads(); /* the other warps of the row group may still read its Q rows */
    else __syncwarp(); /* with no key tile, the warp's Q ldmatrix was the last access to these rows */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            float lsum = l[mt][hr], lse;
            lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
            lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
            const float inv = fmsa_softmax_finalize(m[mt][hr], lsum, &lse);
            const int i = row0 + mt * 16 + hr * 8;
            if (p.lse && tig == 0 && cp == 0 && i < sq)
                p.lse[qb * p.lse_sb + (long long)h * p.lse_sh + (q_row0 + i) * p.lse_ss] = lse;
            const int r = rg * 16 * MT + mt * 16 + hr * 8 + g;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                const float o0 = acc[mt][dt][2 * hr] * inv, o1 = acc[mt][dt][2 * hr + 1] * inv;
                if (F32) /* an n8 tile is two 16-byte chunks, 8 bytes per lane */
                    *(float2 *)(fmsa_smem + fmsa_swizzle(r, cp * CPA + 2 * dt + (tig >> 1), ROWQ) +
                                (tig & 1) * 8) = make_float2(o0, o1);
                else
                    *(unsigned *)(fmsa_smem + fmsa_swizzle(r, cp * CPA + dt, ROWQ) + tig * 4) =
                        fmsa_pack2<DTY == FMSA_CUDA_DT_BF16>(o0, o1);
            }
        }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < 16 * MT * CPA / 32; ++it) {
        const int idx = lane + it * 32, r = rg * 16 * MT + idx / CPA, c = cp * CPA + idx % CPA;
        if (m0 + r < sq && c * 8 < p.head_dim_v * EU)
            *(uint4 *)(og + (long long)(m0 + r) * p.o_ss * EU + c * 8) =
                *(const uint4 *)(fmsa_smem + fmsa_swizzle(r, c, ROWQ));
    }
}

#define FMSA_CUDA_FWD_DEFINE(name, dt, d, dv, variant, threads, bm, bn, stages, qreg, sync, minb, cs) \
    extern "C" __global__ void __launch_bounds__(threads, minb)                                 \
        name(const fmsa_cuda_fwd_params p) {                                                    \
        fmsa_cuda_fwd_block<dt, d, dv, bm, bn, (threads) / 32, stages, qreg, variant, sync, cs>(p); \
    }

#endif /* FMSA_CUDA_FWD_CUH */
