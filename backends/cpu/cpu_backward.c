/*
 * CPU backward in the three stages of FlashAttention-2 (Dao 2023, §3.2):
 *
 *   preprocess  D_i = rowsum(dO_i * O_i) into the workspace (fp32);
 *   main (a)    parallel over (sequence, kv head, key tile): recompute
 *               P = exp2(S2 - lse2) for every query head of the GQA group and
 *               every query tile that can see the key tile, accumulate
 *               dV += Pᵀ·dO and dK += dSᵀ·Q, dS = P * (dP - D) * softcap';
 *   main (b)    parallel over (sequence, query head, query tile): dQ = dS·K.
 *
 * Per chunk of (sequence, kv head) slots, K, Kᵀ, Vᵀ and every group head's
 * Q, dO, lse2, D are packed once into fp32 panels (cpu_pack.h) that both
 * stages read (fp32 inputs: Q, dO and K rows are read in place instead, the
 * products taking their row strides); the five products run through the ISA's micro-kernels
 * (S = Q·Kᵀ, dP = dO·Vᵀ, dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K), items
 * heaviest first.  Two choices make the variant, each one table of
 * functions picked by one decision function:
 *   - the products (cpu_bwd_variant_of): fp32-staged, here, or bf16 products
 *     (cpu_backward_b16.c);
 *   - the dQ owner (cpu_bwd_owner_of; the plan picks it by shape in
 *     cpu_plan.c), since without atomics dQ = sum_j dS_j·K_j needs one owner
 *     per row at a time:
 *     PARTS: stage (a) runs over parts of a slot's key tiles, each adding dS·K
 *       into its own dQ partial (10 products per tile pair, as FA2), and
 *       stage (b) sums a query tile's partials in part order;
 *     ORDERED: stage (a) runs over key tiles, each adding dS·K into the slot's
 *       one partial in key tile order (turns, cpu_sched.h), and stage (b)
 *       stores it: 10 products, and the sums of RECOMPUTE in the same order;
 *     RECOMPUTE: stage (b) recomputes S and dP (14 products), where even one
 *       partial per slot would not fit the panel budget.
 *     history: bench/RESULTS.md
 *
 * Each output row is owned by exactly one work item of one stage and summed
 * in a fixed order, so there are no atomics and the result is bit-identical
 * for any thread count: the CPU backward is always deterministic, whatever
 * desc->deterministic says.  The accumulators are per-thread fp32 tiles and
 * are converted to the output dtype once per row ("postprocess" folded into
 * each stage's store).  P and S are never stored beyond one tile.
 */
#include <math.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_pack.h"
#include "backends/cpu/cpu_tile.h"
#include "backends/cpu/cpu_trace.h"
#include "common/error.h"
#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

/// One thread's tiles for either main stage (unused ones stay NULL).
typedef struct cpu_bwd_tiles {
    float *dq;         ///< [block_m][D] dQ accumulator (stage b)
    float *dk, *dv;    ///< [block_n][D] dK, [block_n][Dv] dV accumulators (stage a)
    float *s, *dp, *g; ///< [block_m][block_n] scores -> P, dP -> dS, softcap derivative
} cpu_bwd_tiles;

/// Carves one thread's tiles; stage_a selects the dK/dV stage's set.
static cpu_bwd_tiles cpu_bwd_carve(char *base, const fmsa_cpu_plan *pl, const fmsa_problem *p,
                                   int stage_a) {
    cpu_bwd_tiles t = {0};
    const size_t D = (size_t)p->head_dim, Dv = (size_t)p->head_dim_v;
    const size_t row_tile = fmsa_cpu_round64((size_t)pl->block_m * D * sizeof(float));
    const size_t key_tile = fmsa_cpu_round64((size_t)pl->block_n * D * sizeof(float));
    const size_t val_tile = fmsa_cpu_round64((size_t)pl->block_n * Dv * sizeof(float));
    const size_t score = fmsa_cpu_round64((size_t)pl->block_m * pl->block_n * sizeof(float));
#define CPU_TAKE(field, bytes) (t.field = (float *)base, base += (bytes))
    if (stage_a) {
        CPU_TAKE(dk, key_tile);
        CPU_TAKE(dv, val_tile);
    } else { /* the same extent as stage (a)'s, as cpu_plan.c counts it */
        CPU_TAKE(dq, key_tile + val_tile > row_tile ? key_tile + val_tile : row_tile);
    }
    (void)row_tile;
    CPU_TAKE(s, score);
    CPU_TAKE(dp, score);
    CPU_TAKE(g, score);
#undef CPU_TAKE
    return t;
}

/// One slot's packed panels (layout in cpu_plan.c).
typedef struct cpu_bwd_panels {
    float *kt, *vt;  ///< [tiles_k][D or Dv][block_n] transposed key / value tiles
    float *k;        ///< [tiles_k * block_n][D] key rows
    float *q, *dout; ///< per query head of the group: [tiles_q * block_m][D or Dv]
    float *lse2;     ///< per query head: lse * log2(e)
    float *delta;    ///< per query head: D_i
    fmsa_cpu_dq_partials dq; ///< dq_parts > 0: rows of D floats (else NULL)
    int64_t head_rows; ///< tiles_q * block_m: stride between query heads' panels
    int64_t dv_dim;    ///< Dv: rows of Vᵀ tiles, k of dP = dO·Vᵀ
} cpu_bwd_panels;

