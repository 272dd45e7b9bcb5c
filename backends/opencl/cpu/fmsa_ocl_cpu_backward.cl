/*
 * Backward for CPU devices, the three stages of the generic kernels
 * (FlashAttention-2 §3.2, deterministic: every output element has one
 * writer, no atomics) with the CPU layout of fmsa_ocl_cpu_forward.cl:
 *   preprocess  D_i = rowsum(dO_i * O_i), one work-item per 64 rows
 *   dK/dV       one work-item per FC_L keys (lanes) of one kv head: K and V
 *               transposed in private memory (K pre-scaled), loops over the
 *               GQA group's heads and the query rows that can see the keys,
 *               FC_KC rows at a time from Q / dO panels; dK, dV accumulate
 *               lane-wise
 *   dQ          one work-item per FC_L query rows (lanes), keys streamed from
 *               K / V panels as in the forward, recomputing P and dS
 * The panels (fmsa_ocl_cpu_pack) cover a chunk of (sequence, kv head)
 * slots at a time; the host runs pack, dK/dV and dQ per chunk.
 * P = exp2(s2 - lse2) from the forward's LSE (lse2 = -inf: a fully masked
 * row, P = 0).  dP chains its fmas over d in order, as the preprocess does
 * for D, so dP - D is exactly 0 where O equals V.  With dlse (FC_DLSE) the
 * preprocess stores D_i - dlse_i, which every later use of D_i reads (and
 * fmsa_ocl_aux.cl's dsink).  Q, K, dQ, dK rows are D wide, V, dO, dV Dv wide
 * (cfg.w); each panel slot holds the D-wide panel, then the Dv-wide one.
 */

/* Workspace row of query row i: ws[(q_batch * Hq + h) * ws_rows + row]. */
inline long fc_ws_index(const fmsa_seq *s, long4 dims, long h, long ws_rows, long i) {
    return (s->q_batch * dims.z + h) * ws_rows + s->q_row0 + i;
}

/* The softmax statistics of query rows i0 .. i0 + n - 1 (rows from `valid` on
 * get lse2 = -inf, dd = 0): lse2 = lse * log2 e, and dd = rowsum(dO * O) from
 * the preprocess.  Returns 1 when any row has a finite lse2. */
inline int fc_row_stats(__private float *lse2, __private float *dd, int n, int valid, long i0,
                        const fmsa_seq *s, long h, __global const float *lse, long4 lv,
                        __global const float *ws, long4 dims, long ws_rows) {
    int any = 0;
    for (int r = 0; r < n; ++r) {
        lse2[r] = -INFINITY;
        dd[r] = 0.0f;
        if (r < valid) {
            const long i = i0 + r;
            lse2[r] = lse[fmsa_ocl_lse_row(lv, s, i, h)] * FMSA_LOG2E;
            dd[r] = ws[fc_ws_index(s, dims, h, ws_rows, i)];
        }
        if (lse2[r] != -INFINITY) any = 1;
    }
    return any;
}

