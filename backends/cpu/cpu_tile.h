/*
 * fp32 tile helpers of the CPU backend: row loads/stores with dtype
 * conversion and the score tile (scale -> softcap -> ALiBi -> masks, exactly
 * as flashmsa.h defines it, through the shared fmsa_score.h helpers).  The
 * matrix products themselves are the per-ISA micro-kernels of cpu_kernels.h.
 *
 * Tiles are dense row-major fp32 with a leading dimension of block_n for
 * score-shaped tiles ([rows][ld]) and head_dim for row tiles ([rows][D]).  K
 * is kept transposed ([D][ld]) so S = Q·Kᵀ is a plain A·B product whose B
 * rows are unit-stride vectors.
 */
#ifndef FMSA_CPU_TILE_H
#define FMSA_CPU_TILE_H

#include <stdint.h>

#include "backends/cpu/cpu_kernels.h"
#include "common/problem.h"

/// Everything the score transform needs for one (sequence, query head).
typedef struct fmsa_cpu_score {
    int64_t sq, sk;            ///< this sequence's query and key counts
    int64_t window_left;       ///< -1 = unlimited
    int64_t window_right;      ///< -1 = unlimited (causal folded in as 0)
    int64_t head_dim;          ///< D
    float dot_scale;           ///< multiplies q·k: gives s2 directly (no softcap) or s (softcap)
    float softcap;             ///< > 0: s = softcap * tanh(s / softcap), then s2 = s * log2(e)
    int has_alibi;             ///< ALiBi bias applied
    float alibi_slope;         ///< slope of this (sequence, head), natural-log units
    int64_t alibi_offset;      ///< added to ALiBi's distance (fmsa_problem.alibi_offset)
    const uint8_t *mask;       ///< mask bytes of row 0 of this (sequence, head); NULL = none
    int64_t mask_row_stride;   ///< bytes between mask rows
} fmsa_cpu_score;

/// Prepares the score transform of sequence b (resolved as seq), query head h.
/// dot_scale is what the caller did not fold into its Q tile (see fmsa_cpu_score).
void fmsa_cpu_score_init(fmsa_cpu_score *sc, const fmsa_problem *p, const fmsa_seq *seq,
                         int64_t b, int64_t h, float dot_scale);

/// 1 when some (i, j) with i in [i0, i0+rows), j in [j0, j0+cols) is visible
/// (window and bit mask); lets callers skip a tile before loading it.
int fmsa_cpu_tile_visible(const fmsa_cpu_score *sc, int64_t i0, int rows, int64_t j0, int cols);

/// Keys hidden from every row: zeroes, among the keys j0 .. j0 + cols - 1 of
/// sequence seq (b) just packed for kv head hk, those that no query row of any
/// head of the group sees (window and bit mask), in a row panel (rows: key c
/// at rows + c * width) and/or a transposed tile (kt: kt[d * ld + c], width
/// rows d); width is D for K and Dv for V; NULL skips one.  Their scores are -inf for every row, so their P and dS are 0, but a
/// NaN or Inf in their K or V would still reach the outputs through 0 * NaN
/// in P·V, dP = dO·Vᵀ and dS·K; zeros leave every finite result bit for bit
/// (the terms were +-0 already).  Returns how many there are (rows = kt =
/// NULL: only counts).
int fmsa_cpu_dead_keys_zero(const fmsa_problem *p, const fmsa_seq *seq, int64_t b, int64_t hk,
                            int64_t j0, int cols, int64_t width, float *rows, float *kt, int ld);

/// s[r][c] = base-2 score of query i0+r against key j0+c (-inf where masked),
/// from the Q rows q (rows of D, ldq apart) and the transposed K tile kt
/// ([D][ld]), the product through kern->gemm.  With g != NULL, also g[r][c] =
/// d softcap / d s (0 where masked, 1 without softcap).
void fmsa_cpu_score_tile(const fmsa_cpu_kernels *kern, const fmsa_cpu_score *sc, const float *q,
                         int64_t ldq, int rows, int64_t i0, const float *kt, int cols, int64_t j0,
                         int ld, float *s, float *g);

/// The transform half of fmsa_cpu_score_tile: s[r][c] holds the raw products
/// q·k of query i0+r and key j0+c and becomes the base-2 score (-inf where
/// masked); g as there.
void fmsa_cpu_score_apply(const fmsa_cpu_score *sc, int rows, int64_t i0, int cols, int64_t j0,
                          int ld, float *s, float *g);

/// dst[0:D] = scale * row (converted to fp32) of the dtype buffer base at element offset off.
void fmsa_cpu_row_load(const char *base, fmsa_dtype dtype, int64_t off, int64_t D, float scale,
                       float *dst);

/// dst[d * ld + col] = row[d] for d < D: one key row into a transposed tile.
void fmsa_cpu_row_load_t(const char *base, fmsa_dtype dtype, int64_t off, int64_t D, int ld,
                         int col, float *dst);

/// Stores scale * src[0:D] at element offset off of a dtype buffer (round to nearest even).
void fmsa_cpu_row_store(char *base, fmsa_dtype dtype, int64_t off, int64_t D, float scale,
                        const float *src);

/// fmsa_cpu_row_store through the kernel path's vector conversion where it has
/// one for bf16 (kern->row_scale, kern->row_to_b16: the same products, the
/// same nearest-even rounding), scaling row in place, so row must be scratch
/// that is not read again; elsewhere exactly fmsa_cpu_row_store.
void fmsa_cpu_row_store_kern(const fmsa_cpu_kernels *kern, char *base, fmsa_dtype dtype,
                             int64_t off, int64_t D, float scale, float *row);

/// Zeroes n floats.
void fmsa_cpu_zero(float *dst, int64_t n);

#endif /* FMSA_CPU_TILE_H */
