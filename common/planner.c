/*
 * The tile planner: one pure function from (device, problem) to a tile plan,
 * reading the tables in common/plan_tables/, plus the split-KV decision.  No
 * state, no I/O besides the error message of a failed call: the same input
 * always gives the same plan, so dispatch, support checks and workspace
 * sizing (which all call it) cannot disagree.
 */
#include "common/planner.h"
#include "common/problem.h"

#include <string.h>

#include "common/error.h"
#include "common/fmsa_limits.h"

/// Rounds x up to a multiple of q (q >= 1).
static int64_t fmsa_round_up(int64_t x, int64_t q) {
    return (x + q - 1) / q * q;
}

/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b.
static int64_t fmsa_ceil_div(int64_t a, int64_t b) {
    return a / b + (a % b != 0);
}

/*
 * Which table a device uses.  An exact (backend, arch) match wins.  An arch
 * the tables do not know falls back to the backend's most conservative
 * table, still fit-checked against the device's own SRAM limit:
 *   CPU    -> "cpu": scalar granularity (dev->warp_size still applies when
 *             reported), cache-driven tiles valid for any ISA;
 *   CUDA   -> "sm80": mma.sync exists on every later arch, and its rows
 *             include shapes for the 48 KiB no-opt-in limit;
 *   HIP    -> "gfx90a": the older CDNA, whose MFMA set gfx942 extends;
 *   OpenCL -> "opencl": the generic table is the only one.
 */
const fmsa_arch_table *fmsa_plan_find_table(const fmsa_device_info *dev) {
    int n = 0, i;
    const fmsa_arch_table *const *t = fmsa_plan_arch_tables(&n);
    const char *fallback = NULL;
    if (!dev) return NULL;
    for (i = 0; i < n; i++)
        if (t[i]->backend == dev->backend &&
            strncmp(t[i]->arch, dev->arch, sizeof dev->arch) == 0)
            return t[i];
    switch (dev->backend) {
    case FMSA_BACKEND_CPU: fallback = "cpu"; break;
    case FMSA_BACKEND_CUDA: fallback = "sm80"; break;
    case FMSA_BACKEND_HIP: fallback = "gfx90a"; break;
    case FMSA_BACKEND_OPENCL: fallback = "opencl"; break;
    default: return NULL;
    }
    for (i = 0; i < n; i++)
        if (t[i]->backend == dev->backend && strcmp(t[i]->arch, fallback) == 0) return t[i];
    return NULL;
}

/*
 * GPUs: opt-in shared memory is what the kernels request (CUDA's
 * cudaFuncAttributeMaxDynamicSharedMemorySize); devices without an opt-in
 * report 0 there and the default per-block limit applies.
 * CPUs: a cache is a soft limit -- overflowing it costs speed, never
 * correctness -- and the CPU backend must always run, so a device reporting
 * a tiny or unknown L2 is planned as if it had FMSA_PLAN_CPU_MIN_L2 (the
 * smallest per-core L2 of the x86-64 and AArch64 cores we target).
 */
size_t fmsa_plan_sram_limit(const fmsa_device_info *dev) {
    size_t limit;
    if (!dev) return 0;
    limit = dev->sram_per_block_optin > 0 ? dev->sram_per_block_optin : dev->sram_per_block;
    if (dev->backend == FMSA_BACKEND_CPU && limit < FMSA_PLAN_CPU_MIN_L2)
        limit = FMSA_PLAN_CPU_MIN_L2;
    return limit;
}

/// The CPU's L1d as the planner assumes it (for the "K tile in L1" preference).
static size_t fmsa_plan_cpu_l1(const fmsa_device_info *dev) {
    return dev->sram_per_block > 0 ? dev->sram_per_block : FMSA_PLAN_CPU_DEFAULT_L1;
}

/// Widest fp32 SIMD width the CPU planner accepts (keeps every product in
/// the SRAM formulas far from int64 overflow; real ISAs have <= 64 lanes).
#define FMSA_PLAN_CPU_MAX_SIMD 1024

/// Granularity of CPU blocks: the fp32 SIMD width the backend reports, else
/// the table's ISA default.
static int64_t fmsa_plan_cpu_simd(const fmsa_device_info *dev, const fmsa_arch_table *t) {
    if (dev->warp_size > 0) return dev->warp_size;
    return t->simd_width > 0 ? t->simd_width : 1;
}

