/*
 * The one function that decides what runs on an OpenCL device: tile sizes
 * come from the common planner (the "opencl" rows, or the "opencl-cpu" rows
 * of the CPU-device kernels; warps = work-group / 16), then each kernel's
 * __local footprint is checked against the device's
 * CL_DEVICE_LOCAL_MEM_SIZE and the work-group is split into the register
 * blocking of the score tile and of the output tile.  supports(),
 * workspace_size(), forward() and backward() all call it, so they agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/cpu/ocl_cpu.h"
#include "backends/opencl/ocl_aux.h"
#include "backends/opencl/ocl_internal.h"
#include "common/error.h"
#include "common/fmsa_limits.h"
#include "common/planner.h"

/* Must mirror the __local declarations of the kernels (fmsa_ocl_*.cl):
 * head-dim tiles are rows of D/4 (Q, K) or Dv/4 (V, dO) vectors padded by
 * one vector (float4, or uint2 = four raw 16-bit values when staged as
 * 16-bit), a tile holding both kinds in turn is sized for the wider; score
 * tiles have BN + 4 floats per row. */
size_t fmsa_ocl_local_bytes(int kernel, const fmsa_ocl_kernel_config *kc, int64_t head_dim,
                            int64_t head_dim_v) {
    const size_t bm = (size_t)kc->block_m, bn = (size_t)kc->block_n;
    const size_t eq = kc->qs16 ? 8 : 16, ek = kc->ks16 ? 8 : 16;
    const size_t w = (size_t)(head_dim / 4 + 1), wv = (size_t)(head_dim_v / 4 + 1);
    const size_t wm = w > wv ? w : wv;
    const size_t ps = (bn + 4) * 4;
    switch (kernel) {
    case FMSA_OCL_K_FORWARD:
        return bm * w * eq + bn * wm * ek + bm * ps + 2 * bm * (size_t)kc->s_nx * 4 + bm * 8;
    case FMSA_OCL_K_BWD_DKDV:
        return bn * (w + wv) * ek + (kc->qdo2 ? bm * (w + wv) : bm * wm) * eq + 2 * bm * ps;
    case FMSA_OCL_K_BWD_DQ:
        return bm * (w + wv) * eq + (kc->kv1 ? bn * wm : bn * (w + wv)) * ek + bm * ps;
    default: return 0;
    }
}

static int fmsa_ocl_floor_pow2(int x) {
    int p = 1;
    while (p * 2 <= x) p *= 2;
    return p;
}

static int fmsa_ocl_ilog2(int x) {
    int l = 0;
    while (x > 1) {
        x >>= 1;
        ++l;
    }
    return l;
}

/* Splits wg work-items over a rows x cols tile: nx along cols (a power of
 * two), wg/nx along rows (must divide rows).  exact_cols: nx must divide
 * cols too (score tiles); otherwise surplus columns are clamped (head_dim/4
 * need not be a power of two).  Prefers square per-item blocks, then wide nx
 * (coalesced global loads and conflict-free __local reads).  0 if impossible. */
static int fmsa_ocl_split(int wg, int rows, int cols, int exact_cols) {
    int best = 0, best_cost = 1 << 30;
    for (int nx = 1; nx <= wg; nx *= 2) {
        int ny = wg / nx, tm, tn, cost;
        if (ny > rows || rows % ny) continue;
        if (exact_cols && (nx > cols || cols % nx)) continue;
        if (!exact_cols && nx > 4 * cols) continue;
        tm = rows / ny;
        tn = (cols + nx - 1) / nx;
        cost = fmsa_ocl_ilog2(tm) - fmsa_ocl_ilog2(tn > 0 ? tn : 1);
        if (cost < 0) cost = -cost;
        if (cost <= best_cost) {
            best_cost = cost;
            best = nx;
        }
    }
    return best;
}

/* Work-group size for a tile: register blocking, not the planner's warp
 * count, sets it: about 16 scores and 32 output values per work-item (4x4
 * and 4x8 fp32 blocks give enough reuse per __local read to approach the FMA
 * peak with few enough registers to avoid spills), at most 256 work-items.
 * Two backward layouts whose tiles are capped by __local memory (dK/dV with
 * fp32 K/V and one Q/dO tile; dQ with one K/V tile, KV1) run 8 scores and up
 * to 64 output values per work-item instead, the fastest of the H200 sweeps.
 * history: bench/RESULTS.md */
