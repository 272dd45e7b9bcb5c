#!/usr/bin/env python3
"""flashmsa's CPU backend beside PyTorch's CPU SDPA, in one process, same threads.

Loads the flashmsa shared library with ctypes and runs, for each shape, the
flashmsa CPU forward/backward and torch.nn.functional.scaled_dot_product_attention
(backward through autograd) on the same CPU tensors with the same thread count
(OMP_NUM_THREADS for both OpenMP runtimes, torch.set_num_threads).  Reports
GFLOP/s (forward 4*b*h*s*s*d, halved when causal; backward 2.5x the forward;
each the median of its runs), the speedup (the median over rounds of torch's
time / flashmsa's in the same round, not the ratio of the medians),
the fraction of the fp32 FMA peak measured by `flashmsa peak` on the same
threads (by default at the start of every timed round, each round's GFLOP/s
taken over its own peak, then the median), and the error of both against an fp64 reference on sampled query rows
(O forward, dQ backward).  flashmsa passes by the project's correctness rule:
its error is at most 2x (3x for gradients) the error of the naive
same-precision implementation (common/naive.h: materialised
S and P, sequential fp32 sums, rounded to the input dtype where a framework
would) plus 4 units of roundoff of max|ref|.  torch's error is reported beside
it; torch's blocked sums can be more accurate than the naive ones at long
sequences, so torch is not the yardstick.

Usage (thread count is fixed per process, so run once per count):
  python3 bench/cpu_vs_torch.py --lib build/libflashmsa.so --cli build/apps/flashmsa \
      --threads 16 [--dtypes fp32,bf16] [--dims 64,128] [--seqlens 512,2048,8192] \
      [--budget 240] [--json out.jsonl] [--variant 'NAME:VAR=value VAR2=value' ...]

--variant adds flashmsa runs under other settings of its developer variables
(FLASHMSA_CPU_TILES, FLASHMSA_CPU_BWD, ...; the library reads them when a
context is created, so each variant gets its own context), timed in the
same rotation as torch and the default: one line per variant, each checked,
ending in the variant's paired speed over the default (x1.000 for the default).
--lib-variant NAME:PATH does the same for another build of the library (the
commit before a change, say), loaded beside the first in the same process.
"""
import argparse
import ctypes as C
import json
import math
import os
import subprocess
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lib", default="build/libflashmsa.so")
    ap.add_argument("--cli", default="build/apps/flashmsa", help="for `flashmsa peak`")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlens", default="512,2048,8192")
    ap.add_argument("--masks", default="none,causal")
    ap.add_argument("--tokens", type=int, default=8192, help="batch*seqlen")
    ap.add_argument("--heads", type=int, default=0,
                    help="query heads (0: max(2, threads) so every thread has work)")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds of timed runs per pass")
    ap.add_argument("--settle", type=float, default=0.05,
                    help="seconds of sleep before each run, so the other OpenMP runtime's "
                         "threads have stopped spinning (0: none)")
    ap.add_argument("--max-runs", type=int, default=5)
    ap.add_argument("--max-round", type=float, default=10.0,
                    help="stop timing a shape after a round longer than this many seconds "
                         "(raise it for long shapes, so they get more than one round)")
    ap.add_argument("--round-peak", type=float, default=0.05,
                    help="seconds of `flashmsa peak` at the start of every timed round: the "
                         "%% of peak is the median over rounds of each round's GFLOP/s over "
                         "its own peak (0: one peak measured before each shape)")
    ap.add_argument("--check-rows", type=int, default=32)
    ap.add_argument("--budget", type=float, default=0.0,
                    help="stop starting new shapes after this many seconds (0 = no limit)")
    ap.add_argument("--json", default="", help="append one JSON object per result to this file")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:VAR=value[ VAR=value...]: also time flashmsa with these variables")
    ap.add_argument("--sinks", action="store_true",
                    help="also time flashmsa with attention sinks (desc.sinks, random per head) "
                         "in the same rotation (torch has none), checked against the fp64 "
                         "reference with sinks: the line's variant is 'NAME+sinks'")
    ap.add_argument("--lib-variant", action="append", default=[],
                    help="NAME:PATH[:VAR=value ...]: also time another build of the library "
                         "(e.g. the commit before a change) in the same rotation")
    return ap.parse_args()


