#!/usr/bin/env python3
"""One forward of each flashmsa build and of FA2 per shape, for Nsight Compute.

Run under `ncu --profile-from-start off ...`: every build and FA2 (SDPA FLASH_ATTENTION) run
once per shape outside the profiled range (module load, workspace, first-launch costs), then
once each inside cudaProfilerStart/Stop, so ncu sees exactly one launch of each kernel per
shape.  Shapes as the standard sweep: bf16, b*s = 16384, h = 2048/d.

  ncu --profile-from-start off --clock-control none ... python3 bench/cuda_fwd_prof.py \\
      --lib main=PATH [--lib A=PATH] --shapes 128:4096:full,128:4096:causal,256:4096:full
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_fwd_ab import Build  # noqa: E402  (the A/B script's ctypes wrapper)

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
ap.add_argument("--lib", action="append", required=True, help="NAME=PATH")
ap.add_argument("--shapes", default="128:4096:full,128:4096:causal,256:4096:full")
ap.add_argument("--no-fa2", action="store_true")
args = ap.parse_args()


def fa2(q, k, v, causal):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), torch.no_grad():
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), is_causal=causal)


builds = [Build(*x.split("=", 1)) for x in args.lib]
g = torch.Generator(device="cuda").manual_seed(0)
for shape in args.shapes.split(","):
    d, s, mask = shape.split(":")
    d, s, causal = int(d), int(s), mask == "causal"
    b, h = max(1, 16384 // s), max(1, 2048 // d)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    runs = [bd.forward(q, k, v, causal) for bd in builds]
    for f in runs:
        f()
    if not args.no_fa2:
        fa2(q, k, v, causal)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for f in runs:
        f()
    if not args.no_fa2:
        fa2(q, k, v, causal)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"profiled d{d} s{s} {mask}: " + " ".join(bd.name for bd in builds)
          + ("" if args.no_fa2 else " FA2"), flush=True)
