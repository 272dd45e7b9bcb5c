/*
 * Shared pieces of the flashmsa OpenCL kernels: element loads/stores per
 * storage dtype, the three register-blocked tile products and the tile
 * loaders.  Everything is specialised at build time through -D options:
 *
 *   FMSA_DTYPE          1 f32, 2 f16 (vload_half, no cl_khr_fp16 needed), 3 bf16 (ushort)
 *   HEAD_DIM            D, the q/k head dim (a multiple of 8)
 *   HEAD_DIM_V          Dv, the v/o/dout head dim (a multiple of 8; often == D)
 *   BM, BN              query rows and keys per tile (from the planner)
 *   WG                  work-items per work-group
 *   S_NX                work-items along the keys of the BM x BN score tile
 *   O_NX                work-items along the head-dim/4 of the output-shaped tile
 *   O_ROWS              rows of the output-shaped tile (BM; BN for dK/dV)
 *   FMSA_WINDOW, FMSA_SOFTCAP, FMSA_ALIBI, FMSA_MASK, FMSA_VARLEN, FMSA_PAGED,
 *   FMSA_SEQUSED, FMSA_LSE, FMSA_SINKS   feature switches (0/1)
 *   QS16, KS16          stage Q-shaped (Q, dO) / K-shaped (K, V) tiles in __local
 *                       as their raw 16-bit values instead of fp32 (16-bit dtypes
 *                       only): half the bytes, so bigger tiles fit, for one
 *                       conversion per __local read
 *
 * Work-item (ty, tx) of the score tile owns rows ty + i*S_NY and keys
 * tx + j*S_NX: interleaving keeps the 16-byte __local reads of a warp on
 * distinct banks while every inner product is register-blocked S_TM x S_TN.
 * Tiles of head-dim width live in __local as rows of w4 = D/4 (Q, K) or
 * Dv/4 (V, dO) four-element vectors (float4, or uint2 holding four 16-bit
 * values) padded by one vector (row stride w4 + 1) against bank conflicts.
 * The tile helpers take w4 as an argument; every call passes D4 or DV4, a
 * constant once inlined.  Output accumulators are declared O_TDM vectors
 * wide (the wider of the two head dims) and a kernel touches only the
 * FMSA_OTD(w4) of its output's width, so the rest is dead and never
 * allocated.
 */

#ifndef HEAD_DIM_V
#define HEAD_DIM_V HEAD_DIM
#endif /* HEAD_DIM_V */
#define D4 (HEAD_DIM / 4)
#define LD4 (D4 + 1)
#define DV4 (HEAD_DIM_V / 4)
#define LDV4 (DV4 + 1)
#define DM4 (D4 > DV4 ? D4 : DV4)
#define LDM4 (DM4 + 1)
#define PS (BN + 4)
#define PS4 (PS / 4)
#define S_NY (WG / S_NX)
#define S_TM (BM / S_NY)
#define S_TN (BN / S_NX)
#define O_NY (WG / O_NX)
#define O_TM (O_ROWS / O_NY)
#define FMSA_OTD(w4) (((w4) + O_NX - 1) / O_NX)
#define O_TDM FMSA_OTD(DM4)

#if FMSA_DTYPE == 1
typedef float elem_t;
#define FMSA_LOAD4(p, i) vload4(0, (p) + (i))
#define FMSA_STORE4(x, p, i) vstore4((x), 0, (p) + (i))
#elif FMSA_DTYPE == 2
typedef half elem_t;
#define FMSA_LOAD4(p, i) vload_half4(0, (p) + (i))
#define FMSA_STORE4(x, p, i) vstore_half4_rte((x), 0, (p) + (i))
#elif FMSA_DTYPE == 3
typedef ushort elem_t;
#define FMSA_LOAD4(p, i) as_float4(convert_uint4(vload4(0, (p) + (i))) << 16)
#define FMSA_STORE4(x, p, i) vstore4(fmsa_bf16_round4(x), 0, (p) + (i))
/* fp32 -> bf16 round to nearest even; NaN stays a quiet NaN. */
inline ushort4 fmsa_bf16_round4(float4 x) {
    uint4 b = as_uint4(x);
    uint4 r = (b + (uint4)(0x7fffu) + ((b >> 16) & (uint4)(1u))) >> 16;
    uint4 n = (b >> 16) | (uint4)(0x40u);
    return convert_ushort4(select(r, n, as_uint4(isnan(x))));
}
#else
#error "FMSA_DTYPE must be 1 (f32), 2 (f16) or 3 (bf16)"
#endif /* FMSA_DTYPE */

