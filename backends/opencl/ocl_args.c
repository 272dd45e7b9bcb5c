/* Kernel arguments and launches shared by both OpenCL kernel families (ocl_args.h). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime(CLOCK_MONOTONIC) for FLASHMSA_OCL_PROFILE */
#include "backends/opencl/ocl_args.h"

#include <stdlib.h>
#include <time.h>

#include "common/error.h"

void fmsa_ocl_arg(fmsa_ocl_args *a, size_t size, const void *value) {
    if (a->rc == CL_SUCCESS) a->rc = a->cl->clSetKernelArg(a->kernel, a->next, size, value);
    ++a->next;
}

void fmsa_ocl_arg_mem(fmsa_ocl_args *a, void *data) {
    cl_mem m = (cl_mem)data;
    fmsa_ocl_arg(a, sizeof m, &m);
}

void fmsa_ocl_arg_long4(fmsa_ocl_args *a, int64_t x, int64_t y, int64_t z, int64_t w) {
    cl_long4 v;
    v.s[0] = x;
    v.s[1] = y;
    v.s[2] = z;
    v.s[3] = w;
    fmsa_ocl_arg(a, sizeof v, &v);
}

void fmsa_ocl_arg_long(fmsa_ocl_args *a, int64_t x) {
    cl_long v = x;
    fmsa_ocl_arg(a, sizeof v, &v);
}

void fmsa_ocl_arg_view4(fmsa_ocl_args *a, const fmsa_view4 *v, size_t elem) {
    fmsa_ocl_arg_mem(a, v->data);
    fmsa_ocl_arg_long4(a, v->byte_offset / (int64_t)elem, v->sb, v->ss, v->sh);
}

void fmsa_ocl_arg_viewn(fmsa_ocl_args *a, const fmsa_viewn *v, size_t elem) {
    fmsa_ocl_arg_mem(a, v->data);
    fmsa_ocl_arg_long4(a, v->data ? v->byte_offset / (int64_t)elem : 0, v->s0, v->s1, v->s2);
}

void fmsa_ocl_arg_alibi(fmsa_ocl_args *a, const fmsa_problem *p) {
    fmsa_ocl_arg_mem(a, p->alibi.data);
    fmsa_ocl_arg_long4(a, p->alibi.data ? p->alibi.byte_offset / 4 : 0, p->alibi.s0, p->alibi.s1,
                       p->alibi_offset);
}

void fmsa_ocl_arg_cu(fmsa_ocl_args *a, const fmsa_problem *p) {
    fmsa_ocl_arg_mem(a, p->cu_seqlens_q.data);
    fmsa_ocl_arg_mem(a, p->cu_seqlens_k.data);
    fmsa_ocl_arg_long4(a, p->cu_seqlens_q.data ? p->cu_seqlens_q.byte_offset / 4 : 0,
                       p->cu_seqlens_q.s0,
                       p->cu_seqlens_k.data ? p->cu_seqlens_k.byte_offset / 4 : 0,
                       p->cu_seqlens_k.s0);
}

void fmsa_ocl_arg_dims(fmsa_ocl_args *a, const fmsa_problem *p) {
    cl_long2 win;
    cl_float4 fp;
    fmsa_ocl_arg_long4(a, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_q / p->heads_kv);
    win.s[0] = p->window_left;
    win.s[1] = p->window_right;
    fmsa_ocl_arg(a, sizeof win, &win);
    fp.s[0] = p->softmax_scale;
    fp.s[1] = p->softmax_scale * 1.4426950408889634f;
    fp.s[2] = p->softcap;
    fp.s[3] = 0.0f;
    fmsa_ocl_arg(a, sizeof fp, &fp);
}

void fmsa_ocl_arg_paged(fmsa_ocl_args *a, const fmsa_problem *p) {
    cl_long2 uv;
    fmsa_ocl_arg_mem(a, p->block_table.data);
    fmsa_ocl_arg_long4(a, p->block_table.data ? p->block_table.byte_offset / 4 : 0,
                       p->block_table.s0, p->block_table.s1, p->page_size);
    fmsa_ocl_arg_mem(a, p->seqused_k.data);
    uv.s[0] = p->seqused_k.data ? p->seqused_k.byte_offset / 4 : 0;
    uv.s[1] = p->seqused_k.s0;
    fmsa_ocl_arg(a, sizeof uv, &uv);
}

/* Developers: FLASHMSA_OCL_PROFILE set = finish the queue around every
 * launch and log its wall time at info level (tuning: which backward kernel
 * costs what).  Slows everything down; never set in a timed comparison. */
static int fmsa_ocl_profiling(void) {
    static int on = -1;
    if (on < 0) on = getenv("FLASHMSA_OCL_PROFILE") != NULL;
    return on;
}

static double fmsa_ocl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

fmsa_status fmsa_ocl_enqueue(fmsa_ocl_state *st, cl_command_queue queue, const fmsa_ocl_args *a,
                             const char *what, size_t groups0, size_t dim1, size_t dim2,
                             size_t wg) {
    size_t global[3] = {groups0 * wg, dim1, dim2}, local[3] = {wg, 1, 1};
    if (a->rc != CL_SUCCESS)
        return fmsa_fail(FMSA_ERR_DEVICE, "opencl: clSetKernelArg failed for %s: %s (%d)", what,
                         fmsa_ocl_error_name(a->rc), (int)a->rc);
    if (!groups0 || !dim1 || !dim2) return FMSA_SUCCESS;
    if (fmsa_ocl_profiling()) {
        double t0;
        FMSA_OCL_CHECK("clFinish", st->cl->clFinish(queue));
        t0 = fmsa_ocl_now_ms();
        FMSA_OCL_CHECK("clEnqueueNDRangeKernel",
                       st->cl->clEnqueueNDRangeKernel(queue, a->kernel, 3, NULL, global, local,
                                                      0, NULL, NULL));
        FMSA_OCL_CHECK("clFinish", st->cl->clFinish(queue));
        fmsa_log(FMSA_LOG_INFO, "opencl profile: %s %.3f ms (%zu x %zu x %zu groups of %zu)",
                 what, fmsa_ocl_now_ms() - t0, groups0, dim1, dim2, wg);
        return FMSA_SUCCESS;
    }
    FMSA_OCL_CHECK("clEnqueueNDRangeKernel",
                   st->cl->clEnqueueNDRangeKernel(queue, a->kernel, 3, NULL, global, local, 0,
                                                  NULL, NULL));
    return FMSA_SUCCESS;
}

size_t fmsa_ocl_groups(int64_t n, int64_t rows) {
    return n <= 0 ? 0 : (size_t)((n + rows - 1) / rows);
}

fmsa_status fmsa_ocl_check_workspace(const fmsa_ocl_config *cfg, cl_mem workspace,
                                     size_t workspace_bytes, const char *pass) {
    if (workspace_bytes < cfg->workspace_bytes || (cfg->workspace_bytes && !workspace))
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "opencl: %s needs %zu bytes of workspace, got %zu", pass,
                         cfg->workspace_bytes, workspace ? workspace_bytes : (size_t)0);
    return FMSA_SUCCESS;
}