ARGS = parse_args()
# Both OpenMP runtimes (torch's bundled one and the system libgomp flashmsa
# uses) read this when they start, which is why it is set before importing torch.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(ARGS.threads)

# ---------------------------------------------------------------- ctypes API
# The ctypes mirror of the C API is the Python package's (python/flashmsa/_capi.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from flashmsa._capi import (AttentionDesc as Desc, BackwardTensors as BwdTensors,  # noqa: E402
                            Tensor, prototype)

FMSA_BACKEND_CPU = 1
TORCH_DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def open_lib(path, env=None):
    """One build of the library (ctypes loads each path with RTLD_LOCAL, so two
    builds' symbols do not collide) and a CPU context of it (created under the
    variables of env, which the library reads at context creation)."""
    lib = prototype(C.CDLL(os.path.abspath(path)))
    return lib, context_under(lib, path, env or {})


def context_under(lib, path, env):
    """A CPU context of lib created with env's variables set (then restored)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        ctx = C.c_void_p()
        st = lib.fmsa_context_create(FMSA_BACKEND_CPU, 0, C.byref(ctx))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if st != 0:
        raise RuntimeError(f"{path}: fmsa_context_create: status {st}: {lib.fmsa_last_error().decode()}")
    return ctx


LIB, CTX = open_lib(ARGS.lib)


def check(status, what, lib=None):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {(lib or LIB).fmsa_last_error().decode()}")


def as_tensor(t):
    """A flashmsa descriptor of torch tensor t (strides in elements)."""
    d = Tensor()
    d.data = t.data_ptr()
    d.byte_offset = 0
    d.dtype = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3}[t.dtype]
    d.ndim = t.dim()
    for i in range(t.dim()):
        d.shape[i] = t.shape[i]
        d.strides[i] = t.stride(i)
    return d


# ---------------------------------------------------------------- helpers
def timed_rotation(fns, peak_probe=None):
    """Median seconds and run count of each function, timed in rotation
    (f0, f1, ..., then f1, ..., f0, ...: each round starts one later) after
    one warm-up run of each, so all see the
    same machine: on a shared VM the speed drifts by 10-40% within seconds
    (bench/RESULTS.md), and timing one side's runs before the other's turned
    that drift into fake speedups.  Each run starts --settle seconds after the
    previous one: torch's OpenMP runtime and the libgomp flashmsa uses are
    two thread pools, and the one that just ran keeps its threads spinning
    for milliseconds after its parallel region (libgomp: GOMP_SPINCOUNT),
    on cores the other's threads then share (on the device Xeon, one call
    read a 2-thread flashmsa pass at 552 GFLOP/s beside torch and 1,081 in
    its own process minutes earlier: bench/RESULTS.md 2026-12-01, second
    session; the VM's own drift is not removed by this)."""
    for f in fns:
        f()
    ts = [[] for _ in fns]
    peaks = []
    while len(ts[0]) < ARGS.max_runs and (sum(map(sum, ts)) < ARGS.min_time or not ts[0]):
        if peak_probe:
            if ARGS.settle > 0:
                time.sleep(ARGS.settle)
            peaks.append(peak_probe())
        # each round starts one function later, so none always runs right
        # after torch (whose runtime may still spin) or right after the probe
        k = len(ts[0]) % len(fns)
        for i in list(range(k, len(fns))) + list(range(k)):
            if ARGS.settle > 0:
                time.sleep(ARGS.settle)
            t0 = time.perf_counter()
            fns[i]()
            ts[i].append(time.perf_counter() - t0)
        if sum(t[-1] for t in ts) > ARGS.max_round:
            break
    return ts, peaks


