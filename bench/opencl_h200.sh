#!/usr/bin/env bash
# The OpenCL backend on the device machine's H200 through NVIDIA's OpenCL, in
# one call (stay under the device tool's 10 minutes):
#   setup  register libnvidia-opencl.so.1 with the ICD loader; list devices
#          (OpenCL device 0 must be the NVIDIA GPU: GPUs are enumerated first)
#   build  configure + build (tests when cmocka is carried in .deps/usr, see
#          ../shared/TOOLCHAINS.md)
#   test   ctest -L opencl: the four correctness grids with --backend opencl
#          (CTEST_J parallel tests)
#   sweep  (only if listed) flashmsa bench d=128 (and 64), s=4096 under launch
#          shapes from FLASHMSA_OCL_TILES (ocl_config.c), to tune the defaults;
#          SWEEP_PROFILE=1 also times each backward kernel alone
#          (FLASHMSA_OCL_PROFILE) and logs the kernels' ptxas register report
#          (-cl-nv-verbose) into sweep_profile.txt
#   check  (only if listed) `flashmsa run --full-check` (every element of O,
#          LSE, dQ, dK, dV vs fp64) on small shapes under the launch shapes of
#          CHECK_TILES (';'-separated), for variants the grids do not select
#   causal d=128, s=4096 and 16384, causal, bf16 + fp32: flashmsa bench and torch
#   grid   flashmsa bench --backend opencl, d in {64,128}, s in {1024,4096,16384},
#          fwd + bwd, bf16 and fp32 (every shape checked against fp64)
#   cpu    the same grid on the CPU backend (the machine's Xeon, all threads)
#   torch  PyTorch SDPA on the GPU, same shapes (bench/opencl_torch_peer.py;
#          TORCH_SEQLENS to time fewer)
#   table  compact summary of all of the above
# Outputs under $OUT (./opencl-h200-out by hand).  Run from the repository root:
#   bash bench/opencl_h200.sh        (STAGES="setup build test grid cpu torch table" by default)
# Through the device tool, build exactly a commit: the tool copies the working tree (with
# other people's uncommitted edits) and its copy of .git can be stale (seen 2026-11-29:
# HEAD there was an older commit).  So export here and carry the archive:
#   mkdir -p .hdsrc && git archive -o .hdsrc/src.tar HEAD  (.hdsrc in .git/info/exclude)
#   run: tar -xf .hdsrc/src.tar -C /tmp/s && ln -s $PWD/.deps /tmp/s/.deps && cd /tmp/s &&
#        FMSA_COMMIT=<hash> OUT=$OUT bash bench/opencl_h200.sh    (carry .deps and .hdsrc)
set -u
OUT=${OUT:-$PWD/opencl-h200-out}
STAGES=${STAGES:-"setup build test grid cpu torch table"}
MASKS=${MASKS:-none}
mkdir -p "$OUT"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*"; }
want() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
B=build-ocl-h200
CLI=$B/apps/flashmsa
DEPS=$PWD/.deps/usr/lib/x86_64-linux-gnu
export POCL_CACHE_DIR=$PWD/$B/pocl-cache

if want setup; then
  mkdir -p /etc/OpenCL/vendors
  [ -f /etc/OpenCL/vendors/nvidia.icd ] || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
  ls /etc/OpenCL/vendors > /tmp/fmsa_icd.txt
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv > /tmp/fmsa_smi.txt 2>&1
  log "icd: $(tr '\n' ' ' < /tmp/fmsa_icd.txt); $(tail -1 /tmp/fmsa_smi.txt)"
fi

if want build; then
  if git rev-parse --git-dir > /dev/null 2>&1; then
    log "configure + build (commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- || echo ' dirty'))"
  else
    log "configure + build (no git checkout: commit ${FMSA_COMMIT:-unknown}, as the caller says)"
  fi
  TESTS=OFF; CM=()
  if [ -f "$DEPS/cmake/cmocka/cmocka-config.cmake" ]; then
    TESTS=ON; CM=(-Dcmocka_DIR="$DEPS/cmake/cmocka")
  fi
  if ! cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHMSA_OPENCL=ON \
      -DBUILD_TESTING=$TESTS "${CM[@]}" > "$OUT/build.log" 2>&1 ||
     ! ninja -C $B >> "$OUT/build.log" 2>&1; then
    log "BUILD FAILED"; tail -30 "$OUT/build.log" "$OUT/build.log"; exit 2
  fi
fi
export LD_LIBRARY_PATH="$DEPS:${LD_LIBRARY_PATH:-}"
$CLI devices > /tmp/fmsa_devices.txt 2>&1
cat /tmp/fmsa_devices.txt
if ! grep -E '^[0-9]+ +opencl +0 +gpu' /tmp/fmsa_devices.txt | grep -qi nvidia; then
  log "OpenCL device 0 is not the NVIDIA GPU: stopping"; exit 3
