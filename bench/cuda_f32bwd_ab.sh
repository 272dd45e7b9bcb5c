#!/usr/bin/env bash
# A/B of the fp32 backward's S^T / dP^T loop on the device (repo root or a copy):
#   A = fatbin/ as carried (the separate S^T and dP^T loops), B = the same fatbins with
#   fbB/fmsa_cuda_bwd_f32.fatbin, built here from the kernel with
#   backends/cuda/dev/f32bwd_fuse.patch applied (both products in one loop).
#   Prepared 2026-12-02, not run (the session's device time was spent).
#   CMOCKA_PREFIX=<dir> OUT=<dir> bash bench/cuda_f32bwd_ab.sh
# Builds both libraries, runs the backward grids on B, then times A B (every shape) and
# B A (d128 s4096) with bench/cuda_f32_bwd.py, no peers.  Results: $OUT/ab.log, ab_*.json.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-f32ab-out}
mkdir -p "$OUT"
log=$OUT/ab.log
rm -rf fatbinB && cp -r fatbin fatbinB && cp fbB/fmsa_cuda_bwd_f32.fatbin fatbinB/
for v in A B; do
  fb=$PWD/fatbin
  [[ $v == B ]] && fb=$PWD/fatbinB
  t=$SECONDS
  if cmake -S . -B build-$v -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
       -DFLASHMSA_CUDA=ON -DFLASHMSA_OPENCL=OFF ${CMOCKA_PREFIX:+-DCMAKE_PREFIX_PATH=$CMOCKA_PREFIX} \
       -DFLASHMSA_CUDA_FATBIN_DIR="$fb" > /tmp/ab_cfg$v.log 2>&1 &&
     ninja -C build-$v -j16 flashmsa test_grid_backward test_grid_edges test_grid_features \
       > /tmp/ab_build$v.log 2>&1; then
    echo "build $v ok $((SECONDS - t)) s" >> "$log"
  else
    echo "build $v FAIL" >> "$log"; tail -20 /tmp/ab_build$v.log >> "$log"; exit 1
  fi
done
for g in backward edges features; do
  FLASHMSA_TEST_BACKEND=cuda timeout 100 build-B/tests/test_grid_$g --backend cuda > /tmp/ab_g$g.log 2>&1
  echo "B grid_$g rc=$? $(grep -c '^\[       OK' /tmp/ab_g$g.log) ok, $(grep -c '^\[  FAILED' /tmp/ab_g$g.log) failed" >> "$log"
  grep -A4 '^\[  FAILED' /tmp/ab_g$g.log | head -20 >> "$log"
done
run() {  # variant, round, extra args
  timeout 60 python3 bench/cuda_f32_bwd.py --lib build-$1/libflashmsa.so --det-runs 0 --peers '' \
    --json "$OUT/ab_$2_$1.json" "${@:3}" > /tmp/ab_b.log 2>&1
  echo "== $1 (round $2, rc $?)" >> "$log"
  grep -E '^d[0-9]+ s' /tmp/ab_b.log | cut -c1-50 >> "$log"
}
run A 1
run B 1
run B 2 --dims 128 --seqlens 4096
run A 2 --dims 128 --seqlens 4096
cat "$log"
