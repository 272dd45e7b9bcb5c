/*
 * Row I/O with dtype conversion for the CPU backend.  Loops are unit-stride
 * over a restrict-qualified destination, vectorised at -O2/-O3 by GCC and
 * Clang.
 */
#include "backends/cpu/cpu_tile.h"

#include <string.h>

#include "common/fmsa_half.h"

void fmsa_cpu_zero(float *dst, int64_t n) { memset(dst, 0, (size_t)n * sizeof(float)); }

void fmsa_cpu_row_load(const char *base, fmsa_dtype dtype, int64_t off, int64_t D, float scale,
                       float *restrict dst) {
    int64_t d;
    switch (dtype) {
    case FMSA_DTYPE_F16: {
        const uint16_t *src = (const uint16_t *)base + off;
        for (d = 0; d < D; ++d) dst[d] = scale * fmsa_f16_to_f32(src[d]);
        break;
    }
    case FMSA_DTYPE_BF16: {
        const uint16_t *src = (const uint16_t *)base + off;
        for (d = 0; d < D; ++d) dst[d] = scale * fmsa_bf16_to_f32(src[d]);
        break;
    }
    default: {
        const float *restrict src = (const float *)base + off;
        for (d = 0; d < D; ++d) dst[d] = scale * src[d];
        break;
    }
    }
}

void fmsa_cpu_row_load_t(const char *base, fmsa_dtype dtype, int64_t off, int64_t D, int ld,
                         int col, float *restrict dst) {
    int64_t d;
    switch (dtype) {
    case FMSA_DTYPE_F16: {
        const uint16_t *src = (const uint16_t *)base + off;
        for (d = 0; d < D; ++d) dst[d * ld + col] = fmsa_f16_to_f32(src[d]);
        break;
    }
    case FMSA_DTYPE_BF16: {
        const uint16_t *src = (const uint16_t *)base + off;
        for (d = 0; d < D; ++d) dst[d * ld + col] = fmsa_bf16_to_f32(src[d]);
        break;
    }
    default: {
        const float *src = (const float *)base + off;
        for (d = 0; d < D; ++d) dst[d * ld + col] = src[d];
        break;
    }
    }
}

void fmsa_cpu_row_store(char *base, fmsa_dtype dtype, int64_t off, int64_t D, float scale,
                        const float *restrict src) {
    int64_t d;
    switch (dtype) {
    case FMSA_DTYPE_F16: {
        uint16_t *dst = (uint16_t *)base + off;
        for (d = 0; d < D; ++d) dst[d] = fmsa_f32_to_f16(scale * src[d]);
        break;
    }
    case FMSA_DTYPE_BF16: {
        uint16_t *dst = (uint16_t *)base + off;
        for (d = 0; d < D; ++d) dst[d] = fmsa_f32_to_bf16(scale * src[d]);
        break;
    }
    default: {
        float *restrict dst = (float *)base + off;
        for (d = 0; d < D; ++d) dst[d] = scale * src[d];
        break;
    }
    }
}

void fmsa_cpu_row_store_kern(const fmsa_cpu_kernels *kern, char *base, fmsa_dtype dtype,
                             int64_t off, int64_t D, float scale, float *row) {
    if (dtype == FMSA_DTYPE_BF16 && kern->row_to_b16) {
        if (scale != 1.0f) kern->row_scale(row, (int)D, scale);
        kern->row_to_b16(row, (int)D, (uint16_t *)base + off, (int)D);
        return;
    }
    fmsa_cpu_row_store(base, dtype, off, D, scale, row);
}
