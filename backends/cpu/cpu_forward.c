/*
 * CPU forward: FlashAttention-2 tiling (Dao 2023, §3.1) over OpenMP.
 *
 * For each chunk of (sequence, kv head) slots, the work items (query head of
 * the GQA group, query tile[, key split]) are dealt to the threads a slot at
 * a time, heaviest first, with stealing at the end (cpu_sched.h), all of
 * them reading K and V from shared panels (cpu_pack.h).  A slot's panels
 * are packed on first use: the first items to need a slot claim its key
 * tiles one by one and pack them, later ones wait for the last tile, so
 * packing overlaps other threads' products and the panels are read while
 * still in the packing cores' caches (history: bench/RESULTS.md).  Each item
 * keeps one online-softmax state per row (fmsa_softmax.h), walks only the
 * key tiles its window can see, and runs S = Q·Kᵀ and acc += P·V through
 * the ISA's micro-kernels (cpu_kernels.h).  With split-KV (decode shapes)
 * each item covers one range of keys and leaves its (m, l, acc) in the
 * workspace; a last parallel loop merges the ranges of every row in split
 * order.  Nothing an item computes depends on which thread runs it.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_pack.h"
#include "backends/cpu/cpu_sched.h"
#include "backends/cpu/cpu_tile.h"
#include "backends/cpu/cpu_trace.h"
#include "common/error.h"
#include "common/fmsa_score.h"
#include "common/fmsa_softmax.h"

/// One thread's tiles, carved from its slice of the scratch allocation.
typedef struct cpu_fwd_tiles {
    float *q;   ///< [block_m][D] query rows, scale folded in
    float *acc; ///< [block_m][Dv] unnormalised output rows
    float *s;   ///< [block_m][block_n] base-2 scores, then probabilities
    float *m;   ///< [block_m] running maxima
    float *l;   ///< [block_m] running sums
} cpu_fwd_tiles;

static cpu_fwd_tiles cpu_fwd_carve(char *base, const fmsa_cpu_plan *pl, int64_t D, int64_t Dv) {
    cpu_fwd_tiles t;
    const size_t row_tile = fmsa_cpu_round64((size_t)pl->block_m * (size_t)D * sizeof(float));
    const size_t acc_tile = fmsa_cpu_round64((size_t)pl->block_m * (size_t)Dv * sizeof(float));
    const size_t score = fmsa_cpu_round64((size_t)pl->block_m * pl->block_n * sizeof(float));
    const size_t vec = fmsa_cpu_round64((size_t)pl->block_m * sizeof(float));
    t.q = (float *)base;
    base += row_tile;
    t.acc = (float *)base;
    base += acc_tile;
    t.s = (float *)base;
    base += score;
    t.m = (float *)base;
    base += vec;
    t.l = (float *)base;
    return t;
}

/// One thread's tiles: those of the plan's product variant are carved.
typedef struct cpu_fwd_thread {
    cpu_fwd_tiles t;        ///< fp32-staged products
    fmsa_cpu_b16_tiles bt;  ///< bf16 products (cpu_forward_b16.c)
    float *merge_row;       ///< Dv floats for the split merge
} cpu_fwd_thread;

/// The row states an item's rows end in (to store or to record for the merge).
typedef struct cpu_fwd_rows_out {
    const float *m, *l; ///< [rows] maxima and sums
    float *acc;         ///< [rows][acc_ld] unnormalised output rows
    int64_t acc_ld;
} cpu_fwd_rows_out;

/// A product variant of the forward: how a thread carves its tiles, how a
/// key tile of a slot is packed into the slot's panels, and how an item's
/// query rows run keys [k_begin, k_end).  cpu_fwd_variant_of picks one.
typedef struct cpu_fwd_variant {
    void (*carve)(char *mine, const fmsa_cpu_plan *pl, const fmsa_problem *p, cpu_fwd_thread *th);
    void (*pack)(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                 float *slot_panels, int64_t ktile, cpu_fwd_thread *th);
    cpu_fwd_rows_out (*rows)(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                             const fmsa_seq *seq, int64_t b, int64_t h, int64_t i0, int rows,
                             int64_t k_begin, int64_t k_end, const float *slot_panels,
                             cpu_fwd_thread *th);
} cpu_fwd_variant;

/// fp32-staged: Kᵀ tiles ([D][Bc] each), then V rows ([keys][Dv]), in the slot's panels.
static void cpu_fwd_fp32_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                              float *slot_panels, int64_t ktile, cpu_fwd_thread *th) {
    const int64_t D = p->head_dim, b = slot / p->heads_kv, hk = slot % p->heads_kv;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t j0 = ktile * pl->block_n;
    const int cols = (int)(seq.sk - j0 < pl->block_n ? seq.sk - j0 : pl->block_n);
    float *v = slot_panels + pl->tiles_k * pl->block_n * D + j0 * p->head_dim_v;
    (void)th;
    if (cols <= 0) return;
    fmsa_cpu_pack_keys_t(pl->kern, p, &p->k, &seq, b, hk, j0, cols, pl->block_n,
                         slot_panels + ktile * D * pl->block_n);
    fmsa_cpu_pack_rows(p, &p->v, &seq, b, hk, 1, j0, cols, 1.0f, v);
}

/// Per-slot packing state of a chunk: key tiles claimed and key tiles packed.
typedef struct cpu_fwd_slot_pack {
    atomic_llong claimed, packed;
} cpu_fwd_slot_pack;

/// Claims the slot's next unpacked key tile and packs it; 0 when none was left.
static int cpu_fwd_pack_next(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                             const cpu_fwd_variant *var, int64_t slot, float *slot_panels,
                             cpu_fwd_thread *th, cpu_fwd_slot_pack *st) {
    const long long job = atomic_fetch_add_explicit(&st->claimed, 1, memory_order_relaxed);
    double t0;
    if (job >= pl->tiles_k) return 0;
    t0 = fmsa_cpu_trace_now(pl->trace);
    var->pack(p, pl, slot, slot_panels, job, th);
    atomic_fetch_add_explicit(&st->packed, 1, memory_order_release);
    fmsa_cpu_trace_add(pl->trace, FMSA_CPU_TRACE_PACK, t0);
    return 1;
}

/// Returns once every key tile of the slot is packed, packing unclaimed
/// ones itself.
static void cpu_fwd_ensure_packed(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                  const cpu_fwd_variant *var, int64_t slot, float *slot_panels,
                                  cpu_fwd_thread *th, cpu_fwd_slot_pack *st) {
    if (atomic_load_explicit(&st->packed, memory_order_acquire) == pl->tiles_k) return;
    while (cpu_fwd_pack_next(p, pl, var, slot, slot_panels, th, st)) {
    }
    /* the remaining tiles are in other threads' hands: at most one tile pack each */
    for (unsigned spins = 0;
         atomic_load_explicit(&st->packed, memory_order_acquire) < pl->tiles_k; ++spins)
        fmsa_cpu_spin_pause(spins);
}

