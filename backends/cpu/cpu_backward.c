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
 * Each output row is owned by exactly one work item of one stage and summed
 * in a fixed order, so there are no atomics and the result is bit-identical
 * for any thread count: the CPU backward is always deterministic, whatever
 * desc->deterministic says.  The accumulators are per-thread fp32 tiles and
 * are converted to the output dtype once per row ("postprocess" folded into
 * each stage's store).  P and S are never stored beyond one tile.
 */
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_tile.h"
#include "common/error.h"
#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

/// One thread's tiles for either main stage (unused ones stay NULL).
typedef struct cpu_bwd_tiles {
    float *q, *dout;  ///< [block_m][D] query rows and dO rows (unscaled)
    float *dq;        ///< [block_m][D] dQ accumulator (stage b)
    float *kt, *vt;   ///< [D][block_n] keys and values, transposed
    float *k;         ///< [block_n][D] key rows (stage b)
    float *dk, *dv;   ///< [block_n][D] dK, dV accumulators (stage a)
    float *s, *dp, *g;///< [block_m][block_n] scores -> P, dP -> dS, softcap derivative
    float *lse2;      ///< [block_m] lse * log2(e)
    float *delta;     ///< [block_m] D_i
} cpu_bwd_tiles;

/// Carves one thread's tiles; stage_a selects the dK/dV stage's set.
static cpu_bwd_tiles cpu_bwd_carve(char *base, const fmsa_cpu_plan *pl, int64_t D, int stage_a) {
    cpu_bwd_tiles t = {0};
    const size_t row_tile = fmsa_cpu_round64((size_t)pl->block_m * (size_t)D * sizeof(float));
    const size_t key_tile = fmsa_cpu_round64((size_t)pl->block_n * (size_t)D * sizeof(float));
    const size_t score = fmsa_cpu_round64((size_t)pl->block_m * pl->block_n * sizeof(float));
    const size_t vec = fmsa_cpu_round64((size_t)pl->block_m * sizeof(float));
#define CPU_TAKE(field, bytes) (t.field = (float *)base, base += (bytes))
    CPU_TAKE(q, row_tile);
    CPU_TAKE(dout, row_tile);
    CPU_TAKE(kt, key_tile);
    CPU_TAKE(vt, key_tile);
    if (stage_a) {
        CPU_TAKE(dk, key_tile);
        CPU_TAKE(dv, key_tile);
    } else {
        CPU_TAKE(dq, row_tile);
        CPU_TAKE(k, key_tile);
    }
    CPU_TAKE(s, score);
    CPU_TAKE(dp, score);
    CPU_TAKE(g, score);
    CPU_TAKE(lse2, vec);
    CPU_TAKE(delta, vec);
#undef CPU_TAKE
    return t;
}

/// Index of row i of (seq, h) in the D workspace (laid out like lse).
static int64_t cpu_delta_index(const fmsa_problem *p, const fmsa_seq *seq, int64_t h, int64_t i) {
    return (seq->q_batch * p->heads_q + h) * p->total_q + seq->q_row0 + i;
}

/// Preprocess: delta = rowsum(dO * O) for every query row of every head.
static void cpu_bwd_preprocess(const fmsa_problem *p, float *delta) {
    const int64_t D = p->head_dim, q_batches = p->is_varlen ? 1 : p->batch;
    const int64_t rows = q_batches * p->heads_q * p->total_q;
    const char *ob = fmsa_view4_host(&p->o), *dob = fmsa_view4_host(&p->dout);
FMSA_CPU_OMP(omp parallel for schedule(static))
    for (int64_t it = 0; it < rows; ++it) {
        const int64_t r = it % p->total_q, bh = it / p->total_q;
        const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
        float o_row[FMSA_CPU_MAX_HEAD_DIM], do_row[FMSA_CPU_MAX_HEAD_DIM], sum = 0.0f;
        fmsa_cpu_row_load(ob, p->dtype, b * p->o.sb + r * p->o.ss + h * p->o.sh, D, 1.0f, o_row);
        fmsa_cpu_row_load(dob, p->dtype, b * p->dout.sb + r * p->dout.ss + h * p->dout.sh, D, 1.0f,
                          do_row);
        for (int64_t d = 0; d < D; ++d) sum += o_row[d] * do_row[d];
        delta[it] = sum;
    }
}

/// Loads Q, dO, lse2 and D of query rows [i0, i0+rows) of head h.
static void cpu_bwd_load_rows(const fmsa_problem *p, const fmsa_seq *seq, int64_t h, int64_t i0,
                              int rows, const float *delta, cpu_bwd_tiles *t) {
    const int64_t D = p->head_dim;
    const float *lse = (const float *)fmsa_viewn_host(&p->lse);
    for (int r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        fmsa_cpu_row_load(fmsa_view4_host(&p->q), p->dtype, fmsa_problem_q_offset(&p->q, seq, i, h),
                          D, 1.0f, t->q + (int64_t)r * D);
        fmsa_cpu_row_load(fmsa_view4_host(&p->dout), p->dtype,
                          fmsa_problem_q_offset(&p->dout, seq, i, h), D, 1.0f,
                          t->dout + (int64_t)r * D);
        t->lse2[r] = lse[fmsa_problem_lse_offset(p, seq, i, h)] * FMSA_LOG2E;
        t->delta[r] = delta[cpu_delta_index(p, seq, h, i)];
    }
}

/// Loads keys [j0, j0+cols) of kv head hk: transposed K and V, plus K rows if wanted.
static void cpu_bwd_load_keys(const fmsa_problem *p, const fmsa_seq *seq, int64_t b, int64_t hk,
                              int64_t j0, int cols, int ld, cpu_bwd_tiles *t) {
    const int64_t D = p->head_dim;
    const char *kb = fmsa_view4_host(&p->k), *vb = fmsa_view4_host(&p->v);
    for (int c = 0; c < cols; ++c) {
        const int64_t koff = fmsa_problem_k_offset(p, &p->k, seq, b, j0 + c, hk);
        fmsa_cpu_row_load_t(kb, p->dtype, koff, D, ld, c, t->kt);
        fmsa_cpu_row_load_t(vb, p->dtype, fmsa_problem_k_offset(p, &p->v, seq, b, j0 + c, hk), D,
                            ld, c, t->vt);
        if (t->k) fmsa_cpu_row_load(kb, p->dtype, koff, D, 1.0f, t->k + (int64_t)c * D);
    }
}

/// S -> P (in t->s) and dP -> dS (in t->dp) for the loaded rows and keys.
static void cpu_bwd_ds(const fmsa_cpu_score *sc, int64_t i0, int rows, int64_t j0, int cols,
                       int ld, cpu_bwd_tiles *t) {
    fmsa_cpu_score_tile(sc, t->q, rows, i0, t->kt, cols, j0, ld, t->s, t->g);
    fmsa_cpu_mm_abt(t->dout, rows, sc->head_dim, t->vt, cols, ld, t->dp);
    for (int r = 0; r < rows; ++r) {
        float *restrict sr = t->s + (int64_t)r * ld, *restrict dpr = t->dp + (int64_t)r * ld;
        const float *restrict gr = t->g + (int64_t)r * ld;
        const float lse2 = t->lse2[r], delta = t->delta[r];
        for (int c = 0; c < cols; ++c) {
            const float pr = fmsa_softmax_p_from_lse(sr[c], lse2);
            sr[c] = pr;
            /* P = 0 (masked key or masked row) must give dS = 0 even if dP is not finite */
            dpr[c] = pr == 0.0f ? 0.0f : pr * (dpr[c] - delta) * gr[c];
        }
    }
}

/// Stage (a): dK, dV of key tile kt of (sequence b, kv head hk).
static void cpu_bwd_dkdv_item(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t b,
                              int64_t hk, int64_t ktile, const float *delta, cpu_bwd_tiles *t) {
    const int64_t D = p->head_dim, group = p->heads_q / p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t j0 = ktile * pl->block_n;
    const int ld = pl->block_n;
    const float dot_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    int cols;
    if (j0 >= seq.sk) return;
    cols = (int)(seq.sk - j0 < pl->block_n ? seq.sk - j0 : pl->block_n);

    cpu_bwd_load_keys(p, &seq, b, hk, j0, cols, ld, t);
    fmsa_cpu_zero(t->dk, (int64_t)cols * D);
    fmsa_cpu_zero(t->dv, (int64_t)cols * D);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        fmsa_cpu_score sc;
        fmsa_cpu_score_init(&sc, p, &seq, b, h, dot_scale);
        for (int64_t i0 = 0; i0 < seq.sq; i0 += pl->block_m) {
            const int rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
            const int64_t kb = fmsa_window_key_begin(i0, seq.sq, seq.sk, p->window_left);
            const int64_t ke = fmsa_window_key_end(i0 + rows, seq.sq, seq.sk, p->window_right);
            if (ke <= j0 || kb >= j0 + cols) continue;
            if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
            cpu_bwd_load_rows(p, &seq, h, i0, rows, delta, t);
            cpu_bwd_ds(&sc, i0, rows, j0, cols, ld, t);
            fmsa_cpu_mm_wta_acc(t->s, rows, cols, ld, t->dout, D, t->dv);
            fmsa_cpu_mm_wta_acc(t->dp, rows, cols, ld, t->q, D, t->dk);
        }
    }
    for (int c = 0; c < cols; ++c) {
        fmsa_cpu_row_store(fmsa_view4_host(&p->dk), p->dtype,
                           fmsa_problem_k_offset(p, &p->dk, &seq, b, j0 + c, hk), D,
                           p->softmax_scale, t->dk + (int64_t)c * D);
        fmsa_cpu_row_store(fmsa_view4_host(&p->dv), p->dtype,
                           fmsa_problem_k_offset(p, &p->dv, &seq, b, j0 + c, hk), D, 1.0f,
                           t->dv + (int64_t)c * D);
    }
}

