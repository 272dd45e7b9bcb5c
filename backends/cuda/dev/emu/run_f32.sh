#!/bin/sh
# Builds the host emulation of the CUDA fp32 backward and runs its cases (no GPU needed):
# the sm_80 code paths, then sm_90's; EMU_SMEM=166912 picks the rows of sm_80's opt-in memory.
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../../..
out=${1:-/tmp/fmsa_cuda_emu_bwd_f32}
g++ -std=c++17 -O1 -w -I"$here/shadow" -I"$root" -I"$root/include" "$here/fmsa_cuda_emu_bwd_f32.cpp" -o "$out"
g++ -std=c++17 -O1 -w -D__CUDA_ARCH__=900 -I"$here/shadow" -I"$root" -I"$root/include" \
    "$here/fmsa_cuda_emu_bwd_f32.cpp" -o "$out.sm90"
fail=0
while read -r args; do
    "$out" $args || fail=1
    "$out.sm90" $args || fail=1
    EMU_SMEM=166912 "$out.sm90" $args || fail=1
done <<CASES
1 40 70 2 1 64 64 0
1 70 90 2 1 128 128 0
2 77 130 4 2 128 128 1 1
1 45 100 6 2 256 256 0 1
1 100 40 2 2 256 256 1
2 33 47 4 2 64 64 1 1
1 64 80 4 2 128 64 1
1 40 70 4 1 64 256 0
1 30 33 2 1 200 56 0 1
1 90 130 2 2 72 72 0 0 20 5
1 90 130 2 2 136 136 0 1 -1 -1 5
3 64 64 2 1 192 128 1 1
1 300 200 2 1 64 64 1 1
1 33 200 2 1 256 256 0 1 30 30
1 1200 64 1 1 64 64 0
CASES
exit $fail
