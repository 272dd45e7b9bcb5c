#!/usr/bin/env bash
# The merged tree's device session with FA4 beside it: two or three device calls
# in a row (FA4's wheels travel in two parts, ../shared/tools/gpu-peers/prepare.sh),
# run from the repo root.
#
#   call 1, carry [".peers/a", ".devtree/final"]:
#       PHASE=a bash bench/peers_session.sh
#     installs FA4's part a (when .peers/a came along); takes .devtree/final's
#     fatbin/ + cmocka/ (built on the development machine), from dev.tar.xz when
#     that is there; then
#     bench/device_session.sh (PARTS, default "cuda opencl python"): the CUDA build
#     into build-cuda/ and every ctest -L cuda suite, OpenCL, Python; then the ring's
#     NCCL run and ring_timing (bench/ring_device_run.sh on build-cuda)
#   (when FA4's part a and the fatbins do not fit one call's 64 MiB: call 1 without
#   .peers/a, then a call with carry [".peers/a"]: PHASE=fa4a bash bench/peers_session.sh)
#   call 2, carry [".peers/b"]:
#       PHASE=b bash bench/peers_session.sh
#     installs FA4's part b (needs call 1's part a on the same warm machine), then
#     times build-cuda's library beside fa4_cute, cuDNN and FA2
#     (bench/cuda_device_run.sh STAGES=bench, BENCH_ARGS passed through)
# Logs under $OUT; the exit status is the first failing step's.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-device-out}
mkdir -p "$OUT"
case "${PHASE:?PHASE=a or b}" in
fa4a)
  bash .peers/a/install.sh
  ;;
a)
  if [[ -d .peers/a ]]; then bash .peers/a/install.sh || exit 1; fi
  rm -rf /tmp/fmsa-dev /tmp/fmsa-logs && mkdir -p /tmp/fmsa-dev
  if [[ -f .devtree/final/dev.tar.xz ]]; then
    tar xJf .devtree/final/dev.tar.xz -C /tmp/fmsa-dev || exit 1
  else
    cp -r .devtree/final/fatbin .devtree/final/cmocka /tmp/fmsa-dev/ || exit 1
  fi
  # the logs (more files than a call brings back) travel as one archive; the
  # failing tests' names are printed
  DEV=/tmp/fmsa-dev OUT=/tmp/fmsa-logs PARTS="${PARTS:-cuda opencl python}" \
    bash bench/device_session.sh
  rc=$?
  # the ring's NCCL run (a communicator of size 1) and its step timing on the same build
  RING_BUILD=build-cuda RING_TESTS="" OUT=/tmp/fmsa-logs/ring STAGES="tests timing" \
    timeout 120 bash bench/ring_device_run.sh || [[ $rc != 0 ]] || rc=4
  cat /tmp/fmsa-logs/ring/ring_timing.md 2>/dev/null
  grep -h -E "tests passed|\*\*\*Failed|Failed  |FAIL|ERROR SUMMARY" -r /tmp/fmsa-logs | sort | uniq -c | head -40
  tar czf "$OUT/logs_a.tgz" -C /tmp fmsa-logs
  exit $rc
  ;;
b)
  bash .peers/b/install.sh || exit 1
  # shellcheck disable=SC1091
  source /tmp/fa4site/env.sh
  [[ -f build-cuda/libflashmsa.so ]] || { echo "build-cuda/ is not here: run PHASE=a first"; exit 1; }
  OUT=$OUT STAGES=bench bash bench/cuda_device_run.sh
  ;;
*) echo "PHASE must be a, fa4a or b"; exit 2 ;;
esac
