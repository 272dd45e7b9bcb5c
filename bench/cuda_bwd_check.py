#!/usr/bin/env python3
"""Checks and times the CUDA backward's development harness on the device.

ctypes over build-cudabwd/libfmsa_cuda_dev_bwd.so (layout checked against the
library's own sizeof/offsetof), torch tensors by data pointer, the torch
stream as the stream.  O and LSE come from a torch fp32/fp64 forward, so the
forward kernels are not needed.  Correctness: the project's rule, max|ours -
ref| <= 3 max|naive - ref| + floor, ref = fp64 autograd, naive = the
same-precision naive backward of common/naive.c written in
torch fp32 (TF32 off).  Then determinism (10 runs, bitwise) and the standard
sweep beside SDPA's FlashAttention-2 and cuDNN backends.

usage: cuda_bwd_check.py [--lib PATH] [--grid] [--det] [--sweep] [--variants]
"""
import argparse
import ctypes as C
import math
import os
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

P = C.c_void_p
LL = C.c_longlong


class Fwd(C.Structure):
    _fields_ = [(n, P) for n in ("q", "k", "v", "o", "lse", "alibi", "mask", "cu_seqlens_q",
                                 "cu_seqlens_k", "block_table", "seqused_k", "sinks", "status",
                                 "o_accum", "lse_accum")] + \
        [(n, LL) for n in ("q_sb", "q_ss", "q_sh", "k_sb", "k_ss", "k_sh", "v_sb", "v_ss", "v_sh",
                           "o_sb", "o_ss", "o_sh", "lse_sb", "lse_sh", "lse_ss", "alibi_sb",
                           "alibi_sh", "mask_sb", "mask_sh", "mask_ss", "cu_q_s", "cu_k_s",
                           "bt_sb", "bt_sp", "su_s", "sinks_s")] + \
        [(n, C.c_int) for n in ("batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv",
                                "head_dim", "head_dim_v", "total_q", "total_k", "page_size",
                                "max_pages", "num_pages", "num_splits", "alibi_offset")] + \
        [("window_left", LL), ("window_right", LL), ("softmax_scale", C.c_float),
         ("scale_log2", C.c_float), ("softcap", C.c_float), ("is_varlen", C.c_int),
         ("is_paged", C.c_int), ("has_seqused_k", C.c_int)]


class Bwd(C.Structure):
    _fields_ = [("fwd", Fwd), ("dout", P), ("dq", P), ("dk", P), ("dv", P)] + \
        [(n, LL) for n in ("do_sb", "do_ss", "do_sh", "dq_sb", "dq_ss", "dq_sh", "dk_sb", "dk_ss",
                           "dk_sh", "dv_sb", "dv_ss", "dv_sh")] + \
        [("dsum", P), ("dq_accum", P), ("dk_accum", P), ("dv_accum", P), ("dlse", P),
         ("dsinks", P), ("deterministic", C.c_int), ("dq_sems", P), ("num_sems", C.c_int),
         ("accum_dim", C.c_int), ("dlse_sb", LL), ("dlse_sh", LL), ("dlse_ss", LL),
         ("sink_logits", P), ("sink_logits_s", LL), ("dsinks_s", LL)]


def off(path):
    cls, o = Bwd, 0
    for part in path.split("."):
        f = getattr(cls, part)
        o += f.offset
        cls = dict(cls._fields_)[part]
    return o


LAYOUT = ["fwd.q", "fwd.status", "fwd.q_sb", "fwd.su_s", "fwd.batch", "fwd.num_splits",
          "fwd.window_left", "fwd.softmax_scale", "fwd.has_seqused_k", "dout", "do_sb", "dsum",
          "dlse", "deterministic", "dq_sems", "num_sems", "accum_dim"]


def load_lib(path):
    lib = C.CDLL(path)
    lib.fmsa_cuda_dev_bwd_layout.argtypes = [C.POINTER(LL), C.c_int]
    lib.fmsa_cuda_dev_bwd_workspace.argtypes = [C.POINTER(Bwd), C.c_int, C.c_char_p]
    lib.fmsa_cuda_dev_bwd_workspace.restype = LL
    lib.fmsa_cuda_dev_bwd_name.argtypes = [C.c_int, C.c_int, C.c_char_p]
    lib.fmsa_cuda_dev_bwd_name.restype = C.c_char_p
    lib.fmsa_cuda_dev_backward.argtypes = [C.POINTER(Bwd), C.c_int, C.c_char_p, P, LL, P]
    buf = (LL * 64)()
    n = lib.fmsa_cuda_dev_bwd_layout(buf, 64)
    want = [C.sizeof(Bwd), C.sizeof(Fwd)] + [off(x) for x in LAYOUT]
    got = list(buf[:n])
    if got != want:
        sys.exit("ctypes layout mismatch: lib %s mirror %s" % (got, want))
    print("layout ok: sizeof(bwd)=%d sizeof(fwd)=%d" % (want[0], want[1]))
    return lib


