#!/usr/bin/env bash
# One device call for the forward A/B (issue 14), run from the repository root of the device
# tool's tree (main's) with this branch's copy carried in $T (default .devtree/fwd):
#
#   bash .devtree/fwd/bench/cuda_fwd_ab.sh
#
# $T/fb/common/*.fatbin: the kernel files this branch does not touch (bwd, pre/post,
# accumulate, check, merge: main's build); $T/fb/fwd_<name>.fatbin: the forward of each
# build (nvcc on the development machine).  Builds: main = the repository root's sources with
# fwd_main; A = this branch (its defaults); B, when fwd_B.fatbin is there = this branch with
# $B_FLAGS in the host C (the same -D its fatbin was compiled with).  Then bench/cuda_fwd_ab.py
# (sweep + decode, every build checked against fp64, beside FA2 and cuDNN), ctest -L cuda on
# A, the forward grids on B, the grids with FLASHMSA_CUDA_ARCH=sm80 on A, and (PROF=1) one
# Nsight Compute pass over main's and A's kernels beside FA2's (bench/cuda_fwd_prof.py), and
# (PROF_SRC=1) the per-instruction stall samples of A's d128 FAST kernel, and (SAN="memcheck
# racecheck") compute-sanitizer on A's forward grid (and the other suites of SAN_TESTS).
# EXTRA="x y": more builds (this branch's host C with fb/fwd_x.fatbin), timed between main and A.
# B_ROLE=check: B is a build that must FAIL test_grid_climb (the stale pass without its
# repeat): it is not timed, only that suite runs on it.  BUDGET (s): later steps are skipped
# once the call has run that long (the sm80 grids, the sanitizers); NCU_BY (s): the profile
# runs only if the call is not yet that old (NCU_TIMEOUT bounds it); AB_TIMEOUT bounds the sweep.
set -uo pipefail
T0=$SECONDS
left() { [[ $((SECONDS - T0)) -lt ${BUDGET:-100000} ]] || { echo "SKIPPED (budget): $1"; return 1; }; }
ROOT=$(pwd)
T=$(cd "${T:-.devtree/fwd}" && pwd)
OUT=${OUT:-/tmp/fwdab-out}
L=/tmp/fwdab-logs
mkdir -p "$OUT" "$L"
CM=$ROOT/.devtree/cmocka/usr
[[ -d $CM ]] || { echo "cuda_fwd_ab.sh: no cmocka at $CM: carry .devtree/cmocka too"; exit 2; }
export LD_LIBRARY_PATH=$CM/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv | tee "$L/smi.txt"
for v in A B main ${EXTRA:-}; do
  [[ -f "$T/fb/fwd_$v.fatbin" ]] || continue
  mkdir -p /tmp/fb_$v
  cp "$T"/fb/common/*.fatbin /tmp/fb_$v/
  cp "$T/fb/fwd_$v.fatbin" /tmp/fb_$v/fmsa_cuda_fwd.fatbin
done
cfg() {  # source, build dir, fatbin dir, C flags, testing
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING="$5" \
    -DFLASHMSA_CUDA=ON -DFLASHMSA_OPENCL=OFF -DFLASHMSA_CUDA_FATBIN_DIR="$3" \
    -DCMAKE_PREFIX_PATH="$CM" "-DCMAKE_C_FLAGS=$4" > "$L/cfg_$(basename "$2").log" 2>&1
}
t=$SECONDS
{ cfg "$T" /tmp/bA /tmp/fb_A "" ON && ninja -C /tmp/bA -j16 > "$L/build_A.log" 2>&1; } ||
  echo "BUILD A FAILED: $(tail -n 5 "$L/build_A.log" "$L/cfg_bA.log")"
libs=(--lib main=/tmp/bM/libflashmsa.so)
if [[ -d /tmp/fb_B ]]; then
  { cfg "$T" /tmp/bB /tmp/fb_B "${B_FLAGS:-}" ON &&
    ninja -C /tmp/bB -j16 $([[ "${B_ROLE:-}" == check ]] && echo test_grid_climb) > "$L/build_B.log" 2>&1; } ||
    echo "BUILD B FAILED"
  [[ "${B_ROLE:-}" == check ]] || libs+=(--lib B=/tmp/bB/libflashmsa.so)
fi
for v in ${EXTRA:-}; do  # EXTRA="x y": more builds of this branch's host C, each with fb/fwd_<x>.fatbin
  { cfg "$T" /tmp/b_$v /tmp/fb_$v "" OFF && ninja -C /tmp/b_$v -j16 flashmsa > "$L/build_$v.log" 2>&1; } ||
    echo "BUILD $v FAILED"
  libs+=(--lib $v=/tmp/b_$v/libflashmsa.so)
done
libs+=(--lib A=/tmp/bA/libflashmsa.so)
{ cfg "$ROOT" /tmp/bM /tmp/fb_main "" ON &&
  ninja -C /tmp/bM -j16 flashmsa test_grid_masked_nan > "$L/build_M.log" 2>&1; } ||
  echo "BUILD main FAILED: $(tail -n 5 "$L/build_M.log")"
echo "builds: $((SECONDS - t)) s"

t=$SECONDS
# AB_ARGS is split on spaces, unquoted: no decode rows is AB_ARGS='--decode=' (not --decode "")
(cd "$T" && timeout "${AB_TIMEOUT:-330}" python3 bench/cuda_fwd_ab.py "${libs[@]}" ${AB_ARGS:-} \
   --json "$OUT/ab.jsonl" > "$L/ab.txt" 2>&1)
echo "ab rc=$? $((SECONDS - t)) s"
cp "$L/ab.txt" "$OUT/ab.txt"; sed -n '/^# NVIDIA/,$p' "$L/ab.txt"

t=$SECONDS
timeout 200 ctest --test-dir /tmp/bA -L cuda -j8 --output-on-failure > "$OUT/ctest_cuda.log" 2>&1
echo "ctest -L cuda rc=$? $((SECONDS - t)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_cuda.log")"
grep -E "^\s*[0-9]+/[0-9]+ Test.*(Failed|Passed|Skipped|Not Run)" "$OUT/ctest_cuda.log" | sed 's/  */ /g'
if [[ -d /tmp/bB && "${B_ROLE:-}" == check ]]; then
  FLASHMSA_TEST_BACKEND=cuda timeout 60 /tmp/bB/tests/test_grid_climb --backend cuda --verbose > "$OUT/climb_B.log" 2>&1
  echo "B (check build) test_grid_climb rc=$? (must fail): $(grep -cE '^\[  FAILED|^\[       OK' "$OUT/climb_B.log") case lines; $(grep -E 'PASSED|FAILED  \]' "$OUT/climb_B.log" | tail -2 | tr '\n' ' ')"