static int fmsa_ocl_pick_wg(const fmsa_ocl_device *dev, int kernel,
                            const fmsa_ocl_kernel_config *kc, int64_t head_dim) {
    /* head_dim: the output tile's width (fmsa_ocl_out_dim) */
    const int bm = kc->block_m, bn = kc->block_n;
    int64_t want = (int64_t)bm * bn / 16;
    int64_t out = (int64_t)(kernel == FMSA_OCL_K_BWD_DKDV ? bn : bm) * head_dim / 32;
    if (out > want) want = out;
    if ((kernel == FMSA_OCL_K_BWD_DKDV && !kc->ks16 && !kc->qdo2) ||
        (kernel == FMSA_OCL_K_BWD_DQ && kc->kv1)) {
        want = (int64_t)bm * bn / 8;
        out = (int64_t)(kernel == FMSA_OCL_K_BWD_DKDV ? bn : bm) * head_dim / 64;
        if (out > want) want = out;
    }
    if (want > 256) want = 256;
    /* CPU runtimes (PoCL) run a work-group's items as loops in one thread and
     * keep every private array live across a barrier in per-item memory, so
     * fewer, bigger work-items run faster there (history: bench/RESULTS.md) */
    if (dev->info.kind != FMSA_DEVICE_KIND_GPU && want > 64) want = 64;
    if (want > (int64_t)bm * bn / 2) want = (int64_t)bm * bn / 2;
    if (want > (int64_t)dev->max_work_group) want = (int64_t)dev->max_work_group;
    return fmsa_ocl_floor_pow2(want < 1 ? 1 : (int)want);
}

/* Register prefetch of the backward kernels (PF): on GPUs only for the dK/dV
 * kernel with fp32 K/V and one Q/dO tile, the one layout it sped up on the
 * H200 (elsewhere it crossed an occupancy step); CPU runtimes keep private
 * arrays in per-item memory, where the copies only cost.  history:
 * bench/RESULTS.md */
static int fmsa_ocl_pick_pf(const fmsa_ocl_device *dev, const fmsa_problem *p, int kernel,
                            const fmsa_ocl_kernel_config *kc) {
    /* its register stages are one head dim wide */
    if (dev->info.kind != FMSA_DEVICE_KIND_GPU || p->head_dim != p->head_dim_v) return 0;
    return kernel == FMSA_OCL_K_BWD_DKDV && !kc->ks16 && !kc->qdo2;
}

/* A developer override of one kernel's launch shape, for tuning sweeps:
 * FLASHMSA_OCL_TILES="fwd=64x32/128:k,dkdv=32x32/128:k2,dq=32x32/128"
 * (BMxBN, optional /work-items, optional flags: k = K/V staged 16-bit,
 * q = Q/dO staged 16-bit, 2 = separate Q and dO tiles in dK/dV, p = the
 * backward kernels' register prefetch PF; without p an override runs
 * without it; 1 = dQ kernel with one K/V tile, KV1).  A shape
 * that does not fit is refused (NOT_SUPPORTED), never silently changed.
 * Returns 1 when the variable names this kernel. */
static int fmsa_ocl_override(int kernel, int *bm, int *bn, int *wg, int *qs16, int *ks16,
                             int *qdo2, int *pf, int *kv1) {
    static const char *const keys[FMSA_OCL_K_COUNT] = {"fwd=", NULL, "dkdv=", "dq="};
    const char *env = getenv("FLASHMSA_OCL_TILES"), *at;
    if (!env || !keys[kernel] || !(at = strstr(env, keys[kernel]))) return 0;
    at += strlen(keys[kernel]);
    *wg = 0;
    *qs16 = *ks16 = *qdo2 = *pf = *kv1 = 0;
    if (sscanf(at, "%dx%d", bm, bn) != 2) return 0;
    while (*at && *at != ',' && *at != '/' && *at != ':') ++at;
    if (*at == '/') *wg = atoi(++at);
    while (*at && *at != ',' && *at != ':') ++at;
    if (*at == ':')
        for (++at; *at && *at != ','; ++at) {
            if (*at == 'k') *ks16 = 1;
            if (*at == 'q') *qs16 = 1;
            if (*at == '2') *qdo2 = 1;
            if (*at == 'p') *pf = 1;
            if (*at == '1') *kv1 = 1;
        }
    return 1;
}

