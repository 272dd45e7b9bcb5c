/*
 * The per-step local passes of the ring (ring_plan.h).
 *
 * Every (query segment, key segment) pair reduces to a band: query i and key
 * l of the two segments (local indices) see each other iff L <= l - i <= R,
 * L = -inf / R = +inf where unbounded.  Contiguous chunks at global offsets
 * qp, kp: l - i in [D - wl, D + wr], D = qp - kp.  Striped (rank r's row i at
 * r + P i, rank j's key l at j + P l): l - i in [-floor((wl + j - r) / P),
 * floor((wr + r - j) / P)].  Causal is wr = 0.
 *
 * A local pass over query rows [q0, q1) and keys [k0, k1) with window
 * (wl', wr') sees l - i in [tau - wl', tau + wr'], tau = k1 - q1 (bottom-right
 * alignment).  So the band is run exactly by trimming the rows to those that
 * see a key (i in [max(0, -R), min(nq, nk - L))), the keys to those some row
 * sees, and setting wl' = tau - L, wr' = R - tau, both >= 0 by construction;
 * a side no pair of the call reaches is left unlimited.
 *
 * ALiBi (contiguous segments only): the call's row i and key l are at global
 * positions qp + q0 + i and kp + k0 + l, while its local distance is
 * i + (k1 - k0) - (q1 - q0) - l; the difference, (qp + q0) - (kp + k0) -
 * (k1 - k0) + (q1 - q0), is the call's alibi_offset.
 *
 * ALiBi, striped: rank r's row i and rank j's key l are at global distance
 * P x + d, x = i - l, d = r - j, |d| < P.  So |P x + d| = P |x| + d for x > 0,
 * |d| for x = 0 and P |x| - d for x < 0: on each side of the local diagonal
 * the bias is -(P slope) |x| plus a constant.  With d != 0 a pair is run as
 * up to three calls (the bands x > 0, x = 0, x < 0), each with slopes scaled
 * by P, the offset of x (the formula above with both segments at 0) and its
 * constant (alibi_add = -d, -|d|, d); at d = 0 (step 0) it is one call.  This
 * needs no kernel to know of strides: the constant moves the call's lse.
 *
 * Bit mask: a call's keys are a run of the mask's global columns, which a
 * view of the bit-packed rows can start only at a byte, so k0 is lowered to
 * the column that is a multiple of 8 below it (segments start at one: the
 * driver checks); the keys added are left of the band, which the call's left
 * window then masks.
 */
#include "dist/ring_plan.h"

#include <string.h>

#define RING_INF INT64_MAX

/// Local rows [row0, row0 + rows) at global positions pos0 + stride * (i - row0).
typedef struct ring_seg {
    int64_t row0, rows, pos0, stride;
} ring_seg;

static int ring_segments(fmsa_ring_layout layout, int P, int r, int64_t c, ring_seg seg[2]) {
    switch (layout) {
    case FMSA_RING_CONTIGUOUS:
        seg[0] = (ring_seg){0, c, (int64_t)r * c, 1};
        return 1;
    case FMSA_RING_ZIGZAG: {
        const int64_t half = c / 2;
        if (c % 2) return -1;
        seg[0] = (ring_seg){0, half, (int64_t)r * half, 1};
        seg[1] = (ring_seg){half, half, (int64_t)(2 * P - 1 - r) * half, 1};
        return 2;
    }
    case FMSA_RING_STRIPED:
        seg[0] = (ring_seg){0, c, r, P};
        return 1;
    }
    return -1;
}

