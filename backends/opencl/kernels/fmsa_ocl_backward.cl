/*
 * Backward, three stages (FlashAttention-2 §3.2, deterministic variant):
 *   preprocess  D_i = rowsum(dO_i * O_i) into the workspace
 *   dK/dV       one work-group per (key tile, kv head, sequence) loops over
 *               every query head of its GQA group and every query tile that
 *               can see it, accumulating dK, dV in registers: each dK/dV
 *               element has exactly one writer, so no atomics are needed
 *   dQ          one work-group per (query tile, query head, sequence)
 *               recomputes P and dS over the key tiles and writes dQ
 *               (KV1: one __local tile holds V, then K, per key tile:
 *               5 barriers instead of 2, half the K/V bytes, so twice
 *               the query rows fit)
 * The "postprocess" of an atomic-accumulator design (fp32 dQ -> dtype) is
 * folded into the dQ kernel's store.  P = exp2(s2 - lse2) is recomputed from
 * the forward's LSE; a fully masked row (lse = -inf) gives P = 0 and so zero
 * gradients.
 *
 * QDO2 (dK/dV kernel): Q and dO get a __local tile each and are staged once
 * per query tile (3 barriers); without it one tile holds Q, then dO, then Q
 * again (6 barriers, less __local memory).
 *
 * PF (both kernels, GPUs): software pipelining through registers.  The next
 * streamed tile (dK/dV: the next Q / dO stage; dQ: the next K and V tiles) is
 * read from global memory into registers right after the barrier that makes
 * the current tile visible, and written to __local only after the barrier
 * that ends its last use, so the global latency overlaps the tile products
 * instead of stalling every work-item at each barrier.  Same barriers, same
 * __local memory, same arithmetic in the same order: only the loads move.
 * PF needs D == Dv (its register stages are D wide; the host never asks).
 *
 * Dv != D: Q, K, dQ, dK are D wide, V, O, dO, dV are Dv wide; a __local tile
 * that holds both kinds in turn is sized for the wider.  The lse gradient
 * (FMSA_DLSE) enters only through the preprocess, which stores D_i - dlse_i
 * where the other kernels read D_i; sinks change nothing here (their term
 * is in the forward's lse; dsink is fmsa_ocl_aux.cl's).
 */
#if PF && HEAD_DIM != HEAD_DIM_V
#error "PF needs HEAD_DIM == HEAD_DIM_V"
#endif /* PF && HEAD_DIM != HEAD_DIM_V */

/* Work-item lid's share of a rows x D4 tile in registers: element i is
 * (row, col) = ((lid + i*WG) / D4, (lid + i*WG) % D4); rows past `rows` are
 * not touched, rows past the sequence are zero (as fmsa_load_q/_kv). */
#define PF_N(rows) (((rows) * D4 + WG - 1) / WG)
#define PF_NQ PF_N(BM)
#define PF_NK PF_N(BN)

/* Softcap chain rule: ds/d(raw*scale) = 1 - (capped/softcap)^2. */
inline float fmsa_bwd_grad_factor(float raw, float4 fp) {
#if FMSA_SOFTCAP
    return fmsa_softcap_grad(fmsa_softcap_apply(raw * fp.x, fp.z), fp.z);
#else
    return 1.0f;
#endif /* FMSA_SOFTCAP */
}


#if PF
/* Q-shaped rows (q or dout) of head h from row m0 into registers. */
inline void fmsa_fetch_q(qtile_t r[PF_NQ], __global const elem_t *src, long4 qv,
                         const fmsa_seq *s, long m0, long h, int lid) {
    const long base = fmsa_ocl_q_row(qv, s, m0, h);
#pragma unroll
    for (int i = 0; i < PF_NQ; ++i) {
        const int idx = lid + i * WG, row = idx / D4, c = idx - (idx / D4) * D4;
        qtile_t x = QZERO;
        if (row < BM && m0 + row < s->sq) x = QSTAGE(src, base + row * qv.z + 4 * c);
        r[i] = x;
    }
}

inline void fmsa_put_q(__local qtile_t *dst, const qtile_t r[PF_NQ], int lid) {
#pragma unroll
    for (int i = 0; i < PF_NQ; ++i) {
        const int idx = lid + i * WG, row = idx / D4, c = idx - (idx / D4) * D4;
        if (row < BM) dst[row * LD4 + c] = r[i];
    }
}

