/*
 * The backward pass of bf16 inputs on 16-bit products (AMX tdpbf16ps,
 * AVX512-BF16 vdpbf16ps, or the portable twin), in the same two stages and
 * work items as cpu_backward.c (dK/dV per key tile, dQ per query tile, no
 * atomics), with every product bf16 x bf16 -> fp32:
 *
 *   S   = Q·Kᵀ      A = Q rows (bf16, exact)   B = K panel (k = D, n = keys)
 *   dP  = dO·Vᵀ     A = dO rows                B = V panel (k = D, n = keys)
 *   dVᵀ += dOᵀ·P    A = dOᵀ (packed per query tile)  B = P in the panel layout
 *   dKᵀ += Qᵀ·dS    A = Qᵀ                     B = dS in the panel layout
 *   dQ  += dS·K     A = dS rows (bf16)         B = K panel (k = keys, n = D)
 *
 * With dQ partials or ordered dQ (plan->dq_parts > 0, cpu_backward.c) the
 * dK/dV item also adds dQ partial += dS·K (A = the same bf16 dS rows, B =
 * the K panel with k = keys) into its part's rows (ordered: the one
 * partial, in turn), and the dQ stage only sums them: 5 products per
 * (query tile, key tile) instead of 7.
 *
 * dK and dV are accumulated transposed ([D][keys], fp32) so that P and dS
 * enter as the B operand, which the panel layout takes straight from their
 * row-major fp32 tiles (pairs of query rows interleaved): no transpose of P
 * or dS per tile, only one of the fp32 accumulators per key tile at the end.
 *
 * Rounding: Q, K, V, dO are exact in bf16 (the inputs); P and dS are rounded
 * to bf16 before their products, as the naive same-precision implementation
 * rounds them (it also rounds S, dP and every output); accumulation is fp32.
 * fp16 inputs never come here (cpu_plan.c asks the planner for these rows
 * with bf16 only).
 */
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_pack.h"
#include "backends/cpu/cpu_tile.h"
#include "common/fmsa_half.h"
#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

