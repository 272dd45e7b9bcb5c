#!/usr/bin/env python3
"""PyTorch SDPA on the GPU for the shapes `flashmsa bench` times (bench/opencl_h200.sh).

Shapes as flashmsa bench: batch = tokens / s, heads = hidden / d; FLOPs forward
4*b*h*s*s*d (causal /2), backward 2.5x forward.  Times are the median of
triton.testing.do_bench (CUDA events).  For each dtype the default SDPA
dispatch is timed ('default'), then each backend forced alone where it
accepts the inputs (flash, efficient, cudnn; math only for s <= 4096: it
materialises s*s scores).  Before timing, the default forward of every shape
is compared against fp64 on the CPU for 8 sampled query rows (rel. max error
printed).  One JSON object per line on stdout.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # older torch
    SDPBackend = None


def check_rows(q, k, v, o, causal, rows=8):
    """max |o - ref| / max |ref| over sampled query rows, fp64 on the CPU."""
    b, h, s, d = q.shape
    idx = torch.linspace(0, s - 1, rows).long()
    qq = q[:1, :, idx].double().cpu()
    kk, vv = k[:1].double().cpu(), v[:1].double().cpu()
    sc = qq @ kk.transpose(-1, -2) / d ** 0.5
    if causal:
        kpos = torch.arange(s)
        sc = sc.masked_fill(kpos[None, :] > idx[:, None], float("-inf"))
    ref = torch.softmax(sc, -1) @ vv
    got = o[:1, :, idx].double().cpu()
    return float((got - ref).abs().max() / ref.abs().max())


def run(dtype_name, d, s, causal, tokens, hidden, backends):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    b, h = tokens // s, hidden // d
    g = torch.Generator(device="cuda").manual_seed(1)
    mk = lambda: torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=g)
    q, k, v, do = mk(), mk(), mk(), mk()
    flops_f = 4.0 * b * h * s * s * d / (2 if causal else 1)
    out = []
    for be in backends:
        if be == "math" and s > 4096:
            continue
        names = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                 "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
        ctx = sdpa_kernel([getattr(SDPBackend, names[be])]) if be != "default" else None
        rec = {"peer": "torch.sdpa", "backend": be, "dtype": dtype_name, "dim": d, "seqlen": s,
               "batch": b, "heads": h, "causal": causal, "torch": torch.__version__}
        try:
            if ctx:
                ctx.__enter__()
            qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            o = f()
            if be == "default":
                rec["fwd_relerr_vs_fp64"] = check_rows(q, k, v, o, causal)
            ms_f = do_bench(f, warmup=50, rep=300, return_mode="median")
            og = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
            bwd = lambda: og.backward(do, retain_graph=True)
            ms_b = do_bench(bwd, warmup=50, rep=300, grad_to_none=[qg, kg, vg],
                            return_mode="median")
            rec.update(fwd_ms=ms_f, fwd_tflops=flops_f / ms_f / 1e9, bwd_ms=ms_b,
                       bwd_tflops=2.5 * flops_f / ms_b / 1e9)
        except Exception as e:  # backend refuses these inputs
            rec["error"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
            torch.cuda.empty_cache()
        out.append(rec)
        print(json.dumps(rec), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlens", default="1024,4096,16384")
    ap.add_argument("--masks", default="none")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--backends", default="default,flash,efficient,cudnn")
    a = ap.parse_args()
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}", file=sys.stderr)
    for dt in a.dtypes.split(","):
        for d in map(int, a.dims.split(",")):
            for s in map(int, a.seqlens.split(",")):
                for m in a.masks.split(","):
                    run(dt, d, s, m == "causal", a.tokens, a.hidden, a.backends.split(","))


if __name__ == "__main__":
    main()
