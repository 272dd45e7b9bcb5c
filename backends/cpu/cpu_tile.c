/*
 * Row I/O with dtype conversion and the small fp32 matrix products of the CPU
 * backend.  Loops are written so that the innermost one is unit-stride over a
 * restrict-qualified destination (vectorised at -O2/-O3 by GCC and Clang);
 * the order of every sum is fixed by the loop nest, which keeps results
 * independent of the thread count.
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

void fmsa_cpu_mm_abt(const float *restrict a, int rows, int64_t D, const float *restrict bt,
                     int cols, int ld, float *restrict c) {
    for (int r = 0; r < rows; ++r) {
        const float *restrict ar = a + (int64_t)r * D;
        float *restrict cr = c + (int64_t)r * ld;
        for (int j = 0; j < cols; ++j) cr[j] = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float x = ar[d];
            const float *restrict br = bt + d * ld;
            for (int j = 0; j < cols; ++j) cr[j] += x * br[j];
        }
    }
}

void fmsa_cpu_mm_wb_acc(const float *restrict w, int rows, int cols, int ld,
                        const float *restrict b, int64_t D, float *restrict c) {
    for (int r = 0; r < rows; ++r) {
        const float *restrict wr = w + (int64_t)r * ld;
        float *restrict cr = c + (int64_t)r * D;
        for (int j = 0; j < cols; ++j) {
            const float x = wr[j];
            const float *restrict br = b + (int64_t)j * D;
            if (x == 0.0f) continue; /* masked key or underflowed weight */
            for (int64_t d = 0; d < D; ++d) cr[d] += x * br[d];
        }
    }
}

void fmsa_cpu_mm_wta_acc(const float *restrict w, int rows, int cols, int ld,
                         const float *restrict a, int64_t D, float *restrict c) {
    for (int r = 0; r < rows; ++r) {
        const float *restrict wr = w + (int64_t)r * ld;
        const float *restrict ar = a + (int64_t)r * D;
        for (int j = 0; j < cols; ++j) {
            const float x = wr[j];
            float *restrict cj = c + (int64_t)j * D;
            if (x == 0.0f) continue;
            for (int64_t d = 0; d < D; ++d) cj[d] += x * ar[d];
        }
    }
}