/// Stage (b): dQ of query tile qt of (sequence b, query head h).
static void cpu_bwd_dq_item(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t b, int64_t h,
                            int64_t qt, const float *delta, cpu_bwd_tiles *t) {
    const int64_t D = p->head_dim, hk = fmsa_problem_kv_head(p, h);
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t i0 = qt * pl->block_m;
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
    cpu_bwd_load_rows(p, &seq, h, i0, rows, delta, t);
    fmsa_cpu_zero(t->dq, (int64_t)rows * D);
    for (int64_t j0 = kb; j0 < ke; j0 += pl->block_n) {
        const int cols = (int)(ke - j0 < pl->block_n ? ke - j0 : pl->block_n);
        if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
        cpu_bwd_load_keys(p, &seq, b, hk, j0, cols, ld, t);
        cpu_bwd_ds(&sc, i0, rows, j0, cols, ld, t);
        fmsa_cpu_mm_wb_acc(t->dp, rows, cols, ld, t->k, D, t->dq);
    }
    for (int r = 0; r < rows; ++r)
        fmsa_cpu_row_store(fmsa_view4_host(&p->dq), p->dtype,
                           fmsa_problem_q_offset(&p->dq, &seq, i0 + r, h), D, p->softmax_scale,
                           t->dq + (int64_t)r * D);
}

