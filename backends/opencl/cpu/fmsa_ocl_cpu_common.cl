/*
 * Shared pieces of the CPU-device kernels (PoCL and other OpenCL runtimes
 * whose CL_DEVICE_TYPE is CPU).  A CPU runtime runs a work-group as loops
 * over its work-items in one thread; barriers split the kernel into regions
 * and every private value that lives across one goes through per-item
 * memory, and __local is ordinary memory.  So these kernels use none of
 * them: one work-item owns FC_L rows (forward, dQ: query rows; dK/dV:
 * keys) held as FC_RB float8 vectors, one lane per row, and streams the
 * other side one row at a time, broadcasting its elements.  Every softmax
 * quantity is then lane-wise (no horizontal reductions), each product is a
 * float8 fma, and the work-group is that one work-item.
 *
 * Only the tile shape is specialised by -D, and it is one per device: dtype,
 * head dim and the feature switches are kernel arguments (branches on them
 * are uniform and outside the inner loops), so one program serves every
 * problem and a runtime compiles it once (the generic kernels build one
 * program per dtype x head dim x tile x feature set, minutes of PoCL compile
 * time for a test grid).
 *
 * Private rows and tiles are sized FC_DMAX, the host's -D: 256
 * (FMSA_HEAD_DIM_SMALL_MAX) when D and Dv are at most that, else the API's
 * largest head dim, 576 (FMSA_HEAD_DIM_MAX; fmsa_limits.h); a work-item
 * touches only the first D (or Dv) rows of each.  Q, K (and dQ, dK) rows are
 * D wide, V, O, dO (and dV) Dv wide.  The transposed tiles are float8
 * arrays (32-byte aligned: whole-vector loads and stores); the row <-> lane
 * transposes at the start and end go through a float view of them (clang
 * gives vector types char aliasing).
 */

/* The tile shape comes from the host as -D values (fmsa_ocl_cpu_tiles in
 * ocl_internal.h, checked there):
 *   FC_RB  float8 vectors per work-item, so FC_L = 8 * FC_RB rows (lanes)
 *   FC_KC  streamed rows per step (keys, or query rows in dK/dV), a multiple of FC_KB
 *   FC_KB  streamed rows per register block */
#if !defined(FC_RB) || !defined(FC_KC) || !defined(FC_KB) || !defined(FC_DMAX)
#error "the host passes the tile shape: -DFC_RB, -DFC_KC, -DFC_KB and -DFC_DMAX"
#endif /* tile shape */
#define FC_L (8 * FC_RB)

/* cfg.z flag bits (the feature switches of the generic kernels). */
#define FC_WINDOW 1
#define FC_SOFTCAP 2
#define FC_ALIBI 4
#define FC_MASK 8
#define FC_VARLEN 16
#define FC_PAGED 32
#define FC_SEQUSED 64
#define FC_LSE 128
#define FC_QSIDE 256 /* fmsa_ocl_cpu_pack: the query side (Q, dO) */
#define FC_SINKS 512 /* forward: desc.sinks */
#define FC_DLSE 1024 /* backward preprocess: dlse */

/* dtype codes (fmsa_dtype): 1 f32, 2 f16 (storage only), 3 bf16. */
#define FC_F32 1
#define FC_F16 2

/* Converts one row of `d` elements of a dtype buffer (element offset off)
 * to fp32 in a global panel row. */
inline void fc_row_pack(__global float *dst, __global const uchar *src, long off, int dtype,
                        int d) {
    if (dtype == FC_F32) {
        __global const float *s = (__global const float *)src + off;
        for (int c = 0; c < d / 8; ++c) vstore8(vload8(c, s), c, dst);
    } else if (dtype == FC_F16) {
        __global const half *s = (__global const half *)src + off;
        for (int c = 0; c < d / 8; ++c) vstore8(vload_half8(c, s), c, dst);
    } else {
        __global const ushort *s = (__global const ushort *)src + off;
        for (int c = 0; c < d / 8; ++c)
            vstore8(as_float8(convert_uint8(vload8(c, s)) << 16), c, dst);
    }
}

/* Converts one row of `d` elements (d a multiple of 8) at element offset
 * off of a dtype buffer to fp32 in dst, multiplied by mul. */
