/* The per-step local passes of the ring (ring_plan.h). */
#include "dist/ring_plan.h"

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

static void ring_add(fmsa_ring_call *out, int *n, int64_t q0, int64_t qn, int64_t k0, int64_t kn,
                     int causal) {
    if (qn <= 0 || kn <= 0) return;
    out[*n] = (fmsa_ring_call){q0, qn, k0, kn, causal, 0};
    ++*n;
}

int fmsa_ring_plan_step(fmsa_ring_layout layout, int P, int r, int s, int64_t c, int causal,
                        fmsa_ring_call out[FMSA_RING_MAX_CALLS]) {
    ring_seg qs[2], ks[2];
    const int j = ((r - s) % P + P) % P;
    const int nq = ring_segments(layout, P, r, c, qs), nk = ring_segments(layout, P, j, c, ks);
    int n = 0;
    if (nq < 0 || nk < 0) return -1;
    if (!causal) {
        ring_add(out, &n, 0, c, 0, c, 0);
    } else {
        for (int a = 0; a < nq; ++a)
            for (int b = 0; b < nk; ++b) {
                const ring_seg *A = &qs[a], *B = &ks[b];
                if (A->stride == 1) {
                    /* equal chunks: wholly before, wholly after, or the same chunk */
                    const int64_t a_last = A->pos0 + A->rows - 1, b_last = B->pos0 + B->rows - 1;
                    if (b_last <= A->pos0) ring_add(out, &n, A->row0, A->rows, B->row0, B->rows, 0);
                    else if (B->pos0 <= a_last) {
                        if (B->pos0 != A->pos0 || B->rows != A->rows) return -1; /* not a layout's */
                        ring_add(out, &n, A->row0, A->rows, B->row0, B->rows, 1); /* diagonal */
                    }
                } else if (j <= r) {
                    /* striped: key l of rank j sits at j + P l <= r + P i iff l <= i */
                    ring_add(out, &n, 0, c, 0, c, 1);
                } else {
                    /* ... and for j > r iff l <= i - 1: query rows 1.., key rows ..c-2 */
                    ring_add(out, &n, 1, c - 1, 0, c - 1, 1);
                }
            }
    }
    if (s == 0) { /* the sink term: once per row, with the first call covering the row */
        int64_t covered = 0;
        for (int i = 0; i < n; ++i)
            if (out[i].q_row0 >= covered) {
                out[i].sinks = 1;
                covered = out[i].q_row0 + out[i].q_rows;
            }
    }
    return n;
}
