#!/usr/bin/env python3
"""Checks and times the CUDA forward kernels through the dev harness
(backends/cuda/dev/fmsa_cuda_dev.cu, built by backends/cuda/dev/build.sh).

  python3 bench/cuda_fwd_check.py --lib LIB --selftest     CPU only: params mirror, picker
  python3 bench/cuda_fwd_check.py --lib LIB [--grid] [--sweep] [--variants] [--out DIR]

Correctness follows common/check_rule.h: max |ours - ref| <= 2 max |naive - ref| + floor, ref
in float64, naive the same-precision unfused attention (scores rounded to the dtype, P rounded
after normalisation, fp32 products), fully masked rows exactly O = 0 and LSE = -inf, no NaN
(outputs are NaN-poisoned before every run).  Timing: triton.testing.do_bench medians beside
PyTorch SDPA's FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION on the same tensors.
"""
import argparse
import ctypes
import json
import math
import os
import sys

FIELDS = ([(n, ctypes.c_void_p) for n in (
    "q k v o lse alibi mask cu_seqlens_q cu_seqlens_k block_table seqused_k sinks status "
    "o_accum lse_accum").split()] +
    [(n, ctypes.c_longlong) for n in (
        "q_sb q_ss q_sh k_sb k_ss k_sh v_sb v_ss v_sh o_sb o_ss o_sh lse_sb lse_sh lse_ss "
        "alibi_sb alibi_sh mask_sb mask_sh mask_ss cu_q_s cu_k_s bt_sb bt_sp su_s").split()] +
    [(n, ctypes.c_int) for n in (
        "batch seqlen_q seqlen_k heads_q heads_kv head_dim head_dim_v total_q total_k "
        "page_size max_pages num_pages num_splits").split()] +
    [("window_left", ctypes.c_longlong), ("window_right", ctypes.c_longlong)] +
    [(n, ctypes.c_float) for n in ("softmax_scale", "scale_log2", "softcap")] +
    [(n, ctypes.c_int) for n in ("is_varlen", "is_paged", "has_seqused_k")])


class Params(ctypes.Structure):
    _fields_ = FIELDS


DEV = os.environ.get("FMSA_CHECK_DEVICE", "cuda")  # "cpu": dry run of the harness itself
STATUS_BITS = {1: "BAD_CU_SEQLENS", 2: "BAD_PAGE", 4: "BAD_SEQUSED"}


