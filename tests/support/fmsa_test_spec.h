/*
 * One test case of the correctness suites: shapes, dtype, pass and every
 * feature, plus the seed of its random inputs.  A spec prints as a one-line
 * "key=value ..." string and parses back, so a failing case can be re-run
 * exactly with `--shape '<string>'` on any backend.
 */
#ifndef FMSA_TEST_SPEC_H
#define FMSA_TEST_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "flashmsa/flashmsa.h"

/// How the optional bit-packed mask is laid out.
enum {
    FMSA_TEST_MASK_NONE = 0,      ///< no mask
    FMSA_TEST_MASK_FULL = 1,      ///< [B, Hq, Sq, W]: one mask per sequence and head
    FMSA_TEST_MASK_BATCH1 = 2,    ///< [1, Hq, Sq, W]: shared by every sequence (shape-1 broadcast)
    FMSA_TEST_MASK_HEADSTRIDE0 = 3, ///< [B, Hq, Sq, W] with head stride 0 (stride broadcast)
};

/// How the optional ALiBi slopes are given.
enum {
    FMSA_TEST_ALIBI_NONE = 0,  ///< no ALiBi
    FMSA_TEST_ALIBI_HEADS = 1, ///< [Hq]
    FMSA_TEST_ALIBI_BATCH = 2, ///< [B, Hq]
};

typedef struct fmsa_test_spec {
    fmsa_pass pass;       ///< forward or backward (all three gradients)
    fmsa_dtype dtype;     ///< f32, f16 or bf16
    int64_t batch;        ///< sequences (0 allowed)
    int64_t sq;           ///< query rows per sequence (varlen: the longest)
    int64_t sk;           ///< keys per sequence (varlen: the longest; paged: keys of sequence 0)
    int64_t hq, hkv, d;   ///< heads and head dim
    int causal;           ///< bottom-right aligned causal
    int64_t wl, wr;       ///< window_left / window_right (-1 = unlimited)
    float softcap;        ///< 0 = off
    int alibi;            ///< FMSA_TEST_ALIBI_*
    int mask;             ///< FMSA_TEST_MASK_*
    int varlen;           ///< cu_seqlens with random lengths incl. empty sequences
    int64_t page;         ///< paged KV page size (0 = not paged; forward only)
    int seqused;          ///< paged: give seqused_k (random per sequence)
    int strided;          ///< non-contiguous layouts (heads-major, padded rows, padded lse)
    int lse;              ///< forward: request and check the LSE
    int det;              ///< backward: deterministic, run twice and require identical bits
    float scale;          ///< softmax scale; 0 = 1/sqrt(d)
    float amp;            ///< standard deviation of q and k; 0 = the default (1.7)
    int nan;              ///< NaN and Inf in K and V of every key no row sees (the mask
                          ///< hides some keys from every row then)
    uint64_t seed;        ///< inputs' seed
    int64_t dv;           ///< value head dim (v, o, dout, dv); 0 = d
    int sinks;            ///< FMSA_TEST_SINKS_*
    int dlse;             ///< backward: give a random dlse
    int dsink;            ///< backward with sinks: request and check dsink
    float climb;          ///< > 0: scores climb by this much (base 2) from each 64-key tile
                          ///< to the one below it (q[.., 0] = 1, k[.., 0] by tile), so a
                          ///< kernel that walks the keys downward meets scores far above its
                          ///< running max; contiguous, not varlen or paged, scale > 0
} fmsa_test_spec;

/// How the optional sink logits are drawn (one per query head).
enum {
    FMSA_TEST_SINKS_NONE = 0,    ///< no desc.sinks
    FMSA_TEST_SINKS_RANDOM = 1,  ///< uniform in [-2, 4]: from negligible to a dominant share
    FMSA_TEST_SINKS_EXTREME = 2, ///< head 0 -inf (no sink), head 1 +12 (the sink takes nearly
                                 ///< all weight), the rest as RANDOM
};

/// The value head dim of a spec (dv, or d when dv = 0).
static inline int64_t fmsa_test_spec_dv(const fmsa_test_spec *s) { return s->dv > 0 ? s->dv : s->d; }

/// A forward f32 case of the given shape with every feature off and lse on.
fmsa_test_spec fmsa_test_spec_make(fmsa_pass pass, fmsa_dtype dtype, int64_t batch, int64_t sq,
                                   int64_t sk, int64_t hq, int64_t hkv, int64_t d);

/// Writes the one-line form ("pass=fwd dtype=f16 b=2 sq=113 ...") into buf.
void fmsa_test_spec_format(const fmsa_test_spec *s, char *buf, size_t len);

/// Parses what fmsa_test_spec_format writes (missing keys keep their
/// defaults).  Returns 0 on success, -1 naming nothing on a malformed string.
int fmsa_test_spec_parse(const char *str, fmsa_test_spec *s);

/// Short dtype name ("f32", "f16", "bf16").
const char *fmsa_test_dtype_name(fmsa_dtype dtype);

#endif /* FMSA_TEST_SPEC_H */
