#!/bin/sh
# Builds the host emulation of the CUDA forward's FAST rows three ways (this tree's kernels,
# FMSA_CUDA_FWD_STALE=0 = main's, FMSA_CUDA_FWD_STALE_UNSAFE = the stale pass without its
# repeat, which must fail the climb cases) and runs the cases (no GPU needed).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../../..
out=${1:-/tmp/fmsa_cuda_emu_fwd}
for v in "" "0:-DFMSA_CUDA_FWD_STALE=0" "u:-DFMSA_CUDA_FWD_STALE_UNSAFE"; do
    g++ -std=c++17 -O1 -w ${v#*:} -I"$here/shadow" -I"$root" -I"$root/include" "$here/fmsa_cuda_emu_fwd.cpp" \
        -o "$out${v%%:*}"
done
fail=0
while read -r bf b sq sk hq hkv d causal climb; do
    "$out" $bf $b $sq $sk $hq $hkv $d $causal $climb || fail=1
    "${out}0" $bf $b $sq $sk $hq $hkv $d $causal $climb || fail=1
    if [ "$climb" != 0 ] && [ "$d" = 128 ]; then
        if "${out}u" $bf $b $sq $sk $hq $hkv $d $causal $climb; then echo "UNSAFE build passed a climb case"; fail=1; fi
    else
        "${out}u" $bf $b $sq $sk $hq $hkv $d $causal $climb || fail=1
    fi
done <<CASES
1 1 130 300 2 1 128 0 0
0 2 200 512 2 1 128 0 0
1 1 300 300 2 1 128 1 0
0 1 257 257 2 2 128 1 0
1 1 200 1000 2 1 128 1 0
1 2 200 512 2 1 128 0 160
0 2 200 512 2 1 128 0 160
1 1 300 300 2 1 128 1 160
0 1 300 300 2 1 128 1 160
1 1 130 300 2 2 128 0 160
1 2 200 512 2 1 128 0 20
0 1 300 300 2 1 128 1 20
1 1 200 640 2 1 64 0 160
0 1 400 400 2 1 64 1 160
1 1 130 300 2 1 64 0 0
CASES
exit $fail
