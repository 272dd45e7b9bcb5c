#!/usr/bin/env bash
# The Python package on CUDA tensors, for the device tool (run from the repo root):
#
#   FATBIN_DIR=<dir of *.fatbin> bash bench/python_cuda_run.sh
#
#   1. the library with CUDA into build-cuda/ (only the library: the fatbins of
#      FATBIN_DIR are embedded, no nvcc), and bench/call_overhead.c beside it
#   2. bench/python_overhead.py: host µs of one flashmsa.attention() call beside
#      the custom op, ctypes and the C API (call_overhead)
#   3. pytest with FLASHMSA_TEST_DEVICE=cuda: test_merge.py, test_features.py
#      and test_cuda.py (CUDA tensors, CUDA graph capture of forward + backward)
#
# Uses the machine's python3 (torch with CUDA, pytest); PYTEST_TIMEOUT bounds
# stage 3 (default 110 s).  Logs go to $OUT (default /tmp/fmsa-py-cuda-out).
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-py-cuda-out}
mkdir -p "$OUT"
B=build-cuda
rc=0

t=$SECONDS
fat=()
[[ -n "${FATBIN_DIR:-}" ]] && fat=(-DFLASHMSA_CUDA_FATBIN_DIR="$FATBIN_DIR")
if cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DFLASHMSA_CUDA=ON \
     -DFLASHMSA_OPENCL=OFF "${fat[@]}" > "$OUT/configure.log" 2>&1 &&
   ninja -C $B -j16 flashmsa > "$OUT/build.log" 2>&1 &&
   cc -O2 -std=c11 -Iinclude bench/call_overhead.c -L$B -lflashmsa -Wl,-rpath,"$top/$B" \
     -o $B/call_overhead >> "$OUT/build.log" 2>&1; then
  echo "python_cuda: build $((SECONDS - t)) s"
else
  echo "python_cuda: build FAILED"
  tail -20 "$OUT/configure.log" "$OUT/build.log"
  exit 1
fi
export FLASHMSA_LIBRARY=$top/$B/libflashmsa.so PYTHONPATH=$top/python PYTHONUNBUFFERED=1
python3 -c 'import torch, flashmsa; print("python_cuda: torch", torch.__version__,
  torch.cuda.get_device_name(), [d.backend + ":" + d.name for d in flashmsa.devices()])'

t=$SECONDS
if ! timeout 90 python3 bench/python_overhead.py --c-program $B/call_overhead \
     > "$OUT/overhead.txt" 2>&1; then
  rc=1
fi
cat "$OUT/overhead.txt"
echo "python_cuda: overhead $((SECONDS - t)) s"

t=$SECONDS
(cd tests/python && FLASHMSA_TEST_DEVICE=cuda timeout "${PYTEST_TIMEOUT:-110}" \
   python3 -m pytest -v -p no:cacheprovider -rs test_merge.py test_features.py test_cuda.py) \
  > "$OUT/pytest_cuda.txt" 2>&1 || rc=1
grep -E "FAILED|Error|SKIPPED|passed|failed" "$OUT/pytest_cuda.txt" | tail -40
echo "python_cuda: pytest $((SECONDS - t)) s, rc $rc"
exit $rc
