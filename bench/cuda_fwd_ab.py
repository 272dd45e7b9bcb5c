#!/usr/bin/env python3
"""A/B timing of CUDA forward builds of flashmsa beside FA2 and cuDNN, in one process.

Several builds of libflashmsa.so (e.g. main's kernels and a branch's, each with its own
embedded fatbins) are loaded side by side with ctypes (different paths: separate copies,
each bound to itself) and timed on the same tensors, in turn, beside PyTorch SDPA's
FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION; every build's output is checked
against fp64 on sampled rows with the rule of bench/cuda_vs_peers.py (2x the naive's error
plus a roundoff floor), so every timed output is a checked one.

  python3 bench/cuda_fwd_ab.py --lib main=PATH --lib A=PATH [--dims 64,128,256]
      [--seqlens 512,...,16384] [--masks none,causal] [--decode 32768,131072] [--json F]

Standard sweep: bf16, b*s = 16384, h = 2048/d, forward only.  Decode: b 8, 32 q-heads /
8 kv-heads, d 128, one query row, K+V bytes read per second, every build and peer timed
--rounds times in alternation (machine drift shows as spread, not as a difference).
"""
import argparse
import ctypes as C
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flashmsa._capi import prototype  # noqa: E402
from cuda_rows_check import reference_rows, rule_ok, tdesc  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
ap.add_argument("--lib", action="append", required=True, help="NAME=PATH, in timing order")
ap.add_argument("--dims", default="64,128,256")
ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
ap.add_argument("--masks", default="none,causal")
ap.add_argument("--decode", default="32768,131072")
ap.add_argument("--rounds", type=int, default=2, help="decode rounds")
ap.add_argument("--check-rows", type=int, default=16)
ap.add_argument("--json", default="")
ap.add_argument("--warmup", type=int, default=30, help="do_bench warmup, ms")
ap.add_argument("--rep", type=int, default=150, help="do_bench repetition time, ms")
ap.add_argument("--ratio-base", default="", help="the last column: the last build over this one")
ap.add_argument("--dims-of", action="append", default=[],
                help="NAME=64,128: time build NAME at these head dims only (default: all)")
ARGS = ap.parse_args() if __name__ == "__main__" else None  # bench/cuda_fwd_prof.py imports Build

BACKEND_CUDA, FWD = 2, 0
torch.cuda.init()


class Build:
    """One libflashmsa build: its own context on the current device."""

    def __init__(self, name, path):
        self.name, self.lib = name, prototype(C.CDLL(os.path.abspath(path)))
        self.ctx = C.c_void_p()
        self.ok(self.lib.fmsa_context_create(BACKEND_CUDA, torch.cuda.current_device(),
                                             C.byref(self.ctx)), "fmsa_context_create")

    def ok(self, st, what):
        if st != 0:
            raise RuntimeError(f"{self.name} {what}: status {st}: "
                               f"{self.lib.fmsa_last_error().decode()}")

    def forward(self, q, k, v, causal):
        """A callable running this build's forward into a fresh O (workspace sized once)."""
        desc = self.lib.fmsa_attention_desc_init(q.shape[3])
        desc.causal = int(causal)
        o = torch.empty(*q.shape[:3], v.shape[3], device="cuda", dtype=q.dtype)
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device="cuda", dtype=torch.float32)
        t = [tdesc(x) for x in (q, k, v, o, lse)]
        n = C.c_size_t()
        self.ok(self.lib.fmsa_workspace_size(self.ctx, FWD, C.byref(desc), *map(C.byref, t[:3]),
                                             C.byref(n)), "fmsa_workspace_size")
        ws = torch.empty(max(n.value, 1), device="cuda", dtype=torch.uint8)

        def run():
            self.ok(self.lib.fmsa_forward(self.ctx, C.byref(desc), *map(C.byref, t), ws.data_ptr(),
                                          ws.numel(), torch.cuda.current_stream().cuda_stream),
                    "fmsa_forward")
        run.o = o
        return run


def checked(o, q, k, v, causal):
    """O of sampled rows of batch 0 against fp64 under the rule (bench/cuda_rows_check.py)."""
    rows = torch.linspace(0, q.shape[1] - 1, min(ARGS.check_rows, q.shape[1]), device="cuda").long()
    ref, _ = reference_rows(q, k, v, None, rows, causal)
    naive, _ = reference_rows(q, k, v, None, rows, causal, q.dtype)
    return rule_ok(o[0][rows], ref, naive, 2, q.dtype)[0]


