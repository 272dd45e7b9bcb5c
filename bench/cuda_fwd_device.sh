#!/bin/sh
# One device call for the CUDA forward (run from the copy of the worktree that the
# call carries): loads the prebuilt dev harness (rebuilds it there if it does not
# load), then the correctness grid, decode, the standard sweep beside FA2 and cuDNN,
# and memcheck/racecheck on a few small cases.  $OUT gets sweep.jsonl, decode.jsonl
# and logs.tgz (at most 8 files come back); the table and failures print last.
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
L=/tmp/fwdlogs
mkdir -p "$OUT" "$L"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$L/smi.txt" 2>&1
cat "$L/smi.txt"
LIB=build/cuda_dev/libfmsa_cuda_dev.so
if ! python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$LIB" 2> "$L/load.txt"; then
    cat "$L/load.txt"
    backends/cuda/dev/build.sh /tmp/cuda_dev -t 8 > "$L/build.txt" 2>&1
    LIB=/tmp/cuda_dev/libfmsa_cuda_dev.so
fi
python3 bench/cuda_fwd_check.py --lib "$LIB" --selftest || exit 1
python3 bench/cuda_fwd_check.py --lib "$LIB" --grid ${GRID_ARGS:---variants} --out "$L" > "$L/grid.txt" 2>&1
echo "grid rc=$?"
python3 bench/cuda_fwd_check.py --lib "$LIB" --decode --out "$OUT" > "$L/decode.txt" 2>&1
echo "decode rc=$?"
python3 bench/cuda_fwd_check.py --lib "$LIB" --sweep ${SWEEP_ARGS:---variants} --out "$OUT" > "$L/sweep.txt" 2>&1
echo "sweep rc=$?"
tar czf "$OUT/logs.tgz" -C "$L" .
# sanitizers on a few small cases (time-boxed; after the timings so they cannot disturb them)
export FMSA_GRID_ONLY="d128c 77x300,d64 paged 16,d128 mask,dec d128 paged 16 seqused splits 9"
for tool in ${SAN_TOOLS:-memcheck racecheck}; do
    timeout 70 compute-sanitizer --tool $tool --print-limit 20 \
        python3 bench/cuda_fwd_check.py --lib "$LIB" --grid --out /tmp > "$L/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard|grid:' "$L/san_$tool.txt" | tr '\n' ' ')"
done
unset FMSA_GRID_ONLY
tar czf "$OUT/logs.tgz" -C "$L" .
grep -E "^(ERR|FAIL)" "$L/sweep.txt" | head -20
sed -n '/^ d     s/,$p' "$L/sweep.txt"
grep -E "decode|ERR|FAIL" "$L/decode.txt"
grep -E "^grid:" "$L/grid.txt"
grep -E "FAIL|Error|error" "$L/grid.txt" | head -25