static int64_t floor_div(int64_t a, int64_t b) { /* b > 0 */
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The band [*L, *R] of l - i for segments A (queries) and B (keys). */
static void ring_band(const ring_seg *A, const ring_seg *B, const fmsa_ring_mask *m, int64_t *L,
                      int64_t *R) {
    const int64_t wl = m->window_left, wr = m->causal ? 0 : m->window_right;
    if (A->stride == 1) { /* contiguous chunks */
        const int64_t d = A->pos0 - B->pos0;
        *L = wl < 0 ? -RING_INF : d - wl;
        *R = wr < 0 ? RING_INF : d + wr;
    } else { /* striped: A->pos0 = r, B->pos0 = j, stride P */
        const int64_t P = A->stride, r = A->pos0, j = B->pos0;
        *L = wl < 0 ? -RING_INF : -floor_div(wl + j - r, P);
        *R = wr < 0 ? RING_INF : floor_div(wr + r - j, P);
    }
}

/* The call running band [L, R] of the pair, if any pair of it is visible;
 * add: the striped ALiBi constant of the band (header comment); mask: the
 * keys start at a byte of the bit mask. */
static void ring_add_band(fmsa_ring_call *out, int *n, const ring_seg *A, const ring_seg *B,
                          int64_t L, int64_t R, int own, int64_t add, int mask) {
    const int64_t nq = A->rows, nk = B->rows;
    int64_t q0, q1, k0, k1, tau, wl, wr;
    fmsa_ring_call *c = &out[*n];
    if (nq <= 0 || nk <= 0 || L > R) return; /* L > R: an empty band (striped rows of one parity) */
    q0 = R == RING_INF ? 0 : max64(0, -R);
    q1 = L == -RING_INF ? nq : min64(nq, nk - L);
    if (q0 >= q1) return;
    k0 = L == -RING_INF ? 0 : max64(0, q0 + L);
    k1 = R == RING_INF ? nk : min64(nk, q1 - 1 + R + 1);
    if (k0 >= k1) return;
    if (mask) k0 -= (B->pos0 + k0) % 8; /* B->pos0 % 8 == 0, so k0 stays >= 0 */
    tau = k1 - q1;
    /* a bound no pair of the call reaches is no bound */
    wl = L == -RING_INF || k0 - (q1 - 1) >= L ? -1 : tau - L;
    wr = R == RING_INF || (k1 - 1) - q0 <= R ? -1 : R - tau;
    memset(c, 0, sizeof *c);
    c->q_row0 = A->row0 + q0;
    c->q_rows = q1 - q0;
    c->k_row0 = B->row0 + k0;
    c->k_rows = k1 - k0;
    c->causal = wr == 0;
    c->sinks = own;
    c->window_left = wl;
    c->window_right = wr == 0 ? -1 : wr;
    c->k_pos0 = B->pos0 + B->stride * k0;
    c->alibi_scale = (int)A->stride;
    c->alibi_add = add;
    /* the ALiBi offset (header comment): of the global distance for contiguous segments,
     * of x for striped ones (both at 0) */
    if (A->stride == 1) c->alibi_offset = (A->pos0 + q0) - (B->pos0 + k0) - (k1 - k0) + (q1 - q0);
    else c->alibi_offset = q0 - k0 - (k1 - k0) + (q1 - q0);
    ++*n;
}

/* Whether y continues x as one call: the same rows over the next keys (x
 * sees all its keys, y's causal diagonal then stays where it was, as long as
 * y has at least as many keys as rows, so that its first row sees all of x);
 * the next rows over the same keys, both seeing all of them; or, both causal
 * from the same first key, the next rows over y's keys, which reach as far
 * past x's as y has rows (so one bottom-right diagonal runs through both:
 * zigzag's own block, its early chunk's diagonal and the late chunk over
 * both).  Only for calls without a window (each window bound is per call)
 * nor ALiBi / mask (their offsets and mask columns are per pair of segments). */
static int ring_continues(const fmsa_ring_call *x, const fmsa_ring_call *y) {
    if (x->window_left >= 0 || x->window_right >= 0 || y->window_left >= 0 || y->window_right >= 0)
        return 0;
    if (x->q_row0 == y->q_row0 && x->q_rows == y->q_rows && x->k_row0 + x->k_rows == y->k_row0)
        return !x->causal && (!y->causal || y->k_rows >= y->q_rows) && !(x->sinks && y->sinks);
    if (x->q_row0 + x->q_rows != y->q_row0 || x->k_row0 != y->k_row0 || x->sinks != y->sinks)
        return 0;
    if (x->k_rows == y->k_rows) return !x->causal && !y->causal;
    return x->causal && y->causal && y->k_rows == x->k_rows + y->q_rows;
}

/* Joins the calls that continue one another (ring_continues) into one: fewer,
 * larger local passes and fewer merges a step (zigzag causal: one call a step
 * instead of two, and three at the rank's own block). */
static int ring_join_calls(fmsa_ring_call *out, int n) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            fmsa_ring_call *x = &out[i], *y = &out[j];
            if (i == j || !ring_continues(x, y)) continue;
            if (x->q_row0 == y->q_row0) {
                x->k_rows += y->k_rows;
                x->causal = y->causal;
                x->sinks |= y->sinks;
            } else {
                x->q_rows += y->q_rows;
                x->k_rows = y->k_rows;
            }
            out[j] = out[--n];
            i = -1; /* again from the start: the joined call may continue another */
            break;
        }
    return n;
}

