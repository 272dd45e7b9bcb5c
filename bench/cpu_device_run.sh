#!/usr/bin/env bash
# The CPU backend on the device machine's CPU (16-core Xeon with AVX-512 and
# AMX), in one call of at most ~9 minutes:
#   1. configure + build the library, the flashmsa program and (when cmocka is
#      carried in .deps/cmocka, see ../shared/TOOLCHAINS.md) the test suites;
#   2. the CPU test grid (ctest -L cpu) once per forced kernel path that only
#      this CPU can run (FLASHMSA_CPU_KERNEL=amx, avx512, plus avx2);
#   3. `flashmsa run --full-check` per forced path, fp32 and bf16, every
#      element against the fp64 reference;
#   3b. determinism: bench/cpu_determinism.c hashes O, LSE, dQ, dK, dV per forced
#      path and dtype at 1 and at all threads; the lines must be identical;
#   4. `flashmsa peak` on 1, 2 and all threads;
#   5. a perf profile (if perf exists) of the fp32 and bf16 forward and backward
#      on 2 threads, with the hottest instructions of the top symbol;
#   5b. bench/cpu_kernel_bench: each micro-kernel alone, one thread;
#   6. 1 -> 2 thread scaling of the forward (d=128, s=2048);
#   6c. FLASHMSA_CPU_TRACE of bf16 d=128 passes (stage trace);
#   7. bench/cpu_vs_torch.py (flashmsa vs torch SDPA, same process, same
#      threads) on 2 and on all threads, each with a time budget; TORCH_VARIANTS
#      times other settings of the developer variables in the same rotation
#      (this replaced a stage that ran each setting in its own process), and
#      OLD_SRC another source tree as the build "old" beside this one;
#   8. a compact summary.
# Everything lands in $OUT (the device tool's output folder; ./cpu-device-out
# when run by hand).  Run from the repository root:
#   bash bench/cpu_device_run.sh            (STAGES="grid run peak prof scale torch" to pick)
set -u
OUT=${OUT:-$PWD/cpu-device-out}
STAGES=${STAGES:-"grid run det peak prof kbench scale torch"}
TORCH_BUDGET=${TORCH_BUDGET:-130}
mkdir -p "$OUT"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*"; }
want() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
NT=$(nproc)
B=build-cpu-device
CLI=$B/apps/flashmsa
CM=$PWD/.deps/cmocka/usr/lib/x86_64-linux-gnu

log "host: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2), $NT threads, commit ${FMSA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)} (FMSA_COMMIT: the tree the device tool sent)"
lscpu > "$OUT/lscpu.txt" 2>&1
grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E 'avx512|amx|fma|avx2' | tr '\n' ' ' \
  > "$OUT/isa_flags.txt"
log "isa: $(cat "$OUT/isa_flags.txt")"

log "configure + build"
TESTS=OFF
CMOCKA_ARGS=()
if [ -f "$CM/cmake/cmocka/cmocka-config.cmake" ]; then
  TESTS=ON; CMOCKA_ARGS=(-Dcmocka_DIR="$CM/cmake/cmocka"); export LD_LIBRARY_PATH="$CM:${LD_LIBRARY_PATH:-}"
fi
if ! cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=$TESTS \
    -DFLASHMSA_OPENCL=OFF "${CMOCKA_ARGS[@]}" > "$OUT/cmake.log" 2>&1 ||
   ! ninja -C $B > "$OUT/build.log" 2>&1; then
  log "BUILD FAILED"; tail -30 "$OUT/build.log" "$OUT/cmake.log"; exit 2
fi
grep -i warning "$OUT/build.log" | head -20

# ---- 2. the CPU test grid per forced path -------------------------------------------
: > "$OUT/grid.txt"
if want grid && [ $TESTS = ON ]; then
  for k in ${GRID_PATHS:-amx avx512 avx2}; do
    log "ctest -L cpu with FLASHMSA_CPU_KERNEL=$k"
    FLASHMSA_CPU_KERNEL=$k timeout 150 ctest --test-dir $B -L cpu -j "$NT" --output-on-failure \
      > "$OUT/ctest_$k.txt" 2>&1
    echo "$k: $(grep -E 'tests passed|tests failed' "$OUT/ctest_$k.txt" | tail -1)" | tee -a "$OUT/grid.txt"
  done
fi

# ---- 3. correctness of every kernel path (full element check vs fp64) -------------
: > "$OUT/paths.txt"
if want run; then
  for k in amx avx512 avx2 generic; do
    for dt in fp32 bf16; do
      f="$OUT/run_${k}_${dt}.txt"
      FLASHMSA_LOG=info FLASHMSA_CPU_KERNEL=$k timeout 120 $CLI run --backend cpu --threads "$NT" \
        --dtype $dt --batch 2 --heads 8 --heads-kv 2 --seqlen 384 --dim 128 --full-check > "$f" 2>&1
      rc=$?
      f2="$OUT/run_${k}_${dt}_d72win.txt" # odd sizes, window + softcap, GQA, d=72
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
fi