/*
 * SRAM estimate of one row (bytes).  e = element bytes of the dtype, d = the
 * head dim the kernel is compiled for (the row's bucket when the table pads).
 *
 * GPU forward: the Q tile is loaded once per block and stays resident
 * (FA2/FA3 keep it in smem; CDNA keeps it in registers: no Q flag); K and V
 * stream through `stages` buffers each; P only costs SRAM where the second
 * GEMM reads it from shared memory (FA3 d <= 64).  O leaves through SRAM
 * aliased onto Q or V (FA2, FA3 both alias), so it adds nothing.
 *
 * GPU backward (KV-stationary, as FA2/FA3/CK): Q and dO stream through
 * `stages` buffers each; K and V are resident unless kept in registers; P
 * and dS, when they go through SRAM (both are the operand of two GEMMs in
 * different layouts), come with the tile's LSE and D = rowsum(dO*O) fp32
 * rows; an fp32 dQ accumulator tile when dQ leaves through SRAM (FA3's TMA
 * reduce-add; FA2 uses global atomics instead).
 *
 * CPU: everything in fp32 (4 bytes) whatever the dtype; forward working set
 * Q + K + V + S/P + O accumulator + (m, l); backward Q + dO + K + V + dK +
 * dV accumulators + dQ accumulator + P + dS + (LSE, D).
 *
 * NONE: tiles live in work-item private memory; nothing is costed.
 */
static size_t fmsa_plan_row_bytes(const fmsa_arch_table *t, const fmsa_tile_row *r,
                                  int64_t head_dim, fmsa_dtype dtype, int64_t bm, int64_t bn) {
    int64_t d = t->pad_head_dim ? r->max_head_dim : head_dim;
    int64_t st = r->stages;
    int64_t bytes = 0;
    if (t->model == FMSA_SRAM_MODEL_NONE) return 0;
    if (r->sram_bytes) return r->sram_bytes;
    if (t->model == FMSA_SRAM_MODEL_CPU && r->dtypes == FMSA_PLAN_DTYPES_BF16_MMA) {
        /* bf16 operands: fwd Q, K, V, P in bf16 + fp32 S, acc, (m, l);
         * bwd Q, dO, K, V, P, dS in bf16 + fp32 S, dP, dK, dV, dQ, (lse, D) */
        if (r->pass == FMSA_PASS_FORWARD)
            bytes = 2 * (bm * d + 2 * bn * d + bm * bn) + 4 * (bm * bn + bm * d + 2 * bm);
        else
            bytes = 2 * (2 * bm * d + 2 * bn * d + 2 * bm * bn) +
                    4 * (2 * bm * bn + 2 * bn * d + bm * d + 2 * bm);
        return (size_t)bytes;
    }
    if (t->model == FMSA_SRAM_MODEL_CPU) {
        if (r->pass == FMSA_PASS_FORWARD)
            bytes = 4 * (bm * d + 2 * bn * d + bm * bn + bm * d + 2 * bm);
        else
            bytes = 4 * (2 * bm * d + 4 * bn * d + bm * d + 2 * bm * bn + 2 * bm);
        return (size_t)bytes;
    }
    {
        int64_t e = (int64_t)fmsa_dtype_size(dtype);
        if (r->pass == FMSA_PASS_FORWARD) {
            if (r->sram & FMSA_TILE_Q_SRAM) bytes += bm * d * e;
            bytes += st * 2 * bn * d * e;
            if (r->sram & FMSA_TILE_P_SRAM) bytes += bm * bn * e;
        } else {
            if (r->sram & FMSA_TILE_Q_SRAM) bytes += st * 2 * bm * d * e;
            if (!(r->sram & FMSA_TILE_KV_REGS)) bytes += 2 * bn * d * e;
            if (r->sram & FMSA_TILE_P_SRAM) bytes += 2 * bm * bn * e + st * 2 * bm * 4;
            if (r->sram & FMSA_TILE_DQ_SRAM) bytes += bm * d * 4;
        }
    }
    return (size_t)bytes;
}