def median(xs):
    return sorted(xs)[len(xs) // 2]


def round_peak():
    """fp32 peak of the selected path now (one short `flashmsa peak`, fp32 only:
    the bf16 loop, AMX on the Xeon, would run right before every timed round)."""
    return measure_peak(ARGS.round_peak, fp32_only=True)["fp32"]


def peak_fraction(flops, t, peaks, peak_fp32):
    """Median over rounds of the round's GFLOP/s over the round's own peak
    (the VM's clock moves within seconds: the same forward code read 15-20%
    apart in one rotation, bench/RESULTS.md); without round peaks, the
    median GFLOP/s over the peak measured before the shape."""
    if peaks and len(peaks) == len(t):
        return median([flops / x * 1e-9 / pk for x, pk in zip(t, peaks)])
    return flops / median(t) * 1e-9 / peak_fp32


def paired_speedup(t_torch, t_fmsa):
    """Median over rounds of torch's time / flashmsa's time in the same round:
    the two runs of a round are back to back, so a slow stretch of the VM
    that spans a round slows both, and the median drops the rounds it split."""
    return median([a / b for a, b in zip(t_torch, t_fmsa)])


def parse_sets(sets):
    """{VAR: value} of "VAR=value VAR2=value" (a variant's settings)."""
    return dict(x.split("=", 1) for x in sets.split())


def parse_variants():
    """[(name, {VAR: value}, (lib, ctx))]: the default first, then each
    --variant (the default build), then each --lib-variant (another build)."""
    out = [("default", {}, (LIB, CTX))]
    for v in ARGS.variant:
        name, _, sets = v.partition(":")
        env = parse_sets(sets)
        out.append((name, env, (LIB, context_under(LIB, ARGS.lib, env))))
    libs = {}
    for v in ARGS.lib_variant:
        name, _, rest = v.partition(":")
        path, _, sets = rest.partition(":")
        env = parse_sets(sets)
        if path not in libs:
            libs[path] = open_lib(path)
        lib = libs[path][0]
        out.append((name, env, (lib, context_under(lib, path, env)) if env else libs[path]))
    return out


VARIANTS = parse_variants()
VARIANT_VARS = sorted({k for _, env, _ in VARIANTS for k in env})


def with_variant(env, f):
    """f run under the variant's variables (the others unset).  The library read
    its own at the variant's context creation; this keeps anything else that
    looks at the environment during the call consistent with the variant."""
    def run():
        for k in VARIANT_VARS:
            if k in env:
                os.environ[k] = env[k]
            else:
                os.environ.pop(k, None)
        return f()
    return run


def measure_peak(seconds=0.3, fp32_only=False):
    """fp32 (and bf16 where present) peak of the selected kernel path on ARGS.threads.
    Measured again right before every shape (0.1 s): the device VM's clock moves by
    10-30% between minutes, so one figure taken at the start skews every percentage."""
    out = {"fp32": float("nan"), "bf16": float("nan"), "path": "?"}
    try:
        res = subprocess.run([ARGS.cli, "peak", "--json", "--selected", "--seconds", str(seconds),
                              "--threads", str(ARGS.threads)] + (["--fp32-only"] if fp32_only else []),
                             capture_output=True, text=True, timeout=120)
        for line in res.stdout.splitlines():
            r = json.loads(line)
            if r.get("selected"):
                out[r["kind"]] = r["gflops"]
                out["path"] = r["path"]
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"# peak: {e}", file=sys.stderr)
    return out


def with_sink(s, sinks):
    """Scores [H,r,S] with each head's sink logit appended as one more key column
    (it has no value: callers drop the column from P after the softmax)."""
    t = sinks.to(s.dtype)[:, None, None].expand(s.shape[0], s.shape[1], 1)
    return torch.cat([s, t], dim=-1)


def reference_rows(q, k, v, do, rows, scale, causal, sinks=None):
    """fp64 O and dQ of the sampled query rows of batch 0, every head ([B,S,H,D] inputs);
    sinks ([H] logits or None): one value-less softmax term per head."""
    q64, k64, v64, do64 = (x[0].double().transpose(0, 1) for x in (q, k, v, do))  # [H,S,D]
    s = q64[:, rows] @ k64.transpose(1, 2) * scale                                  # [H,r,S]
    if causal:
        keys = torch.arange(k64.shape[1])
        s = s.masked_fill(keys[None, None, :] > rows[None, :, None], float("-inf"))
    if sinks is not None:
        s = with_sink(s, sinks)
    p = torch.softmax(s, dim=-1)
    lse_max = torch.logsumexp(s, dim=-1).abs().max().item()
    if sinks is not None:
        p = p[..., :-1]
    o = p @ v64                                                                      # [H,r,D]
    dp = do64[:, rows] @ v64.transpose(1, 2)
    delta = (do64[:, rows] * o).sum(-1, keepdim=True)
    dq = (p * (dp - delta)) @ k64 * scale
    return o.transpose(0, 1), dq.transpose(0, 1), lse_max                            # [r,H,D]


