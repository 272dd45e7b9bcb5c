#!/bin/sh
# Builds the host emulation of the Hopper (wgmma) kernels and runs its cases (no GPU needed):
# the landed backward at d64 / d128 / d256 (fmsa_cuda_bwd_wg*.cu, whose results on the H200
# anchor the emulation's operand model) and the forward in development (fmsa_cuda_fwd_wg.cu),
# both schedules.  Copies land at their thread's cp.async wait (EMU_CP_ASYNC_DEFER) and a
# product's accumulators at the wait that retires it (shadow/'s fmsa_cuda_wgmma.cuh).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../../..
out=${1:-/tmp/fmsa_cuda_emu_wg}
cxx=${CXX:-g++}
flags="-std=c++17 -O1 -w -DEMU_WGMMA -DEMU_CP_ASYNC_DEFER -D__CUDA_ARCH__=900 -I$here/shadow -I$root -I$root/include"
"$cxx" $flags "$here/fmsa_cuda_emu_bwd.cpp" -o "$out.bwd"
"$cxx" $flags "$here/fmsa_cuda_emu_fwd.cpp" -o "$out.fwd"
fail=0
# backward: BF16 B SQ SK HQ HKV D DV CAUSAL (seqlen_q a multiple of 16: the instances' rule)
# each case twice: every runnable thread first, then EMU_EAGER (a collective resolves as soon
# as its last thread arrives, so a missing block barrier lets one warpgroup read another's
# copies before they land)
while read -r args; do
    "$out.bwd" $args || fail=1
    EMU_EAGER=1 "$out.bwd" $args || fail=1
done <<CASES
1 1 64 200 2 1 128 128 0
1 2 96 130 4 2 128 128 1
0 1 208 77 2 2 128 128 1
1 2 80 300 4 1 64 64 0
0 1 128 128 2 2 64 64 1
1 1 272 260 2 1 64 64 1
1 1 64 130 2 1 256 256 1
0 1 48 64 2 2 256 256 0
1 2 144 100 2 1 256 256 1
CASES
# forward: BF16 B SQ SK HQ HKV D CAUSAL 0 [WL WR] (D 128 or 256), serial then overlapped
while read -r args; do
    for e in 0 1; do
        EMU_EAGER=$e EMU_OVL=0 "$out.fwd" $args || fail=1
        EMU_EAGER=$e EMU_OVL=1 "$out.fwd" $args || fail=1
    done
done <<CASES
1 1 256 384 2 1 128 0 0
0 1 256 384 2 1 128 1 0
1 2 130 129 4 2 128 1 0
0 1 77 300 2 2 128 0 0
1 1 300 100 2 1 128 1 0
1 1 200 600 1 1 128 0 0 100 20
0 1 384 1000 2 1 128 0 0 200 50
1 1 128 128 1 1 128 0 0 0 0
1 1 64 40 1 1 128 0 0
1 1 16 1 1 1 128 0 0
1 1 256 384 2 1 256 0 0
0 2 130 129 4 2 256 1 0
1 1 200 600 1 1 256 0 0 100 20
0 1 77 50 2 2 256 0 0
1 1 300 100 2 1 256 1 0
CASES
exit $fail
