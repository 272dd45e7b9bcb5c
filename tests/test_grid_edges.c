/*
 * Edge cases of the grid for any backend: empty batch, no keys, no queries,
 * rows with no visible key (O = 0, LSE = -inf, zero gradients), one key, and
 * whole-problem masking.  Like every case, each also checks guard bytes,
 * poisoned outputs and that inputs come back bit-identical.
 */
#include <stddef.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_edges[] = {
    "pass=fwd dtype=f32  b=0 sq=17 sk=17 hq=6 hkv=2 d=64",           /* batch = 0 */
    "pass=bwd dtype=f16  b=0 sq=17 sk=17 hq=6 hkv=2 d=64",
    "pass=fwd dtype=bf16 b=2 sq=17 sk=0  hq=6 hkv=2 d=40",           /* seqlen_k = 0 */
    "pass=bwd dtype=f32  b=2 sq=17 sk=0  hq=6 hkv=2 d=40",
    "pass=fwd dtype=f16  b=2 sq=0  sk=17 hq=6 hkv=1 d=72",           /* seqlen_q = 0 */
    "pass=bwd dtype=bf16 b=2 sq=0  sk=17 hq=6 hkv=1 d=72",
    "pass=fwd dtype=f32  b=2 sq=40 sk=8  hq=6 hkv=2 d=64 causal=1",  /* 32 of 40 rows masked */
    "pass=bwd dtype=f16  b=2 sq=40 sk=8  hq=6 hkv=2 d=64 causal=1",
    "pass=fwd dtype=f16  b=2 sq=33 sk=50 hq=6 hkv=2 d=8  wl=0 wr=-1 causal=0 mask=1",
    "pass=fwd dtype=bf16 b=1 sq=20 sk=20 hq=6 hkv=6 d=40 wl=-1 wr=-1 causal=1 wl=0", /* diagonal only */
    "pass=bwd dtype=f32  b=1 sq=20 sk=20 hq=6 hkv=6 d=40 causal=1 wl=0",
    "pass=fwd dtype=f32  b=3 sq=0  sk=20 hq=6 hkv=2 d=64 varlen=1",  /* no queries at all (varlen) */
    "pass=fwd dtype=f16  b=4 sq=20 sk=0  hq=6 hkv=2 d=64 varlen=1",  /* no keys at all (varlen) */
    "pass=bwd dtype=bf16 b=4 sq=20 sk=0  hq=6 hkv=2 d=64 varlen=1",
    "pass=fwd dtype=f16  b=2 sq=1  sk=1  hq=1 hkv=1 d=8  strided=1",
    "pass=bwd dtype=f16  b=2 sq=1  sk=1  hq=1 hkv=1 d=8  strided=1",
    "pass=fwd dtype=f32  b=2 sq=9  sk=30 hq=6 hkv=2 d=64 page=4 seqused=1 wl=2 wr=0", /* window past used keys */
    "pass=fwd dtype=f32  b=1 sq=16 sk=16 hq=6 hkv=2 d=256 softcap=0.5", /* softcap far below the scores */
    "pass=bwd dtype=f32  b=1 sq=16 sk=16 hq=6 hkv=2 d=256 softcap=0.5",
    /* large scores and single-key rows (issue 18; check_rule.h parts (b), (c)):
     * window (0, 0) and seqlen_k = 1 leave one visible key per row, inputs of
     * amplitude 5 and softcap 30 make scores of hundreds, ALiBi over 700 keys
     * leaves rows dominated by their nearest keys */
    "pass=fwd dtype=f32  b=2 sq=40 sk=40 hq=4 hkv=2 d=64 wl=0 wr=0 amp=5",
    "pass=bwd dtype=f32  b=2 sq=40 sk=40 hq=4 hkv=2 d=64 wl=0 wr=0 amp=5",
    "pass=bwd dtype=f32  b=2 sq=40 sk=40 hq=4 hkv=2 d=256 wl=0 wr=0 amp=3",
    "pass=bwd dtype=bf16 b=2 sq=40 sk=40 hq=4 hkv=2 d=128 wl=0 wr=0 amp=5",
    "pass=bwd dtype=f16  b=2 sq=40 sk=40 hq=4 hkv=2 d=64 wl=0 wr=0",
    "pass=fwd dtype=f32  b=2 sq=33 sk=1  hq=4 hkv=2 d=128 amp=5",
    "pass=bwd dtype=f32  b=2 sq=33 sk=1  hq=4 hkv=2 d=128 amp=5",
    "pass=fwd dtype=f32  b=1 sq=64 sk=64 hq=2 hkv=1 d=64 softcap=30 amp=5",
    "pass=bwd dtype=f32  b=1 sq=64 sk=64 hq=2 hkv=1 d=64 softcap=30 amp=5",
    "pass=bwd dtype=f16  b=1 sq=64 sk=64 hq=2 hkv=1 d=64 softcap=30 amp=5",
    "pass=bwd dtype=f32  b=1 sq=64 sk=64 hq=2 hkv=1 d=128 amp=5 causal=1",
    "pass=bwd dtype=bf16 b=1 sq=64 sk=64 hq=2 hkv=1 d=128 amp=5",
    "pass=fwd dtype=f32  b=1 sq=8  sk=700 hq=4 hkv=2 d=64 alibi=2 amp=5",
    "pass=bwd dtype=f32  b=1 sq=8  sk=700 hq=4 hkv=2 d=64 alibi=1",
    "pass=bwd dtype=f32  b=1 sq=8  sk=700 hq=4 hkv=2 d=64 alibi=2 amp=5",
    /* a negative softmax scale (valid: any finite scale) flips which score is
     * the maximum; the bf16-product forward folded scale into its exponent on
     * the assumption scale > 0 */
    "pass=fwd dtype=bf16 b=1 sq=35 sk=35 hq=1 hkv=1 d=8 scale=-0.3",
    "pass=fwd dtype=bf16 b=2 sq=40 sk=300 hq=2 hkv=1 d=64 scale=-2 causal=1",
    "pass=bwd dtype=bf16 b=2 sq=40 sk=300 hq=2 hkv=1 d=64 scale=-2 causal=1",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_edges / sizeof fmsa_grid_edges[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_edges, FMSA_GRID_COUNT, FMSA_PASS_FORWARD, cases))
        return 2;
    return fmsa_test_suite_main(argc, argv, "grid_edges", cases, FMSA_GRID_COUNT);
}