static int64_t b16b_round(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/// Geometry of one plan's bf16 backward panels and tiles (uint16 element counts).
typedef struct b16b_geo {
    int64_t D, dk, dn, bm, bn, bm32; ///< head dim, D to 32, D to 16, Br, Bc, Br to 32
    int64_t Dv, dvk, dvn;            ///< value head dim, Dv to 32, Dv to 16
    int64_t kbe, vbe, kre;           ///< K / V panel of a key tile as B of S / dP; K as B of dQ
    int64_t rowa, rowt;              ///< Q rows of a query tile (A of S); transposed (A of dKᵀ)
    int64_t rowav, rowtv;            ///< dO rows (A of dP); transposed (A of dVᵀ)
    int64_t group, tiles_q, tiles_k;
    int64_t parts;                   ///< dQ partials' parts (0: dQ recomputes)
} b16b_geo;

static b16b_geo b16b_geometry(const fmsa_problem *p, int bm, int bn, int64_t tiles_q,
                              int64_t tiles_k, int64_t parts) {
    b16b_geo g;
    g.D = p->head_dim;
    g.dk = b16b_round(g.D, 32);
    g.dn = b16b_round(g.D, 16);
    g.Dv = p->head_dim_v;
    g.dvk = b16b_round(g.Dv, 32);
    g.dvn = b16b_round(g.Dv, 16);
    g.bm = bm;
    g.bn = bn;
    g.bm32 = b16b_round(bm, 32);
    g.kbe = fmsa_cpu_b16_panel_elems((int)g.D, bn);
    g.vbe = fmsa_cpu_b16_panel_elems((int)g.Dv, bn);
    g.kre = fmsa_cpu_b16_panel_elems(bn, (int)g.D);
    g.rowa = (int64_t)bm * g.dk;
    g.rowt = g.dn * g.bm32;
    g.rowav = (int64_t)bm * g.dvk;
    g.rowtv = g.dvn * g.bm32;
    g.group = p->heads_q / p->heads_kv;
    g.tiles_q = tiles_q;
    g.tiles_k = tiles_k;
    g.parts = parts;
    return g;
}

/// The geometry of plan pl.
static b16b_geo b16b_plan_geometry(const fmsa_problem *p, const fmsa_cpu_plan *pl) {
    return b16b_geometry(p, pl->block_m, pl->block_n, pl->tiles_q, pl->tiles_k, pl->dq_parts);
}

/// uint16 elements of a slot's bf16 part (rounded to 64 bytes).
static int64_t b16b_u16(const b16b_geo *g) {
    return b16b_round(g->tiles_k * (g->kbe + g->vbe + g->kre) +
                          g->group * g->tiles_q * (g->rowa + g->rowav + g->rowt + g->rowtv),
                      32);
}

int64_t fmsa_cpu_b16_bwd_slot_floats(const fmsa_problem *p, int bm, int bn, int64_t tiles_q,
                                     int64_t tiles_k) {
    const b16b_geo g = b16b_geometry(p, bm, bn, tiles_q, tiles_k, 0);
    return b16b_u16(&g) / 2 + 2 * g.group * g.tiles_q * g.bm;
}

/// One slot's panels; with dQ partials they follow delta (cpu_plan.c adds
/// their floats to the slot's).
typedef struct b16b_panels {
    uint16_t *kb, *vb, *kr;         ///< per key tile: kbe, vbe, kre elements
    uint16_t *qa, *doa, *qt, *dot;  ///< per (head of group, query tile): rowa, rowav, rowt, rowtv
    float *lse2, *delta;            ///< per (head of group, query row)
    fmsa_cpu_dq_partials dq;        ///< rows of dn floats; rows/written NULL without parts
} b16b_panels;

static b16b_panels b16b_slot(const b16b_geo *g, float *slot_panels) {
    b16b_panels x;
    const int64_t heads_tiles = g->group * g->tiles_q;
    x.kb = (uint16_t *)slot_panels;
    x.vb = x.kb + g->tiles_k * g->kbe;
    x.kr = x.vb + g->tiles_k * g->vbe;
    x.qa = x.kr + g->tiles_k * g->kre;
    x.doa = x.qa + heads_tiles * g->rowa;
    x.qt = x.doa + heads_tiles * g->rowav;
    x.dot = x.qt + heads_tiles * g->rowt;
    x.lse2 = slot_panels + b16b_u16(g) / 2;
    x.delta = x.lse2 + heads_tiles * g->bm;
    x.dq.ld = g->dn;
    x.dq.head_rows = g->tiles_q * g->bm;
    x.dq.rows = g->parts > 0 ? x.delta + heads_tiles * g->bm : NULL;
    x.dq.written = g->parts > 0 ? x.dq.rows + g->parts * heads_tiles * g->bm * g->dn : NULL;
    return x;
}

fmsa_cpu_dq_partials fmsa_cpu_b16_bwd_partials(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                               float *slot_panels) {
    const b16b_geo g = b16b_plan_geometry(p, pl);
    return b16b_slot(&g, slot_panels).dq;
}

/// One thread's tiles.
typedef struct b16b_tiles {
    float *stage;        ///< [max(Br, Bc)][max(D, Dv)] fp32 staging (packing; rows when storing)
    float *s, *dp, *gr;  ///< [Br][Bc] S -> P, dP -> dS, softcap derivative
    uint16_t *pp, *dsp;  ///< P, dS in the panel layout (k = query rows, n = keys)
    uint16_t *dsa;       ///< [Br][Bc] dS rows in bf16 (A of dQ)
    float *dkt, *dvt;    ///< [dn][Bc], [dvn][Bc] transposed dK, dV accumulators
    float *dq;           ///< [Br][dn] dQ accumulator
    uint16_t *opan;      ///< O rows of a query tile as a B panel (k = Dv, n = rows): delta
} b16b_tiles;

static size_t b16b_carve(const b16b_geo *g, char *base, b16b_tiles *t) {
    const int64_t rows = g->bm > g->bn ? g->bm : g->bn, dmax = g->D > g->Dv ? g->D : g->Dv;
    const size_t score = fmsa_cpu_round64((size_t)(g->bm * g->bn) * 4);
    const size_t panel = fmsa_cpu_round64((size_t)fmsa_cpu_b16_panel_elems((int)g->bm, (int)g->bn) * 2);
    const size_t sizes[11] = {
        fmsa_cpu_round64((size_t)(rows * dmax) * 4), score, score, score, panel, panel,
        fmsa_cpu_round64((size_t)(g->bm * g->bn) * 2),
        fmsa_cpu_round64((size_t)(g->dn * g->bn) * 4), fmsa_cpu_round64((size_t)(g->dvn * g->bn) * 4),
        fmsa_cpu_round64((size_t)(b16b_round(g->bm, 16) * g->dn) * 4),
        fmsa_cpu_round64((size_t)fmsa_cpu_b16_panel_elems((int)g->Dv, (int)g->bm) * 2),
    };
    size_t total = 0;
    for (int i = 0; i < 11; ++i) total += sizes[i];
    if (base) {
        void **f[11] = {(void **)&t->stage, (void **)&t->s, (void **)&t->dp, (void **)&t->gr,
                        (void **)&t->pp, (void **)&t->dsp, (void **)&t->dsa, (void **)&t->dkt,
                        (void **)&t->dvt, (void **)&t->dq, (void **)&t->opan};
        for (int i = 0; i < 11; ++i) {
            *f[i] = base;
            base += sizes[i];
        }
    }
    return total;
}

size_t fmsa_cpu_b16_bwd_scratch_bytes(const fmsa_problem *p, int bm, int bn) {
    const b16b_geo g = b16b_geometry(p, bm, bn, 1, 1, 0);
    return b16b_carve(&g, NULL, NULL);
}

/// dst[0:npad] = bf16(x[0:n]), zeros beyond n (the kernel's, else in C).
static void b16b_row_to_b16(const fmsa_cpu_kernels *kern, const float *x, int n, uint16_t *dst,
                            int npad) {
    if (kern->row_to_b16) {
        kern->row_to_b16(x, n, dst, npad);
        return;
    }
    for (int j = 0; j < n; ++j) dst[j] = fmsa_f32_to_bf16(x[j]);
    for (int j = n; j < npad; ++j) dst[j] = 0;
}

/// The k x n row-major fp32 tile b (ld ldb) into the panel layout (the kernel's, else in C).
static void b16b_pack_rows(const fmsa_cpu_kernels *kern, int k, int n, const float *b,
                           int64_t ldb, uint16_t *dst) {
    if (kern->pack_b16_rows) kern->pack_b16_rows(k, n, b, ldb, dst);
    else fmsa_cpu_pack_b16(k, n, b, ldb, 1, dst);
}

/// Rows [0, rows) of stage ([rows][D] fp32; D the row's head dim, dk and dn
/// its roundings to 32 and 16) as A rows ([bm][dk], zero padded) and
/// transposed ([dn][bm32], zero padded).
static void b16b_pack_query(const b16b_geo *g, int64_t D, int64_t dk, int64_t dn,
                            const float *stage, int rows, uint16_t *a, uint16_t *at) {
    for (int64_t r = 0; r < g->bm; ++r) {
        uint16_t *dst = a + r * dk;
        int64_t d = 0;
        if (r < rows)
            for (; d < D; ++d) dst[d] = fmsa_f32_to_bf16(stage[r * D + d]);
        for (; d < dk; ++d) dst[d] = 0;
    }
    for (int64_t d = 0; d < dn; ++d) {
        uint16_t *dst = at + d * g->bm32;
        for (int64_t i = 0; i < g->bm32; ++i)
            dst[i] = d < D && i < rows ? fmsa_f32_to_bf16(stage[i * D + d]) : 0;
    }
}

/// The same from the bf16 input rows themselves (query rows i0.. of head h
/// of view v): copies of their values, no fp32 round trip.
static void b16b_pack_query_b16(const b16b_geo *g, const fmsa_problem *p, const fmsa_view4 *v,
                                const fmsa_seq *seq, int64_t h, int64_t i0, int rows,
                                uint16_t *a, uint16_t *at) {
    const uint16_t *base = (const uint16_t *)fmsa_view4_host(v);
    const int64_t D = fmsa_cpu_view_dim(p, v), dk = b16b_round(D, 32), dn = b16b_round(D, 16);
    memset(at, 0, (size_t)(dn * g->bm32) * 2);
    for (int64_t r = 0; r < g->bm; ++r) {
        uint16_t *dst = a + r * dk;
        const uint16_t *src;
        if (r >= rows) {
            memset(dst, 0, (size_t)dk * 2);
            continue;
        }
        src = base + fmsa_problem_q_offset(v, seq, i0 + r, h);
        memcpy(dst, src, (size_t)D * 2);
        memset(dst + D, 0, (size_t)(dk - D) * 2);
        for (int64_t d = 0; d < D; ++d) at[d * g->bm32 + r] = src[d];
    }
}

/// t->opan = O rows i0.. (rows of them) of head h as a B panel (k = Dv, n = rows to 16).
static void b16b_pack_o(const fmsa_cpu_kernels *kern, const b16b_geo *g, const fmsa_problem *p,
                        const fmsa_seq *seq, int64_t b, int64_t h, int64_t i0, int rows,
                        float *stage, uint16_t *opan) {
    if (p->dtype != FMSA_DTYPE_BF16) {
        fmsa_cpu_pack_rows(p, &p->o, seq, b, h, 0, i0, rows, 1.0f, stage);
        fmsa_cpu_pack_b16((int)g->Dv, rows, stage, 1, g->Dv, opan); /* B(d, i) = O[i][d] */
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const uint16_t *src[16];
        for (int r = 0; r < 16; ++r)
            src[r] = r0 + r < rows ? (const uint16_t *)fmsa_view4_host(&p->o) +
                                         fmsa_problem_q_offset(&p->o, seq, i0 + r0 + r, h)
                                   : NULL;
        fmsa_cpu_pack_b16_cols16(kern, src, (int)g->Dv, opan + (int64_t)(r0 / 16) * g->dvk * 16);
    }
}

void fmsa_cpu_b16_bwd_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                           float *slot_panels, int64_t job, char *scratch) {
    const b16b_geo g = b16b_plan_geometry(p, pl);
    const b16b_panels x = b16b_slot(&g, slot_panels);
    const int64_t D = g.D, Dv = g.Dv, b = slot / p->heads_kv, hk = slot % p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    b16b_tiles t;
    b16b_carve(&g, scratch, &t);
    if (job < g.tiles_k) {
        const int64_t j0 = job * g.bn;
        const int cols = (int)(seq.sk - j0 < g.bn ? seq.sk - j0 : g.bn);
        if (cols <= 0) return;
        if (p->dtype == FMSA_DTYPE_BF16) { /* copies of the inputs' bf16 values */
            const fmsa_cpu_kernels *kern = pl->kern;
            fmsa_cpu_pack_b16_keys_as_cols(kern, p, &p->k, &seq, b, hk, j0, cols, x.kb + job * g.kbe);
            fmsa_cpu_pack_b16_keys_as_rows(kern, p, &p->k, &seq, b, hk, j0, cols, x.kr + job * g.kre);
            fmsa_cpu_pack_b16_keys_as_cols(kern, p, &p->v, &seq, b, hk, j0, cols, x.vb + job * g.vbe);
            return;
        }
        fmsa_cpu_pack_rows(p, &p->k, &seq, b, hk, 1, j0, cols, 1.0f, t.stage);
        fmsa_cpu_pack_b16((int)D, cols, t.stage, 1, D, x.kb + job * g.kbe); /* B(d, key) */
        fmsa_cpu_pack_b16(cols, (int)D, t.stage, D, 1, x.kr + job * g.kre); /* B(key, d) */
        fmsa_cpu_pack_rows(p, &p->v, &seq, b, hk, 1, j0, cols, 1.0f, t.stage);
        fmsa_cpu_pack_b16((int)Dv, cols, t.stage, 1, Dv, x.vb + job * g.vbe);
    } else {
        const int64_t gi = (job - g.tiles_k) / g.tiles_q, qt = (job - g.tiles_k) % g.tiles_q;
        const int64_t h = hk * g.group + gi, i0 = qt * g.bm, ht = gi * g.tiles_q + qt;
        const int rows = (int)(seq.sq - i0 < g.bm ? seq.sq - i0 : g.bm);
        const float *lse = (const float *)fmsa_viewn_host(&p->lse);
        if (rows <= 0) return;
        if (p->dtype == FMSA_DTYPE_BF16) {
            b16b_pack_query_b16(&g, p, &p->q, &seq, h, i0, rows, x.qa + ht * g.rowa,
                                x.qt + ht * g.rowt);
            b16b_pack_query_b16(&g, p, &p->dout, &seq, h, i0, rows, x.doa + ht * g.rowav,
                                x.dot + ht * g.rowtv);
        } else {
            fmsa_cpu_pack_rows(p, &p->q, &seq, b, h, 0, i0, rows, 1.0f, t.stage);
            b16b_pack_query(&g, D, g.dk, g.dn, t.stage, rows, x.qa + ht * g.rowa,
                            x.qt + ht * g.rowt);
            fmsa_cpu_pack_rows(p, &p->dout, &seq, b, h, 0, i0, rows, 1.0f, t.stage);
            b16b_pack_query(&g, Dv, g.dvk, g.dvn, t.stage, rows, x.doa + ht * g.rowav,
                            x.dot + ht * g.rowtv);
        }
        /* delta_i = dO_i · O_i through the very product that makes dP_ij =
         * dO_i · V_j (same A rows, same panel layout, k = D from 0): where P
         * is one-hot, O_i == V_j exactly and dS = P * (dP - delta) must come
         * out exactly 0, as in the reference.  The diagonal of dO·Oᵀ, 16 rows
         * at a time (no fp32 preprocess and no workspace on this path); dlse
         * is subtracted after the product. */
        b16b_pack_o(pl->kern, &g, p, &seq, b, h, i0, rows, t.stage, t.opan);
        if (pl->kern->b16_begin) pl->kern->b16_begin();
        for (int r0 = 0; r0 < rows; r0 += 16) {
            pl->kern->gemm_b16(16, 16, (int)g.dvk, x.doa + ht * g.rowav + r0 * g.dvk, g.dvk,
                               t.opan + (int64_t)(r0 / 16) * g.dvk * 16, (int)g.dvk, t.dp, 16, 0);
            for (int r = r0; r < rows && r < r0 + 16; ++r)
                x.delta[ht * g.bm + r] = t.dp[(r - r0) * 16 + (r - r0)];
        }
        if (p->has_dlse) {
            const float *dlse = (const float *)fmsa_viewn_host(&p->dlse);
            for (int r = 0; r < rows; ++r)
                x.delta[ht * g.bm + r] -= dlse[fmsa_problem_dlse_offset(p, &seq, i0 + r, h)];
        }
        for (int r = 0; r < rows; ++r)
            x.lse2[ht * g.bm + r] = lse[fmsa_problem_lse_offset(p, &seq, i0 + r, h)] * FMSA_LOG2E;
        fmsa_cpu_bwd_dsink_tile(p, pl, &seq, b, h, qt, rows, x.delta + ht * g.bm);
    }
}

