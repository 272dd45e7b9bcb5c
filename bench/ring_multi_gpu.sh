#!/usr/bin/env bash
# Ring attention over NCCL on every GPU of the machine (issue 17), from the repo root
# after a CUDA build (bench/cuda_device_run.sh STAGES=build, or bench/final_call.sh):
#
#   OUT=<logs> [LIB=build-cuda/libflashmsa.so] [ARGS="--dims 64,128 --tokens ..."] \
#     bash bench/ring_multi_gpu.sh
#
# With n GPUs: torchrun, one process per GPU, for each P in 2 4 8 up to n
# (bench/ring_multi_gpu.py: zigzag shards, checks against the single-GPU result and
# fp64, times beside the local kernel and PyTorch's context_parallel).  With one
# GPU (all the single-GPU kind allows): the NCCL path with P = 1 and the loopback
# transport with P = 2, 4, 8 on small shapes, which check the harness and the
# ring's results; neither is a multi-GPU time.  NVLink multicast stays off here and
# in every process started from here.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
OUT=${OUT:-/tmp/fmsa-ring-multi}
LIB=${LIB:-build-cuda/libflashmsa.so}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), 'lib'))" 2>/dev/null ||
       python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
export LD_LIBRARY_PATH=$nccl:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$top/python:${PYTHONPATH:-}
[[ -f $LIB ]] || { echo "ring_multi_gpu.sh: no $LIB (build first)"; exit 2; }
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "=== ring_multi_gpu.sh: $n GPU(s); NCCL from $nccl"
rc=0
if [[ $n -ge 2 ]]; then
  for P in 2 4 8; do
    [[ $P -le $n ]] || break
    echo "=== P = $P (torchrun, NCCL)"
    torchrun --standalone --nproc-per-node "$P" bench/ring_multi_gpu.py --lib "$LIB" \
      --json "$OUT/ring_p$P.jsonl" ${ARGS:-} 2>&1 | tee "$OUT/ring_p$P.log" || rc=1
  done
else
  small=${SMALL_ARGS:---dims 64,128 --tokens 1024,4096 --iters 3}
  # every loopback rank computes the whole sequence's references itself
  loop=${LOOP_ARGS:---dims 64,128 --tokens 1024 --iters 2}
  echo "=== one GPU: P = 1 over NCCL (torchrun), small shapes"
  # shellcheck disable=SC2086
  torchrun --standalone --nproc-per-node 1 bench/ring_multi_gpu.py --lib "$LIB" \
    --json "$OUT/ring_p1.jsonl" $small 2>&1 | tee "$OUT/ring_p1.log" || rc=1
  for P in 2 4 8; do
    echo "=== one GPU: P = $P over the loopback transport, small shapes"
    # shellcheck disable=SC2086
    python3 bench/ring_multi_gpu.py --lib "$LIB" --loopback "$P" --json "$OUT/ring_loop$P.jsonl" \
      $loop 2>&1 | tee "$OUT/ring_loop$P.log" || rc=1
  done
fi
echo "=== ring_multi_gpu.sh: rc $rc"
exit $rc
