#include "support/fmsa_test_buffer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fmsa_half.h"

/// Guard byte k (counted from the start of the allocation or from the start
/// of the trailing guard): position-dependent so a shifted copy is caught too.
static unsigned char buf_guard_byte(size_t k) { return (unsigned char)(0xA5u + 7u * (unsigned)k); }

int fmsa_test_buf_init(fmsa_test_buf *b, const char *name, fmsa_dtype dtype, fmsa_test_role role,
                       int32_t ndim, const int64_t *shape, const int64_t *strides) {
    size_t interior;
    memset(b, 0, sizeof *b);
    b->name = name;
    b->dtype = dtype;
    b->role = role;
    b->ndim = ndim;
    b->esize = fmsa_dtype_size(dtype);
    b->count = 1;
    b->span = 1;
    for (int32_t i = 0; i < ndim; ++i) b->shape[i] = shape[i];
    for (int32_t i = ndim - 1; i >= 0; --i) {
        b->strides[i] = strides ? strides[i] : (i == ndim - 1 ? 1 : b->strides[i + 1] * b->shape[i + 1]);
        b->count *= shape[i];
        if (shape[i] > 0) b->span += (shape[i] - 1) * b->strides[i];
    }
    if (b->count == 0) b->span = 0;
    interior = (size_t)b->span * b->esize;
    b->total = interior + 2 * FMSA_TEST_GUARD_BYTES;
    b->host = (unsigned char *)malloc(b->total);
    b->hole = (unsigned char *)malloc((size_t)b->span + 1);
    if (!b->host || !b->hole) return -1;
    for (size_t k = 0; k < FMSA_TEST_GUARD_BYTES; ++k) {
        b->host[k] = buf_guard_byte(k);
        b->host[FMSA_TEST_GUARD_BYTES + interior + k] = buf_guard_byte(k);
    }
    memset(b->host + FMSA_TEST_GUARD_BYTES, FMSA_TEST_POISON_BYTE, interior);
    memset(b->hole, 1, (size_t)b->span + 1);
    for (int64_t n = 0; n < b->count; ++n) b->hole[fmsa_test_buf_offset(b, n)] = 0;
    return 0;
}

void fmsa_test_buf_free(fmsa_context *ctx, fmsa_test_buf *b) {
    if (b->dev && ctx) fmsa_free(ctx, b->dev);
    free(b->host);
    free(b->hole);
    memset(b, 0, sizeof *b);
}

void *fmsa_test_buf_origin(const fmsa_test_buf *b, const unsigned char *image) {
    return (void *)(image + FMSA_TEST_GUARD_BYTES);
}

int64_t fmsa_test_buf_offset(const fmsa_test_buf *b, int64_t n) {
    int64_t off = 0;
    for (int32_t i = b->ndim - 1; i >= 0; --i) {
        off += (n % b->shape[i]) * b->strides[i];
        n /= b->shape[i];
    }
    return off;
}

void fmsa_test_buf_store(fmsa_test_buf *b, const double *dense) {
    void *o = fmsa_test_buf_origin(b, b->host);
    for (int64_t n = 0; n < b->count; ++n)
        fmsa_store_f32(o, (int)b->dtype, fmsa_test_buf_offset(b, n), (float)dense[n]);
}

void fmsa_test_buf_load(const fmsa_test_buf *b, const unsigned char *image, double *dense) {
    const void *o = fmsa_test_buf_origin(b, image);
    for (int64_t n = 0; n < b->count; ++n) {
        int64_t off = fmsa_test_buf_offset(b, n);
        dense[n] = b->dtype == FMSA_DTYPE_I32 ? (double)((const int32_t *)o)[off]
                                              : (double)fmsa_load_f32(o, (int)b->dtype, off);
    }
}