static cpu_bwd_panels cpu_bwd_slot(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                   float *slot_panels) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, keys = pl->tiles_k * pl->block_n;
    const int64_t group = p->heads_q / p->heads_kv, copies = fmsa_cpu_bwd_packs_rows(p);
    cpu_bwd_panels x;
    float *base = slot_panels;
    x.head_rows = pl->tiles_q * pl->block_m;
    x.dv_dim = Dv;
    x.kt = base;
    x.vt = x.kt + keys * D;
    x.k = x.vt + keys * Dv; /* the row panels are empty when read in place */
    x.q = x.k + copies * keys * D;
    x.dout = x.q + copies * group * x.head_rows * D;
    x.lse2 = x.dout + copies * group * x.head_rows * Dv;
    x.delta = x.lse2 + group * x.head_rows;
    x.dq.ld = D;
    x.dq.head_rows = x.head_rows;
    x.dq.rows = pl->dq_parts > 0 ? x.delta + group * x.head_rows : NULL;
    x.dq.written = pl->dq_parts > 0 ? x.dq.rows + pl->dq_parts * group * x.head_rows * D : NULL;
    return x;
}

void fmsa_cpu_bwd_dsink_tile(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                             const fmsa_seq *seq, int64_t b, int64_t h, int64_t qt, int rows,
                             const float *delta) {
    const float *lse;
    double t, sum = 0.0;
    if (!p->has_dsink) return;
    lse = (const float *)fmsa_viewn_host(&p->lse);
    t = ((const float *)fmsa_viewn_host(&p->sinks))[h * p->sinks.s0];
    for (int r = 0; r < rows; ++r) { /* the sink's probability exp(t - lse_i) times D_i - dlse_i */
        const double l = lse[fmsa_problem_lse_offset(p, seq, qt * pl->block_m + r, h)];
        if (l != -INFINITY) sum += exp(t - l) * (double)delta[r];
    }
    pl->dsink_parts[(b * p->heads_q + h) * pl->tiles_q + qt] = -sum;
}

/// dsink_h = the sum of its (sequence, query tile) partials, in that order:
/// bitwise the same for any thread count.
static void cpu_bwd_dsink_sum(const fmsa_problem *p, const fmsa_cpu_plan *pl) {
    float *out = (float *)fmsa_viewn_host(&p->dsink);
    for (int64_t h = 0; h < p->heads_q; ++h) {
        double sum = 0.0;
        for (int64_t b = 0; b < p->batch; ++b) {
            const fmsa_seq seq = fmsa_problem_seq(p, b);
            for (int64_t qt = 0; qt * pl->block_m < seq.sq; ++qt)
                sum += pl->dsink_parts[(b * p->heads_q + h) * pl->tiles_q + qt];
        }
        out[h * p->dsink.s0] = (float)sum;
    }
}

/// Index of row i of (seq, h) in the D workspace (laid out like lse).
static int64_t cpu_delta_index(const fmsa_problem *p, const fmsa_seq *seq, int64_t h, int64_t i) {
    return (seq->q_batch * p->heads_q + h) * p->total_q + seq->q_row0 + i;
}

/// Preprocess: delta = rowsum(dO * O) - dlse for every query row of every
/// head.  The dot product runs through the same kernel (and so the same
/// rounding) as dP = dO·Vᵀ: where P is one-hot, O == V exactly and dS = P *
/// (dP - delta) must come out exactly 0 (without dlse), as in the fp64
/// reference.
static void cpu_bwd_preprocess(const fmsa_problem *p, const fmsa_cpu_kernels *kern,
                               float *delta) {
    const int64_t Dv = p->head_dim_v, q_batches = p->is_varlen ? 1 : p->batch;
    const int64_t rows = q_batches * p->heads_q * p->total_q;
    const char *ob = fmsa_view4_host(&p->o), *dob = fmsa_view4_host(&p->dout);
    const float *dlse = p->has_dlse ? (const float *)fmsa_viewn_host(&p->dlse) : NULL;
FMSA_CPU_OMP(omp parallel for schedule(static))
    for (int64_t it = 0; it < rows; ++it) {
        const int64_t r = it % p->total_q, bh = it / p->total_q;
        const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
        float o_row[FMSA_HEAD_DIM_MAX], do_row[FMSA_HEAD_DIM_MAX];
        fmsa_cpu_row_load(ob, p->dtype, b * p->o.sb + r * p->o.ss + h * p->o.sh, Dv, 1.0f, o_row);
        fmsa_cpu_row_load(dob, p->dtype, b * p->dout.sb + r * p->dout.ss + h * p->dout.sh, Dv,
                          1.0f, do_row);
        kern->gemm(1, 1, (int)Dv, do_row, Dv, 1, o_row, 1, &delta[it], 1, 0);
        if (dlse) delta[it] -= dlse[b * p->dlse.s0 + h * p->dlse.s1 + r * p->dlse.s2];
    }
}

