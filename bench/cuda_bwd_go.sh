#!/bin/sh
# One device call of the CUDA backward as the bwd helper ran it (2026-12-02),
# most important first, each part time-boxed: the dev harness's grid (variants,
# NaN/Inf in hidden keys) and determinism; the library built with the
# fatbins of build-bwdfat/ (built here), ctest -L cuda and the backward cases
# of test_grid_masked_nan; the harness A/B sweep (library rows o3 beside the
# previous code o0 and the variants); the library sweep beside FA2 / cuDNN.
# Run from the tree copy that holds build-cudabwd/ and build-bwdfat/; logs in $OUT.
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/cudabwd-out}
export OUT
here=$(pwd)
t0=$(date +%s)
el() { echo "[$(($(date +%s) - t0)) s] $*"; }
el "harness grid + det"
STEPS="grid det" sh bench/cuda_bwd_device_run.sh 2>&1 | grep -vE "^ 'fmsa|^ok " | tail -40
el "library build"
CMOCKA_PREFIX=$here/../cmocka/usr FATBIN_DIR=$here/build-bwdfat STAGES=build \
    bash bench/cuda_device_run.sh 2>&1 | tail -4
export LD_LIBRARY_PATH=$here/../cmocka/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
el "ctest -L cuda"
timeout 100 ctest --test-dir build-cuda -L cuda --output-on-failure >"$OUT/ctest_cuda.log" 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" "$OUT/ctest_cuda.log" | head -40
el "masked-NaN backward cases on cuda"
for c in 1 3 5 7 9 11 14; do
    timeout 30 build-cuda/tests/test_grid_masked_nan --backend cuda --case $c 2>&1 | tail -3
done >"$OUT/masked_nan.log" 2>&1
cat "$OUT/masked_nan.log"
el "harness sweep (A/B)"
STEPS=sweep SWEEP_ARGS="--dims 128 --seqlens 4096,16384" sh bench/cuda_bwd_device_run.sh >/dev/null 2>&1
cp "$OUT/sweep.log" "$OUT/sweep128.log"
STEPS=sweep SWEEP_ARGS="--dims 64,256 --seqlens 16384" sh bench/cuda_bwd_device_run.sh >/dev/null 2>&1
cut -c1-420 "$OUT/sweep128.log" "$OUT/sweep.log" | grep -E "^d|fail"
el "library sweep"
timeout 90 python3 bench/cuda_vs_peers.py --lib build-cuda/libflashmsa.so --json "$OUT/bench.jsonl" \
    --decode "" --seqlens 4096,16384 >"$OUT/bench.log" 2>&1
sed -n '/^# TFLOP/,$p' "$OUT/bench.log" | cut -c1-250
el done