/* K-shaped rows (k or v) of kv head hk from key n0 into registers (the
 * backward never runs paged: validation rejects it; rows >= n_valid are zero). */
inline void fmsa_fetch_kv(ktile_t r[PF_NK], __global const elem_t *src, long4 kv,
                          const fmsa_seq *s, long n0, long n_valid, long hk, int lid) {
    const long base =
        fmsa_ocl_kv_row(kv, s, 0, 0, n0, hk, (__global const int *)0, (long4)(0));
#pragma unroll
    for (int i = 0; i < PF_NK; ++i) {
        const int idx = lid + i * WG, row = idx / D4, c = idx - (idx / D4) * D4;
        ktile_t x = KZERO;
        if (row < BN && n0 + row < n_valid) x = KSTAGE(src, base + row * kv.z + 4 * c);
        r[i] = x;
    }
}

inline void fmsa_put_kv(__local ktile_t *dst, const ktile_t r[PF_NK], int lid) {
#pragma unroll
    for (int i = 0; i < PF_NK; ++i) {
        const int idx = lid + i * WG, row = idx / D4, c = idx - (idx / D4) * D4;
        if (row < BN) dst[row * LD4 + c] = r[i];
    }
}
#endif /* PF */

#if FMSA_KERNEL_BWD_PRE
/* ws[(q_batch * Hq + h) * rows + row] = sum_d dO * O (- dlse with FMSA_DLSE:
 * dlv = (offset, batch, head, row strides) as the lse); global size (rows,
 * Hq, Bq). */
__kernel void fmsa_ocl_bwd_preprocess(__global const elem_t *o, long4 ov,
                                      __global const elem_t *dout, long4 dv, __global float *ws,
                                      long rows, long heads, __global const float *dlse,
                                      long4 dlv) {
    const long row = get_global_id(0), h = get_global_id(1), b = get_global_id(2);
    if (row >= rows) return;
    const long oo = ov.x + b * ov.y + row * ov.z + h * ov.w;
    const long od = dv.x + b * dv.y + row * dv.z + h * dv.w;
    /* The same fma chain, in the same order, as dP = dO V^T in fmsa_mm_nt:
     * where O equals V (a single visible key) dP - D is then exactly 0, as
     * it is mathematically, instead of a rounding residue. */
    float sum = 0.0f;
    for (int c = 0; c < DV4; ++c) {
        const float4 a = FMSA_LOAD4(dout, od + 4 * c), x = FMSA_LOAD4(o, oo + 4 * c);
        sum = fma(a.x, x.x, sum);
        sum = fma(a.y, x.y, sum);
        sum = fma(a.z, x.z, sum);
        sum = fma(a.w, x.w, sum);
    }
#if FMSA_DLSE
    sum -= dlse[dlv.x + b * dlv.y + h * dlv.z + row * dlv.w];
#endif /* FMSA_DLSE */
    ws[(b * heads + h) * rows + row] = sum;
}
#endif /* FMSA_KERNEL_BWD_PRE */

