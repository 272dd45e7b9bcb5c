/*
 * CPU forward: FlashAttention-2 tiling (Dao 2023, §3.1) over OpenMP.
 *
 * Work items are (sequence, query head, query tile[, key split]), scheduled
 * dynamically so causal, windowed and varlen problems balance; the heaviest
 * query tiles of a causal problem (the last ones) are handed out first.  Each
 * item keeps one online-softmax state per row (fmsa_softmax.h) and walks only
 * the key tiles its window can see.  With split-KV (decode shapes) each item
 * covers one chunk of keys and leaves its (m, l, acc) in the workspace; a
 * second parallel loop merges the chunks of every row in split order.
 */
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_tile.h"
#include "common/error.h"
#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

/// One thread's tiles, carved from its slice of the scratch allocation.
typedef struct cpu_fwd_tiles {
    float *q;   ///< [block_m][D] query rows, scale folded in
    float *acc; ///< [block_m][D] unnormalised output rows
    float *kt;  ///< [D][block_n] keys, transposed
    float *v;   ///< [block_n][D] values
    float *s;   ///< [block_m][block_n] base-2 scores, then probabilities
    float *m;   ///< [block_m] running maxima
    float *l;   ///< [block_m] running sums
} cpu_fwd_tiles;

static cpu_fwd_tiles cpu_fwd_carve(char *base, const fmsa_cpu_plan *pl, int64_t D) {
    cpu_fwd_tiles t;
    const size_t row_tile = fmsa_cpu_round64((size_t)pl->block_m * (size_t)D * sizeof(float));
    const size_t key_tile = fmsa_cpu_round64((size_t)pl->block_n * (size_t)D * sizeof(float));
    const size_t score = fmsa_cpu_round64((size_t)pl->block_m * pl->block_n * sizeof(float));
    const size_t vec = fmsa_cpu_round64((size_t)pl->block_m * sizeof(float));
    t.q = (float *)base;
    base += row_tile;
    t.acc = (float *)base;
    base += row_tile;
    t.kt = (float *)base;
    base += key_tile;
    t.v = (float *)base;
    base += key_tile;
    t.s = (float *)base;
    base += score;
    t.m = (float *)base;
    base += vec;
    t.l = (float *)base;
    return t;
}

/// Folds one score tile (already in t->s, cols keys from j0) into the row states.
static void cpu_fwd_update(cpu_fwd_tiles *t, int rows, int cols, int ld, int64_t D) {
    for (int r = 0; r < rows; ++r) {
        float *restrict sr = t->s + (int64_t)r * ld;
        float *restrict accr = t->acc + (int64_t)r * D;
        float tile_max = FMSA_NEG_INF, c, sum = 0.0f;
        for (int j = 0; j < cols; ++j) tile_max = FMSA_FMAX(tile_max, sr[j]);
        if (tile_max == FMSA_NEG_INF) { /* every key of this row masked: no change */
            for (int j = 0; j < cols; ++j) sr[j] = 0.0f;
            continue;
        }
        c = fmsa_softmax_update(&t->m[r], tile_max);
        if (c != 1.0f) {
            t->l[r] *= c;
            for (int64_t d = 0; d < D; ++d) accr[d] *= c;
        }
        for (int j = 0; j < cols; ++j) {
            float pj = fmsa_softmax_p(sr[j], t->m[r]);
            sr[j] = pj;
            sum += pj;
        }
        t->l[r] += sum;
    }
    fmsa_cpu_mm_wb_acc(t->s, rows, cols, ld, t->v, D, t->acc);
}

