/*
 * The CPU-device variant: selection, configuration, program and launches.
 *
 * Why a second set of kernels: a CPU OpenCL runtime (PoCL) runs a
 * work-group as loops over its work-items; the generic kernels' __local
 * tiles and barriers become memory copies and loop fission with every live
 * private value spilled per work-item, and their -D specialisation builds a
 * program per dtype x head dim x tile x feature set (seconds to minutes of
 * compile each).  The CPU kernels are barrier-free work-items of 16 rows
 * with explicit float8 arithmetic, specialised by nothing: one program, its
 * four kernels compiled once per runtime cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_cpu.h"
#include "common/error.h"

static const char *const fmsa_ocl_cpu_names[FMSA_OCL_K_COUNT] = {
    "fmsa_ocl_cpu_forward", "fmsa_ocl_cpu_bwd_preprocess", "fmsa_ocl_cpu_bwd_dkdv",
    "fmsa_ocl_cpu_bwd_dq"};

/* Query rows per work-item of the preprocess kernel. */
#define FMSA_OCL_CPU_PRE_ROWS 64

/* Positions inside one sequence are int lanes in the kernels. */
#define FMSA_OCL_CPU_MAX_SEQ ((int64_t)1 << 30)

int fmsa_ocl_cpu_selected(const fmsa_ocl_state *st, const fmsa_problem *p) {
    const char *env = getenv("FLASHMSA_OCL_VARIANT");
    cl_device_type type = 0;
    if (p->seqlen_q >= FMSA_OCL_CPU_MAX_SEQ || p->seqlen_k >= FMSA_OCL_CPU_MAX_SEQ) return 0;
    if (env && strcmp(env, "cpu") == 0) return 1;
    if (env && strcmp(env, "generic") == 0) return 0;
    if (getenv("FLASHMSA_OCL_TILES")) return 0; /* a tuning run of the generic kernels */
    if (st->cl->clGetDeviceInfo(st->dev->id, CL_DEVICE_TYPE, sizeof type, &type, NULL) !=
        CL_SUCCESS)
        return 0;
    return (type & CL_DEVICE_TYPE_CPU) != 0;
}

fmsa_status fmsa_ocl_cpu_config_make(const fmsa_ocl_state *st, const fmsa_problem *p,
                                     fmsa_ocl_config *cfg) {
    (void)st;
    memset(cfg, 0, sizeof *cfg);
    cfg->variant = FMSA_OCL_VARIANT_CPU;
    cfg->table_row = "opencl-cpu: 16 rows per work-item, no barriers";
    for (int k = 0; k < FMSA_OCL_K_COUNT; ++k) {
        cfg->kernel[k].block_m = FMSA_OCL_CPU_ROWS;
        cfg->kernel[k].block_n = FMSA_OCL_CPU_ROWS;
        cfg->kernel[k].wg = 1;
    }
    if (p->pass == FMSA_PASS_BACKWARD) {
        /* D = rowsum(dO * O), one fp32 per (query row, head), as the generic kernels. */
        int64_t bq = p->is_varlen ? 1 : p->batch;
        cfg->workspace_bytes = (size_t)(bq * p->heads_q * p->total_q) * sizeof(float);
    }
    return FMSA_SUCCESS;
}

/* The kernel `which`, from the one CPU program.  Each kernel is a cache
 * entry of its own (keyed "cpu:<name>", which no -D string can equal) with
 * its own clBuildProgram of the same source and options: the runtime's
 * program cache (PoCL: POCL_CACHE_DIR) makes the repeats cheap. */
