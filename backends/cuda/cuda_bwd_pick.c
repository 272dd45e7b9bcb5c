/*
 * The backward's pick: the planner's row (common/plan_tables/cuda_mma.c), the
 * instance of that row (cuda_bwd_instances.h, cuda_bwd_f32_instances.h), its
 * launches (pre, main, post, dsink) and its workspace layout.
 */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda_bwd_f32_instances.h"
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_internal.h"
#include "common/error.h"
#include "common/planner.h"

fmsa_status fmsa_cuda_bwd_pick(const fmsa_cuda_device *dev, const fmsa_problem *p,
                               fmsa_cuda_plan *plan) {
    fmsa_cuda_bwd_params bp;
    fmsa_cuda_bwd_plan bplan;
    const size_t smem_max = dev->info.sram_per_block_optin > dev->info.sram_per_block
                                ? dev->info.sram_per_block_optin
                                : dev->info.sram_per_block;
    const fmsa_cuda_bwd_instance *inst;
    fmsa_plan_request req;
    fmsa_tile_plan tiles;
    memset(&bplan, 0, sizeof bplan);
    /* no compiled pair covers the dims: say which dims the list has */
    if (p->head_dim > FMSA_CUDA_BWD_MAX_DIM || p->head_dim_v > FMSA_CUDA_BWD_MAX_DIM_V ||
        p->head_dim <= 0 || p->head_dim_v <= 0 || p->head_dim % 8 || p->head_dim_v % 8)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (backward): head_dim %lld with head_dim_v %lld is not supported by "
                         "this backend (its backward instances serve head dims and value head "
                         "dims that are multiples of 8 up to %d and %d; above that it has none)",
                         (long long)p->head_dim, (long long)p->head_dim_v, FMSA_CUDA_BWD_MAX_DIM,
                         FMSA_CUDA_BWD_MAX_DIM_V);
    /* fp32 (3xTF32): a list of its own, to 256 (cuda_bwd_f32_instances.h) */
    if (p->dtype == FMSA_DTYPE_F32 &&
        (p->head_dim > FMSA_CUDA_BWD_F32_MAX_DIM || p->head_dim_v > FMSA_CUDA_BWD_F32_MAX_DIM))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (backward): f32 inputs with head_dim %lld, head_dim_v %lld are not "
                         "supported by this backend (it runs head dims up to %d in f32, by 3xTF32; "
                         "bf16/f16 go to %d / %d)",
                         (long long)p->head_dim, (long long)p->head_dim_v,
                         FMSA_CUDA_BWD_F32_MAX_DIM, FMSA_CUDA_BWD_MAX_DIM, FMSA_CUDA_BWD_MAX_DIM_V);
    /* device addresses as they will be passed (alignment), no workspace yet */
    fmsa_cuda_bwd_params_fill(p, plan, 0, 0, &bp);
    /* Hopper: the planner may take the wgmma row where the pass is one it serves */
    fmsa_plan_request_from_problem(p, fmsa_cuda_bwd_wg_serves(&bp, dev->wgmma) ? FMSA_PLAN_CAP_WGMMA : 0u,
                                   &req);
    inst = NULL;
    if (fmsa_plan_tiles(&dev->info, &req, &tiles) == FMSA_SUCCESS) {
        inst = fmsa_cuda_bwd_instance_of(p->dtype, tiles.row->max_head_dim,
                                         tiles.row->max_head_dim_v, tiles.block_m, tiles.block_n,
                                         tiles.stages, tiles.sram_bytes, dev->cc_major,
                                         (req.features & FMSA_FEAT_CAUSAL) != 0);
        if (!inst)
            return fmsa_fail(FMSA_ERR_INTERNAL,
                             "cuda (backward): plan row %s has no compiled instance",
                             tiles.table_row);
        /* FLASHMSA_CUDA_WGMMA=o<N>: a development variant of the Hopper instance */
        inst = fmsa_cuda_bwd_wg_variant(inst, dev->wgmma);
        if (!inst)
            return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                             "cuda (backward): FLASHMSA_CUDA_WGMMA names no development variant of "
                             "row %s (cuda_bwd_instances.h lists them)",
                             tiles.table_row);
    }
    /* no row fits this device's shared memory: the hardware's limit, said in
     * the words a feature refusal uses (as the forward's pick does) */
    if (!inst)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (backward): head_dim %lld, head_dim_v %lld is not supported by this "
                         "backend on %s (no instance fits %zu bytes of shared memory per block; "
                         "above 256 only sm_90's opt-in 227 KiB fits)",
                         (long long)p->head_dim, (long long)p->head_dim_v, dev->info.arch,
                         smem_max);
    if (fmsa_cuda_bwd_plan_make(&bp, inst, &bplan) != 0)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda (backward): no instance for dtype %d, head_dim %lld, head_dim_v %lld "
                         "on %s (bf16/f16/f32, head dims <= %d / %d (f32: 256), not paged, 16-byte aligned tensors "
                         "with strides of 8 elements, shared memory within %zu bytes; above 256 "
                         "only sm_90's opt-in 227 KiB fits)",
                         (int)p->dtype, (long long)p->head_dim, (long long)p->head_dim_v,
                         dev->info.arch, FMSA_CUDA_BWD_MAX_DIM, FMSA_CUDA_BWD_MAX_DIM_V, smem_max);
    plan->instance = inst->main;
    plan->launches = bplan.dsink ? 4 : 3;
    plan->launch[0].kernel = inst->pre;
    plan->launch[1].kernel = inst->main;
    plan->launch[2].kernel = inst->post;
    plan->launch[3].kernel = bplan.dsink ? "fmsa_cuda_bwd_dsink" : NULL;
    for (int k = 0; k < 3; ++k) {
        plan->launch[0].grid[k] = bplan.grid_pre[k];
        plan->launch[1].grid[k] = bplan.grid_main[k];
        plan->launch[2].grid[k] = bplan.grid_post[k];
        plan->launch[3].grid[k] = bplan.grid_dsink[k];
    }
    plan->launch[3].threads = FMSA_CUDA_BWD_DSINK_THREADS;
    plan->launch[0].threads = plan->launch[2].threads = (unsigned)inst->threads_aux;
    plan->launch[1].threads = (unsigned)inst->threads_main;
    plan->launch[1].smem = (unsigned)fmsa_cuda_bwd_smem(inst, dev->cc_major);
    plan->workspace_bytes = bplan.workspace_bytes;
    plan->ws_dsum = bplan.off_dsum;
    plan->ws_dq_accum = bplan.off_dq_accum;
    plan->ws_dq_sems = bplan.off_sems;
    plan->num_sems = bplan.num_sems;
    plan->accum_dim = inst->head_dim;
    return FMSA_SUCCESS;
}

void fmsa_cuda_bwd_bind(const fmsa_cuda_plan *plan, fmsa_cu_deviceptr workspace,
                        fmsa_cuda_bwd_params *bp) {
    bp->dq_sems = plan->ws_dq_sems == FMSA_CUDA_WS_NONE
                      ? NULL
                      : (int *)(uintptr_t)(workspace + plan->ws_dq_sems);
    bp->num_sems = plan->num_sems;
    bp->accum_dim = plan->accum_dim;
}
