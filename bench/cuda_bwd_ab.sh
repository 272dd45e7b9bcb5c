#!/bin/sh
# One device call of the backward's A/B (session of 2026-12-03): the harness
# grid on the variants named by GRID_ONLY (their option numbers), then the
# harness sweep of every variant beside the rows, FA2 and cuDNN: causal shapes
# at CAUSAL_S, non-causal ones at FULL_S.  Run from the tree copy that holds
# build-cudabwd/ (bench/cuda_bwd_build.sh, sm_90a); logs in $OUT.
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/cudabwd-out}
mkdir -p "$OUT"
t0=$(date +%s)
el() { echo "[$(($(date +%s) - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
cat COMMIT 2>/dev/null
grep -E "${RES_PAT:-o139267|o237571|o106499|o8195}" build-cudabwd/resources.txt | grep bf16 | cut -c1-175
el "grid (variants ${GRID_ONLY:-139267,237571,106499})"
timeout ${GRID_TIMEOUT:-150} python3 bench/cuda_bwd_check.py --grid --variants --only "${GRID_ONLY:-139267,237571,106499}" 2>&1 |
    tee "$OUT/grid.log" | grep -vE "^ok |hidden keys poisoned"
el "sweep causal (${CAUSAL_S:-512,1024,2048,4096,16384})"
timeout ${SWEEP_TIMEOUT:-150} python3 bench/cuda_bwd_check.py --sweep --variants --causal-only \
    --dims ${DIMS:-64,128,256} --seqlens "${CAUSAL_S:-512,1024,2048,4096,16384}" 2>&1 | tee "$OUT/sweep_causal.log" | cut -c1-420
el "sweep full (${FULL_S:-1024,16384})"
timeout ${SWEEP_TIMEOUT:-150} python3 bench/cuda_bwd_check.py --sweep --variants --full-only \
    --dims ${DIMS:-64,128,256} --seqlens "${FULL_S:-1024,16384}" 2>&1 | tee "$OUT/sweep_full.log" | cut -c1-420
el done