/// True when row r may serve this request (pass, head dim, dtype, features).
static int fmsa_plan_row_applies(const fmsa_tile_row *r, const fmsa_plan_request *req) {
    int is16 = req->dtype == FMSA_DTYPE_F16 || req->dtype == FMSA_DTYPE_BF16;
    int64_t dv = req->head_dim_v > 0 ? req->head_dim_v : req->head_dim; /* 0: D_v = D */
    if (r->pass != req->pass) return 0;
    if (req->head_dim > r->max_head_dim) return 0;
    if (r->max_head_dim_v == FMSA_PLAN_DV_SAME && dv != req->head_dim) return 0;
    if (r->max_head_dim_v > 0 && dv > r->max_head_dim_v) return 0;
    if (r->dtypes == FMSA_PLAN_DTYPES_16BIT && !is16) return 0;
    if (r->dtypes == FMSA_PLAN_DTYPES_F32 && req->dtype != FMSA_DTYPE_F32) return 0;
    if (r->dtypes == FMSA_PLAN_DTYPES_BF16_MMA &&
        (req->dtype != FMSA_DTYPE_BF16 || !(req->caps & FMSA_PLAN_CAP_BF16_MMA)))
        return 0;
    if (r->dtypes == FMSA_PLAN_DTYPES_16BIT_WGMMA && (!is16 || !(req->caps & FMSA_PLAN_CAP_WGMMA)))
        return 0;
    if (r->not_with & req->features) return 0;
    return 1;
}

static const char *fmsa_plan_dtype_name(fmsa_dtype dtype) {
    switch (dtype) {
    case FMSA_DTYPE_F32: return "f32";
    case FMSA_DTYPE_F16: return "f16";
    case FMSA_DTYPE_BF16: return "bf16";
    default: return "?";
    }
}