def peers(q, k, v, causal):
    out = {}
    for name, be in (("FA2", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
        def fwd():
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                    enable_gqa=q.shape[2] != k.shape[2])
        try:
            with torch.no_grad():
                out[name] = do_bench(fwd, warmup=ARGS.warmup, rep=ARGS.rep, return_mode="median")
        except Exception as e:  # noqa: BLE001 - a peer refusing the shape is a result
            out[name + "_error"] = repr(e)[:120]
    return out


def emit(rec):
    print(json.dumps(rec), flush=True)
    if ARGS.json:
        with open(ARGS.json, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def time_builds(builds, q, k, v, causal):
    ms, ok = {}, {}
    only = dict(x.split("=", 1) for x in ARGS.dims_of)
    for bd in builds:
        if bd.name in only and str(q.shape[3]) not in only[bd.name].split(","):
            continue
        try:
            f = bd.forward(q, k, v, causal)
            f.o.fill_(float("nan"))
            f()
            torch.cuda.synchronize()
            ok[bd.name] = checked(f.o, q, k, v, causal)
            ms[bd.name] = do_bench(f, warmup=ARGS.warmup, rep=ARGS.rep, return_mode="median")
        except RuntimeError as e:
            ok[bd.name], ms[bd.name] = False, float("nan")
            print(f"# {bd.name}: {e}", file=sys.stderr)
    return ms, ok


def main():
    builds = [Build(*x.split("=", 1)) for x in ARGS.lib]
    names = [b.name for b in builds]
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda b, s, h, d: torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    table = []
    for d in map(int, ARGS.dims.split(",")):
        for s in map(int, ARGS.seqlens.split(",")):
            for m in ARGS.masks.split(","):
                b, h, causal = max(1, 16384 // s), max(1, 2048 // d), m == "causal"
                q, k, v = mk(b, s, h, d), mk(b, s, h, d), mk(b, s, h, d)
                fl = 4 * b * h * s * s * d / (2 if causal else 1)
                ms, ok = time_builds(builds, q, k, v, causal)
                pr = peers(q, k, v, causal)
                rec = dict(kind="sweep", d=d, s=s, b=b, h=h, causal=causal, ms=ms, ok=ok, peers=pr,
                           tflops={n: fl / t / 1e9 for n, t in list(ms.items()) + list(pr.items())
                                   if isinstance(t, float)})
                emit(rec)
                table.append(rec)
                del q, k, v
                torch.cuda.empty_cache()
    for sk in [int(x) for x in ARGS.decode.split(",") if x]:
        b, hq, hkv, d = 8, 32, 8, 128
        q, k, v = mk(b, 1, hq, d), mk(b, sk, hkv, d), mk(b, sk, hkv, d)
        kv = 2 * b * sk * hkv * d * 2
        for r in range(ARGS.rounds):
            ms, ok = time_builds(builds, q, k, v, False)
            pr = peers(q, k, v, False)
            rec = dict(kind="decode", sk=sk, round=r, ms=ms, ok=ok, peers=pr,
                       tbps={n: kv / t / 1e9 for n, t in list(ms.items()) + list(pr.items())
                             if isinstance(t, float)})
            emit(rec)
            table.append(rec)
        del q, k, v
        torch.cuda.empty_cache()
    cols = names + ["FA2", "cuDNN"]
    base = ARGS.ratio_base or names[0]
    print(f"\n# {torch.cuda.get_device_name()}, torch {torch.__version__}; TFLOP/s (decode: K+V TB/s);"
          " ok = every build's output passed the fp64 rule")
    print(f"{'shape':24s} {'ok':3s} " + " ".join(f"{c:>8s}" for c in cols) + " "
          + " ".join(f"{n + '/FA2':>9s}" for n in names) + f" {names[-1] + '/' + base:>9s}")
    for r in table:
        val = r["tflops"] if r["kind"] == "sweep" else r["tbps"]
        shape = (f"d{r['d']} s{r['s']} {'causal' if r['causal'] else 'full'}" if r["kind"] == "sweep"
                 else f"decode {r['sk']} r{r['round']}")
        fa = val.get("FA2" if r["kind"] == "sweep" else "cuDNN", float("nan"))
        cells = " ".join(f"{val.get(c, float('nan')):8.3f}" if r["kind"] == "decode"
                         else f"{val.get(c, float('nan')):8.1f}" for c in cols)
        rat = " ".join(f"{val.get(n, float('nan')) / fa:9.3f}" for n in names)
        ab = val.get(names[-1], float("nan")) / val.get(base, float("nan"))
        print(f"{shape:24s} {'yes' if all(r['ok'].values()) else 'NO':3s} {cells} {rat} {ab:9.3f}")
    print("# ratios: over FA2 for the sweep, over cuDNN for decode")


if __name__ == "__main__":
    main()
