/*
 * The forward pass of bf16 inputs on 16-bit products (AMX tdpbf16ps,
 * AVX512-BF16 vdpbf16ps, or their portable C twin): the same FlashAttention-2
 * loop as cpu_forward.c, with
 *   S = Q·Kᵀ   bf16 Q (exact: the input) x packed bf16 K panel -> fp32,
 *              softmax scale applied to the fp32 S (not folded into Q, which
 *              would round Q a second time);
 *   P          exp2 in fp32, summed in fp32 for l, rounded to bf16;
 *   acc += P·V bf16 P x packed bf16 V panel -> fp32.
 * P is the only value rounded beyond what the naive same-precision
 * implementation rounds (it rounds S, P and O to bf16), so the error stays
 * inside the correctness rule.  fp16 inputs never come here (cpu_plan.c).
 *
 * K and V are packed once per (sequence, kv head) slot, key tile by key
 * tile, on the slot's first use (cpu_forward.c), into the panel layout of
 * cpu_kernels.h: K as the B of S (k = D, n = keys), V as the B of P·V (k =
 * keys, n = D).
 */
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_pack.h"
#include "backends/cpu/cpu_tile.h"
#include "backends/cpu/cpu_trace.h"
#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

static int64_t b16_round(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/// uint16 elements of one key tile's K panel and V panel (bn keys).
static int64_t b16_k_elems(int64_t D, int bn) { return fmsa_cpu_b16_panel_elems((int)D, bn); }
static int64_t b16_v_elems(int64_t D, int bn) { return fmsa_cpu_b16_panel_elems(bn, (int)D); }

int64_t fmsa_cpu_b16_slot_floats(int64_t D, int64_t Dv, int bn, int64_t tiles_k) {
    return b16_round(tiles_k * (b16_k_elems(D, bn) + b16_v_elems(Dv, bn)), 32) / 2;
}

size_t fmsa_cpu_b16_carve(char *base, int bm, int bn, int64_t D, int64_t Dv,
                          fmsa_cpu_b16_tiles *t) {
    const int64_t dk = b16_round(D, 32), dn = b16_round(Dv, 16), dmax = D > Dv ? D : Dv;
    const size_t sizes[7] = {
        fmsa_cpu_round64((size_t)(bm * dk) * 2),        /* q */
        fmsa_cpu_round64((size_t)bm * (size_t)bn * 2),  /* p */
        fmsa_cpu_round64((size_t)bm * (size_t)(bn + FMSA_CPU_B16_S_PAD) * 4), /* s */
        fmsa_cpu_round64((size_t)(bm * dn) * 4),        /* acc */
        fmsa_cpu_round64((size_t)bm * 4),               /* m */
        fmsa_cpu_round64((size_t)bm * 4),               /* l */
        fmsa_cpu_round64((size_t)bn * (size_t)dmax * 4), /* stage (K or V rows) */
    };
    size_t total = 0;
    for (int i = 0; i < 7; ++i) total += sizes[i];
    if (base) {
        t->q = (uint16_t *)base;
        t->p = (uint16_t *)(base += sizes[0]);
        t->s = (float *)(base += sizes[1]);
        t->acc = (float *)(base += sizes[2]);
        t->m = (float *)(base += sizes[3]);
        t->l = (float *)(base += sizes[4]);
        t->stage = (float *)(base += sizes[5]);
        t->acc_ld = dn;
        t->s_ld = bn + FMSA_CPU_B16_S_PAD;
    }
    return total;
}

void fmsa_cpu_b16_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                       float *slot_panels, int64_t ktile, float *stage) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, b = slot / p->heads_kv;
    const int64_t hk = slot % p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int bn = pl->block_n;
    const int64_t j0 = ktile * bn;
    const int cols = (int)(seq.sk - j0 < bn ? seq.sk - j0 : bn);
    uint16_t *kp = (uint16_t *)slot_panels + ktile * b16_k_elems(D, bn);
    uint16_t *vp =
        (uint16_t *)slot_panels + pl->tiles_k * b16_k_elems(D, bn) + ktile * b16_v_elems(Dv, bn);
    if (cols <= 0) return;
    /* bf16 values are the panel's: copied, not converted; a tile with keys no
     * row sees goes through the fp32 stage (exact for bf16 values), where
     * those keys become zeros (fmsa_cpu_dead_keys_zero) */
    if (p->dtype == FMSA_DTYPE_BF16 &&
        fmsa_cpu_dead_keys_zero(p, &seq, b, hk, j0, cols, D, NULL, NULL, 0) == 0) {
        fmsa_cpu_pack_b16_keys_as_cols(pl->kern, p, &p->k, &seq, b, hk, j0, cols, kp);
        fmsa_cpu_pack_b16_keys_as_rows(pl->kern, p, &p->v, &seq, b, hk, j0, cols, vp);
        return;
    }
    fmsa_cpu_pack_rows(p, &p->k, &seq, b, hk, 1, j0, cols, 1.0f, stage);
    fmsa_cpu_dead_keys_zero(p, &seq, b, hk, j0, cols, D, stage, NULL, 0);
    fmsa_cpu_pack_b16((int)D, cols, stage, 1, D, kp); /* B(d, key) = K[key][d] */
    fmsa_cpu_pack_rows(p, &p->v, &seq, b, hk, 1, j0, cols, 1.0f, stage);
    fmsa_cpu_dead_keys_zero(p, &seq, b, hk, j0, cols, Dv, stage, NULL, 0);
    fmsa_cpu_pack_b16(cols, (int)Dv, stage, Dv, 1, vp); /* B(key, d) = V[key][d] */
}