def rule_floor(dt, ref_max, lse_max, softmax_units):
    """The floor of common/check_rule.h (derivation there): storage
    (2 u(dtype) + 2 u_f32) |ref| plus the softmax-argument term u_f32 K (1 + A) |ref|."""
    u32 = UNIT_ROUNDOFF["fp32"]
    return ((2 * UNIT_ROUNDOFF[dt] + 2 * u32) + u32 * softmax_units * (1 + lse_max)) * ref_max


def naive_rows(q, k, v, do, rows, scale, causal, tdt, sinks=None):
    """The naive same-precision O and dQ of the sampled rows of batch 0 ([r,H,D]):
    every sum sequential in fp32, S, P, O, dP, dS, dQ rounded to the input dtype."""
    rnd = (lambda x: x.to(tdt).float()) if tdt != torch.float32 else (lambda x: x)
    qf, kf, vf, dof = (x[0].float().transpose(0, 1) for x in (q, k, v, do))          # [H,S,D]
    qr, dor = qf[:, rows], dof[:, rows]                                                # [H,r,D]
    s = torch.zeros(qr.shape[0], qr.shape[1], kf.shape[1])
    dp = torch.zeros_like(s)
    for d in range(qr.shape[2]):                     # sum_d, in order
        s += qr[:, :, d:d + 1] * kf[:, None, :, d]
        dp += dor[:, :, d:d + 1] * vf[:, None, :, d]
    s = rnd(s * scale)
    if causal:
        keys = torch.arange(kf.shape[1])
        s = s.masked_fill(keys[None, None, :] > rows[None, :, None], float("-inf"))
    p = rnd(torch.softmax(s if sinks is None else with_sink(s, sinks), dim=-1))
    if sinks is not None:
        p = p[..., :-1]
    dp = rnd(dp)
    ds = rnd(p * (dp - (p * dp).sum(-1, keepdim=True)))
    o = torch.zeros_like(qr)
    dq = torch.zeros_like(qr)
    for j in range(kf.shape[1]):                     # sum_j, in order
        o += p[:, :, j:j + 1] * vf[:, None, j]
        dq += ds[:, :, j:j + 1] * kf[:, None, j]
    return rnd(o).transpose(0, 1), rnd(dq * scale).transpose(0, 1)


def max_err(x, ref):
    x = x.double()
    if torch.isnan(x).any():
        return float("inf")
    return (x - ref).abs().max().item()