elif [[ -d /tmp/bB ]]; then
  t=$SECONDS
  timeout 120 ctest --test-dir /tmp/bB -L cuda -R 'grid_forward|grid_edges|grid_large|grid_features|masked_nan|cuda_features|cuda_graph' \
    -j8 --output-on-failure > "$OUT/ctest_B.log" 2>&1
  echo "B forward grids rc=$? $((SECONDS - t)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_B.log")"
fi
t=$SECONDS
left "sm80 grids" && FLASHMSA_CUDA_ARCH=sm80 timeout 90 ctest --test-dir /tmp/bA -L cuda -R '^test_grid_' -j8 \
  > "$OUT/ctest_sm80.log" 2>&1
echo "sm80 grids rc=$? $((SECONDS - t)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_sm80.log")"
if [[ -n "${SAN:-}" ]]; then  # SAN="memcheck racecheck": compute-sanitizer on A's forward grid, forward kernels only
  for suite in ${SAN_TESTS:-test_grid_forward}; do
  for tool in $SAN; do
    t=$SECONDS
    left "$tool $suite" || continue
    FLASHMSA_TEST_BACKEND=cuda timeout "${SAN_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --report-api-errors no \
      --error-exitcode 99 --kernel-name kns=fmsa_cuda_fwd /tmp/bA/tests/$suite --backend cuda \
      > "$L/san_${tool}_$suite.log" 2>&1
    echo "$tool $suite rc=$? $((SECONDS - t)) s: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY\|PASSED\|FAILED' "$L/san_${tool}_$suite.log" | tail -3 | tr '\n' ' ')"
  done
  done
fi
if [[ "${PROF:-1}" == 1 ]] && [[ $((SECONDS - T0)) -lt ${NCU_BY:-100000} ]]; then
  t=$SECONDS
  # PROF_LIBS="A": the builds profiled (default main, A and a timed B)
  plibs=()
  for v in ${PROF_LIBS:-main A $([[ -d /tmp/bB && "${B_ROLE:-}" != check ]] && echo B)}; do
    case $v in main) plibs+=(--lib main=/tmp/bM/libflashmsa.so) ;; A|B) plibs+=(--lib $v=/tmp/b$v/libflashmsa.so) ;;
      *) plibs+=(--lib $v=/tmp/b_$v/libflashmsa.so) ;; esac
  done
  secs=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
        --section SchedulerStats --section InstructionStats --section Occupancy
        --section MemoryWorkloadAnalysis)
  (cd "$T" && timeout "${NCU_TIMEOUT:-170}" ncu --profile-from-start off --clock-control none \
     --kernel-name regex:'fmsa_cuda_fwd|flash_fwd' "${secs[@]}" --print-details all \
     python3 bench/cuda_fwd_prof.py "${plibs[@]}" ${PROF_ARGS:-} > "$OUT/prof.txt" 2>&1)
  echo "ncu rc=$? $((SECONDS - t)) s: $(grep -c 'fmsa_cuda_fwd\|flash_fwd' "$OUT/prof.txt") kernel lines"
fi
if [[ "${PROF_SRC:-0}" == 1 ]]; then  # where A's d128 FAST kernel stalls, per SASS instruction
  t=$SECONDS
  (cd "$T" && timeout 120 ncu --profile-from-start off --clock-control none \
     --kernel-name regex:'fmsa_cuda_fwd_bf16_d128_fast' --section SourceCounters --section WarpStateStats \
     -o "$OUT/srcA" python3 bench/cuda_fwd_prof.py --lib A=/tmp/bA/libflashmsa.so --shapes 128:4096:full \
     --no-fa2 > "$L/src_run.txt" 2>&1 &&
   timeout 60 ncu -i "$OUT/srcA.ncu-rep" --page source --csv --print-source sass > "$OUT/srcA.csv" 2>&1)
  echo "ncu source rc=$? $((SECONDS - t)) s: $(wc -l < "$OUT/srcA.csv") lines"
fi
tar czf "$OUT/logs.tgz" -C "$L" .
sed -n '/^# NVIDIA/,$p' "$L/ab.txt"
grep -E "^# .*(Error|error|FAIL)" "$L/ab.txt" | head -5
