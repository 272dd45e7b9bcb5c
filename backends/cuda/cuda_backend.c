/*
 * The CUDA backend's vtable: devices, contexts, memory and the two passes.
 *
 * A context is the device's primary context, the one the CUDA runtime (and
 * so PyTorch, cudaMalloc) uses, so memory from either can be passed in as it
 * is; every call pushes it for its duration and pops it again, leaving the
 * caller's current context alone.  Streams are the caller's (a cudaStream_t
 * is a CUstream); NULL is the legacy default stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_internal.h"
#include "common/backend.h"
#include "common/error.h"
#include "common/feature_gate.h"

static fmsa_status fmsa_cuda_device_count(int *count) {
    fmsa_cuda_devices(count);
    if (*count == 0) fmsa_log(FMSA_LOG_INFO, "cuda: no devices (%s)", fmsa_cuda_load_error());
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_device_info(int index, fmsa_device_info *info) {
    int n = 0;
    const fmsa_cuda_device *devs = fmsa_cuda_devices(&n);
    if (index < 0 || index >= n)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "cuda: device index %d out of range (%d devices)",
                         index, n);
    *info = devs[index].info;
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cuda_push(const fmsa_cuda_state *st) {
    FMSA_CU_CHECK(st->cu, "cuCtxPushCurrent", st->cu->cuCtxPushCurrent(st->ctx));
    return FMSA_SUCCESS;
}

void fmsa_cuda_pop(const fmsa_cuda_state *st) {
    fmsa_cu_context popped;
    st->cu->cuCtxPopCurrent(&popped);
}

static void fmsa_cuda_context_destroy(void *state) {
    fmsa_cuda_state *st = (fmsa_cuda_state *)state;
    if (!st) return;
    if (st->ctx && fmsa_cuda_push(st) == FMSA_SUCCESS) {
        if (st->status) st->cu->cuMemFree(st->status);
        for (int i = 0; i < st->module_count; ++i) st->cu->cuModuleUnload(st->modules[i]);
        fmsa_cuda_pop(st);
    }
    while (st->kernels) {
        fmsa_cuda_kernel *next = st->kernels->next;
        free(st->kernels);
        st->kernels = next;
    }
    if (st->ctx) st->cu->cuDevicePrimaryCtxRelease(st->dev->handle);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* Loads every embedded fatbin and makes the zeroed status word: done here,
 * once, so that no later pass allocates or loads anything (graph capture). */
static fmsa_status fmsa_cuda_context_init(fmsa_cuda_state *st) {
    unsigned zero[4] = {0, 0, 0, 0};
    if (fmsa_cuda_fatbin_count > FMSA_CUDA_MAX_MODULES)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cuda: %d kernel files, at most %d modules",
                         fmsa_cuda_fatbin_count, FMSA_CUDA_MAX_MODULES);
    for (int i = 0; i < fmsa_cuda_fatbin_count; ++i) {
        fmsa_cu_result rc = st->cu->cuModuleLoadData(&st->modules[i], fmsa_cuda_fatbins[i].data);
        if (rc != FMSA_CU_SUCCESS) {
            fmsa_status s = fmsa_cuda_fail(st->cu, "cuModuleLoadData", rc);
            return fmsa_fail(s, "%s (kernels of %s, device %s)", fmsa_last_error(),
                             fmsa_cuda_fatbins[i].name, st->dev->info.arch);
        }
        st->module_count = i + 1;
    }
    FMSA_CU_CHECK(st->cu, "cuMemAlloc(status word)", st->cu->cuMemAlloc(&st->status, sizeof zero));
    FMSA_CU_CHECK(st->cu, "cuMemcpyHtoD(status word)",
                  st->cu->cuMemcpyHtoD(st->status, zero, sizeof zero));
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_context_create(int index, void **state) {
    int n = 0;
    const fmsa_cuda_device *devs = fmsa_cuda_devices(&n);
    fmsa_cuda_state *st;
    fmsa_status s;
    if (index < 0 || index >= n)
        return fmsa_fail(n ? FMSA_ERR_INVALID_ARGUMENT : FMSA_ERR_BACKEND_UNAVAILABLE,
                         "cuda: device index %d out of range (%d devices%s%s)", index, n,
                         n ? "" : ": ", n ? "" : fmsa_cuda_load_error());
    st = (fmsa_cuda_state *)calloc(1, sizeof *st);
    if (!st) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "cuda: context state allocation failed");
    st->cu = fmsa_cuda_load();
    st->dev = &devs[index];
    pthread_mutex_init(&st->lock, NULL);
    {
        fmsa_cu_result rc = st->cu->cuDevicePrimaryCtxRetain(&st->ctx, st->dev->handle);
        if (rc != FMSA_CU_SUCCESS) {
            st->ctx = NULL;
            s = fmsa_cuda_fail(st->cu, "cuDevicePrimaryCtxRetain", rc);
            fmsa_cuda_context_destroy(st);
            return s;
        }
    }
    s = fmsa_cuda_push(st);
    if (s == FMSA_SUCCESS) {
        s = fmsa_cuda_context_init(st);
        fmsa_cuda_pop(st);
    }
    if (s != FMSA_SUCCESS) {
        fmsa_cuda_context_destroy(st);
        return s;
    }
    *state = st;
    return FMSA_SUCCESS;
}