fmsa_status fmsa_plan_tiles(const fmsa_device_info *dev, const fmsa_plan_request *req,
                            fmsa_tile_plan *plan) {
    const fmsa_arch_table *t;
    const fmsa_tile_row *best = NULL, *fits = NULL;
    int64_t best_m = 0, best_n = 0, fits_m = 0, fits_n = 0;
    size_t best_bytes = 0, fits_bytes = 0, limit, smallest = 0;
    int i, applicable = 0;

    if (!dev || !req || !plan)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "fmsa_plan_tiles: %s is NULL",
                         !dev ? "dev" : !req ? "req" : "plan");
    if (req->head_dim < FMSA_HEAD_DIM_MIN || req->head_dim > FMSA_HEAD_DIM_MAX ||
        req->head_dim % FMSA_HEAD_DIM_MULTIPLE != 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "fmsa_plan_tiles: head_dim %lld is not a multiple of %d in [%d, %d]",
                         (long long)req->head_dim, FMSA_HEAD_DIM_MULTIPLE, FMSA_HEAD_DIM_MIN,
                         FMSA_HEAD_DIM_MAX);
    if (req->dtype != FMSA_DTYPE_F32 && req->dtype != FMSA_DTYPE_F16 &&
        req->dtype != FMSA_DTYPE_BF16)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "fmsa_plan_tiles: dtype %d is not f32, f16 or bf16", (int)req->dtype);
    if (req->pass != FMSA_PASS_FORWARD && req->pass != FMSA_PASS_BACKWARD)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "fmsa_plan_tiles: pass %d is unknown",
                         (int)req->pass);
    t = fmsa_plan_find_table(dev);
    if (!t)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "fmsa_plan_tiles: backend %d of device '%.32s' has no tile table",
                         (int)dev->backend, dev->arch);
    if (t->model == FMSA_SRAM_MODEL_CPU && fmsa_plan_cpu_simd(dev, t) > FMSA_PLAN_CPU_MAX_SIMD)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "fmsa_plan_tiles: CPU device '%.32s' reports SIMD width %d (> %d)",
                         dev->arch, dev->warp_size, FMSA_PLAN_CPU_MAX_SIMD);
    limit = fmsa_plan_sram_limit(dev);

    /*
     * Walk the rows in preference order.  `fits` is the first applicable row
     * within the limit; on GPUs that is the answer.  On CPUs the first row
     * whose micro-kernel B sliver (FMSA_PLAN_CPU_SLIVER_COLS columns of a K or
     * V tile, re-read for every 8 rows of A) also fits 3/4 of L1 is preferred,
     * `fits` is the fallback; the bf16-product rows are exempt (their kernels
     * stream each B panel tile from L2 once per 32 query rows).
     * history: bench/RESULTS.md
     */
    for (i = 0; i < t->num_rows && !best; i++) {
        const fmsa_tile_row *r = &t->rows[i];
        int64_t bm = r->block_m, bn = r->block_n;
        size_t bytes;
        if (!fmsa_plan_row_applies(r, req)) continue;
        if (t->model == FMSA_SRAM_MODEL_CPU) {
            int64_t w = fmsa_plan_cpu_simd(dev, t);
            bm = fmsa_round_up(bm, w);
            bn = fmsa_round_up(bn, w);
        }
        bytes = fmsa_plan_row_bytes(t, r, req->head_dim, req->dtype, bm, bn);
        if (applicable++ == 0 || bytes < smallest) smallest = bytes;
        if (bytes > limit) continue;
        if (!fits) {
            fits = r;
            fits_m = bm;
            fits_n = bn;
            fits_bytes = bytes;
        }
        if (t->model != FMSA_SRAM_MODEL_CPU || r->dtypes == FMSA_PLAN_DTYPES_BF16_MMA ||
            (size_t)(4 * FMSA_PLAN_CPU_SLIVER_COLS * (bn > req->head_dim ? bn : req->head_dim)) <=
                fmsa_plan_cpu_l1(dev) / 4 * 3) {
            best = r;
            best_m = bm;
            best_n = bn;
            best_bytes = bytes;
        }
    }
    if (!best && fits) {
        best = fits;
        best_m = fits_m;
        best_n = fits_n;
        best_bytes = fits_bytes;
    }
    if (!best && !applicable)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "no %s tile table row for arch '%.32s' (%s backend, table '%s'), "
                         "head_dim %lld, dtype %s (SRAM limit %zu bytes)",
                         req->pass == FMSA_PASS_FORWARD ? "forward" : "backward", dev->arch,
                         fmsa_backend_name(dev->backend), t->arch, (long long)req->head_dim,
                         fmsa_plan_dtype_name(req->dtype), limit);
    if (!best)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "no %s tile plan fits: arch '%.32s' (%s backend, table '%s'), "
                         "head_dim %lld, dtype %s, SRAM limit %zu bytes; the smallest "
                         "candidate needs %zu bytes",
                         req->pass == FMSA_PASS_FORWARD ? "forward" : "backward", dev->arch,
                         fmsa_backend_name(dev->backend), t->arch, (long long)req->head_dim,
                         fmsa_plan_dtype_name(req->dtype), limit, smallest);

    plan->block_m = (int)best_m;
    plan->block_n = (int)best_n;
    plan->stages = best->stages;
    plan->warps = best->warps;
    plan->sram_bytes = best_bytes;
    plan->table_row = best->name;
    plan->row = best;
    plan->dtypes = (int)best->dtypes;
    plan->sram = best->sram;
    plan->verified = best->verified;
    plan->num_splits = 1;
    if (req->pass == FMSA_PASS_FORWARD)
        plan->num_splits = fmsa_plan_split_count(dev, req, plan->block_m, plan->block_n);
    return FMSA_SUCCESS;
}

/*
 * Split-KV for decode (few query tiles, long keys): each split reduces a
 * contiguous range of key tiles to a partial (m, l, acc) and a combine step
 * merges them with fmsa_softmax_merge.  The count is turned into "tiles per
 * split" and back, so no split is ever empty: the backend gives split s the
 * key tiles [s * per, min((s + 1) * per, key_tiles)).
 */

/// Largest count <= want whose splits are all non-empty for key_tiles tiles.
static int fmsa_plan_nonempty_splits(int64_t want, int64_t key_tiles) {
    int64_t per;
    if (want <= 1 || key_tiles <= 1) return 1;
    if (want > key_tiles) want = key_tiles;
    per = fmsa_ceil_div(key_tiles, want);
    return (int)fmsa_ceil_div(key_tiles, per);
}

/*
 * CPU: results must be bit-identical for every thread count, and the split
 * count changes the summation order, so it depends on the shape only.  A
 * problem with at least FMSA_CPU_SPLIT_MIN_WORK (batch_heads x query tiles)
 * blocks already feeds any core count we expect; below that, keys are cut
 * into chunks of FMSA_CPU_SPLIT_TILES key tiles, but never into more pieces
 * than bring the total to FMSA_CPU_SPLIT_TARGET blocks (a combine costs a
 * pass over splits x D floats per row).
 */
