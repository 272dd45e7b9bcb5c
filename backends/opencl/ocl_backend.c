/*
 * The OpenCL backend's vtable: devices, contexts, memory and the two passes.
 * Memory handles are cl_mem objects passed around as void *; tensors carry a
 * byte offset because a cl_mem cannot be offset like a pointer.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_aux.h"
#include "backends/opencl/ocl_internal.h"
#include "common/backend.h"
#include "common/error.h"
#include "common/feature_gate.h"

static fmsa_status fmsa_ocl_device_count(int *count) {
    fmsa_ocl_devices(count);
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_device_info(int index, fmsa_device_info *info) {
    int n = 0;
    const fmsa_ocl_device *devs = fmsa_ocl_devices(&n);
    if (index < 0 || index >= n)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "opencl: device index %d out of range (%d devices)",
                         index, n);
    *info = devs[index].info;
    return FMSA_SUCCESS;
}

static void fmsa_ocl_context_destroy(void *state) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    if (!st) return;
    fmsa_ocl_program_cache_free(st);
    if (st->queue) st->cl->clReleaseCommandQueue(st->queue);
    if (st->context) st->cl->clReleaseContext(st->context);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static fmsa_status fmsa_ocl_context_create(int index, void **state) {
    int n = 0;
    const fmsa_ocl_device *devs = fmsa_ocl_devices(&n);
    fmsa_ocl_state *st;
    cl_int rc;
    if (index < 0 || index >= n)
        return fmsa_fail(n ? FMSA_ERR_INVALID_ARGUMENT : FMSA_ERR_BACKEND_UNAVAILABLE,
                         "opencl: device index %d out of range (%d devices)", index, n);
    st = (fmsa_ocl_state *)calloc(1, sizeof *st);
    if (!st) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "opencl: context state allocation failed");
    st->cl = fmsa_ocl_load();
    st->dev = &devs[index];
    pthread_mutex_init(&st->lock, NULL);
    {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                         (cl_context_properties)st->dev->platform, 0};
        st->context = st->cl->clCreateContext(props, 1, &st->dev->id, NULL, NULL, &rc);
    }
    if (rc != CL_SUCCESS) {
        st->context = NULL;
        fmsa_ocl_context_destroy(st);
        return fmsa_ocl_fail("clCreateContext", rc);
    }
    st->queue = st->cl->clCreateCommandQueue(st->context, st->dev->id, 0, &rc);
    if (rc != CL_SUCCESS) {
        st->queue = NULL;
        fmsa_ocl_context_destroy(st);
        return fmsa_ocl_fail("clCreateCommandQueue", rc);
    }
    *state = st;
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_mem_alloc(void *state, size_t bytes, void **ptr) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    cl_int rc;
    cl_mem m;
    /* OpenCL forbids 0-byte buffers; a 1-byte buffer keeps "allocate 0" legal. */
    m = st->cl->clCreateBuffer(st->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &rc);
    if (rc != CL_SUCCESS) {
        if (rc == CL_MEM_OBJECT_ALLOCATION_FAILURE || rc == CL_OUT_OF_RESOURCES ||
            rc == CL_OUT_OF_HOST_MEMORY || rc == CL_INVALID_BUFFER_SIZE)
            return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "opencl: clCreateBuffer(%zu bytes) failed: %s (%d)",
                             bytes, fmsa_ocl_error_name(rc), (int)rc);
        return fmsa_ocl_fail("clCreateBuffer", rc);
    }
    *ptr = (void *)m;
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_mem_free(void *state, void *ptr) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    if (!ptr) return FMSA_SUCCESS;
    FMSA_OCL_CHECK("clReleaseMemObject", st->cl->clReleaseMemObject((cl_mem)ptr));
    return FMSA_SUCCESS;
}

/* CL_MEM_SIZE, so that validation refuses a view reaching past its buffer
 * (a kernel would read or write out of bounds on the device). */
static fmsa_status fmsa_ocl_mem_size(void *state, const void *data, size_t *bytes) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    FMSA_OCL_CHECK("clGetMemObjectInfo(CL_MEM_SIZE)",
                   st->cl->clGetMemObjectInfo((cl_mem)data, CL_MEM_SIZE, sizeof *bytes, bytes,
                                              NULL));
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_copy_to_device(void *state, void *dst, size_t dst_offset,
                                           const void *src, size_t bytes) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    if (!bytes) return FMSA_SUCCESS;
    FMSA_OCL_CHECK("clEnqueueWriteBuffer",
                   st->cl->clEnqueueWriteBuffer(st->queue, (cl_mem)dst, CL_TRUE, dst_offset, bytes,
                                                src, 0, NULL, NULL));
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_copy_to_host(void *state, void *dst, const void *src,
                                         size_t src_offset, size_t bytes) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    if (!bytes) return FMSA_SUCCESS;
    FMSA_OCL_CHECK("clEnqueueReadBuffer",
                   st->cl->clEnqueueReadBuffer(st->queue, (cl_mem)src, CL_TRUE, src_offset, bytes,
                                               dst, 0, NULL, NULL));
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_synchronize(void *state, void *stream) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    cl_command_queue q = stream ? (cl_command_queue)stream : st->queue;
    FMSA_OCL_CHECK("clFinish", st->cl->clFinish(q));
    return FMSA_SUCCESS;
}

/* Kernels index typed pointers, so every byte offset must be a whole number
 * of elements of its tensor. */