/// S -> P (t->s) and dP -> dS (t->dp) of query tile ht (rows from i0) against key tile kt.
static void b16b_ds(const fmsa_cpu_plan *pl, const b16b_geo *g, const b16b_panels *x,
                    const fmsa_cpu_score *sc, int64_t ht, int64_t i0, int rows, int64_t kt,
                    int64_t j0, int cols, b16b_tiles *t) {
    const fmsa_cpu_kernels *kern = pl->kern;
    const int mp = (int)b16b_round(rows, 16), np = (int)b16b_round(cols, 16);
    float *gr = sc->softcap > 0.0f ? t->gr : NULL;
    kern->gemm_b16(mp, np, (int)g->dk, x->qa + ht * g->rowa, g->dk, x->kb + kt * g->kbe,
                   (int)g->dk, t->s, g->bn, 0);
    fmsa_cpu_score_apply(sc, rows, i0, cols, j0, (int)g->bn, t->s, gr);
    kern->gemm_b16(mp, np, (int)g->dvk, x->doa + ht * g->rowav, g->dvk, x->vb + kt * g->vbe,
                   (int)g->dvk, t->dp, g->bn, 0);
    for (int r = 0; r < rows; ++r) {
        float *sr = t->s + r * g->bn, *dpr = t->dp + r * g->bn;
        const float lse2 = x->lse2[ht * g->bm + r];
        if (lse2 == FMSA_NEG_INF) { /* fully masked row: P = 0, dS = 0 */
            for (int c = 0; c < cols; ++c) sr[c] = dpr[c] = 0.0f;
            continue;
        }
        kern->row_bwd_ds(sr, dpr, gr ? gr + r * g->bn : NULL, cols, lse2,
                         x->delta[ht * g->bm + r]);
    }
}