inline void fc_row_load(__private float *dst, __global const uchar *src, long off, int dtype,
                        int d, float mul) {
    if (dtype == FC_F32) {
        __global const float *s = (__global const float *)src + off;
        for (int c = 0; c < d / 8; ++c) vstore8(vload8(c, s) * mul, c, dst);
    } else if (dtype == FC_F16) {
        __global const half *s = (__global const half *)src + off;
        for (int c = 0; c < d / 8; ++c) vstore8(vload_half8(c, s) * mul, c, dst);
    } else {
        __global const ushort *s = (__global const ushort *)src + off;
        for (int c = 0; c < d / 8; ++c)
            vstore8(as_float8(convert_uint8(vload8(c, s)) << 16) * mul, c, dst);
    }
}

/* fp32 -> bf16 round to nearest even; NaN stays a quiet NaN. */
inline ushort8 fc_bf16_round8(float8 x) {
    uint8 b = as_uint8(x);
    uint8 r = (b + (uint8)(0x7fffu) + ((b >> 16) & (uint8)(1u))) >> 16;
    uint8 n = (b >> 16) | (uint8)(0x40u);
    return convert_ushort8(select(r, n, as_uint8(isnan(x))));
}

/* Stores one fp32 row (times mul) as the dtype at element offset off. */
inline void fc_row_store(__private const float *row, __global uchar *dst, long off, int dtype,
                         int d, float mul) {
    if (dtype == FC_F32) {
        __global float *o = (__global float *)dst + off;
        for (int c = 0; c < d / 8; ++c) vstore8(vload8(c, row) * mul, c, o);
    } else if (dtype == FC_F16) {
        __global half *o = (__global half *)dst + off;
        for (int c = 0; c < d / 8; ++c) vstore_half8_rte(vload8(c, row) * mul, c, o);
    } else {
        __global ushort *o = (__global ushort *)dst + off;
        for (int c = 0; c < d / 8; ++c) vstore8(fc_bf16_round8(vload8(c, row) * mul), c, o);
    }
}

/* Sequence b and row offsets through fmsa_ocl_seq.cl, with this family's
 * run-time switches. */
#define FC_SEQ(b, dims, flags, cuq, cuk, cv, sused, uv)                                        \
    fmsa_ocl_seq((b), (dims), ((flags) & FC_VARLEN) != 0, ((flags) & FC_PAGED) != 0,           \
                 ((flags) & FC_SEQUSED) != 0, (cuq), (cuk), (cv), (sused), (uv))

/* Lane offsets 0..7 of one float8 (row 8 rb + lane of a work-item). */
#define FC_LANE0 ((int8)(0, 1, 2, 3, 4, 5, 6, 7))

/* Clamps a long distance into int range for lane arithmetic (positions of
 * one sequence; a clamped value is far outside any window either way). */
inline int fc_clamp_int(long x) { return (int)clamp(x, -(long)(1 << 30), (long)(1 << 30)); }

/* Base-2 score of 8 (query, key) pairs from the scaled dot product x:
 * x is raw * scale * log2(e) without softcap, raw * scale with it.  rel =
 * key - (query + sk - sq) per lane (the ALiBi distance and window test);
 * aoff is added to ALiBi's distance (fmsa_problem.alibi_offset). */
inline float8 fc_score2(float8 x, int8 rel, int flags, float softcap, float slope, int aoff) {
    float8 s2 = x;
    if (flags & FC_SOFTCAP) s2 = softcap * tanh(x / softcap) * FMSA_LOG2E;
    if (flags & FC_ALIBI) s2 += (-slope * convert_float8(abs(rel - (int8)(aoff)))) * FMSA_LOG2E;
    return s2;
}

/* Window visibility of rel (see fc_score2) as a lane mask (-1 visible):
 * fmsa_window_visible of fmsa_seq.h on 8 lanes, as distances to the diagonal. */
inline int8 fc_window_vis(int8 rel, long2 win) {
    int8 vis = (int8)(-1);
    if (win.x >= 0) vis &= rel >= (int8)(-fc_clamp_int(win.x));
    if (win.y >= 0) vis &= rel <= (int8)(fc_clamp_int(win.y));
    return vis;
}

/* Visibility (-1 visible) of key j for the 8 query rows row0 + lane (rows past
 * i_last read row i_last's mask): inside the key range (j < ke), the window
 * (rel as in fc_score2) and the bit mask. */
inline int8 fc_rows_vis(int8 rel, long j, long ke, int flags, long2 win,
                        __global const uchar *mask, long4 mv, long b, long h, long row0,
                        long i_last) {
    int8 vis = (int8)(j < ke ? -1 : 0);
    if (flags & FC_WINDOW) vis &= fc_window_vis(rel, win);
    if (flags & FC_MASK) {
        int bits[8];
        for (int t = 0; t < 8; ++t) {
            __global const uchar *mrow =
                mask + mv.x + b * mv.y + h * mv.z + min(row0 + t, i_last) * mv.w;
            bits[t] = j < ke && FMSA_MASK_BIT(mrow, j) ? -1 : 0;
        }
        vis &= vload8(0, bits);
    }
    return vis;
}