#if (QS16 || KS16) && FMSA_DTYPE == 1
#error "16-bit staging needs a 16-bit dtype"
#endif /* (QS16 || KS16) && FMSA_DTYPE == 1 */

/* Four staged 16-bit values (raw bits) -> float4. */
#if FMSA_DTYPE == 3
inline float4 fmsa_get16(__local const uint2 *t, int i) {
    const uint2 u = t[i];
    return (float4)(as_float(u.x << 16), as_float(u.x & 0xffff0000u), as_float(u.y << 16),
                    as_float(u.y & 0xffff0000u));
}
#else
inline float4 fmsa_get16(__local const uint2 *t, int i) {
    return vload_half4(i, (__local const half *)t);
}
#endif /* FMSA_DTYPE == 3: fmsa_get16 */
/* Raw copy of four 16-bit elements (no conversion, no cl_khr_fp16 needed). */
#define FMSA_RAW4(p, i) as_uint2(vload4(0, (__global const ushort *)(p) + (i)))

#if QS16
typedef uint2 qtile_t;
#define QGET(T, i) fmsa_get16((T), (i))
#define QSTAGE(p, i) FMSA_RAW4(p, i)
#define QZERO ((uint2)(0u))
#else
typedef float4 qtile_t;
#define QGET(T, i) ((T)[i])
#define QSTAGE(p, i) FMSA_LOAD4(p, i)
#define QZERO ((float4)(0.0f))
#endif /* QS16 */
#if KS16
typedef uint2 ktile_t;
#define KGET(T, i) fmsa_get16((T), (i))
#define KSTAGE(p, i) FMSA_RAW4(p, i)
#define KZERO ((uint2)(0u))
#else
typedef float4 ktile_t;
#define KGET(T, i) ((T)[i])
#define KSTAGE(p, i) FMSA_LOAD4(p, i)
#define KZERO ((float4)(0.0f))
#endif /* KS16 */

/* acc[i][j] += sum_k A[row_i][k] * B[col_j][k] over w4 vectors: the S = Q K^T
 * (w4 = D4) and dP = dO V^T (w4 = DV4) shape. */
inline void fmsa_mm_nt(float acc[S_TM][S_TN], __local const qtile_t *A, __local const ktile_t *B,
                       int ty, int tx, int w4) {
    const int ld = w4 + 1;
    for (int k = 0; k < w4; ++k) {
        float4 a[S_TM], b[S_TN];
#pragma unroll
        for (int i = 0; i < S_TM; ++i) a[i] = QGET(A, (ty + i * S_NY) * ld + k);
#pragma unroll
        for (int j = 0; j < S_TN; ++j) b[j] = KGET(B, (tx + j * S_NX) * ld + k);
#pragma unroll
        for (int i = 0; i < S_TM; ++i)
#pragma unroll
            for (int j = 0; j < S_TN; ++j) {
                float s = acc[i][j];
                s = fma(a[i].x, b[j].x, s);
                s = fma(a[i].y, b[j].y, s);
                s = fma(a[i].z, b[j].z, s);
                s = fma(a[i].w, b[j].w, s);
                acc[i][j] = s;
            }
    }
}

/* acc += p * b, except where p is 0: a key the mask or window hides from a
 * row has p = 0 there (P, or dS through fmsa_ds), and its V or K row may hold
 * NaN or Inf (padding), which 0 * NaN would carry into the row's output.
 * Selecting leaves every finite result bit for bit (the term was +-0). */