/// Rows of a product operand: the fp32 input in place (rows `ld` apart) or the
/// packed panel (rows D apart).
typedef struct cpu_rows {
    const float *ptr;
    int64_t ld;
} cpu_rows;

/// Query rows from i0 of head h in view v (Q or dO); panel row r0 when packed.
static cpu_rows cpu_bwd_qrows(const fmsa_problem *p, const fmsa_view4 *v, const float *panel,
                              const fmsa_seq *seq, int64_t h, int64_t i0, int64_t r0) {
    if (!fmsa_cpu_bwd_packs_rows(p))
        return (cpu_rows){(const float *)fmsa_view4_host(v) + fmsa_problem_q_offset(v, seq, i0, h),
                          v->ss};
    return (cpu_rows){panel + r0 * fmsa_cpu_view_dim(p, v), fmsa_cpu_view_dim(p, v)};
}

/// K rows from key j0 of the slot (b, hk).
static cpu_rows cpu_bwd_krows(const fmsa_problem *p, const cpu_bwd_panels *x, const fmsa_seq *seq,
                              int64_t b, int64_t hk, int64_t j0) {
    if (!fmsa_cpu_bwd_packs_rows(p)) /* no paged K in the backward: rows are ss apart */
        return (cpu_rows){(const float *)fmsa_view4_host(&p->k) +
                              fmsa_problem_k_offset(p, &p->k, seq, b, j0, hk),
                          p->k.ss};
    return (cpu_rows){x->k + j0 * p->head_dim, p->head_dim};
}

/// Pack job `job` of a slot: key tiles first (K, Kᵀ, Vᵀ), then query tiles of
/// every head of the group (Q, dO, lse2, delta); fp32 inputs skip the rows
/// the products read in place (cpu_bwd_qrows, cpu_bwd_krows).
static void cpu_bwd_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                         const cpu_bwd_panels *x, int64_t job, const float *delta) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, b = slot / p->heads_kv;
    const int64_t hk = slot % p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    if (job < pl->tiles_k) {
        const int64_t j0 = job * pl->block_n, tile = job * D * pl->block_n;
        const int cols = (int)(seq.sk - j0 < pl->block_n ? seq.sk - j0 : pl->block_n);
        if (cols <= 0) return;
        fmsa_cpu_pack_keys_t(pl->kern, p, &p->k, &seq, b, hk, j0, cols, pl->block_n, x->kt + tile);
        fmsa_cpu_pack_keys_t(pl->kern, p, &p->v, &seq, b, hk, j0, cols, pl->block_n,
                             x->vt + job * Dv * pl->block_n);
        if (fmsa_cpu_bwd_packs_rows(p))
            fmsa_cpu_pack_rows(p, &p->k, &seq, b, hk, 1, j0, cols, 1.0f, x->k + j0 * D);
    } else {
        const int64_t g = (job - pl->tiles_k) / pl->tiles_q, qt = (job - pl->tiles_k) % pl->tiles_q;
        const int64_t h = hk * (p->heads_q / p->heads_kv) + g, i0 = qt * pl->block_m;
        const int64_t r0 = g * x->head_rows + i0;
        const int rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
        const float *lse = (const float *)fmsa_viewn_host(&p->lse);
        if (rows <= 0) return;
        if (fmsa_cpu_bwd_packs_rows(p)) {
            fmsa_cpu_pack_rows(p, &p->q, &seq, b, h, 0, i0, rows, 1.0f, x->q + r0 * D);
            fmsa_cpu_pack_rows(p, &p->dout, &seq, b, h, 0, i0, rows, 1.0f, x->dout + r0 * Dv);
        }
        for (int r = 0; r < rows; ++r) {
            x->lse2[r0 + r] = lse[fmsa_problem_lse_offset(p, &seq, i0 + r, h)] * FMSA_LOG2E;
            x->delta[r0 + r] = delta[cpu_delta_index(p, &seq, h, i0 + r)];
        }
        fmsa_cpu_bwd_dsink_tile(p, pl, &seq, b, h, qt, rows, x->delta + r0);
    }
}

/// S -> P (in t->s) and dP -> dS (in t->dp) for query rows r0.. (panel row
/// index; q, dout: their rows) against key tile j0.
static void cpu_bwd_ds(const fmsa_cpu_plan *pl, const fmsa_cpu_score *sc,
                       const cpu_bwd_panels *x, cpu_rows q, cpu_rows dout, int64_t r0, int64_t i0,
                       int rows, int64_t j0, int cols, cpu_bwd_tiles *t) {
    const fmsa_cpu_kernels *kern = pl->kern;
    const int64_t D = sc->head_dim, Dv = x->dv_dim, tk = j0 / pl->block_n;
    const int ld = pl->block_n;
    float *g = sc->softcap > 0.0f ? t->g : NULL;
    fmsa_cpu_score_tile(kern, sc, q.ptr, q.ld, rows, i0, x->kt + tk * D * ld, cols, j0, ld, t->s,
                        g);
    kern->gemm(rows, cols, (int)Dv, dout.ptr, dout.ld, 1, x->vt + tk * Dv * ld, ld, t->dp, ld, 0);
    for (int r = 0; r < rows; ++r) {
        float *sr = t->s + (int64_t)r * ld, *dpr = t->dp + (int64_t)r * ld;
        const float lse2 = x->lse2[r0 + r];
        if (lse2 == FMSA_NEG_INF) { /* fully masked row: P = 0, dS = 0 */
            for (int c = 0; c < cols; ++c) sr[c] = dpr[c] = 0.0f;
            continue;
        }
        kern->row_bwd_ds(sr, dpr, g ? g + (int64_t)r * ld : NULL, cols, lse2, x->delta[r0 + r]);
    }
}