static fmsa_status fmsa_ocl_check_offset(const char *name, const void *data, int64_t byte_offset,
                                         size_t elem) {
    if (data && byte_offset % (int64_t)elem != 0)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "opencl: %s.byte_offset %lld is not a multiple of its element size %zu",
                         name, (long long)byte_offset, elem);
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_supports(void *state, const fmsa_problem *p) {
    fmsa_ocl_config cfg;
    size_t e = fmsa_problem_elem_size(p);
    /* Both kernel families run every feature; shapes that a device's local
     * memory cannot hold are refused by fmsa_ocl_config_make, naming the dims. */
    FMSA_TRY(fmsa_problem_require(p, "opencl",
                                  FMSA_FEATURE_SINKS | FMSA_FEATURE_DLSE |
                                      FMSA_FEATURE_VALUE_DIM | FMSA_FEATURE_LARGE_DIM));
    FMSA_TRY(fmsa_ocl_check_offset("q", p->q.data, p->q.byte_offset, e));
    FMSA_TRY(fmsa_ocl_check_offset("k", p->k.data, p->k.byte_offset, e));
    FMSA_TRY(fmsa_ocl_check_offset("v", p->v.data, p->v.byte_offset, e));
    FMSA_TRY(fmsa_ocl_check_offset("o", p->o.data, p->o.byte_offset, e));
    if (p->pass == FMSA_PASS_BACKWARD) {
        FMSA_TRY(fmsa_ocl_check_offset("dout", p->dout.data, p->dout.byte_offset, e));
        FMSA_TRY(fmsa_ocl_check_offset("dq", p->dq.data, p->dq.byte_offset, e));
        FMSA_TRY(fmsa_ocl_check_offset("dk", p->dk.data, p->dk.byte_offset, e));
        FMSA_TRY(fmsa_ocl_check_offset("dv", p->dv.data, p->dv.byte_offset, e));
    }
    FMSA_TRY(fmsa_ocl_check_offset("lse", p->lse.data, p->lse.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_check_offset("alibi_slopes", p->alibi.data, p->alibi.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_check_offset("cu_seqlens_q", p->cu_seqlens_q.data,
                                   p->cu_seqlens_q.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_check_offset("cu_seqlens_k", p->cu_seqlens_k.data,
                                   p->cu_seqlens_k.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_check_offset("block_table", p->block_table.data,
                                   p->block_table.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_check_offset("seqused_k", p->seqused_k.data, p->seqused_k.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_check_offset("desc.sinks", p->sinks.data, p->sinks.byte_offset, 4));
    if (p->pass == FMSA_PASS_BACKWARD) {
        FMSA_TRY(fmsa_ocl_check_offset("dlse", p->dlse.data, p->dlse.byte_offset, 4));
        FMSA_TRY(fmsa_ocl_check_offset("dsink", p->dsink.data, p->dsink.byte_offset, 4));
    }
    return fmsa_ocl_config_make((const fmsa_ocl_state *)state, p, &cfg);
}

static fmsa_status fmsa_ocl_workspace_size(void *state, const fmsa_problem *p, size_t *bytes) {
    fmsa_ocl_config cfg;
    FMSA_TRY(fmsa_ocl_config_make((const fmsa_ocl_state *)state, p, &cfg));
    *bytes = cfg.workspace_bytes;
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_ocl_forward(void *state, const fmsa_problem *p, void *workspace,
                                    size_t workspace_bytes, void *stream) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    fmsa_status s;
    FMSA_TRY(fmsa_ocl_supports(state, p));
    pthread_mutex_lock(&st->lock);
    s = fmsa_ocl_run_forward(st, p, (cl_mem)workspace, workspace_bytes,
                             stream ? (cl_command_queue)stream : st->queue);
    pthread_mutex_unlock(&st->lock);
    return s;
}

static fmsa_status fmsa_ocl_backward(void *state, const fmsa_problem *p, void *workspace,
                                     size_t workspace_bytes, void *stream) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    fmsa_status s;
    FMSA_TRY(fmsa_ocl_supports(state, p));
    pthread_mutex_lock(&st->lock);
    s = fmsa_ocl_run_backward(st, p, (cl_mem)workspace, workspace_bytes,
                              stream ? (cl_command_queue)stream : st->queue);
    pthread_mutex_unlock(&st->lock);
    return s;
}

static const fmsa_backend_vtable fmsa_ocl_vtable = {
    .api_version = FMSA_BACKEND_API_VERSION,
    .kind = FMSA_BACKEND_OPENCL,
    .name = "opencl",
    .device_count = fmsa_ocl_device_count,
    .device_info = fmsa_ocl_device_info,
    .context_create = fmsa_ocl_context_create,
    .context_destroy = fmsa_ocl_context_destroy,
    .mem_alloc = fmsa_ocl_mem_alloc,
    .mem_free = fmsa_ocl_mem_free,
    .copy_to_device = fmsa_ocl_copy_to_device,
    .copy_to_host = fmsa_ocl_copy_to_host,
    .synchronize = fmsa_ocl_synchronize,
    .supports = fmsa_ocl_supports,
    .workspace_size = fmsa_ocl_workspace_size,
    .forward = fmsa_ocl_forward,
    .backward = fmsa_ocl_backward,
    .data_handles = 1,
    .mem_size = fmsa_ocl_mem_size,
    .merge = fmsa_ocl_merge,
    .accumulate = fmsa_ocl_accumulate,
};

const fmsa_backend_vtable *fmsa_backend_opencl_vtable(void) { return &fmsa_ocl_vtable; }
