/*
 * Scores that climb far above a kernel's running maximum on interior key
 * tiles (spec climb: each 64-key tile c base-2 units above the one after it,
 * so a kernel walking the keys from the last tile down meets a higher tile
 * every time).  c = 160 overflows 2^(s - m) in fp32 for any P taken against
 * the stale m; c = 20 stays finite but far past the lazy rescale's 2^8.  The
 * CUDA d128 FAST kernel takes interior tiles without the row maximum and must
 * repeat such a tile with the full softmax (fmsa_cuda_fwd_softmax_stale);
 * both head dims, both 16-bit dtypes, causal (the first tile is an edge) and
 * not (sk = 512: the first tile is interior, with m = -inf), one key tile
 * whose top is past the sequence end (sk = 300).  Judged as any other case,
 * against the fp64 reference under the rule.
 */
#include <stddef.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_climb[] = {
    "pass=fwd dtype=bf16 b=2 sq=200 sk=512 hq=2 hkv=1 d=128 climb=160",
    "pass=fwd dtype=f16  b=2 sq=200 sk=512 hq=2 hkv=1 d=128 climb=160",
    "pass=fwd dtype=bf16 b=1 sq=300 sk=300 hq=2 hkv=1 d=128 climb=160 causal=1",
    "pass=fwd dtype=f16  b=1 sq=300 sk=300 hq=2 hkv=1 d=128 climb=160 causal=1",
    "pass=fwd dtype=bf16 b=1 sq=130 sk=300 hq=2 hkv=2 d=128 climb=160",
    "pass=fwd dtype=bf16 b=2 sq=200 sk=512 hq=2 hkv=1 d=128 climb=20",
    "pass=fwd dtype=f16  b=1 sq=300 sk=300 hq=2 hkv=1 d=128 climb=20 causal=1",
    "pass=fwd dtype=bf16 b=2 sq=200 sk=640 hq=2 hkv=1 d=64 climb=160",
    "pass=fwd dtype=f16  b=2 sq=200 sk=640 hq=2 hkv=1 d=64 climb=160",
    "pass=fwd dtype=bf16 b=1 sq=400 sk=400 hq=2 hkv=1 d=64 climb=160 causal=1",
    "pass=fwd dtype=f16  b=1 sq=400 sk=400 hq=2 hkv=1 d=64 climb=160 causal=1",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_climb / sizeof fmsa_grid_climb[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_climb, FMSA_GRID_COUNT, FMSA_PASS_FORWARD, cases))
        return 2;
    return fmsa_test_suite_main(argc, argv, "grid_climb", cases, FMSA_GRID_COUNT);
}
