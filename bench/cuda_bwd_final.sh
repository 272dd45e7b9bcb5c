#!/bin/bash
# The backward's verification call on the device (session of 2026-12-03), most
# important first, each step time-boxed: the library built with the fatbins of
# FATBIN_DIR (built on the development machine), the backward suites with
# --backend cuda and again with FLASHMSA_CUDA_ARCH=sm80, the standard sweep
# beside FA2 and cuDNN (bench/cuda_vs_peers.py), compute-sanitizer memcheck and
# racecheck on the backward grid (backward kernels instrumented), then the
# harness grid (rows and variants) and determinism.  ctest runs -j4 (one GPU,
# correctness only).  Run from a tree copy holding build-cudabwd/; CMOCKA_PREFIX
# and FATBIN_DIR as bench/cuda_device_run.sh takes them; logs in $OUT.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
here=$(pwd)
OUT=${OUT:-/tmp/cudabwd-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=${CMOCKA_PREFIX:+$CMOCKA_PREFIX/lib/x86_64-linux-gnu:}${LD_LIBRARY_PATH:-}
t0=$SECONDS
el() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
cat COMMIT 2>/dev/null
el "library build"
STAGES=build bash bench/cuda_device_run.sh 2>&1 | tail -3
el "ctest -L cuda (-j4)"
timeout ${CTEST_TIMEOUT:-170} ctest --test-dir build-cuda -L cuda -j4 --timeout 150 --output-on-failure >"$OUT/ctest.log" 2>&1
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest.log"
el "FLASHMSA_CUDA_ARCH=sm80 grids (-j4)"
FLASHMSA_CUDA_ARCH=sm80 timeout ${CTEST_TIMEOUT:-170} ctest --test-dir build-cuda -L cuda -R '^test_grid_' -j4 --timeout 150 \
    --output-on-failure >"$OUT/ctest_sm80.log" 2>&1
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_sm80.log"
el "sweep beside the peers"
timeout ${BENCH_TIMEOUT:-150} python3 bench/cuda_vs_peers.py --lib build-cuda/libflashmsa.so --json "$OUT/bench.jsonl" \
    ${BENCH_ARGS:---decode ""} >"$OUT/bench.log" 2>&1
sed -n '/^# TFLOP/,$p' "$OUT/bench.log" | cut -c1-220
for tool in memcheck racecheck; do
    el "compute-sanitizer $tool on test_grid_backward (backward kernels)"
    timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 \
        --kernel-name kns=fmsa_cuda_bwd build-cuda/tests/test_grid_backward --backend cuda >"$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tail -3 | tr '\n' ' ')"
done
el "harness grid (rows and variants) and determinism"
timeout 60 python3 bench/cuda_bwd_check.py --grid --variants --det >"$OUT/harness.log" 2>&1
grep -E "^d|grid:|determin|FAIL|ALL" "$OUT/harness.log" | cut -c1-330
el done
