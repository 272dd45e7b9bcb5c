/*
 * The CPU micro-kernel seam: one const table of function pointers per ISA
 * (BLIS's "context" of kernels, reduced to what attention needs).  The passes
 * (cpu_forward.c, cpu_backward.c) only ever call through the table chosen
 * once per process by fmsa_cpu_kernels_get() (cpu_dispatch.c), so adding an
 * ISA (aarch64 NEON/SVE, AVX10, ...) is one new cpu_kern_<isa>.c that fills
 * a table plus one line in the dispatcher.
 *
 * Every kernel sums in an order fixed by its arguments alone (never by the
 * thread count), so results are bit-identical for any OMP_NUM_THREADS.  They
 * differ between ISAs (vector widths change the order of the few horizontal
 * reductions and the exp2 polynomial), which is why every path is checked on
 * its own against the fp64 reference (FLASHMSA_CPU_KERNEL).
 */
#ifndef FMSA_CPU_KERNELS_H
#define FMSA_CPU_KERNELS_H

#include <stdint.h>

#include "flashmsa/flashmsa.h"

/// The kernel paths, in preference order of the dispatcher (best first).
typedef enum fmsa_cpu_isa {
    FMSA_CPU_ISA_AMX = 0,    ///< AVX-512 fp32 kernels + AMX tdpbf16ps for bf16/fp16 inputs
    FMSA_CPU_ISA_AVX512 = 1, ///< AVX-512F fp32 (+ AVX512-BF16 vdpbf16ps for bf16/fp16 inputs)
    FMSA_CPU_ISA_AVX2 = 2,   ///< AVX2 + FMA fp32
    FMSA_CPU_ISA_NEON = 3,   ///< AArch64 Advanced SIMD fp32 (every arm64 CPU)
    FMSA_CPU_ISA_GENERIC = 4,///< portable C the compiler auto-vectorises (any CPU)
    FMSA_CPU_ISA_SCALAR = 5, ///< the same C with auto-vectorisation off: the scalar baseline
    /// portable C bf16 products in the AMX / AVX512-BF16 panel layout: never
    /// chosen by the dispatcher, only by FLASHMSA_CPU_KERNEL=generic-bf16, so
    /// the 16-bit forward pass can be checked on any CPU
    FMSA_CPU_ISA_GENERIC_BF16 = 6,
    FMSA_CPU_ISA_COUNT = 7
} fmsa_cpu_isa;

/// Prefetches the cache line at addr into L2 (a hint; nothing where the
/// compiler has no builtin).
#if defined(__GNUC__) || defined(__clang__)
#define FMSA_CPU_PREFETCH_L2(addr) __builtin_prefetch((addr), 0, 2)
/// ... the same with the intent to write it (an output row's lines).
#define FMSA_CPU_PREFETCH_L2_W(addr) __builtin_prefetch((addr), 1, 2)
#else
#define FMSA_CPU_PREFETCH_L2(addr) ((void)(addr))
#define FMSA_CPU_PREFETCH_L2_W(addr) ((void)(addr))
#endif /* __GNUC__ */

/// Prefetches slice `part` of `parts` of the `bytes` at base into L2: callers
/// spread the next tile's panels over the rows of the current one.
static inline void fmsa_cpu_prefetch_slice(const void *base, int64_t bytes, int part, int parts) {
    const int64_t lines = (bytes + 63) / 64, step = (lines + parts - 1) / parts;
    const char *b = (const char *)base;
    for (int64_t x = (int64_t)part * step; x < ((int64_t)part + 1) * step && x < lines; ++x)
        FMSA_CPU_PREFETCH_L2(b + x * 64);
}

/// The next key tile's panels, fetched into L2 while the softmax runs: the
/// call's row r fetches slice part0 + r of parts of each, right before its
/// exponentials, so the fetches stay spread over the tile's rows as with the
/// former one-call-per-row step.  (With 16 rows' shares issued before each
/// group, the grouped step ran 0.96-1.05x the speed of the per-row one at the
/// same tiles on the device Xeon, where the grouping alone ran faster in
/// bench/cpu_kernel_bench, which fetches nothing; how much spreading the
/// fetches again recovered in the pass is not isolated.)  k NULL: nothing to
/// fetch.
typedef struct fmsa_cpu_prefetch {
    const void *k, *v; ///< the next tile's K and V panels
    int64_t bytes;     ///< bytes of the K panel
    int64_t vbytes;    ///< bytes of the V panel (Dv may differ from D)
    int part0, parts;  ///< the call's first row within the tile, the tile's rows
} fmsa_cpu_prefetch;

