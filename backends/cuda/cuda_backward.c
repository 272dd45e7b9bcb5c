/*
 * The backward pass: preprocess (D = rowsum(dO * O)), main (dK, dV; dQ into
 * the fp32 accumulator), postprocess (dQ to its dtype), as the plan lists
 * them, after the device-side metadata check for varlen problems.  Like the
 * forward it neither allocates nor synchronises (graph capture).
 */
#include <stdint.h>

#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

fmsa_status fmsa_cuda_run_backward(fmsa_cuda_state *st, const fmsa_problem *p, void *workspace,
                                   size_t workspace_bytes, fmsa_cu_stream stream) {
    fmsa_cuda_plan plan;
    fmsa_cuda_bwd_params bp;
    const fmsa_cu_deviceptr ws = (fmsa_cu_deviceptr)(uintptr_t)workspace;
    fmsa_status s;
    (void)workspace_bytes; /* checked against the same plan by the common layer */
    FMSA_TRY(fmsa_cuda_plan_make(st, p, &plan));
    fmsa_cuda_bwd_params_fill(p, &plan, st->status, ws, &bp);
    fmsa_cuda_bwd_bind(&plan, ws, &bp);
    s = fmsa_cuda_enqueue_pass(st, &plan, &bp.fwd, &bp, ws, stream);
    if (s == FMSA_SUCCESS)
        fmsa_log(FMSA_LOG_DEBUG, "cuda: backward %s, %d launch(es)%s",
                 plan.instance ? plan.instance : "?", plan.launches,
                 p->deterministic ? ", deterministic" : "");
    return s;
}
