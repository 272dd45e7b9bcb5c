#!/usr/bin/env bash
# Two builds of the CPU backend in one rotation: the tree you are in ("new")
# against another source tree ("old", e.g. `git archive <commit> | tar -x -C
# build-old-src`), so a change is judged on a drifting VM (the device
# machine's Xeon) by paired rounds instead of numbers from different calls.
#
#   OLD_SRC=build-old-src bash bench/cpu_ab_builds.sh
#
# Per round: `flashmsa peak --fp32-only` on the round's thread count, then
# every shape once per build (and per AB_VARIANTS setting of the new build),
# in an order that alternates between rounds; each run checks sampled rows
# against the fp64 reference (`flashmsa run`, PASS required).  Prints per
# shape the median GFLOP/s of each build over the rounds, the median of the
# per-round new/old ratios, and the median of each build's per-round share of
# that round's peak.  Also times bench/cpu_kernel_bench of both builds
# (AB_KBENCH shapes), alternating.
#
# AB_SHAPES: ';'-separated "threads dtype d s mask pass" (pass fwd or both)
# AB_VARIANTS: ';'-separated NAME:VAR=value sets run on the new build too
# AB_ROUNDS (default 5).  Output: $OUT/ab.txt (summary), $OUT/ab_runs.txt (raw).
set -u
OUT=${OUT:-$PWD/ab-out}
OLD_SRC=${OLD_SRC:?set OLD_SRC to the old source tree}
ROUNDS=${AB_ROUNDS:-5}
SHAPES=${AB_SHAPES:-"2 fp32 128 2048 none fwd;2 fp32 128 2048 causal fwd;2 fp32 128 8192 none fwd;2 fp32 128 8192 causal fwd"}
mkdir -p "$OUT"
build() { # src dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
    -DFLASHMSA_OPENCL=OFF > "$OUT/ab_build_$(basename "$2").log" 2>&1 &&
    ninja -C "$2" >> "$OUT/ab_build_$(basename "$2").log" 2>&1
}
build . build-ab-new || { echo "new build failed"; tail "$OUT/ab_build_build-ab-new.log"; exit 2; }
build "$OLD_SRC" build-ab-old || { echo "old build failed"; tail "$OUT/ab_build_build-ab-old.log"; exit 2; }

# runners: name|cli|VAR=value...
RUNNERS=("old|build-ab-old/apps/flashmsa|" "new|build-ab-new/apps/flashmsa|")
if [ -n "${AB_VARIANTS:-}" ]; then
  IFS=';' read -r -a vs <<< "$AB_VARIANTS"
  for v in "${vs[@]}"; do RUNNERS+=("${v%%:*}|build-ab-new/apps/flashmsa|${v#*:}"); done
fi
IFS=';' read -r -a shapes <<< "$SHAPES"
: > "$OUT/ab_runs.txt"
for round in $(seq 1 "$ROUNDS"); do
  declare -A peak_done=()
  for shape in "${shapes[@]}"; do
    read -r t dt d s mask pass <<< "$shape"
    if [ -z "${peak_done[$t]:-}" ]; then
      pk=$(build-ab-new/apps/flashmsa peak --fp32-only --threads "$t" 2>/dev/null |
           awk '$5 == "*" || $NF == "*" {print $4; exit}')
      peak_done[$t]=$pk
    fi
    mflag=--no-causal; [ "$mask" = causal ] && mflag=--causal
    bflag=--no-backward; [ "$pass" = both ] && bflag=
    # alternate the order of the runners between rounds
    order=("${RUNNERS[@]}"); [ $((round % 2)) = 0 ] && order=($(printf '%s\n' "${RUNNERS[@]}" | tac))
    for rr in "${order[@]}"; do
      IFS='|' read -r name cli envs <<< "$rr"
      # shellcheck disable=SC2086 # envs is a list of VAR=value words
      r=$(env $envs "$cli" run --backend cpu --threads "$t" --dtype "$dt" --batch $((8192 / s > 0 ? 8192 / s : 1)) \
          --heads "$([ "$t" -le 2 ] && echo 2 || echo "$t")" --seqlen "$s" --dim "$d" $mflag $bflag \
          --repeat 3 --check-rows 4 2>&1)
      fwd=$(echo "$r" | awk '/^forward/ {print $4}'); bwd=$(echo "$r" | awk '/^backward/ {print $4}')
      ok=$(echo "$r" | tail -1)
      echo "$round|$t $dt d$d s$s $mask $pass|$name|${fwd:-0}|${bwd:-0}|${peak_done[$t]}|$ok" >> "$OUT/ab_runs.txt"
    done
  done
  unset peak_done
done

# summary: medians over rounds
python3 - "$OUT/ab_runs.txt" > "$OUT/ab.txt" <<'EOF'
import sys, statistics as st, collections
rows = [l.rstrip('\n').split('|') for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(dict)  # (shape) -> {(round, name): (fwd, bwd, peak, ok)}
names = []
for rd, shape, name, fwd, bwd, peak, ok in rows:
    by[shape][(rd, name)] = (float(fwd), float(bwd), float(peak or 0), ok)
    if name not in names: names.append(name)
bad = [r for r in rows if r[6] != 'PASS']
print('# medians over rounds; ratio = median of per-round x/old; %pk = median of per-round GF/s over that round\'s fp32 peak')
for shape, runs in by.items():
    rounds = sorted({k[0] for k in runs})
    for col, label in ((0, 'fwd'), (1, 'bwd')):
        if all(runs[k][col] == 0 for k in runs): continue
        parts = []
        for n in names:
            vals = [runs[(r, n)][col] for r in rounds if (r, n) in runs]
            ratios = [runs[(r, n)][col] / runs[(r, 'old')][col] for r in rounds
                      if (r, n) in runs and (r, 'old') in runs and runs[(r, 'old')][col] > 0]
            pk = [runs[(r, n)][col] / runs[(r, n)][2] for r in rounds if (r, n) in runs and runs[(r, n)][2] > 0]
            s = f'{n} {st.median(vals):7.1f}'
            if n != 'old' and ratios: s += f' x{st.median(ratios):.3f} [{min(ratios):.2f}-{max(ratios):.2f}]'
            if pk: s += f' {100 * st.median(pk):.1f}%pk'
            parts.append(s)
        print(f'{shape:32s} {label}: ' + ' | '.join(parts))
print(f'# {len(rows)} runs, {len(bad)} without PASS' + (': ' + '; '.join('|'.join(b) for b in bad[:5]) if bad else ''))
EOF
cat "$OUT/ab.txt"

# micro-kernels alone, alternating builds
if [ -n "${AB_KBENCH:-}" ]; then
  IFS=';' read -r -a kshapes <<< "$AB_KBENCH"
  for round in 1 2 3; do
    for ks in "${kshapes[@]}"; do
      for b in old new; do
        echo "r$round $b $ks: $(build-ab-$b/bench/cpu_kernel_bench $ks 2>&1 | grep -E 'softmax|total' | tr -s ' ' | tr '\n' ' ')"
      done
    done
  done | tee "$OUT/ab_kbench.txt"
fi
