#!/bin/sh
# Builds the forward dev harness: libfmsa_cuda_dev.so (sm_90a SASS + compute_80 PTX)
# and its ptxas resource report.  Usage: build.sh OUTDIR [extra nvcc flags]
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../../build/cuda_dev}
shift || true
mkdir -p "$out"
nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -lineinfo \
    -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=compute_80 \
    -Xptxas -v "$@" -o "$out/libfmsa_cuda_dev.so" "$here/fmsa_cuda_dev.cu" 2> "$out/ptxas.txt" ||
    { cat "$out/ptxas.txt"; exit 1; }
grep -E "error|warning" "$out/ptxas.txt" || true
echo "built $out/libfmsa_cuda_dev.so"