/// t->q rows [0, mp) = bf16 query rows i0.. of head h (zero beyond rows and D).
static void b16_load_q(const fmsa_problem *p, const fmsa_seq *seq, int64_t h, int64_t i0,
                       int rows, int mp, fmsa_cpu_b16_tiles *t) {
    const int64_t D = p->head_dim, dk = b16_round(D, 32);
    const uint16_t *qb = (const uint16_t *)fmsa_view4_host(&p->q);
    for (int r = 0; r < mp; ++r) {
        uint16_t *dst = t->q + (int64_t)r * dk;
        int64_t d0 = 0;
        if (r < rows) {
            memcpy(dst, qb + fmsa_problem_q_offset(&p->q, seq, i0 + r, h), (size_t)D * 2);
            d0 = D;
        }
        memset(dst + d0, 0, (size_t)(dk - d0) * 2);
    }
}

/// One key tile of one work item, as the row steps below see it.
typedef struct b16_tile {
    const fmsa_cpu_kernels *kern;
    fmsa_cpu_b16_tiles *t;
    int64_t Dv, dn;          ///< value head dim, acc row length
    int ld, rows, cols, kp;  ///< P's row stride, valid rows, visible keys, k of P·V
    float exp_scale;         ///< see fmsa_cpu_b16_rows
    const uint16_t *next_k;  ///< the next key tile's panels (NULL: none)
    const uint16_t *next_v;
    int64_t k_elems, v_elems;
} b16_tile;

/// The online-softmax step of row r of the tile: P row r (bf16), m, l and,
/// when the maximum moves, the rescaled acc row.
static void b16_softmax_row(const b16_tile *x, int r) {
    const fmsa_cpu_kernels *kern = x->kern;
    fmsa_cpu_b16_tiles *t = x->t;
    const float *sr = t->s + (int64_t)r * t->s_ld;
    uint16_t *pr = t->p + (int64_t)r * x->ld;
    float tile_max, c;
    if (x->next_k) {
        fmsa_cpu_prefetch_slice(x->next_k, x->k_elems * 2, r, x->rows);
        fmsa_cpu_prefetch_slice(x->next_v, x->v_elems * 2, r, x->rows);
    }
    if (t->m[r] != FMSA_NEG_INF) {
        /* A maximum is known from earlier tiles: exponentiate against it and
         * take this tile's maximum in the same pass, so the row is read once
         * and its exponentials need not wait for a max reduction; the state
         * machine's lazy rescaling (fmsa_softmax_keeps) says whether that
         * maximum may stay, else the row is redone against the new one. */
        float xmax;
        const float sum =
            kern->row_exp2_b16(sr, x->cols, x->exp_scale, t->m[r], pr, x->kp, &xmax);
        tile_max = xmax * x->exp_scale; /* -inf stays -inf */
        if (fmsa_softmax_keeps(t->m[r], tile_max)) {
            t->l[r] += sum;
            return;
        }
    } else {
        tile_max = kern->row_max(sr, x->cols) * x->exp_scale;
        if (tile_max == FMSA_NEG_INF) { /* every key of this row masked so far: P = 0 */
            memset(pr, 0, (size_t)x->kp * 2);
            return;
        }
    }
    c = fmsa_softmax_update(&t->m[r], tile_max);
    if (c != 1.0f && t->l[r] != 0.0f) {
        t->l[r] *= c;
        kern->row_scale(t->acc + (int64_t)r * x->dn, (int)x->Dv, c);
    }
    t->l[r] += kern->row_exp2_b16(sr, x->cols, x->exp_scale, t->m[r], pr, x->kp, NULL);
}