# ---- 3b. bit-identical results at 1 and at all threads ------------------------------
: > "$OUT/det.txt"
if want det && cc -O2 -std=c11 -Iinclude bench/cpu_determinism.c -L$B -lflashmsa -lm \
    -o $B/cpu_determinism > "$OUT/det_build.log" 2>&1; then
  for k in ${GRID_PATHS:-amx avx512 avx2}; do
    for dt in fp32 bf16; do
      h1=$(OMP_NUM_THREADS=1 LD_LIBRARY_PATH=$B FLASHMSA_CPU_KERNEL=$k timeout 60 $B/cpu_determinism $dt 2>&1)
      hn=$(OMP_NUM_THREADS=$NT LD_LIBRARY_PATH=$B FLASHMSA_CPU_KERNEL=$k timeout 60 $B/cpu_determinism $dt 2>&1)
      if [ -n "$h1" ] && [ "$h1" = "$hn" ]; then res="identical at 1 and $NT threads"; else res="DIFFER"; fi
      echo "$k $dt: $res" | tee -a "$OUT/det.txt"
      { echo "== $k $dt t1"; echo "$h1"; echo "== t$NT"; echo "$hn"; } >> "$OUT/det_hashes.txt"
    done
  done
fi

# ---- 4. peak ---------------------------------------------------------------------
if want peak; then
  log "peak"
  $CLI peak --threads "1,2,$NT" > "$OUT/peak.txt" 2>&1
  cat "$OUT/peak.txt"
fi

# ---- 5. profile ------------------------------------------------------------------
# top symbols of each pass, then the hottest instructions of the top symbol
if want prof && command -v perf > /dev/null; then
  for dt in fp32 bf16; do
    for pass in fwd bwd; do
      nb=--no-backward; [ $pass = bwd ] && nb=
      log "perf: $pass $dt d128 s2048 on 2 threads"
      perf record -q -o "$OUT/perf.data" -- $CLI run --backend cpu --threads 2 --dtype $dt \
        --batch 1 --heads 2 --seqlen 2048 --dim 128 --no-causal $nb --repeat 5 \
        --check-rows 4 > "$OUT/perf_run_${dt}_$pass.txt" 2>&1
      perf report -i "$OUT/perf.data" --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25 \
        > "$OUT/prof_${dt}_$pass.txt"
      top=$(awk 'NR==1 {print $NF}' "$OUT/prof_${dt}_$pass.txt")
      perf annotate -i "$OUT/perf.data" --stdio -s "$top" 2>/dev/null | grep -E '^ +[0-9]+\.[0-9]+ +:' \
        | sort -rn | head -30 > "$OUT/annot_${dt}_$pass.txt"
      rm -f "$OUT/perf.data"
      grep -E '^(forward|backward)' "$OUT/perf_run_${dt}_$pass.txt"; head -8 "$OUT/prof_${dt}_$pass.txt"
    done
  done
fi

# ---- 5a. gprof (no perf on the device machine): a -pg build, one thread -----------
if want gprof && command -v gprof > /dev/null; then
  G=build-cpu-gprof
  cmake -S . -B $G -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-pg -DBUILD_TESTING=OFF \
    -DFLASHMSA_OPENCL=OFF > "$OUT/gprof_cmake.log" 2>&1 && ninja -C $G > "$OUT/gprof_build.log" 2>&1
  for spec in "fp32 --no-causal --no-backward" "bf16 --no-causal --no-backward" "fp32 --causal" "bf16 --causal"; do
    set -- $spec; dt=$1; shift
    tag="${dt}_$(echo "$*" | tr -d ' -')"
    ( cd $G && ./apps/flashmsa run --backend cpu --threads 1 --dtype $dt --batch 1 --heads 2 \
        --seqlen 2048 --dim 128 "$@" --repeat 10 --check-rows 2 > "$OUT/gprof_run_$tag.txt" 2>&1 &&
      gprof -b -p ./apps/flashmsa gmon.out 2>/dev/null | head -22 > "$OUT/gprof_$tag.txt"; rm -f gmon.out )
    echo "== gprof $dt $*"; grep -E '^(forward|backward)' "$OUT/gprof_run_$tag.txt"; sed -n 5,20p "$OUT/gprof_$tag.txt"
  done
fi

