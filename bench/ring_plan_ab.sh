#!/usr/bin/env bash
# A/B of the ring's host code on one GPU, one device call (run from the repo root):
# this tree against the same tree with dist/ring_plan.c replaced by $BEFORE (a copy of
# the file at an earlier commit), both with the fatbins of FATBIN_DIR (no nvcc), then
# ring_timing --backend cuda in each, alternating ROUNDS times (a ring step against the
# local kernel, P virtual ranks on the one GPU), and bench/ring_multi_gpu.sh on this
# tree's build (the multi-GPU harness as far as one GPU allows).  Logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ringab}
mkdir -p "$OUT"
: "${BEFORE:?BEFORE=<ring_plan.c of the earlier commit>}" "${FATBIN_DIR:?}"
for v in after before; do
  rm -rf /tmp/rab-$v && mkdir -p /tmp/rab-$v
  # the working tree as it came (the device copy's .git may be older than its files)
  tar cf - --exclude=./.git --exclude=./.devtree --exclude=./.peers --exclude='./build*' . |
    tar xf - -C /tmp/rab-$v
  [[ $v == before ]] && cp "$BEFORE" /tmp/rab-$v/dist/ring_plan.c
  (cd /tmp/rab-$v && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
     -DFLASHMSA_CUDA=ON -DFLASHMSA_OPENCL=OFF -DFLASHMSA_DIST_MPI=OFF \
     ${CMOCKA_PREFIX:+-DCMAKE_PREFIX_PATH=$CMOCKA_PREFIX} -DFLASHMSA_CUDA_FATBIN_DIR="$FATBIN_DIR" \
     > "$OUT/build_$v.log" 2>&1 && ninja -C build -j16 flashmsa ring_timing >> "$OUT/build_$v.log" 2>&1) ||
    { echo "build $v failed"; tail -20 "$OUT/build_$v.log"; exit 1; }
done
for i in $(seq "${ROUNDS:-2}"); do
  for v in before after; do
    echo "=== ring_timing, $v, round $i"
    /tmp/rab-$v/build/tests/ring_timing --backend cuda 2>&1 | tee "$OUT/timing_${v}_$i.md"
  done
done
LIB=/tmp/rab-after/build/libflashmsa.so OUT=$OUT/multi bash /tmp/rab-after/bench/ring_multi_gpu.sh