/// Runs keys [k_begin, k_end) of query rows [i0, i0+rows) into t's states.
static void cpu_fwd_rows(const fmsa_problem *p, const fmsa_cpu_plan *pl, const fmsa_seq *seq,
                         int64_t b, int64_t h, int64_t i0, int rows, int64_t k_begin,
                         int64_t k_end, cpu_fwd_tiles *t) {
    const int64_t D = p->head_dim;
    const int64_t hk = fmsa_problem_kv_head(p, h);
    const int ld = pl->block_n;
    const char *qb = fmsa_view4_host(&p->q), *kb = fmsa_view4_host(&p->k);
    const char *vb = fmsa_view4_host(&p->v);
    /* Without softcap, scale * log2(e) is folded into Q so S is already base 2;
     * softcap needs the natural-unit score inside tanh, so only scale is folded. */
    const float q_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    fmsa_cpu_score sc;

    fmsa_cpu_score_init(&sc, p, seq, b, h, 1.0f);
    for (int r = 0; r < rows; ++r) {
        fmsa_softmax_init(&t->m[r], &t->l[r]);
        fmsa_cpu_row_load(qb, p->dtype, fmsa_problem_q_offset(&p->q, seq, i0 + r, h), D, q_scale,
                          t->q + (int64_t)r * D);
    }
    fmsa_cpu_zero(t->acc, (int64_t)rows * D);

    for (int64_t j0 = k_begin; j0 < k_end; j0 += pl->block_n) {
        const int cols = (int)(k_end - j0 < pl->block_n ? k_end - j0 : pl->block_n);
        if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
        for (int c = 0; c < cols; ++c) {
            fmsa_cpu_row_load_t(kb, p->dtype, fmsa_problem_k_offset(p, &p->k, seq, b, j0 + c, hk),
                                D, ld, c, t->kt);
            fmsa_cpu_row_load(vb, p->dtype, fmsa_problem_k_offset(p, &p->v, seq, b, j0 + c, hk), D,
                              1.0f, t->v + (int64_t)c * D);
        }
        fmsa_cpu_score_tile(&sc, t->q, rows, i0, t->kt, cols, j0, ld, t->s, NULL);
        cpu_fwd_update(t, rows, cols, ld, D);
    }
}

/// Finalizes rows into O (output dtype) and LSE (fp32, natural log) when requested.
static void cpu_fwd_store(const fmsa_problem *p, const fmsa_seq *seq, int64_t h, int64_t i0,
                          int rows, const float *m, const float *l, const float *acc) {
    const int64_t D = p->head_dim;
    char *ob = fmsa_view4_host(&p->o);
    float *lse_base = p->has_lse ? (float *)fmsa_viewn_host(&p->lse) : NULL;
    for (int r = 0; r < rows; ++r) {
        float lse;
        float inv_l = fmsa_softmax_finalize(m[r], l[r], &lse);
        /* a fully masked row has acc = 0 and inv_l = 0: O = 0, never NaN */
        fmsa_cpu_row_store(ob, p->dtype, fmsa_problem_q_offset(&p->o, seq, i0 + r, h), D, inv_l,
                           acc + (int64_t)r * D);
        if (lse_base) lse_base[fmsa_problem_lse_offset(p, seq, i0 + r, h)] = lse;
    }
}

/// One work item: (b, h, query tile qt, key split s).
static void cpu_fwd_item(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t b, int64_t h,
                         int64_t qt, int64_t s, cpu_fwd_tiles *t, float *partials) {
    const int64_t D = p->head_dim;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t i0 = qt * pl->block_m;
    int rows;
    int64_t k_begin, k_end;

    if (i0 >= seq.sq) return;
    rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
    k_begin = fmsa_window_key_begin(i0, seq.sq, seq.sk, p->window_left);
    k_end = fmsa_window_key_end(i0 + rows, seq.sq, seq.sk, p->window_right);
    if (pl->num_splits > 1) {
        const int64_t c0 = s * pl->split_keys, c1 = c0 + pl->split_keys;
        if (c0 > k_begin) k_begin = c0;
        if (c1 < k_end) k_end = c1;
    }
    cpu_fwd_rows(p, pl, &seq, b, h, i0, rows, k_begin, k_end, t);

    if (pl->num_splits == 1) {
        cpu_fwd_store(p, &seq, h, i0, rows, t->m, t->l, t->acc);
        return;
    }
    for (int r = 0; r < rows; ++r) { /* partial state record (m, l, acc) of (b, h, i, s) */
        float *rec =
            partials +
            (((b * p->heads_q + h) * p->seqlen_q + i0 + r) * pl->num_splits + s) * (D + 2);
        rec[0] = t->m[r];
        rec[1] = t->l[r];
        for (int64_t d = 0; d < D; ++d) rec[2 + d] = t->acc[(int64_t)r * D + d];
    }
}