# ---- 5b. micro-kernels on their own (bench/cpu_kernel_bench.c), one thread -------
if want kbench && [ -x $B/bench/cpu_kernel_bench ]; then
  for k in ${GRID_PATHS:-amx avx512 avx2}; do
    IFS=, read -r -a shapes <<< "${KB_SHAPES:-64 64 128 0,64 128 128 0,32 128 128 0,64 64 64 0}"
    for shape in "${shapes[@]}"; do
      FLASHMSA_CPU_KERNEL=$k $B/bench/cpu_kernel_bench $shape
    done
  done 2>&1 | tee "$OUT/kbench.txt"
fi

# ---- 5c. tile A/B on 2 threads (FLASHMSA_CPU_TILES overrides the planner) --------
# TILE_SETS: ';'-separated sets of VAR=value settings ("planner" = none), e.g.
#   "planner;FLASHMSA_CPU_TILES=fwd=64x128,bwd=64x64;FLASHMSA_CPU_BWD=recompute"
if want tiles; then
  IFS=';' read -r -a sets <<< "${TILE_SETS:-planner;FLASHMSA_CPU_TILES=fwd=64x128,bwd=64x64}"
  : > "$OUT/tiles.txt"
  for dt in ${TILE_DTYPES:-fp32 bf16}; do
    for mask in --no-causal --causal; do
      for ts in "${sets[@]}"; do
        env_ts=; [ "$ts" != planner ] && env_ts=$ts
        # shellcheck disable=SC2086 # the set is a list of VAR=value words
        r=$(env $env_ts $CLI run --backend cpu --threads 2 --dtype $dt --batch 4 \
            --heads 2 --seqlen 2048 --dim 128 $mask --repeat 3 --check-rows 4 2>&1)
        printf '%-5s %-12s %-52s fwd %8s bwd %8s %s\n' $dt $mask "$ts" \
          "$(echo "$r" | awk '/^forward/ {print $4}')" "$(echo "$r" | awk '/^backward/ {print $4}')" \
          "$(echo "$r" | tail -1)" | tee -a "$OUT/tiles.txt"
      done
    done
  done
fi

# ---- 6. scaling 1 -> 2 threads, forward fp32 d=128 s=2048 -------------------------
# 1 and 2 threads in alternation, three rounds, medians: the VM's speed drifts
if want scale; then
  log "scaling"
  : > "$OUT/scale.txt"
  for round in 1 2 3; do
    for t in 1 2; do
      $CLI run --backend cpu --threads $t --batch 1 --heads 4 --seqlen 2048 --dim 128 --no-causal \
        --no-backward --repeat 3 --check-rows 8 > "$OUT/scale_t$t.txt" 2>&1
      echo "$t $(awk '/^forward/ {print $4}' "$OUT/scale_t$t.txt")" >> "$OUT/scale.txt"
    done
  done
  med() { awk -v t=$1 '$1 == t {print $2}' "$OUT/scale.txt" | sort -g | sed -n 2p; }
  s1=$(med 1); s2=$(med 2)
  log "fwd fp32 d128 s2048 (medians of 3 alternating rounds): 1 thread ${s1:-?} GFLOP/s, 2 threads ${s2:-?} GFLOP/s, x$(awk -v a="$s1" -v b="$s2" 'BEGIN {if (a > 0) printf "%.2f", b / a}')"
fi

# ---- 6b. flashmsa bench: the dispatched path beside the scalar baseline -----------
# (same reduced sweep, all threads; every shape checked on sampled rows)
if want bench; then
  # the scalar baseline is ~50x slower: fp32, d=128 only
  for run in "auto fp32 64,128" "auto bf16 64,128" "scalar fp32 128"; do
    set -- $run; k=$1; dt=$2; dims=$3
    log "flashmsa bench path $k $dt"
    kv=; [ $k != auto ] && kv=$k
    # BENCH_THREADS / BENCH_SEQLENS / BENCH_TOKENS / BENCH_ARGS widen the sweep (the
    # issue's grid: BENCH_THREADS=2 BENCH_SEQLENS=512,2048,8192 BENCH_TOKENS=8192)
    sl=${BENCH_SEQLENS:-512,2048}; [ $k = scalar ] && sl=512,2048
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of words
    FLASHMSA_CPU_KERNEL=$kv timeout 300 $CLI bench --backend cpu --threads "${BENCH_THREADS:-$NT}" --dtype $dt \
      --dims $dims --seqlens $sl --tokens ${BENCH_TOKENS:-4096} --min-time 0 ${BENCH_ARGS:-} \
      > "$OUT/bench_${k}_$dt.txt" 2>&1
    tail -1 "$OUT/bench_${k}_$dt.txt"
  done
fi

