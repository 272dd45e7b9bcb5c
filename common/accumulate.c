/* The ring's elementwise op and device copy (accumulate.h): argument checks,
 * then the backend's member. */
#include "common/accumulate.h"

#include <string.h>

#include "common/backend.h"
#include "common/context.h"
#include "common/error.h"

static int acc_float(fmsa_dtype d) {
    return d == FMSA_DTYPE_F32 || d == FMSA_DTYPE_F16 || d == FMSA_DTYPE_BF16;
}

/* t as a 4-d view, leading dims padded with extent 1. */
static fmsa_status acc_view(const char *name, const fmsa_tensor *t, int64_t shape[4],
                            fmsa_acc_view *v) {
    const int pad = 4 - (int)t->ndim;
    if (!t->data) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: %s is absent", name);
    if (t->ndim < 1 || t->ndim > 4)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: %s.ndim = %d: expected 1..4",
                         name, (int)t->ndim);
    if (!acc_float(t->dtype))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: %s.dtype = %d: expected f32, "
                         "f16 or bf16", name, (int)t->dtype);
    if (t->byte_offset < 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: %s.byte_offset < 0", name);
    v->data = t->data;
    v->byte_offset = t->byte_offset;
    v->dtype = t->dtype;
    for (int i = 0; i < 4; ++i) {
        shape[i] = i < pad ? 1 : t->shape[i - pad];
        v->strides[i] = i < pad ? 0 : t->strides[i - pad];
        if (shape[i] < 0)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: %s has a negative extent",
                             name);
    }
    return FMSA_SUCCESS;
}

/* Merges dims that both views walk as one (extent-1 dims go, and dim i joins
 * dim i + 1 where stride_i = stride_{i+1} extent_{i+1} in dst and src), so a
 * row slice of a contiguous tensor becomes one flat run and the backends'
 * index arithmetic has fewer dims to undo. */
static void acc_collapse(fmsa_accumulate_problem *ap) {
    int64_t sh[4], ds[4], ss[4];
    int n = 0;
    const int has_src = ap->src.data != NULL;
    for (int i = 0; i < 4; ++i) {
        if (ap->shape[i] == 1) continue;
        if (n > 0 && ds[n - 1] == ap->dst.strides[i] * ap->shape[i] &&
            (!has_src || ss[n - 1] == ap->src.strides[i] * ap->shape[i])) {
            sh[n - 1] *= ap->shape[i];
            ds[n - 1] = ap->dst.strides[i];
            ss[n - 1] = ap->src.strides[i];
            continue;
        }
        sh[n] = ap->shape[i];
        ds[n] = ap->dst.strides[i];
        ss[n] = ap->src.strides[i];
        ++n;
    }
    for (int i = 0; i < 4; ++i) { /* right-aligned, leading dims of extent 1 */
        const int j = i - (4 - n);
        ap->shape[i] = j >= 0 ? sh[j] : 1;
        ap->dst.strides[i] = j >= 0 ? ds[j] : 0;
        ap->src.strides[i] = j >= 0 ? ss[j] : 0;
    }
}

fmsa_status fmsa_accumulate(fmsa_context *ctx, fmsa_acc_mode mode, const fmsa_tensor *dst,
                            const fmsa_tensor *src, float fill, void *stream) {
    fmsa_accumulate_problem ap;
    int64_t ss[4];
    if (!ctx || !dst) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: ctx or dst is NULL");
    if (mode != FMSA_ACC_COPY && mode != FMSA_ACC_ADD && mode != FMSA_ACC_FILL &&
        mode != FMSA_ACC_ADD_SCALED)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: mode = %d", (int)mode);
    memset(&ap, 0, sizeof ap);
    ap.mode = mode;
    ap.fill = fill;
    FMSA_TRY(acc_view("dst", dst, ap.shape, &ap.dst));
    if (mode != FMSA_ACC_FILL) {
        if (!src) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "accumulate: src is NULL");
        FMSA_TRY(acc_view("src", src, ss, &ap.src));
        for (int i = 0; i < 4; ++i)
            if (ss[i] != ap.shape[i])
                return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                                 "accumulate: src and dst shapes differ (dim %d: %lld vs %lld)", i,
                                 (long long)ss[i], (long long)ap.shape[i]);
    }
    ap.count = ap.shape[0] * ap.shape[1] * ap.shape[2] * ap.shape[3];
    acc_collapse(&ap);
    if (!ctx->vt->accumulate)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: the elementwise accumulate the ring needs is not supported by this "
                         "backend", ctx->vt->name);
    if (ap.count == 0) return FMSA_SUCCESS;
    return ctx->vt->accumulate(ctx->state, &ap, stream);
}

fmsa_status fmsa_copy_device(fmsa_context *ctx, void *dst, size_t dst_offset, const void *src,
                             size_t src_offset, size_t bytes, void *stream) {
    if (!ctx || !dst || !src)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "copy_device: ctx, dst or src is NULL");
    if (!ctx->vt->copy_device)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: device-to-device copies are not supported by this backend",
                         ctx->vt->name);
    if (bytes == 0) return FMSA_SUCCESS;
    return ctx->vt->copy_device(ctx->state, dst, dst_offset, src, src_offset, bytes, stream);
}