/* Width of a kernel's output tile: O (forward) is Dv wide, dQ D wide, and
 * dK/dV hold one of each, split over work-items as the wider. */
static int64_t fmsa_ocl_out_dim(const fmsa_problem *p, int kernel) {
    const int64_t wide = p->head_dim > p->head_dim_v ? p->head_dim : p->head_dim_v;
    return kernel == FMSA_OCL_K_FORWARD ? p->head_dim_v
           : kernel == FMSA_OCL_K_BWD_DQ ? p->head_dim : wide;
}

/* Shapes the work-group for one tile and staging choice; 0 if impossible. */
static int fmsa_ocl_shape(const fmsa_ocl_device *dev, const fmsa_problem *p, int kernel,
                          int wg_want, fmsa_ocl_kernel_config *kc) {
    const int64_t out_dim = fmsa_ocl_out_dim(p, kernel);
    const int d4 = (int)(out_dim / 4);
    const int out_rows = kernel == FMSA_OCL_K_BWD_DKDV ? kc->block_n : kc->block_m;
    int wg = wg_want > 0 ? wg_want : fmsa_ocl_pick_wg(dev, kernel, kc, out_dim);
    for (; wg >= 1; wg /= 2) {
        kc->s_nx = fmsa_ocl_split(wg, kc->block_m, kc->block_n, 1);
        kc->o_nx = fmsa_ocl_split(wg, out_rows, d4, 0);
        if (kc->s_nx && kc->o_nx) break;
        if (wg_want > 0) return 0; /* an explicit size is taken as is or refused */
    }
    if (wg < 1 || (size_t)wg > dev->max_work_group) return 0;
    kc->wg = wg;
    kc->local_bytes = fmsa_ocl_local_bytes(kernel, kc, p->head_dim, p->head_dim_v);
    return 1;
}

/* Fits one kernel: for its start tile (the planner's Br x Bc; the dQ kernel
 * takes it transposed, see fmsa_ocl_config_make) tries the staging choices
 * in order and takes the first whose __local footprint (fmsa_ocl_local_bytes,
 * the kernels' real formula) fits the device's; if none does, halves the
 * tile (keys first) and tries again, without KV1 (measured on the planned
 * tiles only; the halving serves smaller devices).  Staging order: forward fp32, then K/V
 * 16-bit; dK/dV fp32 with separate Q and dO tiles (QDO2), fp32 with one, then
 * the same with 16-bit K/V; dQ fp32 with K and V tiles, fp32 with one K/V
 * tile (KV1), then the same with 16-bit K/V.  16-bit staging only for 16-bit
 * dtypes.  On the planner rows' target device (48 KiB, NVIDIA) the start
 * tile fits as planned (common/plan_tables/opencl.c lists each row's real bytes); the
 * halving serves devices with less local memory. */
/* Developers: FLASHMSA_OCL_LOCAL_BYTES=<n> caps the local memory the fit may
 * use below the device's, so a device with plenty (PoCL: 1 MiB) runs the
 * tiles and the refusals of a smaller one (49152: the H200's). */
static size_t fmsa_ocl_local_limit(const fmsa_ocl_device *dev) {
    const char *env = getenv("FLASHMSA_OCL_LOCAL_BYTES");
    const size_t cap = env ? (size_t)strtoull(env, NULL, 10) : 0;
    return cap && cap < dev->info.sram_per_block ? cap : dev->info.sram_per_block;
}

