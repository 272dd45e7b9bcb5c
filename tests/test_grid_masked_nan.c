/*
 * Keys no row sees never reach an output (issue 18): spec nan=1 writes NaN
 * into the K rows and NaN / +Inf / -Inf into the V rows of every key that no
 * query row of any head of its kv group sees -- hidden by the bit mask (the
 * spec then clears keys 8k + 2 and 16..23 in every row), by a left window, or
 * both -- and the case is judged as any other: against the fp64 reference,
 * which skips those keys, so one NaN (0 * NaN in P·V, dP = dO·Vᵀ or dS·K)
 * fails it.  Padding tokens often hold garbage; padding is masked.
 *
 * Registered for the CPU (every kernel path, tests/cpu.cmake) and OpenCL
 * (both kernel families, tests/opencl.cmake); a backend joins by adding it to
 * its TESTS file once its kernels never multiply a hidden key's values.
 */
#include <stddef.h>

#include "support/fmsa_test_runner.h"

static const char *const fmsa_grid_masked_nan[] = {
    "pass=fwd dtype=f32  b=2 sq=37 sk=300 hq=4 hkv=2 d=64 mask=1 nan=1",
    "pass=bwd dtype=f32  b=2 sq=37 sk=300 hq=4 hkv=2 d=64 mask=1 nan=1",
    "pass=fwd dtype=bf16 b=2 sq=37 sk=300 hq=4 hkv=2 d=64 mask=3 nan=1",
    "pass=bwd dtype=bf16 b=2 sq=37 sk=300 hq=4 hkv=2 d=64 mask=3 nan=1",
    "pass=fwd dtype=f16  b=2 sq=70 sk=150 hq=2 hkv=1 d=32 mask=2 causal=1 nan=1",
    "pass=bwd dtype=f16  b=2 sq=70 sk=150 hq=2 hkv=1 d=32 mask=2 causal=1 nan=1",
    "pass=fwd dtype=f32  b=1 sq=16 sk=300 hq=2 hkv=2 d=64 wl=3 wr=2 nan=1", /* window only */
    "pass=bwd dtype=f32  b=1 sq=16 sk=300 hq=2 hkv=2 d=64 wl=3 wr=2 nan=1",
    "pass=fwd dtype=bf16 b=1 sq=40 sk=200 hq=2 hkv=1 d=128 wl=50 causal=1 nan=1",
    "pass=bwd dtype=bf16 b=1 sq=40 sk=200 hq=2 hkv=1 d=128 wl=50 causal=1 nan=1",
    "pass=fwd dtype=f32  b=4 sq=30 sk=60 hq=2 hkv=1 d=64 mask=1 varlen=1 nan=1",
    "pass=bwd dtype=bf16 b=4 sq=30 sk=60 hq=2 hkv=1 d=64 mask=1 varlen=1 nan=1",
    "pass=fwd dtype=f16  b=2 sq=3 sk=520 hq=4 hkv=1 d=64 mask=1 nan=1 softcap=30", /* decode */
    "pass=fwd dtype=f32  b=2 sq=9 sk=30 hq=2 hkv=1 d=64 page=8 mask=1 nan=1",
    "pass=bwd dtype=f32  b=1 sq=33 sk=90 hq=2 hkv=2 d=64 mask=1 alibi=1 det=1 nan=1",
};

#define FMSA_GRID_COUNT (sizeof fmsa_grid_masked_nan / sizeof fmsa_grid_masked_nan[0])

int main(int argc, char **argv) {
    fmsa_test_spec cases[FMSA_GRID_COUNT];
    if (fmsa_test_specs_parse(fmsa_grid_masked_nan, FMSA_GRID_COUNT, FMSA_PASS_FORWARD, cases))
        return 2;
    return fmsa_test_suite_main(argc, argv, "grid_masked_nan", cases, FMSA_GRID_COUNT);
}
