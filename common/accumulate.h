/*
 * The elementwise op the ring driver needs on the context's device
 * (dist/ring.c): dst = src, dst += src, dst += x * src or dst = x over strided 4-d views
 * of any float dtype (mixed dtypes allowed), arithmetic fp32; and a
 * device-to-device byte copy.  With them the ring packs K/V, sums the fp32
 * gradient partials, rounds the results once and moves blocks between
 * loopback ranks without the host touching the data.
 *
 * Internal, not public: the public API promises attention passes and their
 * merge; a general elementwise op would be a second, unrelated contract
 * (users have their framework's), and the ring, which lives in libflashmsa,
 * reaches it through this header.
 */
#ifndef FMSA_COMMON_ACCUMULATE_H
#define FMSA_COMMON_ACCUMULATE_H

#include <stddef.h>
#include <stdint.h>

#include "flashmsa/flashmsa.h"

/// What fmsa_accumulate does to each element of dst.
typedef enum fmsa_acc_mode {
    FMSA_ACC_COPY = 0, ///< dst = src (rounded to dst's dtype; bitwise when the dtypes match)
    FMSA_ACC_ADD = 1,  ///< dst = dst + src in fp32, rounded to dst's dtype
    FMSA_ACC_FILL = 2, ///< dst = fill (src absent)
    FMSA_ACC_ADD_SCALED = 3, ///< dst = fma(src, fill, dst) in fp32 (fill is the scale), rounded to dst's dtype
} fmsa_acc_mode;

/// One side of the op: a 4-d strided view (element strides).
typedef struct fmsa_acc_view {
    void *data;          ///< device pointer (cl_mem on OpenCL, host pointer on the CPU)
    int64_t byte_offset; ///< added to data
    fmsa_dtype dtype;    ///< f32, f16 or bf16
    int64_t strides[4];  ///< element strides
} fmsa_acc_view;

/// The validated op a backend runs: every view 4-d, shapes equal.
typedef struct fmsa_accumulate_problem {
    fmsa_acc_mode mode;
    float fill;        ///< FMSA_ACC_FILL's value, FMSA_ACC_ADD_SCALED's scale
    int64_t shape[4];  ///< extents of dst (and src)
    int64_t count;     ///< elements (product of shape), > 0
    fmsa_acc_view dst; ///< written
    fmsa_acc_view src; ///< read (data NULL for FILL)
} fmsa_accumulate_problem;


/// The op on ctx's device, enqueued on stream (NULL = the context's default).
/// dst and src have 1..4 dims of the same shape (leading dims are padded
/// with 1); they may be the same view, any other overlap is undefined.
fmsa_status fmsa_accumulate(fmsa_context *ctx, fmsa_acc_mode mode, const fmsa_tensor *dst,
                            const fmsa_tensor *src, float fill, void *stream);

/// bytes from src + src_offset to dst + dst_offset, device to device, on
/// stream (ordered with the passes there); the ranges must not overlap.
fmsa_status fmsa_copy_device(fmsa_context *ctx, void *dst, size_t dst_offset, const void *src,
                             size_t src_offset, size_t bytes, void *stream);

#endif /* FMSA_COMMON_ACCUMULATE_H */
