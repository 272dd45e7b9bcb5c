#!/usr/bin/env bash
# The fp32 CUDA backward's device call (run from the repo root, or a copy of it):
#
#   FATBIN_DIR=<dir> CMOCKA_PREFIX=<dir> OUT=<dir> bash bench/cuda_f32bwd_device.sh
#
#   1. build: the library and the six tests it runs (carried fatbins, no nvcc, no OpenCL)
#   2. the grids with --backend cuda, verbose (each case's error and bound): backward,
#      edges, features, masked NaN; test_cuda_host and test_cuda_graph by ctest
#   3. bench/cuda_f32_bwd.py: the deterministic backward 10x bitwise, then the timing beside
#      SDPA's EFFICIENT_ATTENTION and MATH in fp32 (d 64/128, s 1024/4096, causal and not),
#      each checked against fp64
#   4. the backward grids again with FLASHMSA_CUDA_ARCH=sm80 (sm_80's picks)
#   5. compute-sanitizer memcheck and racecheck on three small fp32 backward shapes
# (in order of need: a call cut short keeps the first steps' logs).  Logs go to LOG; OUT
# (the device tool's folder) gets summary.txt, bench.log, f32bwd.json and logs.tgz of
# everything (the tool takes back few files).  Exit status 1 if any step failed.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-f32bwd-out}
LOG=${LOG:-/tmp/fmsa-f32bwd-logs}
mkdir -p "$OUT" "$LOG"
B=build-cuda
summary=()
rc_all=0
note() { summary+=("$(printf '%-12s %-5s %s' "$1" "$2" "$3")"); [[ $2 == ok ]] || rc_all=1; }
finish() {
  printf '%s\n' "${summary[@]}" > "$LOG/summary.txt"
  cp "$LOG/summary.txt" "$OUT/"
  [[ -f $LOG/bench.log ]] && cp "$LOG/bench.log" "$OUT/"
  [[ -f $LOG/f32bwd.json ]] && cp "$LOG/f32bwd.json" "$OUT/"
  tar czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null
}
counts() {  # cmocka's OK / FAILED / SKIPPED lines of a log
  echo "$(grep -cE '^\[       OK \]' "$1") ok, $(grep -cE '^\[  FAILED  \]' "$1") failed, $(grep -cE '^\[  SKIPPED \]' "$1") skipped"
}

t=$SECONDS
prefix=()
[[ -n "${CMOCKA_PREFIX:-}" ]] && prefix=(-DCMAKE_PREFIX_PATH="$CMOCKA_PREFIX")
[[ -n "${FATBIN_DIR:-}" ]] && prefix+=(-DFLASHMSA_CUDA_FATBIN_DIR="$FATBIN_DIR")
if cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DFLASHMSA_CUDA=ON \
     -DFLASHMSA_OPENCL=OFF "${prefix[@]}" > "$LOG/configure.log" 2>&1 &&
   ninja -C $B -j"${JOBS:-16}" flashmsa test_grid_backward test_grid_edges test_grid_features \
     test_grid_masked_nan test_cuda_host test_cuda_graph > "$LOG/build.log" 2>&1; then
  note build ok "$((SECONDS - t)) s"
else
  note build FAIL "see build.log / configure.log"
  finish
  exit 1
fi

t=$SECONDS
for g in backward edges features masked_nan; do
  FLASHMSA_TEST_BACKEND=cuda timeout 200 $B/tests/test_grid_$g --backend cuda --verbose \
    > "$LOG/grid_$g.log" 2>&1
  r=$?
  note "grid_$g" "$([[ $r == 0 ]] && echo ok || echo FAIL)" "$(counts "$LOG/grid_$g.log")"
done
ctest --test-dir $B -R '^test_cuda_(host|graph)$' --output-on-failure > "$LOG/ctest_host_graph.log" 2>&1
note ctest_h_g "$([[ $? == 0 ]] && echo ok || echo FAIL)" \
  "$(grep -E 'tests passed|tests failed' "$LOG/ctest_host_graph.log")"
note grids_time ok "$((SECONDS - t)) s"
finish

t=$SECONDS
timeout 150 python3 bench/cuda_f32_bwd.py --lib $B/libflashmsa.so --json "$LOG/f32bwd.json" \
  > "$LOG/bench.log" 2>&1
note bench "$([[ $? == 0 ]] && echo ok || echo FAIL)" "$((SECONDS - t)) s"
finish

t=$SECONDS
for g in backward edges features; do
  FLASHMSA_CUDA_ARCH=sm80 FLASHMSA_TEST_BACKEND=cuda timeout 200 $B/tests/test_grid_$g \
    --backend cuda > "$LOG/grid_${g}_sm80.log" 2>&1
  r=$?
  note "sm80_$g" "$([[ $r == 0 ]] && echo ok || echo FAIL)" "$(counts "$LOG/grid_${g}_sm80.log")"
done
note sm80_time ok "$((SECONDS - t)) s"
finish

t=$SECONDS
shapes=("pass=bwd dtype=f32 b=2 sq=70 sk=90 hq=4 hkv=2 d=64 causal=1"
        "pass=bwd dtype=f32 b=1 sq=45 sk=100 hq=4 hkv=2 d=128 wl=20 wr=5 det=1"
        "pass=bwd dtype=f32 b=2 sq=33 sk=40 hq=2 hkv=1 d=256 mask=1 softcap=5 alibi=1")
for tool in memcheck racecheck; do
  ok=ok
  : > "$LOG/sanitizer_$tool.log"
  for s in "${shapes[@]}"; do
    FLASHMSA_TEST_BACKEND=cuda timeout 100 compute-sanitizer --tool $tool --report-api-errors no \
      --error-exitcode 99 $B/tests/test_grid_backward --backend cuda --shape "$s" \
      >> "$LOG/sanitizer_$tool.log" 2>&1 || ok=FAIL
  done
  note "$tool" $ok "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer_$tool.log" | sort | uniq -c | tr '\n' ';')"
done
note sanit_time ok "$((SECONDS - t)) s"
finish
cat "$LOG/summary.txt"
tail -14 "$LOG/bench.log"
exit $rc_all
