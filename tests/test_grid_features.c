/*
 * The features of API v0.2 (issue 13) on any backend: attention sinks (with
 * dsink), the LSE gradient dlse, a value head dim of its own and head dims up
 * to 576, each alone and combined with causal, windows, GQA/MQA, varlen,
 * paged KV (forward), strided layouts, masks, ALiBi and softcap, in f32, f16
 * and bf16, with the D/Dv pairs of current models: (192, 128) MLA prefill,
 * (576, 512) MLA absorbed decode, (512, 512) Gemma 4, (64, 256), (8, 8),
 * (64, 64).  Every case first checks the reference and the naive against
 * each other in f32 (fmsa_test_oracle.h), so the suite can fail on every
 * backend; a backend whose kernels lack a feature refuses through its gate
 * and the case counts as 'not supported' (fmsa_test_suite_main_features;
 * FLASHMSA_TEST_REQUIRE_ALL=cpu makes refusals fail on the CPU).
 */
#include <stddef.h>
#include <string.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_features[] = {
    /* forward: sinks (1 = random per head, 2 = -inf / +12 / random) */
    "pass=fwd dtype=f32  b=2 sq=37  sk=53  hq=4 hkv=4 d=64  sinks=1",
    "pass=fwd dtype=f16  b=2 sq=113 sk=203 hq=4 hkv=2 d=64  sinks=1 causal=1",
    "pass=fwd dtype=bf16 b=2 sq=64  sk=100 hq=6 hkv=2 d=128 sinks=2 wl=16 wr=8",
    "pass=fwd dtype=f32  b=4 sq=40  sk=60  hq=3 hkv=1 d=64  sinks=2 varlen=1",
    "pass=fwd dtype=f16  b=3 sq=9   sk=70  hq=4 hkv=2 d=64  sinks=1 page=16 seqused=1",
    "pass=fwd dtype=f16  b=2 sq=17  sk=17  hq=2 hkv=2 d=8   sinks=2 causal=1",
    "pass=fwd dtype=bf16 b=2 sq=33  sk=47  hq=4 hkv=2 d=64  sinks=1 lse=0",
    "pass=fwd dtype=f32  b=2 sq=33  sk=47  hq=4 hkv=2 d=64  sinks=2 mask=1 alibi=1 softcap=5 "
    "strided=1",
    /* forward: value head dim, large dims */
    "pass=fwd dtype=f32  b=2 sq=37  sk=53  hq=4 hkv=2 d=192 dv=128",
    "pass=fwd dtype=bf16 b=1 sq=64  sk=80  hq=2 hkv=1 d=512 dv=512",
    "pass=fwd dtype=f16  b=1 sq=48  sk=64  hq=2 hkv=1 d=576 dv=512 causal=1",
    "pass=fwd dtype=f32  b=4 sq=30  sk=50  hq=4 hkv=2 d=64  dv=256 varlen=1",
    "pass=fwd dtype=f32  b=2 sq=17  sk=29  hq=2 hkv=2 d=8   dv=8 strided=1",
    "pass=fwd dtype=bf16 b=2 sq=20  sk=70  hq=4 hkv=1 d=192 dv=128 page=8 seqused=1",
    "pass=fwd dtype=f16  b=2 sq=40  sk=40  hq=4 hkv=4 d=256 dv=64 wl=8 wr=0 strided=1",
    /* forward: combined */
    "pass=fwd dtype=bf16 b=3 sq=1   sk=200 hq=8 hkv=1 d=576 dv=512 sinks=1 page=16 seqused=1",
    "pass=fwd dtype=f32  b=1 sq=40  sk=64  hq=2 hkv=2 d=512 dv=512 sinks=1 wl=20",
    "pass=fwd dtype=f16  b=4 sq=30  sk=45  hq=4 hkv=2 d=64  dv=256 sinks=2 causal=1 varlen=1",
    "pass=fwd dtype=bf16 b=2 sq=33  sk=33  hq=6 hkv=2 d=192 dv=128 sinks=1 causal=1 strided=1",
    "pass=fwd dtype=f32  b=2 sq=64  sk=64  hq=2 hkv=1 d=64  dv=64 sinks=1 causal=1 wl=7",
    /* backward: each alone */
    "pass=bwd dtype=f32  b=2 sq=37  sk=53  hq=4 hkv=4 d=64  sinks=1 dsink=1",
    "pass=bwd dtype=f32  b=2 sq=37  sk=53  hq=4 hkv=4 d=64  dlse=1",
    "pass=bwd dtype=f32  b=2 sq=37  sk=53  hq=4 hkv=2 d=192 dv=128",
    "pass=bwd dtype=bf16 b=2 sq=33  sk=47  hq=4 hkv=2 d=64  sinks=1",
    "pass=bwd dtype=f16  b=2 sq=33  sk=47  hq=4 hkv=2 d=64  dlse=1",
    /* backward: combined */
    "pass=bwd dtype=f16  b=2 sq=113 sk=203 hq=4 hkv=2 d=64  sinks=1 dsink=1 dlse=1 causal=1",
    "pass=bwd dtype=bf16 b=4 sq=40  sk=60  hq=3 hkv=1 d=64  sinks=2 dsink=1 varlen=1 wl=8 wr=4",
    "pass=bwd dtype=bf16 b=1 sq=48  sk=64  hq=2 hkv=1 d=512 dv=512 sinks=1 dsink=1",
    "pass=bwd dtype=f16  b=1 sq=48  sk=64  hq=2 hkv=1 d=576 dv=512 dlse=1 causal=1",
    "pass=bwd dtype=f32  b=4 sq=30  sk=50  hq=4 hkv=2 d=64  dv=256 sinks=1 dsink=1 dlse=1 "
    "varlen=1",
    "pass=bwd dtype=f16  b=2 sq=17  sk=29  hq=2 hkv=2 d=8   dv=8 sinks=2 dsink=1 dlse=1 det=1",
    "pass=bwd dtype=f32  b=2 sq=33  sk=47  hq=4 hkv=2 d=64  dv=64 sinks=1 dsink=1 mask=1 "
    "alibi=2 softcap=5 strided=1 det=1",
    "pass=bwd dtype=bf16 b=4 sq=30  sk=40  hq=6 hkv=1 d=192 dv=128 sinks=1 dsink=1 dlse=1 "
    "varlen=1 causal=1",
    "pass=bwd dtype=f32  b=1 sq=40  sk=40  hq=2 hkv=2 d=512 dv=512 sinks=2 dsink=1 dlse=1 "
    "causal=1 strided=1",
    "pass=bwd dtype=bf16 b=2 sq=40  sk=64  hq=4 hkv=4 d=256 dv=64 dlse=1 wl=10 wr=10",
    /* backward, a value head dim of its own in the dtypes the CUDA backward runs:
     * each of its three pair rows (192,128), (64,256), (256,256), padded pairs,
     * GQA/MQA, causal, sinks + dsink + dlse, the deterministic mode, the
     * per-element features, several key blocks per query tile and the reverse */
    "pass=bwd dtype=bf16 b=2 sq=150 sk=190 hq=4 hkv=2 d=192 dv=128 causal=1",
    "pass=bwd dtype=f16  b=1 sq=90  sk=130 hq=2 hkv=2 d=192 dv=128 sinks=1 dsink=1 dlse=1",
    "pass=bwd dtype=bf16 b=2 sq=45  sk=100 hq=6 hkv=1 d=192 dv=128 det=1",
    "pass=bwd dtype=f16  b=1 sq=100 sk=120 hq=2 hkv=2 d=64  dv=256",
    "pass=bwd dtype=bf16 b=2 sq=77  sk=50  hq=4 hkv=2 d=64  dv=256 sinks=2 dsink=1 dlse=1 "
    "causal=1",
    "pass=bwd dtype=bf16 b=1 sq=70  sk=90  hq=2 hkv=2 d=136 dv=120 sinks=1 dsink=1",
    "pass=bwd dtype=f16  b=2 sq=33  sk=47  hq=6 hkv=2 d=56  dv=200 wl=9 wr=3 strided=1",
    "pass=bwd dtype=bf16 b=1 sq=64  sk=80  hq=4 hkv=2 d=128 dv=64  mask=1 alibi=1 softcap=5",
    "pass=bwd dtype=f16  b=3 sq=30  sk=40  hq=4 hkv=2 d=256 dv=128 varlen=1 causal=1 det=1",
    "pass=bwd dtype=bf16 b=2 sq=40  sk=70  hq=4 hkv=1 d=128 dv=192 dlse=1",
    /* backward above 256 in the dtypes the CUDA backward runs (its (512, 512)
     * and (576, 512) rows of 32-key blocks, sm_90): MLA's (576, 512) and
     * D = 512 with GQA,
     * causal, several key blocks per query tile and the reverse, the
     * deterministic mode, padded pairs (520, 264), (264, 264), (296, 504),
     * sinks + dsink + dlse, varlen, windows and the per-element features */
    "pass=bwd dtype=bf16 b=2 sq=77  sk=130 hq=4 hkv=2 d=576 dv=512 causal=1",
    "pass=bwd dtype=f16  b=1 sq=90  sk=70  hq=6 hkv=2 d=512 dv=512 det=1",
    "pass=bwd dtype=bf16 b=1 sq=100 sk=64  hq=3 hkv=1 d=576 dv=512 sinks=1 dsink=1 dlse=1 det=1 "
    "causal=1",
    "pass=bwd dtype=bf16 b=1 sq=40  sk=64  hq=4 hkv=1 d=520 dv=264 sinks=2 dsink=1 dlse=1",
    "pass=bwd dtype=f16  b=3 sq=33  sk=47  hq=2 hkv=2 d=264 dv=264 varlen=1 causal=1",
    "pass=bwd dtype=bf16 b=1 sq=30  sk=45  hq=2 hkv=1 d=296 dv=504 wl=9 wr=3 strided=1",
    "pass=bwd dtype=f16  b=1 sq=48  sk=64  hq=2 hkv=2 d=576 dv=512 mask=1 alibi=1 softcap=5",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_features / sizeof fmsa_grid_features[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_features, FMSA_GRID_COUNT, FMSA_PASS_FORWARD, cases))
        return 2;
    return fmsa_test_suite_main_features(argc, argv, "grid_features", cases, FMSA_GRID_COUNT);
}