/// Stage (a): dK, dV of key tile ktile of the slot; with dQ partials, also
/// dQ partial += dS·K into part `part`'s rows.
static void cpu_bwd_dkdv_tile(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                              const cpu_bwd_panels *x, int64_t ktile, int64_t part,
                              atomic_int *turns, cpu_bwd_tiles *t) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v, group = p->heads_q / p->heads_kv;
    const int64_t b = slot / p->heads_kv, hk = slot % p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t j0 = ktile * pl->block_n;
    const int ld = pl->block_n;
    const float dot_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    int cols;
    cpu_rows q, dout, k;
    if (j0 >= seq.sk) return;
    cols = (int)(seq.sk - j0 < pl->block_n ? seq.sk - j0 : pl->block_n);
    k = cpu_bwd_krows(p, x, &seq, b, hk, j0);

    fmsa_cpu_zero(t->dk, (int64_t)cols * D);
    fmsa_cpu_zero(t->dv, (int64_t)cols * Dv);
    for (int64_t g = 0; g < group; ++g) {
        const int64_t h = hk * group + g;
        fmsa_cpu_score sc;
        fmsa_cpu_score_init(&sc, p, &seq, b, h, dot_scale);
        for (int64_t i0 = 0; i0 < seq.sq; i0 += pl->block_m) {
            const int rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
            const int64_t r0 = g * x->head_rows + i0;
            atomic_int *turn = turns ? &turns[g * pl->tiles_q + i0 / pl->block_m] : NULL;
            if (!fmsa_window_tile_visible(i0, i0 + rows, j0, j0 + cols, seq.sq, seq.sk,
                                          p->window_left, p->window_right) ||
                !fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) {
                fmsa_cpu_turn_skip(turn, ktile);
                continue;
            }
            q = cpu_bwd_qrows(p, &p->q, x->q, &seq, h, i0, r0);
            dout = cpu_bwd_qrows(p, &p->dout, x->dout, &seq, h, i0, r0);
            cpu_bwd_ds(pl, &sc, x, q, dout, r0, i0, rows, j0, cols, t);
            /* dV += Pᵀ·dO, dK += dSᵀ·Q: the transposed A is the same tile with swapped strides */
            pl->kern->gemm(cols, (int)Dv, rows, t->s, 1, ld, dout.ptr, dout.ld, t->dv, Dv, 1);
            pl->kern->gemm(cols, (int)D, rows, t->dp, 1, ld, q.ptr, q.ld, t->dk, D, 1);
            if (pl->dq_parts > 0) { /* the part's first write of these rows overwrites */
                float *flag = x->dq.written + (part * group + g) * pl->tiles_q + i0 / pl->block_m;
                float *dqp = x->dq.rows + ((part * group + g) * x->head_rows + i0) * D;
                fmsa_cpu_turn_wait(turn, ktile);
                pl->kern->gemm(rows, (int)D, cols, t->dp, ld, 1, k.ptr, k.ld, dqp, D,
                               *flag != 0.0f);
                *flag = 1.0f;
                fmsa_cpu_turn_pass(turn, ktile);
            }
        }
    }
    for (int c = 0; c < cols; ++c) {
        fmsa_cpu_row_store(fmsa_view4_host(&p->dk), p->dtype,
                           fmsa_problem_k_offset(p, &p->dk, &seq, b, j0 + c, hk), D,
                           p->softmax_scale, t->dk + (int64_t)c * D);
        fmsa_cpu_row_store(fmsa_view4_host(&p->dv), p->dtype,
                           fmsa_problem_k_offset(p, &p->dv, &seq, b, j0 + c, hk), Dv, 1.0f,
                           t->dv + (int64_t)c * Dv);
    }
}

/// Key tiles [*kt0, *kt1) of part `part` (dQ partials) of plan pl.
static void cpu_bwd_part_tiles(const fmsa_cpu_plan *pl, int64_t part, int64_t *kt0,
                               int64_t *kt1) {
    const int64_t per = fmsa_cpu_ceil_div(pl->tiles_k, pl->dq_parts);
    *kt0 = part * per;
    *kt1 = *kt0 + per < pl->tiles_k ? *kt0 + per : pl->tiles_k;
}