/// Merges the split states of row i of (b, h) in split order and stores it.
static void cpu_fwd_merge_row(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t b,
                              int64_t h, int64_t i, const float *partials, float *acc) {
    const int64_t D = p->head_dim;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const float *rec = partials + ((b * p->heads_q + h) * p->seqlen_q + i) * pl->num_splits * (D + 2);
    float m, l;
    if (i >= seq.sq) return;
    fmsa_softmax_init(&m, &l);
    fmsa_cpu_zero(acc, D);
    for (int64_t s = 0; s < pl->num_splits; ++s, rec += D + 2) {
        float ca, cb;
        fmsa_softmax_merge(&m, &l, rec[0], rec[1], &ca, &cb);
        for (int64_t d = 0; d < D; ++d) acc[d] = ca * acc[d] + cb * rec[2 + d];
    }
    cpu_fwd_store(p, &seq, h, i, 1, &m, &l, acc);
}

fmsa_status fmsa_cpu_forward(void *state, const fmsa_problem *p, void *workspace,
                             size_t workspace_bytes, void *stream) {
    fmsa_cpu_plan pl;
    int nthreads;
    char *scratch;
    int64_t items;
    float *partials = (float *)workspace;
    (void)stream; /* the CPU runs synchronously */

    FMSA_TRY(fmsa_cpu_plan_make((const fmsa_cpu_state *)state, p, &pl));
    if (workspace_bytes < pl.workspace_bytes || (pl.workspace_bytes > 0 && !workspace))
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "cpu: forward needs %zu bytes of workspace, got %zu", pl.workspace_bytes,
                         workspace ? workspace_bytes : (size_t)0);
    FMSA_TRY(fmsa_cpu_check_sequences(p));
    items = p->batch * p->heads_q * pl.tiles_q * pl.num_splits;
    if (items == 0) return FMSA_SUCCESS;

    nthreads = fmsa_cpu_max_threads();
    scratch = (char *)fmsa_cpu_aligned_alloc((size_t)nthreads * pl.scratch_bytes);
    if (!scratch)
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "cpu: forward scratch of %d x %zu bytes",
                         nthreads, pl.scratch_bytes);

FMSA_CPU_OMP(omp parallel num_threads(nthreads))
    {
        cpu_fwd_tiles t =
            cpu_fwd_carve(scratch + (size_t)fmsa_cpu_thread_num() * pl.scratch_bytes, &pl,
                          p->head_dim);
FMSA_CPU_OMP(omp for schedule(dynamic, 1))
        for (int64_t it = 0; it < items; ++it) {
            int64_t rest = it;
            const int64_t s = rest % pl.num_splits;
            int64_t qt, h, b;
            rest /= pl.num_splits;
            qt = pl.tiles_q - 1 - rest % pl.tiles_q; /* heaviest causal tiles first */
            rest /= pl.tiles_q;
            h = rest % p->heads_q;
            b = rest / p->heads_q;
            cpu_fwd_item(p, &pl, b, h, qt, s, &t, partials);
        }
        if (pl.num_splits > 1) {
            const int64_t rows = p->batch * p->heads_q * p->seqlen_q;
            /* the implicit barrier of the loop above orders partials before the merge */
FMSA_CPU_OMP(omp for schedule(static))
            for (int64_t it = 0; it < rows; ++it) {
                const int64_t i = it % p->seqlen_q, bh = it / p->seqlen_q;
                cpu_fwd_merge_row(p, &pl, bh / p->heads_q, bh % p->heads_q, i, partials, t.acc);
            }
        }
    }
    fmsa_cpu_aligned_free(scratch);
    return FMSA_SUCCESS;
}
