#!/usr/bin/env bash
# One device call of the backward helper (session of 2026-12-03 afternoon), most
# needed first, each step only while time is left (DEADLINE seconds in all):
#   ab        the harness (build-cudabwd/, sm_90a) grid on the variants of
#             FMSA_CUDA_BWD_VARIANTS named by GRID_ONLY, then its sweep of the
#             library's rows beside those variants, FA2 and cuDNN (bench/cuda_bwd_ab.sh)
#   tests     the library built with $FATBINS (built elsewhere), ctest -L cuda and
#             the grids with FLASHMSA_CUDA_ARCH=sm80 (bench/cuda_device_run.sh)
#   racecheck the backward main kernels on test_grid_backward --case 7
#   bench     the standard sweep fwd + bwd beside cuDNN and FA2 (bench/cuda_vs_peers.py)
#   memcheck  the backward kernels on test_grid_backward --backend cuda
#   RACE_MORE racecheck of the main kernels on more test_grid_backward cases
#   ncu       warp states of the d128 row, PROFILE_OPTS rows and FA2 (harness)
# Run from the tree copy (with build-cudabwd/); CMOCKA_PREFIX and FATBINS as
# paths; logs in $OUT (packed into $OUT/logs.tgz after every step).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
T0=$SECONDS
DEADLINE=${DEADLINE:-300}
L=/tmp/bwdcall
mkdir -p "$L" "$OUT"
pack() { tar czf "$OUT/logs.tgz" -C /tmp bwdcall 2>/dev/null; }
# shellcheck source=bench/deadline_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/deadline_steps.sh"
export LD_LIBRARY_PATH=$CMOCKA_PREFIX/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cat COMMIT 2>/dev/null
step ab ${AB_NEED:-110} env OUT=$L/ab GRID_TIMEOUT=${GRID_TIMEOUT:-50} SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-40} \
  sh bench/cuda_bwd_ab.sh
grep -hE "FAIL|grid:" $L/ab/grid.log 2>/dev/null | head -20
step tests 200 env OUT=$L/s STAGES="build tests" FATBIN_DIR=$FATBINS bash bench/cuda_device_run.sh
grep -h -E "tests passed|\*\*\*Failed|Failed  " $L/s/ctest_cuda*.log 2>/dev/null | head -20
step racecheck_bwd 60 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 99 \
  --kernel-name kns=fmsa_cuda_bwd_main build-cuda/tests/test_grid_backward --backend cuda --case 7
step bench 110 env OUT=$L/b STAGES=bench BENCH_ARGS=--decode= bash bench/cuda_device_run.sh
cp $L/b/bench.jsonl "$OUT/" 2>/dev/null
step memcheck_bwd 50 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 \
  --kernel-name kns=fmsa_cuda_bwd build-cuda/tests/test_grid_backward --backend cuda
for c in ${RACE_MORE:-}; do
  step racecheck_bwd_case$c 40 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 99 \
    --kernel-name kns=fmsa_cuda_bwd_main build-cuda/tests/test_grid_backward --backend cuda --case $c
done
if [[ -n "${PROFILE_OPTS:-}" ]]; then
  step ncu 45 ncu --clock-control none -k regex:"fmsa_cuda_bwd_main|flash_bwd_dq_dk_dv" -c 3 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --log-file $L/ncu.log python3 bench/cuda_bwd_check.py --profile --profile-opts "$PROFILE_OPTS"
  grep -E "fmsa_cuda|flash_bwd|Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Stall" \
    $L/ncu.log 2>/dev/null | cut -c1-110 | head -60
fi
pack
echo "=== cuda_bwd_call: $((SECONDS - T0)) s"