/// Rows of a key tile's sub-blocks where the tile crosses the causal (or
/// window) edge: row block r0 stops at its own last visible key, so the
/// triangle past the diagonal is neither multiplied nor exponentiated.  A
/// 128x128 diagonal tile then costs 32+64+96+128 = 320 of 512 key columns.
/// The sums are unchanged: the keys cut off would add exp2(-inf) = 0 to l
/// and 0 * V to acc.
#define CPU_FWD_EDGE_ROWS 32

/// Folds score rows [r0, r0+nr) of t->s (cols keys) into their row states.
/// next_kt / next_v: the next key tile's panels (NULL: none), fetched into L2
/// a slice per row of the tile's `rows`, since the shared panels come from L3.
static void cpu_fwd_update(const fmsa_cpu_plan *pl, cpu_fwd_tiles *t, int r0, int nr, int rows,
                           int cols, int ld, const float *v, int64_t D, int64_t Dv,
                           const float *next_kt, const float *next_v) {
    const fmsa_cpu_prefetch pf = {next_kt, next_v, (int64_t)ld * D * (int64_t)sizeof(float),
                                  (int64_t)ld * Dv * (int64_t)sizeof(float), r0, rows};
    pl->kern->tile_softmax(t->s + (int64_t)r0 * ld, nr, cols, ld, t->m + r0, t->l + r0,
                           t->acc + (int64_t)r0 * Dv, (int)Dv, &pf);
    pl->kern->gemm(nr, (int)Dv, cols, t->s + (int64_t)r0 * ld, ld, 1, v, Dv,
                   t->acc + (int64_t)r0 * Dv, Dv, 1); /* acc += P·V */
}

