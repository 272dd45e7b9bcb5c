/*
 * Run-time compilation and the per-context program cache.  Each kernel is
 * specialised by -D options (dtype, head dim, tiles, work-group shape,
 * feature switches), so a variant is built once per context the first time a
 * problem needs it and reused afterwards; the option string is the key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_internal.h"
#include "common/error.h"

static const char *const fmsa_ocl_kernel_names[FMSA_OCL_K_COUNT] = {
    "fmsa_ocl_forward", "fmsa_ocl_bwd_preprocess", "fmsa_ocl_bwd_dkdv", "fmsa_ocl_bwd_dq"};

static void fmsa_ocl_options(const fmsa_problem *p, int which, const fmsa_ocl_kernel_config *kc,
                             char *buf, size_t size) {
    /* The preprocess kernel has no tiles; the shared helpers still need a
     * consistent (unused) shape to compile. */
    static const fmsa_ocl_kernel_config dummy = {8, 8, 16, 4, 4, 0, 0, 0, 0, 0, 0};
    const fmsa_ocl_kernel_config *c = which == FMSA_OCL_K_BWD_PRE ? &dummy : kc;
    int windowed = p->window_left >= 0 || p->window_right >= 0;
    /* Developers: extra compiler options, e.g. "-cl-nv-verbose" (NVIDIA puts
     * ptxas's register / spill report in the build log, logged at info). */
    const char *extra = getenv("FLASHMSA_OCL_BUILD_FLAGS");
    /* No -cl-fast-relaxed-math: masked scores are -inf and must stay so. */
    snprintf(buf, size,
             "-cl-std=CL1.2 -DFMSA_KERNEL_FORWARD=%d -DFMSA_KERNEL_BWD_PRE=%d "
             "-DFMSA_KERNEL_BWD_DKDV=%d -DFMSA_KERNEL_BWD_DQ=%d -DFMSA_DTYPE=%d -DHEAD_DIM=%lld "
             "-DHEAD_DIM_V=%lld -DBM=%d -DBN=%d -DWG=%d -DS_NX=%d -DO_NX=%d -DO_ROWS=%d "
             "-DFMSA_WINDOW=%d -DFMSA_SOFTCAP=%d -DFMSA_ALIBI=%d -DFMSA_MASK=%d -DFMSA_VARLEN=%d "
             "-DFMSA_PAGED=%d -DFMSA_SEQUSED=%d -DFMSA_LSE=%d -DFMSA_SINKS=%d -DFMSA_DLSE=%d "
             "-DQS16=%d -DKS16=%d -DQDO2=%d -DPF=%d -DKV1=%d%s%s",
             which == FMSA_OCL_K_FORWARD, which == FMSA_OCL_K_BWD_PRE,
             which == FMSA_OCL_K_BWD_DKDV, which == FMSA_OCL_K_BWD_DQ, (int)p->dtype,
             (long long)p->head_dim, (long long)p->head_dim_v, c->block_m, c->block_n, c->wg,
             c->s_nx, c->o_nx, which == FMSA_OCL_K_BWD_DKDV ? c->block_n : c->block_m, windowed,
             p->softcap > 0.0f, p->has_alibi, p->has_mask, p->is_varlen, p->is_paged,
             p->is_paged && p->has_seqused_k, p->has_lse,
             /* sinks change only the forward, dlse only the preprocess: the
              * other kernels' programs stay shared */
             which == FMSA_OCL_K_FORWARD && p->has_sinks, which == FMSA_OCL_K_BWD_PRE && p->has_dlse,
             c->qs16, c->ks16, c->qdo2, c->pf, c->kv1, extra ? " " : "", extra ? extra : "");
}

static fmsa_status fmsa_ocl_build_failed(fmsa_ocl_state *st, cl_program prog, cl_int rc,
                                         const char *options) {
    size_t n = 0;
    char *log = NULL;
    fmsa_status s;
    st->cl->clGetProgramBuildInfo(prog, st->dev->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    if (n > 0 && (log = (char *)malloc(n + 1)) != NULL) {
        if (st->cl->clGetProgramBuildInfo(prog, st->dev->id, CL_PROGRAM_BUILD_LOG, n, log,
                                          NULL) != CL_SUCCESS)
            n = 0;
        log[n] = '\0';
    }
    s = fmsa_fail(FMSA_ERR_DEVICE, "opencl: clBuildProgram failed: %s (%d) with options \"%s\"; build log:\n%s",
                  fmsa_ocl_error_name(rc), (int)rc, options, log ? log : "(none)");
    free(log);
    return s;
}

fmsa_status fmsa_ocl_cached_kernel(fmsa_ocl_state *st, const char *key, const char *src,
                                   const char *options, const char *name, cl_kernel *out) {
    fmsa_ocl_program *e;
    cl_int rc;
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
    if (rc != CL_SUCCESS) {
        free(e->options);
        free(e);
        return fmsa_ocl_fail("clCreateProgramWithSource", rc);
    }
    rc = st->cl->clBuildProgram(e->program, 1, &st->dev->id, options, NULL, NULL);
    if (rc != CL_SUCCESS) {
        fmsa_status s = fmsa_ocl_build_failed(st, e->program, rc, options);
        st->cl->clReleaseProgram(e->program);
        free(e->options);
        free(e);
        return s;
    }
    e->kernel = st->cl->clCreateKernel(e->program, name, &rc);
    if (rc != CL_SUCCESS) {
        st->cl->clReleaseProgram(e->program);
        free(e->options);
        free(e);
        return fmsa_ocl_fail("clCreateKernel", rc);
    }
    fmsa_log(FMSA_LOG_DEBUG, "opencl: built %s on %s: %s", name, st->dev->info.name, options);
    if (getenv("FLASHMSA_OCL_BUILD_FLAGS")) {
        char log[4096];
        size_t n = 0;
        if (st->cl->clGetProgramBuildInfo(e->program, st->dev->id, CL_PROGRAM_BUILD_LOG,
                                          sizeof log - 1, log, &n) != CL_SUCCESS)
            n = 0;
        log[n < sizeof log ? n : sizeof log - 1] = '\0';
        fmsa_log(FMSA_LOG_INFO, "opencl: build log of %s: %s (options %s)", name, log, options);
    }
    e->next = st->programs;
    st->programs = e;
    *out = e->kernel;
    return FMSA_SUCCESS;
}

fmsa_status fmsa_ocl_kernel_get(fmsa_ocl_state *st, const fmsa_problem *p, int which,
                                const fmsa_ocl_kernel_config *kc, cl_kernel *out) {
    char options[768];
    fmsa_ocl_options(p, which, kc, options, sizeof options);
    return fmsa_ocl_cached_kernel(st, options, fmsa_ocl_kernel_source, options,
                                  fmsa_ocl_kernel_names[which], out);
}

void fmsa_ocl_program_cache_free(fmsa_ocl_state *st) {
    fmsa_ocl_program *e = st->programs;
    while (e) {
        fmsa_ocl_program *next = e->next;
        if (e->kernel) st->cl->clReleaseKernel(e->kernel);
        if (e->program) st->cl->clReleaseProgram(e->program);
        free(e->options);
        free(e);
        e = next;
    }
    st->programs = NULL;
}
