/*
 * Forward: one work-group per (query tile, query head, sequence).  Q stays in
 * __local; K and V tiles stream through one shared __local buffer; the score
 * tile is register-blocked in the "S" layout, P goes through __local to the
 * "O" layout that owns the output accumulator (FlashAttention-2 §3.1 loop
 * order: the work-group owns its rows, so no cross-group reduction exists).
 */
#if FMSA_KERNEL_FORWARD

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fmsa_ocl_forward(
    __global const elem_t *q, long4 qv, __global const elem_t *k, long4 kv,
    __global const elem_t *v, long4 vv, __global elem_t *o, long4 ov, __global float *lse,
    long4 lv, __global const float *alibi, long4 av, __global const uchar *mask, long4 mv,
    __global const int *cuq, __global const int *cuk, long4 cv, __global const int *bt, long4 bv,
    __global const int *sused, long2 uv, long4 dims, long2 win, float4 fp) {
    __local float4 Qs[BM * LD4];
    __local float4 KVs[BN * LD4];
    __local float Ps[BM * PS];
    __local float pmax[BM * S_NX];
    __local float rowm[BM], rowc[BM];

    const int lid = get_local_id(0);
    const long b = get_group_id(2), h = get_group_id(1);
    const long hk = h / dims.w;
    const long m0 = (long)get_group_id(0) * BM;
    const fmsa_seq_dev s = fmsa_seq_resolve(b, dims, cuq, cuk, cv, sused, uv);
    if (m0 >= s.sq) return; /* uniform: the whole work-group leaves */

    const int sy = lid / S_NX, sx = lid - (lid / S_NX) * S_NX;
    const int oy = lid / O_NX, ox = lid - (lid / O_NX) * O_NX;
    const long m_end = min(m0 + BM, s.sq);
#if FMSA_WINDOW
    const long kb = fmsa_window_key_begin(m0, s.sq, s.sk, win.x);
    const long ke = fmsa_window_key_end(m_end, s.sq, s.sk, win.y);
#else
    const long kb = 0, ke = s.sk;
#endif
    float slope = 0.0f;
#if FMSA_ALIBI
    slope = alibi[av.x + b * av.y + h * av.z];
#endif
    __global const uchar *mrow[S_TM];
#pragma unroll
    for (int i = 0; i < S_TM; ++i) {
#if FMSA_MASK
        mrow[i] = mask + mv.x + b * mv.y + h * mv.z + (m0 + sy + i * S_NY) * mv.w;
#else
        mrow[i] = mask;
#endif
    }

    fmsa_load_q(Qs, q, qv, &s, m0, h, lid);
    for (int r = lid; r < BM; r += WG) { /* WG may be smaller than BM */
        float m, l;
        fmsa_softmax_init(&m, &l);
        rowm[r] = m;
    }
    float4 acc[O_TM][O_TD];
    float lsum[O_TM];
#pragma unroll
    for (int i = 0; i < O_TM; ++i) {
        lsum[i] = 0.0f;
#pragma unroll
        for (int t = 0; t < O_TD; ++t) acc[i][t] = (float4)(0.0f);
    }

    for (long n0 = kb; n0 < ke; n0 += BN) {
        const int full = fmsa_tile_full(m0, n0, &s, win);
        fmsa_load_kv(KVs, BN, k, kv, &s, b, n0, ke, hk, bt, bv, lid);
        barrier(CLK_LOCAL_MEM_FENCE);

        float sc[S_TM][S_TN];
#pragma unroll
        for (int i = 0; i < S_TM; ++i)
#pragma unroll
            for (int j = 0; j < S_TN; ++j) sc[i][j] = 0.0f;
        fmsa_mm_nt(sc, Qs, KVs, sy, sx);
#pragma unroll
        for (int i = 0; i < S_TM; ++i) {
            const long qi = m0 + sy + i * S_NY;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < S_TN; ++j) {
                const long kj = n0 + sx + j * S_NX;
                sc[i][j] = fmsa_score2(sc[i][j], qi, kj, &s, fp, slope, win, mrow[i], full);
                mx = fmax(mx, sc[i][j]);
            }
            pmax[(sy + i * S_NY) * S_NX + sx] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        fmsa_load_kv(KVs, BN, v, vv, &s, b, n0, ke, hk, bt, bv, lid);
        for (int r = lid; r < BM; r += WG) {
            float mx = -INFINITY, m = rowm[r];
            for (int x = 0; x < S_NX; ++x) mx = fmax(mx, pmax[r * S_NX + x]);
            rowc[r] = fmsa_softmax_update(&m, mx);
            rowm[r] = m;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int i = 0; i < S_TM; ++i) {
            const int r = sy + i * S_NY;
            const float m = rowm[r];
#pragma unroll
            for (int j = 0; j < S_TN; ++j) Ps[r * PS + sx + j * S_NX] = fmsa_softmax_p(sc[i][j], m);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int i = 0; i < O_TM; ++i) {
            const int r = oy + i * O_NY;
            const float c = rowc[r];
            float rs = 0.0f;
            for (int x = 0; x < BN / 4; ++x) {
                float4 p4 = ((__local const float4 *)Ps)[r * PS4 + x];
                rs += (p4.x + p4.y) + (p4.z + p4.w);
            }
            lsum[i] = lsum[i] * c + rs;
#pragma unroll
            for (int t = 0; t < O_TD; ++t) acc[i][t] *= c;
        }
        fmsa_mm_nn(acc, Ps, KVs, oy, ox);
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int i = 0; i < O_TM; ++i) {
        const long r = oy + i * O_NY;
        const long qi = m0 + r;
        if (qi >= s.sq) continue;
        float row_lse;
        const float inv = fmsa_softmax_finalize(rowm[r], lsum[i], &row_lse);
        const long base = ov.x + s.q_batch * ov.y + (s.q_row0 + qi) * ov.z + h * ov.w;
#pragma unroll
        for (int t = 0; t < O_TD; ++t) {
            const int d4 = ox + t * O_NX;
            if (d4 < D4) FMSA_STORE4(acc[i][t] * inv, o, base + 4 * d4);
        }
#if FMSA_LSE
        if (ox == 0) lse[lv.x + s.q_batch * lv.y + h * lv.z + (s.q_row0 + qi) * lv.w] = row_lse;
#endif
    }
}

#endif /* FMSA_KERNEL_FORWARD */
