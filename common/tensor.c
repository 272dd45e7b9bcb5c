/*
 * Small value helpers of the public API: names, sizes, descriptor builders.
 */
#include "flashmsa/flashmsa.h"

#include "common/backend_list.h"

#include <math.h>
#include <string.h>

int fmsa_version(void) { return FLASHMSA_VERSION; }

const char *fmsa_backend_name(fmsa_backend backend) {
    switch (backend) {
    case FMSA_BACKEND_AUTO: return "auto";
#define FMSA_TENSOR_NAME_CASE_(ID, name) \
    case FMSA_BACKEND_##ID: return #name;
        FMSA_BACKEND_LIST(FMSA_TENSOR_NAME_CASE_)
#undef FMSA_TENSOR_NAME_CASE_
    }
    return "unknown";
}

size_t fmsa_dtype_size(fmsa_dtype dtype) {
    switch (dtype) {
    case FMSA_DTYPE_F32: return 4;
    case FMSA_DTYPE_F16: return 2;
    case FMSA_DTYPE_BF16: return 2;
    case FMSA_DTYPE_I32: return 4;
    case FMSA_DTYPE_U8: return 1;
    case FMSA_DTYPE_INVALID: return 0;
    }
    return 0;
}

fmsa_tensor fmsa_tensor_contiguous(void *data, fmsa_dtype dtype, int32_t ndim,
                                   const int64_t *shape) {
    fmsa_tensor t;
    int64_t stride = 1;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    if (ndim < 0 || ndim > FMSA_MAX_DIMS || !shape) {
        t.ndim = -1; /* rejected by validation with a message naming ndim */
        return t;
    }
    for (int32_t i = ndim - 1; i >= 0; --i) {
        t.shape[i] = shape[i];
        t.strides[i] = stride;
        /* saturate instead of wrapping (signed overflow is UB): validation
         * then reports "shape x strides overflows int64" for this tensor */
        if (__builtin_mul_overflow(stride, shape[i] > 0 ? shape[i] : 1, &stride))
            stride = INT64_MAX;
    }
    return t;
}

fmsa_attention_desc fmsa_attention_desc_init(int64_t head_dim) {
    fmsa_attention_desc d;
    memset(&d, 0, sizeof d);
    d.softmax_scale = head_dim > 0 ? (float)(1.0 / sqrt((double)head_dim)) : 1.0f;
    d.window_left = -1;
    d.window_right = -1;
    return d;
}
