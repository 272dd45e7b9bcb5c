/*
 * The AVX-512 kernels the AMX path shares (cpu_kern_avx512.c defines them,
 * cpu_kern_amx.c puts them in its table beside the tile products).  Both
 * files are compiled with AVX-512 flags or not at all (CMakeLists.txt), so
 * these symbols exist exactly when FMSA_CPU_HAVE_AVX512_KERNELS is set.
 */
#ifndef FMSA_CPU_KERN_X86_H
#define FMSA_CPU_KERN_X86_H

#include <stdint.h>

#include "backends/cpu/cpu_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BF16__)
#define FMSA_CPU_HAVE_AVX512_KERNELS 1

void fmsa_cpu_avx512_gemm(int m, int n, int k, const float *a, int64_t rsa, int64_t csa,
                          const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate);
float fmsa_cpu_avx512_row_max(const float *x, int n);
void fmsa_cpu_avx512_row_scale(float *x, int n, float c);
void fmsa_cpu_avx512_tile_softmax(float *s, int rows, int cols, int ld, float *m, float *l,
                                  float *acc, int d, const fmsa_cpu_prefetch *pf);
void fmsa_cpu_avx512_row_bwd_ds(float *s, float *dp, const float *g, int n, float lse2,
                                float delta);
void fmsa_cpu_avx512_row_to_b16(const float *x, int n, uint16_t *dst, int npad);
void fmsa_cpu_avx512_pack_b16_rows(int k, int n, const float *b, int64_t ldb, uint16_t *dst);
void fmsa_cpu_avx512_words_t16(const void *const src[16], int words, int words_pad, uint32_t *out,
                               int64_t ostride);
void fmsa_cpu_avx512_pack_b16_pair_rows(const uint16_t *const src[32], int col0, int n,
                                        uint16_t *out);
float fmsa_cpu_avx512_row_exp2_b16(const float *x, int n, float scale, float m, uint16_t *dst,
                                   int npad, float *xmax);
#endif /* AVX-512F + DQ + BF16 */

#endif /* FMSA_CPU_KERN_X86_H */
