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
python3 bench/cuda_fwd_check.py --lib "$LIB" --sweep ${SWEEP_ARGS:---variants} --out "$OUT" > "$OUT/sweep.txt" 2>&1
echo "sweep rc=$?"
grep -E "^(d|ERR|FAIL)" "$OUT/sweep.txt" | grep -v "^d[0-9]" | head -20
sed -n '/^ d     s/,$p' "$OUT/sweep.txt"
grep -E "^grid:" "$OUT/grid.txt"
grep -E "FAIL|Error|error" "$OUT/grid.txt" | head -25