def load_lib(path):
    lib = ctypes.CDLL(path)
    P = ctypes.POINTER(Params)
    lib.fmsa_cuda_dev_forward.argtypes = [P, ctypes.c_int, ctypes.c_void_p]
    lib.fmsa_cuda_dev_forward_kernel.argtypes = [ctypes.c_int, P, ctypes.c_void_p]
    lib.fmsa_cuda_dev_forward_ex.argtypes = [P, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    lib.fmsa_cuda_dev_last_plan.restype = ctypes.c_char_p
    lib.fmsa_cuda_dev_select.argtypes = [P, ctypes.c_int]
    lib.fmsa_cuda_dev_kernel_name.restype = ctypes.c_char_p
    lib.fmsa_cuda_dev_last_error.restype = ctypes.c_char_p
    lib.fmsa_cuda_dev_params_layout.argtypes = [ctypes.POINTER(ctypes.c_longlong), ctypes.c_int]
    buf = (ctypes.c_longlong * 128)()
    n = lib.fmsa_cuda_dev_params_layout(buf, 128)
    want = [ctypes.sizeof(Params)] + [getattr(Params, f).offset for f, _ in FIELDS]
    got = list(buf[:n])
    if got != want:
        raise SystemExit(f"params mirror mismatch:\n  so  {got}\n  py  {want}")
    kernels = []
    for i in range(lib.fmsa_cuda_dev_num_kernels()):
        info = (ctypes.c_int * 8)()
        lib.fmsa_cuda_dev_kernel_info(i, info)
        kernels.append(dict(idx=i, name=lib.fmsa_cuda_dev_kernel_name(i).decode(),
                            bf16=info[0], d=info[1], variant=info[2], threads=info[3],
                            bm=info[4], bn=info[5], smem=info[6], prod=info[7] == 1, kind=info[7]))
    return lib, kernels


def base_params(b, sq, sk, hq, hkv, d, scale=None):
    p = Params()
    p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv = b, sq, sk, hq, hkv
    p.head_dim = p.head_dim_v = d
    p.total_q, p.total_k = sq, sk
    p.num_splits = 1
    p.window_left = p.window_right = -1
    p.softmax_scale = 1.0 / math.sqrt(d) if scale is None else scale
    p.scale_log2 = p.softmax_scale * 1.4426950408889634
    return p


def selftest(lib, kernels):
    """CPU-side: the picker takes the smallest instance >= D of the right dtype/variant."""
    prod = [k for k in kernels if k["prod"]]
    assert [k["idx"] for k in prod] == list(range(len(prod))), "production rows come first"
    bad = 0
    for bf16 in (0, 1):
        for d in range(8, 264, 8):
            for feat in ("none", "softcap", "paged", "mask"):
                p = base_params(2, 100, 100, 4, 2, d)
                if feat == "softcap":
                    p.softcap = 30.0
                if feat == "paged":
                    p.is_paged = 1
                if feat == "mask":
                    p.mask = 1
                variant = 0 if feat == "none" else 1
                sel = lib.fmsa_cuda_dev_select(ctypes.byref(p), bf16)
                cands = [k for k in prod if k["bf16"] == bf16 and k["variant"] == variant and k["d"] >= d]
                want = min(cands, key=lambda k: k["d"])["idx"] if cands else -1
                if sel != want:
                    bad += 1
                    print(f"picker: bf16={bf16} d={d} {feat}: got {sel} want {want}")
    p = base_params(2, 100, 100, 4, 2, 264)
    if lib.fmsa_cuda_dev_select(ctypes.byref(p), 1) != -1:
        bad += 1
        print("picker: d=264 should be unsupported")
    p = base_params(2, 100, 100, 4, 2, 128)
    p.head_dim_v = 64
    if lib.fmsa_cuda_dev_select(ctypes.byref(p), 1) != -1:
        bad += 1
        print("picker: head_dim_v != head_dim should be unsupported")
    print(f"selftest: params mirror ok ({ctypes.sizeof(Params)} bytes, {len(FIELDS)} fields), "
          f"{len(kernels)} kernels ({len(prod)} production), picker mismatches: {bad}")
    return bad == 0


# ----------------------------------------------------------------------------- device side

def torch_mods():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def make_case(torch, c, gen):
    """Tensors + params for case dict c.  Returns (params, tensors, seqs) where seqs lists
    per-sequence (q rows (batch, row0, sq), k gather function, sk)."""
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[c.get("dtype", "bf16")]
    dev = DEV
    d, hq, hkv = c["d"], c["hq"], c.get("hkv", c["hq"])
    scale = c.get("scale", 1.0 / math.sqrt(d))
    t = {}
    rnd = lambda *shape: torch.randn(*shape, device=dev, generator=gen, dtype=torch.float32) \
        .mul_(c.get("amp", 1.0)).to(dt)
    varlen = c.get("varlen")
    paged = c.get("paged")
    if varlen:
        lens_q = [a for a, _ in varlen]
        lens_k = [bb for _, bb in varlen]
        B = len(varlen)
        tq, tk = sum(lens_q), sum(lens_k)
        sq_max, sk_max = max(lens_q + [1]), max(lens_k + [1])
        q = rnd(1, tq, hq, d)
        k = rnd(1, tk, hkv, d)
        v = rnd(1, tk, hkv, d)
        cq = [0]
        ck = [0]
        for a, bb in varlen:
            cq.append(cq[-1] + a)
            ck.append(ck[-1] + bb)
        t["cu_q"] = torch.tensor(c.get("cu_q_override", cq), dtype=torch.int32, device=dev)
        t["cu_k"] = torch.tensor(ck, dtype=torch.int32, device=dev)
        p = base_params(B, sq_max, sk_max, hq, hkv, d, scale)
        p.total_q, p.total_k = tq, tk
        p.is_varlen = 1
        p.cu_seqlens_q, p.cu_seqlens_k = t["cu_q"].data_ptr(), t["cu_k"].data_ptr()
        p.cu_q_s = p.cu_k_s = 1
        seqs = [dict(qb=0, q0=cq[i], sq=lens_q[i], kb=0, k0=ck[i], sk=lens_k[i]) for i in range(B)]
        o = torch.empty(1, tq, hq, d, device=dev, dtype=dt)
        lse = torch.empty(1, hq, tq, device=dev, dtype=torch.float32)
    else:
        B, sq, sk = c["b"], c["sq"], c.get("sk", 0)
        if c.get("layout") == "packed":
            qkv = rnd(B, sq, 3, hq, d)
            q = qkv[:, :, 0]
            assert sq == sk and hq == hkv
            k, v = qkv[:, :, 1], qkv[:, :, 2]
        else:
            q = rnd(B, sq, hq, d)
            if paged:
                ps, mp = paged["page_size"], paged["max_pages"]
                npages = B * mp + 3
                k = rnd(npages, ps, hkv, d)
                v = rnd(npages, ps, hkv, d)
                perm = torch.randperm(npages, device=dev, generator=gen)[:B * mp]
                t["bt"] = perm.view(B, mp).to(torch.int32).contiguous()
                if paged.get("bad_page"):
                    t["bt"][0, 0] = npages + 5
                used = paged.get("seqused")
                sk = mp * ps
            else:
                k = rnd(B, sk, hkv, d)
                v = rnd(B, sk, hkv, d)
        p = base_params(B, sq, sk, hq, hkv, d, scale)
        if paged:
            p.is_paged = 1
            p.page_size, p.max_pages, p.num_pages = ps, mp, npages
            p.total_k = ps
            p.block_table = t["bt"].data_ptr()
            p.bt_sb, p.bt_sp = t["bt"].stride(0), t["bt"].stride(1)
            if used is not None:
                t["su"] = torch.tensor(used, dtype=torch.int32, device=dev)
                p.seqused_k, p.su_s, p.has_seqused_k = t["su"].data_ptr(), 1, 1
            seqs = []
            for i in range(B):
                ski = used[i] if used is not None else sk
                seqs.append(dict(qb=i, q0=0, sq=sq, page=True, b=i, sk=max(0, min(ski, sk))))
        else:
            seqs = [dict(qb=i, q0=0, sq=sq, kb=i, k0=0, sk=sk) for i in range(B)]
        o = torch.empty(B, sq, hq, d, device=dev, dtype=dt)
        if c.get("lse_strided"):
            lse = torch.empty(B, hq, sq, 2, device=dev, dtype=torch.float32)[..., 0]
        else:
            lse = torch.empty(B, hq, sq, device=dev, dtype=torch.float32)
    t.update(q=q, k=k, v=v, o=o, lse=lse)
    p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    p.q_sb, p.q_ss, p.q_sh = q.stride(0), q.stride(1), q.stride(2)
    p.k_sb, p.k_ss, p.k_sh = k.stride(0), k.stride(1), k.stride(2)
    p.v_sb, p.v_ss, p.v_sh = v.stride(0), v.stride(1), v.stride(2)
    p.o_sb, p.o_ss, p.o_sh = o.stride(0), o.stride(1), o.stride(2)
    if c.get("lse", True):
        p.lse = lse.data_ptr()
        p.lse_sb, p.lse_sh, p.lse_ss = lse.stride(0), lse.stride(1), lse.stride(2)
    if c.get("causal"):
        p.window_right = 0
    if "wl" in c:
        p.window_left = c["wl"]
    if "wr" in c:
        p.window_right = c["wr"]
    if c.get("softcap"):
        p.softcap = c["softcap"]
    if c.get("alibi"):
        shape = (hq,) if c["alibi"] == "h" else (p.batch, hq)
        t["alibi"] = torch.rand(*shape, device=dev, generator=gen) * 0.5 + 0.01
        p.alibi = t["alibi"].data_ptr()
        p.alibi_sb = 0 if c["alibi"] == "h" else t["alibi"].stride(0)
        p.alibi_sh = t["alibi"].stride(-1)
    if c.get("mask"):
        nb = (p.seqlen_k + 7) // 8
        mh = 1 if c["mask"] == "bcast" else hq
        bits = torch.rand(p.batch, mh, p.seqlen_q, nb * 8, device=dev, generator=gen) < 0.7
        bits[:, :, ::7] = False  # some fully masked rows
        w = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], device=dev, dtype=torch.int32)
        packed = (bits.view(p.batch, mh, p.seqlen_q, nb, 8).int() * w).sum(-1).to(torch.uint8)
        t["mask"], t["mask_bits"] = packed.contiguous(), bits
        p.mask = t["mask"].data_ptr()
        p.mask_sb, p.mask_ss = t["mask"].stride(0), t["mask"].stride(2)
        p.mask_sh = 0 if mh == 1 else t["mask"].stride(1)
    t["status"] = torch.zeros(1, dtype=torch.int32, device=dev)
    p.status = t["status"].data_ptr()
    return p, t, seqs