/// Stage (b) with dQ partials (either variant): dQ of query tile qt of head
/// `sub` = the sum of the parts' partials in part order, row by row (parts
/// that never saw the tile add nothing).
static void cpu_bwd_dq_sum_item(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                                const fmsa_cpu_dq_partials *dq, int64_t sub, int64_t qt) {
    const int64_t D = p->head_dim, group = p->heads_q / p->heads_kv, b = slot / p->heads_kv;
    const int64_t h = (slot % p->heads_kv) * group + sub;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t i0 = qt * pl->block_m;
    float row[FMSA_HEAD_DIM_MAX];
    if (i0 >= seq.sq) return;
    for (int64_t r = 0; r < seq.sq - i0 && r < pl->block_m; ++r) {
        fmsa_cpu_zero(row, D);
        for (int64_t part = 0; part < pl->dq_parts; ++part) {
            const float *src = dq->rows + ((part * group + sub) * dq->head_rows + i0 + r) * dq->ld;
            if (dq->written[(part * group + sub) * pl->tiles_q + qt] == 0.0f) continue;
            for (int64_t d = 0; d < D; ++d) row[d] += src[d];
        }
        fmsa_cpu_row_store_kern(pl->kern, fmsa_view4_host(&p->dq), p->dtype,
                                fmsa_problem_q_offset(&p->dq, &seq, i0 + r, h), D,
                                p->softmax_scale, row);
    }
}

/// Stage (b): dQ of query tile qt of query head `sub` of the slot's group.
static void cpu_bwd_dq_item(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                            const cpu_bwd_panels *x, int64_t sub, int64_t qt, cpu_bwd_tiles *t) {
    const int64_t D = p->head_dim, b = slot / p->heads_kv;
    const int64_t h = (slot % p->heads_kv) * (p->heads_q / p->heads_kv) + sub;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t i0 = qt * pl->block_m, r0 = sub * x->head_rows + i0;
    const int ld = pl->block_n;
    const float dot_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    fmsa_cpu_score sc;
    int rows;
    int64_t kb, ke;
    if (i0 >= seq.sq) return;
    rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
    kb = fmsa_window_key_begin(i0, seq.sq, seq.sk, p->window_left);
    ke = fmsa_window_key_end(i0 + rows, seq.sq, seq.sk, p->window_right);

    fmsa_cpu_score_init(&sc, p, &seq, b, h, dot_scale);
    fmsa_cpu_zero(t->dq, (int64_t)rows * D);
    for (int64_t j0 = kb / ld * ld; j0 < ke; j0 += ld) {
        const int cols = (int)(seq.sk - j0 < ld ? seq.sk - j0 : ld);
        const cpu_rows k = cpu_bwd_krows(p, x, &seq, b, slot % p->heads_kv, j0);
        if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
        cpu_bwd_ds(pl, &sc, x, cpu_bwd_qrows(p, &p->q, x->q, &seq, h, i0, r0),
                   cpu_bwd_qrows(p, &p->dout, x->dout, &seq, h, i0, r0), r0, i0, rows, j0, cols,
                   t);
        pl->kern->gemm(rows, (int)D, cols, t->dp, ld, 1, k.ptr, k.ld, t->dq, D, 1);
    }
    for (int r = 0; r < rows; ++r)
        fmsa_cpu_row_store(fmsa_view4_host(&p->dq), p->dtype,
                           fmsa_problem_q_offset(&p->dq, &seq, i0 + r, h), D, p->softmax_scale,
                           t->dq + (int64_t)r * D);
}

/*
 * The product variants.  Each takes a slot's panels and the calling thread's
 * scratch: the pack job `job` (key tiles, then query tiles of every head of
 * the group), the dK/dV of key tile kt (with dQ partials, also dS·K into
 * part `part`, turns: the slot's, ordered dQ), the recomputing dQ item of
 * query tile qt of head `sub`, and where the slot's dQ partials are.
 */
typedef struct cpu_bwd_variant {
    int preprocess; ///< D = rowsum(dO * O) into the workspace first (else in the panels)
    void (*pack)(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                 float *slot_panels, int64_t job, const float *delta, char *scratch);
    void (*dkdv)(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                 float *slot_panels, int64_t kt, int64_t part, atomic_int *turns, char *scratch);
    void (*dq)(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot, float *slot_panels,
               int64_t sub, int64_t qt, char *scratch);
    fmsa_cpu_dq_partials (*partials)(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                     float *slot_panels);
} cpu_bwd_variant;

static void cpu_bwd_fp32_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                              float *slot_panels, int64_t job, const float *delta,
                              char *scratch) {
    const cpu_bwd_panels x = cpu_bwd_slot(p, pl, slot_panels);
    (void)scratch;
    cpu_bwd_pack(p, pl, slot, &x, job, delta);
}

static void cpu_bwd_fp32_dkdv(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                              float *slot_panels, int64_t kt, int64_t part, atomic_int *turns,
                              char *scratch) {
    const cpu_bwd_panels x = cpu_bwd_slot(p, pl, slot_panels);
    cpu_bwd_tiles t = cpu_bwd_carve(scratch, pl, p, 1);
    cpu_bwd_dkdv_tile(p, pl, slot, &x, kt, part, turns, &t);
}

