#!/bin/sh
# Builds the CUDA backward's development harness (runtime API, <<<>>> launches)
# as build-cudabwd/libfmsa_cuda_dev_bwd.so, with the ptxas resource report in
# build-cudabwd/ptxas.txt.  Usage: bench/cuda_bwd_build.sh [repo root]
# GENCODE overrides the targets (e.g. "-gencode arch=compute_90a,code=sm_90a"
# alone: the harness runs on the H200, and one target halves the build).
set -e
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
out=$root/build-cudabwd
mkdir -p "$out"
nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -I"$root" -I"$root/include" \
    -DFMSA_CUDA_BWD_WITH_VARIANTS \
    ${GENCODE:--gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a} \
    -Xptxas -v -o "$out/libfmsa_cuda_dev_bwd.so" "$root/backends/cuda/dev/fmsa_cuda_dev_bwd.cu" \
    2>"$out/ptxas.txt"
grep -E "Compiling entry|registers|spill" "$out/ptxas.txt" | paste - - - |
    sed -E 's/ptxas info *: //g; s/Compiling entry function//' >"$out/resources.txt"
