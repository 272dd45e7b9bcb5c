#!/usr/bin/env bash
# One device call for the Hopper (wgmma) backward (fmsa_cuda_bwd_wg.cu), run
# from the repo root with the fatbins built here (carry $WG_DIR and .devtree/cmocka):
#
#   WG_DIR=.devtree/wg STEPS="probe build tests runs bench" DEADLINE=<s> bash bench/cuda_wg_call.sh
#
#   probe      $WG_DIR/probe (backends/cuda/dev/fmsa_wgmma_probe.cu, built here); a
#              failing convention stops the call
#   build      bench/cuda_device_run.sh's build from $WG_DIR/fatbin (no nvcc on the device)
#   tests      its tests stage (ctest -L cuda, the grids with FLASHMSA_CUDA_ARCH=sm80), then
#              test_grid_backward with FLASHMSA_CUDA_WGMMA=0 (the mma.sync rows)
#   runs       flashmsa run --full-check (every element against fp64) on shapes of each head
#              dim of RUN_DIMS (default "64 128"), bf16 / fp16, for each FLASHMSA_CUDA_WGMMA
#              value of RUN_WGMMA (default 1); the log names the kernel each pass ran
#   racecheck  compute-sanitizer racecheck and memcheck on a causal backward of each RUN_DIMS
#   bench      its bench stage (bench/cuda_vs_peers.py, BENCH_ARGS) once per FLASHMSA_CUDA_WGMMA
#              value of BENCH_WGMMA (default "1 0") and FLASHMSA_CUDA_WGMMA_FWD value of
#              BENCH_WGMMA_FWD (default: the call's, else 0), FA2 and cuDNN beside each
#   ncu        Nsight Compute sections of the wgmma kernel, d128 s4096 non-causal
#   fwd_dev    $WG_DIR/fwd_dev (backends/cuda/dev/fmsa_wgmma_fwd_dev.cu, built here): the
#              forward wgmma kernel, its three schedules, against its fp32
#              reference, timed, on the standard sweep's d128 shapes (b*s 16384, 16
#              heads), then on ragged, GQA and window shapes; then d256 (8 heads) likewise;
#              it runs before the build, so FLASHMSA_CUDA_WGMMA_FWD=auto can choose from it
#
# FLASHMSA_CUDA_WGMMA_FWD=1 (or 2) set for the call runs the Hopper forward (off by default,
# cuda_fwd_instances.h) in every step; the runs and the sanitizers then name its kernel.
# Steps run in that order while the deadline leaves them their time (bench/deadline_steps.sh).
# Logs to $OUT.
set -uo pipefail
WG_DIR=${WG_DIR:-.devtree/wg}
OUT=${OUT:-/tmp/fmsa-wg-out}
STEPS=${STEPS:-probe build tests runs bench}
T0=$SECONDS
DEADLINE=${DEADLINE:-500}
B=build-cuda
mkdir -p "$OUT"
pack() { :; } # every log is written under $OUT already
# shellcheck source=bench/deadline_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/deadline_steps.sh"
has() { [[ " $STEPS " == *" $1 "* ]]; }
export FATBIN_DIR=$PWD/$WG_DIR/fatbin CMOCKA_PREFIX=${CMOCKA_PREFIX:-$PWD/.devtree/cmocka/usr}
export BENCH_ARGS="${BENCH_ARGS:---dims 128 --seqlens 1024,4096,16384} --decode= --short="

if has probe; then
  step probe 30 "$WG_DIR/probe" | tee "$OUT/probe.log"
  # the kernel is written to the swap=0 reading: where that fails, nothing else can pass
  if grep -q "swap=0: FAIL\|CUDA error" "$OUT/probe.log"; then echo "probe failed: stop"; exit 1; fi
fi
if has fwd_dev; then
  # every schedule (serial, :ovl, :ws) in one process each shape; then ragged / GQA / window
  # shapes; each run under its own timeout, so a hang costs 30 s, not the step
  # shellcheck disable=SC2016
  step fwd_dev 260 bash -c 'r() { local o rc; o=$(timeout 30 "$B" "$@" 2>&1); rc=$?
      if [[ $rc != 0 ]]; then echo "RUNFAIL $* rc $rc: $(echo "$o" | tail -1)"; else echo "$o"; fi; }
    B=$0; for dt in bf16 f16; do for s in 1024 4096 16384; do for wr in -1 0; do
    for k in $dt $dt:ovl $dt:ws; do r $k $((16384 / s)) 16 16 $s $s -1 $wr 20; done; done; done; done
    for k in bf16 bf16:ovl f16:ovl bf16:ws; do r $k 2 16 4 1000 1500 100 0 5; r $k 1 8 8 77 300 -1 -1 5
      r $k 3 4 2 130 129 -1 0 5; r $k 1 4 1 384 1000 200 50 5; done
    for s in 512 4096 16384; do for wr in -1 0; do for k in bf16 bf16:ovl bf16:ws; do
      r $k $((16384 / s)) 8 8 $s $s -1 $wr 20 256; done; done; done
    for k in bf16 bf16:ovl f16:ovl bf16:ws; do r $k 2 8 2 1000 1500 100 0 5 256; r $k 1 4 4 77 300 -1 -1 5 256; done' \
    "$WG_DIR/fwd_dev" | tee "$OUT/fwd_dev.log"
  echo "== fwd_dev: $(grep -c ' ok$' "$OUT/fwd_dev.log") ok, $(grep -c 'CHECK$' "$OUT/fwd_dev.log") CHECK, $(grep -c RUNFAIL "$OUT/fwd_dev.log") RUNFAIL"
