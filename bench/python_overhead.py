#!/usr/bin/env python3
"""The host cost of one flashmsa call from Python, beside the C API called
directly, on a tiny problem whose kernels are faster than the calls (so the
host is the bottleneck and calls/second measures the call itself):

  api       flashmsa.attention(q, k, v, causal=True) under torch.no_grad()
  op        torch.ops.flashmsa.fwd(...) (the custom op, no argument checks)
  ctypes    lib.fmsa_forward through ctypes with descriptors built once
  c         bench/call_overhead.c (--c-program), the C API from C
  api+bwd   attention() forward + backward through autograd, beside
  c bwd     fmsa_backward from C (the backward's share)

Each: N calls queued back to back, host microseconds per call until the last
is queued (median of --reps rounds), then synchronised.  GPU time of one
forward from a CUDA graph replay of it is printed beside, to show the kernel
is not what is timed.

  python3 bench/python_overhead.py [--device cuda] [--calls 2000]
                                   [--c-program ./call_overhead]
"""
import argparse
import ctypes as C
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmsa  # noqa: E402
from flashmsa import _capi, _torch  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
ap.add_argument("--device", default="cuda")
ap.add_argument("--shape", default="1,128,8,64", help="b,s,h,d (bf16)")
ap.add_argument("--calls", type=int, default=2000)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--c-program", default="", help="call_overhead binary (bench/call_overhead.c)")
ARGS = ap.parse_args()

dev = torch.device(ARGS.device)
b, s, h, d = (int(x) for x in ARGS.shape.split(","))
q, k, v = (torch.randn(b, s, h, d, device=dev, dtype=torch.bfloat16) for _ in range(3))


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


def per_call_us(fn, calls=ARGS.calls):
    """Median over rounds of host µs per call until the last call is queued."""
    fn()
    sync()
    rounds = []
    for _ in range(ARGS.reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t0) * 1e6 / calls)
        sync()
    return statistics.median(rounds)


rows = []
with torch.no_grad():
    rows.append(("api", per_call_us(lambda: flashmsa.attention(q, k, v, causal=True))))
    scale = d ** -0.5
    rows.append(("op", per_call_us(lambda: torch.ops.flashmsa.fwd(
        q, k, v, None, None, None, None, None, None, True, -1, -1, 0.0, scale, 0, 0, False))))

    # ctypes direct: what the op does per call minus torch's dispatch and allocation
    lib = _capi.library()
    ctx = _torch._context(dev)
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=dev, dtype=torch.float32)
    tq, tk, tv, to, tl = (_torch._desc_tensor(x, n) for x, n in
                          ((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "lse")))
    desc = _capi.attention_desc(d, causal=True)
    nbytes = C.c_size_t()
    _capi.check(lib.fmsa_workspace_size(ctx, 0, C.byref(desc), C.byref(tq), C.byref(tk),
                                        C.byref(tv), C.byref(nbytes)), "fmsa_workspace_size")
    ws = torch.empty(max(nbytes.value, 1), device=dev, dtype=torch.uint8)
    args = (ctx, C.byref(desc), C.byref(tq), C.byref(tk), C.byref(tv), C.byref(to), C.byref(tl),
            ws.data_ptr(), nbytes.value,
            torch.cuda.current_stream(dev).cuda_stream if dev.type == "cuda" else None)
    fwd = lib.fmsa_forward
    rows.append(("ctypes", per_call_us(lambda: fwd(*args))))

qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
dout = torch.randn_like(q)


def fwd_bwd():
    flashmsa.attention(qg, kg, vg, causal=True).backward(dout)


rows.append(("api+bwd", per_call_us(fwd_bwd, max(ARGS.calls // 4, 50))))

gpu_us = None
if dev.type == "cuda":  # one forward's GPU time, from a graph of 100 of them
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            flashmsa.attention(q, k, v, causal=True)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(100):
                flashmsa.attention(q, k, v, causal=True)
        g.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        gpu_us = start.elapsed_time(end) * 1e3 / 1000

c_lines = []
if ARGS.c_program:
    r = subprocess.run([ARGS.c_program, str(b), str(s), str(h), str(d), str(ARGS.calls)] +
                       ([] if dev.type == "cuda" else ["cpu"]), capture_output=True, text=True)
    c_lines = (r.stdout + r.stderr).strip().splitlines()

name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "host"
print(f"python_overhead: device {dev} ({name}), "
      f"torch {torch.__version__}, bf16 causal b={b} s={s} h={h} d={d}, {ARGS.calls} calls x "
      f"{ARGS.reps} rounds, library {flashmsa.library_path()}")
for name, us in rows:
    print(f"  {name:8s} {us:8.2f} us/call (host, queued)")
if gpu_us is not None:
    print(f"  gpu      {gpu_us:8.2f} us per forward kernel sequence (CUDA graph replay)")
for line in c_lines:
    print(f"  {line}")