/// Runs keys [k_begin, k_end) of query rows [i0, i0+rows) into t's states.
static void cpu_fwd_rows(const fmsa_problem *p, const fmsa_cpu_plan *pl, const fmsa_seq *seq,
                         int64_t b, int64_t h, int64_t i0, int rows, int64_t k_begin,
                         int64_t k_end, const float *kt, const float *v, cpu_fwd_tiles *t) {
    const int64_t D = p->head_dim, Dv = p->head_dim_v;
    const int ld = pl->block_n;
    /* Without softcap, scale * log2(e) is folded into Q so S is already base 2;
     * softcap needs the natural-unit score inside tanh, so only scale is folded. */
    const float q_scale = p->softcap > 0.0f ? p->softmax_scale : p->softmax_scale * FMSA_LOG2E;
    fmsa_cpu_score sc;

    fmsa_cpu_score_init(&sc, p, seq, b, h, 1.0f);
    for (int r = 0; r < rows; ++r)
        fmsa_cpu_softmax_start(p, pl->num_splits == 1, h, &t->m[r], &t->l[r]);
    fmsa_cpu_pack_rows(p, &p->q, seq, b, h, 0, i0, rows, q_scale, t->q);
    fmsa_cpu_zero(t->acc, (int64_t)rows * Dv);

    /* packed key tiles, cut at k_end: keys from there on are outside every
     * row's window (the causal diagonal's tile is the common case), so they
     * would only add exp2(-inf) = 0 to the sums; keys of a tile before
     * k_begin come out of the score tile as -inf */
    for (int64_t j0 = k_begin / ld * ld; j0 < k_end; j0 += ld) {
        const int cols = (int)(k_end - j0 < ld ? k_end - j0 : ld);
        const float *next_kt = j0 + ld < k_end ? kt + (j0 / ld + 1) * D * ld : NULL;
        const float *next_v = j0 + ld < k_end ? v + (j0 + ld) * Dv : NULL;
        /* the first rows' own key end: short of cols, the tile crosses the edge */
        const int first = rows < CPU_FWD_EDGE_ROWS ? rows : CPU_FWD_EDGE_ROWS;
        const int64_t e0 = fmsa_window_key_end(i0 + first, seq->sq, seq->sk, p->window_right);
        const int step = e0 - j0 < cols ? CPU_FWD_EDGE_ROWS : rows;
        if (!fmsa_cpu_tile_visible(&sc, i0, rows, j0, cols)) continue;
        for (int r0 = 0; r0 < rows; r0 += step) {
            const int nr = rows - r0 < step ? rows - r0 : step;
            const int64_t e = fmsa_window_key_end(i0 + r0 + nr, seq->sq, seq->sk, p->window_right);
            const int c = (int)(e - j0 < cols ? e - j0 : cols);
            if (c <= 0) continue; /* these rows see no key of the tile */
            fmsa_cpu_score_tile(pl->kern, &sc, t->q + (int64_t)r0 * D, D, nr, i0 + r0,
                                kt + (j0 / ld) * D * ld, c, j0, ld, t->s + (int64_t)r0 * ld, NULL);
            cpu_fwd_update(pl, t, r0, nr, rows, c, ld, v + j0 * Dv, D, Dv, next_kt, next_v);
        }
    }
}