static fmsa_status fmsa_ocl_fit(const fmsa_ocl_device *dev, const fmsa_problem *p, int kernel,
                                int bm, int bn, fmsa_ocl_kernel_config *kc) {
    const size_t limit = fmsa_ocl_local_limit(dev);
    const int half = p->dtype != FMSA_DTYPE_F32;
    const int bm0 = bm, bn0 = bn;
    /* Head dims past the planner's rows may shrink a tile side to 4 rows
     * (the fp32 backward of D = Dv = 512 fits 48 KiB so); the others stop at
     * 8, as measured. */
    const int min_tile =
        p->head_dim > FMSA_HEAD_DIM_SMALL_MAX || p->head_dim_v > FMSA_HEAD_DIM_SMALL_MAX ? 4 : 8;
    int wg = 0, qs16, ks16, qdo2, pf, kv1;
    memset(kc, 0, sizeof *kc);
    if (fmsa_ocl_override(kernel, &bm, &bn, &wg, &qs16, &ks16, &qdo2, &pf, &kv1)) {
        kc->block_m = bm;
        kc->block_n = bn;
        kc->qs16 = half && qs16;
        kc->ks16 = half && ks16;
        kc->qdo2 = qdo2 && kernel == FMSA_OCL_K_BWD_DKDV;
        kc->pf = pf && kernel != FMSA_OCL_K_FORWARD;
        kc->kv1 = kv1 && kernel == FMSA_OCL_K_BWD_DQ;
        if (kc->pf && p->head_dim != p->head_dim_v)
            return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                             "opencl: FLASHMSA_OCL_TILES flag p (PF) needs head_dim == "
                             "head_dim_v (got %lld and %lld)",
                             (long long)p->head_dim, (long long)p->head_dim_v);
        if (bm >= 8 && bn >= 8 && !(bm & (bm - 1)) && !(bn & (bn - 1)) &&
            fmsa_ocl_shape(dev, p, kernel, wg, kc) && kc->local_bytes <= limit)
            return FMSA_SUCCESS;
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "opencl: FLASHMSA_OCL_TILES shape %dx%d/%d does not fit (%zu bytes "
                         "of local memory, the device has %zu)",
                         bm, bn, wg, kc->local_bytes, limit);
    }
    for (int planned = 1;; planned = 0) {
        /* {K/V 16-bit, QDO2 (dK/dV) or KV1 (dQ)} in order of preference.  Q/dO
         * staged as 16-bit (QS16) is left to the override: with bf16 it
         * faulted on NVIDIA's OpenCL (driver 580, H200; not yet understood). */
        static const int fwd[2][2] = {{0, 0}, {1, 0}};
        static const int dkdv[4][2] = {{0, 1}, {0, 0}, {1, 1}, {1, 0}};
        static const int dq[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
        const int(*order)[2] = kernel == FMSA_OCL_K_BWD_DKDV ? dkdv
                               : kernel == FMSA_OCL_K_BWD_DQ ? dq : fwd;
        const int n = kernel == FMSA_OCL_K_FORWARD ? 2 : 4;
        for (int c = 0; c < n; ++c) {
            if (order[c][0] && !half) continue;
            /* KV1 on a shrunk tile only where nothing else fits: head dims
             * past the planner's rows (measured so on the planned tiles) */
            if (kernel == FMSA_OCL_K_BWD_DQ && order[c][1] && !planned &&
                p->head_dim <= FMSA_HEAD_DIM_SMALL_MAX && p->head_dim_v <= FMSA_HEAD_DIM_SMALL_MAX)
                continue;
            memset(kc, 0, sizeof *kc);
            kc->block_m = bm;
            kc->block_n = bn;
            kc->ks16 = order[c][0];
            kc->qdo2 = kernel == FMSA_OCL_K_BWD_DKDV && order[c][1];
            kc->kv1 = kernel == FMSA_OCL_K_BWD_DQ && order[c][1];
            kc->pf = fmsa_ocl_pick_pf(dev, p, kernel, kc);
            if (fmsa_ocl_shape(dev, p, kernel, 0, kc) && kc->local_bytes <= limit) {
                /* The planner costs rows in its generic formula; say when the
                 * kernels' real one made the planned tile smaller. */
                if (!planned)
                    fmsa_log(FMSA_LOG_DEBUG,
                             "opencl: kernel %d: planned tile %dx%d does not fit %zu bytes of "
                             "local memory; runs %dx%d (%zu bytes)",
                             kernel, bm0, bn0, limit, bm, bn, kc->local_bytes);
                return FMSA_SUCCESS;
            }
        }
        if (bn > min_tile && bn >= bm) bn /= 2;
        else if (bm > min_tile) bm /= 2;
        else
            return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                             "opencl: %s: head_dim %lld / head_dim_v %lld (%s) is not "
                             "supported by this backend on this device: it needs %zu bytes of "
                             "local memory per work-group at the smallest tile; the device has "
                             "%zu",
                             kernel == FMSA_OCL_K_FORWARD   ? "forward"
                             : kernel == FMSA_OCL_K_BWD_DKDV ? "backward dK/dV"
                                                             : "backward dQ",
                             (long long)p->head_dim, (long long)p->head_dim_v,
                             p->dtype == FMSA_DTYPE_F32 ? "f32" : "f16/bf16", kc->local_bytes,
                             limit);
    }
}

