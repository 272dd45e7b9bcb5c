#!/usr/bin/env python3
"""flashmsa's CUDA backend beside the GPU peers, on the same tensors, in one process.

ctypes over the shared library; torch tensors passed by data pointer and
torch.cuda.current_stream() as the stream.  Peers: ../shared/tools/gpu-peers/peers.py
when importable (fa4_cute, cudnn, sdpa_flash; `source /tmp/fa4site/env.sh`), else
PyTorch SDPA's CUDNN_ATTENTION and FLASH_ATTENTION timed here the same way.
Times are medians of triton.testing.do_bench; FLOPs as FlashAttention counts them
(fwd 4*b*h*sq*sk*d, halved when causal; bwd 2.5x fwd).  Every flashmsa run is
checked against fp64 on sampled query rows of batch 0 (O and dQ) with the
project's rule: error <= 2x (3x for dQ) that of a naive computation in the
input precision, plus a roundoff floor.

  python3 bench/cuda_vs_peers.py [--dims 64,128,256] [--seqlens 512,...,16384]
                                 [--masks none,causal] [--decode 32768,131072] [--json F]
                                 [--short 128,256,...]
The standard sweep: bf16, b*s = 16384, h = 2048/d.  --short: the short-sequence crossover,
each listed s at b = 1 and at b*s = 16384 (h = 2048/d), non-causal, with the standard (non-flash)
attention of PyTorch SDPA's MATH backend (S materialised by cuBLAS, softmax, P V) beside.  Decode: b 8, 32 q-heads,
8 kv-heads, d 128, one query row, K+V bytes read per second.  A short table last.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

# The ctypes mirror of the C API is the Python package's (python/flashmsa/_capi.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_fmsa_call import Fmsa as FmsaCall, Library  # noqa: E402
from cuda_rows_check import reference_rows, rule_ok  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
ap.add_argument("--lib", default="build/libflashmsa.so")
ap.add_argument("--dims", default="64,128,256",
                help="head dims; D:Dv gives a value head dim of its own (e.g. 576:512)")
ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
ap.add_argument("--masks", default="none,causal")
ap.add_argument("--tokens", type=int, default=16384)
ap.add_argument("--hidden", type=int, default=2048)
ap.add_argument("--decode", default="32768,131072", help="decode key counts ('' = none)")
ap.add_argument("--no-backward", action="store_true")
ap.add_argument("--check-rows", type=int, default=16)
ap.add_argument("--json", default="")
ap.add_argument("--short", default="", help="short-sequence crossover seqlens ('' = none)")
ARGS = ap.parse_args()

try:
    import peers  # ../shared/tools/gpu-peers/peers.py, on PYTHONPATH after env.sh
except Exception as e:  # noqa: BLE001 - any import failure means "time SDPA here"
    peers, PEERS_ERROR = None, repr(e)[:200]
else:
    PEERS_ERROR = None

# ---------------------------------------------------------------- ctypes API
LIBRARY = Library(ARGS.lib)


def Fmsa(q, k, v, causal, backward=True):  # noqa: N802 - the shared class, bound to LIBRARY
    return FmsaCall(LIBRARY, q, k, v, causal, backward=backward)


def check_run(f, q, k, v, causal, backward):
    s = q.shape[1]
    rows = torch.linspace(0, s - 1, min(ARGS.check_rows, s), device="cuda").long()
    ref_o, ref_dq = reference_rows(q, k, v, f.do, rows, causal)
    nai_o, nai_dq = reference_rows(q, k, v, f.do, rows, causal, q.dtype)
    ok, err, nerr = rule_ok(f.o[0][rows], ref_o, nai_o, 2, q.dtype)
    out = dict(fwd_ok=ok, fwd_err=err, fwd_naive_err=nerr)
    if backward:
        okb, errb, nerrb = rule_ok(f.dq[0][rows], ref_dq, nai_dq, 3, q.dtype)
        out.update(bwd_ok=okb, dq_err=errb, dq_naive_err=nerrb)
    return out


def sdpa_peers(q, k, v, causal, backward, which=("cudnn", "sdpa_flash")):
    """SDPA backends timed as peers.py does: cuDNN and FA2 when peers.py is absent,
    MATH (standard attention) for the short-sequence crossover."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa_flash": SDPBackend.FLASH_ATTENTION,
                "math": SDPBackend.MATH}
    rows = []
    fl = 2 * q.shape[0] * q.shape[2] * q.shape[1] * k.shape[1] * (q.shape[3] + v.shape[3]) / \
        (2 if causal else 1)
    for name in which:
        be = backends[name]
        row = dict(peer=name)
        try:
            def fwd():
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(
                        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                        enable_gqa=q.shape[2] != k.shape[2]).transpose(1, 2)
            with torch.no_grad():
                tf = do_bench(fwd, warmup=30, rep=150, return_mode="median")
            row.update(fwd_ms=tf, fwd_tflops=fl / tf / 1e9)
            if backward:
                o = fwd()
                g = torch.randn_like(o)
                tfb = do_bench(lambda: fwd().backward(g), warmup=30, rep=150, return_mode="median",
                               grad_to_none=[q, k, v])
                row.update(bwd_ms=tfb - tf, bwd_tflops=2.5 * fl / (tfb - tf) / 1e9)
        except Exception as e:  # noqa: BLE001 - a peer refusing the shape is a result
            row["error"] = repr(e)[:160]
        rows.append(row)
    return rows