/// fp32-staged rows of an item (cpu_fwd_rows on the slot's Kᵀ and V panels).
static cpu_fwd_rows_out cpu_fwd_fp32_rows(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                          const fmsa_seq *seq, int64_t b, int64_t h, int64_t i0,
                                          int rows, int64_t k_begin, int64_t k_end,
                                          const float *slot_panels, cpu_fwd_thread *th) {
    const float *v = slot_panels + pl->tiles_k * pl->block_n * p->head_dim;
    cpu_fwd_rows(p, pl, seq, b, h, i0, rows, k_begin, k_end, slot_panels, v, &th->t);
    return (cpu_fwd_rows_out){th->t.m, th->t.l, th->t.acc, p->head_dim_v};
}

static void cpu_fwd_fp32_carve(char *mine, const fmsa_cpu_plan *pl, const fmsa_problem *p,
                               cpu_fwd_thread *th) {
    th->t = cpu_fwd_carve(mine, pl, p->head_dim, p->head_dim_v);
    th->merge_row = th->t.acc;
}

/// bf16 products: the rows of cpu_forward_b16.c.  Without splits the bf16
/// output rows (64 x 256 bytes at d = 128) are first fetched for writing, so
/// they are owned by the time they are stored (not the fp32 ones, whose
/// 32 KiB would fill most of L1 as the item starts).
static cpu_fwd_rows_out cpu_fwd_b16_rows(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                                         const fmsa_seq *seq, int64_t b, int64_t h, int64_t i0,
                                         int rows, int64_t k_begin, int64_t k_end,
                                         const float *slot_panels, cpu_fwd_thread *th) {
    if (pl->num_splits == 1) {
        const uint16_t *ob = (const uint16_t *)fmsa_view4_host(&p->o); /* bf16 */
        for (int r = 0; r < rows; ++r) {
            const char *orow = (const char *)(ob + fmsa_problem_q_offset(&p->o, seq, i0 + r, h));
            for (int64_t x = 0; x < p->head_dim_v * 2; x += 64) FMSA_CPU_PREFETCH_L2_W(orow + x);
        }
    }
    fmsa_cpu_b16_rows(p, pl, seq, b, h, i0, rows, k_begin, k_end, slot_panels, &th->bt);
    return (cpu_fwd_rows_out){th->bt.m, th->bt.l, th->bt.acc, th->bt.acc_ld};
}

static void cpu_fwd_b16_carve(char *mine, const fmsa_cpu_plan *pl, const fmsa_problem *p,
                              cpu_fwd_thread *th) {
    fmsa_cpu_b16_carve(mine, pl->block_m, pl->block_n, p->head_dim, p->head_dim_v, &th->bt);
    th->merge_row = th->bt.acc;
}

static void cpu_fwd_b16_pack(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot,
                             float *slot_panels, int64_t ktile, cpu_fwd_thread *th) {
    fmsa_cpu_b16_pack(p, pl, slot, slot_panels, ktile, th->bt.stage);
}

static const cpu_fwd_variant cpu_fwd_fp32 = {cpu_fwd_fp32_carve, cpu_fwd_fp32_pack,
                                             cpu_fwd_fp32_rows};
static const cpu_fwd_variant cpu_fwd_b16 = {cpu_fwd_b16_carve, cpu_fwd_b16_pack,
                                            cpu_fwd_b16_rows};

/// The one variant decision of the forward: the plan's product variant.
static const cpu_fwd_variant *cpu_fwd_variant_of(const fmsa_cpu_plan *pl) {
    return pl->b16 ? &cpu_fwd_b16 : &cpu_fwd_fp32;
}

