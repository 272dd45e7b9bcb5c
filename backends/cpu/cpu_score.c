/*
 * The score tile of the CPU backend: s = scale * q·k, softcap, ALiBi, then the
 * window and bit-mask predicates, in base-2 units (flashmsa.h and
 * fmsa_score.h define the semantics; this file only tiles them).
 *
 * The window is applied per row as a visible column interval
 * (fmsa_window_row_cols of fmsa_seq.h) rather than a per-element predicate,
 * so everything outside the interval is set to -inf in two short loops and
 * the transform loop in between has no integer tests.
 */
#include "backends/cpu/cpu_tile.h"

#include <math.h>
#include <string.h>

#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

void fmsa_cpu_score_init(fmsa_cpu_score *sc, const fmsa_problem *p, const fmsa_seq *seq,
                         int64_t b, int64_t h, float dot_scale) {
    sc->sq = seq->sq;
    sc->sk = seq->sk;
    sc->window_left = p->window_left;
    sc->window_right = p->window_right;
    sc->head_dim = p->head_dim;
    sc->dot_scale = dot_scale;
    sc->softcap = p->softcap > 0.0f ? p->softcap : 0.0f;
    sc->has_alibi = p->has_alibi;
    sc->alibi_slope = 0.0f;
    sc->alibi_offset = p->alibi_offset;
    if (p->has_alibi) {
        const float *slopes = (const float *)fmsa_viewn_host(&p->alibi);
        sc->alibi_slope = slopes[b * p->alibi.s0 + h * p->alibi.s1];
    }
    sc->mask = NULL;
    sc->mask_row_stride = 0;
    if (p->has_mask) {
        /* mask is [B|1, Hq|1, Sq, ceil(Sk/8)] indexed by sequence, head and the
         * row within the sequence (varlen included); stride 0 broadcasts. */
        sc->mask = (const uint8_t *)fmsa_viewn_host(&p->mask) + b * p->mask.s0 + h * p->mask.s1;
        sc->mask_row_stride = p->mask.s2;
    }
}

int fmsa_cpu_tile_visible(const fmsa_cpu_score *sc, int64_t i0, int rows, int64_t j0, int cols) {
    for (int r = 0; r < rows; ++r) {
        int lo, hi;
        fmsa_window_row_cols(i0 + r, j0, cols, sc->sq, sc->sk, sc->window_left,
                             sc->window_right, &lo, &hi);
        if (lo >= hi) continue;
        if (!sc->mask) return 1;
        {
            const uint8_t *mrow = sc->mask + (i0 + r) * sc->mask_row_stride;
            for (int c = lo; c < hi; ++c)
                if (FMSA_MASK_BIT(mrow, j0 + c)) return 1;
        }
    }
    return 0;
}

void fmsa_cpu_score_tile(const fmsa_cpu_kernels *kern, const fmsa_cpu_score *sc, const float *q,
                         int64_t ldq, int rows, int64_t i0, const float *kt, int cols, int64_t j0,
                         int ld, float *s, float *g) {
    kern->gemm(rows, cols, (int)sc->head_dim, q, ldq, 1, kt, ld, s, ld, 0);
    fmsa_cpu_score_apply(sc, rows, i0, cols, j0, ld, s, g);
}

void fmsa_cpu_score_apply(const fmsa_cpu_score *sc, int rows, int64_t i0, int cols, int64_t j0,
                          int ld, float *s, float *g) {
    const float softcap = sc->softcap;
    const float dot_scale = sc->dot_scale;

    for (int r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        float *restrict sr = s + (int64_t)r * ld;
        float *restrict gr = g ? g + (int64_t)r * ld : NULL;
        int lo, hi;
        fmsa_window_row_cols(i, j0, cols, sc->sq, sc->sk, sc->window_left, sc->window_right,
                             &lo, &hi);

        if (softcap > 0.0f) {
            for (int c = lo; c < hi; ++c) {
                float capped = fmsa_softcap_apply(sr[c] * dot_scale, softcap);
                if (gr) gr[c] = fmsa_softcap_grad(capped, softcap);
                sr[c] = capped * FMSA_LOG2E;
            }
        } else {
            if (dot_scale != 1.0f)
                for (int c = lo; c < hi; ++c) sr[c] *= dot_scale;
            if (gr)
                for (int c = lo; c < hi; ++c) gr[c] = 1.0f;
        }
        if (sc->has_alibi)
            for (int c = lo; c < hi; ++c)
                sr[c] += fmsa_alibi_bias(sc->alibi_slope, i, j0 + c, sc->sq, sc->sk,
                                          sc->alibi_offset) *
                          FMSA_LOG2E;
        if (sc->mask) {
            const uint8_t *mrow = sc->mask + i * sc->mask_row_stride;
            for (int c = lo; c < hi; ++c)
                if (!FMSA_MASK_BIT(mrow, j0 + c)) sr[c] = FMSA_NEG_INF;
        }
        for (int c = 0; c < lo; ++c) sr[c] = FMSA_NEG_INF;
        for (int c = hi; c < cols; ++c) sr[c] = FMSA_NEG_INF;
        if (gr) {
            for (int c = 0; c < lo; ++c) gr[c] = 0.0f;
            for (int c = hi; c < cols; ++c) gr[c] = 0.0f;
        }
    }
}