static fmsa_cu_deviceptr fmsa_cuda_dptr(const void *p) { return (fmsa_cu_deviceptr)(uintptr_t)p; }

static fmsa_status fmsa_cuda_mem_alloc(void *state, size_t bytes, void **ptr) {
    fmsa_cuda_state *st = (fmsa_cuda_state *)state;
    fmsa_cu_deviceptr d = 0;
    fmsa_cu_result rc;
    FMSA_TRY(fmsa_cuda_push(st));
    rc = st->cu->cuMemAlloc(&d, bytes ? bytes : 1);
    fmsa_cuda_pop(st);
    if (rc != FMSA_CU_SUCCESS) {
        fmsa_status s = fmsa_cuda_fail(st->cu, "cuMemAlloc", rc);
        return fmsa_fail(s, "%s (%zu bytes)", fmsa_last_error(), bytes);
    }
    *ptr = (void *)(uintptr_t)d;
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_mem_free(void *state, void *ptr) {
    fmsa_cuda_state *st = (fmsa_cuda_state *)state;
    fmsa_cu_result rc;
    if (!ptr) return FMSA_SUCCESS;
    FMSA_TRY(fmsa_cuda_push(st));
    rc = st->cu->cuMemFree(fmsa_cuda_dptr(ptr));
    fmsa_cuda_pop(st);
    if (rc != FMSA_CU_SUCCESS) return fmsa_cuda_fail(st->cu, "cuMemFree", rc);
    return FMSA_SUCCESS;
}

/* Synchronous copies: what the backend-neutral helpers (and validation's
 * reads of cu_seqlens when max_seqlen is not given) expect. */
static fmsa_status fmsa_cuda_copy_to_device(void *state, void *dst, size_t dst_offset,
                                            const void *src, size_t bytes) {
    fmsa_cuda_state *st = (fmsa_cuda_state *)state;
    fmsa_cu_result rc;
    if (!bytes) return FMSA_SUCCESS;
    FMSA_TRY(fmsa_cuda_push(st));
    rc = st->cu->cuMemcpyHtoD(fmsa_cuda_dptr(dst) + dst_offset, src, bytes);
    fmsa_cuda_pop(st);
    if (rc != FMSA_CU_SUCCESS) return fmsa_cuda_fail(st->cu, "cuMemcpyHtoD", rc);
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_copy_to_host(void *state, void *dst, const void *src,
                                          size_t src_offset, size_t bytes) {
    fmsa_cuda_state *st = (fmsa_cuda_state *)state;
    fmsa_cu_result rc;
    if (!bytes) return FMSA_SUCCESS;
    FMSA_TRY(fmsa_cuda_push(st));
    rc = st->cu->cuMemcpyDtoH(dst, fmsa_cuda_dptr(src) + src_offset, bytes);
    fmsa_cuda_pop(st);
    if (rc != FMSA_CU_SUCCESS) return fmsa_cuda_fail(st->cu, "cuMemcpyDtoH", rc);
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_synchronize(void *state, void *stream) {
    fmsa_cuda_state *st = (fmsa_cuda_state *)state;
    fmsa_status s;
    int capturing = 0;
    FMSA_TRY(fmsa_cuda_push(st));
    if (st->cu->cuStreamIsCapturing((fmsa_cu_stream)stream, &capturing) == FMSA_CU_SUCCESS &&
        capturing) {
        fmsa_cuda_pop(st);
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "cuda: fmsa_synchronize on a stream that is being captured into a CUDA "
                         "graph (synchronize after cuStreamEndCapture / replay)");
    }
    s = fmsa_cuda_status_take(st, (fmsa_cu_stream)stream);
    fmsa_cuda_pop(st);
    return s;
}

/* The allocation holding addr, for validation's extent check
 * (common/validate_memory.c): a host pointer or a short buffer would
 * otherwise fault on the device, which kills the whole context (the caller's
 * too), not just this call.  A host query: no synchronisation, graph-safe. */
static fmsa_status fmsa_cuda_mem_range(void *state, uintptr_t addr, uintptr_t *base,
                                       size_t *bytes) {
    const fmsa_cuda_state *st = (const fmsa_cuda_state *)state;
    fmsa_cu_deviceptr b = 0;
    size_t size = 0;
    fmsa_cu_result rc;
    FMSA_TRY(fmsa_cuda_push(st));
    rc = st->cu->cuMemGetAddressRange(&b, &size, (fmsa_cu_deviceptr)addr);
    fmsa_cuda_pop(st);
    if (rc != FMSA_CU_SUCCESS)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "not device memory of this CUDA context: cuMemGetAddressRange: %d",
                         (int)rc);
    *base = (uintptr_t)b;
    *bytes = size;
    return FMSA_SUCCESS;
}

/* What each pass's kernels implement of API v0.2 (common/feature_gate.h).  The
 * forward (main and split-KV kernels): sinks, a value head dim of its own,
 * head dims to 576 where an instance fits the device.  The backward's bits
 * come from its instance list (cuda_bwd_instances.h, FMSA_CUDA_BWD_FEATURES):
 * what that list does not declare, the backward refuses by name. */
#define FMSA_CUDA_FWD_FEATURES \
    (FMSA_FEATURE_SINKS | FMSA_FEATURE_VALUE_DIM | FMSA_FEATURE_LARGE_DIM)
#ifndef FMSA_CUDA_BWD_FEATURES
#define FMSA_CUDA_BWD_FEATURES 0u
#endif /* FMSA_CUDA_BWD_FEATURES */

static fmsa_status fmsa_cuda_supports(void *state, const fmsa_problem *p) {
    const fmsa_cuda_state *st = (const fmsa_cuda_state *)state;
    fmsa_cuda_plan plan;
    FMSA_TRY(fmsa_problem_require(p, p->pass == FMSA_PASS_FORWARD ? "cuda (forward)" : "cuda (backward)",
                                  p->pass == FMSA_PASS_FORWARD ? FMSA_CUDA_FWD_FEATURES
                                                               : FMSA_CUDA_BWD_FEATURES));
    return fmsa_cuda_plan_make(st, p, &plan);
}

static fmsa_status fmsa_cuda_workspace_size(void *state, const fmsa_problem *p, size_t *bytes) {
    fmsa_cuda_plan plan;
    FMSA_TRY(fmsa_cuda_plan_make((const fmsa_cuda_state *)state, p, &plan));
    *bytes = plan.workspace_bytes;
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_forward(void *state, const fmsa_problem *p, void *workspace,
                                     size_t workspace_bytes, void *stream) {
    return fmsa_cuda_run_forward((fmsa_cuda_state *)state, p, workspace, workspace_bytes,
                                 (fmsa_cu_stream)stream);
}

static fmsa_status fmsa_cuda_backward(void *state, const fmsa_problem *p, void *workspace,
                                      size_t workspace_bytes, void *stream) {
    return fmsa_cuda_run_backward((fmsa_cuda_state *)state, p, workspace, workspace_bytes,
                                  (fmsa_cu_stream)stream);
}

/* fmsa_merge_states: one launch (validation checked every view's allocation). */
static fmsa_status fmsa_cuda_merge(void *state, const fmsa_merge_problem *mp, void *stream) {
    return fmsa_cuda_run_merge((fmsa_cuda_state *)state, mp, (fmsa_cu_stream)stream);
}

static fmsa_status fmsa_cuda_accumulate(void *state, const fmsa_accumulate_problem *ap,
                                        void *stream) {
    return fmsa_cuda_run_accumulate((fmsa_cuda_state *)state, ap, (fmsa_cu_stream)stream);
}

static fmsa_status fmsa_cuda_copy_device(void *state, void *dst, size_t dst_offset,
                                         const void *src, size_t src_offset, size_t bytes,
                                         void *stream) {
    return fmsa_cuda_run_copy_device((fmsa_cuda_state *)state, dst, dst_offset, src, src_offset,
                                     bytes, (fmsa_cu_stream)stream);
}

static const fmsa_backend_vtable fmsa_cuda_vtable = {
    .api_version = FMSA_BACKEND_API_VERSION,
    .kind = FMSA_BACKEND_CUDA,
    .name = "cuda",
    .meta_access = FMSA_META_DEFERRED,
    .device_count = fmsa_cuda_device_count,
    .device_info = fmsa_cuda_device_info,
    .context_create = fmsa_cuda_context_create,
    .context_destroy = fmsa_cuda_context_destroy,
    .mem_alloc = fmsa_cuda_mem_alloc,
    .mem_free = fmsa_cuda_mem_free,
    .mem_range = fmsa_cuda_mem_range,
    .copy_to_device = fmsa_cuda_copy_to_device,
    .copy_to_host = fmsa_cuda_copy_to_host,
    .synchronize = fmsa_cuda_synchronize,
    .supports = fmsa_cuda_supports,
    .workspace_size = fmsa_cuda_workspace_size,
    .forward = fmsa_cuda_forward,
    .backward = fmsa_cuda_backward,
    .merge = fmsa_cuda_merge,
    .accumulate = fmsa_cuda_accumulate,
    .copy_device = fmsa_cuda_copy_device,
};

const fmsa_backend_vtable *fmsa_backend_cuda_vtable(void) { return &fmsa_cuda_vtable; }