/// Finalizes rows into O (output dtype) and LSE (fp32, natural log) when requested.
static void cpu_fwd_store(const fmsa_problem *p, const fmsa_cpu_kernels *kern,
                          const fmsa_seq *seq, int64_t h, int64_t i0, int rows, const float *m,
                          const float *l, float *acc, int64_t acc_ld) {
    const int64_t Dv = p->head_dim_v;
    char *ob = fmsa_view4_host(&p->o);
    float *lse_base = p->has_lse ? (float *)fmsa_viewn_host(&p->lse) : NULL;
    for (int r = 0; r < rows; ++r) {
        float lse;
        float inv_l = fmsa_softmax_finalize(m[r], l[r], &lse);
        const int64_t off = fmsa_problem_q_offset(&p->o, seq, i0 + r, h);
        /* a fully masked row has acc = 0 and inv_l = 0: O = 0, never NaN;
         * the accumulator row is not read again, so it may be scaled in place */
        fmsa_cpu_row_store_kern(kern, ob, p->dtype, off, Dv, inv_l, acc + (int64_t)r * acc_ld);
        if (lse_base) lse_base[fmsa_problem_lse_offset(p, seq, i0 + r, h)] = lse;
    }
}

/// Key range [*k_begin, *k_end) of query rows [i0, i0+rows) within split s.
static void cpu_fwd_keys(const fmsa_problem *p, const fmsa_cpu_plan *pl, const fmsa_seq *seq,
                         int64_t i0, int rows, int64_t s, int64_t *k_begin, int64_t *k_end) {
    *k_begin = fmsa_window_key_begin(i0, seq->sq, seq->sk, p->window_left);
    *k_end = fmsa_window_key_end(i0 + rows, seq->sq, seq->sk, p->window_right);
    if (pl->num_splits > 1) {
        const int64_t c0 = s * pl->split_keys, c1 = c0 + pl->split_keys;
        if (c0 > *k_begin) *k_begin = c0;
        if (c1 < *k_end) *k_end = c1;
    }
}

/// One work item: query head `sub` of the slot's group, query tile, key split,
/// on the calling thread's tiles th.
static void cpu_fwd_item(const fmsa_problem *p, const fmsa_cpu_plan *pl,
                         const cpu_fwd_variant *var, const fmsa_cpu_item *it,
                         const float *slot_panels, cpu_fwd_thread *th, float *partials) {
    const int64_t Dv = p->head_dim_v, b = it->slot / p->heads_kv;
    const int64_t h = (it->slot % p->heads_kv) * (p->heads_q / p->heads_kv) + it->sub;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const int64_t i0 = it->tile * pl->block_m, s = it->split;
    const int rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
    int64_t k_begin, k_end;
    cpu_fwd_rows_out o;

    cpu_fwd_keys(p, pl, &seq, i0, rows, s, &k_begin, &k_end);
    o = var->rows(p, pl, &seq, b, h, i0, rows, k_begin, k_end, slot_panels, th);
    if (pl->num_splits == 1) {
        const double t0 = fmsa_cpu_trace_now(pl->trace);
        cpu_fwd_store(p, pl->kern, &seq, h, i0, rows, o.m, o.l, o.acc, o.acc_ld);
        fmsa_cpu_trace_add(pl->trace, FMSA_CPU_TRACE_STORE, t0);
        return;
    }
    for (int r = 0; r < rows; ++r) { /* partial state record (m, l, acc) of (b, h, i, s) */
        float *rec =
            partials +
            (((b * p->heads_q + h) * p->seqlen_q + i0 + r) * pl->num_splits + s) * (Dv + 2);
        rec[0] = o.m[r];
        rec[1] = o.l[r];
        for (int64_t d = 0; d < Dv; ++d) rec[2 + d] = o.acc[(int64_t)r * o.acc_ld + d];
    }
}

