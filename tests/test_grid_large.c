/*
 * The long sequences of the grid: 1023 x 1024 and 1024 x 1023 (one short of
 * and one past a power of two, so tile remainders on both axes), and decode
 * (one query against 2048+ keys, the split-KV regime).  The fp64 reference of
 * these costs seconds, so heads are few and each row carries several features.
 */
#include <stddef.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_large[] = {
    "pass=fwd dtype=f16  b=1 sq=1023 sk=1024 hq=1 hkv=1 d=256 causal=1",
    "pass=fwd dtype=bf16 b=1 sq=1024 sk=1023 hq=2 hkv=1 d=128 wl=256 wr=64 softcap=5",
    "pass=fwd dtype=f32  b=1 sq=1023 sk=1024 hq=2 hkv=2 d=64  alibi=1 mask=1 strided=1",
    "pass=fwd dtype=f32  b=2 sq=1    sk=2100 hq=6 hkv=1 d=128",
    "pass=fwd dtype=f16  b=3 sq=1    sk=2048 hq=6 hkv=2 d=64  page=64 seqused=1 alibi=1",
    "pass=fwd dtype=bf16 b=2 sq=1    sk=4099 hq=6 hkv=2 d=136 softcap=10 mask=2",
    "pass=bwd dtype=bf16 b=1 sq=1023 sk=1024 hq=2 hkv=1 d=64  causal=1 softcap=5",
    "pass=bwd dtype=f16  b=1 sq=1024 sk=1023 hq=1 hkv=1 d=256 wl=128 alibi=1",
    "pass=bwd dtype=f32  b=1 sq=1023 sk=1024 hq=1 hkv=1 d=72  mask=1 strided=1",
    "pass=bwd dtype=f32  b=2 sq=1    sk=2100 hq=6 hkv=2 d=136",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_large / sizeof fmsa_grid_large[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_large, FMSA_GRID_COUNT, FMSA_PASS_FORWARD, cases))
        return 2;
    return fmsa_test_suite_main(argc, argv, "grid_large", cases, FMSA_GRID_COUNT);
}
