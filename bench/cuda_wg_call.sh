#!/usr/bin/env bash
# One device call for the Hopper (wgmma) backward (fmsa_cuda_bwd_wg.cu), run
# from the repo root with the fatbins built here:
#
#   WG_DIR=.devtree/wg STEPS="probe build tests bench" bash bench/cuda_wg_call.sh
#
#   probe   $WG_DIR/probe (backends/cuda/dev/fmsa_wgmma_probe.cu, built here)
#   build   the library and tests from $WG_DIR/fatbin (no nvcc on the device)
#   tests   ctest -L cuda matching TESTS_RE (default: the backward's suites) with the
#           wgmma kernel on (the default), test_grid_backward with FLASHMSA_CUDA_WGMMA=0
#           (the mma.sync rows), and the grids with FLASHMSA_CUDA_ARCH=sm80
#   bench   bench/cuda_vs_peers.py, d128 (BENCH_ARGS), with FLASHMSA_CUDA_WGMMA
#           = 1 then 0, FA2 and cuDNN beside each, each run checked against fp64
#   runs    flashmsa run (every element against fp64) on d128 shapes, bf16 / fp16, with
#           FLASHMSA_CUDA_WGMMA = each of RUN_WGMMA (default 1); the log names the kernel
#   racecheck / memcheck  compute-sanitizer on test_grid_backward's d128 cases
#   ncu     Nsight Compute sections of the wgmma kernel, d128 s4096 non-causal
#
# CMOCKA_PREFIX defaults to .devtree/cmocka/usr; DEADLINE (s) skips steps that
# would start after it.  Logs to $OUT.
set -uo pipefail
WG_DIR=${WG_DIR:-.devtree/wg}
OUT=${OUT:-/tmp/fmsa-wg-out}
STEPS=${STEPS:-probe build tests bench}
DEADLINE=${DEADLINE:-500}
B=build-cuda
mkdir -p "$OUT"
has() { [[ " $STEPS " == *" $1 "* ]]; }
late() { if (( SECONDS > DEADLINE )); then echo "skip $1 (deadline)"; return 0; fi; return 1; }

if has probe && ! late probe; then
  echo "== probe"; "$WG_DIR/probe" 2>&1 | tee "$OUT/probe.log"
  # the kernel is written to the swap=0 reading: where that fails, nothing else can pass
  if grep -q "swap=0: FAIL\|CUDA error" "$OUT/probe.log"; then echo "probe failed: stop"; exit 1; fi
fi
if has build && ! late build; then
  t=$SECONDS
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DFLASHMSA_CUDA=ON \
    -DCMAKE_PREFIX_PATH="${CMOCKA_PREFIX:-$PWD/.devtree/cmocka/usr}" \
    -DFLASHMSA_CUDA_FATBIN_DIR="$PWD/$WG_DIR/fatbin" > "$OUT/configure.log" 2>&1 &&
    ninja -C $B -j16 > "$OUT/build.log" 2>&1
  echo "== build rc=$? $((SECONDS - t)) s"; tail -2 "$OUT/build.log"