/* Keys the window admits for some row of the sequence: [key_begin(row 0),
 * key_end(last row)) (consecutive rows' windows are adjacent, so the union
 * has no gap).  dead[c] = 1 for keys j0 + c (c < n <= 256) that no row of any
 * query head of kv head hk's group sees; returns their count. */
static int cpu_dead_chunk(const fmsa_problem *p, const fmsa_seq *seq, int64_t b, int64_t hk,
                          int64_t j0, int n, unsigned char *dead) {
    const int64_t kb = fmsa_window_key_begin(0, seq->sq, seq->sk, p->window_left);
    const int64_t ke = seq->sq > 0 ? fmsa_window_key_end(seq->sq, seq->sq, seq->sk,
                                                         p->window_right)
                                   : 0;
    const int64_t group = p->heads_q / p->heads_kv;
    /* a mask broadcast over heads (stride 0) is the same for every head */
    const int64_t heads = p->has_mask && p->mask.s1 != 0 ? group : 1;
    int count = 0, alive = 0;
    for (int c = 0; c < n; ++c) {
        dead[c] = j0 + c < kb || j0 + c >= ke;
        count += dead[c];
    }
    if (!p->has_mask || count == n) return count;
    /* keys the window leaves alive: the mask must set their bit in some row */
    {
        unsigned char seen[256];
        memset(seen, 0, (size_t)n);
        for (int64_t g = 0; g < heads && alive < n - count; ++g) {
            const int64_t h = hk * group + g;
            const uint8_t *m = (const uint8_t *)fmsa_viewn_host(&p->mask) + b * p->mask.s0 +
                               h * p->mask.s1;
            for (int64_t i = 0; i < seq->sq && alive < n - count; ++i) {
                const uint8_t *mrow = m + i * p->mask.s2;
                int lo, hi;
                fmsa_window_row_cols(i, j0, n, seq->sq, seq->sk, p->window_left,
                                     p->window_right, &lo, &hi);
                for (int c = lo; c < hi; ++c) {
                    if (((j0 + c) & 7) == 0 && c + 8 <= hi && mrow[(j0 + c) >> 3] == 0) {
                        c += 7; /* a zero byte: eight hidden keys */
                        continue;
                    }
                    if (!seen[c] && FMSA_MASK_BIT(mrow, j0 + c)) {
                        seen[c] = 1;
                        ++alive;
                    }
                }
            }
        }
        count = 0;
        for (int c = 0; c < n; ++c) {
            dead[c] = !seen[c];
            count += dead[c];
        }
    }
    return count;
}

int fmsa_cpu_dead_keys_zero(const fmsa_problem *p, const fmsa_seq *seq, int64_t b, int64_t hk,
                            int64_t j0, int cols, int64_t width, float *rows, float *kt, int ld) {
    const int64_t D = width;
    int total = 0;
    if (!p->has_mask && p->window_left < 0) return 0; /* every key is some row's */
    for (int c0 = 0; c0 < cols; c0 += 256) {
        unsigned char dead[256];
        const int n = cols - c0 < 256 ? cols - c0 : 256;
        const int count = cpu_dead_chunk(p, seq, b, hk, j0 + c0, n, dead);
        total += count;
        for (int c = 0; c < n && count > 0; ++c) {
            if (!dead[c]) continue;
            if (rows) memset(rows + (int64_t)(c0 + c) * D, 0, (size_t)D * sizeof(float));
            if (kt)
                for (int64_t d = 0; d < D; ++d) kt[d * ld + c0 + c] = 0.0f;
        }
    }
    return total;
}
