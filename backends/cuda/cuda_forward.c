/*
 * The forward pass: the plan's launches (main kernel, split-KV combine when
 * the plan splits), preceded by the device-side metadata check for varlen and
 * paged problems.  Nothing here allocates, synchronises or reads device
 * memory, so a forward can be captured into a CUDA graph.
 */
#include <stdint.h>

#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

fmsa_status fmsa_cuda_run_forward(fmsa_cuda_state *st, const fmsa_problem *p, void *workspace,
                                  size_t workspace_bytes, fmsa_cu_stream stream) {
    fmsa_cuda_plan plan;
    fmsa_cuda_fwd_params fp;
    const fmsa_cu_deviceptr ws = (fmsa_cu_deviceptr)(uintptr_t)workspace;
    fmsa_status s;
    (void)workspace_bytes; /* checked against the same plan by the common layer */
    FMSA_TRY(fmsa_cuda_plan_make(st, p, &plan));
    fmsa_cuda_fwd_params_fill(p, &plan, st->status, ws, &fp);
    s = fmsa_cuda_enqueue_pass(st, &plan, &fp, &fp, ws, stream);
    if (s == FMSA_SUCCESS)
        fmsa_log(FMSA_LOG_DEBUG, "cuda: forward %s, %d launch(es), %d split(s)",
                 plan.instance ? plan.instance : "?", plan.launches, plan.num_splits);
    return s;
}