fi
# FLASHMSA_CUDA_WGMMA_FWD=auto: the overlapped schedule (1) where fwd_dev passed every run of
# it, else the serial one (2) where that did, else the mma.sync rows (0); the choice is
# written to /tmp/fmsa_wgmma_fwd for a later call of the same lease
if [[ ${FLASHMSA_CUDA_WGMMA_FWD:-} == auto ]]; then
  L=$OUT/fwd_dev.log c=0
  if [[ -s $L ]]; then
    bad() { grep -E "^d[0-9]+ $1 b.*CHECK\$|^RUNFAIL $1 " "$L" | grep -q .; }
    if ! bad '(bf16|f16):ovl'; then c=1; elif ! bad '(bf16|f16)'; then c=2; fi
  fi
  export FLASHMSA_CUDA_WGMMA_FWD=$c
  echo "$c" > /tmp/fmsa_wgmma_fwd
  echo "== FLASHMSA_CUDA_WGMMA_FWD=$c for the steps that follow"
fi
has build && step build 120 env OUT="$OUT/build" STAGES=build bash bench/cuda_device_run.sh
if has tests; then
  step tests 200 env OUT="$OUT/tests" STAGES=tests bash bench/cuda_device_run.sh
  step tests_mma 60 env FLASHMSA_CUDA_WGMMA=0 ctest --test-dir $B -R '^test_grid_backward_cuda$'
fi
# shellcheck disable=SC2016
runs='for d in ${RUN_DIMS:-64 128}; do
base="--backend cuda --batch 2 --heads 8 --dim $d --full-check --repeat 1"
for wg in ${RUN_WGMMA:-1}; do
  for dt in bf16 fp16; do
    for extra in "--seqlen 1024 --no-causal" "--seqlen 1024 --causal" "--seqlen 512 --heads-kv 2 --causal" \
                 "--seqlen-q 512 --seqlen-k 777 --causal" "--seqlen-q 777 --seqlen-k 512 --no-causal" \
                 "--seqlen 1024 --window 100,0" "--seqlen 640 --window 64,64" "--seqlen 1024 --sinks random --causal" \
                 "--seqlen 1000 --no-causal" "--seqlen 1040 --causal"; do
      r=$(FLASHMSA_CUDA_WGMMA=$wg FLASHMSA_LOG=debug build-cuda/apps/flashmsa run $base --dtype $dt $extra 2>&1)
      echo "wg=$wg d$d $dt $extra: $(echo "$r" | grep -o "forward fmsa_cuda_fwd_[a-z0-9_]*" | head -1) $(echo "$r" | grep -o "backward fmsa_cuda_bwd_[a-z0-9_]*" | head -1) $(echo "$r" | grep -oE "^(PASS|FAIL).*" | head -1)"
    done
  done
done
done'
if has runs; then
  step runs $((110 * $(echo ${RUN_DIMS:-64 128} | wc -w))) env RUN_WGMMA="${RUN_WGMMA:-1}" RUN_DIMS="${RUN_DIMS:-64 128}" bash -c "$runs" > "$OUT/runs.log"
  echo "== runs: $(grep -c PASS "$OUT/runs.log") PASS, $(grep -c FAIL "$OUT/runs.log") FAIL of $(grep -c '^wg=' "$OUT/runs.log")"
  grep '^wg=' "$OUT/runs.log" | grep -v PASS | head -20
  grep -o "wg=[^ ]* .*backward [a-z0-9_]*" "$OUT/runs.log" | awk '{print $1, $NF}' | sort | uniq -c
fi
if has racecheck; then
  for d in ${RUN_DIMS:-64 128}; do
    for tool in racecheck memcheck; do
      step "$tool d$d" 60 compute-sanitizer --tool $tool --report-api-errors no --log-file "$OUT/sanitizer_${tool}_d$d.log" \
        $B/apps/flashmsa run --backend cuda --dtype bf16 --batch 1 --heads 2 --seqlen 256 --dim "$d" --causal \
        --repeat 1 --warmup 0
      grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/sanitizer_${tool}_d$d.log"
    done
  done
fi
if has bench; then
  for fw in ${BENCH_WGMMA_FWD:-${FLASHMSA_CUDA_WGMMA_FWD:-0}}; do
    for wg in ${BENCH_WGMMA:-1 0}; do
      step "bench FLASHMSA_CUDA_WGMMA=$wg FLASHMSA_CUDA_WGMMA_FWD=$fw" 150 env FLASHMSA_CUDA_WGMMA="$wg" \
        FLASHMSA_CUDA_WGMMA_FWD="$fw" OUT="$OUT/bench_wg${wg}_fwd$fw" STAGES=bench bash bench/cuda_device_run.sh
    done
  done
fi
if has ncu; then
  step ncu 120 ncu --kernel-name regex:bwd_wg --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section Occupancy --log-file "$OUT/ncu.log" $B/apps/flashmsa run \
    --backend cuda --dtype bf16 --batch 4 --heads 16 --seqlen 4096 --dim 128 --no-causal --warmup 0 --repeat 1 \
    --check-rows 4
  grep -E "Duration|Elapsed Cycles|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Compute \(SM\)|Memory Throughput" \
    "$OUT/ncu.log" | head -20
fi
echo "== done at $((SECONDS - T0)) s"