/// dS rows (fp32 t->dp, rows x cols of ld bn) to bf16 A rows (t->dsa, k padded
/// to 32, rows padded to 16 with zeros).
static void b16b_ds_rows(const fmsa_cpu_kernels *kern, const b16b_geo *g, int rows, int cols,
                         b16b_tiles *t) {
    const int kc = (int)b16b_round(cols, 32), mp = (int)b16b_round(rows, 16);
    for (int r = 0; r < rows; ++r)
        b16b_row_to_b16(kern, t->dp + r * g->bn, cols, t->dsa + r * g->bn, kc);
    memset(t->dsa + (int64_t)rows * g->bn, 0, (size_t)((mp - rows) * g->bn) * 2);
}

/// Stores key rows j0 .. j0 + cols of view v (dK or dV, times scale) from the
/// transposed accumulator acc_t ([dn][bn]): 16 keys at a time, turned into
/// rows of stage (row stride dn, so a head dim that is not a multiple of 16
/// never spills into the next row) by the kernel's word transpose, not an
/// element-by-element gather, which was a visible share of the bf16
/// backward (bench/RESULTS.md).
static void b16b_store_keys_t(const fmsa_cpu_kernels *kern, const b16b_geo *g,
                              const fmsa_problem *p, const fmsa_view4 *v, const fmsa_seq *seq,
                              int64_t b, int64_t hk, int64_t j0, int cols, float scale,
                              const float *acc_t, float *stage) {
    char *base = fmsa_view4_host(v);
    const int64_t D = fmsa_cpu_view_dim(p, v), dn = b16b_round(D, 16);
    for (int c0 = 0; c0 < cols; c0 += 16) {
        const int n = cols - c0 < 16 ? cols - c0 : 16;
        if (kern->words_t16) {
            for (int64_t d0 = 0; d0 < D; d0 += 16) {
                const void *src[16];
                for (int i = 0; i < 16; ++i)
                    src[i] = d0 + i < D ? (const void *)(acc_t + (d0 + i) * g->bn + c0) : NULL;
                kern->words_t16(src, n, n, (uint32_t *)(stage + d0), dn);
            }
        } else {
            for (int c = 0; c < n; ++c)
                for (int64_t d = 0; d < D; ++d) stage[c * dn + d] = acc_t[d * g->bn + c0 + c];
        }
        for (int c = 0; c < n; ++c)
            fmsa_cpu_row_store_kern(kern, base, p->dtype,
                                    fmsa_problem_k_offset(p, v, seq, b, j0 + c0 + c, hk), D,
                                    scale, stage + c * dn);
    }
}

