#!/bin/sh
# Builds the host emulation of the Hopper (wgmma) kernels and runs its cases (no GPU needed):
# the landed backward at d64 / d128 / d256 (fmsa_cuda_bwd_wg*.cu, whose results on the H200
# anchor the emulation's operand model) and the forward (fmsa_cuda_fwd_wg.cu) in its three
# schedules.  Copies land at their thread's cp.async wait (EMU_CP_ASYNC_DEFER) and a
# product's accumulators at the wait that retires it (shadow/'s fmsa_cuda_wgmma.cuh).
#
#   run_wg.sh [OUT]      OUT: the programs' path prefix (default /tmp/fmsa_cuda_emu_wg)
#   EMU_WG_QUICK=1       the first 6 / 8 cases in two thread orders (CTest's test_cuda_emu_wgmma)
#
# Each case runs in these thread orders (fmsa_cuda_emu_sched.h): every runnable thread
# first; EMU_EAGER=1, a collective as soon as its last thread arrives (a missing block
# barrier lets one warpgroup read another's copies before they land); EMU_EAGER=3 with
# EMU_LATE=1, copies landing at issue and products retiring only when nothing else can run
# (a stage released before its reader retired is overwritten under it).  The
# warp-specialised forward also runs with EMU_EAGER=2 (its computing warpgroups ahead of
# its loader).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../../..
out=${1:-/tmp/fmsa_cuda_emu_wg}
cxx=${CXX:-g++}
flags="-std=c++17 -O1 -w -DEMU_WGMMA -DEMU_CP_ASYNC_DEFER -D__CUDA_ARCH__=900 -I$here/shadow -I$root -I$root/include"
"$cxx" $flags "$here/fmsa_cuda_emu_bwd.cpp" -o "$out.bwd"
"$cxx" $flags "$here/fmsa_cuda_emu_fwd.cpp" -o "$out.fwd"
modes="EMU_EAGER=0 EMU_EAGER=1 EMU_EAGER=3:EMU_LATE=1" nb=100 nf=100
if [ "${EMU_WG_QUICK:-0}" = 1 ]; then modes="EMU_EAGER=1 EMU_EAGER=3:EMU_LATE=1" nb=6 nf=8; fi
run() { # run MODE PROGRAM ARGS...
    m=$1; shift
    env $(echo "$m" | tr ':' ' ') "$@"
}
fail=0
# backward: BF16 B SQ SK HQ HKV D DV CAUSAL (seqlen_q a multiple of 16: the instances' rule)
bwd_cases="1 2 96 130 4 2 128 128 1
1 2 80 300 4 1 64 64 0
1 1 64 130 2 1 256 256 1
0 1 208 77 2 2 128 128 1
0 1 128 128 2 2 64 64 1
0 1 48 64 2 2 256 256 0
1 1 64 200 2 1 128 128 0
1 1 272 260 2 1 64 64 1
1 2 144 100 2 1 256 256 1"
# forward: BF16 B SQ SK HQ HKV D CAUSAL 0 [WL WR] (D 128 or 256), EMU_OVL 0 serial, 1
# overlapped, 2 warp-specialised
fwd_cases="1 2 130 129 4 2 128 1 0
0 1 384 1000 2 1 128 0 0 200 50
1 1 300 100 2 1 128 1 0
1 1 64 40 1 1 128 0 0
0 2 130 129 4 2 256 1 0
1 1 200 600 1 1 256 0 0 100 20
1 1 256 384 2 1 128 0 0
0 1 77 50 2 2 256 0 0
0 1 256 384 2 1 128 1 0
0 1 77 300 2 2 128 0 0
1 1 200 600 1 1 128 0 0 100 20
1 1 128 128 1 1 128 0 0 0 0
1 1 16 1 1 1 128 0 0
1 1 256 384 2 1 256 0 0
1 1 300 100 2 1 256 1 0"
echo "$bwd_cases" | head -n $nb > "$out.bwd_cases"
echo "$fwd_cases" | head -n $nf > "$out.fwd_cases"
while read -r args; do
    for m in $modes; do run $m "$out.bwd" $args || fail=1; done
done < "$out.bwd_cases"
while read -r args; do
    for m in $modes; do
        for o in 0 1 2; do run $m EMU_OVL=$o "$out.fwd" $args || fail=1; done
    done
    EMU_EAGER=2 EMU_OVL=2 "$out.fwd" $args || fail=1
done < "$out.fwd_cases"
exit $fail