fi
if has runs && ! late runs; then
  # flashmsa run: every element of O, LSE, dQ, dK, dV against fp64; the log names the kernel
  : > "$OUT/runs.log"
  base="--backend cuda --batch 2 --heads 8 --dim 128 --full-check --repeat 1"
  for wg in ${RUN_WGMMA:-1}; do
    for dt in bf16 fp16; do
      for extra in "--seqlen 1024 --no-causal" "--seqlen 1024 --causal" "--seqlen 512 --heads-kv 2 --causal" \
                   "--seqlen-q 512 --seqlen-k 777 --causal" "--seqlen-q 777 --seqlen-k 512 --no-causal" \
                   "--seqlen 1024 --window 100,0" "--seqlen 640 --window 64,64" "--seqlen 1024 --sinks random --causal" \
                   "--seqlen 1000 --no-causal"; do
        # shellcheck disable=SC2086
        r=$(FLASHMSA_CUDA_WGMMA=$wg FLASHMSA_LOG=debug $B/apps/flashmsa run $base --dtype $dt $extra 2>&1)
        echo "wg=$wg $dt $extra: $(echo "$r" | grep -o 'backward fmsa_cuda_bwd_[a-z0-9_]*' | head -1) $(echo "$r" | grep -oE '^(PASS|FAIL).*' | head -1)" >> "$OUT/runs.log"
      done
    done
  done
  echo "== runs: $(grep -c PASS "$OUT/runs.log") PASS, $(grep -c FAIL "$OUT/runs.log") FAIL of $(grep -c . "$OUT/runs.log")"
  grep -v PASS "$OUT/runs.log" | head -20; grep -o "wg=[^ ]* [a-z0-9]* .*backward [a-z0-9_]*" "$OUT/runs.log" | awk '{print $1, $NF}' | sort | uniq -c
fi
if has tests && ! late tests; then
  t=$SECONDS
  ctest --test-dir $B -L cuda -R "${TESTS_RE:-backward|edges|features|graph|masked_nan|climb|cuda_host|plan_rows|ring_loopback}" \
    --output-on-failure > "$OUT/ctest_wg.log" 2>&1
  echo "== tests rc=$? $((SECONDS - t)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_wg.log")"
  grep -E "Failed|FAIL|\*\*\*" "$OUT/ctest_wg.log" | head -20
  FLASHMSA_CUDA_WGMMA=0 ctest --test-dir $B -R 'test_grid_backward_cuda' > "$OUT/ctest_mma.log" 2>&1
  echo "== tests (WGMMA=0) rc=$?"
  FLASHMSA_CUDA_ARCH=sm80 ctest --test-dir $B -L cuda -R '^test_grid_' > "$OUT/ctest_sm80.log" 2>&1
  echo "== tests (FLASHMSA_CUDA_ARCH=sm80 grids) rc=$? $(grep -E 'tests passed|tests failed' "$OUT/ctest_sm80.log")"
fi
if has racecheck && ! late racecheck; then
  for tool in racecheck memcheck; do
    compute-sanitizer --tool $tool --report-api-errors no \
      $B/apps/flashmsa run --backend cuda --dtype bf16 --batch 1 --heads 2 --seqlen 256 --dim 128 --causal --repeat 1 --warmup 0 > "$OUT/sanitizer_$tool.log" 2>&1
    echo "== $tool rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')"
  done
fi
if has bench && ! late bench; then
  for wg in ${BENCH_WGMMA:-1 0}; do
    if late "bench wg=$wg"; then continue; fi
    # shellcheck disable=SC2086
    FLASHMSA_CUDA_WGMMA=$wg python3 bench/cuda_vs_peers.py --lib $B/libflashmsa.so --decode '' --short '' \
      --json "$OUT/bench_wg$wg.jsonl" ${BENCH_ARGS:---dims 128 --seqlens 1024,4096,16384} > "$OUT/bench_wg$wg.log" 2>&1
    echo "== bench FLASHMSA_CUDA_WGMMA=$wg rc=$?"; sed -n '/^# TFLOP/,$p' "$OUT/bench_wg$wg.log"
  done
fi
if has ncu && ! late ncu; then
  # one d128 s4096 non-causal backward: the wgmma kernel's tensor-pipe use and warp states
  ncu --kernel-name regex:bwd_wg --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section Occupancy $B/apps/flashmsa run --backend cuda --dtype bf16 \
    --batch 4 --heads 16 --seqlen 4096 --dim 128 --no-causal --warmup 0 --repeat 1 --check-rows 4 > "$OUT/ncu.log" 2>&1
  echo "== ncu rc=$?"; grep -E "Duration|Elapsed Cycles|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Stall|Tensor|Executed Ipc|Memory Throughput|L1/TEX Hit|Compute \(SM\)" "$OUT/ncu.log" | head -40
fi
echo "== done at $SECONDS s"
