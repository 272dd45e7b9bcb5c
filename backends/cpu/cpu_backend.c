/*
 * The CPU backend's vtable: host memory, the device query, and the forward /
 * backward passes over OpenMP.  Device memory is host memory, so the memory
 * helpers are aligned malloc and memcpy, and every pass has finished when it
 * returns (synchronize has nothing to wait for).
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_peak.h"
#include "common/error.h"
#include "common/feature_gate.h"

static fmsa_status cpu_device_count(int *count) {
    *count = 1; /* the host CPU (all its cores form one device) */
    return FMSA_SUCCESS;
}

static fmsa_status cpu_context_create(int index, void **state) {
    fmsa_cpu_state *st;
    fmsa_device_info info;
    fmsa_cpu_options opt;
    FMSA_TRY(fmsa_cpu_device_info(index, &info));
    FMSA_TRY(fmsa_cpu_options_read(&opt));
    st = (fmsa_cpu_state *)malloc(sizeof *st);
    if (!st) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "cpu: context state (%zu bytes)", sizeof *st);
    st->info = info;
    st->opt = opt;
    atomic_flag_clear(&st->arena.busy);
    st->arena.buf = NULL;
    st->arena.bytes = 0;
    *state = st;
    return FMSA_SUCCESS;
}

static void cpu_context_destroy(void *state) {
    if (state) fmsa_cpu_arena_release(&((fmsa_cpu_state *)state)->arena);
    free(state);
}

static fmsa_status cpu_mem_alloc(void *state, size_t bytes, void **ptr) {
    (void)state;
    *ptr = fmsa_cpu_aligned_alloc(bytes);
    if (!*ptr) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "cpu: malloc of %zu bytes", bytes);
    return FMSA_SUCCESS;
}

static fmsa_status cpu_mem_free(void *state, void *ptr) {
    (void)state;
    fmsa_cpu_aligned_free(ptr);
    return FMSA_SUCCESS;
}

static fmsa_status cpu_copy_to_device(void *state, void *dst, size_t dst_offset, const void *src,
                                      size_t bytes) {
    (void)state;
    if (bytes) memcpy((char *)dst + dst_offset, src, bytes);
    return FMSA_SUCCESS;
}

static fmsa_status cpu_copy_to_host(void *state, void *dst, const void *src, size_t src_offset,
                                    size_t bytes) {
    (void)state;
    if (bytes) memcpy(dst, (const char *)src + src_offset, bytes);
    return FMSA_SUCCESS;
}

static fmsa_status cpu_synchronize(void *state, void *stream) {
    (void)state;
    (void)stream; /* passes run synchronously on the calling thread's team */
    return FMSA_SUCCESS;
}

static fmsa_status cpu_supports(void *state, const fmsa_problem *p) {
    fmsa_cpu_plan plan;
    FMSA_TRY(fmsa_problem_require(p, "cpu",
                                    FMSA_FEATURE_SINKS | FMSA_FEATURE_DLSE |
                                        FMSA_FEATURE_VALUE_DIM | FMSA_FEATURE_LARGE_DIM));
    /* the decision forward/backward make: paged KV in backward is
     * refused there with a message naming the CPU backend */
    return fmsa_cpu_plan_of((const fmsa_cpu_state *)state, p, &plan);
}

static fmsa_status cpu_workspace_size(void *state, const fmsa_problem *p, size_t *bytes) {
    fmsa_cpu_plan plan;
    FMSA_TRY(fmsa_cpu_plan_of((const fmsa_cpu_state *)state, p, &plan));
    *bytes = plan.workspace_bytes;
    return FMSA_SUCCESS;
}

static const fmsa_backend_vtable fmsa_cpu_vtable = {
    .api_version = FMSA_BACKEND_API_VERSION, /* built against this interface */
    .kind = FMSA_BACKEND_CPU,                /* always compiled in */
    .name = "cpu",                           /* FLASHMSA_BACKEND=cpu */
    .device_count = cpu_device_count,        /* always 1: the host */
    .device_info = fmsa_cpu_device_info,     /* brand, ISA key, caches, threads */
    .context_create = cpu_context_create,    /* caches the device info and options */
    .context_destroy = cpu_context_destroy,  /* frees it */
    .mem_alloc = cpu_mem_alloc,              /* 64-byte aligned malloc */
    .mem_free = cpu_mem_free,                /* its free */
    .copy_to_device = cpu_copy_to_device,    /* memcpy */
    .copy_to_host = cpu_copy_to_host,        /* memcpy */
    .synchronize = cpu_synchronize,          /* no-op: passes are synchronous */
    .supports = cpu_supports,                /* paged backward refused; planner must fit */
    .workspace_size = cpu_workspace_size,    /* split-KV partials / backward D */
    .forward = fmsa_cpu_forward,             /* cpu_forward.c */
    .backward = fmsa_cpu_backward,           /* cpu_backward.c */
    .merge = fmsa_cpu_merge,                 /* cpu_merge.c */
    .peak = &fmsa_cpu_peak_probe,            /* cpu_peak.c: flashmsa peak */
    .accumulate = fmsa_cpu_accumulate,       /* cpu_accumulate.c: the ring's sums */
    .copy_device = fmsa_cpu_copy_device,     /* memcpy */
};

const fmsa_backend_vtable *fmsa_backend_cpu_vtable(void) { return &fmsa_cpu_vtable; }