void fmsa_cpu_b16_bwd_dkdv(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                           float *slot_panels, int64_t kt, int64_t part, atomic_int *turns,
                           char *scratch) {
    const b16b_geo g = b16b_plan_geometry(p, pl);
    const b16b_panels x = b16b_slot(&g, slot_panels);
    const fmsa_cpu_kernels *kern = pl->kern;
    const int64_t b = slot / p->heads_kv, hk = slot % p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t j0 = kt * g.bn;
    const float dot_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    b16b_tiles t;
    int cols, np;
    if (j0 >= seq.sk) return;
    cols = (int)(seq.sk - j0 < g.bn ? seq.sk - j0 : g.bn);
    np = (int)b16b_round(cols, 16);
    b16b_carve(&g, scratch, &t);
    if (kern->b16_begin) kern->b16_begin();
    fmsa_cpu_zero(t.dkt, g.dn * g.bn);
    fmsa_cpu_zero(t.dvt, g.dvn * g.bn);
    for (int64_t gi = 0; gi < g.group; ++gi) {
        const int64_t h = hk * g.group + gi;
        fmsa_cpu_score sc;
        fmsa_cpu_score_init(&sc, p, &seq, b, h, dot_scale);
        for (int64_t i0 = 0; i0 < seq.sq; i0 += g.bm) {
            const int rows = (int)(seq.sq - i0 < g.bm ? seq.sq - i0 : g.bm);
            const int kq = (int)b16b_round(rows, 32);
            const int64_t ht = gi * g.tiles_q + i0 / g.bm;
            atomic_int *turn = turns ? &turns[ht] : NULL;
            if (!fmsa_window_tile_visible(i0, i0 + rows, j0, j0 + cols, seq.sq, seq.sk,
                                          p->window_left, p->window_right) ||
                !fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) {
                fmsa_cpu_turn_skip(turn, kt);
                continue;
            }
            b16b_ds(pl, &g, &x, &sc, ht, i0, rows, kt, j0, cols, &t);
            /* P, dS (rounded to bf16) as B: dVᵀ += dOᵀ·P, dKᵀ += Qᵀ·dS */
            b16b_pack_rows(kern, rows, cols, t.s, g.bn, t.pp);
            b16b_pack_rows(kern, rows, cols, t.dp, g.bn, t.dsp);
            kern->gemm_b16((int)g.dvn, np, kq, x.dot + ht * g.rowtv, g.bm32, t.pp, kq, t.dvt, g.bn,
                           1);
            kern->gemm_b16((int)g.dn, np, kq, x.qt + ht * g.rowt, g.bm32, t.dsp, kq, t.dkt, g.bn,
                           1);
            if (g.parts > 0) { /* dQ partial += dS·K; the part's first write overwrites */
                const int64_t hq = part * g.group + gi;
                const int kc = (int)b16b_round(cols, 32);
                float *written = x.dq.written + hq * g.tiles_q + i0 / g.bm;
                b16b_ds_rows(kern, &g, rows, cols, &t);
                fmsa_cpu_turn_wait(turn, kt);
                kern->gemm_b16((int)b16b_round(rows, 16), (int)g.dn, kc, t.dsa, g.bn,
                               x.kr + kt * g.kre, kc, x.dq.rows + (hq * x.dq.head_rows + i0) * g.dn,
                               g.dn, *written != 0.0f);
                *written = 1.0f;
                fmsa_cpu_turn_pass(turn, kt);
            }
        }
    }
    b16b_store_keys_t(kern, &g, p, &p->dk, &seq, b, hk, j0, cols, p->softmax_scale, t.dkt,
                      t.stage);
    b16b_store_keys_t(kern, &g, p, &p->dv, &seq, b, hk, j0, cols, 1.0f, t.dvt, t.stage);
}