fi

if want test; then
  log "ctest -L opencl (on opencl device 0 = the H200)"
  timeout 300 ctest --test-dir $B -L opencl -j "${CTEST_J:-1}" --output-on-failure \
    > "$OUT/ctest_opencl.txt" 2>&1
  log "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest_opencl.txt" | tail -1)"
  grep -E 'Test +#|Passed|Failed|\*\*\*' "$OUT/ctest_opencl.txt" | head -12
fi

if want sweep; then
  # One line per run: dtype pass FLASHMSA_OCL_TILES ("-" = the defaults), d=128 s=4096;
  # SWEEP_FILE names another list.  A shape that does not fit is skipped by bench.
  log "sweep of launch shapes (FLASHMSA_OCL_TILES)"
  : > "$OUT/sweep.jsonl"; : > "$OUT/sweep_profile.txt"
  while read -r dt pass t; do
    case "$dt" in ''|'#'*) continue ;; esac
    [ "$t" = - ] && tt= || tt=$t
    extra=(); [ "$pass" = fwd ] && extra=(--fwd-only)
    prof=(); perr=/dev/null
    if [ "${SWEEP_PROFILE:-0}" = 1 ] && [ "$pass" = bwd ]; then
      # kernel times in the log (a finish around each launch: ~0.1% slower)
      prof=(env FLASHMSA_OCL_PROFILE=1 FLASHMSA_LOG=info FLASHMSA_OCL_BUILD_FLAGS=-cl-nv-verbose)
      perr=/tmp/fmsa_sweep_err.txt
    fi
    FLASHMSA_OCL_TILES=$tt timeout 60 "${prof[@]}" $CLI bench --backend opencl --dtype "$dt" \
      --dims 128 --seqlens 4096 --masks none --tokens 16384 --min-time 0.3 "${extra[@]}" \
      --json 2>$perr | grep "\"$pass\"" | sed "s|^{|{\"tiles\":\"$t\",|" >> "$OUT/sweep.jsonl"
    if [ "$perr" != /dev/null ]; then
      echo "### $dt $t" >> "$OUT/sweep_profile.txt"
      grep -E 'opencl profile: fmsa_ocl_bwd|ptxas|Used|spill|entry|build log' $perr | cut -c1-300 >> "$OUT/sweep_profile.txt"
    fi
  done < "${SWEEP_FILE:-bench/opencl_sweep.txt}"
  python3 - "$OUT/sweep.jsonl" "$OUT/sweep_profile.txt" <<'PY'
import json, re, statistics, sys
prof, cur = {}, None
for l in open(sys.argv[2]):
    if l.startswith("### "):
        cur = l[4:].strip(); prof[cur] = {}
    m = re.search(r"opencl profile: (fmsa_ocl_bwd_\w+) ([0-9.]+) ms", l)
    if m and cur:
        prof[cur].setdefault(m.group(1), []).append(float(m.group(2)))
for l in open(sys.argv[1]):
    r = json.loads(l)
    p = prof.get(f"{r['dtype']} {r['tiles']}", {})
    ks = " ".join(f"{k[9:]} {statistics.median(v):.2f}" for k, v in sorted(p.items()))
    print(f"{r['tiles']:<40} {r['dtype']:<5} {r['pass']:<4} {r['gflops']/1e3:7.2f} TFLOP/s {'ok' if r['ok'] else 'FAIL'}  {ks}")
PY
fi

if want check; then
  # Every element of O, LSE, dQ, dK, dV against fp64 (flashmsa run --full-check)
  # under forced launch shapes: the PF / KV1 / QDO2 variants the defaults may not pick.
  log "full checks under forced launch shapes"
  : > "$OUT/check.txt"
  IFS=';' read -r -a CT <<< "${CHECK_TILES:-dkdv=16x32/64:p,dq=32x16/64:1p;dkdv=16x16/64:2p,dq=16x16/64:p;dkdv=16x16/64:2,dq=32x16/64:1}"
  nfail=0
  for t in "${CT[@]}"; do
    for dt in fp32 bf16; do
      for shape in "--dim 128 --seqlen-q 300 --seqlen-k 333 --no-causal" \
                   "--dim 64 --seqlen 257 --causal --heads 4 --heads-kv 2" \
                   "--dim 128 --seqlen 200 --window 40,7 --softcap 30"; do
        r=$(FLASHMSA_OCL_TILES=$t timeout 60 $CLI run --backend opencl --dtype $dt --batch 2 \
              --heads 4 $shape --full-check 2>&1)
        st=$(echo "$r" | tail -1)
        [ "$st" = PASS ] || nfail=$((nfail + 1))
        echo "$t $dt $shape: $st" >> "$OUT/check.txt"
        [ "$st" = PASS ] || echo "$r" >> "$OUT/check.txt"
      done
    done
  done
  log "checks: $(grep -c ': PASS' "$OUT/check.txt") PASS, $nfail not PASS"
