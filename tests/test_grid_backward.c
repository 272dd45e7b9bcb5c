/*
 * Backward correctness grid (dQ, dK, dV) for any backend: the same covering
 * design as test_grid_forward.c over every feature the backward supports
 * (paged KV is forward-only).  det=1 rows also require bit-identical results
 * from two runs.
 */
#include <stddef.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_backward[] = {
    "dtype=f32  b=1 sq=1   sk=1   hq=1 hkv=1 d=8",
    "dtype=f16  b=2 sq=1   sk=17  hq=6 hkv=2 d=40",
    "dtype=bf16 b=2 sq=17  sk=1   hq=6 hkv=1 d=64",
    "dtype=f16  b=2 sq=17  sk=1   hq=6 hkv=2 d=8   causal=1",   /* fully masked rows */
    "dtype=f32  b=2 sq=1   sk=17  hq=6 hkv=6 d=128 wl=3",
    "dtype=bf16 b=2 sq=17  sk=17  hq=6 hkv=1 d=128 wl=4 wr=0 mask=3",
    "dtype=f32  b=2 sq=113 sk=203 hq=6 hkv=2 d=72  causal=1",
    "dtype=f16  b=1 sq=203 sk=113 hq=6 hkv=6 d=128 causal=1 strided=1",
    "dtype=bf16 b=2 sq=113 sk=203 hq=6 hkv=1 d=136 wl=32 wr=16",
    "dtype=f32  b=1 sq=203 sk=113 hq=2 hkv=2 d=256 softcap=5",
    "dtype=f16  b=2 sq=64  sk=128 hq=6 hkv=2 d=8   alibi=1 causal=1 det=1",
    "dtype=bf16 b=3 sq=113 sk=203 hq=6 hkv=2 d=40  mask=1",
    "dtype=f32  b=4 sq=113 sk=203 hq=6 hkv=2 d=64  varlen=1",
    "dtype=f16  b=4 sq=64  sk=100 hq=6 hkv=1 d=72  varlen=1 causal=1 softcap=5 strided=1",
    "dtype=f32  b=2 sq=203 sk=113 hq=6 hkv=2 d=136 strided=1 alibi=2 mask=2",
    "dtype=f16  b=1 sq=113 sk=203 hq=6 hkv=6 d=256 causal=1 softcap=10",
    "dtype=f32  b=1 sq=113 sk=203 hq=6 hkv=1 d=136 causal=1 wl=48 softcap=5 alibi=1 mask=1 det=1",
    "dtype=f16  b=5 sq=40  sk=60  hq=6 hkv=2 d=40  varlen=1 alibi=2 wl=10 wr=10",
    "dtype=bf16 b=2 sq=64  sk=64  hq=6 hkv=2 d=72  scale=0.5",
    "dtype=f32  b=1 sq=203 sk=203 hq=6 hkv=1 d=8   causal=1 softcap=3 strided=1",
    "dtype=bf16 b=3 sq=113 sk=203 hq=6 hkv=2 d=256 varlen=1 mask=1",
    "dtype=bf16 b=2 sq=113 sk=203 hq=6 hkv=2 d=64  wl=0 wr=0",
    "dtype=f16  b=3 sq=203 sk=113 hq=6 hkv=6 d=40  varlen=1 mask=1 strided=1 wr=7",
    /* whole 16-row query groups at the exact dims of the Hopper (wgmma) kernels, without
       the features they leave to the mma.sync rows: on an H100 / H200 these run
       fmsa_cuda_bwd_wg*.cu by the pick's rule (test_cuda_host bwd_pick_hopper checks
       it); tails of their query and key tiles, GQA, causal offsets, windows */
    "dtype=bf16 b=2 sq=144 sk=200 hq=4 hkv=2 d=64  causal=1",
    "dtype=f16  b=1 sq=208 sk=130 hq=4 hkv=1 d=128",
    "dtype=bf16 b=1 sq=96  sk=160 hq=4 hkv=2 d=256 wl=40 wr=0",
    "dtype=f16  b=2 sq=80  sk=80  hq=2 hkv=2 d=256 causal=1",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_backward / sizeof fmsa_grid_backward[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_backward, FMSA_GRID_COUNT, FMSA_PASS_BACKWARD, cases))
        return 2;
    return fmsa_test_suite_main(argc, argv, "grid_backward", cases, FMSA_GRID_COUNT);
}
