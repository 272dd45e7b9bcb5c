#!/usr/bin/env bash
# The OpenCL suites on the device machine's H200 through NVIDIA's OpenCL, in one
# device call (run from the root of a source tree, e.g. an extracted `git archive`):
#
#   CMOCKA_PREFIX=<dir> OUT=$OUT bash bench/opencl_device_run.sh
#
#   setup  registers libnvidia-opencl.so.1 with the ICD loader (PoCL is registered
#          there too; GPUs enumerate first, so OpenCL device 0 must be the H200)
#   build  configure + build with OpenCL only (-DFLASHMSA_CUDA=OFF: no nvcc time)
#          and the tests (cmocka from CMOCKA_PREFIX) into build-ocl-dev/
#   test   ctest -L opencl: every OpenCL grid (forward, backward, edges, large and
#          the issue-13 features grid when the tree has it) + bad input, on device 0;
#          the generic (GPU-shaped) kernels run there, so shapes whose tiles do not
#          fit 48 KiB of local memory are reported as skipped (NOT_SUPPORTED)
#
# CMOCKA_PREFIX: the folder that `dpkg -x` of libcmocka0 and libcmocka-dev filled
# (it holds usr/lib/x86_64-linux-gnu/...; ../shared/TOOLCHAINS.md).  The device has
# no cmocka: without it the build has no tests and the test stage fails.
# Logs go to $OUT (default /tmp/fmsa-ocl-out): configure.log, build.log,
# devices.txt, ctest_opencl.log, skips.txt (and the last 60 lines of the ctest
# log are printed on a failure).  CTEST_J (default 4) parallel tests, at most
# CTEST_TIMEOUT (default 420) s, so build + tests stay inside one 600 s call;
# the exit status is the first failing stage's.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-ocl-out}
mkdir -p "$OUT"
STAGES=${STAGES:-setup build test}
B=build-ocl-dev
rc_all=0
summary=()
note() {
  summary+=("$(printf '%-6s %-5s %s' "$1" "$2" "$3")")
  if [[ "$2" != ok && $rc_all -eq 0 ]]; then rc_all=1; fi
}
has() { [[ " $STAGES " == *" $1 "* ]]; }

if has setup; then
  mkdir -p /etc/OpenCL/vendors
  [[ -f /etc/OpenCL/vendors/nvidia.icd ]] || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
  note setup ok "icd: $(ls /etc/OpenCL/vendors | tr '\n' ' ')"
fi

cm=()
if [[ -n "${CMOCKA_PREFIX:-}" ]]; then
  cfg=$(find "$CMOCKA_PREFIX" -name cmocka-config.cmake -print -quit 2>/dev/null)
  lib=$(find "$CMOCKA_PREFIX" -name 'libcmocka.so.0*' -print -quit 2>/dev/null)
  [[ -n "$cfg" ]] && cm=(-Dcmocka_DIR="$(dirname "$cfg")")
  [[ -n "$lib" ]] && export LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}"
fi

if has build; then
  t=$SECONDS
  if cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
       -DFLASHMSA_OPENCL=ON -DFLASHMSA_CUDA=OFF "${cm[@]}" > "$OUT/configure.log" 2>&1 &&
     ninja -C $B -j16 > "$OUT/build.log" 2>&1; then
    note build ok "$((SECONDS - t)) s$([[ ${#cm[@]} -eq 0 ]] && echo ' (no cmocka: no tests)')"
  else
    note build FAIL "see build.log / configure.log"
    tail -30 "$OUT/build.log" "$OUT/configure.log"
  fi
fi

$B/apps/flashmsa devices > "$OUT/devices.txt" 2>&1
cat "$OUT/devices.txt"

if has test; then
  if ! grep -E '^[0-9]+ +opencl +0 +gpu' "$OUT/devices.txt" | grep -qi nvidia; then
    note test FAIL "OpenCL device 0 is not the NVIDIA GPU (devices.txt)"
  else
    t=$SECONDS
    export POCL_CACHE_DIR=$top/$B/pocl-cache
    if timeout "${CTEST_TIMEOUT:-420}" ctest --test-dir $B -L opencl -j "${CTEST_J:-4}" --output-on-failure \
         > "$OUT/ctest_opencl.log" 2>&1; then
      note test ok "$(grep -E 'tests passed' "$OUT/ctest_opencl.log") ($((SECONDS - t)) s)"
    else
      note test FAIL "$(grep -E 'tests passed|tests failed' "$OUT/ctest_opencl.log") ($((SECONDS - t)) s)"
      tail -60 "$OUT/ctest_opencl.log"
    fi
    # what the grids skipped (NOT_SUPPORTED: tiles that do not fit the local memory)
    grep -hoE "refused \(FMSA_ERR_NOT_SUPPORTED\): .*|not supported by this backend: .*" \
      "$top/$B"/Testing/Temporary/LastTest.log \
      2>/dev/null | sort | uniq -c | sort -rn | head -20 > "$OUT/skips.txt"
    grep -E "Test +#|Passed|Failed|SKIP" "$OUT/ctest_opencl.log" | tail -20
  fi
fi

# the tree's commit: FMSA_COMMIT, else a COMMIT file beside the sources (an
# extracted archive inside another checkout would report that one's HEAD)
commit=${FMSA_COMMIT:-$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo tree)}
echo "---- summary (commit $commit)"
printf '%s\n' "${summary[@]}"
[[ -s "$OUT/skips.txt" ]] && { echo "---- skipped (count, reason)"; cat "$OUT/skips.txt"; }
exit $rc_all
