#!/bin/sh
# Builds the host emulation of the CUDA backward and runs its cases (no GPU needed).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../../..
out=${1:-/tmp/fmsa_cuda_emu_bwd}
# sm_80 code paths, then sm_90's (its dQ reductions; the bulk paths stay off in these rows)
g++ -std=c++17 -O1 -w -I"$here/shadow" -I"$root" -I"$root/include" "$here/fmsa_cuda_emu_bwd.cpp" -o "$out"
g++ -std=c++17 -O1 -w -D__CUDA_ARCH__=900 -I"$here/shadow" -I"$root" -I"$root/include" \
    "$here/fmsa_cuda_emu_bwd.cpp" -o "$out.sm90"
fail=0
while read -r args; do
    "$out" $args || fail=1
    "$out.sm90" $args || fail=1
done <<CASES
1 1 70 90 2 1 128 128 0
1 2 96 130 4 2 128 128 1
1 1 64 200 2 1 128 128 0 1
1 2 77 130 4 2 192 192 1
1 2 150 190 4 2 192 128 1
1 2 45 100 6 1 192 128 0 1
1 1 100 120 2 2 64 256 0
1 2 77 50 4 2 64 256 1
1 1 200 70 2 2 64 256 1 1
1 1 70 90 2 2 136 120 0
1 2 33 47 6 2 56 200 0
1 1 64 80 4 2 128 64 1
1 3 30 40 4 2 256 128 1 1
1 2 40 70 4 1 128 192 0
1 2 40 64 4 4 256 64 0
1 1 33 47 2 1 8 16 0
0 1 90 130 2 2 192 128 1
1 1 70 50 2 1 576 512 0
1 2 77 130 4 2 576 512 1
1 2 45 100 6 2 576 512 0 1
0 1 90 70 2 1 576 512 1
1 1 40 64 4 1 520 264 0
1 2 33 47 2 2 264 264 1 1
0 1 100 40 2 2 512 512 0
1 1 64 96 2 1 512 512 1 1
1 1 30 33 2 1 296 504 0
1 2 300 300 3 1 64 64 1
1 2 300 300 3 1 64 64 1 1
0 1 257 257 2 2 64 64 1
1 2 256 256 4 2 128 128 1
0 1 200 333 2 1 128 128 1
1 1 333 200 2 2 128 128 1 1
1 2 144 144 2 1 256 256 1
0 1 130 130 2 2 256 256 1 1
CASES
exit $fail
