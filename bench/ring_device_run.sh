#!/usr/bin/env bash
# Ring attention on the device machine (issue 16), one call of the device tool:
#
#   FATBIN_DIR=<cuda-fatbin dir> CMOCKA_PREFIX=<cmocka usr> bash bench/ring_device_run.sh
#
#   build     configure with CUDA (fatbins from FATBIN_DIR: no nvcc time), build only the
#             ring's programs (Ninja -j16)
#   tests     test_ring_accumulate --backend cuda, test_ring_loopback --backend cuda
#             (P = 2, 4, 8 virtual ranks on the one GPU), test_ring_alibi_offset --backend
#             cuda (the ring's ALiBi offset against a padded, masked problem),
#             test_grid_features --backend cuda (ctest's test_grid_features_cuda: ALiBi
#             with offset 0 among the rest), test_ring_nccl (a communicator
#             of size 1; libnccl.so.2 from the Python nvidia-nccl package or torch/lib)
#   sm80      the tests stage's suites again with FLASHMSA_CUDA_ARCH=sm80 (the A100 kernels
#             on the H200), NCCL left out
#   timing    ring_timing --backend cuda (a ring step against the local kernel alone)
#   sanitize  compute-sanitizer memcheck on test_ring_accumulate and the loopback suite
#             with P = 2 only (FLASHMSA_RING_MAX_P=2: memcheck makes every launch slow;
#             SAN_TIMEOUT bounds the loopback run, default 120 s)
# Logs go to $OUT; a short table is printed last; the exit status is the first failure's.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-ring-out}
mkdir -p "$OUT"
STAGES=${STAGES:-build tests timing sanitize}
B=${RING_BUILD:-build-ring} # RING_BUILD: an existing CUDA build tree instead
rc_all=0
summary=()
note() { summary+=("$(printf '%-10s %-5s %s' "$1" "$2" "$3")"); [[ "$2" == ok || $rc_all -ne 0 ]] || rc_all=1; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
export LD_LIBRARY_PATH=${CMOCKA_PREFIX:+$CMOCKA_PREFIX/lib/x86_64-linux-gnu:}${LD_LIBRARY_PATH:-}

if has build; then
  t=$SECONDS
  if cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DFLASHMSA_CUDA=ON \
       -DFLASHMSA_OPENCL=OFF -DFLASHMSA_DIST_MPI=OFF ${CMOCKA_PREFIX:+-DCMAKE_PREFIX_PATH=$CMOCKA_PREFIX} \
       ${FATBIN_DIR:+-DFLASHMSA_CUDA_FATBIN_DIR=$FATBIN_DIR} > "$OUT/build.log" 2>&1 &&
     ninja -C $B -j16 test_ring_accumulate test_ring_loopback test_ring_alibi_offset \
       test_grid_features test_ring_nccl ring_timing \
       >> "$OUT/build.log" 2>&1; then
    note build ok "$((SECONDS - t)) s"
  else
    note build FAIL "see build.log"
  fi
fi

if has tests; then
  note gpu ok "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
  : > "$OUT/tests.log"
  # RING_TESTS="": only NCCL (where ctest -L cuda already ran these suites)
  for t in ${RING_TESTS-test_ring_accumulate test_ring_loopback test_ring_alibi_offset test_grid_features}; do
    s=$SECONDS
    echo "=== $t --backend cuda" >> "$OUT/tests.log"
    FLASHMSA_TEST_BACKEND=cuda $B/tests/$t --backend cuda > "$OUT/$t.tmp" 2>&1
    r=$?
    cat "$OUT/$t.tmp" >> "$OUT/tests.log"
    if [[ $r -eq 0 ]]; then
      note $t ok "$(grep -hE 'cases|PASSED' "$OUT/$t.tmp" | tr '\n' ' ') ($((SECONDS - s)) s)"
    else
      note $t FAIL "rc=$r see tests.log"
    fi
    rm -f "$OUT/$t.tmp"
  done
  nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), 'lib'))" 2>/dev/null ||
         python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
  echo "=== test_ring_nccl; NCCL from $nccl: $(ls "$nccl" | grep -i nccl | tr '\n' ' ')" >> "$OUT/tests.log"
  s=$SECONDS
  # the CUDA runtime for the transport's comm stream (NCCL links its own statically)
  site=$(python3 -c "import site; print(site.getsitepackages()[0])" 2>/dev/null)
  cudart=$(dirname "$(find $site /usr/local/cuda*/lib64 -name 'libcudart.so.1[0-9]*' 2>/dev/null | head -1)")
  echo "CUDA runtime from $cudart" >> "$OUT/tests.log"
  LD_LIBRARY_PATH=$nccl:$cudart:$LD_LIBRARY_PATH NCCL_DEBUG=VERSION FLASHMSA_TEST_NCCL_STREAM=1 \
    $B/tests/test_ring_nccl > "$OUT/nccl.tmp" 2>&1
  r=$?
  cat "$OUT/nccl.tmp" >> "$OUT/tests.log"
  if [[ $r -eq 0 ]]; then note nccl ok "$(grep -hE 'cases|NCCL version' "$OUT/nccl.tmp" | tr '\n' ' ') ($((SECONDS - s)) s)"
  else note nccl FAIL "rc=$r see tests.log"; fi
  rm -f "$OUT/nccl.tmp"
fi

if has sm80; then
  : > "$OUT/sm80.log"
  for t in ${RING_TESTS-test_ring_accumulate test_ring_loopback test_ring_alibi_offset test_grid_features}; do
    s=$SECONDS
    echo "=== FLASHMSA_CUDA_ARCH=sm80 $t --backend cuda" >> "$OUT/sm80.log"
    FLASHMSA_CUDA_ARCH=sm80 FLASHMSA_TEST_BACKEND=cuda $B/tests/$t --backend cuda > "$OUT/$t.tmp" 2>&1
    r=$?
    cat "$OUT/$t.tmp" >> "$OUT/sm80.log"
    if [[ $r -eq 0 ]]; then
      note "sm80 $t" ok "$(grep -hE 'cases|PASSED' "$OUT/$t.tmp" | tr '\n' ' ') ($((SECONDS - s)) s)"
    else
      note "sm80 $t" FAIL "rc=$r see sm80.log"
    fi
    rm -f "$OUT/$t.tmp"
  done
fi

if has timing; then
  if $B/tests/ring_timing --backend cuda > "$OUT/ring_timing.md" 2> "$OUT/ring_timing.err"; then
    note timing ok "ring_timing.md"
  else
    note timing FAIL "see ring_timing.err"
  fi
fi

if has sanitize; then
  s=$SECONDS
  { timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $B/tests/test_ring_accumulate --backend cuda &&
    FLASHMSA_RING_MAX_P=2 timeout ${SAN_TIMEOUT:-120} compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
      $B/tests/test_ring_loopback --backend cuda; } \
    > "$OUT/sanitize.log" 2>&1
  r=$?
  if [[ $r -eq 0 ]]; then note memcheck ok "$(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitize.log") clean runs ($((SECONDS - s)) s)"
  else note memcheck FAIL "rc=$r see sanitize.log"; fi
fi

printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
exit $rc_all
