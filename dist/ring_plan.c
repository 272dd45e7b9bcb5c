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
 * (k1 - k0) + (q1 - q0), is the call's alibi_offset.  Striped rows are at
 * global distance P (i - l) + r - j: a scaled distance with a fractional
 * shift, which no integer offset gives, so the plan has none for it.
 */
#include "dist/ring_plan.h"

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

/* The call running band [L, R] of the pair, if any pair of it is visible. */
static void ring_add_band(fmsa_ring_call *out, int *n, const ring_seg *A, const ring_seg *B,
                          int64_t L, int64_t R, int own) {
    const int64_t nq = A->rows, nk = B->rows;
    int64_t q0, q1, k0, k1, tau, wl, wr;
    if (nq <= 0 || nk <= 0 || L > R) return; /* L > R: an empty band (striped rows of one parity) */
    q0 = R == RING_INF ? 0 : max64(0, -R);
    q1 = L == -RING_INF ? nq : min64(nq, nk - L);
    if (q0 >= q1) return;
    k0 = L == -RING_INF ? 0 : max64(0, q0 + L);
    k1 = R == RING_INF ? nk : min64(nk, q1 - 1 + R + 1);
    if (k0 >= k1) return;
    tau = k1 - q1;
    /* a bound no pair of the call reaches is no bound */
    wl = L == -RING_INF || k0 - (q1 - 1) >= L ? -1 : tau - L;
    wr = R == RING_INF || (k1 - 1) - q0 <= R ? -1 : R - tau;
    out[*n] = (fmsa_ring_call){A->row0 + q0, q1 - q0, B->row0 + k0, k1 - k0, wr == 0, own, wl,
                               wr == 0 ? -1 : wr, 0};
    if (A->stride == 1) /* contiguous segments: the ALiBi offset (header comment) */
        out[*n].alibi_offset = (A->pos0 + q0) - (B->pos0 + k0) - (k1 - k0) + (q1 - q0);
    ++*n;
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
    if (mask->alibi && layout == FMSA_RING_STRIPED) return -1;
    /* a window reaching past the sequence is none (and keeps the band arithmetic small) */
    if (m.window_left >= S) m.window_left = -1;
    if (m.window_right >= S) m.window_right = -1;
    mask = &m;
    bounded = m.causal || m.window_left >= 0 || m.window_right >= 0;
    if (!bounded && !m.alibi) {
        /* every key of the block: one pass, which carries the sinks at the rank's own block
         * (with ALiBi the pairs below: each has its own offset) */
        if (c > 0) out[n++] = (fmsa_ring_call){0, c, 0, c, 0, s == 0, -1, -1, 0};
        return n;
    }
    for (int a = 0; a < nq; ++a)
        for (int b = 0; b < nk; ++b) {
            int64_t L, R;
            ring_band(&qs[a], &ks[b], mask, &L, &R);
            /* the sink term once per row: at step 0, the pair of the row's own chunk,
             * which holds the row's own position and so covers every row */
            ring_add_band(out, &n, &qs[a], &ks[b], L, R, s == 0 && a == b);
        }
    return n;
}
