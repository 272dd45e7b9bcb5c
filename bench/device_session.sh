#!/usr/bin/env bash
# One device call that checks the merged tree on the H200 (run from the repo root):
#
#   DEV=<carried folder with fatbin/ and cmocka/> bash bench/device_session.sh
#
#   1. CUDA: bench/cuda_device_run.sh STAGES="build tests" (CUDA_STAGES overrides) (every ctest -L cuda suite,
#      then the grids with FLASHMSA_CUDA_ARCH=sm80), fatbins embedded from $DEV/fatbin
#   2. OpenCL on the H200 through NVIDIA's OpenCL: bench/opencl_device_run.sh
#      (ctest -L opencl, the issue-13 features and merge suites included)
#   3. Python on CUDA tensors: bench/python_cuda_run.sh (pytest under the rule, CUDA
#      graph capture of forward + backward, the per-call overhead)
# Each part logs under $OUT/<part>/ and prints its summary; the exit status is the
# first failing part's.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-device-out}
DEV=$(cd "${DEV:?set DEV to the carried folder}" && pwd)
PARTS=${PARTS:-cuda opencl python}
export LD_LIBRARY_PATH=$DEV/cmocka/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rc=0
mkdir -p "$OUT/cuda" "$OUT/opencl" "$OUT/python"
has() { [[ " $PARTS " == *" $1 "* ]]; }
t=$SECONDS
if has cuda && ! OUT=$OUT/cuda CMOCKA_PREFIX=$DEV/cmocka/usr FATBIN_DIR=$DEV/fatbin \
     STAGES="${CUDA_STAGES:-build tests}" timeout "${CUDA_TIMEOUT:-300}" bash bench/cuda_device_run.sh; then
  rc=1
fi
echo "=== device_session: CUDA part $((SECONDS - t)) s"
t=$SECONDS
if has opencl && ! OUT=$OUT/opencl CMOCKA_PREFIX=$DEV/cmocka/usr CTEST_TIMEOUT=150 timeout 200 \
     bash bench/opencl_device_run.sh; then
  [[ $rc != 0 ]] || rc=2
fi
echo "=== device_session: OpenCL part $((SECONDS - t)) s"
t=$SECONDS
if has python && ! OUT=$OUT/python FATBIN_DIR=$DEV/fatbin PYTEST_TIMEOUT=90 timeout 150 \
     bash bench/python_cuda_run.sh; then
  [[ $rc != 0 ]] || rc=3
fi
echo "=== device_session: Python part $((SECONDS - t)) s"
exit "$rc"