void fmsa_cpu_b16_bwd_dq(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                         float *slot_panels, int64_t sub, int64_t qt, char *scratch) {
    const b16b_geo g = b16b_plan_geometry(p, pl);
    const b16b_panels x = b16b_slot(&g, slot_panels);
    const fmsa_cpu_kernels *kern = pl->kern;
    const int64_t D = g.D, b = slot / p->heads_kv;
    const int64_t h = (slot % p->heads_kv) * g.group + sub;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t i0 = qt * g.bm, ht = sub * g.tiles_q + qt, ld = g.bn;
    const float dot_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    fmsa_cpu_score sc;
    b16b_tiles t;
    int rows, mp;
    int64_t kb, ke;
    if (i0 >= seq.sq) return;
    rows = (int)(seq.sq - i0 < g.bm ? seq.sq - i0 : g.bm);
    mp = (int)b16b_round(rows, 16);
    kb = fmsa_window_key_begin(i0, seq.sq, seq.sk, p->window_left);
    ke = fmsa_window_key_end(i0 + rows, seq.sq, seq.sk, p->window_right);
    b16b_carve(&g, scratch, &t);
    if (kern->b16_begin) kern->b16_begin();
    fmsa_cpu_score_init(&sc, p, &seq, b, h, dot_scale);
    fmsa_cpu_zero(t.dq, (int64_t)mp * g.dn);
    for (int64_t j0 = kb / ld * ld; j0 < ke; j0 += ld) {
        const int cols = (int)(seq.sk - j0 < ld ? seq.sk - j0 : ld);
        const int kc = (int)b16b_round(cols, 32);
        if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
        b16b_ds(pl, &g, &x, &sc, ht, i0, rows, j0 / ld, j0, cols, &t);
        b16b_ds_rows(kern, &g, rows, cols, &t);
        kern->gemm_b16(mp, (int)g.dn, kc, t.dsa, ld, x.kr + (j0 / ld) * g.kre, kc, t.dq, g.dn, 1);
    }
    for (int r = 0; r < rows; ++r) /* t.dq is not read again: scaled in place */
        fmsa_cpu_row_store_kern(kern, fmsa_view4_host(&p->dq), p->dtype,
                                fmsa_problem_q_offset(&p->dq, &seq, i0 + r, h), D,
                                p->softmax_scale, t.dq + (int64_t)r * g.dn);
}
