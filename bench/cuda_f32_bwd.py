#!/usr/bin/env python3
"""flashmsa's fp32 CUDA backward (3xTF32) beside PyTorch SDPA's EFFICIENT_ATTENTION and
MATH backends in fp32, on the same tensors, in one process.

ctypes over the shared library (python/flashmsa/_capi.py), torch tensors by data pointer,
torch's stream.  Timings: triton do_bench medians; flashmsa's backward timed alone (its
forward's O and lse as inputs), the peers' as (fwd + bwd) - fwd; TFLOP/s = 2.5 x 4 b h s^2 d
(halved when causal).  torch's fp32 matmuls stay fp32 (allow_tf32 off), so MATH is the
unfused standard attention in fp32 (cuBLAS SGEMM).

Check of every timed shape: dQ, dK, dV of batch 0 (all heads) against fp64 gradients of
the same inputs, beside the errors of EFFICIENT and MATH; ok = our error <= 3 x MATH's +
the rule's floor (common/check_rule.h parts (a) and (b): (2 u + 2 u) max|ref| + 6 u (1 + A)
max|ref|, u = 2^-24, A = max |lse|).  --det-runs: the deterministic backward run that many
times on one shape (d128 s1024 causal, GQA 8/2) and compared bitwise.

  python3 bench/cuda_f32_bwd.py [--lib build/libflashmsa.so] [--dims 64,128]
                                [--seqlens 1024,4096] [--masks none,causal] [--json F]
                                [--det-runs 10] [--peers efficient,math]
(ok needs MATH among the peers.)
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_fmsa_call import Fmsa as FmsaCall, Library  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
ap.add_argument("--lib", default="build/libflashmsa.so")
ap.add_argument("--dims", default="64,128")
ap.add_argument("--seqlens", default="1024,4096")
ap.add_argument("--masks", default="none,causal")
ap.add_argument("--tokens", type=int, default=16384)
ap.add_argument("--hidden", type=int, default=2048)
ap.add_argument("--det-runs", type=int, default=10)
ap.add_argument("--peers", default="efficient,math", help="SDPA backends beside ('' = none)")
ap.add_argument("--json", default="")
ARGS = ap.parse_args()

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
LIBRARY = Library(ARGS.lib)
U32 = 2.0 ** -24


def Fmsa(q, k, v, do, causal, det=False):  # noqa: N802 - the shared class, bound to LIBRARY
    return FmsaCall(LIBRARY, q, k, v, causal, do=do, det=det)


def reference(q, k, v, do, causal):
    """fp64 dQ, dK, dV and lse of batch 0 ([s, h, d] / [h, s]); GQA heads expanded."""
    hq, hkv = q.shape[2], k.shape[2]
    qq = q[0].double().transpose(0, 1)
    kk, vv = (x[0].double().transpose(0, 1).repeat_interleave(hq // hkv, 0) for x in (k, v))
    dd = do[0].double().transpose(0, 1)
    scale = 1.0 / math.sqrt(q.shape[3])
    s = qq @ kk.transpose(1, 2) * scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None])
    del s
    o = p @ vv
    dp = dd @ vv.transpose(1, 2)
    ds = p * (dp - (dd * o).sum(-1, keepdim=True))
    del dp
    dq = ds @ kk * scale
    dk = ds.transpose(1, 2) @ qq * scale
    dv = p.transpose(1, 2) @ dd
    g = hq // hkv
    fold = lambda x: x.view(hkv, g, *x.shape[1:]).sum(1)  # noqa: E731 - GQA: sum a group's heads
    return [x.transpose(0, 1) for x in (dq, fold(dk), fold(dv))], lse


def sdpa(be, q, k, v, causal):
    with sdpa_kernel([be]):
        return F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
            enable_gqa=q.shape[2] != k.shape[2]).transpose(1, 2)


def peer(name, be, q, k, v, do, causal, fl):
    row = dict(peer=name)
    try:
        qg, kg, vg = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        o = sdpa(be, qg, kg, vg, causal)
        o.backward(do)
        row["grads"] = [x.grad[0].clone() for x in (qg, kg, vg)]  # do_bench adds into .grad
        with torch.no_grad():
            tf = do_bench(lambda: sdpa(be, qg, kg, vg, causal), warmup=10, rep=50,
                          return_mode="median")
        tfb = do_bench(lambda: sdpa(be, qg, kg, vg, causal).backward(do), warmup=10, rep=50,
                       return_mode="median", grad_to_none=[qg, kg, vg])
        row.update(fwd_ms=tf, bwd_ms=tfb - tf, bwd_tflops=2.5 * fl / (tfb - tf) / 1e9)
    except Exception as e:  # noqa: BLE001 - a peer refusing the shape is a result
        row["error"] = repr(e)[:160]
    return row


def errs(grads, ref):
    return [(g.double() - r).abs().max().item() for g, r in zip(grads, ref)]


def emit(rec):
    print(json.dumps(rec), flush=True)
    if ARGS.json:
        with open(ARGS.json, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def run_shape(b, s, h, d, causal):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", generator=g) for _ in range(4))
    fl = 4 * b * h * s * s * d / (2 if causal else 1)
    rec = dict(b=b, s=s, h=h, d=d, causal=causal)
    ref, lse = reference(q, k, v, do, causal)
    rmax = [r.abs().max().item() for r in ref]
    floor = [(4 * U32 + 6 * U32 * (1 + lse.abs().max().item())) * m for m in rmax]
    torch.cuda.empty_cache()
    try:
        f = Fmsa(q, k, v, do, causal)
        f.fwd()
        f.bwd()
        f.synchronize()
        rec["err"] = errs([f.dq[0], f.dk[0], f.dv[0]], ref)
        rec["fwd_ms"] = do_bench(f.fwd, warmup=10, rep=50, return_mode="median")
        tb = do_bench(f.bwd, warmup=10, rep=50, return_mode="median")
        f.synchronize()
        rec.update(bwd_ms=tb, bwd_tflops=2.5 * fl / tb / 1e9)
        del f
    except RuntimeError as e:
        rec["error"] = str(e)[:200]
    rec["peers"] = []
    for name, be in (("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)):
        if name not in ARGS.peers.split(","):
            continue
        pr = peer(name, be, q, k, v, do, causal, fl)
        if "grads" in pr:
            pr["err"] = errs(pr.pop("grads"), ref)
        rec["peers"].append(pr)
        torch.cuda.empty_cache()
    math_err = next((p["err"] for p in rec["peers"] if p["peer"] == "math" and "err" in p), None)
    rec["ref_max"], rec["floor"] = rmax, floor
    if "err" in rec and math_err:
        rec["ok"] = all(e <= 3 * n + fl_ for e, n, fl_ in zip(rec["err"], math_err, floor))
    emit(rec)
    return rec


def run_det(runs):
    """The deterministic backward, bitwise over runs (d128 s1024 causal, GQA 8/2)."""
    g = torch.Generator(device="cuda").manual_seed(1)
    b, s, hq, hkv, d = 2, 1024, 8, 2, 128
    q, do = (torch.randn(b, s, hq, d, device="cuda", generator=g) for _ in range(2))
    k, v = (torch.randn(b, s, hkv, d, device="cuda", generator=g) for _ in range(2))
    ref, _ = reference(q, k, v, do, True)
    rec = dict(kind="det", b=b, s=s, hq=hq, hkv=hkv, d=d, causal=True, runs=runs)
    f = Fmsa(q, k, v, do, True, det=True)
    f.fwd()
    first, same = None, 0
    for _ in range(runs):
        for t in (f.dq, f.dk, f.dv):
            t.fill_(float("nan"))
        f.bwd()
        f.synchronize()
        now = [t.clone() for t in (f.dq, f.dk, f.dv)]
        if first is None:
            first = now
        else:
            same += all(torch.equal(a.view(torch.int32), c.view(torch.int32))
                        for a, c in zip(first, now))
    rec["identical"] = f"{same}/{runs - 1}"
    rec["err_det"] = errs([x[0] for x in first], ref)
    fa = Fmsa(q, k, v, do, True)
    fa.fwd()
    fa.bwd()
    fa.synchronize()
    rec["err_atomic"] = errs([fa.dq[0], fa.dk[0], fa.dv[0]], ref)
    emit(rec)
    return rec


def main():
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, fp32, allow_tf32 off",
          file=sys.stderr)
    recs = []
    if ARGS.det_runs > 1:
        det = run_det(ARGS.det_runs)
    for d in map(int, ARGS.dims.split(",")):
        for s in map(int, ARGS.seqlens.split(",")):
            for m in ARGS.masks.split(","):
                recs.append(run_shape(max(1, ARGS.tokens // s), s, max(1, ARGS.hidden // d), d,
                                      m == "causal"))
                torch.cuda.empty_cache()
    print("\n# fp32 backward TFLOP/s (ms); max |err| of dQ / dK / dV vs fp64, batch 0")
    print(f"{'shape':22s} {'ok':4s} {'flashmsa':>16s} {'efficient':>16s} {'math':>16s}   "
          "errors: flashmsa | efficient | math")
    fe = lambda e: "/".join(f"{x:.1e}" for x in e) if e else "-"  # noqa: E731
    for r in recs:
        pk = {p["peer"]: p for p in r["peers"]}
        cell = lambda x: f"{x['bwd_tflops']:6.1f} ({x['bwd_ms']:6.2f})" if "bwd_tflops" in x \
            else "             -"  # noqa: E731
        shape = f"d{r['d']} s{r['s']} {'causal' if r['causal'] else 'full'}"
        ok = "ERR" if "error" in r else ("-" if "ok" not in r else "yes" if r["ok"] else "NO")
        print(f"{shape:22s} {ok:4s} {cell(r):>16s} {cell(pk.get('efficient', {})):>16s} "
              f"{cell(pk.get('math', {})):>16s}   {fe(r.get('err'))} | "
              f"{fe(pk.get('efficient', {}).get('err'))} | {fe(pk.get('math', {}).get('err'))}")
    if ARGS.det_runs > 1:
        print(f"# deterministic d128 s1024 causal GQA 8/2: {det['identical']} runs bitwise equal "
              f"to the first; err det {fe(det['err_det'])}, atomic {fe(det['err_atomic'])}")


if __name__ == "__main__":
    main()
