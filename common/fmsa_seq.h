/*
 * Where one sequence of a (varlen / paged) problem lives and which keys each
 * query row sees: one definition for the host, the fp64 reference and every
 * kernel.  Same rules as fmsa_softmax.h: the C99 subset of fmsa_portable.h,
 * so it compiles unchanged as C11, CUDA, HIP and OpenCL C; metadata pointers
 * are FMSA_GLOBAL and already advanced by their byte offset; strides are in
 * elements; no host-only call, so a kernel resolves its own sequence from
 * cu_seqlens / seqused_k / the block table without a host round trip.
 *
 * Positions are 0-based within one sequence.  Bottom-right alignment puts
 * query row i on key diagonal i + sk - sq (as FlashAttention 2.1+), so decode
 * (sq = 1) sees every key.  A window (left, right) admits the keys
 * [diag - left, diag + right]; -1 is unlimited on that side, and causal is
 * right = 0 (validate.c folds it in).  Key and row ranges are half-open.
 */
#ifndef FMSA_SEQ_H
#define FMSA_SEQ_H

#include "fmsa_portable.h"

/// One sequence: where its rows start in q/o and k/v, and its lengths.
typedef struct fmsa_seq {
    fmsa_i64 q_row0;  ///< first row of this sequence in q/o (dim 1)
    fmsa_i64 k_row0;  ///< first row in k/v (dim 1); 0 when paged
    fmsa_i64 q_batch; ///< batch index into q/o (0 when varlen)
    fmsa_i64 k_batch; ///< batch index into k/v (0 when varlen or paged)
    fmsa_i64 sq;      ///< query rows of this sequence
    fmsa_i64 sk;      ///< keys of this sequence
} fmsa_seq;

/// Resolves sequence b.  Varlen: rows and lengths from cu_seqlens (int32,
/// element strides cu_q_s / cu_k_s).  Otherwise batch b with the padded
/// lengths seqlen_q / seqlen_k, where a paged call with seqused_k (stride
/// su_s) takes the sequence's own key count from it.  Pointers that the
/// switches do not select are never read (they may be NULL).
FMSA_INLINE fmsa_seq fmsa_seq_resolve(fmsa_i64 b, int is_varlen, int is_paged, int has_seqused_k,
                                      fmsa_i64 seqlen_q, fmsa_i64 seqlen_k,
                                      FMSA_GLOBAL const int *cu_q, fmsa_i64 cu_q_s,
                                      FMSA_GLOBAL const int *cu_k, fmsa_i64 cu_k_s,
                                      FMSA_GLOBAL const int *seqused_k, fmsa_i64 su_s) {
    fmsa_seq s;
    if (is_varlen) {
        s.q_row0 = cu_q[b * cu_q_s];
        s.k_row0 = cu_k[b * cu_k_s];
        s.sq = cu_q[(b + 1) * cu_q_s] - s.q_row0;
        s.sk = cu_k[(b + 1) * cu_k_s] - s.k_row0;
        s.q_batch = 0;
        s.k_batch = 0;
    } else {
        s.q_row0 = 0;
        s.k_row0 = 0;
        s.q_batch = b;
        s.k_batch = is_paged ? 0 : b;
        s.sq = seqlen_q;
        s.sk = is_paged && has_seqused_k ? (fmsa_i64)seqused_k[b * su_s] : seqlen_k;
    }
    return s;
}

/// Element offset of query row i of head h in a q-shaped view (q, o, dout,
/// dq) with strides (sb, ss, sh); with (s0, s2, s1) it is the lse offset.
FMSA_INLINE fmsa_i64 fmsa_seq_q_offset(FMSA_PRIVATE const fmsa_seq *s, fmsa_i64 i, fmsa_i64 h,
                                       fmsa_i64 sb, fmsa_i64 ss, fmsa_i64 sh) {
    return s->q_batch * sb + (s->q_row0 + i) * ss + h * sh;
}

/// Element offset of key row j of kv head hk of sequence b in a k/v view
/// with strides (sb, ss, sh).  Paged: the view is a page pool (sb = page
/// stride, ss = row in page) and the page comes from the block table (int32,
/// strides bt_sb per sequence, bt_sp per page; never read when not paged).
FMSA_INLINE fmsa_i64 fmsa_seq_k_offset(FMSA_PRIVATE const fmsa_seq *s, fmsa_i64 b, fmsa_i64 j,
                                       fmsa_i64 hk, fmsa_i64 sb, fmsa_i64 ss, fmsa_i64 sh,
                                       int is_paged, FMSA_GLOBAL const int *bt,
                                       fmsa_i64 bt_sb, fmsa_i64 bt_sp, fmsa_i64 page_size) {
    if (is_paged) {
        const fmsa_i64 page = bt[b * bt_sb + (j / page_size) * bt_sp];
        return page * sb + (j % page_size) * ss + hk * sh;
    }
    return s->k_batch * sb + (s->k_row0 + j) * ss + hk * sh;
}

/// The key on query row i's diagonal (bottom-right alignment).
FMSA_INLINE fmsa_i64 fmsa_seq_diag(fmsa_i64 i, fmsa_i64 sq, fmsa_i64 sk) { return i + sk - sq; }

