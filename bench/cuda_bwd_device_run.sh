#!/bin/sh
# One device call of the CUDA backward: resources, correctness grid (with the
# timing variants), determinism, then the standard sweep beside FA2 / cuDNN.
# Run from the tree that holds build-cudabwd/ (built here by cuda_bwd_build.sh).
# STEPS (default "grid det sweep") picks the parts; logs go to $OUT.
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/cudabwd-out}
mkdir -p "$OUT"
STEPS=${STEPS:-"grid det sweep"}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
git log -1 --format=%h 2>/dev/null
cut -c1-160 build-cudabwd/resources.txt | grep -E "main_bf16_d(64|128|256)|pre_bf16" | grep sm_90a
for s in $STEPS; do
    case $s in
    grid) timeout 170 python3 bench/cuda_bwd_check.py --grid --variants 2>&1 | tee "$OUT/grid.log" | grep -v "^ok " ;;
    det) timeout 60 python3 bench/cuda_bwd_check.py --det 2>&1 | tee "$OUT/det.log" ;;
    sweep) timeout 200 python3 bench/cuda_bwd_check.py --sweep --variants 2>&1 | tee "$OUT/sweep.log" ;;
    esac
done