/// The work items of slots [slot0, slot0 + nslots) (unordered: cpu_sched.h orders them).
static int64_t cpu_fwd_items(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t slot0,
                             int64_t nslots, fmsa_cpu_item *items) {
    const int64_t group = p->heads_q / p->heads_kv;
    int64_t n = 0;
    for (int64_t slot = slot0; slot < slot0 + nslots; ++slot) {
        const fmsa_seq seq = fmsa_problem_seq(p, slot / p->heads_kv);
        for (int64_t g = 0; g < group; ++g)
            for (int64_t qt = 0; qt * pl->block_m < seq.sq; ++qt)
                for (int64_t s = 0; s < pl->num_splits; ++s) {
                    const int64_t i0 = qt * pl->block_m;
                    const int rows = (int)(seq.sq - i0 < pl->block_m ? seq.sq - i0 : pl->block_m);
                    int64_t kb, ke;
                    cpu_fwd_keys(p, pl, &seq, i0, rows, s, &kb, &ke);
                    /* an empty split still writes its (empty) state for the merge */
                    items[n].slot = slot;
                    items[n].sub = g;
                    items[n].tile = qt;
                    items[n].split = s;
                    items[n].cost = (ke > kb ? ke - kb : 0) + 1;
                    ++n;
                }
    }
    return n;
}

/// Merges the split states of row i of (b, h) in split order, starting from
/// the sink's state (the splits start empty), and stores it.
static void cpu_fwd_merge_row(const fmsa_problem *p, const fmsa_cpu_plan *pl, int64_t b,
                              int64_t h, int64_t i, const float *partials, float *acc) {
    const int64_t Dv = p->head_dim_v;
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const float *rec =
        partials + ((b * p->heads_q + h) * p->seqlen_q + i) * pl->num_splits * (Dv + 2);
    float m, l;
    if (i >= seq.sq) return;
    fmsa_cpu_softmax_start(p, 1, h, &m, &l);
    fmsa_cpu_zero(acc, Dv);
    for (int64_t s = 0; s < pl->num_splits; ++s, rec += Dv + 2) {
        float ca, cb;
        fmsa_softmax_merge(&m, &l, rec[0], rec[1], &ca, &cb);
        for (int64_t d = 0; d < Dv; ++d) acc[d] = ca * acc[d] + cb * rec[2 + d];
    }
    cpu_fwd_store(p, pl->kern, &seq, h, i, 1, &m, &l, acc, Dv);
}

fmsa_status fmsa_cpu_forward(void *state, const fmsa_problem *p, void *workspace,
                             size_t workspace_bytes, void *stream) {
    fmsa_cpu_state *st = (fmsa_cpu_state *)state;
    const cpu_fwd_variant *var;
    fmsa_cpu_plan pl;
    int nthreads;
    char *scratch;
    float *panels;
    fmsa_cpu_item *items;
    cpu_fwd_slot_pack *slot_packs;
    fmsa_cpu_sched sched;
    int64_t max_items, n_items = 0; /* n_items: shared, written by one thread per chunk */
    float *partials = (float *)workspace;
    fmsa_cpu_pass_buffers bufs;
    fmsa_cpu_trace tr;
    (void)stream; /* the CPU runs synchronously */

    FMSA_TRY(fmsa_cpu_plan_of(st, p, &pl));
    if (workspace_bytes < pl.workspace_bytes || (pl.workspace_bytes > 0 && !workspace))
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "cpu: forward needs %zu bytes of workspace, got %zu", pl.workspace_bytes,
                         workspace ? workspace_bytes : (size_t)0);
    FMSA_TRY(fmsa_cpu_check_sequences(p));
    if (p->batch * p->heads_q * pl.tiles_q == 0) return FMSA_SUCCESS;
    var = cpu_fwd_variant_of(&pl);

    nthreads = fmsa_cpu_max_threads();
    max_items = pl.chunk_slots * (p->heads_q / p->heads_kv) * pl.tiles_q * pl.num_splits;
    {
        const size_t lists[3] = {(size_t)max_items * sizeof *items,
                                 (size_t)pl.chunk_slots * sizeof *slot_packs,
                                 fmsa_cpu_sched_bytes(pl.chunk_slots, nthreads)};
        FMSA_TRY(fmsa_cpu_pass_buffers_take(&st->arena, st->opt.poison, "forward", nthreads, &pl,
                                            3, lists, &bufs));
        scratch = bufs.scratch;
        panels = bufs.panels;
        items = (fmsa_cpu_item *)bufs.lists[0];
        slot_packs = (cpu_fwd_slot_pack *)bufs.lists[1];
        fmsa_cpu_sched_carve(bufs.lists[2], pl.chunk_slots, nthreads, &sched);
    }

    fmsa_cpu_trace_begin(&tr, st->opt.trace, nthreads);
    pl.trace = &tr;
