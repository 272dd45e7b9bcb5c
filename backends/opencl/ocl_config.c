/*
 * The one function that decides what runs on an OpenCL device: tile sizes
 * come from the common planner (the "opencl" rows; warps = work-group / 16),
 * then each kernel's __local footprint is checked against the device's
 * CL_DEVICE_LOCAL_MEM_SIZE and the work-group is split into the register
 * blocking of the score tile and of the output tile.  supports(),
 * workspace_size(), forward() and backward() all call it, so they agree.
 */
#include <string.h>

#include "backends/opencl/ocl_internal.h"
#include "common/error.h"
#include "common/planner.h"

/* Must mirror the __local declarations of the kernels (fmsa_ocl_*.cl):
 * head_dim tiles are float4 rows padded by one float4, score tiles have
 * BN + 4 floats per row. */
size_t fmsa_ocl_local_bytes(int kernel, int bm, int bn, int64_t head_dim, int s_nx) {
    size_t ld = (size_t)(head_dim / 4 + 1) * 16, ps = (size_t)(bn + 4) * 4;
    switch (kernel) {
    case FMSA_OCL_K_FORWARD:
        return (size_t)(bm + bn) * ld + (size_t)bm * ps + (size_t)bm * s_nx * 4 + (size_t)bm * 8;
    case FMSA_OCL_K_BWD_DKDV: return (size_t)(2 * bn + bm) * ld + 2 * (size_t)bm * ps;
    case FMSA_OCL_K_BWD_DQ: return (size_t)(2 * bm + 2 * bn) * ld + (size_t)bm * ps;
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
 * peak with few enough registers to avoid spills), at most 256 work-items. */
static int fmsa_ocl_pick_wg(const fmsa_ocl_device *dev, int kernel, int bm, int bn,
                            int64_t head_dim) {
    int64_t want = (int64_t)bm * bn / 16;
    int64_t out = (int64_t)(kernel == FMSA_OCL_K_BWD_DKDV ? bn : bm) * head_dim / 32;
    if (out > want) want = out;
    if (want > 256) want = 256;
    /* CPU runtimes (PoCL) run a work-group's items as loops in one thread and
     * keep every private array live across a barrier in per-item memory:
     * fewer, bigger work-items measured 1.3-1.4x faster there (d=128, s=1024:
     * ~23 -> ~32 GFLOP/s on 2 Zen cores; noisy machine). */
    if (dev->info.kind != FMSA_DEVICE_KIND_GPU && want > 64) want = 64;
    if (want > (int64_t)bm * bn / 2) want = (int64_t)bm * bn / 2;
    if (want > (int64_t)dev->max_work_group) want = (int64_t)dev->max_work_group;
    return fmsa_ocl_floor_pow2(want < 1 ? 1 : (int)want);
}

/* Fits one kernel: shape the work-group for the planned tile and, where its
 * __local footprint exceeds the device's, halve the tile (keys first: they
 * are the streamed dimension) until it fits.  The kernels stage fp32 tiles,
 * so f16/bf16 rows the planner costed at 2 bytes shrink here once. */
static fmsa_status fmsa_ocl_fit(const fmsa_ocl_device *dev, int kernel, int bm, int bn,
                                int64_t head_dim, fmsa_ocl_kernel_config *kc) {
    const int d4 = (int)(head_dim / 4);
    const size_t limit = dev->info.sram_per_block;
    const int out_rows_is_bn = kernel == FMSA_OCL_K_BWD_DKDV;
    for (;;) {
        int wg = fmsa_ocl_pick_wg(dev, kernel, bm, bn, head_dim), s_nx = 0, o_nx = 0;
        size_t need;
        for (; wg >= 1; wg /= 2) {
            s_nx = fmsa_ocl_split(wg, bm, bn, 1);
            o_nx = fmsa_ocl_split(wg, out_rows_is_bn ? bn : bm, d4, 0);
            if (s_nx && o_nx) break;
        }
        if (wg < 1)
            return fmsa_fail(FMSA_ERR_INTERNAL, "opencl: no work-group shape for a %dx%d tile", bm, bn);
        need = fmsa_ocl_local_bytes(kernel, bm, bn, head_dim, s_nx);
        if (need <= limit) {
            kc->block_m = bm;
            kc->block_n = bn;
            kc->wg = wg;
            kc->s_nx = s_nx;
            kc->o_nx = o_nx;
            kc->local_bytes = need;
            return FMSA_SUCCESS;
        }
        if (bn > 8 && bn >= bm) bn /= 2;
        else if (bm > 8) bm /= 2;
        else
            return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                             "opencl: head_dim %lld needs %zu bytes of local memory per "
                             "work-group; the device has %zu",
                             (long long)head_dim, need, limit);
    }
}