#if FMSA_KERNEL_BWD_DKDV
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fmsa_ocl_bwd_dkdv(
    __global const elem_t *q, long4 qv, __global const elem_t *k, long4 kv,
    __global const elem_t *v, long4 vv, __global const elem_t *dout, long4 dov,
    __global elem_t *dk, long4 dkv, __global elem_t *dvv_out, long4 dvv,
    __global const float *lse, long4 lv, __global const float *ws, long ws_rows,
    __global const float *alibi, long4 av, __global const uchar *mask, long4 mv,
    __global const int *cuq, __global const int *cuk, long4 cv, long4 dims, long2 win,
    float4 fp) {
    __local ktile_t Ks[BN * LD4];
    __local ktile_t Vs[BN * LDV4];
#if QDO2
    __local qtile_t Bs[BM * LD4]; /* Q */
    __local qtile_t dOs[BM * LDV4];
#else
    __local qtile_t Bs[BM * LDM4]; /* Q, then dO, then Q again */
#endif /* QDO2 */
    __local float Ps[BM * PS];
    __local float dSs[BM * PS];

    const int lid = get_local_id(0);
    const long b = get_group_id(2), hk = get_group_id(1);
    const long n0 = (long)get_group_id(0) * BN;
    const fmsa_seq s =
        fmsa_ocl_seq(b, dims, FMSA_VARLEN, 0, 0, cuq, cuk, cv, (__global const int *)0,
                     (long2)(0)); /* the backward never runs paged */
    if (n0 >= s.sk) return; /* uniform */
    const int sy = lid / S_NX, sx = lid - (lid / S_NX) * S_NX;
    const int oy = lid / O_NX, ox = lid - (lid / O_NX) * O_NX;
    const long n_end = min(n0 + BN, s.sk);
    const long4 bv0 = (long4)(0);

    /* Query rows that can see keys [n0, n_end): inverse of the window bounds. */
#if FMSA_WINDOW
    long qb = fmsa_window_query_begin(n0, s.sq, s.sk, win.y);
    const long qe = fmsa_window_query_end(n_end, s.sq, s.sk, win.x);
#else
    long qb = 0;
    const long qe = s.sq;
#endif /* FMSA_WINDOW */
    qb = (qb / BM) * BM; /* align so query tiles match the forward's */

    fmsa_load_kv(Ks, BN, D4, k, kv, &s, b, n0, s.sk, hk, (__global const int *)0, bv0, lid);
    fmsa_load_kv(Vs, BN, DV4, v, vv, &s, b, n0, s.sk, hk, (__global const int *)0, bv0, lid);

    float4 adk[O_TM][O_TDM], adv[O_TM][O_TDM];
#pragma unroll
    for (int i = 0; i < O_TM; ++i)
#pragma unroll
        for (int t = 0; t < O_TDM; ++t) adk[i][t] = adv[i][t] = (float4)(0.0f);

    for (long h = hk * dims.w; h < (hk + 1) * dims.w; ++h) {
        float slope = 0.0f;
#if FMSA_ALIBI
        slope = alibi[av.x + b * av.y + h * av.z];
#endif /* FMSA_ALIBI */
#if PF
        /* The first stage of this head's first query tile (Q, and dO with
         * QDO2); every later stage is fetched one stage ahead. */
        qtile_t rq[PF_NQ];
#if QDO2
        qtile_t rd[PF_NQ];
        if (qb < qe) fmsa_fetch_q(rd, dout, dov, &s, qb, h, lid);
#endif /* QDO2 */
        if (qb < qe) fmsa_fetch_q(rq, q, qv, &s, qb, h, lid);
#endif /* PF */
        for (long m0 = qb; m0 < qe; m0 += BM) {
            const int full = fmsa_tile_full(m0, n0, &s, win);
            float lse2[S_TM], dd[S_TM];
            __global const uchar *mrow[S_TM];
#pragma unroll
            for (int i = 0; i < S_TM; ++i) {
                const long qi = m0 + sy + i * S_NY;
                const long row = s.q_row0 + min(qi, s.sq - 1);
                const float l = lse[fmsa_ocl_lse_row(lv, &s, min(qi, s.sq - 1), h)];
                lse2[i] = qi < s.sq ? l * FMSA_LOG2E : -INFINITY;
                dd[i] = ws[(s.q_batch * dims.z + h) * ws_rows + row];
#if FMSA_MASK
                mrow[i] = mask + mv.x + b * mv.y + h * mv.z + qi * mv.w;
#else
                mrow[i] = mask;
#endif /* FMSA_MASK */
            }
#if PF
            fmsa_put_q(Bs, rq, lid);
#if QDO2
            fmsa_put_q(dOs, rd, lid);
#endif /* QDO2 */
#else
            fmsa_load_q(Bs, D4, q, qv, &s, m0, h, lid);
#if QDO2
            fmsa_load_q(dOs, DV4, dout, dov, &s, m0, h, lid);
#endif /* QDO2 */
#endif /* PF */
            barrier(CLK_LOCAL_MEM_FENCE);
#if PF
            /* Next stage: QDO2 the next tile's Q and dO, otherwise this
             * tile's dO. */
#if QDO2
            if (m0 + BM < qe) {
                fmsa_fetch_q(rq, q, qv, &s, m0 + BM, h, lid);
                fmsa_fetch_q(rd, dout, dov, &s, m0 + BM, h, lid);
            }
#else
            fmsa_fetch_q(rq, dout, dov, &s, m0, h, lid);
#endif /* QDO2 */
#endif /* PF */

            float sc[S_TM][S_TN], g[S_TM][S_TN];
#pragma unroll
            for (int i = 0; i < S_TM; ++i)
#pragma unroll
                for (int j = 0; j < S_TN; ++j) sc[i][j] = 0.0f;
            fmsa_mm_nt(sc, Bs, Ks, sy, sx, D4);
#pragma unroll
            for (int i = 0; i < S_TM; ++i)
#pragma unroll
                for (int j = 0; j < S_TN; ++j) {
                    const long qi = m0 + sy + i * S_NY, kj = n0 + sx + j * S_NX;
                    g[i][j] = fmsa_bwd_grad_factor(sc[i][j], fp);
                    sc[i][j] = fmsa_softmax_p_from_lse(
                        fmsa_score2(sc[i][j], qi, kj, &s, fp, slope, av.w, win, mrow[i], full), lse2[i]);
                    Ps[(sy + i * S_NY) * PS + sx + j * S_NX] = sc[i][j];
                }
#if QDO2
            float dp[S_TM][S_TN];
#pragma unroll
            for (int i = 0; i < S_TM; ++i)
#pragma unroll
                for (int j = 0; j < S_TN; ++j) dp[i][j] = 0.0f;
            fmsa_mm_nt(dp, dOs, Vs, sy, sx, DV4);
#pragma unroll
            for (int i = 0; i < S_TM; ++i)
#pragma unroll
                for (int j = 0; j < S_TN; ++j)
                    dSs[(sy + i * S_NY) * PS + sx + j * S_NX] =
                        fmsa_ds(sc[i][j], dp[i][j], dd[i], g[i][j]);
            barrier(CLK_LOCAL_MEM_FENCE);
            fmsa_mm_tn(adv, Ps, dOs, oy, ox, DV4);
            fmsa_mm_tn(adk, dSs, Bs, oy, ox, D4);
            barrier(CLK_LOCAL_MEM_FENCE);
#else
            barrier(CLK_LOCAL_MEM_FENCE);

#if PF
            fmsa_put_q(Bs, rq, lid);
            barrier(CLK_LOCAL_MEM_FENCE);
            fmsa_fetch_q(rq, q, qv, &s, m0, h, lid); /* Q again, for dK */
#else
            fmsa_load_q(Bs, DV4, dout, dov, &s, m0, h, lid);
            barrier(CLK_LOCAL_MEM_FENCE);
#endif /* PF */

            fmsa_mm_tn(adv, Ps, Bs, oy, ox, DV4);
            float dp[S_TM][S_TN];
#pragma unroll
            for (int i = 0; i < S_TM; ++i)
#pragma unroll
                for (int j = 0; j < S_TN; ++j) dp[i][j] = 0.0f;
            fmsa_mm_nt(dp, Bs, Vs, sy, sx, DV4);
#pragma unroll
            for (int i = 0; i < S_TM; ++i)
#pragma unroll
                for (int j = 0; j < S_TN; ++j)
                    dSs[(sy + i * S_NY) * PS + sx + j * S_NX] =
                        fmsa_ds(sc[i][j], dp[i][j], dd[i], g[i][j]);
            barrier(CLK_LOCAL_MEM_FENCE);

#if PF
            fmsa_put_q(Bs, rq, lid);
            barrier(CLK_LOCAL_MEM_FENCE);
            if (m0 + BM < qe) fmsa_fetch_q(rq, q, qv, &s, m0 + BM, h, lid);
#else
            fmsa_load_q(Bs, D4, q, qv, &s, m0, h, lid);
            barrier(CLK_LOCAL_MEM_FENCE);
#endif /* PF */
            fmsa_mm_tn(adk, dSs, Bs, oy, ox, D4);
            barrier(CLK_LOCAL_MEM_FENCE);
#endif /* QDO2 */
        }
    }

#pragma unroll
    for (int i = 0; i < O_TM; ++i) {
        const long kj = n0 + oy + i * O_NY;
        if (kj >= s.sk) continue;
        const long bk = fmsa_ocl_kv_row(dkv, &s, 0, b, kj, hk, (__global const int *)0, bv0);
        const long bvv = fmsa_ocl_kv_row(dvv, &s, 0, b, kj, hk, (__global const int *)0, bv0);
#pragma unroll
        for (int t = 0; t < FMSA_OTD(D4); ++t) {
            const int d4 = ox + t * O_NX;
            if (d4 < D4) FMSA_STORE4(adk[i][t] * fp.x, dk, bk + 4 * d4);
        }
#pragma unroll
        for (int t = 0; t < FMSA_OTD(DV4); ++t) {
            const int d4 = ox + t * O_NX;
            if (d4 < DV4) FMSA_STORE4(adv[i][t], dvv_out, bvv + 4 * d4);
        }
    }
}
#endif /* FMSA_KERNEL_BWD_DKDV */