FMSA_CPU_OMP(omp parallel num_threads(nthreads))
    {
        cpu_fwd_thread th = {0};
        var->carve(scratch + (size_t)fmsa_cpu_thread_num() * pl.scratch_bytes, &pl, p, &th);
        for (int64_t slot0 = 0; slot0 < pl.slots; slot0 += pl.chunk_slots) {
            const int64_t nslots =
                pl.slots - slot0 < pl.chunk_slots ? pl.slots - slot0 : pl.chunk_slots;
            fmsa_cpu_cursor cursor = {0, 0};
            int64_t next;
            /* one thread orders the chunk's items, deals them to the team a
             * slot at a time and resets the packing state (the single's
             * barrier publishes all) */
FMSA_CPU_OMP(omp single)
            {
                n_items = cpu_fwd_items(p, &pl, slot0, nslots, items);
                fmsa_cpu_sched_build(&sched, items, n_items, fmsa_cpu_team_size(),
                                     FMSA_CPU_SCHED_SLOTS);
                for (int64_t s = 0; s < nslots; ++s) {
                    atomic_init(&slot_packs[s].claimed, 0);
                    atomic_init(&slot_packs[s].packed, 0);
                }
            }
            while ((next = fmsa_cpu_sched_next(&sched, fmsa_cpu_thread_num(), &cursor)) >= 0) {
                const fmsa_cpu_item *item = &items[next];
                const int64_t in_chunk = item->slot - slot0;
                float *slot_panels = panels + in_chunk * pl.slot_floats;
                double t0;
                cpu_fwd_ensure_packed(p, &pl, var, item->slot, slot_panels, &th,
                                      &slot_packs[in_chunk]);
                t0 = fmsa_cpu_trace_now(&tr);
                cpu_fwd_item(p, &pl, var, item, slot_panels, &th, partials);
                fmsa_cpu_trace_add(&tr, FMSA_CPU_TRACE_STAGE_A, t0);
            }
            /* every item of the chunk is done before the next chunk's single
             * rewrites the list and the panels */
FMSA_CPU_OMP(omp barrier)
        }
        if (pl.num_splits > 1) {
            const int64_t rows = p->batch * p->heads_q * p->seqlen_q;
            /* the barrier after the items orders partials before the merge */
FMSA_CPU_OMP(omp for schedule(static))
            for (int64_t it = 0; it < rows; ++it) {
                const int64_t i = it % p->seqlen_q, bh = it / p->seqlen_q;
                cpu_fwd_merge_row(p, &pl, bh / p->heads_q, bh % p->heads_q, i, partials,
                                  th.merge_row);
            }
        }
    }
    fmsa_cpu_trace_end(&tr, "forward", fmsa_cpu_ceil_div(pl.slots, pl.chunk_slots));
    fmsa_cpu_arena_give(&st->arena, bufs.base);
    return FMSA_SUCCESS;
}
