/*
 * Panel packing (dtype conversion + layout); see cpu_pack.h.
 */
#include "backends/cpu/cpu_pack.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_tile.h"
#include "common/fmsa_half.h"

void fmsa_cpu_pack_rows(const fmsa_problem *p, const fmsa_view4 *v, const fmsa_seq *seq,
                        int64_t b, int64_t h, int is_key, int64_t row0, int n, float scale,
                        float *dst) {
    const int64_t D = fmsa_cpu_view_dim(p, v);
    const char *base = fmsa_view4_host(v);
    for (int r = 0; r < n; ++r) {
        const int64_t off = is_key ? fmsa_problem_k_offset(p, v, seq, b, row0 + r, h)
                                   : fmsa_problem_q_offset(v, seq, row0 + r, h);
        fmsa_cpu_row_load(base, p->dtype, off, D, scale, dst + (int64_t)r * D);
    }
}

void fmsa_cpu_pack_keys_t(const fmsa_cpu_kernels *kern, const fmsa_problem *p,
                          const fmsa_view4 *v, const fmsa_seq *seq, int64_t b, int64_t hk,
                          int64_t row0, int n, int ld, float *dst) {
    const int64_t D = fmsa_cpu_view_dim(p, v);
    const char *base = fmsa_view4_host(v);
    float rowbuf[8][FMSA_HEAD_DIM_MAX];
    if (p->dtype == FMSA_DTYPE_F32 && kern->words_t16 && ld % 16 == 0) {
        /* fp32 rows are the words themselves: 16 keys per vector transpose,
         * the key columns past n (to ld) come out as zeros */
        for (int c0 = 0; c0 < ld; c0 += 16) {
            const void *src[16];
            for (int c = 0; c < 16; ++c)
                src[c] = c0 + c < n ? (const float *)base + fmsa_problem_k_offset(p, v, seq, b,
                                                                               row0 + c0 + c, hk)
                                    : NULL;
            kern->words_t16(src, (int)D, (int)D, (uint32_t *)(dst + c0), ld);
        }
        return;
    }
    /* 8 keys at a time through a small row buffer: each source row is read
     * contiguously and each destination row gets 8 adjacent floats (one
     * 32-byte run) instead of D scattered single stores per key */
    for (int c0 = 0; c0 < n; c0 += 8) {
        const int nc = n - c0 < 8 ? n - c0 : 8;
        for (int c = 0; c < nc; ++c)
            fmsa_cpu_row_load(base, p->dtype,
                              fmsa_problem_k_offset(p, v, seq, b, row0 + c0 + c, hk), D, 1.0f,
                              rowbuf[c]);
        for (int64_t d = 0; d < D; ++d) {
            float *out = dst + d * ld + c0;
            for (int c = 0; c < nc; ++c) out[c] = rowbuf[c][d];
        }
    }
    for (int64_t d = 0; d < D; ++d)
        for (int c = n; c < ld; ++c) dst[d * ld + c] = 0.0f;
}

void fmsa_cpu_pack_b16(int k, int n, const float *b, int64_t rs, int64_t cs, uint16_t *dst) {
    const int kp = (k + 31) / 32 * 32, np = (n + 15) / 16 * 16;
    /* destination order: the panel is written once, sequentially; the source
     * is a staged fp32 tile that sits in L1/L2 */
    for (int jb = 0; jb < np / 16; ++jb)
        for (int p = 0; p < kp; p += 2) {
            uint16_t *out = dst + ((int64_t)jb * (kp / 2) + p / 2) * 32;
            for (int jj = 0; jj < 16; ++jj) {
                const int j = jb * 16 + jj;
                const int in = j < n;
                out[2 * jj] = in && p < k ? fmsa_f32_to_bf16(b[(int64_t)p * rs + j * cs]) : 0;
                out[2 * jj + 1] =
                    in && p + 1 < k ? fmsa_f32_to_bf16(b[(int64_t)(p + 1) * rs + j * cs]) : 0;
            }
        }
}

/// Source row r (key row0 + r of view v) as bf16, or NULL past n.
static const uint16_t *cpu_b16_src_row(const fmsa_problem *p, const fmsa_view4 *v,
                                       const fmsa_seq *seq, int64_t b, int64_t hk, int64_t row0,
                                       int r, int n) {
    if (r >= n) return NULL;
    return (const uint16_t *)fmsa_view4_host(v) + fmsa_problem_k_offset(p, v, seq, b, row0 + r, hk);
}