enum {
    FMSA_CPU_SPLIT_MIN_WORK = 64,
    FMSA_CPU_SPLIT_TILES = 8,
    FMSA_CPU_SPLIT_TARGET = 256,
};

static int fmsa_plan_cpu_splits(int64_t work, int64_t key_tiles) {
    int64_t want;
    if (work >= FMSA_CPU_SPLIT_MIN_WORK) return 1;
    want = fmsa_ceil_div(key_tiles, FMSA_CPU_SPLIT_TILES);
    if (want > fmsa_ceil_div(FMSA_CPU_SPLIT_TARGET, work))
        want = fmsa_ceil_div(FMSA_CPU_SPLIT_TARGET, work);
    if (want > FMSA_PLAN_MAX_SPLITS) want = FMSA_PLAN_MAX_SPLITS;
    return fmsa_plan_nonempty_splits(want, key_tiles);
}

/*
 * GPUs: the wave-quantisation argument of FlashAttention-2's split-KV
 * heuristic.  With `work` blocks on `slots` block slots, s splits run in
 * ceil(work*s / slots) waves at efficiency work*s / (slots * waves); the
 * answer is the smallest s <= max_s whose efficiency is within 85% of the
 * best reachable (skip_same: skipping s that would give the same
 * tiles-per-split as s - 1).  Efficiencies are compared as exact integer
 * ratios so the answer cannot vary with the compiler's floating point.
 */
static int64_t fmsa_plan_wave_splits(int64_t work, int64_t slots, int64_t max_s, int64_t key_tiles,
                                     int skip_same) {
    int64_t best_num = 0, best_den = 1; /* best efficiency as a ratio */
    for (int pass = 0; pass < 2; ++pass)
        for (int64_t s = 1; s <= max_s; s++) {
            const int64_t num = work * s, den = slots * fmsa_ceil_div(work * s, slots);
            if (skip_same && s > 1 && fmsa_ceil_div(key_tiles, s) == fmsa_ceil_div(key_tiles, s - 1))
                continue;
            if (pass == 0 && num * best_den > best_num * den) {
                best_num = num;
                best_den = den;
            } else if (pass == 1 && 100 * num * best_den >= 85 * best_num * den) {
                return s;
            }
        }
    return 1;
}

/* The generic GPU rule: problems that already fill 80% of the machine are
 * not split (the combine is pure overhead there); s <= min(sms, key tiles,
 * 128), trimmed to splits that hold key tiles. */
static int fmsa_plan_gpu_splits(int64_t work, int64_t key_tiles, int64_t sms) {
    int64_t max_s = FMSA_PLAN_MAX_SPLITS;
    if (sms <= 0 || work >= sms || work * 10 >= sms * 8) return 1;
    if (max_s > sms) max_s = sms;
    if (max_s > key_tiles) max_s = key_tiles;
    return fmsa_plan_nonempty_splits(fmsa_plan_wave_splits(work, sms, max_s, key_tiles, 1),
                                     key_tiles);
}

int fmsa_plan_num_splits(const fmsa_device_info *dev, int64_t batch_heads, int64_t seqlen_q,
                         int64_t seqlen_k, int block_m, int block_n) {
    int64_t work, key_tiles;
    if (!dev || batch_heads <= 0 || seqlen_q <= 0 || seqlen_k <= 0 || block_m <= 0 ||
        block_n <= 0)
        return 1;
    if (batch_heads > INT64_MAX / fmsa_ceil_div(seqlen_q, block_m)) return 1; /* huge: no split */
    work = batch_heads * fmsa_ceil_div(seqlen_q, block_m);
    key_tiles = fmsa_ceil_div(seqlen_k, block_n);
    if (key_tiles <= 1) return 1;
    if (dev->backend == FMSA_BACKEND_CPU) return fmsa_plan_cpu_splits(work, key_tiles);
    return fmsa_plan_gpu_splits(work, key_tiles, dev->multiprocessors);
}