fmsa_status fmsa_cpu_backward(void *state, const fmsa_problem *p, void *workspace,
                              size_t workspace_bytes, void *stream) {
    fmsa_cpu_plan pl;
    int nthreads;
    char *scratch;
    float *delta = (float *)workspace;
    int64_t kv_items, q_items;
    (void)stream; /* the CPU runs synchronously */

    FMSA_TRY(fmsa_cpu_plan_make((const fmsa_cpu_state *)state, p, &pl));
    if (workspace_bytes < pl.workspace_bytes || (pl.workspace_bytes > 0 && !workspace))
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "cpu: backward needs %zu bytes of workspace, got %zu",
                         pl.workspace_bytes, workspace ? workspace_bytes : (size_t)0);
    FMSA_TRY(fmsa_cpu_check_sequences(p));
    kv_items = p->batch * p->heads_kv * pl.tiles_k;
    q_items = p->batch * p->heads_q * pl.tiles_q;
    if (kv_items == 0 && q_items == 0) return FMSA_SUCCESS;

    nthreads = fmsa_cpu_max_threads();
    scratch = (char *)fmsa_cpu_aligned_alloc((size_t)nthreads * pl.scratch_bytes);
    if (!scratch)
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "cpu: backward scratch of %d x %zu bytes",
                         nthreads, pl.scratch_bytes);

    cpu_bwd_preprocess(p, delta);
FMSA_CPU_OMP(omp parallel num_threads(nthreads))
    {
        char *mine = scratch + (size_t)fmsa_cpu_thread_num() * pl.scratch_bytes;
        cpu_bwd_tiles t = cpu_bwd_carve(mine, &pl, p->head_dim, 1);
FMSA_CPU_OMP(omp for schedule(dynamic, 1))
        for (int64_t it = 0; it < kv_items; ++it) {
            const int64_t ktile = it % pl.tiles_k, bh = it / pl.tiles_k;
            cpu_bwd_dkdv_item(p, &pl, bh / p->heads_kv, bh % p->heads_kv, ktile, delta, &t);
        }
        t = cpu_bwd_carve(mine, &pl, p->head_dim, 0);
FMSA_CPU_OMP(omp for schedule(dynamic, 1))
        for (int64_t it = 0; it < q_items; ++it) {
            const int64_t qt = pl.tiles_q - 1 - it % pl.tiles_q, bh = it / pl.tiles_q;
            cpu_bwd_dq_item(p, &pl, bh / p->heads_q, bh % p->heads_q, qt, delta, &t);
        }
    }
    fmsa_cpu_aligned_free(scratch);
    return FMSA_SUCCESS;
}