/* Lane-wise online softmax: the update step of fmsa_softmax.h on 8 rows.
 * Returns the rescale factor c and moves m; *ms receives the maximum the
 * probabilities are taken against (0 where the row saw nothing yet, so a
 * masked score -inf gives exp2(-inf) = 0 and never -inf - -inf). */
inline float8 fc_softmax_update(__private float8 *m, float8 tile_max, __private float8 *ms) {
    const float8 m_new = fmax(*m, tile_max);
    const float8 safe = select(m_new, (float8)(0.0f), m_new == (float8)(-INFINITY));
    const float8 c = exp2(*m - safe); /* 0 for a row's first visible tile (acc, l are 0) */
    *m = m_new;
    *ms = safe;
    return c;
}

/* Lane-wise finalize: 1/l (0 for a fully masked row) and the natural-log
 * LSE (-inf for a fully masked row). */
inline float8 fc_softmax_finalize(float8 m, float8 l, __private float8 *lse) {
    const int8 empty = (l == (float8)(0.0f)) | (m == (float8)(-INFINITY));
    *lse = select((m + log2(l)) * FMSA_LN2, (float8)(-INFINITY), empty);
    return select((float8)(1.0f) / l, (float8)(0.0f), empty);
}

/* Softcap chain rule factor 1 - (capped/softcap)^2 from the scaled score. */
inline float8 fc_softcap_grad(float8 x, int flags, float softcap) {
    if (!(flags & FC_SOFTCAP)) return (float8)(1.0f);
    const float8 t = tanh(x / softcap);
    return (float8)(1.0f) - t * t;
}

/* acc[j][rb] = sum_d T[d][rb] * R_j[d] for FC_KB packed rows R_j (row
 * stride D) against a transposed private block T: one fma chain per output,
 * d in order. */
inline __attribute__((always_inline)) void fc_dot_block(float8 acc[FC_KB][FC_RB],
                                                       __private const float8 *T,
                                                       __global const float *R, int D) {
#pragma unroll
    for (int j = 0; j < FC_KB; ++j)
#pragma unroll
        for (int rb = 0; rb < FC_RB; ++rb) acc[j][rb] = (float8)(0.0f);
    for (int d = 0; d < D; ++d) {
        float8 x[FC_RB];
#pragma unroll
        for (int rb = 0; rb < FC_RB; ++rb) x[rb] = T[d * FC_RB + rb];
#pragma unroll
        for (int j = 0; j < FC_KB; ++j) {
            const float8 y = (float8)(R[j * D + d]);
#pragma unroll
            for (int rb = 0; rb < FC_RB; ++rb) acc[j][rb] = fma(x[rb], y, acc[j][rb]);
        }
    }
}

/* x + w * y, or x where w is 0 when `guard`: for O += P V and dQ += dS K
 * under a mask or window, whose hidden keys have w = 0 and may hold NaN or
 * Inf in their V / K rows (padding), which 0 * NaN would carry into the
 * output.  Selecting leaves every finite result bit for bit (the term was
 * +-0). */
#define FC_FMA(guard, w, y, x) \
    ((guard) ? select(fma((w), (y), (x)), (x), (w) == (float8)(0.0f)) : fma((w), (y), (x)))

/* T[d][rb] = c[rb] * T[d][rb] + sum_j W[j][rb] * R_j[d] over FC_KB streamed
 * rows: O = c O + P V, dV += P^T dO, dK += dS^T Q, dQ += dS K.  rescale = 0
 * skips the multiply (c is then ignored); guard as FC_FMA. */
