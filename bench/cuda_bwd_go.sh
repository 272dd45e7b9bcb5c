#!/bin/sh
# One device call of the backward's dev harness as the bwd helper ran it
# (2026-12-02): grid with the variants and the NaN-in-hidden-keys cases,
# determinism, then the sweep (d128 at three lengths, d64/d256 at two).
# Run from the tree copy that holds build-cudabwd/.  Logs under $OUT.
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/cudabwd-out}
export OUT
STEPS="grid det" sh bench/cuda_bwd_device_run.sh 2>&1 | tail -60
STEPS=sweep SWEEP_ARGS="--dims 128 --seqlens 1024,4096,16384" sh bench/cuda_bwd_device_run.sh >/dev/null 2>&1
cp "$OUT/sweep.log" "$OUT/sweep128.log"
STEPS=sweep SWEEP_ARGS="--dims 64,256 --seqlens 1024,16384" sh bench/cuda_bwd_device_run.sh >/dev/null 2>&1
cut -c1-400 "$OUT/sweep128.log" "$OUT/sweep.log"