/// One ISA's kernels.  Matrices are fp32 and row-major unless said otherwise.
typedef struct fmsa_cpu_kernels {
    const char *name;    ///< FLASHMSA_CPU_KERNEL value selecting it ("avx2", ...)
    fmsa_cpu_isa isa;    ///< which path this is
    int lanes;           ///< fp32 SIMD lanes (1 scalar, 4 generic / NEON, 8 AVX2, 16 AVX-512)

    /// C[m][n] = (accumulate ? C : 0) + A·B, where A(i, p) = a[i * rsa + p * csa]
    /// (so Aᵀ is the same call with the strides swapped), B(p, j) = b[p * ldb + j]
    /// and C(i, j) = c[i * ldc + j].  Each C element is one sequential sum over
    /// p = 0 .. k-1 starting from C (or 0): the order never depends on m or n.
    /// Any m, n >= 0 (tails are masked); k >= 0.
    void (*gemm)(int m, int n, int k, const float *a, int64_t rsa, int64_t csa, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int accumulate);

    /// max(x[0:n]) (-inf for n == 0 or all -inf).
    float (*row_max)(const float *x, int n);

    /// x[j] *= c for j < n.
    void (*row_scale)(float *x, int n, float c);

    /// Online-softmax step of `rows` score rows (row r at s + r * ld, cols
    /// keys; state m[r], l[r], accumulator row acc + r * d): the row maximum,
    /// the state update, the rescale, and x[j] = exp2(x[j] - m) (exactly 0
    /// where x[j] = -inf) summed in a fixed order (FMSA_CPU_DEFINE_TILE_SOFTMAX
    /// below, the one definition every path instantiates with its own, inlined,
    /// functions); pf (NULL: none) the next tile's panels to fetch meanwhile.
    void (*tile_softmax)(float *s, int rows, int cols, int ld, float *m, float *l, float *acc,
                         int d, const fmsa_cpu_prefetch *pf);

    /// Backward: p = exp2(s[j] - lse2) (0 where s = -inf), s[j] = p and
    /// dp[j] = p * (dp[j] - delta) * (g ? g[j] : 1), with dp[j] = 0 where p = 0.
    /// lse2 is finite (the caller handles fully masked rows).
    void (*row_bwd_ds)(float *s, float *dp, const float *g, int n, float lse2, float delta);

    /* ---- 16-bit products (optional: NULL = bf16 inputs are staged in fp32) ----
     * The forward pass of bf16 inputs (cpu_forward_b16.c) runs S = Q·Kᵀ and
     * acc += P·V as bf16 x bf16 -> fp32 products (AMX tdpbf16ps, AVX512-BF16
     * vdpbf16ps).  Q, K, V are exact in bf16; P is rounded to bf16 before
     * P·V, as the naive same-precision implementation rounds P. */

    /// Called once at the start of every work item that uses gemm_b16 on this
    /// thread (AMX: loads the tile configuration, which is per-thread state
    /// another library in the process may have changed).  May be NULL.
    void (*b16_begin)(void);

    /// C[m][n] = (accumulate ? C : 0) + A·B in fp32, A bf16 row-major (a[i * lda
    /// + p]), B the first k rows of a panel written by fmsa_cpu_pack_b16 for kb
    /// >= k rows and n columns (kb sets the panel's block stride).  m a
    /// multiple of 16, n a multiple of 16, k and kb multiples of 32 (callers
    /// pad with zeros).  Each C element sums the k products in an order fixed
    /// by k.
    void (*gemm_b16)(int m, int n, int k, const uint16_t *a, int64_t lda, const uint16_t *bp,
                     int kb, float *c, int64_t ldc, int accumulate);

    /// dst[j] = bf16(exp2(x[j] * scale - m)) for j < n (0 where x[j] = -inf; one
    /// rounding for x * scale - m), dst[j] = 0 for n <= j < npad; returns the
    /// fp32 sum of the unrounded exp2 values in a fixed order (the softmax
    /// denominator, as the naive implementation normalises before rounding
    /// P).  m is finite, scale > 0 (it lets the softmax scale ride on the
    /// exponent instead of costing a pass over S).  When xmax is not NULL it
    /// also returns max(x[0:n]) (-inf for n == 0 or all -inf) from the same
    /// pass, so the caller can run the exponentials against a maximum it
    /// already has and check it afterwards (cpu_forward_b16.c).
    float (*row_exp2_b16)(const float *x, int n, float scale, float m, uint16_t *dst, int npad,
                          float *xmax);

    /// Backward on 16-bit products (cpu_backward_b16.c), both optional (NULL =
    /// plain C): dst[j] = bf16(x[j]) (round to nearest even) for j < n, 0 for
    /// n <= j < npad ...
    void (*row_to_b16)(const float *x, int n, uint16_t *dst, int npad);
    /// ... and fmsa_cpu_pack_b16(k, n, b, ldb, 1, dst): a row-major fp32 tile
    /// (P or dS, k query rows x n keys) into the panel layout below.
    void (*pack_b16_rows)(int k, int n, const float *b, int64_t ldb, uint16_t *dst);
    /// Panels straight from K / V rows (cpu_pack.c; both optional: NULL =
    /// plain C there).  Sixteen rows transposed as 32-bit words (a pair of
    /// bf16 elements: keys as the columns of a bf16 B panel; one fp32
    /// element: the fp32 Kᵀ tiles): out[w * ostride + r] = word w of src[r]
    /// for w < words, 0 for words <= w < words_pad or src[r] == NULL; rows w
    /// >= words_pad are not written.
    void (*words_t16)(const void *const src[16], int words, int words_pad, uint32_t *out,
                      int64_t ostride);
    /// Keys as the rows of B, 16 pair rows of one 16-column block (1 KiB):
    /// out[r * 32 + 2 * i + e] = src[2 r + e][col0 + i] for col0 + i < n,
    /// else 0 (a NULL row is zeros).
    void (*pack_b16_pair_rows)(const uint16_t *const src[32], int col0, int n, uint16_t *out);
} fmsa_cpu_kernels;