def ptr(t):
    return None if t is None else t.data_ptr()


class Case:
    """One backward problem on the device, with its tensors and params."""

    def __init__(self, dtype=torch.bfloat16, b=1, sq=128, sk=None, hq=2, hkv=None, d=64,
                 causal=False, wl=-1, wr=-1, softcap=0.0, alibi=False, mask=False,
                 seqlens=None, seqlens_k=None, det=False, scale=None, fwd_f64=True, seed=0,
                 nan=False):
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.dtype, self.d, self.hq = dtype, d, hq
        self.hkv = hkv or hq
        self.causal, self.softcap, self.det = causal, softcap, det
        self.wl, self.wr = wl, (0 if causal else wr)
        self.scale = scale if scale is not None else 1.0 / math.sqrt(d)
        self.varlen = seqlens is not None
        if self.varlen:
            self.sql = list(seqlens)
            self.skl = list(seqlens_k if seqlens_k is not None else seqlens)
            self.b = len(self.sql)
            tq, tk = sum(self.sql), sum(self.skl)
            qshape, kshape = (1, tq, hq, d), (1, tk, self.hkv, d)
            self.sq, self.sk = max(self.sql + [1]), max(self.skl + [1])
        else:
            self.b, self.sq, self.sk = b, sq, (sk or sq)
            self.sql, self.skl = [sq] * b, [self.sk] * b
            qshape, kshape = (b, sq, hq, d), (b, self.sk, self.hkv, d)
        rnd = lambda s: torch.randn(s, generator=g, device="cuda", dtype=torch.float32).to(dtype)
        self.q, self.k, self.v, self.do = rnd(qshape), rnd(kshape), rnd(kshape), rnd(qshape)
        self.alibi = (torch.rand(hq, generator=g, device="cuda") * 0.3 + 0.02) if alibi else None
        self.mask = None
        if mask:
            nb = (self.sk + 7) // 8
            bits = torch.rand((self.b, hq, self.sq, self.sk), generator=g, device="cuda") < 0.7
            bits[:, :, 3, :] = False  # fully masked rows
            if nan:  # keys 8k + 2 and 16..23 hidden from every row (as tests/test_grid_masked_nan.c)
                bits[..., 2::8] = False
                bits[..., 16:24] = False
            bits8 = torch.zeros((self.b, hq, self.sq, nb * 8), dtype=torch.bool, device="cuda")
            bits8[..., :self.sk] = bits
            w = (2 ** torch.arange(8, device="cuda")).to(torch.int32)
            self.mask = (bits8.view(self.b, hq, self.sq, nb, 8).to(torch.int32) * w).sum(-1).to(torch.uint8).contiguous()
        self.forward(fwd_f64)

    def poison_hidden(self):
        """NaN into K and NaN/+Inf/-Inf into V of every key that no row of any query head of its
        kv head sees (after the forward and the references, which never read them)."""
        rep = self.hq // self.hkv
        self.hidden = 0
        for (qb, qs), (kb, ks), bi, sq, sk in self.seqs():
            if sk == 0: continue
            if sq == 0:
                seen = torch.zeros((self.hkv, sk), dtype=torch.bool, device="cuda")
            else:
                seen = self.vis(bi, sq, sk).any(1).view(self.hkv, rep, sk).any(1)  # [hkv, sk]
            hid = (~seen).T.contiguous()  # [sk, hkv]
            kk, vv = self.k[kb, ks], self.v[kb, ks]
            kk[hid] = float("nan")
            j = torch.arange(sk, device="cuda").view(-1, 1).expand(sk, self.hkv)
            for r, val in enumerate((float("nan"), float("inf"), float("-inf"))):
                vv[hid & (j % 3 == r)] = val
            self.hidden += int(hid.sum().item())

    def vis(self, bi, sq, sk, h0=0, h1=None):
        """[h1-h0, sq, sk] visibility of sequence bi, query heads h0..h1."""
        h1 = self.hq if h1 is None else h1
        i = torch.arange(sq, device="cuda").view(-1, 1)
        j = torch.arange(sk, device="cuda").view(1, -1)
        diag = i + sk - sq
        v = torch.ones((sq, sk), dtype=torch.bool, device="cuda")
        if self.wl >= 0: v &= j >= diag - self.wl
        if self.wr >= 0: v &= j <= diag + self.wr
        v = v.unsqueeze(0).expand(h1 - h0, sq, sk)
        if self.mask is not None:
            m = self.mask[bi, h0:h1, :sq, :]
            bits = ((m.unsqueeze(-1).to(torch.int32) >> torch.arange(8, device="cuda").to(torch.int32)) & 1).bool()
            v = v & bits.reshape(h1 - h0, sq, -1)[:, :, :sk]
        return v

    def seqs(self):
        """(q slice, k slice, batch index, sq, sk) per sequence."""
        out, q0, k0 = [], 0, 0
        for bi in range(self.b):
            sq, sk = self.sql[bi], self.skl[bi]
            if self.varlen:
                out.append(((0, slice(q0, q0 + sq)), (0, slice(k0, k0 + sk)), bi, sq, sk))
            else:
                out.append(((bi, slice(0, sq)), (bi, slice(0, sk)), bi, sq, sk))
            q0 += sq
            k0 += sk
        return out

    def scores(self, q, k, bi, sq, sk, prec, h0=0, h1=None):
        """Scores [h1-h0, sq, sk] of query heads h0..h1 (transformed), softcapped c, visibility."""
        h1 = self.hq if h1 is None else h1
        rep = self.hq // self.hkv
        kk = k[:, torch.arange(h0, h1, device="cuda") // rep]
        x = torch.einsum("ihd,jhd->hij", q[:, h0:h1], kk) * self.scale
        c = self.softcap * torch.tanh(x / self.softcap) if self.softcap > 0 else x
        s = c
        if self.alibi is not None:
            i = torch.arange(sq, device="cuda").view(-1, 1)
            j = torch.arange(sk, device="cuda").view(1, -1)
            dist = (i + sk - sq - j).abs().to(prec)
            s = s - self.alibi[h0:h1].to(prec).view(-1, 1, 1) * dist
        vis = self.vis(bi, sq, sk, h0, h1)
        return s, c, vis

    def forward(self, f64):
        prec = torch.float64 if f64 else torch.float32
        self.o = torch.zeros_like(self.q)
        self.lse = torch.full((1 if self.varlen else self.b, self.hq, self.q.shape[1]), -math.inf,
                              device="cuda", dtype=torch.float32)
        for (qb, qs), (kb, ks), bi, sq, sk in self.seqs():
            if sq == 0: continue
            q, k, v = (t.to(prec) for t in (self.q[qb, qs], self.k[kb, ks], self.v[kb, ks]))
            if sk == 0:
                continue
            hc = max(1, min(self.hq, (1 << 28) // max(1, sq * sk)))
            rep = self.hq // self.hkv
            for h0 in range(0, self.hq, hc):
                h1 = min(self.hq, h0 + hc)
                s, _, vis = self.scores(q, k, bi, sq, sk, prec, h0, h1)
                s = torch.where(vis, s, torch.tensor(-math.inf, dtype=prec, device="cuda"))
                lse = torch.logsumexp(s, dim=-1)  # [hc, sq]
                rows = torch.isfinite(lse)
                p = torch.where(rows.unsqueeze(-1), torch.exp(s - torch.where(rows, lse, 0).unsqueeze(-1)), 0)
                del s
                vv = v[:, torch.arange(h0, h1, device="cuda") // rep]
                o = torch.einsum("hij,jhd->ihd", p, vv)
                self.o[qb, qs, h0:h1] = o.to(self.dtype)
                self.lse[qb, h0:h1, qs] = lse.to(torch.float32)
                del p

    def reference(self, naive=False):
        """(dq, dk, dv, A) in float64: fp64 autograd, or the same-precision naive."""
        dq = torch.zeros(self.q.shape, dtype=torch.float64, device="cuda")
        dk = torch.zeros(self.k.shape, dtype=torch.float64, device="cuda")
        dv = torch.zeros(self.k.shape, dtype=torch.float64, device="cuda")
        amax = 0.0
        rnd = lambda t: t.to(self.dtype).to(torch.float32)
        rep = self.hq // self.hkv
        for (qb, qs), (kb, ks), bi, sq, sk in self.seqs():
            if sq == 0 or sk == 0: continue
            if not naive:
                q, k, v, do = (t.to(torch.float64).requires_grad_(True) for t in
                               (self.q[qb, qs], self.k[kb, ks], self.v[kb, ks], self.do[qb, qs]))
                s, _, vis = self.scores(q, k, bi, sq, sk, torch.float64)
                rows = vis.any(-1, keepdim=True)
                s = torch.where(vis, s, torch.tensor(-math.inf, dtype=torch.float64, device="cuda"))
                s = torch.where(rows, s, 0.0)
                p = torch.softmax(s, dim=-1) * rows
                with torch.no_grad():
                    lse = torch.logsumexp(s, -1)[rows.squeeze(-1)]
                    if lse.numel(): amax = max(amax, lse.abs().max().item())
                vv = v.repeat_interleave(rep, dim=1) if rep > 1 else v
                o = torch.einsum("hij,jhd->ihd", p, vv)
                gq, gk, gv = torch.autograd.grad(o, (q, k, v), grad_outputs=do.detach())
                dq[qb, qs], dk[kb, ks], dv[kb, ks] = gq, gk, gv
            else:
                q, k, v, do = (t.to(torch.float32) for t in
                               (self.q[qb, qs], self.k[kb, ks], self.v[kb, ks], self.do[qb, qs]))
                s, c, vis = self.scores(q, k, bi, sq, sk, torch.float32)
                s = torch.where(vis, rnd(s), -math.inf)
                m = s.max(-1, keepdim=True).values
                rows = torch.isfinite(m)
                e = torch.where(rows, torch.exp(s - torch.where(rows, m, 0)), 0)
                l = e.sum(-1, keepdim=True)
                p = rnd(torch.where(rows, e / torch.where(rows, l, 1), 0))
                kk = k.repeat_interleave(rep, dim=1) if rep > 1 else k
                vv = v.repeat_interleave(rep, dim=1) if rep > 1 else v
                dp = rnd(torch.einsum("ihd,jhd->hij", do, vv))
                di = (p * dp).sum(-1, keepdim=True)
                ds = rnd(p * (dp - di))
                if self.softcap > 0:
                    ds = rnd(ds * (1 - (c / self.softcap) ** 2))
                gq = rnd(torch.einsum("hij,jhd->ihd", ds, kk) * self.scale)
                gk_h = torch.einsum("hij,ihd->jhd", ds, q) * self.scale
                gv_h = torch.einsum("hij,ihd->jhd", p, do)
                if rep > 1:
                    gk_h = gk_h.view(sk, self.hkv, rep, self.d).sum(2)
                    gv_h = gv_h.view(sk, self.hkv, rep, self.d).sum(2)
                dq[qb, qs] = gq.double()
                dk[kb, ks] = rnd(gk_h).double()
                dv[kb, ks] = rnd(gv_h).double()
        return dq, dk, dv, amax

    def params(self, dq, dk, dv):
        p = Bwd()
        f = p.fwd
        st = lambda t: t.stride()[:3]
        f.q, f.k, f.v, f.o, f.lse = ptr(self.q), ptr(self.k), ptr(self.v), ptr(self.o), ptr(self.lse)
        f.q_sb, f.q_ss, f.q_sh = st(self.q)
        f.k_sb, f.k_ss, f.k_sh = st(self.k)
        f.v_sb, f.v_ss, f.v_sh = st(self.v)
        f.o_sb, f.o_ss, f.o_sh = st(self.o)
        f.lse_sb, f.lse_sh, f.lse_ss = self.lse.stride()
        if self.alibi is not None:
            f.alibi, f.alibi_sb, f.alibi_sh = ptr(self.alibi), 0, 1
        if self.mask is not None:
            f.mask = ptr(self.mask)
            f.mask_sb, f.mask_sh, f.mask_ss = self.mask.stride()[:3]
        self.status = torch.zeros(1, dtype=torch.int32, device="cuda")
        f.status = ptr(self.status)
        if self.varlen:
            self.cuq = torch.tensor([0] + list(torch.tensor(self.sql).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
            self.cuk = torch.tensor([0] + list(torch.tensor(self.skl).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
            f.cu_seqlens_q, f.cu_seqlens_k, f.cu_q_s, f.cu_k_s = ptr(self.cuq), ptr(self.cuk), 1, 1
            f.is_varlen = 1
        f.batch, f.seqlen_q, f.seqlen_k = self.b, self.sq, self.sk
        f.heads_q, f.heads_kv, f.head_dim, f.head_dim_v = self.hq, self.hkv, self.d, self.d
        f.total_q, f.total_k = self.q.shape[1], self.k.shape[1]
        f.num_splits = 1
        f.window_left, f.window_right = self.wl, self.wr
        f.softmax_scale, f.scale_log2, f.softcap = self.scale, self.scale * 1.4426950408889634, self.softcap
        p.dout, p.dq, p.dk, p.dv = ptr(self.do), ptr(dq), ptr(dk), ptr(dv)
        p.do_sb, p.do_ss, p.do_sh = st(self.do)
        p.dq_sb, p.dq_ss, p.dq_sh = st(dq)
        p.dk_sb, p.dk_ss, p.dk_sh = st(dk)
        p.dv_sb, p.dv_ss, p.dv_sh = st(dv)
        p.deterministic = 1 if self.det else 0
        return p


class Runner:
    def __init__(self, lib, case, variant=None):
        self.lib, self.case = lib, case
        self.variant = variant.encode() if variant else None
        self.bf16 = 1 if case.dtype == torch.bfloat16 else 0
        self.dq = torch.full_like(case.q, float("nan"))
        self.dk = torch.full_like(case.k, float("nan"))
        self.dv = torch.full_like(case.k, float("nan"))
        self.p = case.params(self.dq, self.dk, self.dv)
        n = lib.fmsa_cuda_dev_bwd_workspace(C.byref(self.p), self.bf16, self.variant)
        if n < 0: raise RuntimeError("unsupported")
        self.ws = torch.empty(max(n, 16), dtype=torch.uint8, device="cuda")
        self.ws.fill_(0xFF)  # poison: the preprocess must zero what it uses
        self.name = lib.fmsa_cuda_dev_bwd_name(self.bf16, case.d, self.variant).decode()

    def poison(self):
        for t in (self.dq, self.dk, self.dv): t.fill_(float("nan"))

    def __call__(self):
        rc = self.lib.fmsa_cuda_dev_backward(C.byref(self.p), self.bf16, self.variant, self.ws.data_ptr(),
                                             self.ws.numel(), torch.cuda.current_stream().cuda_stream)
        if rc: raise RuntimeError("launch rc %d" % rc)


U = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def judge(name, case, outs, ref, nv):
    """Prints one line per tensor; returns True when all pass."""
    ok = True
    u32 = 2.0 ** -24
    msgs = []
    for tn, o, r, n in zip(("dq", "dk", "dv"), outs, ref[:3], nv[:3]):
        o64 = o.double()
        nan = int(torch.isnan(o64).sum().item())
        err = (o64 - r).abs()
        e = err.max().item() if err.numel() else 0.0
        en = (n - r).abs().max().item() if r.numel() else 0.0
        rmax = r.abs().max().item() if r.numel() else 0.0
        floor = (2 * U[case.dtype] + 2 * u32) * rmax + u32 * 6 * (1 + ref[3]) * rmax
        tol = 3 * en + floor
        good = nan == 0 and e <= tol
        where = ""
        if not good:
            idx = torch.nonzero(torch.isnan(o64) | (err > tol))
            where = " first_bad=%s ours=%g ref=%g" % (tuple(idx[0].tolist()), o64[tuple(idx[0].tolist())].item(),
                                                      r[tuple(idx[0].tolist())].item()) if idx.numel() else ""
        msgs.append("%s err %.3g naive %.3g tol %.3g max|ref| %.3g nan %d%s%s" %
                    (tn, e, en, tol, rmax, nan, "" if good else " FAIL", where))
        ok &= good
    st = int(case.status.item())
    if st: msgs.append("status %d" % st); ok = False
    print("%-4s %-58s %s" % ("ok" if ok else "FAIL", name, " | ".join(msgs)), flush=True)
    return ok


def grid(lib, variants, quick=False):
    bf, fp = torch.bfloat16, torch.float16
    cases = []
    for d in (64, 128, 256):
        for causal in (False, True):
            cases.append(("bf16 d%d s300 causal=%d" % (d, causal), dict(dtype=bf, b=2, sq=300, d=d, causal=causal, hq=3)))
    cases += [
        ("f16 d128 s257 causal", dict(dtype=fp, b=1, sq=257, d=128, causal=True)),
        ("f16 d64 s200", dict(dtype=fp, b=2, sq=200, d=64)),
        ("f16 d256 s130", dict(dtype=fp, b=1, sq=130, d=256)),
        ("bf16 d96 s190 causal", dict(dtype=bf, b=1, sq=190, d=96, causal=True)),
        ("bf16 d192 s150", dict(dtype=bf, b=1, sq=150, d=192)),
        ("bf16 d80 (inst 96) s140", dict(dtype=bf, b=1, sq=140, d=80)),
        ("bf16 d40 (inst 64) s100 causal", dict(dtype=bf, b=1, sq=100, d=40, causal=True)),
        ("bf16 d128 sq200 sk333 causal", dict(dtype=bf, b=1, sq=200, sk=333, d=128, causal=True)),
        ("bf16 d128 sq333 sk200 causal (masked rows)", dict(dtype=bf, b=1, sq=333, sk=200, d=128, causal=True)),
        ("bf16 d128 GQA 6/2 s260 causal", dict(dtype=bf, b=2, sq=260, d=128, hq=6, hkv=2, causal=True)),
        ("bf16 d64 MQA 4/1 s150", dict(dtype=bf, b=1, sq=150, d=64, hq=4, hkv=1)),
        ("bf16 d128 window(70,20) s400", dict(dtype=bf, b=1, sq=400, d=128, wl=70, wr=20)),
        ("bf16 d64 window left 50 causal s300", dict(dtype=bf, b=1, sq=300, d=64, wl=50, causal=True)),
        ("bf16 d128 softcap 1.5 s200", dict(dtype=bf, b=1, sq=200, d=128, softcap=1.5, scale=0.25)),
        ("f16 d64 softcap 2 causal s170", dict(dtype=fp, b=1, sq=170, d=64, softcap=2.0, causal=True, scale=0.3)),
        ("bf16 d128 alibi s230 causal", dict(dtype=bf, b=1, sq=230, d=128, alibi=True, causal=True)),
        ("bf16 d64 mask s180", dict(dtype=bf, b=2, sq=180, d=64, mask=True)),
        ("bf16 d128 mask+alibi+softcap s150", dict(dtype=bf, b=1, sq=150, d=128, mask=True, alibi=True, softcap=1.5, scale=0.3)),
        ("bf16 d128 varlen [100,0,257,1,64]", dict(dtype=bf, seqlens=[100, 0, 257, 1, 64], d=128)),
        ("bf16 d64 varlen causal q[50,0,130,7] k[80,5,130,0]", dict(dtype=bf, seqlens=[50, 0, 130, 7], seqlens_k=[80, 5, 130, 0], d=64, causal=True)),
        ("f16 d256 varlen GQA 4/2 [33,0,140]", dict(dtype=fp, seqlens=[33, 0, 140], d=256, hq=4, hkv=2)),
    ]
    # NaN / Inf in K and V of keys no row sees (issue 18): bit mask, window, both, varlen
    cases += [
        ("bf16 d64 GQA 4/2 sq37 sk300 mask NaN-hidden", dict(dtype=bf, b=2, sq=37, sk=300, hq=4, hkv=2, d=64, mask=True, nan=True)),
        ("f16 d64 sq70 sk150 mask causal NaN-hidden", dict(dtype=fp, b=2, sq=70, sk=150, hq=2, hkv=1, d=64, mask=True, causal=True, nan=True)),
        ("bf16 d128 sq40 sk200 window(50) causal NaN-hidden", dict(dtype=bf, b=1, sq=40, sk=200, hq=2, hkv=1, d=128, wl=50, causal=True, nan=True)),
        ("bf16 d128 sq16 sk300 window(3,2) NaN-hidden", dict(dtype=bf, b=1, sq=16, sk=300, hq=2, d=128, wl=3, wr=2, nan=True)),
        ("bf16 d64 varlen mask NaN-hidden", dict(dtype=bf, seqlens=[30, 12, 0, 25], seqlens_k=[60, 40, 20, 33], hq=2, hkv=1, d=64, mask=True, nan=True)),
        ("bf16 d128 mask+softcap+alibi NaN-hidden", dict(dtype=bf, b=1, sq=90, sk=150, d=128, mask=True, alibi=True, softcap=1.5, scale=0.3, nan=True)),
        ("bf16 d256 mask NaN-hidden", dict(dtype=bf, b=1, sq=50, sk=140, d=256, mask=True, nan=True)),
    ]
    # seqlen_q a multiple of 16: the shapes where OPT bit 13 keeps dq_accum in tiles
    cases += [
        ("bf16 d128 GQA 4/2 s256 causal (tiled dQ)", dict(dtype=bf, b=2, sq=256, d=128, hq=4, hkv=2, causal=True)),
        ("bf16 d128 sq192 sk333 (tiled dQ)", dict(dtype=bf, b=1, sq=192, sk=333, d=128)),
        ("bf16 d64 s320 causal (tiled dQ)", dict(dtype=bf, b=2, sq=320, d=64, hq=3, causal=True)),
        ("bf16 d64 sq48 sk200 mask (tiled dQ)", dict(dtype=bf, b=2, sq=48, sk=200, d=64, mask=True)),
        ("bf16 d256 s144 causal (tiled dQ)", dict(dtype=bf, b=2, sq=144, d=256, hq=2, causal=True)),
        ("bf16 d96 s160 window(40,10) (tiled dQ)", dict(dtype=bf, b=1, sq=160, d=96, wl=40, wr=10)),
        ("bf16 d192 s112 softcap 1.5 (tiled dQ)", dict(dtype=bf, b=1, sq=112, d=192, softcap=1.5, scale=0.3)),
    ]
    if quick:
        cases = cases[:6] + cases[16:20]
    npass = nfail = 0
    for name, kw in cases:
        for det in (False, True):
            if quick and det: continue
            c = Case(det=det, **kw)
            ref = c.reference()
            nv = c.reference(naive=True)
            if kw.get("nan"):
                c.poison_hidden()
                print("     %s: %d hidden keys poisoned" % (name, c.hidden))
            for var in [None] + [v for v in variants if v[1] == kw.get("d") and kw.get("dtype") == bf
                                 and len(v) == 2]:
                try:
                    r = Runner(lib, c, var[0] if var else None)
                except RuntimeError as e:
                    print("FAIL %s: %s" % (name, e)); nfail += 1; continue
                r.poison()
                r()
                torch.cuda.synchronize()
                ok = judge("%s det=%d %s" % (name, det, r.name), c, (r.dq, r.dk, r.dv), ref, nv)
                npass += ok
                nfail += not ok
    # bad cu_seqlens must set the status bit and not crash
    c = Case(seqlens=[10, 20, 30], d=64)
    r = Runner(lib, c)
    c.cuq[2] = 5  # decreasing
    r()
    torch.cuda.synchronize()
    st = int(c.status.item())
    ok = st & 1 == 1
    print("%-4s bad cu_seqlens -> status %d" % ("ok" if ok else "FAIL", st))
    npass += ok
    nfail += not ok
    print("grid: %d passed, %d failed" % (npass, nfail), flush=True)
    return nfail == 0


def determinism(lib):
    allok = True
    for kw in (dict(b=2, sq=1000, d=128, hq=4, causal=True), dict(b=1, sq=777, d=64, hq=6, hkv=2),
               dict(b=1, sq=600, d=256, hq=2)):
        c = Case(det=True, fwd_f64=False, **kw)
        r = Runner(lib, c)
        first = None
        same = True
        for _ in range(10):
            r.poison()
            r()
            torch.cuda.synchronize()
            cur = [t.view(torch.int16).clone() for t in (r.dq, r.dk, r.dv)]
            if first is None: first = cur
            else: same &= all(torch.equal(a, b) for a, b in zip(first, cur))
        # the atomic mode for contrast
        c2 = Case(det=False, fwd_f64=False, **kw)
        r2 = Runner(lib, c2)
        outs = []
        for _ in range(10):
            r2(); torch.cuda.synchronize(); outs.append(r2.dq.view(torch.int16).clone())
        atomic_same = all(torch.equal(outs[0], o) for o in outs[1:])
        print("%-4s deterministic 10 runs bitwise identical %s: %s (atomic mode identical: %s)" %
              ("ok" if same else "FAIL", kw, same, atomic_same), flush=True)
        allok &= same
    return allok


def sweep(lib, variants, dims=(64, 128, 256), ss=(512, 1024, 2048, 4096, 8192, 16384), masks=(False, True)):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    import torch.nn.functional as Fn
    rows = []
    for d in dims:
        for causal in masks:
            for s in ss:
                h = 2048 // d
                b = 16384 // s
                c = Case(b=b, sq=s, d=d, hq=h, causal=causal, fwd_f64=False, seed=s + d)
                flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
                res = {}
                runs = [(None, Runner(lib, c))]
                for v in variants:
                    if v[1] == d: runs.append((v[0], Runner(lib, c, v[0])))
                for vn, r in runs:
                    ms = do_bench(r, warmup=10, rep=60, return_mode="median")
                    res[vn or "ours"] = ms
                # same-run check on (b0, h0) against fp64, beside FA2's error
                r0 = runs[0][1]
                r0.poison(); r0(); torch.cuda.synchronize()
                qt = c.q.transpose(1, 2).detach().requires_grad_(True)
                kt = c.k.transpose(1, 2).detach().requires_grad_(True)
                vt = c.v.transpose(1, 2).detach().requires_grad_(True)
                dot = c.do.transpose(1, 2)
                peer_err = {}
                for pn, be in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(be):
                            fwd = lambda: Fn.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                            def fb():
                                o = Fn.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                                o.backward(dot)
                            tf = do_bench(fwd, warmup=10, rep=60, return_mode="median")
                            tfb = do_bench(fb, warmup=10, rep=60, grad_to_none=[qt, kt, vt], return_mode="median")
                            res[pn] = tfb - tf
                            qt.grad = kt.grad = vt.grad = None
                            fb()
                            peer_err[pn] = [qt.grad[0, 0].clone(), kt.grad[0, 0].clone(), vt.grad[0, 0].clone()]  # the next do_bench accumulates into .grad
                    except Exception as e:  # a peer that cannot run this shape
                        res[pn] = float("nan")
                        print("peer %s failed: %s" % (pn, str(e)[:100]))
                # fp64 reference of sequence 0, head 0
                q0 = c.q[0, :, 0].double().requires_grad_(True)
                k0 = c.k[0, :, 0].double().requires_grad_(True)
                v0 = c.v[0, :, 0].double().requires_grad_(True)
                sc = (q0 @ k0.T) * c.scale
                if causal:
                    sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), -math.inf)
                o0 = torch.softmax(sc, -1) @ v0
                g = torch.autograd.grad(o0, (q0, k0, v0), grad_outputs=c.do[0, :, 0].double())
                del sc
                ours = (r0.dq[0, :, 0], r0.dk[0, :, 0], r0.dv[0, :, 0])
                e_ours = [(a.double() - gg).abs().max().item() for a, gg in zip(ours, g)]
                nan = sum(int(torch.isnan(a.double()).sum().item()) for a in ours)
                e_fa2 = [(a.double() - gg).abs().max().item() for a, gg in zip(peer_err.get("fa2", ours), g)]
                okc = nan == 0 and all(eo <= 3 * ef + 2 * 2 ** -8 * gg.abs().max().item() for eo, ef, gg in zip(e_ours, e_fa2, g))
                tf = lambda ms: flops / ms / 1e9
                line = "d%-3d %-6s s%-5d b%-2d h%-2d ours %6.1f" % (d, "causal" if causal else "full", s, b, h, tf(res["ours"]))
                for v in variants:
                    if v[1] == d: line += " %s %6.1f" % (v[0].split("_", 5)[-1], tf(res[v[0]]))
                fa2g = peer_err.get("fa2", ours)
                line += " | fa2 %6.1f cudnn %6.1f | ours/fa2 %.2f | err dq,dk,dv %s fa2 %s max|ref| %.2g max|fa2 dq| %.2g |fa2-ours| %.2g %s" % (
                    tf(res["fa2"]), tf(res["cudnn"]), res["fa2"] / res["ours"],
                    ",".join("%.2g" % x for x in e_ours), ",".join("%.2g" % x for x in e_fa2),
                    g[0].abs().max().item(), fa2g[0].abs().max().item(),
                    (fa2g[0].double() - ours[0].double()).abs().max().item(),
                    "ok" if okc else "CHECK-FAIL nan=%d" % nan)
                print(line, flush=True)
                rows.append(line)
                del c, runs, qt, kt, vt
                torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build-cudabwd/libfmsa_cuda_dev_bwd.so")
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--quick-grid", action="store_true")
    ap.add_argument("--det", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--causal-only", action="store_true", help="sweep: causal shapes only")
    ap.add_argument("--full-only", action="store_true", help="sweep: non-causal shapes only")
    ap.add_argument("--only", default="", help="with --variants: keep those whose name ends in _o<one of these>")
    ap.add_argument("--dims", default="64,128,256", help="sweep head dims")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384", help="sweep lengths")
    ap.add_argument("--profile", action="store_true", help="one d128 s4096 backward, ours and FA2, for ncu")
    ap.add_argument("--profile-opts", default="", help="with --profile: also these d128 option rows, e.g. 0,8,1024")
    a = ap.parse_args()
    lib = load_lib(a.lib)
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    variants = []
    if a.variants:
        # a third field would mark a timing-only ablation (wrong results), which the grid skips
        d64, d128, d256 = ("fmsa_cuda_bwd_main_bf16_d64_m128_n128_k4_p2_o", "fmsa_cuda_bwd_main_bf16_d128_m64_n128_k4_p2_o",
                           "fmsa_cuda_bwd_main_bf16_d256_m64_n64_k2_p2_o")
        # the rows: d64 m128 o106499 (masked) / o8195, d128 o237571, d256 o237571; bit 17
        # (131072): no block barrier before the P^T / dS^T readers (named barriers of the
        # warps that share keys, and of dQ's row group).  o139267 = o8195 + 17, o237571 =
        # o106499 + 17; d128 / d256 o106499 = their previous rows
        variants = [(d64 + "139267", 64), (d64 + "237571", 64), (d128 + "106499", 128),
                    (d256 + "106499", 256)]
        if a.only:
            variants = [v for v in variants if v[0].rsplit("_o", 1)[-1] in a.only.split(",")]
    t0 = time.time()
    ok = True
    if a.grid or a.quick_grid:
        ok &= grid(lib, variants if a.grid else [], quick=a.quick_grid)
        print("grid time %.1f s" % (time.time() - t0), flush=True)
    if a.det:
        ok &= determinism(lib)
    if a.sweep:
        sweep(lib, variants, [int(x) for x in a.dims.split(",")], [int(x) for x in a.seqlens.split(",")],
              (True,) if a.causal_only else (False,) if a.full_only else (False, True))
    if a.profile:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as Fn
        c = Case(b=4, sq=4096, d=128, hq=16, fwd_f64=False)
        r = Runner(lib, c)
        r(); torch.cuda.synchronize()
        for o in [x for x in a.profile_opts.split(",") if x]:
            rv = Runner(lib, c, "fmsa_cuda_bwd_main_bf16_d128_m64_n128_k4_p2_o" + o)
            rv(); torch.cuda.synchronize()
        qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_(True) for t in (c.q, c.k, c.v))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            Fn.scaled_dot_product_attention(qt, kt, vt).backward(c.do.transpose(1, 2))
        torch.cuda.synchronize()
    print("total %.1f s, %s" % (time.time() - t0, "ALL OK" if ok else "FAILURES"))


if __name__ == "__main__":
    main()
