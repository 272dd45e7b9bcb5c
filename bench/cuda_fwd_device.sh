#!/bin/sh
# One device call for the CUDA forward (run from the copy of the worktree that the
# call carries): loads the prebuilt dev harness (rebuilds it there if it does not
# load), then the correctness grid and the standard sweep beside FA2 and cuDNN.
# Logs go to $OUT; the table and the grid's failures print last.
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
cat "$OUT/smi.txt"
LIB=build/cuda_dev/libfmsa_cuda_dev.so
if ! python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$LIB" 2> "$OUT/load.txt"; then
    cat "$OUT/load.txt"
    backends/cuda/dev/build.sh /tmp/cuda_dev -t 8 > "$OUT/build.txt" 2>&1
    LIB=/tmp/cuda_dev/libfmsa_cuda_dev.so
fi
cp build/cuda_dev/ptxas.txt "$OUT/ptxas.txt" 2> /dev/null
python3 bench/cuda_fwd_check.py --lib "$LIB" --selftest || exit 1
python3 bench/cuda_fwd_check.py --lib "$LIB" --grid ${GRID_ARGS:---variants} --out "$OUT" > "$OUT/grid.txt" 2>&1
echo "grid rc=$?"
python3 bench/cuda_fwd_check.py --lib "$LIB" --decode --out "$OUT" > "$OUT/decode.txt" 2>&1
echo "decode rc=$?"
python3 bench/cuda_fwd_check.py --lib "$LIB" --sweep ${SWEEP_ARGS:---variants} --out "$OUT" > "$OUT/sweep.txt" 2>&1
echo "sweep rc=$?"
# sanitizers on a few small cases (time-boxed; after the timings so they cannot disturb them)
export FMSA_GRID_ONLY="d64 200x200,d128c 77x300,d128 varlen empty,d64 paged 16,d128 mask,dec d128 gqa4 sq1 splits 40,dec d128 paged 16 seqused splits 9"
for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --kernel-name regex:fmsa_cuda --print-limit 20 \
        python3 bench/cuda_fwd_check.py --lib "$LIB" --grid --out /tmp > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|hazard|grid:' "$OUT/san_$tool.txt" | tr '\n' ' ')"
done
unset FMSA_GRID_ONLY
grep -E "^(d|ERR|FAIL)" "$OUT/sweep.txt" | grep -v "^d[0-9]" | head -20
sed -n '/^ d     s/,$p' "$OUT/sweep.txt"
grep -E "decode|ERR|FAIL" "$OUT/decode.txt"
grep -E "^grid:" "$OUT/grid.txt"
grep -E "FAIL|Error|error" "$OUT/grid.txt" | head -25