static fmsa_status fmsa_ocl_cpu_kernel(fmsa_ocl_state *st, int which, cl_kernel *out) {
    char key[64];
    fmsa_ocl_program *e;
    cl_int rc;
    const char *src = fmsa_ocl_cpu_kernel_source;
    snprintf(key, sizeof key, "cpu:%s", fmsa_ocl_cpu_names[which]);
    for (e = st->programs; e; e = e->next)
        if (strcmp(e->options, key) == 0) {
            *out = e->kernel;
            return FMSA_SUCCESS;
        }
    e = (fmsa_ocl_program *)calloc(1, sizeof *e);
    if (!e || !(e->options = (char *)malloc(strlen(key) + 1))) {
        free(e);
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "opencl: program cache allocation failed");
    }
    strcpy(e->options, key);
    e->program = st->cl->clCreateProgramWithSource(st->context, 1, &src, NULL, &rc);
    if (rc == CL_SUCCESS) {
        rc = st->cl->clBuildProgram(e->program, 1, &st->dev->id, FMSA_OCL_CPU_OPTIONS, NULL,
                                    NULL);
        if (rc != CL_SUCCESS) {
            size_t n = 0;
            char log[2048];
            if (st->cl->clGetProgramBuildInfo(e->program, st->dev->id, CL_PROGRAM_BUILD_LOG,
                                              sizeof log - 1, log, &n) != CL_SUCCESS)
                n = 0;
            log[n < sizeof log ? n : sizeof log - 1] = '\0';
            st->cl->clReleaseProgram(e->program);
            free(e->options);
            free(e);
            return fmsa_fail(FMSA_ERR_DEVICE,
                             "opencl: clBuildProgram failed for the CPU variant: %s (%d) with "
                             "options \"%s\"; build log:\n%s",
                             fmsa_ocl_error_name(rc), (int)rc, FMSA_OCL_CPU_OPTIONS, log);
        }
        e->kernel = st->cl->clCreateKernel(e->program, fmsa_ocl_cpu_names[which], &rc);
        if (rc != CL_SUCCESS) st->cl->clReleaseProgram(e->program);
    }
    if (rc != CL_SUCCESS) {
        free(e->options);
        free(e);
        return fmsa_ocl_fail("clCreateProgramWithSource/clCreateKernel", rc);
    }
    fmsa_log(FMSA_LOG_INFO, "opencl: variant cpu on %s: built %s with \"%s\"",
             st->dev->info.name, fmsa_ocl_cpu_names[which], FMSA_OCL_CPU_OPTIONS);
    e->next = st->programs;
    st->programs = e;
    *out = e->kernel;
    return FMSA_SUCCESS;
}

/* ---- kernel arguments ---------------------------------------------------- */

typedef struct fmsa_ocl_cpu_args {
    const fmsa_ocl_api *cl;
    cl_kernel kernel;
    cl_uint next;
    cl_int rc;
} fmsa_ocl_cpu_args;

static void fmsa_ocl_cpu_arg(fmsa_ocl_cpu_args *a, size_t size, const void *value) {
    if (a->rc == CL_SUCCESS) a->rc = a->cl->clSetKernelArg(a->kernel, a->next, size, value);
    ++a->next;
}

static void fmsa_ocl_cpu_arg_mem(fmsa_ocl_cpu_args *a, void *data) {
    cl_mem m = (cl_mem)data;
    fmsa_ocl_cpu_arg(a, sizeof m, &m);
}

static void fmsa_ocl_cpu_arg_long4(fmsa_ocl_cpu_args *a, int64_t x, int64_t y, int64_t z,
                                   int64_t w) {
    cl_long4 v;
    v.s[0] = x;
    v.s[1] = y;
    v.s[2] = z;
    v.s[3] = w;
    fmsa_ocl_cpu_arg(a, sizeof v, &v);
}

static void fmsa_ocl_cpu_arg_long(fmsa_ocl_cpu_args *a, int64_t x) {
    cl_long v = x;
    fmsa_ocl_cpu_arg(a, sizeof v, &v);
}

/* A [batch, seq, head, dim] view as (buffer, (element offset, sb, ss, sh)). */
static void fmsa_ocl_cpu_arg_view4(fmsa_ocl_cpu_args *a, const fmsa_view4 *v, size_t elem) {
    fmsa_ocl_cpu_arg_mem(a, v->data);
    fmsa_ocl_cpu_arg_long4(a, v->byte_offset / (int64_t)elem, v->sb, v->ss, v->sh);
}

/* A small tensor as (buffer, (element offset, s0, s1, s2)); absent = NULL. */
static void fmsa_ocl_cpu_arg_viewn(fmsa_ocl_cpu_args *a, const fmsa_viewn *v, size_t elem) {
    fmsa_ocl_cpu_arg_mem(a, v->data);
    fmsa_ocl_cpu_arg_long4(a, v->data ? v->byte_offset / (int64_t)elem : 0, v->s0, v->s1, v->s2);
}

static void fmsa_ocl_cpu_arg_cu(fmsa_ocl_cpu_args *a, const fmsa_problem *p) {
    fmsa_ocl_cpu_arg_mem(a, p->cu_seqlens_q.data);
    fmsa_ocl_cpu_arg_mem(a, p->cu_seqlens_k.data);
    fmsa_ocl_cpu_arg_long4(a, p->cu_seqlens_q.data ? p->cu_seqlens_q.byte_offset / 4 : 0,
                           p->cu_seqlens_q.s0,
                           p->cu_seqlens_k.data ? p->cu_seqlens_k.byte_offset / 4 : 0,
                           p->cu_seqlens_k.s0);
}

/* The feature switches of the generic kernels' -D options, as flag bits
 * (FC_* in fmsa_ocl_cpu_common.cl). */
static int fmsa_ocl_cpu_flags(const fmsa_problem *p) {
    int f = 0;
    if (p->window_left >= 0 || p->window_right >= 0) f |= 1;
    if (p->softcap > 0.0f) f |= 2;
    if (p->has_alibi) f |= 4;
    if (p->has_mask) f |= 8;
    if (p->is_varlen) f |= 16;
    if (p->is_paged) f |= 32;
    if (p->is_paged && p->has_seqused_k) f |= 64;
    if (p->has_lse) f |= 128;
    return f;
}

