/*
 * Forward for CPU devices: one work-item (= one work-group) per FC_L query
 * rows of one head of one sequence.  Q is held transposed in private memory
 * (lane r of qT[d] is row r's element d, pre-multiplied by scale * log2(e),
 * or by the scale alone with softcap), the output accumulator likewise; K
 * and V come from the fp32 panels fmsa_ocl_cpu_pack wrote for this chunk of
 * (sequence, kv head) slots.  Per FC_KC-key step: S = qT . k_j as float8
 * fmas with k_j[d] broadcast (4 keys x 2 row vectors in registers), score
 * transforms and masks on the boundary steps only, the lane-wise online
 * softmax (FlashAttention-2 §3.1 loop order), then acc += p_j * v_j the
 * same way.
 *
 * Global size (ceil(sq / FC_L), slots of the chunk * group, batch-chunk 1);
 * pk = (first kv slot, panel rows, Hkv, panel float offset in ws);
 * cfg = (dtype, head_dim, flags, head_dim_v); fp = (scale, scale * log2(e),
 * softcap); tv = (sinks offset, head stride, -, -).
 *
 * Sinks (FC_SINKS): every row's state starts at m = t_h * log2(e), l = 1 (the
 * sink's value-less term), so a row that sees no key ends as O = 0,
 * lse = t_h.
 */

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fmsa_ocl_cpu_forward(
    __global const uchar *q, long4 qv, __global uchar *o, long4 ov, __global float *lse,
    long4 lv, __global const float *alibi, long4 av, __global const uchar *mask, long4 mv,
    __global const int *cuq, __global const int *cuk, long4 cv, __global const int *sused,
    long2 uv, __global const float *ws, long4 pk, long4 dims, long2 win, float4 fp, int4 cfg,
    __global const float *sinks, long4 tv) {
    const int dtype = cfg.x, D = cfg.y, flags = cfg.z, Dv = cfg.w;
    const long group = dims.w, local_slot = get_group_id(1) / group;
    const long slot = pk.x + local_slot;
    const long b = slot / pk.z, hk = slot - (slot / pk.z) * pk.z;
    const long h = hk * group + (long)get_group_id(1) - local_slot * group;
    const long i0 = (long)get_group_id(0) * FC_L;
    const fmsa_seq s = FC_SEQ(b, dims, flags, cuq, cuk, cv, sused, uv);
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

    float8 qT8[FC_DMAX * FC_RB], acc8[FC_DMAX * FC_RB];
    __private float *qT = (__private float *)qT8, *acc = (__private float *)acc8;
    float row[FC_DMAX];
    float sc[FC_KC * FC_L];

    for (int r = 0; r < FC_L; ++r) {
        if (r < nrows) fc_row_load(row, q, fmsa_ocl_q_row(qv, &s, i0 + r, h), dtype, D, qmul);
        for (int d = 0; d < D; ++d) qT[d * FC_L + r] = r < nrows ? row[d] : 0.0f;
    }
    for (int x = 0; x < Dv * FC_RB; ++x) acc8[x] = (float8)(0.0f);
    const float m_init = (flags & FC_SINKS) ? sinks[tv.x + h * tv.y] * FMSA_LOG2E : -INFINITY;
    const float l_init = (flags & FC_SINKS) ? 1.0f : 0.0f;
    float8 m[FC_RB], l[FC_RB];
    for (int rb = 0; rb < FC_RB; ++rb) {
        m[rb] = (float8)(m_init);
        l[rb] = (float8)(l_init);
    }

    for (long n0 = kb; n0 < ke; n0 += FC_KC) {
        const int nk = (int)min((long)FC_KC, ke - n0);
        /* S = Q K^T for the step, FC_KB keys x FC_RB row vectors at a time
         * (a last partial step stops at the block holding its last key). */
        for (int k4 = 0; k4 < nk; k4 += FC_KB) {
            float8 a[FC_KB][FC_RB];
            fc_dot_block(a, qT8, kp + (n0 + k4) * D, D);
#pragma unroll
            for (int j = 0; j < FC_KB; ++j)
#pragma unroll
                for (int rb = 0; rb < FC_RB; ++rb) vstore8(a[j][rb], (k4 + j) * FC_RB + rb, sc);
        }

        /* Transforms and masks: a step every row sees whole needs no test. */
        int full = nk == FC_KC && !(flags & FC_MASK);
        if (full && (flags & FC_WINDOW))
            full = fmsa_window_tile_inside(i0, i_last + 1, n0, n0 + FC_KC, s.sq, s.sk, win.x,
                                           win.y);
        float8 tmax[FC_RB];
        for (int rb = 0; rb < FC_RB; ++rb) tmax[rb] = (float8)(-INFINITY);
        if (full && !(flags & (FC_SOFTCAP | FC_ALIBI))) {
            for (int kc = 0; kc < FC_KC; ++kc)
                for (int rb = 0; rb < FC_RB; ++rb)
                    tmax[rb] = fmax(tmax[rb], vload8(kc * FC_RB + rb, sc));
        } else {
            for (int kc = 0; kc < FC_KC; ++kc) {
                const long j = n0 + kc;
                if (kc >= nk) { /* past the last key: no score was computed */
                    for (int rb = 0; rb < FC_RB; ++rb) vstore8((float8)(-INFINITY), kc * FC_RB + rb, sc);
                    continue;
                }
                for (int rb = 0; rb < FC_RB; ++rb) {
                    /* rel = j - (row + sk - sq) for rows i0 + 8 rb + lane */
                    const int8 rel = (int8)(fc_clamp_int(j - diag0 - 8 * rb)) - FC_LANE0;
                    float8 x = fc_score2(vload8(kc * FC_RB + rb, sc), rel, flags, fp.z, slope, (int)av.w);
                    if (!full) {
                        const int8 vis = fc_rows_vis(rel, j, ke, flags, win, mask, mv, b, h,
                                                     i0 + 8 * rb, i_last);
                        x = select((float8)(-INFINITY), x, vis);
                    }
                    vstore8(x, kc * FC_RB + rb, sc);
                    tmax[rb] = fmax(tmax[rb], x);
                }
            }
        }

        /* Online softmax (lane-wise fmsa_softmax_update / _p). */
        float8 c[FC_RB], ms[FC_RB], rs[FC_RB];
        for (int rb = 0; rb < FC_RB; ++rb) {
            c[rb] = fc_softmax_update(&m[rb], tmax[rb], &ms[rb]);
            rs[rb] = (float8)(0.0f);
        }
        for (int kc = 0; kc < FC_KC; ++kc)
            for (int rb = 0; rb < FC_RB; ++rb) {
                const float8 p = exp2(vload8(kc * FC_RB + rb, sc) - ms[rb]);
                vstore8(p, kc * FC_RB + rb, sc);
                rs[rb] += p;
            }
        for (int rb = 0; rb < FC_RB; ++rb) l[rb] = l[rb] * c[rb] + rs[rb];

        /* acc = c * acc + P V; the rescale rides on the first block's loads. */
        for (int k4 = 0; k4 < nk; k4 += FC_KB) {
            float8 p[FC_KB][FC_RB];
#pragma unroll
            for (int j = 0; j < FC_KB; ++j)
#pragma unroll
                for (int rb = 0; rb < FC_RB; ++rb) p[j][rb] = vload8((k4 + j) * FC_RB + rb, sc);
            fc_axpy_block(acc8, p, vp + (n0 + k4) * Dv, Dv, k4 == 0, c,
                          flags & (FC_WINDOW | FC_MASK));
        }
    }

    /* Finalize and store O (and the LSE) row by row. */
    float inv[FC_L], row_lse[FC_L];
    for (int rb = 0; rb < FC_RB; ++rb) {
        float8 lz;
        vstore8(fc_softmax_finalize(m[rb], l[rb], &lz), rb, inv);
        vstore8(lz, rb, row_lse);
    }
    for (int r = 0; r < nrows; ++r) {
        for (int d = 0; d < Dv; ++d) row[d] = acc[d * FC_L + r];
        fc_row_store(row, o, fmsa_ocl_q_row(ov, &s, i0 + r, h), dtype, Dv, inv[r]);
        if (flags & FC_LSE)
            lse[fmsa_ocl_lse_row(lv, &s, i0 + r, h)] = row_lse[r];
    }
}