def run_shape(dt, d, s, causal, peak):
    b = max(1, ARGS.tokens // s)
    h = ARGS.heads or max(2, ARGS.threads)
    tdt = TORCH_DTYPE[dt]
    probe = round_peak if ARGS.round_peak > 0 else None
    scale = 1.0 / math.sqrt(d)
    g = torch.Generator().manual_seed(1000 * d + s + causal)
    q, k, v, do = (torch.randn(b, s, h, d, generator=g).to(tdt) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    T = {n: as_tensor(x) for n, x in
         dict(q=q, k=k, v=v, o=o, do=do, dq=dq, dk=dk, dv=dv, lse=lse).items()}
    desc = LIB.fmsa_attention_desc_init(d)
    desc.causal = int(causal)
    fwd_flops = 4.0 * b * h * s * s * d / (2.0 if causal else 1.0)

    sinks = torch.randn(h, generator=g) if ARGS.sinks else None
    desc_s = Desc.from_buffer_copy(desc)
    if sinks is not None:
        dsink = torch.empty(h, dtype=torch.float32)
        desc_s.sinks, T["dsink"] = as_tensor(sinks), as_tensor(dsink)

    def calls(lib, ctx, desc=desc):
        """(forward, backward) of one build, each with its own workspace."""
        ws_f, ws_b = C.c_size_t(), C.c_size_t()
        check(lib.fmsa_workspace_size(ctx, 0, desc, T["q"], T["k"], T["v"], C.byref(ws_f)), "ws fwd", lib)
        check(lib.fmsa_workspace_size(ctx, 1, desc, T["q"], T["k"], T["v"], C.byref(ws_b)), "ws bwd", lib)
        ws = torch.empty(max(ws_f.value, ws_b.value, 1), dtype=torch.uint8)

        def fwd():
            check(lib.fmsa_forward(ctx, desc, T["q"], T["k"], T["v"], T["o"], T["lse"],
                                   C.c_void_p(ws.data_ptr()), ws_f.value, None), "fmsa_forward", lib)

        bt = BwdTensors(q=T["q"], k=T["k"], v=T["v"], o=T["o"], dout=T["do"], lse=T["lse"],
                        dq=T["dq"], dk=T["dk"], dv=T["dv"])
        if desc is desc_s:  # with sinks the backward also writes dsink
            bt.dsink = T["dsink"]

        def bwd():
            check(lib.fmsa_backward(ctx, desc, bt, C.c_void_p(ws.data_ptr()), ws_b.value, None),
                  "fmsa_backward", lib)
        return fwd, bwd

    runs = [(name, env) + calls(*lc) for name, env, lc in VARIANTS]  # (name, env, fwd, bwd)
    if sinks is not None:  # each variant again with sinks, same rotation
        runs += [(name + "+sinks", env) + calls(*lc, desc=desc_s) for name, env, lc in VARIANTS]

    # torch wants [B, H, S, D]; contiguous copies so its kernels see their best layout
    tq, tk, tv, tdo = (x.transpose(1, 2).contiguous() for x in (q, k, v, do))
    tq.requires_grad_(True)
    tk.requires_grad_(True)
    tv.requires_grad_(True)
    results = []
    rows = torch.unique(torch.randint(0, s, (ARGS.check_rows,), generator=g))
    ref_o, ref_dq, lse_max = reference_rows(q, k, v, do, rows, scale, causal)
    nv_o, nv_dq = naive_rows(q, k, v, do, rows, scale, causal, tdt)
    if sinks is not None:
        ref_s = reference_rows(q, k, v, do, rows, scale, causal, sinks)
        nv_s = naive_rows(q, k, v, do, rows, scale, causal, tdt, sinks)
    # per run: (ref O, ref dQ, lse_max, naive O, naive dQ) it is checked against
    refs = [(ref_s + nv_s) if name.endswith("+sinks") else (ref_o, ref_dq, lse_max, nv_o, nv_dq)
            for name, *_ in runs]

    # forward: torch and every variant in one rotation, then each variant's check
    with torch.no_grad():
        times, peaks_f = timed_rotation(
            [lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)]
            + [with_variant(env, fwd) for _, env, fwd, _ in runs], probe)
        t_out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    e_t = max_err(t_out.transpose(1, 2)[0, rows], ref_o)
    for (name, env, fwd, _), t_f, (r_o, _, r_lse, n_o, _) in zip(runs, times[1:], refs):
        floor = rule_floor(dt, r_o.abs().max().item(), r_lse, 3)
        e_n = max_err(n_o, r_o)
        o.fill_(float("nan"))
        with_variant(env, fwd)()
        e_f = max_err(o[0, rows], r_o)
        results.append(("fwd", name, fwd_flops, t_f, times[0], peaks_f, e_f, e_t, e_n,
                        e_f <= 2 * e_n + floor))

    if not ARGS.no_backward:
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        times, peaks_b = timed_rotation(
            [lambda: torch.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True)]
            + [with_variant(env, bwd) for _, env, _, bwd in runs], probe)
        t_dq = torch.autograd.grad(out, (tq,), tdo, retain_graph=True)[0]
        e_t = max_err(t_dq.transpose(1, 2)[0, rows], ref_dq)
        for (name, env, fwd, bwd), t_f, (r_o, r_dq, r_lse, _, n_dq) in zip(runs, times[1:], refs):
            floor = rule_floor(dt, r_dq.abs().max().item(), r_lse, 6)
            e_n = max_err(n_dq, r_dq)
            with_variant(env, fwd)()  # O and lse of this run's own forward (sinks or not)
            dq.fill_(float("nan"))
            with_variant(env, bwd)()
            e_f = max_err(dq[0, rows], r_dq)
            results.append(("bwd", name, 2.5 * fwd_flops, t_f, times[0], peaks_b, e_f, e_t,
                            e_n, e_f <= 3 * e_n + floor))
    with_variant({}, lambda: None)()

    t_default = {r[0]: r[3] for r in results if r[1] == "default"}
    for (ps, variant, flops, t_f, t_t, pks, ef, et, en, ok) in results:
        gf, gt = flops / median(t_f) * 1e-9, flops / median(t_t) * 1e-9
        # a variant's speed over the default's, paired by round as the speedup is
        vs_def = paired_speedup(t_default[ps], t_f)
        sp, nf, nt = paired_speedup(t_t, t_f), len(t_f), len(t_t)
        pf, pt = peak_fraction(flops, t_f, pks, peak["fp32"]), peak_fraction(flops, t_t, pks, peak["fp32"])
        pk = median(pks) if pks else peak["fp32"]
        rec = dict(threads=ARGS.threads, path=peak["path"], dtype=dt, dim=d, seqlen=s, batch=b,
                   heads=h, causal=causal, pass_=ps, flops=flops, fmsa_gflops=gf,
                   torch_gflops=gt, speedup=sp, fmsa_peak_frac=pf,
                   torch_peak_frac=pt, peak_fp32=pk, round_peaks=pks, fmsa_err=ef, torch_err=et, naive_err=en,
                   ok=bool(ok), variant=variant, vs_default=vs_def,
                   fmsa_runs=nf, torch_runs=nt)
        print(f"{ARGS.threads:3d} {dt:5s} {d:4d} {s:6d} {b:3d} {h:3d} {'yes' if causal else 'no':6s} "
              f"{ps:4s} {gf:9.1f} {gt:9.1f} {sp:6.2f}x {100 * pf:6.1f}% "
              f"{100 * pt:6.1f}%  {ef:9.2e} {et:9.2e} {en:9.2e}  {'ok' if ok else 'FAIL'}"
              f"  {pk:6.1f}" + (f"  {variant} x{vs_def:.3f}" if len(runs) > 1 else ""),
              flush=True)
        if ARGS.json:
            with open(ARGS.json, "a") as f:
                f.write(json.dumps({k.rstrip("_"): v for k, v in rec.items()}) + "\n")
    return all(r[-1] for r in results)


