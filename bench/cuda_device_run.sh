#!/usr/bin/env bash
# The CUDA backend's device session, for the device tool (run from the repo root):
#
#   STAGES="build tests sanitize bench" bash bench/cuda_device_run.sh
#
#   build     configure + build with CUDA (Ninja, -j16) into build-cuda/; build time logged
#   tests     ctest -L cuda (grids with --backend cuda, graph capture, the 10x deterministic
#             backward, host tests), then the grids again with FLASHMSA_CUDA_ARCH=sm80
#   sanitize  compute-sanitizer memcheck / racecheck / initcheck on the edges grid (small
#             shapes, every feature) and on test_cuda_graph
#   (FATBIN_DIR=<dir> embeds fatbins built elsewhere instead of running nvcc)
#   bench     bench/cuda_vs_peers.py: the standard sweep and decode beside the peers
#             (source /tmp/fa4site/env.sh first to have FA4 among them; BENCH_ARGS adds
#             options, e.g. "--dims 128 --seqlens 4096,16384")
#
# CMOCKA_PREFIX: a folder holding cmocka (the device machine has none; TOOLCHAINS.md says how
# to carry it).  Logs go to $OUT (default /tmp/fmsa-cuda-out); a short table is printed last.
# A failing stage is reported and the next one still runs; the exit status is the first
# failure's.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-cuda-out}
mkdir -p "$OUT"
STAGES=${STAGES:-build tests sanitize bench}
B=build-cuda
rc_all=0
summary=()

note() {  # stage name, status, detail
  summary+=("$(printf '%-10s %-5s %s' "$1" "$2" "$3")")
  if [[ "$2" != ok && $rc_all -eq 0 ]]; then rc_all=1; fi
}

has() { [[ " $STAGES " == *" $1 "* ]]; }

if has build; then
  prefix=()
  [[ -n "${CMOCKA_PREFIX:-}" ]] && prefix=(-DCMAKE_PREFIX_PATH="$CMOCKA_PREFIX")
  # FATBIN_DIR: fatbins compiled elsewhere (another build's cuda-fatbin/), so the
  # lease spends no time in nvcc.
  [[ -n "${FATBIN_DIR:-}" ]] && prefix+=(-DFLASHMSA_CUDA_FATBIN_DIR="$FATBIN_DIR")
  t=$SECONDS
  if cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
       -DFLASHMSA_CUDA=ON "${prefix[@]}" > "$OUT/configure.log" 2>&1 &&
     ninja -C $B -j16 > "$OUT/build.log" 2>&1; then
    note build ok "$((SECONDS - t)) s (-j16); fatbins: $(du -ch $B/cuda-fatbin/*.fatbin | tail -1 | cut -f1)"
  else
    note build FAIL "see build.log / configure.log"
  fi
  readelf -d $B/libflashmsa.so | grep NEEDED > "$OUT/needed.txt" 2>&1
  if grep -qE "libcuda|libcudart" "$OUT/needed.txt"; then note readelf FAIL "links CUDA"; fi
  $B/apps/flashmsa devices > "$OUT/devices.txt" 2>&1
fi

if has tests; then
  t=$SECONDS
  if ctest --test-dir $B -L cuda --output-on-failure > "$OUT/ctest_cuda.log" 2>&1; then
    note tests ok "$(grep -E 'tests passed' "$OUT/ctest_cuda.log") ($((SECONDS - t)) s)"
  else
    note tests FAIL "$(grep -E 'tests passed|tests failed' "$OUT/ctest_cuda.log")"
  fi
  if FLASHMSA_CUDA_ARCH=sm80 ctest --test-dir $B -L cuda -R '^test_grid_' --output-on-failure \
       > "$OUT/ctest_cuda_sm80.log" 2>&1; then
    note sm80 ok "$(grep -E 'tests passed' "$OUT/ctest_cuda_sm80.log")"
  else
    note sm80 FAIL "$(grep -E 'tests passed|tests failed' "$OUT/ctest_cuda_sm80.log")"
  fi
fi

if has sanitize; then
  # --report-api-errors no: the kernel lookup asks each module for a name and
  # takes CUDA_ERROR_NOT_FOUND from the others as "not here", which is handled.
  for tool in memcheck racecheck initcheck; do
    ok=ok
    for cmd in "$B/tests/test_grid_edges --backend cuda" "$B/tests/test_cuda_graph" \
               "$B/tests/test_grid_climb --backend cuda"; do
      log="$OUT/sanitizer_${tool}_$(basename "${cmd%% *}").log"
      extra=()
      [[ $tool == memcheck ]] && extra=(--leak-check full)
      compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 "${extra[@]}" $cmd > "$log" 2>&1
      rc=$?
      if [[ $rc -ne 0 && $rc -ne 77 ]]; then ok=FAIL; fi
    done
    note "$tool" $ok "$(grep -h 'ERROR SUMMARY' "$OUT"/sanitizer_${tool}_*.log | tr '\n' ' ')"
  done
fi

if has bench; then
  rm -f "$OUT/bench.jsonl"
  # shellcheck disable=SC2086
  if python3 bench/cuda_vs_peers.py --lib $B/libflashmsa.so --json "$OUT/bench.jsonl" \
       ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1; then
    note bench ok "$(grep -c . "$OUT/bench.jsonl") shapes"
  else
    note bench FAIL "see bench.log"
  fi
  sed -n '/^# TFLOP/,$p' "$OUT/bench.log"
fi

echo
echo "=== bench/cuda_device_run.sh: $(git rev-parse --short HEAD 2>/dev/null) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
printf '%s\n' "${summary[@]}"
exit $rc_all