# ---- 6c. where a pass spends its time (FLASHMSA_CPU_TRACE), bf16 d=128 ----------
if want trace; then
  : > "$OUT/trace.txt"
  for t in 2 "$NT"; do
    for s in 512 2048; do
      for mask in --no-causal --causal; do
        FLASHMSA_LOG=debug FLASHMSA_CPU_TRACE=1 timeout 60 $CLI run --backend cpu --threads $t \
          --dtype bf16 --batch $((8192 / s)) --heads $([ $t = 2 ] && echo 2 || echo "$NT") --seqlen $s \
          --dim 128 $mask --repeat 3 --check-rows 4 2>&1 | grep -E "cpu trace|^(forward|backward)" \
          | sed "s/^/t$t s$s $mask: /" >> "$OUT/trace.txt"
      done
    done
  done
  cut -c1-260 "$OUT/trace.txt"
fi

# ---- 7. flashmsa vs torch --------------------------------------------------------
# TORCH_VARIANTS: ';'-separated NAME:VAR=value[ VAR=value] sets, timed in the same
# rotation as torch and the default (cpu_vs_torch.py --variant)
VARIANT_ARGS=()
if [ -n "${TORCH_VARIANTS:-}" ]; then
  IFS=';' read -r -a vsets <<< "$TORCH_VARIANTS"
  for v in "${vsets[@]}"; do VARIANT_ARGS+=(--variant "$v"); done
fi
# OLD_SRC: another source tree (git archive <commit> | tar -x -C build-old-src),
# built here and timed as the lib variant "old" in the same rotation
if want torch && [ -n "${OLD_SRC:-}" ]; then
  if cmake -S "$OLD_SRC" -B build-cpu-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DFLASHMSA_OPENCL=OFF > "$OUT/old_build.log" 2>&1 && ninja -C build-cpu-old >> "$OUT/old_build.log" 2>&1; then
    VARIANT_ARGS+=(--lib-variant "old:build-cpu-old/libflashmsa.so")
    # OLD_VARIANTS: ';'-separated NAME:VAR=value[ VAR=value] sets of the old build too
    if [ -n "${OLD_VARIANTS:-}" ]; then
      IFS=';' read -r -a ovs <<< "$OLD_VARIANTS"
      for v in "${ovs[@]}"; do VARIANT_ARGS+=(--lib-variant "${v%%:*}:build-cpu-old/libflashmsa.so:${v#*:}"); done
    fi
  else
    log "OLD_SRC build failed"; tail -5 "$OUT/old_build.log"
  fi
fi
if want torch; then
  for t in ${TORCH_THREADS:-2 $NT}; do
    log "cpu_vs_torch.py on $t threads (budget $TORCH_BUDGET s)"
    timeout $((TORCH_BUDGET + 90)) python3 bench/cpu_vs_torch.py --lib $B/libflashmsa.so --cli $CLI \
      --threads "$t" --dtypes ${TORCH_DTYPES:-bf16,fp32} --dims ${TORCH_DIMS:-128} \
      --seqlens ${TORCH_SEQLENS:-2048,8192} --min-time 0.3 --max-runs 3 --budget $TORCH_BUDGET \
      --masks ${TORCH_MASKS:-none,causal} "${VARIANT_ARGS[@]}" ${TORCH_ARGS:-} \
      --json "$OUT/torch.jsonl" > "$OUT/torch_t$t.txt" 2> "$OUT/torch_t$t.err"
    echo "  rc $?"; tail -3 "$OUT/torch_t$t.err"
  done
fi

# ---- 8. summary ------------------------------------------------------------------
log "SUMMARY"
echo "== test grid per forced path"; cat "$OUT/grid.txt"
echo "== kernel paths (flashmsa run, every element vs fp64)"; cat "$OUT/paths.txt"
echo "== determinism (hashes of every output, 1 vs $NT threads)"; cat "$OUT/det.txt"
echo "== peak (GFLOP/s)"; grep -v '^#' "$OUT/peak.txt" 2>/dev/null
echo "== micro-kernels alone (1 thread)"; grep -E "^#|of peak|ns/score" "$OUT/kbench.txt" 2>/dev/null
echo "== flashmsa bench (all threads): dispatched path vs scalar baseline"; for f in "$OUT"/bench_*.txt; do [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -vE "^flashmsa bench \\[" "$f"; }; done
echo "== tiles (2 threads, GFLOP/s)"; cat "$OUT/tiles.txt" 2>/dev/null
echo "== scaling fwd fp32 d128 s2048: t1 ${s1:-?} t2 ${s2:-?} GFLOP/s"
echo "== flashmsa vs torch SDPA (GFLOP/s, % of fp32 FMA peak, err vs fp64)"
for t in ${TORCH_THREADS:-2 $NT}; do grep -E '^#|^ *[0-9a-z]' "$OUT/torch_t$t.txt" 2>/dev/null | grep -v '^# GFLOP'; done
log "done (outputs in $OUT)"