def emit(rec):
    print(json.dumps(rec), flush=True)
    if ARGS.json:
        with open(ARGS.json, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def inputs(b, sq, sk, hq, hkv, d, grad, dv=None):
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda s, h, e: torch.randn(b, s, h, e, device="cuda", dtype=torch.bfloat16, generator=g)
    q, k, v = mk(sq, hq, d), mk(sk, hkv, d), mk(sk, hkv, dv or d)
    return [x.requires_grad_(grad) for x in (q, k, v)]


def run_shape(b, s, h, d, causal, backward, dv=None, kind="sweep"):
    dv = dv or d
    q, k, v = inputs(b, s, s, h, h, d, backward, dv)
    fl = 2 * b * h * s * s * (d + dv) / (2 if causal else 1)  # 4 b h s^2 d when dv = d
    rec = dict(kind=kind, b=b, s=s, h=h, d=d, dv=dv, causal=causal)
    try:
        f = Fmsa(q.detach(), k.detach(), v.detach(), causal, backward)
        f.fwd()
        if backward:
            f.bwd()
        f.synchronize()
        rec.update(check_run(f, q.detach(), k.detach(), v.detach(), causal, backward))
        tf = do_bench(f.fwd, warmup=30, rep=150, return_mode="median")
        rec.update(fwd_ms=tf, fwd_tflops=fl / tf / 1e9)
        if backward:
            tb = do_bench(f.bwd, warmup=30, rep=150, return_mode="median")
            rec.update(bwd_ms=tb, bwd_tflops=2.5 * fl / tb / 1e9)
        f.synchronize()
    except RuntimeError as e:
        rec["error"] = str(e)[:200]
    if peers is not None:
        rec["peers"] = peers.time_all(q, k, v, causal=causal, backward=backward)
    else:
        rec["peers"] = sdpa_peers(q, k, v, causal, backward)
    if kind == "short":
        rec["peers"] += sdpa_peers(q, k, v, causal, backward, ("math",))
    emit(rec)
    return rec


def run_decode(sk):
    b, hq, hkv, d = 8, 32, 8, 128
    q, k, v = inputs(b, 1, sk, hq, hkv, d, False)
    kv_bytes = 2 * b * sk * hkv * d * 2
    rec = dict(kind="decode", b=b, sq=1, sk=sk, hq=hq, hkv=hkv, d=d)
    try:
        f = Fmsa(q, k, v, False, False)
        f.fwd()
        f.synchronize()
        rec.update(check_run(f, q, k, v, False, False))
        t = do_bench(f.fwd, warmup=30, rep=150, return_mode="median")
        rec.update(fwd_ms=t, kv_tbps=kv_bytes / t / 1e9)
    except RuntimeError as e:
        rec["error"] = str(e)[:200]
    prs = peers.time_all(q, k, v, causal=False, backward=False) if peers else \
        sdpa_peers(q, k, v, False, False)
    for p in prs:
        if "fwd_ms" in p:
            p["kv_tbps"] = kv_bytes / p["fwd_ms"] / 1e9
    rec["peers"] = prs
    emit(rec)
    return rec


def fmt(x, key):
    return f"{x[key]:7.1f}" if key in x else "      -"


def main():
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, peers: "
          f"{'peers.py' if peers else 'SDPA here (' + str(PEERS_ERROR) + ')'}", file=sys.stderr)
    recs = []
    for tok in ARGS.dims.split(","):
        d, dv = (int(x) for x in tok.split(":")) if ":" in tok else (int(tok), int(tok))
        for s in [int(x) for x in ARGS.seqlens.split(",") if x]:
            for m in ARGS.masks.split(","):
                recs.append(run_shape(max(1, ARGS.tokens // s), s, max(1, ARGS.hidden // d), d,
                                      m == "causal", not ARGS.no_backward, dv))
                torch.cuda.empty_cache()
    for tok in ARGS.dims.split(",") if ARGS.short else []:
        d = int(tok.split(":")[0])
        for s in map(int, ARGS.short.split(",")):
            for b in sorted({1, max(1, ARGS.tokens // s)}):  # non-causal only
                recs.append(run_shape(b, s, max(1, ARGS.hidden // d), d, False,
                                      not ARGS.no_backward, None, "short"))
                torch.cuda.empty_cache()
    for sk in [int(x) for x in ARGS.decode.split(",") if x]:
        recs.append(run_decode(sk))
        torch.cuda.empty_cache()
    names = []
    for r in recs:
        for p in r.get("peers", []):
            if p["peer"] not in names:
                names.append(p["peer"])
    print("\n# TFLOP/s fwd / bwd (decode: K+V TB/s); ok = fp64 rule on sampled rows")
    print(f"{'shape':28s} {'ok':5s} {'flashmsa':>15s} " + " ".join(f"{n:>15s}" for n in names))
    for r in recs:
        pk = {p["peer"]: p for p in r.get("peers", [])}
        if r["kind"] == "decode":
            shape = f"decode sk={r['sk']}"
            cells = [f"{fmt(r, 'kv_tbps')}        "] + \
                    [f"{fmt(pk.get(n, {}), 'kv_tbps')}        " for n in names]
        else:
            dd = f"d{r['d']}" + (f"v{r['dv']}" if r.get("dv", r["d"]) != r["d"] else "")
            shape = f"{dd} s{r['s']} {'causal' if r['causal'] else 'full'}" + \
                (f" b{r['b']}" if r["kind"] == "short" else "")
            cells = [f"{fmt(r, 'fwd_tflops')} /{fmt(r, 'bwd_tflops')}"] + \
                    [f"{fmt(pk.get(n, {}), 'fwd_tflops')} /{fmt(pk.get(n, {}), 'bwd_tflops')}"
                     for n in names]
        ok = "ERR" if "error" in r else ("yes" if r.get("fwd_ok") and r.get("bwd_ok", True) else "NO")
        print(f"{shape:28s} {ok:5s} " + " ".join(cells))


if __name__ == "__main__":
    main()