/// The portable form of kern->words_t16 (cpu_kernels.h).
static void cpu_words_t16(const void *const src[16], int words, int words_pad, uint32_t *out,
                          int64_t ostride) {
    /* one output row per word: sequential writes, 16 sequential reads */
    for (int w = 0; w < words_pad; ++w, out += ostride)
        for (int r = 0; r < 16; ++r) {
            uint32_t x = 0;
            if (src[r] && w < words) memcpy(&x, (const char *)src[r] + 4 * (size_t)w, 4);
            out[r] = x;
        }
}

/// kern->words_t16 where the path has it, else the C form.
static void cpu_transpose16(const fmsa_cpu_kernels *kern, const void *const src[16], int words,
                            int words_pad, uint32_t *out, int64_t ostride) {
    if (kern->words_t16) kern->words_t16(src, words, words_pad, out, ostride);
    else cpu_words_t16(src, words, words_pad, out, ostride);
}

/// The portable form of kern->pack_b16_pair_rows (cpu_kernels.h).
static void cpu_b16_pair_rows(const uint16_t *const src[32], int col0, int n, uint16_t *out) {
    for (int r = 0; r < 16; ++r, out += 32)
        for (int i = 0; i < 16; ++i) {
            const int d = col0 + i;
            out[2 * i] = src[2 * r] && d < n ? src[2 * r][d] : 0;
            out[2 * i + 1] = src[2 * r + 1] && d < n ? src[2 * r + 1][d] : 0;
        }
}

void fmsa_cpu_pack_b16_cols16(const fmsa_cpu_kernels *kern, const uint16_t *const src[16], int D,
                              uint16_t *out) {
    const int kp = (D + 31) / 32 * 32;
    cpu_transpose16(kern, (const void *const *)src, D / 2, kp / 2, (uint32_t *)out, 16);
}

void fmsa_cpu_pack_b16_keys_as_cols(const fmsa_cpu_kernels *kern, const fmsa_problem *p,
                                    const fmsa_view4 *v, const fmsa_seq *seq, int64_t b,
                                    int64_t hk, int64_t row0, int n, uint16_t *dst) {
    const int D = (int)fmsa_cpu_view_dim(p, v), kp = (D + 31) / 32 * 32, np = (n + 15) / 16 * 16;
    /* B(d, j) = row j's element d: the (d, d+1) pair of a key is one 32-bit
     * word of its source row, so a 16-key block is a transpose of words */
    for (int jb = 0; jb < np / 16; ++jb) {
        const uint16_t *src[16];
        for (int jj = 0; jj < 16; ++jj)
            src[jj] = cpu_b16_src_row(p, v, seq, b, hk, row0, jb * 16 + jj, n);
        fmsa_cpu_pack_b16_cols16(kern, src, D, dst + (int64_t)jb * (kp / 2) * 32);
    }
}

void fmsa_cpu_pack_b16_keys_as_rows(const fmsa_cpu_kernels *kern, const fmsa_problem *p,
                                    const fmsa_view4 *v, const fmsa_seq *seq, int64_t b,
                                    int64_t hk, int64_t row0, int n, uint16_t *dst) {
    const int D = (int)fmsa_cpu_view_dim(p, v), kp = (n + 31) / 32 * 32, np = (D + 15) / 16 * 16;
    /* B(r, d) = row r's element d: pair row r / 2 interleaves rows r and r + 1.
     * 16 pair rows (32 source rows, in L1) per step, one 16-column block at a
     * time: 1 KiB of consecutive writes per call, where one pair row at a
     * time wrote 64 bytes into every block (8 KiB apart at 256 keys) */
    for (int q0 = 0; q0 < kp / 2; q0 += 16) {
        const uint16_t *src[32];
        for (int i = 0; i < 32; ++i)
            src[i] = cpu_b16_src_row(p, v, seq, b, hk, row0, 2 * q0 + i, n);
        for (int db = 0; db < np / 16; ++db) {
            uint16_t *out = dst + ((int64_t)db * (kp / 2) + q0) * 32;
            if (kern->pack_b16_pair_rows) kern->pack_b16_pair_rows(src, db * 16, D, out);
            else cpu_b16_pair_rows(src, db * 16, D, out);
        }
    }
}