inline __attribute__((always_inline)) void fc_axpy_block(__private float8 *T,
                                                        const float8 w[FC_KB][FC_RB],
                                                        __global const float *R, int D,
                                                        int rescale, const float8 c[FC_RB],
                                                        int guard) {
    if (rescale) {
        for (int d = 0; d < D; ++d) {
            float8 x[FC_RB];
#pragma unroll
            for (int rb = 0; rb < FC_RB; ++rb) x[rb] = T[d * FC_RB + rb] * c[rb];
#pragma unroll
            for (int j = 0; j < FC_KB; ++j) {
                const float8 y = (float8)(R[j * D + d]);
#pragma unroll
                for (int rb = 0; rb < FC_RB; ++rb) x[rb] = FC_FMA(guard, w[j][rb], y, x[rb]);
            }
#pragma unroll
            for (int rb = 0; rb < FC_RB; ++rb) T[d * FC_RB + rb] = x[rb];
        }
        return;
    }
    for (int d = 0; d < D; ++d) {
        float8 x[FC_RB];
#pragma unroll
        for (int rb = 0; rb < FC_RB; ++rb) x[rb] = T[d * FC_RB + rb];
#pragma unroll
        for (int j = 0; j < FC_KB; ++j) {
            const float8 y = (float8)(R[j * D + d]);
#pragma unroll
            for (int rb = 0; rb < FC_RB; ++rb) x[rb] = FC_FMA(guard, w[j][rb], y, x[rb]);
        }
#pragma unroll
        for (int rb = 0; rb < FC_RB; ++rb) T[d * FC_RB + rb] = x[rb];
    }
}

/* T[d][r] = mul * P[r0 + r][d] for lanes r < n (zero beyond): an FC_L-row block
 * of a panel (row stride D) transposed into a work-item's private tile. */
inline void fc_panel_transpose(__private float *T, __global const float *P, long r0, int n,
                               int D, float mul) {
    for (int r = 0; r < FC_L; ++r) {
        __global const float *row = P + (r0 + r) * D;
        for (int d = 0; d < D; ++d) T[d * FC_L + r] = r < n ? row[d] * mul : 0.0f;
    }
}

/* Packs the rows of two [batch, seq, head, dim] tensors (K and V, or Q and
 * dO: D and Dv wide) of a range of slots into fp32 panels:
 *   ws[pk.w + (slot - pk.x) * pk.y * (D + Dv) + r * D + d]           (K, Q)
 *   ws[pk.w + (slot - pk.x) * pk.y * (D + Dv) + pk.y * D + r * Dv + d] (V, dO)
 * rows r >= the sequence's length up to pk.y (rows_pad) are zero, so the
 * kernels stream whole FC_KB-row blocks without bounds tests.  The streamed
 * side is then contiguous: a head's rows in the tensors are H * D elements
 * apart, a new page each at H * D * 4 >= 4 KiB, which neither the hardware
 * prefetchers nor the TLB follow (bench/RESULTS.md has the measurement).
 * pk = (first slot, rows_pad, heads of the side, float offset in ws);
 * slot = b * heads + head; cfg = (dtype, D, flags, Dv): FC_QSIDE clear for
 * the key side (paging, seqused_k), set for the query side.  Global size
 * (ceil(rows_pad / FC_L), slots, 1). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fmsa_ocl_cpu_pack(
    __global const uchar *a, long4 av, __global const uchar *c, long4 cvw, __global float *ws,
    long4 pk, __global const int *cuq, __global const int *cuk, long4 cv,
    __global const int *bt, long4 bv, __global const int *sused, long2 uv, long4 dims,
    int4 cfg) {
    const int dtype = cfg.x, D = cfg.y, flags = cfg.z, Dv = cfg.w;
    const int qside = (flags & FC_QSIDE) != 0, paged = (flags & FC_PAGED) != 0;
    const long local_slot = get_group_id(1), slot = pk.x + local_slot;
    const long b = slot / pk.z, hd = slot - (slot / pk.z) * pk.z;
    const fmsa_seq s = FC_SEQ(b, dims, flags, cuq, cuk, cv, sused, uv);
    const long len = qside ? s.sq : s.sk;
    __global float *dst0 = ws + pk.w + local_slot * pk.y * (D + Dv);
    __global float *dst1 = dst0 + pk.y * D;
    const long r0 = (long)get_group_id(0) * FC_L;
    for (long r = r0; r < min(r0 + FC_L, pk.y); ++r) {
        if (r < len) {
            const long oa = qside ? fmsa_ocl_q_row(av, &s, r, hd)
                                  : fmsa_ocl_kv_row(av, &s, paged, b, r, hd, bt, bv);
            const long oc = qside ? fmsa_ocl_q_row(cvw, &s, r, hd)
                                  : fmsa_ocl_kv_row(cvw, &s, paged, b, r, hd, bt, bv);
            fc_row_pack(dst0 + r * D, a, oa, dtype, D);
            fc_row_pack(dst1 + r * Dv, c, oc, dtype, Dv);
        } else {
            for (int x = 0; x < D / 8; ++x) vstore8((float8)(0.0f), x, dst0 + r * D);
            for (int x = 0; x < Dv / 8; ++x) vstore8((float8)(0.0f), x, dst1 + r * Dv);
        }
    }
}
