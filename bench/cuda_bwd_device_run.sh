#!/bin/sh
# One device call of the CUDA backward: resources, correctness grid (with the
# timing variants), determinism, then the standard sweep beside FA2 / cuDNN.
# Run from the tree that holds build-cudabwd/ (built here by cuda_bwd_build.sh).
# STEPS (default "grid det sweep") picks the parts, SWEEP_ARGS narrows the sweep
# (e.g. "--dims 128 --seqlens 4096,16384"); PROFILE_OPTS adds d128 option rows to
# the profile step (e.g. "8,1024", with PROFILE_COUNT=4 kernels); logs go to $OUT.
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/cudabwd-out}
mkdir -p "$OUT"
STEPS=${STEPS:-"grid det sweep"}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
cat COMMIT 2>/dev/null
cut -c1-160 build-cudabwd/resources.txt | grep -E "main_bf16_d(64|128|256)|pre_bf16"
for s in $STEPS; do
    case $s in
    grid) timeout 170 python3 bench/cuda_bwd_check.py --grid --variants 2>&1 | tee "$OUT/grid.log" | grep -v "^ok " ;;
    memcheck) for tool in memcheck racecheck initcheck; do
            timeout 100 compute-sanitizer --tool $tool --kernel-name kns=fmsa_cuda_bwd python3 bench/cuda_bwd_check.py --quick-grid >"$OUT/san-$tool.log" 2>&1
            echo "$tool rc=$?: $(grep -E "ERROR SUMMARY|grid:" "$OUT/san-$tool.log" | tr '\n' ' ')"
        done ;;
    det) timeout 60 python3 bench/cuda_bwd_check.py --det 2>&1 | tee "$OUT/det.log" ;;
    profile) timeout 100 ncu --clock-control none -k regex:"fmsa_cuda_bwd_main|flash_bwd_dq_dk_dv" -c ${PROFILE_COUNT:-2} \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats \
        --section SourceCounters python3 bench/cuda_bwd_check.py --profile --profile-opts "${PROFILE_OPTS:-}" >"$OUT/ncu.log" 2>&1
        grep -E "==PROF==|fmsa_cuda|flash_bwd|Throughput|Pipe|Stall|Warp Cycles|Issued|Bank|Busy|Shared" "$OUT/ncu.log" | cut -c1-120 | head -80 ;;
    sweep) timeout 200 python3 bench/cuda_bwd_check.py --sweep --variants ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log" ;;
    esac
done