static void fmsa_ocl_cpu_arg_cfg(fmsa_ocl_cpu_args *a, const fmsa_problem *p) {
    cl_int4 c;
    c.s[0] = (cl_int)p->dtype;
    c.s[1] = (cl_int)p->head_dim;
    c.s[2] = fmsa_ocl_cpu_flags(p);
    c.s[3] = 0;
    fmsa_ocl_cpu_arg(a, sizeof c, &c);
}

/* dims = (sq, sk, Hq, group), window, fp = (scale, scale * log2 e, softcap), cfg. */
static void fmsa_ocl_cpu_arg_dims(fmsa_ocl_cpu_args *a, const fmsa_problem *p) {
    cl_long2 win;
    cl_float4 fp;
    fmsa_ocl_cpu_arg_long4(a, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_q / p->heads_kv);
    win.s[0] = p->window_left;
    win.s[1] = p->window_right;
    fmsa_ocl_cpu_arg(a, sizeof win, &win);
    fp.s[0] = p->softmax_scale;
    fp.s[1] = p->softmax_scale * 1.4426950408889634f;
    fp.s[2] = p->softcap;
    fp.s[3] = 0.0f;
    fmsa_ocl_cpu_arg(a, sizeof fp, &fp);
    fmsa_ocl_cpu_arg_cfg(a, p);
}

/* One work-item per work-group: global = groups. */
static fmsa_status fmsa_ocl_cpu_enqueue(fmsa_ocl_state *st, cl_command_queue queue,
                                        const fmsa_ocl_cpu_args *a, int which, size_t g0,
                                        size_t g1, size_t g2) {
    size_t global[3] = {g0, g1, g2}, local[3] = {1, 1, 1};
    if (a->rc != CL_SUCCESS)
        return fmsa_fail(FMSA_ERR_DEVICE, "opencl: clSetKernelArg failed for %s: %s (%d)",
                         fmsa_ocl_cpu_names[which], fmsa_ocl_error_name(a->rc), (int)a->rc);
    if (!g0 || !g1 || !g2) return FMSA_SUCCESS;
    FMSA_OCL_CHECK("clEnqueueNDRangeKernel",
                   st->cl->clEnqueueNDRangeKernel(queue, a->kernel, 3, NULL, global, local, 0,
                                                  NULL, NULL));
    return FMSA_SUCCESS;
}

static size_t fmsa_ocl_cpu_groups(int64_t n, int64_t rows) {
    return n <= 0 ? 0 : (size_t)((n + rows - 1) / rows);
}

fmsa_status fmsa_ocl_cpu_run_forward(fmsa_ocl_state *st, const fmsa_problem *p,
                                     const fmsa_ocl_config *cfg, cl_mem workspace,
                                     size_t workspace_bytes, cl_command_queue queue) {
    fmsa_ocl_cpu_args a = {st->cl, NULL, 0, CL_SUCCESS};
    const size_t e = fmsa_problem_elem_size(p);
    cl_long2 uv;
    (void)cfg;
    (void)workspace;
    (void)workspace_bytes;
    if (p->batch == 0 || p->seqlen_q == 0 || p->heads_q == 0) return FMSA_SUCCESS;
    FMSA_TRY(fmsa_ocl_cpu_kernel(st, FMSA_OCL_K_FORWARD, &a.kernel));
    fmsa_ocl_cpu_arg_view4(&a, &p->q, e);
    fmsa_ocl_cpu_arg_view4(&a, &p->k, e);
    fmsa_ocl_cpu_arg_view4(&a, &p->v, e);
    fmsa_ocl_cpu_arg_view4(&a, &p->o, e);
    fmsa_ocl_cpu_arg_viewn(&a, &p->lse, 4);
    fmsa_ocl_cpu_arg_viewn(&a, &p->alibi, 4);
    fmsa_ocl_cpu_arg_viewn(&a, &p->mask, 1);
    fmsa_ocl_cpu_arg_cu(&a, p);
    fmsa_ocl_cpu_arg_mem(&a, p->block_table.data);
    fmsa_ocl_cpu_arg_long4(&a, p->block_table.data ? p->block_table.byte_offset / 4 : 0,
                           p->block_table.s0, p->block_table.s1, p->page_size);
    fmsa_ocl_cpu_arg_mem(&a, p->seqused_k.data);
    uv.s[0] = p->seqused_k.data ? p->seqused_k.byte_offset / 4 : 0;
    uv.s[1] = p->seqused_k.s0;
    fmsa_ocl_cpu_arg(&a, sizeof uv, &uv);
    fmsa_ocl_cpu_arg_dims(&a, p);
    return fmsa_ocl_cpu_enqueue(st, queue, &a, FMSA_OCL_K_FORWARD,
                                fmsa_ocl_cpu_groups(p->seqlen_q, FMSA_OCL_CPU_ROWS),
                                (size_t)p->heads_q, (size_t)p->batch);
}