def reference(torch, c, p, t, seqs, rows_per_seq=None):
    """float64 reference and same-precision naive of the rows checked.
    Returns list of (seq index, row indices tensor, ref_o [n,h,d], ref_lse [h,n], naive_o, naive_lse)."""
    dt = t["q"].dtype
    d, hq, hkv = p.head_dim, p.heads_q, p.heads_kv
    grp = hq // hkv
    out = []
    for si, s in enumerate(seqs):
        sq, sk = s["sq"], s["sk"]
        if sq == 0:
            continue
        if rows_per_seq is not None and rows_per_seq < sq:
            g = torch.Generator(device="cpu").manual_seed(si + 7)
            rows = torch.randperm(sq, generator=g)[:rows_per_seq].sort().values
            rows = torch.unique(torch.cat([rows, torch.tensor([0, sq - 1])]))
        else:
            rows = torch.arange(sq)
        rows_d = rows.to(DEV)
        if sk == 0:  # no keys: every row is fully masked
            z = torch.zeros(len(rows), hq, d, dtype=torch.float64, device=DEV)
            ninf = torch.full((hq, len(rows)), float("-inf"), dtype=torch.float64, device=DEV)
            out.append(dict(si=si, rows=rows_d, ref_o=z, ref_lse=ninf, nv_o=z, nv_lse=ninf, seq=s))
            continue
        q = t["q"][s["qb"], s["q0"] + rows_d]  # [n, hq, d]
        if s.get("page"):
            j = torch.arange(sk, device=DEV)
            pg = t["bt"][s["b"]].long()[j // p.page_size]
            k = t["k"][pg, j % p.page_size]
            v = t["v"][pg, j % p.page_size]
        else:
            k = t["k"][s["kb"], s["k0"]:s["k0"] + sk]
            v = t["v"][s["kb"], s["k0"]:s["k0"] + sk]
        k = k.repeat_interleave(grp, dim=1)
        v = v.repeat_interleave(grp, dim=1)
        i = rows_d.view(-1, 1).long()
        j = torch.arange(sk, device=DEV).view(1, -1)
        diag = i + sk - sq
        vis = torch.ones(len(rows), sk, dtype=torch.bool, device=DEV)
        if p.window_left >= 0:
            vis &= j >= diag - p.window_left
        if p.window_right >= 0:
            vis &= j <= diag + p.window_right
        vis = vis.unsqueeze(0).expand(hq, -1, -1).clone()
        if c.get("mask"):
            mb = t["mask_bits"][si if t["mask_bits"].shape[0] > 1 else 0][:, rows_d][:, :, :sk]
            vis &= mb.expand(hq, -1, -1)
        dist = (i - j + sk - sq).abs()
        res = []
        for prec in ("ref", "naive"):
            ft = torch.float64 if prec == "ref" else torch.float32
            qq, kk, vv = q.to(ft), k.to(ft), v.to(ft)
            S = torch.einsum("nhd,jhd->hnj", qq, kk) * (p.softmax_scale if prec == "naive" else
                                                         float(p.softmax_scale))
            if p.softcap > 0:
                S = p.softcap * torch.tanh(S / p.softcap)
            if c.get("alibi"):
                sl = t["alibi"] if t["alibi"].dim() == 1 else t["alibi"][si]
                S = S - sl.to(ft).view(-1, 1, 1) * dist.to(ft).unsqueeze(0)
            if prec == "naive":
                S = S.to(dt).to(ft)
            S = S.masked_fill(~vis, float("-inf"))
            mx = S.amax(-1, keepdim=True)
            dead = torch.isinf(mx) & (mx < 0)
            mx0 = torch.where(dead, torch.zeros_like(mx), mx)
            P = torch.exp(S - mx0)
            L = P.sum(-1, keepdim=True)
            if prec == "ref":
                O = torch.einsum("hnj,jhd->nhd", P / torch.where(dead, torch.ones_like(L), L), vv)
            else:
                Pn = (P / torch.where(dead, torch.ones_like(L), L)).to(dt).to(ft)
                O = torch.einsum("hnj,jhd->nhd", Pn, vv).to(dt).to(torch.float64)
            lse = torch.where(dead, torch.full_like(mx, float("-inf")), mx0 + torch.log(L)).squeeze(-1)
            O = torch.where(dead.squeeze(-1).t().unsqueeze(-1), torch.zeros_like(O), O)
            res.append((O.to(torch.float64), lse.to(torch.float64)))
        out.append(dict(si=si, rows=rows_d, ref_o=res[0][0], ref_lse=res[0][1],
                        nv_o=res[1][0], nv_lse=res[1][1], seq=s))
    return out


def check(torch, c, p, t, refs):
    """Applies the rule; returns dict with errors, tolerances, pass flag and diagnostics."""
    u = 2.0 ** -8 if t["q"].dtype == torch.bfloat16 else 2.0 ** -11
    u32 = 2.0 ** -24
    err = nerr = rmax = lerr = lnerr = lrmax = 0.0
    amax = 0.0
    nan = 0
    dead_bad = 0
    first_bad = None
    for r in refs:
        s = r["seq"]
        o = t["o"][s["qb"], s["q0"] + r["rows"]].to(torch.float64)  # [n, h, d]
        nan += int(torch.isnan(o).sum())
        fin = torch.isfinite(r["ref_lse"])
        if fin.any():
            amax = max(amax, float(r["ref_lse"][fin].abs().max()))
        e = (o - r["ref_o"]).abs()
        e = torch.where(torch.isnan(e), torch.full_like(e, float("inf")), e)
        if e.numel():
            em = float(e.max())
            if em > err:
                err = em
                idx = int(e.argmax())
                n_, h_, d_ = idx // (e.shape[1] * e.shape[2]), (idx // e.shape[2]) % e.shape[1], idx % e.shape[2]
                first_bad = dict(seq=r["si"], row=int(r["rows"][n_]), head=h_, col=d_,
                                 got=float(o.flatten()[idx]), ref=float(r["ref_o"].flatten()[idx]))
            nerr = max(nerr, float((r["nv_o"] - r["ref_o"]).abs().max()))
            rmax = max(rmax, float(r["ref_o"].abs().max()))
        dead = ~fin  # [h, n]
        if dead.any():
            od = o.permute(1, 0, 2)[dead]
            dead_bad += int((od != 0).sum())
        if p.lse:
            L = t["lse"][s["qb"], :, s["q0"] + r["rows"]].to(torch.float64)  # [h, n]
            nan += int(torch.isnan(L).sum())
            if dead.any():
                dead_bad += int((L[dead] != float("-inf")).sum())
            if fin.any():
                le = (L[fin] - r["ref_lse"][fin]).abs()
                le = torch.where(torch.isnan(le), torch.full_like(le, float("inf")), le)
                lerr = max(lerr, float(le.max()))
                lnerr = max(lnerr, float((r["nv_lse"][fin] - r["ref_lse"][fin]).abs().max()))
                lrmax = max(lrmax, float(r["ref_lse"][fin].abs().max()))
    floor_o = (2 * u + 2 * u32) * rmax + u32 * 3 * (1 + amax) * rmax
    tol_o = 2 * nerr + floor_o
    floor_l = (2 * u32 + 2 * u32) * lrmax + u32 * 3 * (1 + amax)
    tol_l = 2 * lnerr + floor_l
    ok = nan == 0 and dead_bad == 0 and err <= tol_o and (not p.lse or lerr <= tol_l)
    return dict(ok=ok, err=err, tol=tol_o, naive=nerr, lse_err=lerr, lse_tol=tol_l, nan=nan,
                dead_bad=dead_bad, first_bad=None if err <= tol_o else first_bad)


def run_kernel(lib, p, bf16, idx=None, splits=-1):
    import torch
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    if idx is None:
        rc = lib.fmsa_cuda_dev_forward_ex(ctypes.byref(p), bf16, stream, splits)
    else:
        rc = lib.fmsa_cuda_dev_forward_kernel(idx, ctypes.byref(p), stream)
    if rc != 0:
        raise RuntimeError(f"launch rc={rc}: {lib.fmsa_cuda_dev_last_error().decode()}")


GRID = []


def grid_cases():
    cs = []
    for d in (64, 128, 256):
        for causal in (False, True):
            cs.append(dict(name=f"d{d}{'c' if causal else ''} 200x200", d=d, b=2, sq=200, sk=200, hq=3, causal=causal))
            cs.append(dict(name=f"d{d}{'c' if causal else ''} 77x300", d=d, b=1, sq=77, sk=300, hq=2, causal=causal))
            cs.append(dict(name=f"d{d}{'c' if causal else ''} 300x77", d=d, b=1, sq=300, sk=77, hq=2, causal=causal))
        cs.append(dict(name=f"d{d} f16 causal 257", dtype="f16", d=d, b=2, sq=257, sk=257, hq=2, causal=True))
        cs.append(dict(name=f"d{d} gqa 6/2 causal", d=d, b=2, sq=190, sk=190, hq=6, hkv=2, causal=True))
        cs.append(dict(name=f"d{d} window 48/16", d=d, b=1, sq=333, sk=333, hq=2, wl=48, wr=16))
        cs.append(dict(name=f"d{d} softcap 5", d=d, b=1, sq=150, sk=260, hq=2, softcap=5.0, amp=2.0))
        cs.append(dict(name=f"d{d} alibi bh causal", d=d, b=2, sq=140, sk=140, hq=2, alibi="bh", causal=True))
        cs.append(dict(name=f"d{d} mask", d=d, b=2, sq=100, sk=203, hq=2, mask="full"))
        cs.append(dict(name=f"d{d} varlen empty", d=d, hq=4, hkv=2, causal=True,
                       varlen=[(0, 10), (50, 0), (130, 200), (0, 0), (70, 70), (1, 333)]))
        cs.append(dict(name=f"d{d} paged 16 seqused", d=d, b=3, sq=40, hq=4, hkv=2, causal=True,
                       paged=dict(page_size=16, max_pages=20, seqused=[0, 150, 320])))
    for d in (8, 40, 72, 96, 112, 160, 192, 248):
        cs.append(dict(name=f"d{d} causal gqa", d=d, b=1, sq=150, sk=180, hq=4, hkv=1, causal=True))
        cs.append(dict(name=f"d{d} f16 mask+softcap", dtype="f16", d=d, b=1, sq=90, sk=140, hq=2,
                       mask="bcast", softcap=20.0))
    cs += [
        dict(name="d128 packed qkv causal", d=128, b=2, sq=300, sk=300, hq=4, layout="packed", causal=True),
        dict(name="d128 lse strided", d=128, b=2, sq=130, sk=170, hq=3, lse_strided=True),
        dict(name="d128 no lse", d=128, b=2, sq=130, sk=170, hq=3, lse=False),
        dict(name="d128 negative scale", d=128, b=1, sq=200, sk=200, hq=2, scale=-0.09),
        dict(name="d64 window 0/0 (diag only)", d=64, b=1, sq=100, sk=100, hq=2, wl=0, wr=0),
        dict(name="d128 window left only 100", d=128, b=1, sq=600, sk=600, hq=2, wl=100),
        dict(name="d128 alibi h + mask bcast + causal", d=128, b=2, sq=150, sk=150, hq=4, alibi="h", mask="bcast", causal=True),
        dict(name="d128 paged 256 no seqused", d=128, b=2, sq=64, hq=2, paged=dict(page_size=256, max_pages=2)),
        dict(name="d256 paged 64 softcap", d=256, b=2, sq=80, hq=2, softcap=10.0,
             paged=dict(page_size=64, max_pages=5, seqused=[300, 17])),
        dict(name="d128 f16 varlen softcap alibi", dtype="f16", d=128, hq=2, softcap=15.0, alibi="h",
             varlen=[(33, 90), (0, 5), (200, 150)]),
        dict(name="d128 big causal 4096 (sampled)", d=128, b=1, sq=4096, sk=4096, hq=8, causal=True, sample=48),
        dict(name="d64 big 2048x8192 (sampled)", d=64, b=1, sq=2048, sk=8192, hq=4, sample=48),
        dict(name="d256 big causal gqa 3000 (sampled)", d=256, b=1, sq=3000, sk=3000, hq=4, hkv=2, causal=True, sample=48),
    ]
    cs += [
        dict(name="dec d128 gqa4 sq1 splits auto", d=128, b=3, sq=1, sk=1000, hq=8, hkv=2),
        dict(name="dec d128 gqa4 sq1 splits 1", d=128, b=3, sq=1, sk=1000, hq=8, hkv=2, splits=1),
        dict(name="dec d128 gqa4 sq1 splits 40 (empty)", d=128, b=3, sq=1, sk=1000, hq=8, hkv=2, splits=40),
        dict(name="dec d128 gqa4 sq1 main kernel", d=128, b=3, sq=1, sk=1000, hq=8, hkv=2, splits=0),
        dict(name="dec d64 sq4 gqa4 causal splits 5", d=64, b=2, sq=4, sk=777, hq=8, hkv=2, causal=True, splits=5),
        dict(name="dec d256 sq2 gqa4 window 64 splits 3", d=256, b=2, sq=2, sk=300, hq=4, hkv=1, wl=64, causal=True, splits=3),
        dict(name="dec d128 paged 16 seqused", d=128, b=4, sq=1, hq=16, hkv=4,
             paged=dict(page_size=16, max_pages=70, seqused=[0, 5, 300, 1111])),
        dict(name="dec d128 paged 16 seqused splits 9", d=128, b=4, sq=1, hq=16, hkv=4, splits=9,
             paged=dict(page_size=16, max_pages=70, seqused=[0, 5, 300, 1111])),
        dict(name="dec d128 varlen causal splits 4", d=128, hq=8, hkv=8, causal=True, splits=4,
             varlen=[(1, 100), (2, 0), (1, 500), (3, 64)]),
        dict(name="dec d128 f16 softcap alibi mask splits 3", dtype="f16", d=128, b=2, sq=2, sk=400, hq=8, hkv=2,
             softcap=20.0, alibi="bh", mask="full", splits=3),
        dict(name="dec d96 gqa2 sq3 splits 2", d=96, b=2, sq=3, sk=513, hq=4, hkv=2, splits=2),
        dict(name="dec d128 f16 mqa16 sq1", dtype="f16", d=128, b=2, sq=1, sk=2048, hq=16, hkv=1),
        dict(name="dec d128 negative scale splits 6", d=128, b=2, sq=1, sk=900, hq=4, hkv=4, scale=-0.1, splits=6),
        dict(name="dec d128 sq1 sk0", d=128, b=2, sq=1, sk=0, hq=4, hkv=1, splits=3),
    ]
    return cs


STATUS_CASES = [
    dict(name="status: cu_seqlens decreasing", d=64, hq=2, varlen=[(10, 10), (20, 20)],
         cu_q_override=[0, 25, 20], expect=1),
    dict(name="status: page out of range", d=64, b=1, sq=16, hq=2,
         paged=dict(page_size=16, max_pages=2, bad_page=True), expect=2),
    dict(name="status: seqused past pages", d=64, b=2, sq=16, hq=2,
         paged=dict(page_size=16, max_pages=2, seqused=[10, 99]), expect=4),
]


def run_grid(torch, lib, kernels, log, variants):
    gen = torch.Generator(device=DEV).manual_seed(1234)
    nfail = 0
    rows = []
    only = [x for x in os.environ.get("FMSA_GRID_ONLY", "").split(",") if x]
    for c in grid_cases():
        if only and not any(x in c["name"] for x in only):
            continue
        p, t, seqs = make_case(torch, c, gen)
        bf16 = 1 if c.get("dtype", "bf16") == "bf16" else 0
        sel = lib.fmsa_cuda_dev_select(ctypes.byref(p), bf16)
        splits = c.get("splits", -1)
        refs = reference(torch, c, p, t, seqs, c.get("sample"))
        targets = [None]
        if variants and bf16 and p.softcap == 0 and not p.alibi and not p.mask and not p.is_paged:
            targets += [k["idx"] for k in kernels if k["kind"] == 0 and k["d"] == c["d"]]
        for idx in targets:
            t["o"].fill_(float("nan"))
            t["lse"].fill_(float("nan"))
            t["status"].zero_()
            name = kernels[sel]["name"] if idx is None else kernels[idx]["name"]
            try:
                run_kernel(lib, p, bf16, idx, splits)
                torch.cuda.synchronize()
                if idx is None:
                    name = lib.fmsa_cuda_dev_last_plan().decode()
                r = check(torch, c, p, t, refs)
                st = int(t["status"].item())
                if st:
                    r["ok"] = False
                    r["status"] = st
            except Exception as e:  # a launch error; a fault is sticky and ends the run
                r = dict(ok=False, error=repr(e)[:200])
            r.update(case=c["name"], kernel=name)
            rows.append(r)
            log.write(json.dumps(r) + "\n")
            log.flush()
            if not r["ok"]:
                nfail += 1
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {c['name']:<40} {name:<44} err {r.get('err', -1):.2e} "
                  f"tol {r.get('tol', -1):.2e} (naive {r.get('naive', -1):.2e}) lse {r.get('lse_err', -1):.1e}/"
                  f"{r.get('lse_tol', -1):.1e} nan {r.get('nan', '-')} dead {r.get('dead_bad', '-')}"
                  + ("" if r["ok"] else f" {r.get('first_bad') or r.get('error') or r.get('status')}"), flush=True)
        del t
    for c in STATUS_CASES:
        p, t, seqs = make_case(torch, c, gen)
        t["o"].fill_(float("nan"))
        run_kernel(lib, p, 1)
        torch.cuda.synchronize()
        st = int(t["status"].item())
        ok = (st & c["expect"]) != 0
        nfail += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {c['name']:<40} status {st} (want bit {c['expect']})", flush=True)
        log.write(json.dumps(dict(case=c["name"], status=st, ok=ok)) + "\n")
    print(f"grid: {len(rows) + len(STATUS_CASES)} checks, {nfail} failed", flush=True)
    return nfail