static void cpu_bwd_fp32_dq(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                            float *slot_panels, int64_t sub, int64_t qt, char *scratch) {
    const cpu_bwd_panels x = cpu_bwd_slot(p, pl, slot_panels);
    cpu_bwd_tiles t = cpu_bwd_carve(scratch, pl, p, 0);
    cpu_bwd_dq_item(p, pl, slot, &x, sub, qt, &t);
}

static fmsa_cpu_dq_partials cpu_bwd_fp32_partials(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                                  float *slot_panels) {
    return cpu_bwd_slot(p, pl, slot_panels).dq;
}

static void cpu_bwd_b16_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                             float *slot_panels, int64_t job, const float *delta,
                             char *scratch) {
    (void)delta; /* the bf16 products take D through their own product */
    fmsa_cpu_b16_bwd_pack(p, pl, slot, slot_panels, job, scratch);
}

static const cpu_bwd_variant cpu_bwd_fp32 = {1, cpu_bwd_fp32_pack, cpu_bwd_fp32_dkdv,
                                             cpu_bwd_fp32_dq, cpu_bwd_fp32_partials};
static const cpu_bwd_variant cpu_bwd_b16 = {0, cpu_bwd_b16_pack, fmsa_cpu_b16_bwd_dkdv,
                                            fmsa_cpu_b16_bwd_dq, fmsa_cpu_b16_bwd_partials};

/// The product decision of the backward: the plan's product variant.
static const cpu_bwd_variant *cpu_bwd_variant_of(const fmsa_cpu_plan *pl) {
    return pl->b16 ? &cpu_bwd_b16 : &cpu_bwd_fp32;
}

/*
 * The dQ owners (fmsa_cpu_dq_owner): how stage (a) items are cut (a part of
 * a slot's key tiles, or one key tile) and ordered, whether they take turns,
 * and what a stage (b) item does.
 */
typedef struct cpu_bwd_owner {
    int per_part;               ///< stage (a) item = a part of the slot's key tiles
    int turns;                  ///< items add into one partial in key tile order
    fmsa_cpu_sched_mode order;  ///< stage (a) order (the turns need list order)
    void (*stage_b)(const fmsa_problem *p, const fmsa_cpu_plan *pl, const cpu_bwd_variant *var,
                    int64_t slot, float *slot_panels, int64_t sub, int64_t qt, char *scratch);
} cpu_bwd_owner;

/// Stage (b) of PARTS and ORDERED: the sum of the slot's partials.
static void cpu_bwd_stage_b_sum(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                const cpu_bwd_variant *var, int64_t slot, float *slot_panels,
                                int64_t sub, int64_t qt, char *scratch) {
    const fmsa_cpu_dq_partials dq = var->partials(p, pl, slot_panels);
    (void)scratch;
    cpu_bwd_dq_sum_item(p, pl, slot, &dq, sub, qt);
}

/// Stage (b) of RECOMPUTE: the variant's own dQ item.
static void cpu_bwd_stage_b_recompute(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                      const cpu_bwd_variant *var, int64_t slot,
                                      float *slot_panels, int64_t sub, int64_t qt,
                                      char *scratch) {
    var->dq(p, pl, slot, slot_panels, sub, qt, scratch);
}

static const cpu_bwd_owner cpu_bwd_parts = {1, 0, FMSA_CPU_SCHED_SHARED, cpu_bwd_stage_b_sum};
static const cpu_bwd_owner cpu_bwd_ordered = {0, 1, FMSA_CPU_SCHED_IN_ORDER, cpu_bwd_stage_b_sum};
static const cpu_bwd_owner cpu_bwd_recompute = {0, 0, FMSA_CPU_SCHED_SHARED,
                                                cpu_bwd_stage_b_recompute};

/// The dQ-owner decision of the backward: the plan's (cpu_plan.c chose it).
static const cpu_bwd_owner *cpu_bwd_owner_of(const fmsa_cpu_plan *pl) {
    switch (pl->dq_owner) {
    case FMSA_CPU_DQ_PARTS: return &cpu_bwd_parts;
    case FMSA_CPU_DQ_ORDERED: return &cpu_bwd_ordered;
    default: return &cpu_bwd_recompute;
    }
}

/// Stage (a) work item: key tile `tile`, or with PARTS part `tile`, whose
/// written-flags it clears before its key tiles run (ORDERED: key tile
/// `tile` adding into part 0 in turn, turns: the slot's).
static void cpu_bwd_stage_a(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                            const cpu_bwd_variant *var, const cpu_bwd_owner *own, int64_t slot,
                            float *slot_panels, int64_t tile, atomic_int *turns, char *scratch) {
    const int64_t group = p->heads_q / p->heads_kv;
    int64_t kt0 = tile, kt1 = tile + 1, part = 0;
    if (own->per_part) {
        const fmsa_cpu_dq_partials dq = var->partials(p, pl, slot_panels);
        for (int64_t f = 0; f < group * pl->tiles_q; ++f)
            dq.written[tile * group * pl->tiles_q + f] = 0.0f;
        cpu_bwd_part_tiles(pl, tile, &kt0, &kt1);
        part = tile;
    }
    for (int64_t kt = kt0; kt < kt1; ++kt)
        var->dkdv(p, pl, slot, slot_panels, kt, part, turns, scratch);
}