/*
 * The bf16 B-panel layout shared by every gemm_b16 (the AMX "VNNI" layout):
 * columns in blocks of 16, each block k/2 rows of 16 (even, odd) pairs,
 *   dst[((j / 16) * kp / 2 + p / 2) * 32 + (j % 16) * 2 + p % 2] = bf16(B(p, j)),
 * kp = k rounded up to 32, zero beyond k and n.  So one row of pairs is one
 * zmm of vdpbf16ps, and 16 consecutive rows (1 KiB, contiguous) are one AMX
 * B tile: tdpbf16ps multiplies A's (k, k+1) columns by exactly these pairs.
 */
/// uint16 elements fmsa_cpu_pack_b16 writes for a k x n panel (k rounded up to 32, n to 16).
static inline int64_t fmsa_cpu_b16_panel_elems(int k, int n) {
    return (int64_t)((k + 31) / 32 * 32) * (int64_t)((n + 15) / 16 * 16);
}

/// Packs B(p, j) = b[p * rs + j * cs] (fp32, k x n, rounded to nearest even
/// bf16: exact for values that came from bf16) into the layout above.
void fmsa_cpu_pack_b16(int k, int n, const float *b, int64_t rs, int64_t cs, uint16_t *dst);

/*
 * The forward's online-softmax step of a score tile, defined once for every
 * kernel path from that path's ROW_MAX, ROW_SCALE and ROW_EXP2_SUM (inline
 * functions where the path has them).  Per row: mx = max(x[0:n]); when mx =
 * -inf (every key masked) x[0:n] = 0 and (m, l, acc) stay (the update then
 * keeps m and gives c = 1); else the update of fmsa_softmax_update with the
 * path's exp2 (fmsa_softmax_update_exponent), x[j] = exp2(x[j] - m'),
 * l = l * c + sum_j x[j], acc[0:d] *= c when c != 1.  The rows go in groups of FMSA_CPU_SOFTMAX_GROUP, a phase at a time
 * (all maxima, all updates, then each row's exponentials), so the rows'
 * latency chains (horizontal max -> exp2 of c -> exponentials -> horizontal
 * sum) are independent within a phase and overlap in the core; and c takes the
 * paths' inline exp2 (cpu_exp2.h) instead of a libm call.  One call per row
 * ran 0.72 ns per score on the device Xeon at 64 keys against 0.37 at 128
 * (bench/cpu_kernel_bench): a fixed cost of ~60 cycles per row.  Grouped,
 * the same bench read 0.19 against 0.22 ns/score at 64 keys and 0.14 against
 * 0.16 at 128 on Zen 5, and 0.35-0.57 against 0.50-0.70 (64) and 0.31-0.41
 * against 0.36-0.43 (128) on the Xeon in three alternating rounds; its share
 * of the whole pass's gain on the Xeon is not isolated (bench/RESULTS.md,
 * fourth session).  Each row's arithmetic is unchanged by the grouping.  The
 * including file includes common/fmsa_softmax.h and backends/cpu/cpu_exp2.h.
 */