int fmsa_ring_plan_step(fmsa_ring_layout layout, int P, int r, int s, int64_t c,
                        const fmsa_ring_mask *mask, fmsa_ring_call out[FMSA_RING_MAX_CALLS]) {
    ring_seg qs[2], ks[2];
    const int j = ((r - s) % P + P) % P;
    const int nq = ring_segments(layout, P, r, c, qs), nk = ring_segments(layout, P, j, c, ks);
    const int64_t S = (int64_t)P * c;
    fmsa_ring_mask m = *mask;
    int bounded, n = 0;
    if (nq < 0 || nk < 0) return -1;
    if (mask->mask) /* every call's keys must start at a byte of the mask */
        for (int b = 0; b < nk; ++b)
            if (ks[b].stride != 1 || ks[b].pos0 % 8) return -1;
    /* a window reaching past the sequence is none (and keeps the band arithmetic small) */
    if (m.window_left >= S) m.window_left = -1;
    if (m.window_right >= S) m.window_right = -1;
    mask = &m;
    bounded = m.causal || m.window_left >= 0 || m.window_right >= 0;
    if (!bounded && !m.alibi && !m.mask) {
        /* every key of the block: one pass, which carries the sinks at the rank's own block
         * (with ALiBi or a mask the pairs below: each has its own offset or mask columns) */
        if (c > 0) {
            memset(&out[0], 0, sizeof out[0]);
            out[0].q_rows = out[0].k_rows = c;
            out[0].sinks = s == 0;
            out[0].window_left = out[0].window_right = -1;
            out[0].alibi_scale = 1;
            out[0].k_pos0 = ks[0].pos0;
            n = 1;
        }
        return n;
    }
    for (int a = 0; a < nq; ++a)
        for (int b = 0; b < nk; ++b) {
            /* the sink term once per row: at step 0, the pair of the row's own chunk,
             * which holds the row's own position and so covers every row */
            const int own = s == 0 && a == b;
            const int64_t d = (int64_t)r - j;
            int64_t L, R;
            ring_band(&qs[a], &ks[b], mask, &L, &R);
            if (m.alibi && qs[a].stride > 1 && d != 0) {
                /* striped ALiBi off the rank's own block: the sides of x = i - l = -(l - i) */
                ring_add_band(out, &n, &qs[a], &ks[b], L, min64(R, -1), own, -d, m.mask);
                ring_add_band(out, &n, &qs[a], &ks[b], max64(L, 0), min64(R, 0), own,
                              d < 0 ? d : -d, m.mask);
                ring_add_band(out, &n, &qs[a], &ks[b], max64(L, 1), R, own, d, m.mask);
            } else {
                ring_add_band(out, &n, &qs[a], &ks[b], L, R, own, 0, m.mask);
            }
        }
    return m.alibi || m.mask ? n : ring_join_calls(out, n);
}