/*
 * A split kernel of its own (the CUDA decode: one block of block_m rows per
 * KV head, its query heads packed together, block_n keys per stage): the same
 * wave-quantisation argument, counted in that kernel's blocks and in the
 * slots of blocks_per_sm blocks per multiprocessor.  No split once the blocks
 * fill the slots; at most FMSA_PLAN_MAX_DECODE_SPLITS and at least two key
 * stages per split; the smallest s within 85% of the best efficiency.  The
 * kernel gives each split ceil(t / s) of the t key tiles its rows see (the
 * window trims t, so a split may hold none), so s is not trimmed to non-empty
 * splits as the generic rule's is, nor are equal tiles-per-split skipped.
 * This is the rule the CUDA backend had in cuda_fwd_instances.h until it
 * moved here; tests/test_cuda_splits.c checks that every count it launches is
 * unchanged.  Slots are capped so no product can overflow.
 */
static int fmsa_plan_decode_splits(int64_t blocks, int64_t key_tiles, int64_t slots) {
    int64_t max_s = FMSA_PLAN_MAX_DECODE_SPLITS;
    if (key_tiles / 2 < max_s) max_s = key_tiles / 2;
    if (max_s <= 1 || blocks >= slots) return 1;
    return (int)fmsa_plan_wave_splits(blocks, slots, max_s, key_tiles, 0);
}

/// Multiprocessor slots above which the decode rule's products could overflow
/// (no device comes near: 2^20 SMs x blocks per SM).
#define FMSA_PLAN_MAX_DECODE_SLOTS ((int64_t)1 << 20)

int fmsa_plan_split_count(const fmsa_device_info *dev, const fmsa_plan_request *req, int block_m,
                          int block_n) {
    const fmsa_plan_split *k;
    int64_t kv, group, rows, blocks, slots;
    if (!dev || !req) return 1;
    k = &req->split;
    if (k->block_m == 0)
        return fmsa_plan_num_splits(dev, req->batch_heads, req->seqlen_q, req->seqlen_k, block_m,
                                    block_n);
    if (k->block_m < 0 || k->block_n <= 0 || req->seqlen_q <= 0 || req->seqlen_k <= 0 ||
        req->batch_heads <= 0 || dev->multiprocessors <= 0)
        return 1;
    kv = req->batch_heads_kv > 0 ? req->batch_heads_kv : req->batch_heads;
    group = req->batch_heads / kv > 0 ? req->batch_heads / kv : 1;
    /* a block holds seqlen_q rows of each of a KV head's group query heads */
    if (req->seqlen_q > INT64_MAX / group) return 1; /* huge: no split */
    rows = req->seqlen_q * group;
    if (kv > INT64_MAX / fmsa_ceil_div(rows, k->block_m)) return 1;
    blocks = kv * fmsa_ceil_div(rows, k->block_m);
    slots = (int64_t)dev->multiprocessors * (k->blocks_per_sm > 0 ? k->blocks_per_sm : 1);
    if (slots > FMSA_PLAN_MAX_DECODE_SLOTS) slots = FMSA_PLAN_MAX_DECODE_SLOTS;
    return fmsa_plan_decode_splits(blocks, fmsa_ceil_div(req->seqlen_k, k->block_n), slots);
}

unsigned fmsa_plan_features(const fmsa_problem *p) {
    unsigned f = 0;
    if (p->window_left >= 0 || p->window_right >= 0) f |= FMSA_FEAT_CAUSAL;
    if (p->softcap > 0.0f) f |= FMSA_FEAT_SOFTCAP;
    if (p->has_alibi) f |= FMSA_FEAT_ALIBI;
    if (p->has_mask) f |= FMSA_FEAT_MASK;
    if (p->is_varlen) f |= FMSA_FEAT_VARLEN;
    if (p->is_paged) f |= FMSA_FEAT_PAGED;
    return f;
}

void fmsa_plan_request_from_problem(const fmsa_problem *p, unsigned caps,
                                    fmsa_plan_request *req) {
    req->head_dim = p->head_dim;
    req->head_dim_v = p->head_dim_v;
    req->dtype = p->dtype;
    req->pass = p->pass;
    req->features = fmsa_plan_features(p);
    req->seqlen_q = p->seqlen_q;
    req->seqlen_k = p->seqlen_k;
    req->batch_heads = p->batch * p->heads_q;
    req->caps = caps;
    req->batch_heads_kv = p->batch * p->heads_kv;
    memset(&req->split, 0, sizeof req->split); /* the backend describes its split kernel */
}
