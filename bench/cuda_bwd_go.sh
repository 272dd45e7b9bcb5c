#!/bin/sh
# One device call of the CUDA backward as the bwd helper ran it (2026-12-02),
# most important first, each part time-boxed.  PARTS (default "grid lib ab bench"):
#   grid     dev harness grid (variants, NaN/Inf in hidden keys) and determinism
#   lib      the library built with the fatbins of build-bwdfat/ (built here),
#            ctest -L cuda (LIB_R narrows it; LIB_R80 also runs those tests with
#            FLASHMSA_CUDA_ARCH=sm80), the backward cases of test_grid_masked_nan
#   ab       the harness sweep: the library rows beside the variants of
#            FMSA_CUDA_BWD_VARIANTS (AB_ARGS narrows it)
#   bench    the library sweep beside FA2 / cuDNN (BENCH_ARGS narrows it)
#   profile  ncu of the d128 row, PROFILE_OPTS option rows (d128 rows of
#            FMSA_CUDA_BWD_VARIANTS: the list has to compile them) and FA2
# Run from the tree copy that holds build-cudabwd/ (and build-bwdfat/ for lib,
# bench); logs in $OUT.
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/cudabwd-out}
export OUT
PARTS=${PARTS:-"grid lib ab bench"}
here=$(pwd)
t0=$(date +%s)
el() { echo "[$(($(date +%s) - t0)) s] $*"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
export LD_LIBRARY_PATH=$here/../cmocka/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if has grid; then
    el "harness grid + det"
    STEPS="grid det" sh bench/cuda_bwd_device_run.sh 2>&1 | grep -vE "^ 'fmsa|^ok " | tail -40
fi
if has lib; then
    el "library build"
    CMOCKA_PREFIX=$here/../cmocka/usr FATBIN_DIR=$here/build-bwdfat STAGES=build \
        bash bench/cuda_device_run.sh 2>&1 | tail -4
    el "ctest -L cuda ${LIB_R:+-R $LIB_R}"
    timeout ${LIB_TIMEOUT:-100} ctest --test-dir build-cuda -L cuda ${LIB_R:+-R "$LIB_R"} --output-on-failure >"$OUT/ctest_cuda.log" 2>&1
    grep -E "Test +#|tests passed|tests failed|FAIL" "$OUT/ctest_cuda.log" | head -40
    if [ -n "${LIB_R80:-}" ]; then
        el "FLASHMSA_CUDA_ARCH=sm80 ctest -R $LIB_R80"
        FLASHMSA_CUDA_ARCH=sm80 timeout ${LIB_TIMEOUT:-100} ctest --test-dir build-cuda -L cuda -R "$LIB_R80" \
            --output-on-failure >"$OUT/ctest_cuda_sm80.log" 2>&1
        grep -E "Test +#|tests passed|tests failed|FAIL" "$OUT/ctest_cuda_sm80.log" | head -20
    fi
    el "masked-NaN backward cases on cuda"
    for c in 1 3 5 7 9 11 14; do
        timeout 30 build-cuda/tests/test_grid_masked_nan --backend cuda --case $c 2>&1 | tail -3
    done >"$OUT/masked_nan.log" 2>&1
    cat "$OUT/masked_nan.log"
fi
if has ab; then
    el "harness sweep (A/B)"
    STEPS=sweep SWEEP_ARGS="${AB_ARGS:---dims 128 --seqlens 4096,16384}" sh bench/cuda_bwd_device_run.sh >/dev/null 2>&1
    cut -c1-480 "$OUT/sweep.log" | grep -E "^d|fail"
    if [ -z "${AB_ARGS:-}" ]; then
        cp "$OUT/sweep.log" "$OUT/sweep128.log"
        STEPS=sweep SWEEP_ARGS="--dims 64,256 --seqlens 16384" sh bench/cuda_bwd_device_run.sh >/dev/null 2>&1
        cut -c1-420 "$OUT/sweep.log" | grep -E "^d|fail"
    fi
fi
if has bench; then
    el "library sweep"
    [ -x build-cuda/libflashmsa.so ] || [ -f build-cuda/libflashmsa.so ] || echo "no library: run PARTS=lib first"
    timeout ${BENCH_TIMEOUT:-90} python3 bench/cuda_vs_peers.py --lib build-cuda/libflashmsa.so --json "$OUT/bench.jsonl" \
        ${BENCH_ARGS:---decode "" --seqlens 4096,16384} >"$OUT/bench.log" 2>&1
    sed -n '/^# TFLOP/,$p' "$OUT/bench.log" | cut -c1-250
fi
if has profile; then
    el "ncu"
    STEPS=profile sh bench/cuda_bwd_device_run.sh 2>&1 | tail -80
fi
el done