#define FMSA_CPU_SOFTMAX_GROUP 16
#define FMSA_CPU_DEFINE_TILE_SOFTMAX(LINKAGE, NAME, ROW_MAX, ROW_SCALE, ROW_EXP2_SUM)           \
    LINKAGE void NAME(float *s, int rows, int cols, int ld, float *m, float *l, float *acc,   \
                      int d, const fmsa_cpu_prefetch *pf) {                                    \
        for (int r0 = 0; r0 < rows; r0 += FMSA_CPU_SOFTMAX_GROUP) {                            \
            const int nr = rows - r0 < FMSA_CPU_SOFTMAX_GROUP ? rows - r0                      \
                                                              : FMSA_CPU_SOFTMAX_GROUP;        \
            float mx[FMSA_CPU_SOFTMAX_GROUP], c[FMSA_CPU_SOFTMAX_GROUP];                       \
            for (int r = 0; r < nr; ++r) mx[r] = ROW_MAX(s + (int64_t)(r0 + r) * ld, cols);    \
            for (int r = 0; r < nr; ++r) { /* fmsa_softmax_update with the inline exp2 */     \
                const float e = fmsa_softmax_update_exponent(&m[r0 + r], mx[r]);               \
                c[r] = e == 0.0f ? 1.0f : fmsa_cpu_exp2(e);                                    \
            }                                                                                  \
            for (int r = 0; r < nr; ++r) {                                                     \
                float *x = s + (int64_t)(r0 + r) * ld;                                         \
                if (pf && pf->k) {                                                             \
                    fmsa_cpu_prefetch_slice(pf->k, pf->bytes, pf->part0 + r0 + r, pf->parts);  \
                    fmsa_cpu_prefetch_slice(pf->v, pf->vbytes, pf->part0 + r0 + r, pf->parts); \
                }                                                                              \
                if (mx[r] == FMSA_NEG_INF) {                                                   \
                    for (int j = 0; j < cols; ++j) x[j] = 0.0f;                                \
                    continue;                                                                  \
                }                                                                              \
                if (c[r] != 1.0f) {                                                            \
                    l[r0 + r] *= c[r];                                                         \
                    ROW_SCALE(acc + (int64_t)(r0 + r) * d, d, c[r]);                           \
                }                                                                              \
                l[r0 + r] += ROW_EXP2_SUM(x, cols, m[r0 + r]);                                 \
            }                                                                                  \
        }                                                                                      \
    }

/// The per-ISA tables (NULL where this build or architecture lacks the path).
const fmsa_cpu_kernels *fmsa_cpu_kernels_generic(void);
const fmsa_cpu_kernels *fmsa_cpu_kernels_scalar(void);
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx2(void);
const fmsa_cpu_kernels *fmsa_cpu_kernels_neon(void);
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512(void);
const fmsa_cpu_kernels *fmsa_cpu_kernels_amx(void);
/// AVX-512F without the AVX512-BF16 products (Skylake-SP, Cascade Lake without BF16).
const fmsa_cpu_kernels *fmsa_cpu_kernels_avx512_nobf16(void);
const fmsa_cpu_kernels *fmsa_cpu_kernels_generic_bf16(void);

/// The kernels this process runs: the best path the CPU supports, or the one
/// FLASHMSA_CPU_KERNEL=amx|avx512|avx2|neon|generic|scalar|generic-bf16 names.  Decided once
/// (pthread_once) and logged at INFO.  Fails with FMSA_ERR_NOT_SUPPORTED,
/// naming the path, when the variable asks for one this CPU or build lacks,
/// and with FMSA_ERR_INVALID_ARGUMENT for an unknown name.
fmsa_status fmsa_cpu_kernels_get(const fmsa_cpu_kernels **out);

/// 1 when this CPU (and OS, for AMX tile state) can run path isa.
int fmsa_cpu_isa_usable(fmsa_cpu_isa isa);

/// Name of a path ("amx", ..., "scalar").
const char *fmsa_cpu_isa_name(fmsa_cpu_isa isa);

#endif /* FMSA_CPU_KERNELS_H */
