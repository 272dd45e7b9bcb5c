/*
 * fp16 / bf16 <-> fp32 conversion on the host (round to nearest even), used by
 * the CPU backend, the reference and the tests.  Device backends use their
 * native conversions.
 */
#ifndef FMSA_HALF_H
#define FMSA_HALF_H

#include <stdint.h>
#include <string.h>

static inline float fmsa_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t fmsa_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/// bf16 -> fp32 is exact: bf16 is the top half of an fp32.
static inline float fmsa_bf16_to_f32(uint16_t h) { return fmsa_bits_to_f32((uint32_t)h << 16); }

/// fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
static inline uint16_t fmsa_f32_to_bf16(float f) {
    uint32_t u = fmsa_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/// fp16 -> fp32, exact (subnormals included).
static inline float fmsa_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) return fmsa_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* subnormal (or zero): value = man * 2^-24, exact in fp32 */
        float v = (float)man * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return fmsa_bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/// fp32 -> fp16, round to nearest even, overflow to inf, NaN kept.
static inline uint16_t fmsa_f32_to_f16(float f) {
    uint32_t u = fmsa_f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {
        /* result is subnormal in fp16: let the fp32 adder round at 2^-24 */
        float v = fmsa_bits_to_f32(a) + 0.5f;
        return (uint16_t)(sign | (fmsa_f32_to_bits(v) - 0x3f000000u));
    }
    /* normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even */
    a += ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | (a >> 13));
}

/// Loads element idx of a buffer of the given dtype as fp32.
static inline float fmsa_load_f32(const void *base, int dtype_f32_f16_bf16, int64_t idx) {
    switch (dtype_f32_f16_bf16) {
    case 2: return fmsa_f16_to_f32(((const uint16_t *)base)[idx]);
    case 3: return fmsa_bf16_to_f32(((const uint16_t *)base)[idx]);
    default: return ((const float *)base)[idx];
    }
}

/// Stores an fp32 value as element idx of a buffer of the given dtype.
static inline void fmsa_store_f32(void *base, int dtype_f32_f16_bf16, int64_t idx, float v) {
    switch (dtype_f32_f16_bf16) {
    case 2: ((uint16_t *)base)[idx] = fmsa_f32_to_f16(v); break;
    case 3: ((uint16_t *)base)[idx] = fmsa_f32_to_bf16(v); break;
    default: ((float *)base)[idx] = v; break;
    }
}

#endif /* FMSA_HALF_H */