#if FMSA_KERNEL_BWD_DQ
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fmsa_ocl_bwd_dq(
    __global const elem_t *q, long4 qv, __global const elem_t *k, long4 kv,
    __global const elem_t *v, long4 vv, __global const elem_t *dout, long4 dov,
    __global elem_t *dq, long4 dqv, __global const float *lse, long4 lv,
    __global const float *ws, long ws_rows, __global const float *alibi, long4 av,
    __global const uchar *mask, long4 mv, __global const int *cuq, __global const int *cuk,
    long4 cv, long4 dims, long2 win, float4 fp) {
    __local qtile_t Qs[BM * LD4];
    __local qtile_t dOs[BM * LDV4];
#if KV1
    __local ktile_t Ks[BN * LDM4]; /* V, then K */
#else
    __local ktile_t Ks[BN * LD4];
    __local ktile_t Vs[BN * LDV4];
#endif /* KV1 */
    __local float dSs[BM * PS];

    const int lid = get_local_id(0);
    const long b = get_group_id(2), h = get_group_id(1);
    const long hk = h / dims.w;
    const long m0 = (long)get_group_id(0) * BM;
    const fmsa_seq s =
        fmsa_ocl_seq(b, dims, FMSA_VARLEN, 0, 0, cuq, cuk, cv, (__global const int *)0,
                     (long2)(0)); /* the backward never runs paged */
    if (m0 >= s.sq) return; /* uniform */
    const int sy = lid / S_NX, sx = lid - (lid / S_NX) * S_NX;
    const int oy = lid / O_NX, ox = lid - (lid / O_NX) * O_NX;
    const long m_end = min(m0 + BM, s.sq);
    const long4 bv0 = (long4)(0);
#if FMSA_WINDOW
    const long kb = fmsa_window_key_begin(m0, s.sq, s.sk, win.x);
    const long ke = fmsa_window_key_end(m_end, s.sq, s.sk, win.y);
#else
    const long kb = 0, ke = s.sk;
#endif /* FMSA_WINDOW */
    float slope = 0.0f;
#if FMSA_ALIBI
    slope = alibi[av.x + b * av.y + h * av.z];
#endif /* FMSA_ALIBI */
    float lse2[S_TM], dd[S_TM];
    __global const uchar *mrow[S_TM];
#pragma unroll
    for (int i = 0; i < S_TM; ++i) {
        const long qi = m0 + sy + i * S_NY;
        const long row = s.q_row0 + min(qi, s.sq - 1);
        const float l = lse[fmsa_ocl_lse_row(lv, &s, min(qi, s.sq - 1), h)];
        lse2[i] = qi < s.sq ? l * FMSA_LOG2E : -INFINITY;
        dd[i] = ws[(s.q_batch * dims.z + h) * ws_rows + row];
#if FMSA_MASK
        mrow[i] = mask + mv.x + b * mv.y + h * mv.z + qi * mv.w;
#else
        mrow[i] = mask;
#endif /* FMSA_MASK */
    }
    fmsa_load_q(Qs, D4, q, qv, &s, m0, h, lid);
    fmsa_load_q(dOs, DV4, dout, dov, &s, m0, h, lid);

    float4 acc[O_TM][O_TDM];
#pragma unroll
    for (int i = 0; i < O_TM; ++i)
#pragma unroll
        for (int t = 0; t < O_TDM; ++t) acc[i][t] = (float4)(0.0f);

#if KV1
    /* One __local tile holds V (for dP), then K (for S and dQ += dS K). */
#define Vs Ks
#endif /* KV1 */
#if PF
    /* The next stage's K / V rows are read into registers while the current
     * one is used, and written to __local after its last barrier. */
    ktile_t rk[PF_NK];
#if KV1
    if (kb < ke) fmsa_fetch_kv(rk, v, vv, &s, kb, ke, hk, lid);
#else
    ktile_t rv[PF_NK];
    if (kb < ke) {
        fmsa_fetch_kv(rk, k, kv, &s, kb, ke, hk, lid);
        fmsa_fetch_kv(rv, v, vv, &s, kb, ke, hk, lid);
    }
#endif /* KV1 */
#endif /* PF */
    for (long n0 = kb; n0 < ke; n0 += BN) {
        const int full = fmsa_tile_full(m0, n0, &s, win);
        float sc[S_TM][S_TN], dp[S_TM][S_TN];
#pragma unroll
        for (int i = 0; i < S_TM; ++i)
#pragma unroll
            for (int j = 0; j < S_TN; ++j) sc[i][j] = dp[i][j] = 0.0f;
#if KV1
#if PF
        fmsa_put_kv(Ks, rk, lid); /* V */
        barrier(CLK_LOCAL_MEM_FENCE);
        fmsa_fetch_kv(rk, k, kv, &s, n0, ke, hk, lid);
#else
        fmsa_load_kv(Ks, BN, DV4, v, vv, &s, b, n0, ke, hk, (__global const int *)0, bv0, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
#endif /* PF */
        fmsa_mm_nt(dp, dOs, Vs, sy, sx, DV4);
        barrier(CLK_LOCAL_MEM_FENCE);
#if PF
        fmsa_put_kv(Ks, rk, lid); /* K */
        barrier(CLK_LOCAL_MEM_FENCE);
        if (n0 + BN < ke) fmsa_fetch_kv(rk, v, vv, &s, n0 + BN, ke, hk, lid);
#else
        fmsa_load_kv(Ks, BN, D4, k, kv, &s, b, n0, ke, hk, (__global const int *)0, bv0, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
#endif /* PF */
        fmsa_mm_nt(sc, Qs, Ks, sy, sx, D4);
#else /* !KV1 */
#if PF
        fmsa_put_kv(Ks, rk, lid);
        fmsa_put_kv(Vs, rv, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (n0 + BN < ke) {
            fmsa_fetch_kv(rk, k, kv, &s, n0 + BN, ke, hk, lid);
            fmsa_fetch_kv(rv, v, vv, &s, n0 + BN, ke, hk, lid);
        }
#else
        fmsa_load_kv(Ks, BN, D4, k, kv, &s, b, n0, ke, hk, (__global const int *)0, bv0, lid);
        fmsa_load_kv(Vs, BN, DV4, v, vv, &s, b, n0, ke, hk, (__global const int *)0, bv0, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
#endif /* PF */
        fmsa_mm_nt(sc, Qs, Ks, sy, sx, D4);
        fmsa_mm_nt(dp, dOs, Vs, sy, sx, DV4);
#endif /* KV1 */
#pragma unroll
        for (int i = 0; i < S_TM; ++i)
#pragma unroll
            for (int j = 0; j < S_TN; ++j) {
                const long qi = m0 + sy + i * S_NY, kj = n0 + sx + j * S_NX;
                const float g = fmsa_bwd_grad_factor(sc[i][j], fp);
                const float pr = fmsa_softmax_p_from_lse(
                    fmsa_score2(sc[i][j], qi, kj, &s, fp, slope, av.w, win, mrow[i], full), lse2[i]);
                dSs[(sy + i * S_NY) * PS + sx + j * S_NX] = fmsa_ds(pr, dp[i][j], dd[i], g);
            }
        barrier(CLK_LOCAL_MEM_FENCE);
        fmsa_mm_nn(acc, dSs, Ks, oy, ox, D4);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#if KV1
#undef Vs
#endif /* KV1 */

#pragma unroll
    for (int i = 0; i < O_TM; ++i) {
        const long qi = m0 + oy + i * O_NY;
        if (qi >= s.sq) continue;
        const long base = fmsa_ocl_q_row(dqv, &s, qi, h);
#pragma unroll
        for (int t = 0; t < FMSA_OTD(D4); ++t) {
            const int d4 = ox + t * O_NX;
            if (d4 < D4) FMSA_STORE4(acc[i][t] * fp.x, dq, base + 4 * d4);
        }
    }
}
#endif /* FMSA_KERNEL_BWD_DQ */