/* ws[(b * heads + h) * rows + row] = sum_d dO * O (- dlse[dlv.x + b dlv.y +
 * h dlv.z + row dlv.w] with FC_DLSE); global size (ceil(rows / 64), Hq, Bq). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fmsa_ocl_cpu_bwd_preprocess(
    __global const uchar *o, long4 ov, __global const uchar *dout, long4 dv, __global float *ws,
    long rows, long heads, int4 cfg, __global const float *dlse, long4 dlv) {
    const int dtype = cfg.x, Dv = cfg.w, flags = cfg.z;
    const long h = get_group_id(1), b = get_group_id(2);
    float a[FC_DMAX], x[FC_DMAX];
    const long row0 = (long)get_group_id(0) * 64, row_end = min(rows, row0 + 64);
    for (long row = row0; row < row_end; ++row) {
        fc_row_load(a, dout, dv.x + b * dv.y + row * dv.z + h * dv.w, dtype, Dv, 1.0f);
        fc_row_load(x, o, ov.x + b * ov.y + row * ov.z + h * ov.w, dtype, Dv, 1.0f);
        float sum = 0.0f;
        for (int d = 0; d < Dv; ++d) sum = fma(a[d], x[d], sum);
        if (flags & FC_DLSE) sum -= dlse[dlv.x + b * dlv.y + h * dlv.z + row * dlv.w];
        ws[(b * heads + h) * rows + row] = sum;
    }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fmsa_ocl_cpu_bwd_dkdv(
    __global uchar *dk, long4 dkv, __global uchar *dvo, long4 dvv, __global const float *lse,
    long4 lv, __global const float *ws, long ws_rows, __global const float *alibi, long4 av,
    __global const uchar *mask, long4 mv, __global const int *cuq, __global const int *cuk,
    long4 cv, long4 pk, long4 pk2, long4 dims, long2 win, float4 fp, int4 cfg) {
    /* pk = (first kv slot, Q/dO panel rows, Hkv, Q/dO panel float offset in ws),
     * pk2 = (K/V panel float offset, K/V panel rows, -, -): this work-item's
     * keys are read from the K/V panels too (contiguous, unlike the tensors) */
    const int dtype = cfg.x, D = cfg.y, flags = cfg.z & ~(FC_PAGED | FC_SEQUSED), Dv = cfg.w;
    const long group = dims.w, local_slot = get_group_id(1), slot = pk.x + local_slot;
    const long b = slot / pk.z, hk = slot - (slot / pk.z) * pk.z;
    const long j0 = (long)get_group_id(0) * FC_L;
    const fmsa_seq s =
        FC_SEQ(b, dims, flags, cuq, cuk, cv, (__global const int *)0, (long2)(0));
    if (j0 >= s.sk) return;
    const int nkeys = (int)min((long)FC_L, s.sk - j0);
    const long j_last = j0 + nkeys - 1;
    const float kmul = (flags & FC_SOFTCAP) ? fp.x : fp.y;

    /* Query rows that can see keys [j0, j_last]: inverse of the window bounds. */
    long qb = 0, qe = s.sq;
    if (flags & FC_WINDOW) {
        qb = fmsa_window_query_begin(j0, s.sq, s.sk, win.y);
        qe = fmsa_window_query_end(j_last + 1, s.sq, s.sk, win.x);
    }

    float8 kT8[FC_DMAX * FC_RB], vT8[FC_DMAX * FC_RB];
    float8 dkT8[FC_DMAX * FC_RB], dvT8[FC_DMAX * FC_RB];
    __private float *kT = (__private float *)kT8, *vT = (__private float *)vT8;
    __private float *dkT = (__private float *)dkT8, *dvT = (__private float *)dvT8;
    float row[FC_DMAX], pr[FC_KC * FC_L], dsr[FC_KC * FC_L];
    float lse2[FC_KC], dd[FC_KC];

    {
        __global const float *kpan = ws + pk2.x + local_slot * pk2.y * (D + Dv);
        fc_panel_transpose(kT, kpan, j0, nkeys, D, kmul);
        fc_panel_transpose(vT, kpan + pk2.y * D, j0, nkeys, Dv, 1.0f);
    }
    for (int x = 0; x < D * FC_RB; ++x) dkT8[x] = (float8)(0.0f);
    for (int x = 0; x < Dv * FC_RB; ++x) dvT8[x] = (float8)(0.0f);

    for (long g = 0; g < group; ++g) {
        const long h = hk * group + g;
        const float slope = (flags & FC_ALIBI) ? alibi[av.x + b * av.y + h * av.z] : 0.0f;
        __global const float *qp = ws + pk.w + (local_slot * group + g) * pk.y * (D + Dv);
        __global const float *dop = qp + pk.y * D;
        for (long m0 = qb; m0 < qe; m0 += FC_KC) {
            const int nq = (int)min((long)FC_KC, qe - m0);
            if (!fc_row_stats(lse2, dd, FC_KC, nq, m0, &s, h, lse, lv, ws, dims, ws_rows))
                continue;

            /* The step's rows against every key lane: full when no mask
             * applies to any (row, key) pair. */
            int full = nkeys == FC_L && !(flags & FC_MASK);
            if (full && (flags & FC_WINDOW))
                full = fmsa_window_tile_inside(m0, m0 + FC_KC, j0, j_last + 1, s.sq, s.sk, win.x,
                                               win.y);
            for (int r4 = 0; r4 < nq; r4 += FC_KB) {
                float8 sa[FC_KB][FC_RB], pa[FC_KB][FC_RB];
                fc_dot_block(sa, kT8, qp + (m0 + r4) * D, D);
                fc_dot_block(pa, vT8, dop + (m0 + r4) * Dv, Dv);
#pragma unroll
                for (int j = 0; j < FC_KB; ++j) {
                    const int r = r4 + j;
                    const long i = m0 + r;
#pragma unroll
                    for (int rb = 0; rb < FC_RB; ++rb) {
                        /* rel = key - (i + sk - sq) for keys j0 + 8 rb + lane */
                        const int8 rel =
                            (int8)(fc_clamp_int(j0 + 8 * rb - (i + s.sk - s.sq))) + FC_LANE0;
                        float8 x = fc_score2(sa[j][rb], rel, flags, fp.z, slope, (int)av.w);
                        if (!full) {
                            int8 vis = rel <= (int8)(fc_clamp_int(j_last - (i + s.sk - s.sq)));
                            if (flags & FC_WINDOW) vis &= fc_window_vis(rel, win);
                            if (flags & FC_MASK) {
                                __global const uchar *mrow =
                                    mask + mv.x + b * mv.y + h * mv.z + min(i, s.sq - 1) * mv.w;
                                int bits[8];
                                for (int t = 0; t < 8; ++t) {
                                    const long jj = min(j0 + 8 * rb + t, j_last);
                                    bits[t] = FMSA_MASK_BIT(mrow, jj) ? -1 : 0;
                                }
                                vis &= vload8(0, bits);
                            }
                            x = select((float8)(-INFINITY), x, vis);
                        }
                        float8 p = exp2(x - lse2[r]);
                        if (lse2[r] == -INFINITY) p = (float8)(0.0f);
                        /* exactly 0 where p is: a hidden key's dP and softcap
                         * factor come from its V and K, which may be NaN */
                        const float8 ds = select(
                            p * (pa[j][rb] - dd[r]) * fc_softcap_grad(sa[j][rb], flags, fp.z),
                            (float8)(0.0f), p == (float8)(0.0f));
                        vstore8(p, r * FC_RB + rb, pr);
                        vstore8(ds, r * FC_RB + rb, dsr);
                    }
                }
            }
            for (int r4 = 0; r4 < nq; r4 += FC_KB) {
                float8 w[FC_KB][FC_RB];
#pragma unroll
                for (int j = 0; j < FC_KB; ++j)
#pragma unroll
                    for (int rb = 0; rb < FC_RB; ++rb) w[j][rb] = vload8((r4 + j) * FC_RB + rb, pr);
                fc_axpy_block(dvT8, w, dop + (m0 + r4) * Dv, Dv, 0, w[0], 0);
#pragma unroll
                for (int j = 0; j < FC_KB; ++j)
#pragma unroll
                    for (int rb = 0; rb < FC_RB; ++rb)
                        w[j][rb] = vload8((r4 + j) * FC_RB + rb, dsr);
                fc_axpy_block(dkT8, w, qp + (m0 + r4) * D, D, 0, w[0], 0);
            }
        }
    }

    /* dK / dV are never paged (the backward has no block table). */
    __global const int *bt0 = (__global const int *)0;
    const long4 bv0 = (long4)(0);
    for (int r = 0; r < nkeys; ++r) {
        const long j = j0 + r;
        for (int d = 0; d < D; ++d) row[d] = dkT[d * FC_L + r];
        fc_row_store(row, dk, fmsa_ocl_kv_row(dkv, &s, 0, b, j, hk, bt0, bv0), dtype, D, fp.x);
        for (int d = 0; d < Dv; ++d) row[d] = dvT[d * FC_L + r];
        fc_row_store(row, dvo, fmsa_ocl_kv_row(dvv, &s, 0, b, j, hk, bt0, bv0), dtype, Dv,
                     1.0f);
    }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fmsa_ocl_cpu_bwd_dq(
    __global uchar *dq, long4 dqv, __global const float *lse, long4 lv,
    __global const float *ws, long ws_rows, __global const float *alibi, long4 av,
    __global const uchar *mask, long4 mv, __global const int *cuq, __global const int *cuk,
    long4 cv, long4 pk, long4 pk2, long4 dims, long2 win, float4 fp, int4 cfg) {
    /* pk = (first kv slot, K/V panel rows, Hkv, K/V panel float offset in ws),
     * pk2 = (Q/dO panel float offset, Q/dO panel rows, -, -): this work-item's
     * rows are read from the Q/dO panels */
    const int dtype = cfg.x, D = cfg.y, flags = cfg.z & ~(FC_PAGED | FC_SEQUSED), Dv = cfg.w;
    const long group = dims.w, local_slot = get_group_id(1) / group;
    const long slot = pk.x + local_slot;
    const long b = slot / pk.z, hk = slot - (slot / pk.z) * pk.z;
    const long h = hk * group + (long)get_group_id(1) - local_slot * group;
    const long i0 = (long)get_group_id(0) * FC_L;
    const fmsa_seq s =
        FC_SEQ(b, dims, flags, cuq, cuk, cv, (__global const int *)0, (long2)(0));
    if (i0 >= s.sq) return;
    const int nrows = (int)min((long)FC_L, s.sq - i0);
    const long i_last = i0 + nrows - 1;
    const long diag0 = fmsa_seq_diag(i0, s.sq, s.sk);
    const float qmul = (flags & FC_SOFTCAP) ? fp.x : fp.y;
    const float slope = (flags & FC_ALIBI) ? alibi[av.x + b * av.y + h * av.z] : 0.0f;
    __global const float *kp = ws + pk.w + local_slot * pk.y * (D + Dv);
    __global const float *vp = kp + pk.y * D;
    long kb = 0, ke = s.sk;
    if (flags & FC_WINDOW) {
        kb = fmsa_window_key_begin(i0, s.sq, s.sk, win.x);
        ke = fmsa_window_key_end(i_last + 1, s.sq, s.sk, win.y);
    }

    float8 qT8[FC_DMAX * FC_RB], dOT8[FC_DMAX * FC_RB];
    float8 dqT8[FC_DMAX * FC_RB];
    __private float *qT = (__private float *)qT8, *dOT = (__private float *)dOT8;
    __private float *dqT = (__private float *)dqT8;
    float row[FC_DMAX], dsr[FC_KC * FC_L];
    float lse2f[FC_L], ddf[FC_L];

    fc_row_stats(lse2f, ddf, FC_L, nrows, i0, &s, h, lse, lv, ws, dims, ws_rows);
    {
        __global const float *qpan =
            ws + pk2.x + (local_slot * group + h - hk * group) * pk2.y * (D + Dv);
        fc_panel_transpose(qT, qpan, i0, nrows, D, qmul);
        fc_panel_transpose(dOT, qpan + pk2.y * D, i0, nrows, Dv, 1.0f);
    }
    for (int x = 0; x < D * FC_RB; ++x) dqT8[x] = (float8)(0.0f);
    float8 lse2[FC_RB], ddv[FC_RB];
    int8 dead[FC_RB];
    for (int rb = 0; rb < FC_RB; ++rb) {
        lse2[rb] = vload8(rb, lse2f);
        ddv[rb] = vload8(rb, ddf);
        dead[rb] = lse2[rb] == (float8)(-INFINITY);
    }

    for (long n0 = kb; n0 < ke; n0 += FC_KC) {
        const int nk = (int)min((long)FC_KC, ke - n0);
        int full = nk == FC_KC && !(flags & FC_MASK);
        if (full && (flags & FC_WINDOW))
            full = fmsa_window_tile_inside(i0, i_last + 1, n0, n0 + FC_KC, s.sq, s.sk, win.x,
                                           win.y);
        for (int k4 = 0; k4 < nk; k4 += FC_KB) {
            float8 sa[FC_KB][FC_RB], pa[FC_KB][FC_RB];
            fc_dot_block(sa, qT8, kp + (n0 + k4) * D, D);
            fc_dot_block(pa, dOT8, vp + (n0 + k4) * Dv, Dv);
#pragma unroll
            for (int jj = 0; jj < FC_KB; ++jj) {
                const long j = n0 + k4 + jj;
#pragma unroll
                for (int rb = 0; rb < FC_RB; ++rb) {
                    const int8 rel = (int8)(fc_clamp_int(j - diag0 - 8 * rb)) - FC_LANE0;
                    float8 x = fc_score2(sa[jj][rb], rel, flags, fp.z, slope, (int)av.w);
                    if (!full) {
                        const int8 vis = fc_rows_vis(rel, j, ke, flags, win, mask, mv, b, h,
                                                     i0 + 8 * rb, i_last);
                        x = select((float8)(-INFINITY), x, vis);
                    }
                    float8 p = select(exp2(x - lse2[rb]), (float8)(0.0f), dead[rb]);
                    const float8 ds = select(
                        p * (pa[jj][rb] - ddv[rb]) * fc_softcap_grad(sa[jj][rb], flags, fp.z),
                        (float8)(0.0f), p == (float8)(0.0f)); /* as in the dK/dV kernel */
                    vstore8(ds, (k4 + jj) * FC_RB + rb, dsr);
                }
            }
        }
        for (int k4 = 0; k4 < nk; k4 += FC_KB) {
            float8 w[FC_KB][FC_RB];
#pragma unroll
            for (int j = 0; j < FC_KB; ++j)
#pragma unroll
                for (int rb = 0; rb < FC_RB; ++rb) w[j][rb] = vload8((k4 + j) * FC_RB + rb, dsr);
            fc_axpy_block(dqT8, w, kp + (n0 + k4) * D, D, 0, w[0], flags & (FC_WINDOW | FC_MASK));
        }
    }

    for (int r = 0; r < nrows; ++r) {
        for (int d = 0; d < D; ++d) row[d] = dqT[d * FC_L + r];
        fc_row_store(row, dq, fmsa_ocl_q_row(dqv, &s, i0 + r, h), dtype, D, fp.x);
    }
}
