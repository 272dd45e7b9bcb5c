/*
 * Packed panels of the CPU passes (their work order: cpu_sched.h).
 *
 * K and V are converted to fp32 and laid out for the micro-kernels once per
 * (sequence, kv head) "slot" and then read by every query tile and every
 * query head of the GQA group: K transposed in key tiles ([tile][D][Bc], the
 * B operand of S = Q·Kᵀ and dP = dO·Vᵀ, contiguous so the kernel's B sliver
 * never strides across the tensor's heads) and row panels ([key][D], the B
 * operand of P·V and dS·K).  Slots are packed a chunk at a time so memory
 * stays bounded (FMSA_CPU_PANEL_BUDGET) whatever the problem size.
 */
#ifndef FMSA_CPU_PACK_H
#define FMSA_CPU_PACK_H

#include <stdint.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_sched.h"
#include "common/problem.h"

/// Bytes of packed panels one pass keeps at a time (at least one slot): 64 MiB
/// holds 8 heads of an 8k-token fp32 d=128 forward, enough items for 16+ threads.
#define FMSA_CPU_PANEL_BUDGET ((size_t)64 << 20)

/// dst[r * D + d] = scale * row r (r < n) of a [b, s, h, d] view, rows taken from
/// position row0 of sequence seq, head h; keys (is_key) follow the block table.
void fmsa_cpu_pack_rows(const fmsa_problem *p, const fmsa_view4 *v, const fmsa_seq *seq,
                        int64_t b, int64_t h, int is_key, int64_t row0, int n, float scale,
                        float *dst);

/// dst[d * ld + c] = key row c (c < n) of view v, transposed; columns [n, ld) zeroed.
void fmsa_cpu_pack_keys_t(const fmsa_cpu_kernels *kern, const fmsa_problem *p,
                          const fmsa_view4 *v, const fmsa_seq *seq, int64_t b, int64_t hk,
                          int64_t row0, int n, int ld, float *dst);

/// One 16-column block (k = D rounded to 32) of a bf16 B panel whose
/// column j is the bf16 row src[j] (NULL: zeros): kern->words_t16 or C.
void fmsa_cpu_pack_b16_cols16(const fmsa_cpu_kernels *kern, const uint16_t *const src[16], int D,
                              uint16_t *out);

/*
 * bf16 inputs straight into the 16-bit panel layout of cpu_kernels.h (no fp32
 * staging, no rounding: the values are copied).  Rows row0 .. row0 + n - 1 of
 * key-shaped view v (K or V: block table and varlen followed), p->dtype bf16.
 */
/// ... as the columns of B: B(d, j) = row j (k = D, n keys), as S = Q·Kᵀ reads K.
void fmsa_cpu_pack_b16_keys_as_cols(const fmsa_cpu_kernels *kern, const fmsa_problem *p,
                                    const fmsa_view4 *v, const fmsa_seq *seq, int64_t b,
                                    int64_t hk, int64_t row0, int n, uint16_t *dst);
/// ... as the rows of B: B(j, d) = row j (k = n keys, n = D), as P·V reads V.
void fmsa_cpu_pack_b16_keys_as_rows(const fmsa_cpu_kernels *kern, const fmsa_problem *p,
                                    const fmsa_view4 *v, const fmsa_seq *seq, int64_t b,
                                    int64_t hk, int64_t row0, int n, uint16_t *dst);

#endif /* FMSA_CPU_PACK_H */
