/*
 * Forward: one work-group per (query tile, query head, sequence).  Q stays in
 * __local; K and V tiles stream through one shared __local buffer; the score
 * tile is register-blocked in the "S" layout, P goes through __local to the
 * "O" layout that owns the output accumulator (FlashAttention-2 §3.1 loop
 * order: the work-group owns its rows, so no cross-group reduction exists).
 *
 * Four barriers per key tile: (A) K staged; (B) per-item row maxima posted;
 * every item then reduces the maxima of its own rows itself (the same inputs
 * in the same order, so all items of a row agree bit for bit), writes P and
 * keeps its share of the row sum, while V is staged; (C) P and the rescale
 * factors posted; O += P V; (D) tile done.  Each item also posts its share
 * of the row sum and the row maximum every tile, so after the loop they are
 * read without another barrier (a barrier right after the loop made PoCL 3.1
 * drop the row guard of the final stores).
 *
 * Sinks (FMSA_SINKS): the row state starts at m = t_h * log2(e), l = 1 (the
 * sink's term, which has no value row), acc = 0; the first column of
 * work-items carries that 1 in its share of l.  A row that sees no key then
 * finalizes to O = 0, lse = t_h.  Q and K tiles are D wide, V and O Dv wide
 * (one __local buffer holds K, then V, sized for the wider).
 */