void fmsa_cpu_b16_rows(const fmsa_problem *p, const fmsa_cpu_plan *pl, const fmsa_seq *seq,
                       int64_t b, int64_t h, int64_t i0, int rows, int64_t k_begin,
                       int64_t k_end, const float *slot_panels, fmsa_cpu_b16_tiles *t) {
    const fmsa_cpu_kernels *kern = pl->kern;
    const int64_t D = p->head_dim, Dv = p->head_dim_v, dk = b16_round(D, 32), dn = t->acc_ld;
    const int mp = (int)b16_round(rows, 16), ld = pl->block_n;
    const int64_t k_elems = b16_k_elems(D, ld), v_elems = b16_v_elems(Dv, ld);
    const uint16_t *kpan = (const uint16_t *)slot_panels;
    const uint16_t *vpan = kpan + pl->tiles_k * k_elems;
    /* S holds exact products q·k: scale (and log2 e without softcap) applied in
     * fp32.  Without softcap, ALiBi or a bit mask the transform is only that
     * scale (and the window's -inf), so it rides on the exponent instead:
     * max(scale * s) = scale * max(s) for scale > 0, and P = exp2(s * scale - m)
     * in one fma (exp_scale), which saves a pass over S per key tile.  Only
     * for scale > 0: 0 would make the -inf of masked entries 0 * -inf = NaN
     * (the fuzzer's finding: every O NaN), a negative one the maximum a minimum. */
    const float dot_scale =
        p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    const int fused =
        p->softmax_scale > 0.0f && !(p->softcap > 0.0f) && !p->has_alibi && !p->has_mask;
    const float exp_scale = fused ? dot_scale : 1.0f;
    fmsa_cpu_score sc;
    /* acc is not zeroed up front: the first P·V overwrites it (a row with
     * l = 0 has had only zero probabilities, so rescaling it is skipped);
     * rows that start from a sink (l = 1) may be rescaled before any P·V, so
     * there acc starts at zeros (the same sums: 0 + x = x) */
    int written = p->has_sinks && pl->num_splits == 1;

    fmsa_cpu_score_init(&sc, p, seq, b, h, fused ? 1.0f : dot_scale);
    for (int r = 0; r < rows; ++r)
        fmsa_cpu_softmax_start(p, pl->num_splits == 1, h, &t->m[r], &t->l[r]);
    b16_load_q(p, seq, h, i0, rows, mp, t);
    if (written) fmsa_cpu_zero(t->acc, (int64_t)mp * dn);
    /* padding rows of P stay 0 (their acc rows are never stored) */
    memset(t->p + (int64_t)rows * ld, 0, (size_t)(mp - rows) * ld * 2);
    if (kern->b16_begin) kern->b16_begin();

    for (int64_t j0 = k_begin / ld * ld; j0 < k_end; j0 += ld) {
        /* S, the softmax and P·V stop at k_end (keys from there on are
         * outside every row's window: the causal diagonal's tile); P·V reads
         * the first kp pair rows of a V panel packed for kpanel */
        const int packed = (int)(seq->sk - j0 < ld ? seq->sk - j0 : ld);
        const int cols = (int)(k_end - j0 < packed ? k_end - j0 : packed);
        const int np = (int)b16_round(cols, 16), kp = (int)b16_round(cols, 32);
        const int kpanel = (int)b16_round(packed, 32);
        const int64_t tile = j0 / ld;
        /* the next key tile's panels (K and V: 64 KiB at d = 128), fetched into
         * L2 a slice per row while this tile's softmax runs: the panels are
         * shared by every thread and come from L3, and the tile loads of the
         * products do not train the hardware prefetchers */
        const int next = j0 + ld < k_end;
        const b16_tile x = {kern, t, Dv, dn, ld, rows, cols, kp, exp_scale,
                            next ? kpan + (tile + 1) * k_elems : NULL,
                            next ? vpan + (tile + 1) * v_elems : NULL, k_elems, v_elems};
        double t0;
        if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
        t0 = fmsa_cpu_trace_now(pl->trace);
        kern->gemm_b16(mp, np, (int)dk, t->q, dk, kpan + tile * k_elems, (int)dk, t->s, t->s_ld, 0);
        fmsa_cpu_score_apply(&sc, rows, i0, cols, j0, t->s_ld, t->s, NULL);
        fmsa_cpu_trace_lap(pl->trace, FMSA_CPU_TRACE_S, &t0);
        for (int r = 0; r < rows; ++r) b16_softmax_row(&x, r);
        fmsa_cpu_trace_lap(pl->trace, FMSA_CPU_TRACE_SOFTMAX, &t0);
        kern->gemm_b16(mp, (int)dn, kp, t->p, ld, vpan + tile * v_elems, kpanel, t->acc, dn,
                       written);
        written = 1;
        fmsa_cpu_trace_add(pl->trace, FMSA_CPU_TRACE_PV, t0);
    }
    if (!written) fmsa_cpu_zero(t->acc, (int64_t)mp * dn); /* no key reached these rows */
}