void fmsa_test_buf_store_i32(fmsa_test_buf *b, const int32_t *dense) {
    int32_t *o = (int32_t *)fmsa_test_buf_origin(b, b->host);
    for (int64_t n = 0; n < b->count; ++n) o[fmsa_test_buf_offset(b, n)] = dense[n];
}

void fmsa_test_buf_store_u8(fmsa_test_buf *b, const unsigned char *dense) {
    unsigned char *o = (unsigned char *)fmsa_test_buf_origin(b, b->host);
    for (int64_t n = 0; n < b->count; ++n) o[fmsa_test_buf_offset(b, n)] = dense[n];
}

fmsa_status fmsa_test_buf_upload(fmsa_context *ctx, fmsa_test_buf *b) {
    if (!b->dev) {
        fmsa_status st = fmsa_malloc(ctx, b->total, &b->dev);
        if (st != FMSA_SUCCESS) return st;
    }
    return fmsa_copy_to_device(ctx, b->dev, 0, b->host, b->total);
}

fmsa_status fmsa_test_buf_download(fmsa_context *ctx, const fmsa_test_buf *b,
                                   unsigned char *image) {
    return fmsa_copy_to_host(ctx, image, b->dev, 0, b->total);
}

fmsa_tensor fmsa_test_buf_tensor(const fmsa_test_buf *b) {
    fmsa_tensor t;
    memset(&t, 0, sizeof t);
    t.data = b->dev;
    t.byte_offset = FMSA_TEST_GUARD_BYTES;
    t.dtype = b->dtype;
    t.ndim = b->ndim;
    for (int32_t i = 0; i < b->ndim; ++i) {
        t.shape[i] = b->shape[i];
        t.strides[i] = b->strides[i];
    }
    return t;
}

/// NaN or (unless allowed) infinity in a float element of an image.
static int buf_bad_value(const fmsa_test_buf *b, const void *origin, int64_t off, int allow_inf) {
    float f;
    if (b->dtype != FMSA_DTYPE_F32 && b->dtype != FMSA_DTYPE_F16 && b->dtype != FMSA_DTYPE_BF16)
        return 0;
    f = fmsa_load_f32(origin, (int)b->dtype, off);
    if (isnan(f)) return 1;
    return !allow_inf && isinf(f);
}

int fmsa_test_buf_check(const fmsa_test_buf *b, const unsigned char *image, int allow_inf,
                        char *msg, size_t len) {
    const size_t interior = (size_t)b->span * b->esize;
    const unsigned char *in = image + FMSA_TEST_GUARD_BYTES;
    const unsigned char *sent = b->host + FMSA_TEST_GUARD_BYTES;
    for (size_t k = 0; k < FMSA_TEST_GUARD_BYTES; ++k) {
        if (image[k] != b->host[k]) {
            snprintf(msg, len, "%s: guard byte %zd before the tensor was overwritten", b->name,
                     (ptrdiff_t)k - FMSA_TEST_GUARD_BYTES);
            return -1;
        }
        if (in[interior + k] != sent[interior + k]) {
            snprintf(msg, len, "%s: guard byte %zu after the tensor was overwritten", b->name, k);
            return -1;
        }
    }
    for (int64_t e = 0; e < b->span; ++e) {
        const unsigned char *now = in + (size_t)e * b->esize, *was = sent + (size_t)e * b->esize;
        if (b->hole[e] || b->role == FMSA_TEST_INPUT) {
            if (memcmp(now, was, b->esize) != 0) {
                snprintf(msg, len, "%s: %s element at offset %lld was modified", b->name,
                         b->hole[e] ? "padding (no logical)" : "input", (long long)e);
                return -1;
            }
        } else if (buf_bad_value(b, in, e, allow_inf)) {
            snprintf(msg, len, "%s: element at offset %lld is %s after the run (unwritten or "
                     "non-finite)", b->name, (long long)e,
                     isnan(fmsa_load_f32(in, (int)b->dtype, e)) ? "NaN" : "inf");
            return -1;
        }
    }
    return 0;
}
