"""The CUDA bench scripts' shared pieces: torch tensors as flashmsa descriptors, and the
fp64 check of sampled rows (and keys: dK, dV) under the project's rule (error <= factor x the naive
same-precision computation's, plus a roundoff floor; common/check_rule.h's shape).
Imported by bench/cuda_vs_peers.py and bench/cuda_fwd_ab.py."""
import math
import os
import sys

import torch

# The ctypes mirror of the C API is the Python package's (python/flashmsa/_capi.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from flashmsa._capi import Tensor  # noqa: E402

DTYPE = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3, torch.int32: 4}
U = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def tdesc(t):
    """A torch tensor as an fmsa_tensor (data pointer, shape, strides in elements)."""
    d = Tensor(t.data_ptr(), 0, DTYPE[t.dtype], t.dim())
    for i in range(t.dim()):
        d.shape[i], d.strides[i] = t.shape[i], t.stride(i)
    return d


def _rounding(tdt):
    """The references' arithmetic: fp64 (tdt None), or fp32 with every stage rounded
    to tdt (the naive same-precision computation): (round, dtype to compute in)."""
    if tdt is None:
        return (lambda x: x), torch.float64
    return (lambda x: x.to(tdt).to(torch.float32)), torch.float32


def reference_rows(q, k, v, do, rows, causal, tdt=None):
    """O and dQ of sampled rows of batch 0, [r, H, D]: fp64 (tdt None) or the naive
    computation in dtype tdt (fp32 sums, S, P, O, dP, dS, dQ rounded); dQ is None
    without do (a forward-only check)."""
    rnd, cast = _rounding(tdt)
    hq, hkv = q.shape[2], k.shape[2]
    qq = q[0][rows].to(cast).transpose(0, 1)  # [H, r, D]
    kk, vv = (x[0].to(cast).transpose(0, 1).repeat_interleave(hq // hkv, 0) for x in (k, v))
    scale = 1.0 / math.sqrt(q.shape[3])
    s = rnd(qq @ kk.transpose(1, 2) * scale)
    sq, sk = q.shape[1], k.shape[1]
    if causal:
        keys = torch.arange(sk, device=q.device)
        s = s.masked_fill(keys[None, None, :] > (rows + sk - sq)[None, :, None], float("-inf"))
    p = rnd(torch.softmax(s, -1))
    o = rnd(p @ vv)
    if do is None:
        return o.transpose(0, 1), None
    dd = do[0][rows].to(cast).transpose(0, 1)
    dp = rnd(dd @ vv.transpose(1, 2))
    ds = rnd(p * (dp - (dd * o).sum(-1, keepdim=True)))
    dq = rnd(ds @ kk * scale)
    return o.transpose(0, 1), dq.transpose(0, 1)


def reference_keys(q, k, v, do, keys, causal, tdt=None, block=4096):
    """dK and dV of sampled keys of batch 0, [r, H, D]: fp64 (tdt None) or the naive
    computation in dtype tdt (the roundings of reference_rows), every row's softmax
    taken in row blocks."""
    rnd, cast = _rounding(tdt)
    S, H, D = q.shape[1], q.shape[2], q.shape[3]
    scale = 1.0 / math.sqrt(D)
    dk = torch.zeros(H, len(keys), D, dtype=cast, device=q.device)
    dv = torch.zeros_like(dk)
    for h in range(H):
        kk, vv = k[0, :, h].to(cast), v[0, :, h].to(cast)
        for r0 in range(0, S, block):
            qq, dd = q[0, r0:r0 + block, h].to(cast), do[0, r0:r0 + block, h].to(cast)
            s = rnd(qq @ kk.T * scale)
            if causal:
                rows = torch.arange(r0, r0 + qq.shape[0], device=q.device)
                s = s.masked_fill(torch.arange(S, device=q.device)[None, :] > rows[:, None],
                                  float("-inf"))
            p = rnd(torch.softmax(s, -1))
            o = rnd(p @ vv)
            delta = (dd * o).sum(-1, keepdim=True)
            pj = p[:, keys]
            dv[h] += pj.T @ dd
            ds = rnd(pj * (rnd(dd @ vv[keys].T) - delta))
            dk[h] += ds.T @ qq * scale
    return rnd(dk).transpose(0, 1), rnd(dv).transpose(0, 1)


def rule_ok(got, ref, naive, factor, dt):
    """(passed, error, naive's error): |got - ref| <= factor |naive - ref| + floor."""
    if torch.isnan(got).any():
        return False, float("inf"), 0.0
    err = (got.double() - ref).abs().max().item()
    nerr = (naive.double() - ref).abs().max().item()
    floor = (2 * U[dt] + 2 * U[torch.float32]) * ref.abs().max().item()
    return err <= factor * nerr + floor, err, nerr