/// Items of both main stages for slots [slot0, slot0+nslots), each list
/// heaviest first: dK/dV items (tile = key tile) then dQ items.
static void cpu_bwd_items(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                          const cpu_bwd_owner *own, int64_t slot0, int64_t nslots,
                          fmsa_cpu_item *kv, int64_t *n_kv, fmsa_cpu_item *q, int64_t *n_q) {
    const int64_t group = p->heads_q / p->heads_kv;
    *n_kv = *n_q = 0;
    for (int64_t slot = slot0; slot < slot0 + nslots; ++slot) {
        const fmsa_seq seq = fmsa_problem_seq(p, slot / p->heads_kv);
        const int per_part = own->per_part;
        const int64_t n_stage_a = per_part ? pl->dq_parts : pl->tiles_k;
        for (int64_t it = 0; it < n_stage_a; ++it) {
            /* visible query rows of the item's key tiles: rows whose window reaches them */
            int64_t cost = 0, kt0 = it, kt1 = it + 1;
            if (per_part) cpu_bwd_part_tiles(pl, it, &kt0, &kt1);
            for (int64_t kt = kt0; kt < kt1 && kt * pl->block_n < seq.sk; ++kt)
                for (int64_t i0 = 0; i0 < seq.sq; i0 += pl->block_m) {
                    const int64_t i1 = i0 + pl->block_m < seq.sq ? i0 + pl->block_m : seq.sq;
                    if (fmsa_window_tile_visible(i0, i1, kt * pl->block_n, (kt + 1) * pl->block_n,
                                                 seq.sq, seq.sk, p->window_left,
                                                 p->window_right))
                        cost += i1 - i0;
                }
            /* a part with no key tile in this sequence still clears its flags;
             * key tiles past it have no item (nobody waits for their turn) */
            if (!per_part && kt0 * pl->block_n >= seq.sk) break;
            kv[*n_kv] = (fmsa_cpu_item){slot, 0, it, 0, cost * group + 1};
            ++*n_kv;
        }
        for (int64_t g = 0; g < group; ++g)
            for (int64_t qt = 0; qt * pl->block_m < seq.sq; ++qt) {
                const int64_t i0 = qt * pl->block_m;
                const int64_t i1 = i0 + pl->block_m < seq.sq ? i0 + pl->block_m : seq.sq;
                const int64_t kb = fmsa_window_key_begin(i0, seq.sq, seq.sk, p->window_left);
                const int64_t ke = fmsa_window_key_end(i1, seq.sq, seq.sk, p->window_right);
                /* with dQ partials the item only sums them: rows x parts */
                const int64_t cost = pl->dq_parts > 0 ? pl->dq_parts : (ke > kb ? ke - kb : 0);
                q[*n_q] = (fmsa_cpu_item){slot, g, qt, 0, cost + 1};
                ++*n_q;
            }
    }
    fmsa_cpu_items_sort(q, *n_q); /* kv: ordered by the schedule (cpu_sched.h) */
}

/// Ordered dQ: clears part 0's written-flags and sets every turn to key
/// tile 0 for the chunk's slots (turns: [nslots][group][tiles_q]).
static void cpu_bwd_turns_reset(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                const cpu_bwd_variant *var, float *panels, int64_t nslots,
                                atomic_int *turns) {
    const int64_t n = (p->heads_q / p->heads_kv) * pl->tiles_q;
    for (int64_t s = 0; s < nslots; ++s) {
        const fmsa_cpu_dq_partials dq = var->partials(p, pl, panels + s * pl->slot_floats);
        for (int64_t f = 0; f < n; ++f) {
            dq.written[f] = 0.0f;
            atomic_init(&turns[s * n + f], 0);
        }
    }
}

