/*
 * Contexts and the backend-neutral memory helpers.
 */
#include "common/context.h"

#include "common/error.h"
#include "common/registry.h"

#include <stdlib.h>

/* FLASHMSA_BACKEND / FLASHMSA_DEVICE steer an AUTO request, so a deployed
 * binary can be pointed at another device without a rebuild; an explicit
 * backend in the call is the program's own choice and wins. */
static fmsa_status fmsa_env_overrides(fmsa_backend *backend, int *device) {
    const char *b = getenv("FLASHMSA_BACKEND");
    const char *d = getenv("FLASHMSA_DEVICE");
    if (b && *b && fmsa_backend_parse(b, backend) != 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "FLASHMSA_BACKEND=%s: expected one of %s", b,
                         FMSA_BACKEND_NAMES);
    if (d && *d) {
        char *end;
        long v = strtol(d, &end, 10);
        if (*end || v < 0 || v > 1 << 20)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "FLASHMSA_DEVICE=%s: expected a device index >= 0", d);
        *device = (int)v;
    }
    return FMSA_SUCCESS;
}

/* Resolves (backend, device) to one entry of the global device list. */
static fmsa_status fmsa_pick_device(fmsa_backend backend, int device, fmsa_device_info *out) {
    const fmsa_device_info *list;
    int n = fmsa_registry_device_list(&list);
    if (backend == FMSA_BACKEND_AUTO) {
        if (device < 0 || device >= n)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "device = %d: AUTO indexes the %d device(s) of fmsa_device_get",
                             device, n);
        *out = list[device];
        fmsa_log(FMSA_LOG_INFO, "AUTO chose %s device %d: %s (%s)",
                 fmsa_backend_name(out->backend), out->index, out->name, out->arch);
        return FMSA_SUCCESS;
    }
    if (!fmsa_registry_find(backend))
        return fmsa_fail(FMSA_ERR_BACKEND_UNAVAILABLE,
                         "backend %s is not compiled into this build of flashmsa",
                         fmsa_backend_name(backend));
    for (int i = 0; i < n; ++i)
        if (list[i].backend == backend && list[i].index == device) {
            *out = list[i];
            return FMSA_SUCCESS;
        }
    return fmsa_fail(FMSA_ERR_BACKEND_UNAVAILABLE,
                     "backend %s has no usable device %d (runtime missing or fewer devices)",
                     fmsa_backend_name(backend), device);
}

fmsa_status fmsa_context_create(fmsa_backend backend, int device, fmsa_context **ctx) {
    fmsa_device_info info;
    fmsa_context *c;
    const fmsa_backend_vtable *vt;
    fmsa_clear_error();
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    *ctx = NULL;
    if (!fmsa_backend_valid(backend))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "backend = %d is not an fmsa_backend",
                         (int)backend);
    if (backend == FMSA_BACKEND_AUTO) FMSA_TRY(fmsa_env_overrides(&backend, &device));
    /* a negative index is a malformed call, not a missing backend/device */
    if (device < 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "device = %d: must be >= 0", device);
    FMSA_TRY(fmsa_pick_device(backend, device, &info));
    vt = fmsa_registry_find(info.backend);
    c = (fmsa_context *)calloc(1, sizeof *c);
    if (!c) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "fmsa_context_create: calloc failed");
    c->vt = vt;
    c->info = info;
    {
        fmsa_status st = vt->context_create(info.index, &c->state);
        if (st != FMSA_SUCCESS) {
            free(c);
            return st;
        }
    }
    *ctx = c;
    return FMSA_SUCCESS;
}

void fmsa_context_destroy(fmsa_context *ctx) {
    if (!ctx) return;
    if (ctx->vt->context_destroy) ctx->vt->context_destroy(ctx->state);
    free(ctx);
}

fmsa_status fmsa_context_device(const fmsa_context *ctx, fmsa_device_info *info) {
    fmsa_clear_error();
    if (!ctx || !info) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx or info is NULL");
    *info = ctx->info;
    return FMSA_SUCCESS;
}

fmsa_status fmsa_malloc(fmsa_context *ctx, size_t bytes, void **ptr) {
    fmsa_clear_error();
    if (!ctx || !ptr) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx or ptr is NULL");
    *ptr = NULL;
    if (bytes == 0) return FMSA_SUCCESS;
    return ctx->vt->mem_alloc(ctx->state, bytes, ptr);
}

fmsa_status fmsa_free(fmsa_context *ctx, void *ptr) {
    fmsa_clear_error();
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (!ptr) return FMSA_SUCCESS;
    return ctx->vt->mem_free(ctx->state, ptr);
}

fmsa_status fmsa_copy_to_device(fmsa_context *ctx, void *dst, size_t dst_offset, const void *src,
                                size_t bytes) {
    fmsa_clear_error();
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (bytes == 0) return FMSA_SUCCESS;
    if (!dst || !src) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "dst or src is NULL");
    return ctx->vt->copy_to_device(ctx->state, dst, dst_offset, src, bytes);
}

fmsa_status fmsa_copy_to_host(fmsa_context *ctx, void *dst, const void *src, size_t src_offset,
                              size_t bytes) {
    fmsa_clear_error();
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (bytes == 0) return FMSA_SUCCESS;
    if (!dst || !src) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "dst or src is NULL");
    return ctx->vt->copy_to_host(ctx->state, dst, src, src_offset, bytes);
}

fmsa_status fmsa_synchronize(fmsa_context *ctx, void *stream) {
    fmsa_clear_error();
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    return ctx->vt->synchronize(ctx->state, stream);
}