/// 1 when key j is inside the (left, right) window of query row i.
FMSA_INLINE int fmsa_window_visible(fmsa_i64 i, fmsa_i64 j, fmsa_i64 sq, fmsa_i64 sk,
                                    fmsa_i64 window_left, fmsa_i64 window_right) {
    const fmsa_i64 diag = fmsa_seq_diag(i, sq, sk);
    if (window_left >= 0 && j < diag - window_left) return 0;
    if (window_right >= 0 && j > diag + window_right) return 0;
    return 1;
}

/// First key any query row of [i0, i1) may see (the left bound binds row
/// i0), clamped to [0, sk]: tiled kernels start their key loop here.
FMSA_INLINE fmsa_i64 fmsa_window_key_begin(fmsa_i64 i0, fmsa_i64 sq, fmsa_i64 sk,
                                           fmsa_i64 window_left) {
    fmsa_i64 b;
    if (window_left < 0) return 0;
    b = fmsa_seq_diag(i0, sq, sk) - window_left;
    return b < 0 ? 0 : (b > sk ? sk : b);
}

/// One past the last key any query row of [i0, i1) may see (the right bound
/// binds row i1 - 1), clamped to [0, sk]: tiled kernels stop there.
FMSA_INLINE fmsa_i64 fmsa_window_key_end(fmsa_i64 i1, fmsa_i64 sq, fmsa_i64 sk,
                                         fmsa_i64 window_right) {
    fmsa_i64 e;
    if (window_right < 0) return sk;
    e = fmsa_seq_diag(i1 - 1, sq, sk) + window_right + 1;
    return e < 0 ? 0 : (e > sk ? sk : e);
}

/// First query row that sees any key of [j0, j1) (the inverse of
/// fmsa_window_key_end), clamped to [0, sq]: dK/dV kernels start there.
FMSA_INLINE fmsa_i64 fmsa_window_query_begin(fmsa_i64 j0, fmsa_i64 sq, fmsa_i64 sk,
                                             fmsa_i64 window_right) {
    fmsa_i64 b;
    if (window_right < 0) return 0;
    b = j0 - window_right - (sk - sq);
    return b < 0 ? 0 : (b > sq ? sq : b);
}

/// One past the last query row that sees any key of [j0, j1) (the inverse
/// of fmsa_window_key_begin), clamped to [0, sq].
FMSA_INLINE fmsa_i64 fmsa_window_query_end(fmsa_i64 j1, fmsa_i64 sq, fmsa_i64 sk,
                                           fmsa_i64 window_left) {
    fmsa_i64 e;
    if (window_left < 0) return sq;
    e = (j1 - 1) + window_left - (sk - sq) + 1;
    return e < 0 ? 0 : (e > sq ? sq : e);
}

/// 1 when some pair of the tile rows [i0, i1) x keys [j0, j1) may be inside
/// the window (tile skipping); 0 when the window excludes the whole tile.
FMSA_INLINE int fmsa_window_tile_visible(fmsa_i64 i0, fmsa_i64 i1, fmsa_i64 j0, fmsa_i64 j1,
                                         fmsa_i64 sq, fmsa_i64 sk, fmsa_i64 window_left,
                                         fmsa_i64 window_right) {
    return fmsa_window_key_end(i1, sq, sk, window_right) > j0 &&
           fmsa_window_key_begin(i0, sq, sk, window_left) < j1;
}

/// 1 when every pair of the tile rows [i0, i1) x keys [j0, j1) is inside the
/// window, so a kernel may skip the per-element test (sequence bounds and
/// masks are the caller's).
FMSA_INLINE int fmsa_window_tile_inside(fmsa_i64 i0, fmsa_i64 i1, fmsa_i64 j0, fmsa_i64 j1,
                                        fmsa_i64 sq, fmsa_i64 sk, fmsa_i64 window_left,
                                        fmsa_i64 window_right) {
    if (window_left >= 0 && j0 < fmsa_seq_diag(i1 - 1, sq, sk) - window_left) return 0;
    if (window_right >= 0 && j1 - 1 > fmsa_seq_diag(i0, sq, sk) + window_right) return 0;
    return 1;
}

/// Visible columns [*lo, *hi) of query row i within a key tile of `cols`
/// keys starting at j0 (*lo == *hi: none), so a kernel masks the two ends
/// of a row with two short loops instead of a per-element test.
FMSA_INLINE void fmsa_window_row_cols(fmsa_i64 i, fmsa_i64 j0, int cols, fmsa_i64 sq,
                                      fmsa_i64 sk, fmsa_i64 window_left, fmsa_i64 window_right,
                                      FMSA_PRIVATE int *lo, FMSA_PRIVATE int *hi) {
    const fmsa_i64 diag = fmsa_seq_diag(i, sq, sk);
    fmsa_i64 a = 0, e = cols;
    if (window_left >= 0 && diag - window_left - j0 > a) a = diag - window_left - j0;
    if (window_right >= 0 && diag + window_right - j0 + 1 < e) e = diag + window_right - j0 + 1;
    if (a > cols) a = cols;
    if (e < a) e = a;
    *lo = (int)a;
    *hi = (int)e;
}

#endif /* FMSA_SEQ_H */
