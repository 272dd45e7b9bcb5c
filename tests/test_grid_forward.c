/*
 * Forward correctness grid for any backend (--backend cpu|opencl|...).
 *
 * A covering design rather than a Cartesian product: every head dim (8, 40,
 * 64, 72, 128, 136, 256 -- odd multiples of 8 included), every dtype and
 * every (seqlen_q, seqlen_k) pair appears in several rows, each time with a
 * different mix of causal / window / softcap / ALiBi / mask / GQA 6:2 and 6:1
 * / varlen (empty sequences) / paged KV / non-contiguous strides, so each
 * feature is exercised against several shapes and dtypes.  The big shapes
 * (1023 x 1024, decode with 2048+ keys) live in test_grid_large.c because the
 * fp64 reference dominates their cost.
 */
#include <stddef.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_forward[] = {
    /* tiny and degenerate shapes */
    "dtype=f32  b=1 sq=1   sk=1   hq=1 hkv=1 d=8",
    "dtype=f16  b=2 sq=1   sk=17  hq=6 hkv=2 d=40",
    "dtype=bf16 b=2 sq=17  sk=1   hq=6 hkv=1 d=64  causal=1",   /* 16 of 17 rows fully masked */
    "dtype=bf16 b=2 sq=17  sk=1   hq=6 hkv=2 d=8",
    "dtype=f32  b=2 sq=1   sk=17  hq=6 hkv=6 d=128 causal=1 lse=0",
    "dtype=f32  b=2 sq=17  sk=17  hq=6 hkv=1 d=40  wl=4 wr=0 mask=3",
    /* the odd pair, both ways round */
    "dtype=f32  b=2 sq=113 sk=203 hq=6 hkv=2 d=72  causal=1",
    "dtype=f16  b=1 sq=203 sk=113 hq=6 hkv=6 d=128 causal=1 strided=1",
    "dtype=bf16 b=2 sq=113 sk=203 hq=6 hkv=1 d=136 wl=32 wr=16",
    "dtype=f32  b=1 sq=203 sk=113 hq=2 hkv=2 d=256 softcap=5",
    "dtype=f16  b=2 sq=64  sk=128 hq=6 hkv=2 d=8   alibi=1 causal=1",
    "dtype=bf16 b=3 sq=113 sk=203 hq=6 hkv=2 d=40  mask=1",
    "dtype=f32  b=4 sq=113 sk=203 hq=6 hkv=2 d=64  varlen=1",
    "dtype=f32  b=2 sq=203 sk=113 hq=6 hkv=2 d=136 strided=1 alibi=2 mask=2",
    "dtype=f16  b=4 sq=113 sk=203 hq=6 hkv=6 d=256 varlen=1 causal=1 softcap=10",
    "dtype=f16  b=2 sq=113 sk=203 hq=6 hkv=2 d=64  wl=0 wr=0",   /* one visible key per row */
    "dtype=bf16 b=3 sq=203 sk=113 hq=6 hkv=6 d=72  varlen=1 mask=1 strided=1",
    "dtype=f16  b=1 sq=113 sk=203 hq=6 hkv=1 d=136 causal=1 wl=48 softcap=5 alibi=1 mask=1",
    "dtype=f16  b=5 sq=40  sk=60  hq=6 hkv=2 d=40  varlen=1 alibi=2 wl=10 wr=10",
    "dtype=bf16 b=2 sq=113 sk=203 hq=6 hkv=2 d=256 causal=1 mask=2",
    "dtype=f32  b=1 sq=203 sk=203 hq=6 hkv=1 d=8   causal=1 softcap=3 strided=1",
    "dtype=f16  b=2 sq=64  sk=64  hq=6 hkv=2 d=72  scale=0.5",   /* very peaked softmax */
    /* scores spread over hundreds of bits along a row: a running maximum from
     * the first key tiles is far below later tiles' (a path that keeps a stale
     * maximum must replace it before exp2 overflows) */
    "dtype=bf16 b=1 sq=40  sk=600 hq=2 hkv=1 d=64  scale=4",
    "dtype=f16  b=1 sq=203 sk=113 hq=6 hkv=2 d=136 wr=5",
    "dtype=bf16 b=3 sq=64  sk=130 hq=6 hkv=1 d=128 varlen=1 wl=20 softcap=4 strided=1",
    /* paged KV (forward only): pages shuffled, seqused_k random */
    "dtype=f16  b=3 sq=1   sk=200 hq=6 hkv=2 d=72  page=16 seqused=1",
    "dtype=bf16 b=2 sq=17  sk=203 hq=6 hkv=1 d=128 page=32",
    "dtype=f32  b=3 sq=1   sk=64  hq=6 hkv=2 d=256 page=8 seqused=1 strided=1 alibi=1",
    "dtype=bf16 b=2 sq=1   sk=1   hq=6 hkv=1 d=136 page=1 seqused=1",
    "dtype=f32  b=3 sq=113 sk=203 hq=6 hkv=2 d=40  page=64 mask=1 causal=1",
    "dtype=f16  b=2 sq=17  sk=100 hq=6 hkv=6 d=64  page=16 seqused=1 softcap=5 wl=30",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_forward / sizeof fmsa_grid_forward[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_forward, FMSA_GRID_COUNT, FMSA_PASS_FORWARD, cases))
        return 2;
    return fmsa_test_suite_main(argc, argv, "grid_forward", cases, FMSA_GRID_COUNT);
}
