/*
 * Kernel launches of the forward and backward passes.  Views are passed as
 * (element offset, strides) long4 vectors; absent optional tensors are NULL
 * cl_mem arguments, which OpenCL allows and which the kernels never touch
 * because their feature switch is off.  Everything is enqueued on one
 * in-order queue, so the backward's three stages need no events.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_args.h"
#include "backends/opencl/ocl_aux.h"
#include "backends/opencl/cpu/ocl_cpu.h"
#include "backends/opencl/ocl_internal.h"
#include "common/error.h"

fmsa_status fmsa_ocl_run_forward(fmsa_ocl_state *st, const fmsa_problem *p, cl_mem workspace,
                                 size_t workspace_bytes, cl_command_queue queue) {
    fmsa_ocl_config cfg;
    const fmsa_ocl_kernel_config *kc;
    fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
    size_t e = fmsa_problem_elem_size(p);
    (void)workspace;
    (void)workspace_bytes;
    FMSA_TRY(fmsa_ocl_config_make(st, p, &cfg));
    if (cfg.variant == FMSA_OCL_VARIANT_CPU)
        return fmsa_ocl_cpu_run_forward(st, p, &cfg, workspace, workspace_bytes, queue);
    kc = &cfg.kernel[FMSA_OCL_K_FORWARD];
    if (p->batch == 0 || p->seqlen_q == 0 || p->heads_q == 0) return FMSA_SUCCESS;
    FMSA_TRY(fmsa_ocl_kernel_get(st, p, FMSA_OCL_K_FORWARD, kc, &a.kernel));
    fmsa_ocl_arg_view4(&a, &p->q, e);
    fmsa_ocl_arg_view4(&a, &p->k, e);
    fmsa_ocl_arg_view4(&a, &p->v, e);
    fmsa_ocl_arg_view4(&a, &p->o, e);
    fmsa_ocl_arg_viewn(&a, &p->lse, 4);
    fmsa_ocl_arg_alibi(&a, p);
    fmsa_ocl_arg_viewn(&a, &p->mask, 1);
    fmsa_ocl_arg_cu(&a, p);
    fmsa_ocl_arg_paged(&a, p);
    fmsa_ocl_arg_dims(&a, p);
    fmsa_ocl_arg_viewn(&a, &p->sinks, 4);
    return fmsa_ocl_enqueue(st, queue, &a, "fmsa_ocl_forward",
                            fmsa_ocl_groups(p->seqlen_q, kc->block_m), (size_t)p->heads_q,
                            (size_t)p->batch, (size_t)kc->wg);
}

/* Arguments shared by the dK/dV and dQ kernels up to their outputs. */
static void fmsa_ocl_arg_bwd_inputs(fmsa_ocl_args *a, const fmsa_problem *p, size_t e) {
    fmsa_ocl_arg_view4(a, &p->q, e);
    fmsa_ocl_arg_view4(a, &p->k, e);
    fmsa_ocl_arg_view4(a, &p->v, e);
    fmsa_ocl_arg_view4(a, &p->dout, e);
}

static void fmsa_ocl_arg_bwd_tail(fmsa_ocl_args *a, const fmsa_problem *p, cl_mem ws) {
    fmsa_ocl_arg_viewn(a, &p->lse, 4);
    fmsa_ocl_arg_mem(a, ws);
    fmsa_ocl_arg_long(a, p->total_q);
    fmsa_ocl_arg_alibi(a, p);
    fmsa_ocl_arg_viewn(a, &p->mask, 1);
    fmsa_ocl_arg_cu(a, p);
    fmsa_ocl_arg_dims(a, p);
}

fmsa_status fmsa_ocl_run_backward(fmsa_ocl_state *st, const fmsa_problem *p, cl_mem workspace,
                                  size_t workspace_bytes, cl_command_queue queue) {
    fmsa_ocl_config cfg;
    const fmsa_ocl_kernel_config *kkv, *kq;
    size_t e = fmsa_problem_elem_size(p);
    int64_t bq = p->is_varlen ? 1 : p->batch;
    FMSA_TRY(fmsa_ocl_config_make(st, p, &cfg));
    if (cfg.variant == FMSA_OCL_VARIANT_CPU)
        return fmsa_ocl_cpu_run_backward(st, p, &cfg, workspace, workspace_bytes, queue);
    FMSA_TRY(fmsa_ocl_check_workspace(&cfg, workspace, workspace_bytes, "backward"));
    if (p->batch == 0 || p->heads_q == 0) return FMSA_SUCCESS;
    kkv = &cfg.kernel[FMSA_OCL_K_BWD_DKDV];
    kq = &cfg.kernel[FMSA_OCL_K_BWD_DQ];
    {
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        const size_t wg = st->dev->max_work_group < 64 ? st->dev->max_work_group : 64;
        FMSA_TRY(fmsa_ocl_kernel_get(st, p, FMSA_OCL_K_BWD_PRE, kkv, &a.kernel));
        fmsa_ocl_arg_view4(&a, &p->o, e);
        fmsa_ocl_arg_view4(&a, &p->dout, e);
        fmsa_ocl_arg_mem(&a, workspace);
        fmsa_ocl_arg_long(&a, p->total_q);
        fmsa_ocl_arg_long(&a, p->heads_q);
        fmsa_ocl_arg_viewn(&a, &p->dlse, 4);
        FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, "fmsa_ocl_bwd_preprocess",
                                  fmsa_ocl_groups(p->total_q, (int)wg), (size_t)p->heads_q,
                                  (size_t)bq, wg));
    }
    /* dsink from the preprocess's D - dlse, its partials after them */
    FMSA_TRY(fmsa_ocl_run_dsink(st, p, workspace, bq * p->heads_q * p->total_q, queue));
    {
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_kernel_get(st, p, FMSA_OCL_K_BWD_DKDV, kkv, &a.kernel));
        fmsa_ocl_arg_bwd_inputs(&a, p, e);
        fmsa_ocl_arg_view4(&a, &p->dk, e);
        fmsa_ocl_arg_view4(&a, &p->dv, e);
        fmsa_ocl_arg_bwd_tail(&a, p, workspace);
        FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, "fmsa_ocl_bwd_dkdv",
                                  fmsa_ocl_groups(p->seqlen_k, kkv->block_n), (size_t)p->heads_kv,
                                  (size_t)p->batch, (size_t)kkv->wg));
    }
    {
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_kernel_get(st, p, FMSA_OCL_K_BWD_DQ, kq, &a.kernel));
        fmsa_ocl_arg_bwd_inputs(&a, p, e);
        fmsa_ocl_arg_view4(&a, &p->dq, e);
        fmsa_ocl_arg_bwd_tail(&a, p, workspace);
        FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, "fmsa_ocl_bwd_dq",
                                  fmsa_ocl_groups(p->seqlen_q, kq->block_m), (size_t)p->heads_q,
                                  (size_t)p->batch, (size_t)kq->wg));
    }
    return FMSA_SUCCESS;
}
