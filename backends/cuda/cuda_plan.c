/*
 * The one decision of what a pass runs (STYLE habit 6): supports,
 * workspace_size, forward and backward all call fmsa_cuda_plan_make, so
 * "supported" cannot disagree with "what runs" and the workspace asked for is
 * the workspace used.  The planner's CUDA rows (common/plan_tables/cuda_mma.c)
 * choose the tiles and the picks run the instance of the chosen row
 * (cuda_fwd_pick.c, cuda_bwd_pick.c); this file checks what the kernels' int
 * geometry can index and that the pick fits the device.
 */
#include <limits.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

static fmsa_status fmsa_cuda_fits_int(const char *what, int64_t v) {
    if (v > INT_MAX)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda: %s = %lld exceeds the kernels' 32-bit geometry (at most %d)", what,
                         (long long)v, INT_MAX);
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cuda_plan_make(const fmsa_cuda_state *st, const fmsa_problem *p,
                                fmsa_cuda_plan *plan) {
    const fmsa_cuda_device *dev = st->dev;
    FMSA_TRY(fmsa_cuda_fits_int("batch", p->batch));
    FMSA_TRY(fmsa_cuda_fits_int("seqlen_q", p->seqlen_q));
    FMSA_TRY(fmsa_cuda_fits_int("seqlen_k", p->seqlen_k));
    FMSA_TRY(fmsa_cuda_fits_int("heads_q", p->heads_q));
    FMSA_TRY(fmsa_cuda_fits_int("total_q", p->total_q));
    FMSA_TRY(fmsa_cuda_fits_int("total_k", p->total_k));
    FMSA_TRY(fmsa_cuda_fits_int("desc.page_size", p->page_size));
    FMSA_TRY(fmsa_cuda_fits_int("desc.block_table.shape[1]", p->max_pages));
    FMSA_TRY(fmsa_cuda_fits_int("k.shape[0] (pages)", p->num_pages));
    /* ALiBi's distance, i + sk - sq - j + the ring's offset, is formed in int: at most
     * max(sq, sk) + |offset| (offset 0: the bound the lengths' own checks give) */
    if (p->has_alibi)
        FMSA_TRY(fmsa_cuda_fits_int("the ALiBi distance (max(seqlen_q, seqlen_k) + ring offset)",
                                    (p->seqlen_q > p->seqlen_k ? p->seqlen_q : p->seqlen_k) +
                                        (p->alibi_offset < 0 ? -p->alibi_offset
                                                             : p->alibi_offset)));
    memset(plan, 0, sizeof *plan);
    plan->num_splits = 1;
    plan->ws_o_accum = plan->ws_lse_accum = FMSA_CUDA_WS_NONE;
    plan->ws_dsum = plan->ws_dq_accum = FMSA_CUDA_WS_NONE;
    plan->ws_dk_accum = plan->ws_dv_accum = plan->ws_dq_sems = FMSA_CUDA_WS_NONE;
    if (p->pass == FMSA_PASS_FORWARD) FMSA_TRY(fmsa_cuda_fwd_pick(dev, p, plan));
    else FMSA_TRY(fmsa_cuda_bwd_pick(dev, p, plan));
    /* An instance list that promises what the device cannot launch is a bug
     * of ours: say so before any launch fails with a bare driver code. */
    if (plan->launches < 0 || plan->launches > FMSA_CUDA_MAX_LAUNCHES)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cuda: instance %s planned %d launches",
                         plan->instance ? plan->instance : "?", plan->launches);
    for (int i = 0; i < plan->launches; ++i) {
        const fmsa_cuda_launch *l = &plan->launch[i];
        const size_t smem_max = dev->info.sram_per_block_optin > dev->info.sram_per_block
                                    ? dev->info.sram_per_block_optin
                                    : dev->info.sram_per_block;
        /* the backward's list does not filter by shared memory (its d192/d256
         * rows need 219-220 KB, above sm_80's 163 KB): a refusal, not a bug */
        if (p->pass != FMSA_PASS_FORWARD && l->smem > smem_max)
            return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                             "cuda (backward): head_dim %lld on %s is not supported by this "
                             "backend (instance %s needs %u bytes of shared memory per block, "
                             "the device has %zu)",
                             (long long)p->head_dim, dev->info.arch,
                             plan->instance ? plan->instance : "?", l->smem, smem_max);
        /* a grid with a zero extent (no sequences, no rows) is skipped at launch */
        if (!l->kernel || l->threads == 0 || (int)l->threads > dev->max_threads_per_block ||
            l->smem > smem_max || l->grid[1] > 65535 || l->grid[2] > 65535)
            return fmsa_fail(FMSA_ERR_INTERNAL,
                             "cuda: instance %s launch %d (%s): grid %ux%ux%u, %u threads, %u "
                             "bytes of shared memory do not fit %s (%d threads, %zu bytes)",
                             plan->instance ? plan->instance : "?", i,
                             l->kernel ? l->kernel : "?", l->grid[0], l->grid[1], l->grid[2],
                             l->threads, l->smem, dev->info.name, dev->max_threads_per_block,
                             smem_max);
    }
    return FMSA_SUCCESS;
}