def main():
    peak = measure_peak()
    print(f"# cpu_vs_torch: {ARGS.threads} threads, torch {torch.__version__}, flashmsa path "
          f"{peak['path']}, measured peak fp32 {peak['fp32']:.1f} GFLOP/s, bf16 {peak['bf16']:.1f}")
    print("# GFLOP/s: fwd 4*b*h*s*s*d (causal /2), bwd 2.5x (medians); speedup: median of "
          "the rounds' torch/flashmsa time; peak%: "
          + ("median of the rounds' GFLOP/s over the fp32 FMA peak measured at the start of "
             "the same round (peak column: the median peak); " if ARGS.round_peak > 0 else
             "over the fp32 FMA peak measured right before each shape (peak column); ") +
          "err: max|x - fp64| on sampled rows (O fwd, dQ bwd); check: fmsa <= 2x (3x dQ) naive "
          "+ floor (common/check_rule.h)")
    print("thr dtype  dim seqlen   b   h causal pass fmsa_GF/s torch_GF/s speedup fmsa%  torch%"
          "   fmsa_err torch_err naive_err  check  peak")
    t0 = time.perf_counter()
    ok_all = True
    for dt in ARGS.dtypes.split(","):
        for d in (int(x) for x in ARGS.dims.split(",")):
            for s in (int(x) for x in ARGS.seqlens.split(",")):
                for mask in ARGS.masks.split(","):
                    if ARGS.budget and time.perf_counter() - t0 > ARGS.budget:
                        print(f"# budget: skipped {dt} d{d} s{s} {mask}", flush=True)
                        continue
                    print(f"# [{time.perf_counter() - t0:5.0f}s] {dt} d{d} s{s} {mask}",
                          file=sys.stderr, flush=True)
                    ok_all &= run_shape(dt, d, s, mask == "causal", measure_peak(0.1))
    print(f"# done in {time.perf_counter() - t0:.0f} s: {'all checks passed' if ok_all else 'CHECK FAILED'}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
