#!/usr/bin/env bash
# The CPU backend on the device machine's CPU (16-core Xeon with AVX-512 and
# AMX), in one call of at most ~9 minutes:
#   1. configure + build the library and the flashmsa program (no tests: the
#      machine has no cmocka), OpenCL off;
#   2. `flashmsa run` once per forced kernel path (FLASHMSA_CPU_KERNEL=amx,
#      avx512, avx2, generic, scalar), fp32 and bf16, each checked element by
#      element against the fp64 reference (PASS/FAIL; NOT_SUPPORTED when the
#      path is absent from this CPU or build);
#   3. `flashmsa peak` on 1, 2 and all threads;
#   4. 1 -> 2 thread scaling of the forward (d=128, s=2048);
#   5. bench/cpu_vs_torch.py (flashmsa vs torch SDPA, same process, same
#      threads) on 2 and on all threads, each with a time budget;
#   6. a compact summary.
# Everything lands in $OUT (the device tool's output folder; ./cpu-device-out
# when run by hand).  Run from the repository root:
#   bash bench/cpu_device_run.sh
set -u
OUT=${OUT:-$PWD/cpu-device-out}
mkdir -p "$OUT"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*"; }
NT=$(nproc)
B=build-cpu-device
CLI=$B/apps/flashmsa

log "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $NT threads"
lscpu > "$OUT/lscpu.txt" 2>&1
grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E 'avx512|amx|fma|avx2' | tr '\n' ' ' \
  > "$OUT/isa_flags.txt"
log "isa: $(cat "$OUT/isa_flags.txt")"

log "configure + build"
if ! cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
    -DFLASHMSA_OPENCL=OFF > "$OUT/cmake.log" 2>&1 ||
   ! ninja -C $B flashmsa flashmsa_cli > "$OUT/build.log" 2>&1; then
  log "BUILD FAILED"; tail -30 "$OUT/build.log" "$OUT/cmake.log"; exit 2
fi
grep -i warning "$OUT/build.log" | head -20

# ---- 2. correctness of every kernel path (full element check vs fp64) -------------
: > "$OUT/paths.txt"
for k in amx avx512 avx2 generic scalar; do
  for dt in fp32 bf16; do
    f="$OUT/run_${k}_${dt}.txt"
    FLASHMSA_LOG=info FLASHMSA_CPU_KERNEL=$k timeout 120 $CLI run --backend cpu --threads "$NT" \
      --dtype $dt --batch 2 --heads 8 --heads-kv 2 --seqlen 384 --dim 128 --full-check > "$f" 2>&1
    rc=$?
    f2="$OUT/run_${k}_${dt}_d64win.txt" # odd sizes, window + softcap, GQA, d=64
    FLASHMSA_CPU_KERNEL=$k timeout 120 $CLI run --backend cpu --threads "$NT" --dtype $dt \
      --batch 1 --heads 4 --heads-kv 1 --seqlen-q 200 --seqlen-k 333 --dim 72 --no-causal \
      --window 50,20 --softcap 30 --full-check > "$f2" 2>&1
    rc2=$?
    if grep -q NOT_SUPPORTED "$f"; then res="not supported on this CPU/build"
    elif [ $rc -eq 0 ] && [ $rc2 -eq 0 ]; then res="PASS"
    else res="FAIL (rc $rc / $rc2)"; fi
    fwd=$(awk '/^forward/ {print $4}' "$f"); bwd=$(awk '/^backward/ {print $4}' "$f")
    printf '%-8s %-5s %-32s fwd %8s bwd %8s GFLOP/s (b2 h8/2 s384 d128 causal)\n' \
      "$k" "$dt" "$res" "${fwd:--}" "${bwd:--}" | tee -a "$OUT/paths.txt"
  done
done

# ---- 3. peak ---------------------------------------------------------------------
log "peak"
$CLI peak --threads "1,2,$NT" > "$OUT/peak.txt" 2>&1
$CLI peak --threads "1,2,$NT" --json > "$OUT/peak.jsonl" 2>/dev/null
cat "$OUT/peak.txt"

# ---- 4. scaling 1 -> 2 threads, forward fp32 d=128 s=2048 -------------------------
log "scaling"
for t in 1 2; do
  $CLI run --backend cpu --threads $t --batch 1 --heads 4 --seqlen 2048 --dim 128 --no-causal \
    --no-backward --repeat 3 --check-rows 8 > "$OUT/scale_t$t.txt" 2>&1
done
s1=$(awk '/^forward/ {print $4}' "$OUT/scale_t1.txt"); s2=$(awk '/^forward/ {print $4}' "$OUT/scale_t2.txt")
log "fwd fp32 d128 s2048: 1 thread ${s1:-?} GFLOP/s, 2 threads ${s2:-?} GFLOP/s"

# ---- 5. flashmsa vs torch --------------------------------------------------------
for t in 2 "$NT"; do
  log "cpu_vs_torch.py on $t threads (budget 150 s)"
  timeout 240 python3 bench/cpu_vs_torch.py --lib $B/libflashmsa.so --cli $CLI --threads "$t" \
    --dims 128,64 --seqlens 2048,8192,512 --min-time 0.3 --max-runs 3 --budget 150 \
    --json "$OUT/torch.jsonl" > "$OUT/torch_t$t.txt" 2> "$OUT/torch_t$t.err"
  echo "  rc $?"; tail -3 "$OUT/torch_t$t.err"
done

# ---- 6. summary ------------------------------------------------------------------
log "SUMMARY"
echo "== kernel paths (flashmsa run, every element vs fp64)"; cat "$OUT/paths.txt"
echo "== peak (GFLOP/s)"; grep -v '^#' "$OUT/peak.txt"
echo "== scaling fwd fp32 d128 s2048: t1 ${s1:-?} t2 ${s2:-?} GFLOP/s"
echo "== flashmsa vs torch SDPA (GFLOP/s, % of fp32 FMA peak, err vs fp64)"
for t in 2 "$NT"; do grep -E '^#|^ *[0-9]' "$OUT/torch_t$t.txt" | grep -v '^# GFLOP'; done
log "done (outputs in $OUT)"