fmsa_status fmsa_cpu_backward(void *state, const fmsa_problem *p, void *workspace,
                              size_t workspace_bytes, void *stream) {
    fmsa_cpu_state *st = (fmsa_cpu_state *)state;
    const cpu_bwd_variant *var;
    const cpu_bwd_owner *own;
    fmsa_cpu_plan pl;
    int nthreads;
    char *scratch;
    float *panels, *delta = (float *)workspace;
    fmsa_cpu_item *kv_items, *q_items;
    atomic_int *turns = NULL;
    fmsa_cpu_sched kv_sched;
    int64_t group, n_kv = 0, n_q = 0; /* n_kv, n_q: shared, written by one thread per chunk */
    fmsa_cpu_pass_buffers bufs;
    fmsa_cpu_trace tr;
    (void)stream; /* the CPU runs synchronously */

    FMSA_TRY(fmsa_cpu_plan_of(st, p, &pl));
    if (workspace_bytes < pl.workspace_bytes || (pl.workspace_bytes > 0 && !workspace))
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "cpu: backward needs %zu bytes of workspace, got %zu",
                         pl.workspace_bytes, workspace ? workspace_bytes : (size_t)0);
    FMSA_TRY(fmsa_cpu_check_sequences(p));
    if (p->batch * p->heads_kv * pl.tiles_k == 0 && p->batch * p->heads_q * pl.tiles_q == 0)
        return FMSA_SUCCESS;
    group = p->heads_q / p->heads_kv;
    var = cpu_bwd_variant_of(&pl);
    own = cpu_bwd_owner_of(&pl);

    nthreads = fmsa_cpu_max_threads();
    {
        const size_t lists[4] = {
            (size_t)(pl.chunk_slots * pl.tiles_k) * sizeof *kv_items,
            (size_t)(pl.chunk_slots * group * pl.tiles_q) * sizeof *q_items,
            fmsa_cpu_sched_bytes(pl.chunk_slots, nthreads),
            own->turns ? (size_t)(pl.chunk_slots * group * pl.tiles_q) * sizeof *turns : 0};
        FMSA_TRY(fmsa_cpu_pass_buffers_take(&st->arena, st->opt.poison, "backward", nthreads, &pl,
                                            4, lists, &bufs));
        scratch = bufs.scratch;
        panels = bufs.panels;
        kv_items = (fmsa_cpu_item *)bufs.lists[0];
        q_items = (fmsa_cpu_item *)bufs.lists[1];
        fmsa_cpu_sched_carve(bufs.lists[2], pl.chunk_slots, nthreads, &kv_sched);
        if (own->turns) turns = (atomic_int *)bufs.lists[3];
    }

    fmsa_cpu_trace_begin(&tr, st->opt.trace, nthreads);
    pl.trace = &tr;
    if (p->has_dsink) pl.dsink_parts = (double *)((char *)workspace + pl.dsink_offset);
    if (var->preprocess) cpu_bwd_preprocess(p, pl.kern, delta);
FMSA_CPU_OMP(omp parallel num_threads(nthreads))
    {
        char *mine = scratch + (size_t)fmsa_cpu_thread_num() * pl.scratch_bytes;
        for (int64_t slot0 = 0; slot0 < pl.slots; slot0 += pl.chunk_slots) {
            const int64_t nslots =
                pl.slots - slot0 < pl.chunk_slots ? pl.slots - slot0 : pl.chunk_slots;
            const int64_t jobs = pl.tiles_k + group * pl.tiles_q;
            fmsa_cpu_cursor cursor = {0, 0};
            int64_t next;
            /* one thread orders the chunk's items (and resets the turns) while
             * the others pack; the barrier after the packing publishes both */
FMSA_CPU_OMP(omp single nowait)
            {
                cpu_bwd_items(p, &pl, own, slot0, nslots, kv_items, &n_kv, q_items, &n_q);
                fmsa_cpu_sched_build(&kv_sched, kv_items, n_kv, fmsa_cpu_team_size(), own->order);
                if (own->turns) cpu_bwd_turns_reset(p, &pl, var, panels, nslots, turns);
            }
FMSA_CPU_OMP(omp for schedule(dynamic, 1))
            for (int64_t it = 0; it < nslots * jobs; ++it) {
                const double t0 = fmsa_cpu_trace_now(&tr);
                var->pack(p, &pl, slot0 + it / jobs, panels + (it / jobs) * pl.slot_floats,
                          it % jobs, delta, mine);
                fmsa_cpu_trace_add(&tr, FMSA_CPU_TRACE_PACK, t0);
            }
FMSA_CPU_OMP(omp barrier)
            while ((next = fmsa_cpu_sched_next(&kv_sched, fmsa_cpu_thread_num(), &cursor)) >= 0) {
                const fmsa_cpu_item *item = &kv_items[next];
                const int64_t in_chunk = item->slot - slot0;
                atomic_int *slot_turns = turns ? turns + in_chunk * group * pl.tiles_q : NULL;
                const double t0 = fmsa_cpu_trace_now(&tr);
                cpu_bwd_stage_a(p, &pl, var, own, item->slot, panels + in_chunk * pl.slot_floats,
                                item->tile, slot_turns, mine);
                fmsa_cpu_trace_add(&tr, FMSA_CPU_TRACE_STAGE_A, t0);
            }
FMSA_CPU_OMP(omp barrier)
FMSA_CPU_OMP(omp for schedule(dynamic, 1))
            for (int64_t it = 0; it < n_q; ++it) {
                const int64_t in_chunk = q_items[it].slot - slot0;
                const double t0 = fmsa_cpu_trace_now(&tr);
                own->stage_b(p, &pl, var, q_items[it].slot, panels + in_chunk * pl.slot_floats,
                             q_items[it].sub, q_items[it].tile, mine);
                fmsa_cpu_trace_add(&tr, FMSA_CPU_TRACE_STAGE_B, t0);
            }
        }
    }
    if (p->has_dsink) cpu_bwd_dsink_sum(p, &pl);
    fmsa_cpu_trace_end(&tr, "backward", fmsa_cpu_ceil_div(pl.slots, pl.chunk_slots));
    fmsa_cpu_arena_give(&st->arena, bufs.base);
    return FMSA_SUCCESS;
}