unsigned fmsa_ocl_features(const fmsa_problem *p) {
    unsigned f = 0;
    if (p->window_left >= 0 || p->window_right >= 0) f |= FMSA_FEAT_CAUSAL;
    if (p->softcap > 0.0f) f |= FMSA_FEAT_SOFTCAP;
    if (p->has_alibi) f |= FMSA_FEAT_ALIBI;
    if (p->has_mask) f |= FMSA_FEAT_MASK;
    if (p->is_varlen) f |= FMSA_FEAT_VARLEN;
    if (p->is_paged) f |= FMSA_FEAT_PAGED;
    return f;
}

fmsa_status fmsa_ocl_config_make(const fmsa_ocl_state *st, const fmsa_problem *p,
                                 fmsa_ocl_config *cfg) {
    fmsa_plan_request req;
    fmsa_tile_plan plan;
    memset(cfg, 0, sizeof *cfg);
    memset(&req, 0, sizeof req);
    memset(&plan, 0, sizeof plan);
    req.head_dim = p->head_dim;
    req.dtype = p->dtype;
    req.pass = p->pass;
    req.features = fmsa_ocl_features(p);
    req.seqlen_q = p->seqlen_q;
    req.seqlen_k = p->seqlen_k;
    req.batch_heads = p->batch * p->heads_q;
    FMSA_TRY(fmsa_plan_tiles(&st->dev->info, &req, &plan));
    if (plan.block_m < 8 || plan.block_n < 8 || (plan.block_m & (plan.block_m - 1)) ||
        (plan.block_n & (plan.block_n - 1)))
        return fmsa_fail(FMSA_ERR_INTERNAL,
                         "opencl: planner row %s gave tiles %dx%d; kernels need powers of two >= 8",
                         plan.table_row ? plan.table_row : "?", plan.block_m, plan.block_n);
    cfg->table_row = plan.table_row;
    if (p->pass == FMSA_PASS_FORWARD) {
        FMSA_TRY(fmsa_ocl_fit(st->dev, FMSA_OCL_K_FORWARD, plan.block_m, plan.block_n,
                              p->head_dim, &cfg->kernel[FMSA_OCL_K_FORWARD]));
        cfg->workspace_bytes = 0;
    } else {
        int64_t bq = p->is_varlen ? 1 : p->batch;
        FMSA_TRY(fmsa_ocl_fit(st->dev, FMSA_OCL_K_BWD_DKDV, plan.block_m, plan.block_n,
                              p->head_dim, &cfg->kernel[FMSA_OCL_K_BWD_DKDV]));
        FMSA_TRY(fmsa_ocl_fit(st->dev, FMSA_OCL_K_BWD_DQ, plan.block_m, plan.block_n,
                              p->head_dim, &cfg->kernel[FMSA_OCL_K_BWD_DQ]));
        /* D = rowsum(dO * O), one fp32 per (query row, head). */
        cfg->workspace_bytes = (size_t)(bq * p->heads_q * p->total_q) * sizeof(float);
    }
    return FMSA_SUCCESS;
}