/* q, k, v, dout views, then the kernel's outputs, then this tail. */
static void fmsa_ocl_cpu_arg_bwd_tail(fmsa_ocl_cpu_args *a, const fmsa_problem *p, cl_mem ws) {
    fmsa_ocl_cpu_arg_viewn(a, &p->lse, 4);
    fmsa_ocl_cpu_arg_mem(a, ws);
    fmsa_ocl_cpu_arg_long(a, p->total_q);
    fmsa_ocl_cpu_arg_viewn(a, &p->alibi, 4);
    fmsa_ocl_cpu_arg_viewn(a, &p->mask, 1);
    fmsa_ocl_cpu_arg_cu(a, p);
    fmsa_ocl_cpu_arg_dims(a, p);
}

static void fmsa_ocl_cpu_arg_bwd_inputs(fmsa_ocl_cpu_args *a, const fmsa_problem *p, size_t e) {
    fmsa_ocl_cpu_arg_view4(a, &p->q, e);
    fmsa_ocl_cpu_arg_view4(a, &p->k, e);
    fmsa_ocl_cpu_arg_view4(a, &p->v, e);
    fmsa_ocl_cpu_arg_view4(a, &p->dout, e);
}

fmsa_status fmsa_ocl_cpu_run_backward(fmsa_ocl_state *st, const fmsa_problem *p,
                                      const fmsa_ocl_config *cfg, cl_mem workspace,
                                      size_t workspace_bytes, cl_command_queue queue) {
    const size_t e = fmsa_problem_elem_size(p);
    const int64_t bq = p->is_varlen ? 1 : p->batch;
    if (workspace_bytes < cfg->workspace_bytes || (cfg->workspace_bytes && !workspace))
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "opencl: backward needs %zu bytes of workspace, got %zu",
                         cfg->workspace_bytes, workspace_bytes);
    if (p->batch == 0 || p->heads_q == 0) return FMSA_SUCCESS;
    {
        fmsa_ocl_cpu_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_cpu_kernel(st, FMSA_OCL_K_BWD_PRE, &a.kernel));
        fmsa_ocl_cpu_arg_view4(&a, &p->o, e);
        fmsa_ocl_cpu_arg_view4(&a, &p->dout, e);
        fmsa_ocl_cpu_arg_mem(&a, workspace);
        fmsa_ocl_cpu_arg_long(&a, p->total_q);
        fmsa_ocl_cpu_arg_long(&a, p->heads_q);
        fmsa_ocl_cpu_arg_cfg(&a, p);
        FMSA_TRY(fmsa_ocl_cpu_enqueue(st, queue, &a, FMSA_OCL_K_BWD_PRE,
                                      fmsa_ocl_cpu_groups(p->total_q, FMSA_OCL_CPU_PRE_ROWS),
                                      (size_t)p->heads_q, (size_t)bq));
    }
    {
        fmsa_ocl_cpu_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_cpu_kernel(st, FMSA_OCL_K_BWD_DKDV, &a.kernel));
        fmsa_ocl_cpu_arg_bwd_inputs(&a, p, e);
        fmsa_ocl_cpu_arg_view4(&a, &p->dk, e);
        fmsa_ocl_cpu_arg_view4(&a, &p->dv, e);
        fmsa_ocl_cpu_arg_bwd_tail(&a, p, workspace);
        FMSA_TRY(fmsa_ocl_cpu_enqueue(st, queue, &a, FMSA_OCL_K_BWD_DKDV,
                                      fmsa_ocl_cpu_groups(p->seqlen_k, FMSA_OCL_CPU_ROWS),
                                      (size_t)p->heads_kv, (size_t)p->batch));
    }
    {
        fmsa_ocl_cpu_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_cpu_kernel(st, FMSA_OCL_K_BWD_DQ, &a.kernel));
        fmsa_ocl_cpu_arg_bwd_inputs(&a, p, e);
        fmsa_ocl_cpu_arg_view4(&a, &p->dq, e);
        fmsa_ocl_cpu_arg_bwd_tail(&a, p, workspace);
        FMSA_TRY(fmsa_ocl_cpu_enqueue(st, queue, &a, FMSA_OCL_K_BWD_DQ,
                                      fmsa_ocl_cpu_groups(p->seqlen_q, FMSA_OCL_CPU_ROWS),
                                      (size_t)p->heads_q, (size_t)p->batch));
    }
    return FMSA_SUCCESS;
}