#if FMSA_MASK || FMSA_WINDOW
#define FMSA_PB_FMA(p, b, acc) ((p) != 0.0f ? fma((float4)(p), (b), (acc)) : (acc))
#else
#define FMSA_PB_FMA(p, b, acc) fma((float4)(p), (b), (acc))
#endif /* FMSA_MASK || FMSA_WINDOW */

/* dS = P (dP - D) g, and exactly 0 where P is: a hidden key's dP and g come
 * from its V and K, which may be NaN (see FMSA_PB_FMA). */
inline float fmsa_ds(float p, float dp, float dd, float g) {
#if FMSA_MASK || FMSA_WINDOW
    return p != 0.0f ? p * (dp - dd) * g : 0.0f;
#else
    return p * (dp - dd) * g;
#endif /* FMSA_MASK || FMSA_WINDOW */
}

/* acc[i][t] += sum_c P[row_i][c] * B[c][d4_t]: the O += P V (w4 = DV4) and
 * dQ += dS K (w4 = D4) shape (P is BM x BN floats with row stride PS, B has
 * BN rows of w4 vectors). */
inline void fmsa_mm_nn(float4 acc[O_TM][O_TDM], __local const float *P,
                       __local const ktile_t *B, int ty, int tx, int w4) {
    const int ld = w4 + 1;
    for (int c4 = 0; c4 < BN / 4; ++c4) {
        float4 p[O_TM];
#pragma unroll
        for (int i = 0; i < O_TM; ++i)
            p[i] = ((__local const float4 *)P)[(ty + i * O_NY) * PS4 + c4];
#pragma unroll
        for (int t = 0; t < FMSA_OTD(w4); ++t) {
            int d4 = min(tx + t * O_NX, w4 - 1); /* clamped columns are never stored */
            float4 b0 = KGET(B, (c4 * 4 + 0) * ld + d4);
            float4 b1 = KGET(B, (c4 * 4 + 1) * ld + d4);
            float4 b2 = KGET(B, (c4 * 4 + 2) * ld + d4);
            float4 b3 = KGET(B, (c4 * 4 + 3) * ld + d4);
#pragma unroll
            for (int i = 0; i < O_TM; ++i) {
                float4 s = acc[i][t];
                s = FMSA_PB_FMA(p[i].x, b0, s);
                s = FMSA_PB_FMA(p[i].y, b1, s);
                s = FMSA_PB_FMA(p[i].z, b2, s);
                s = FMSA_PB_FMA(p[i].w, b3, s);
                acc[i][t] = s;
            }
        }
    }
}

/* acc[i][t] += sum_r P[r][key_i] * B[r][d4_t]: the dV += P^T dO (w4 = DV4)
 * and dK += dS^T Q (w4 = D4) shape (P is BM x BN, B has BM rows of w4
 * vectors, output rows are keys). */
inline void fmsa_mm_tn(float4 acc[O_TM][O_TDM], __local const float *P,
                       __local const qtile_t *B, int ty, int tx, int w4) {
    const int ld = w4 + 1;
    for (int r = 0; r < BM; ++r) {
        float p[O_TM];
#pragma unroll
        for (int i = 0; i < O_TM; ++i) p[i] = P[r * PS + ty + i * O_NY];
#pragma unroll
        for (int t = 0; t < FMSA_OTD(w4); ++t) {
            float4 b = QGET(B, r * ld + min(tx + t * O_NX, w4 - 1));
#pragma unroll
            for (int i = 0; i < O_TM; ++i) acc[i][t] = fma((float4)(p[i]), b, acc[i][t]);
        }
    }
}

/* Copies `rows` rows of w4 vectors (D4 for K, DV4 for V) starting at key n0
 * into a __local K-shaped tile (fp32 or raw 16-bit, see KS16; row stride
 * w4 + 1); rows past n_valid are zero.  When WG is a multiple of w4 each
 * work-item keeps one column and steps over rows, so a row address is one
 * multiply-add (this runs for every key tile). */
