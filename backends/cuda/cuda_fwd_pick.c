/*
 * The forward's pick: the planner's row (common/plan_tables/cuda_mma.c: the
 * smallest compiled head dims that serve the problem and fit the device), the
 * instance of that row (cuda_fwd_instances.h), the alignment its 16-byte
 * loads need, and the grid.
 */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda_fwd_instances.h"
#include "backends/cuda/cuda_internal.h"
#include "common/error.h"
#include "common/planner.h"

/* 16-byte cp.async and stores: aligned origins, strides of whole 16-byte
 * chunks (8 elements of 16 bits, 4 of fp32). */
static fmsa_status fmsa_cuda_fwd_aligned(const char *name, const fmsa_view4 *v, int chunk) {
    if (!v->data) return FMSA_SUCCESS; /* outputs of a workspace query */
    if (((uintptr_t)v->data + (uintptr_t)v->byte_offset) % 16u || v->sb % chunk || v->ss % chunk ||
        v->sh % chunk)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda: %s must start 16-byte aligned with strides that are multiples "
                         "of %d elements (strides %lld, %lld, %lld)",
                         name, chunk, (long long)v->sb, (long long)v->ss, (long long)v->sh);
    return FMSA_SUCCESS;
}

/* The dtype code of the instance lists. */
static int fmsa_cuda_fwd_dtype(fmsa_dtype dt) {
    return dt == FMSA_DTYPE_BF16 ? FMSA_CUDA_DT_BF16
                                 : (dt == FMSA_DTYPE_F32 ? FMSA_CUDA_DT_F32 : FMSA_CUDA_DT_F16);
}

fmsa_status fmsa_cuda_fwd_pick(const fmsa_cuda_device *dev, const fmsa_problem *p,
                               fmsa_cuda_plan *plan) {
    fmsa_cuda_fwd_params fp;
    fmsa_cuda_fwd_plan fplan;
    fmsa_plan_request req;
    fmsa_tile_plan tiles;
    const fmsa_cuda_fwd_instance *table;
    const char *table_name;
    int n, i, dt, chunk, split;
    const long long smem_max = (long long)(dev->info.sram_per_block_optin > dev->info.sram_per_block
                                               ? dev->info.sram_per_block_optin
                                               : dev->info.sram_per_block);
    if (p->dtype != FMSA_DTYPE_BF16 && p->dtype != FMSA_DTYPE_F16 && p->dtype != FMSA_DTYPE_F32)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (forward): q.dtype %d is not supported by this backend (bf16, f16, f32)",
                         (int)p->dtype);
    /* fp32 tiles take twice the bytes: its instances stop at 256 */
    if (p->dtype == FMSA_DTYPE_F32 &&
        (p->head_dim > FMSA_CUDA_FWD_F32_MAX_DIM || p->head_dim_v > FMSA_CUDA_FWD_F32_MAX_DIM))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (forward): f32 with head_dim %lld / head_dim_v %lld: this backend "
                         "runs head dims up to %d in f32",
                         (long long)p->head_dim, (long long)p->head_dim_v, FMSA_CUDA_FWD_F32_MAX_DIM);
    dt = fmsa_cuda_fwd_dtype(p->dtype);
    chunk = p->dtype == FMSA_DTYPE_F32 ? 4 : 8;
    fmsa_cuda_fwd_params_fill(p, plan, 0, 0, &fp);
    /* Hopper: the planner may take the wgmma row where the pass is one it serves */
    fmsa_plan_request_from_problem(p, fmsa_cuda_fwd_wg_serves(&fp, dev->wgmma_fwd) ? FMSA_PLAN_CAP_WGMMA : 0u,
                                   &req);
    /* the split kernel a decode would run, so the planner counts its splits */
    split = fmsa_cuda_fwd_split_select(dt, &fp, smem_max);
    if (split >= 0) {
        const fmsa_cuda_fwd_instance *s = &fmsa_cuda_fwd_split_table(&n)[split];
        req.split.block_m = s->block_m;
        req.split.block_n = s->block_n;
        req.split.blocks_per_sm = fmsa_cuda_fwd_split_blocks_per_sm(s);
    } else {
        req.split.block_m = FMSA_PLAN_SPLIT_NONE;
    }
    if (p->batch > 65535 || p->heads_q > 65535 || fmsa_plan_tiles(&dev->info, &req, &tiles) != FMSA_SUCCESS)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (forward): head_dim %lld, head_dim_v %lld, batch %lld, heads %lld "
                         "is not supported by this backend on %s (no instance fits: %lld bytes of "
                         "shared memory per block, batch and heads at most 65535)",
                         (long long)p->head_dim, (long long)p->head_dim_v, (long long)p->batch,
                         (long long)p->heads_q, dev->info.arch, smem_max);
    i = fmsa_cuda_fwd_instance_of(dt, tiles.row->not_with ? FMSA_CUDA_FWD_FAST : FMSA_CUDA_FWD_FULL,
                                  tiles.row->max_head_dim, tiles.row->max_head_dim_v, tiles.warps,
                                  tiles.block_m, tiles.block_n, tiles.stages,
                                  (long long)tiles.sram_bytes);
    if (i < 0)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cuda (forward): plan row %s has no compiled instance",
                         tiles.table_row);
    FMSA_TRY(fmsa_cuda_fwd_aligned("q", &p->q, chunk));
    FMSA_TRY(fmsa_cuda_fwd_aligned("k", &p->k, chunk));
    FMSA_TRY(fmsa_cuda_fwd_aligned("v", &p->v, chunk));
    FMSA_TRY(fmsa_cuda_fwd_aligned("o", &p->o, chunk));
    table = fmsa_cuda_fwd_instance_table(&n);
    table_name = table[i].name;
    /* one decision for main kernel vs split-KV decode, with the planner's split count */
    if (fmsa_cuda_fwd_make_plan(dt, &fp, i, split, tiles.num_splits, &fplan) != 0)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cuda: forward plan failed after its instance was found");
    /* FLASHMSA_CUDA_WGMMA_FWD=2: the Hopper instance's serial schedule */
    if (table[i].serial && dev->wgmma_fwd == 2 && fplan.num_launches > 0 &&
        !strcmp(fplan.launch[0].name, table_name))
        fplan.launch[0].name = table[i].serial;
    plan->instance = fplan.num_launches > 0 ? fplan.launch[0].name : table_name;
    plan->launches = fplan.num_launches;
    plan->num_splits = fplan.num_splits;
    for (i = 0; i < fplan.num_launches; ++i) {
        plan->launch[i].kernel = fplan.launch[i].name;
        memcpy(plan->launch[i].grid, fplan.launch[i].grid, sizeof plan->launch[i].grid);
        plan->launch[i].threads = fplan.launch[i].threads;
        plan->launch[i].smem = (unsigned)fplan.launch[i].smem_bytes;
    }
    if (fplan.workspace_bytes) {
        plan->ws_o_accum = 0;
        plan->ws_lse_accum = (size_t)fplan.lse_offset;
        plan->workspace_bytes = (size_t)fplan.workspace_bytes;
    }
    return FMSA_SUCCESS;
}