/* Plans p for one of the device's kernel families: the generic kernels under
 * the device's own arch key, the CPU-device kernels under "opencl-cpu"
 * (common/plan_tables/opencl.c), so each family has its own rows.  The rows
 * are keyed by one head dim up to FMSA_HEAD_DIM_SMALL_MAX: a problem is
 * planned by its wider head dim (D or Dv), and above that limit by the
 * largest rows, which fmsa_ocl_fit then shrinks by the kernels' real
 * local-memory formula (the CPU family's tiles are register tiles whose
 * private arrays hold every head dim). */
static fmsa_status fmsa_ocl_plan(const fmsa_ocl_state *st, const fmsa_problem *p,
                                 const char *family, fmsa_tile_plan *plan) {
    fmsa_device_info dev = st->dev->info;
    fmsa_plan_request req;
    const int64_t wide = p->head_dim > p->head_dim_v ? p->head_dim : p->head_dim_v;
    if (family) snprintf(dev.arch, sizeof dev.arch, "%s", family);
    fmsa_plan_request_from_problem(p, 0u, &req);
    req.head_dim = wide < FMSA_HEAD_DIM_SMALL_MAX ? wide : FMSA_HEAD_DIM_SMALL_MAX;
    memset(plan, 0, sizeof *plan);
    return fmsa_plan_tiles(&dev, &req, plan);
}

fmsa_status fmsa_ocl_config_make(const fmsa_ocl_state *st, const fmsa_problem *p,
                                 fmsa_ocl_config *cfg) {
    fmsa_tile_plan plan;
    /* CPU devices run their own barrier-free kernels (cpu/ocl_cpu.c) */
    if (fmsa_ocl_cpu_selected(st, p)) {
        FMSA_TRY(fmsa_ocl_plan(st, p, "opencl-cpu", &plan));
        return fmsa_ocl_cpu_config_make(st, p, &plan, cfg);
    }
    memset(cfg, 0, sizeof *cfg);
    FMSA_TRY(fmsa_ocl_plan(st, p, NULL, &plan));
    if (plan.block_m < 8 || plan.block_n < 8 || (plan.block_m & (plan.block_m - 1)) ||
        (plan.block_n & (plan.block_n - 1)))
        return fmsa_fail(FMSA_ERR_INTERNAL,
                         "opencl: planner row %s gave tiles %dx%d; kernels need powers of two >= 8",
                         plan.table_row ? plan.table_row : "?", plan.block_m, plan.block_n);
    cfg->table_row = plan.table_row;
    if (p->pass == FMSA_PASS_FORWARD) {
        FMSA_TRY(fmsa_ocl_fit(st->dev, p, FMSA_OCL_K_FORWARD, plan.block_m, plan.block_n,
                              &cfg->kernel[FMSA_OCL_K_FORWARD]));
        cfg->workspace_bytes = 0;
    } else {
        int64_t bq = p->is_varlen ? 1 : p->batch;
        FMSA_TRY(fmsa_ocl_fit(st->dev, p, FMSA_OCL_K_BWD_DKDV, plan.block_m, plan.block_n,
                              &cfg->kernel[FMSA_OCL_K_BWD_DKDV]));
        /* The rows are KV-stationary (Br streamed query rows, Bc the keys a
         * dK/dV work-group keeps); the dQ kernel is Q-stationary, so it takes
         * the same pair the other way round: Bc query rows, Br streamed keys. */
        FMSA_TRY(fmsa_ocl_fit(st->dev, p, FMSA_OCL_K_BWD_DQ, plan.block_n, plan.block_m,
                              &cfg->kernel[FMSA_OCL_K_BWD_DQ]));
        /* D = rowsum(dO * O) (- dlse), one fp32 per (query row, head), then
         * the dsink partials. */
        cfg->workspace_bytes =
            ((size_t)(bq * p->heads_q * p->total_q) + fmsa_ocl_dsink_floats(p)) * sizeof(float);
    }
    return FMSA_SUCCESS;
}