inline void fmsa_load_kv(__local ktile_t *dst, int rows, int w4, __global const elem_t *src,
                         long4 kv, const fmsa_seq *s, long b, long n0, long n_valid, long hk,
                         __global const int *bt, long4 bv, int lid) {
    const int ld = w4 + 1;
#if !FMSA_PAGED
    const long base = fmsa_ocl_kv_row(kv, s, 0, b, n0, hk, bt, bv);
#endif /* !FMSA_PAGED */
    const int by_col = (WG % w4) == 0;
    const int n = by_col ? rows : rows * w4;
    for (int idx = by_col ? lid / w4 : lid; idx < n; idx += by_col ? WG / w4 : WG) {
        const int r = by_col ? idx : idx / w4;
        const int c = by_col ? lid % w4 : idx - (idx / w4) * w4;
        ktile_t x = KZERO;
        if (n0 + r < n_valid) {
#if FMSA_PAGED
            const long off = fmsa_ocl_kv_row(kv, s, 1, b, n0 + r, hk, bt, bv);
#else
            const long off = base + r * kv.z;
#endif /* FMSA_PAGED */
            x = KSTAGE(src, off + 4 * c);
        }
        dst[r * ld + c] = x;
    }
}

/* Same for Q-shaped rows (q: w4 = D4; o, dout: DV4) of head h from row m0. */
inline void fmsa_load_q(__local qtile_t *dst, int w4, __global const elem_t *src, long4 qv,
                        const fmsa_seq *s, long m0, long h, int lid) {
    const int ld = w4 + 1;
    const long base = fmsa_ocl_q_row(qv, s, m0, h);
    const int by_col = (WG % w4) == 0;
    const int n = by_col ? BM : BM * w4;
    for (int idx = by_col ? lid / w4 : lid; idx < n; idx += by_col ? WG / w4 : WG) {
        const int r = by_col ? idx : idx / w4;
        const int c = by_col ? lid % w4 : idx - (idx / w4) * w4;
        qtile_t x = QZERO;
        if (m0 + r < s->sq) x = QSTAGE(src, base + r * qv.z + 4 * c);
        dst[r * ld + c] = x;
    }
}

/* Base-2 score of (i, j) from the raw dot product, or -inf when masked.
 * fp.x = scale, fp.y = scale * log2(e), fp.z = softcap. */
inline float fmsa_score2(float raw, long i, long j, const fmsa_seq *s, float4 fp, float slope,
                         long aoff, long2 win, __global const uchar *mrow, int full) {
    float s2;
#if FMSA_SOFTCAP
    s2 = fmsa_softcap_apply(raw * fp.x, fp.z) * FMSA_LOG2E;
#else
    s2 = raw * fp.y;
#endif /* FMSA_SOFTCAP */
#if FMSA_ALIBI
    s2 += fmsa_alibi_bias(slope, i, j, s->sq, s->sk, aoff) * FMSA_LOG2E;
#endif /* FMSA_ALIBI */
    if (full) return s2;
    if (j >= s->sk || i >= s->sq) return -INFINITY;
#if FMSA_WINDOW
    if (!fmsa_window_visible(i, j, s->sq, s->sk, win.x, win.y)) return -INFINITY;
#endif /* FMSA_WINDOW */
#if FMSA_MASK
    if (!FMSA_MASK_BIT(mrow, j)) return -INFINITY;
#endif /* FMSA_MASK */
    return s2;
}

/* True when every (i, j) of the tile [m0, m0+BM) x [n0, n0+BN) is visible,
 * so the per-element predicates can be skipped (uniform per work-group). */
inline int fmsa_tile_full(long m0, long n0, const fmsa_seq *s, long2 win) {
    if (FMSA_MASK) return 0;
    if (m0 + BM > s->sq || n0 + BN > s->sk) return 0;
#if FMSA_WINDOW
    if (!fmsa_window_tile_inside(m0, m0 + BM, n0, n0 + BN, s->sq, s->sk, win.x, win.y)) return 0;
#endif /* FMSA_WINDOW */
    return 1;
}