def time_peers(torch, t, rep, **sdpa_args):
    """Median ms of SDPA's FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION on the case's
    tensors ([b, s, h, d] seen as [b, h, s, d], no copies); None where a backend refuses."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    qt, kt, vt = (x.transpose(1, 2) for x in (t["q"], t["k"], t["v"]))
    out = {}
    for peer, be in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def f():
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(qt, kt, vt, **sdpa_args)
        try:
            with torch.no_grad():
                out[peer] = do_bench(f, warmup=25, rep=rep, return_mode="median")
        except Exception as e:
            out[peer] = None
            print(f"ERR {peer} {sdpa_args}: {e!r}"[:300], flush=True)
    return out


def run_sweep(torch, lib, kernels, log, variants, dims, seqlens, rep):
    from triton.testing import do_bench
    gen = torch.Generator(device=DEV).manual_seed(99)
    table = []
    for d in dims:
        for s in seqlens:
            for causal in (False, True):
                b, h = max(1, 16384 // s), 2048 // d
                c = dict(name=f"sweep d{d} s{s}{' causal' if causal else ''}", d=d, b=b, sq=s, sk=s, hq=h,
                         causal=causal, sample=24)
                p, t, seqs = make_case(torch, c, gen)
                refs = reference(torch, c, p, t, seqs[:2], 24)
                fl = 4 * b * h * s * s * d / (2 if causal else 1)
                row = dict(d=d, s=s, causal=causal, b=b, h=h)
                targets = [("ours", None)]
                if variants:
                    targets += [(k["name"], k["idx"]) for k in kernels if k["kind"] == 0 and k["d"] == d]
                targets.append(("ours2", None))  # the same kernel again: the run-to-run spread
                for name, idx in targets:
                    t["o"].fill_(float("nan"))
                    t["lse"].fill_(float("nan"))
                    fn = lambda: run_kernel(lib, p, 1, idx)
                    try:
                        ms = do_bench(fn, warmup=25, rep=rep, return_mode="median")
                        torch.cuda.synchronize()
                        r = check(torch, c, p, t, refs)
                        row[name] = round(fl / ms / 1e9, 1)
                        row[name + "_ok"] = r["ok"]
                        if not r["ok"]:
                            print(f"FAIL {c['name']} {name}: {r}", flush=True)
                    except Exception as e:
                        row[name] = None
                        print(f"ERR {c['name']} {name}: {e!r}", flush=True)
                for peer, ms in time_peers(torch, t, rep, is_causal=causal).items():
                    row[peer] = round(fl / ms / 1e9, 1) if ms else None
                table.append(row)
                log.write(json.dumps(row) + "\n")
                log.flush()
                best = max((k for k in row if k not in ("d", "s", "causal", "b", "h", "fa2", "cudnn")
                            and not k.endswith("_ok") and row[k]), key=lambda k: row[k], default=None)
                print(f"d{d:<4} s{s:<6} {'causal' if causal else 'full  '} ours {row.get('ours')} "
                      f"({'ok' if row.get('ours_ok') else 'BAD'}) fa2 {row.get('fa2')} cudnn {row.get('cudnn')} "
                      f"best {best} {row.get(best)}", flush=True)
                del t
                torch.cuda.empty_cache()
    return table


def run_decode(torch, lib, log, rep):
    """Decode (b 8, 32 q-heads, 8 kv-heads, d 128, sq 1): K+V bytes read per second."""
    from triton.testing import do_bench
    gen = torch.Generator(device=DEV).manual_seed(5)
    out = []
    for sk in (32768, 131072):
        c = dict(name=f"decode sk{sk}", d=128, b=8, sq=1, sk=sk, hq=32, hkv=8)
        p, t, seqs = make_case(torch, c, gen)
        refs = reference(torch, c, p, t, seqs[:2], None)
        nbytes = 2 * t["k"].numel() * t["k"].element_size()
        row = dict(sk=sk)
        for name, splits in (("ours", -1), ("s4", 4), ("s8", 8), ("s16", 16), ("s32", 32), ("s1", 1)):
            t["o"].fill_(float("nan"))
            try:
                ms = do_bench(lambda: run_kernel(lib, p, 1, None, splits), warmup=25, rep=rep, return_mode="median")
                torch.cuda.synchronize()
                r = check(torch, c, p, t, refs)
                row[name] = round(nbytes / ms / 1e9, 3)
                row[name + "_ok"] = r["ok"]
                if name == "ours":
                    row["plan"] = lib.fmsa_cuda_dev_last_plan().decode()
                if not r["ok"]:
                    print(f"FAIL decode sk{sk} {name}: {r}", flush=True)
            except Exception as e:
                print(f"ERR decode {name}: {e!r}", flush=True)
        for peer, ms in time_peers(torch, t, rep, enable_gqa=True).items():
            row[peer] = round(nbytes / ms / 1e9, 3) if ms else None
        print("decode TB/s " + json.dumps(row), flush=True)
        log.write(json.dumps(row) + "\n")
        out.append(row)
        del t
        torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    lib, kernels = load_lib(a.lib)
    if a.selftest:
        sys.exit(0 if selftest(lib, kernels) else 1)
    torch = torch_mods()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    nfail = 0
    if a.grid:
        with open(os.path.join(a.out, "grid.jsonl"), "w") as log:
            nfail += run_grid(torch, lib, kernels, log, a.variants)
    if a.decode:
        with open(os.path.join(a.out, "decode.jsonl"), "w") as log:
            run_decode(torch, lib, log, a.rep)
    if a.sweep:
        with open(os.path.join(a.out, "sweep.jsonl"), "w") as log:
            table = run_sweep(torch, lib, kernels, log, a.variants, [int(x) for x in a.dims.split(",")],
                              [int(x) for x in a.seqlens.split(",")], a.rep)
        print("\n d     s      mask   ours  fa2   cudnn  ours/fa2  best-variant", flush=True)
        for r in table:
            o, f2 = r.get("ours"), r.get("fa2")
            vs = {k: v for k, v in r.items() if k.startswith("dev_") and not k.endswith("_ok") and v}
            bv = max(vs, key=vs.get) if vs else ""
            print(f"{r['d']:<5} {r['s']:<6} {'causal' if r['causal'] else 'full  '} {o}/{r.get('ours2')}  {f2}  {r.get('cudnn')}  "
                  f"{(o / f2) if o and f2 else float('nan'):.2f}  {bv} {vs.get(bv, '')}", flush=True)
    sys.exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