fi

if want grid; then
  log "flashmsa bench --backend opencl grid"
  : > "$OUT/opencl_grid.jsonl"
  for dt in bf16 fp32; do
    timeout ${GRID_BUDGET:-200} $CLI bench --backend opencl --dtype $dt --dims 64,128 \
      --seqlens 1024,4096,16384 --masks "$MASKS" --tokens 16384 --min-time "${MIN_TIME:-0.5}" \
      --json >> "$OUT/opencl_grid.jsonl" 2>> "$OUT/errors.txt"
    log "opencl $dt: rc $? ($(grep -c '"ok":true' "$OUT/opencl_grid.jsonl") ok lines so far)"
  done
fi

if want causal; then
  log "causal: flashmsa bench --backend opencl d=128 s=4096,16384 + torch"
  for dt in bf16 fp32; do
    timeout ${CAUSAL_BUDGET:-100} $CLI bench --backend opencl --dtype $dt --dims 128 \
      --seqlens 4096,16384 --masks causal --tokens 16384 --min-time "${MIN_TIME:-0.5}" \
      --json >> "$OUT/opencl_grid.jsonl" 2>> "$OUT/errors.txt"
    log "opencl causal $dt: rc $?"
  done
  PYTHONUNBUFFERED=1 timeout ${TORCH_BUDGET:-150} python3 bench/opencl_torch_peer.py \
    --dims 128 --seqlens 4096,16384 --masks causal > "$OUT/torch_causal.jsonl" 2>> "$OUT/errors.txt"
  log "torch causal: rc $?"
fi

if want cpu; then
  log "flashmsa bench --backend cpu grid ($(nproc) threads)"
  : > "$OUT/cpu_grid.jsonl"
  for dt in bf16 fp32; do
    timeout ${CPU_BUDGET:-100} $CLI bench --backend cpu --dtype $dt --dims 64,128 \
      --seqlens 1024,4096,16384 --masks "$MASKS" --tokens 16384 --full --min-time 0 --json \
      >> "$OUT/cpu_grid.jsonl" 2>> "$OUT/errors.txt"
    log "cpu $dt: rc $?"
  done
fi

if want torch; then
  log "torch SDPA peers"
  PYTHONUNBUFFERED=1 timeout ${TORCH_BUDGET:-150} python3 bench/opencl_torch_peer.py \
    --masks "$MASKS" --seqlens "${TORCH_SEQLENS:-1024,4096,16384}" > "$OUT/torch.jsonl" \
    2>> "$OUT/errors.txt"
  log "torch: rc $? ($(wc -l < "$OUT/torch.jsonl") lines)"
fi

if want table; then
  python3 - "$OUT" <<'PY' | tee "$OUT/table.txt"
import json, os, sys
out = sys.argv[1]
def rd(name):
    p = os.path.join(out, name)
    return [json.loads(l) for l in open(p) if l.startswith("{")] if os.path.exists(p) else []
ocl, cpu, tor = rd("opencl_grid.jsonl"), rd("cpu_grid.jsonl"), rd("torch.jsonl") + rd("torch_causal.jsonl")
key = lambda r: (r["dtype"], r["dim"], r["seqlen"], r["causal"])
def fl(rows, k, p):
    for r in rows:
        if key(r) == k and r["pass"] == p:
            return f"{r['gflops']/1e3:6.2f}{'' if r['ok'] else '!'}"
    return "     -"
def tt(k, p, be):
    for r in tor:
        if (r["dtype"], r["dim"], r["seqlen"], r["causal"]) == k and r["backend"] == be and p + "_tflops" in r:
            return f"{r[p + '_tflops']:6.1f}"
    return "     -"
print("TFLOP/s (flashmsa: fwd 4bhs^2d, bwd 2.5x; '!' = check failed); torch: SDPA default / flash / efficient / cudnn")
print(f"{'dtype':5} {'d':>4} {'s':>6} {'causal':6} {'pass':4} {'opencl':>7} {'cpu':>7} {'t.def':>6} {'t.fla':>6} {'t.eff':>6} {'t.cud':>6}")
for k in sorted({key(r) for r in ocl + cpu}):
    for p in ("fwd", "bwd"):
        print(f"{k[0]:5} {k[1]:4} {k[2]:6} {str(k[3]):6} {p:4} {fl(ocl,k,p):>7} {fl(cpu,k,p):>7} "
              f"{tt(k,p,'default')} {tt(k,p,'flash')} {tt(k,p,'efficient')} {tt(k,p,'cudnn')}")
bad = [r for r in ocl + cpu if not r["ok"]]
print(f"checks: {len(ocl)} opencl + {len(cpu)} cpu timed passes, {len(bad)} failed")
PY
fi
log "done"
