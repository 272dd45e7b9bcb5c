#!/usr/bin/env bash
# The merged tree's verification in one device call with a deadline (run from the
# repo root, carry .devtree/final = fatbin/ + cmocka/, and optionally the forward
# A/B folder $T):
#
#   DEADLINE=<s> bash bench/final_call.sh
#
# In order of need, each step only while time is left: the build and every
# ctest -L cuda suite plus the sm80 grids, the sweep beside cuDNN and FA2, the
# sanitizers (memcheck, racecheck on the grids that run the changed kernels), the
# multi-GPU ring's harness on one GPU (bench/ring_multi_gpu.sh), and the forward A/B
# of $T (bench/cuda_fwd_ab.sh).  The logs are packed into
# $OUT/logs.tgz after every step, so a cut-off call still brings back the last.
#
# FINAL_DIR (default .devtree/final): the carried folder.  With FA4 beside the
# peers (its wheels travel in two parts): carry .peers/a and
# a FINAL_DIR holding only dev.tar.xz (fatbin/ + cmocka/, xz: FA4's part a and
# the raw fatbins exceed one call's 64 MiB), set SWEEP=0 here, then in the next
# call `PHASE=b bash bench/peers_session.sh` (carry .peers/b) times the build
# beside fa4_cute, cuDNN and FA2.
set -uo pipefail
T0=$SECONDS
DEADLINE=${DEADLINE:-500}
D=$PWD/${FINAL_DIR:-.devtree/final}
L=/tmp/fin
mkdir -p "$L" "$OUT"
if [[ -d .peers/a ]]; then bash .peers/a/install.sh; fi
if [[ -f $D/dev.tar.xz ]]; then
  rm -rf /tmp/fmsa-final && mkdir -p /tmp/fmsa-final && tar xJf "$D/dev.tar.xz" -C /tmp/fmsa-final || exit 1
  D=/tmp/fmsa-final
fi
pack() { tar czf "$OUT/logs.tgz" -C /tmp fin $( [[ -d /tmp/fwdab-logs ]] && echo fwdab-logs) 2>/dev/null; }
# shellcheck source=bench/deadline_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/deadline_steps.sh"
export LD_LIBRARY_PATH=$D/cmocka/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# STEPS: the steps to run (default all; the build runs in any case)
want() { [[ " ${STEPS:-tests bench racecheck sanitize python_overhead ring_multi} " == *" $1 "* ]]; }
if want tests; then build_stages="build tests"; else build_stages=build; fi
step "$build_stages" 240 env OUT=$L/s STAGES="$build_stages" FATBIN_DIR=$D/fatbin \
  CMOCKA_PREFIX=$D/cmocka/usr bash bench/cuda_device_run.sh
grep -h -E "tests passed|\*\*\*Failed|Failed  " $L/s/ctest_cuda*.log 2>/dev/null | head -20
if [[ ${SWEEP:-1} == 1 ]] && want bench; then
  step bench 120 env OUT=$L/b STAGES=bench bash bench/cuda_device_run.sh
  cp $L/b/bench.jsonl "$OUT/" 2>/dev/null
fi
# case 7: f16 d128 causal strided, case 15: f16 d256 causal softcap (the d128 / d256 rows)
if want racecheck; then
  for c in 7 15; do
    step racecheck_bwd_$c 70 compute-sanitizer --tool racecheck --report-api-errors no \
      --error-exitcode 99 --kernel-name kns=fmsa_cuda_bwd_main --log-file $L/racecheck_bwd_$c.log \
      build-cuda/tests/test_grid_backward --backend cuda --case $c
    tail -3 $L/racecheck_bwd_$c.log
  done
fi
want sanitize && step sanitize 120 env OUT=$L/san STAGES=sanitize bash bench/cuda_device_run.sh
# the host cost of one Python call beside the C API through ctypes
want python_overhead && step python_overhead 40 env FLASHMSA_LIBRARY=$PWD/build-cuda/libflashmsa.so \
  python3 bench/python_overhead.py --calls 1000
# the multi-GPU ring's harness as far as one GPU allows (NCCL with P = 1, loopback P = 2-8)
want ring_multi && step ring_multi 150 env OUT=$L/ring bash bench/ring_multi_gpu.sh
if [[ -n "${T:-}" ]]; then
  step fwd_ab 95 env OUT=$L/ab B_ROLE=check PROF=0 SAN="" BUDGET=80 AB_TIMEOUT=70 \
    AB_ARGS="--dims 64,128" bash "$T/bench/cuda_fwd_ab.sh"
fi
pack
echo "=== final_call: $((SECONDS - T0)) s"