#if FMSA_KERNEL_FORWARD

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fmsa_ocl_forward(
    __global const elem_t *q, long4 qv, __global const elem_t *k, long4 kv,
    __global const elem_t *v, long4 vv, __global elem_t *o, long4 ov, __global float *lse,
    long4 lv, __global const float *alibi, long4 av, __global const uchar *mask, long4 mv,
    __global const int *cuq, __global const int *cuk, long4 cv, __global const int *bt, long4 bv,
    __global const int *sused, long2 uv, long4 dims, long2 win, float4 fp,
    __global const float *sinks, long4 tv) {
    __local qtile_t Qs[BM * LD4];
    __local ktile_t KVs[BN * LDM4];
    __local float Ps[BM * PS];
    __local float pmax[BM * S_NX];
    __local float lsh[BM * S_NX]; /* per-item shares of the row sums */
    __local float rowm[BM], rowc[BM];

    const int lid = get_local_id(0);
    const long b = get_group_id(2), h = get_group_id(1);
    const long hk = h / dims.w;
    const long m0 = (long)get_group_id(0) * BM;
    const fmsa_seq s =
        fmsa_ocl_seq(b, dims, FMSA_VARLEN, FMSA_PAGED, FMSA_SEQUSED, cuq, cuk, cv, sused, uv);
    if (m0 >= s.sq) return; /* uniform: the whole work-group leaves */

    const int sy = lid / S_NX, sx = lid - (lid / S_NX) * S_NX;
    const int oy = lid / O_NX, ox = lid - (lid / O_NX) * O_NX;
    const long m_end = min(m0 + BM, s.sq);
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
    __global const uchar *mrow[S_TM];
#pragma unroll
    for (int i = 0; i < S_TM; ++i) {
#if FMSA_MASK
        mrow[i] = mask + mv.x + b * mv.y + h * mv.z + (m0 + sy + i * S_NY) * mv.w;
#else
        mrow[i] = mask;
#endif /* FMSA_MASK */
    }

    /* The state a row starts from (and ends in when it sees no key). */
    float m_init = -INFINITY, l_init = 0.0f;
#if FMSA_SINKS
    m_init = sinks[tv.x + h * tv.y] * FMSA_LOG2E;
    l_init = 1.0f;
#endif /* FMSA_SINKS */

    fmsa_load_q(Qs, D4, q, qv, &s, m0, h, lid);
    float rm[S_TM], lpart[S_TM]; /* running max of my rows (S layout), my share of l */
#pragma unroll
    for (int i = 0; i < S_TM; ++i) {
        rm[i] = m_init;
        lpart[i] = sx == 0 ? l_init : 0.0f;
    }
    float4 acc[O_TM][O_TDM];
#pragma unroll
    for (int i = 0; i < O_TM; ++i)
#pragma unroll
        for (int t = 0; t < FMSA_OTD(DV4); ++t) acc[i][t] = (float4)(0.0f);

    for (long n0 = kb; n0 < ke; n0 += BN) {
        const int full = fmsa_tile_full(m0, n0, &s, win);
        fmsa_load_kv(KVs, BN, D4, k, kv, &s, b, n0, ke, hk, bt, bv, lid);
        barrier(CLK_LOCAL_MEM_FENCE); /* (A) */

        float sc[S_TM][S_TN];
#pragma unroll
        for (int i = 0; i < S_TM; ++i)
#pragma unroll
            for (int j = 0; j < S_TN; ++j) sc[i][j] = 0.0f;
        fmsa_mm_nt(sc, Qs, KVs, sy, sx, D4);
#pragma unroll
        for (int i = 0; i < S_TM; ++i) {
            const long qi = m0 + sy + i * S_NY;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < S_TN; ++j) {
                const long kj = n0 + sx + j * S_NX;
                sc[i][j] = fmsa_score2(sc[i][j], qi, kj, &s, fp, slope, av.w, win, mrow[i], full);
                mx = fmax(mx, sc[i][j]);
            }
            pmax[(sy + i * S_NY) * S_NX + sx] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* (B) */

        fmsa_load_kv(KVs, BN, DV4, v, vv, &s, b, n0, ke, hk, bt, bv, lid);
#pragma unroll
        for (int i = 0; i < S_TM; ++i) {
            const int r = sy + i * S_NY;
            float mx = -INFINITY, rs = 0.0f;
            for (int x = 0; x < S_NX; ++x) mx = fmax(mx, pmax[r * S_NX + x]);
            const float c = fmsa_softmax_update(&rm[i], mx);
#pragma unroll
            for (int j = 0; j < S_TN; ++j) {
                const float pj = fmsa_softmax_p(sc[i][j], rm[i]);
                Ps[r * PS + sx + j * S_NX] = pj;
                rs += pj;
            }
            lpart[i] = lpart[i] * c + rs;
            lsh[r * S_NX + sx] = lpart[i];
            if (sx == 0) {
                rowc[r] = c;
                rowm[r] = rm[i];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* (C) */

#pragma unroll
        for (int i = 0; i < O_TM; ++i) {
            const float c = rowc[oy + i * O_NY];
#pragma unroll
            for (int t = 0; t < FMSA_OTD(DV4); ++t) acc[i][t] *= c;
        }
        fmsa_mm_nn(acc, Ps, KVs, oy, ox, DV4);
        barrier(CLK_LOCAL_MEM_FENCE); /* (D) */
    }

    /* Row sums: the S_NX shares of a row in a fixed order.  No key tile at
     * all (kb >= ke) leaves lsh/rowm unwritten: every row is empty (its
     * initial state). */
    float inv[O_TM], row_lse[O_TM];
#pragma unroll
    for (int i = 0; i < O_TM; ++i) {
        const int r = oy + i * O_NY;
        float l = l_init, m = m_init;
        if (kb < ke) {
            l = 0.0f;
            for (int x = 0; x < S_NX; ++x) l += lsh[r * S_NX + x];
            m = rowm[r];
        }
        inv[i] = fmsa_softmax_finalize(m, l, &row_lse[i]);
    }
#pragma unroll
    for (int i = 0; i < O_TM; ++i) {
        const long qi = m0 + oy + i * O_NY;
        if (qi >= m_end) continue;
        const long base = fmsa_ocl_q_row(ov, &s, qi, h);
#pragma unroll
        for (int t = 0; t < FMSA_OTD(DV4); ++t) {
            const int d4 = ox + t * O_NX;
            if (d4 < DV4) FMSA_STORE4(acc[i][t] * inv[i], o, base + 4 * d4);
        }
#if FMSA_LSE
        if (ox == 0) lse[fmsa_ocl_lse_row(lv, &s, qi, h)] = row_lse[i];
#endif /* FMSA_LSE */
    }
}

#endif /* FMSA_KERNEL_FORWARD */
