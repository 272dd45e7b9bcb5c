"""The CUDA bench scripts' shared pieces: torch tensors as flashmsa descriptors, and the
fp64 check of sampled rows under the project's rule (error <= factor x the naive
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


def reference_rows(q, k, v, do, rows, causal, tdt=None):
    """O and dQ of sampled rows of batch 0, [r, H, D]: fp64 (tdt None) or the naive
    computation in dtype tdt (fp32 sums, S, P, O, dP, dS, dQ rounded); dQ is None
    without do (a forward-only check)."""
    rnd = (lambda x: x.to(tdt).to(torch.float32)) if tdt else (lambda x: x)
    cast = torch.float64 if tdt is None else torch.float32
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


def rule_ok(got, ref, naive, factor, dt):
    """(passed, error, naive's error): |got - ref| <= factor |naive - ref| + floor."""
    if torch.isnan(got).any():
        return False, float("inf"), 0.0
    err = (got.double() - ref).abs().max().item()
    nerr = (naive.double() - ref).abs().max().item()
    floor = (2 * U[dt] + 2 * U[torch.float32]) * ref.abs().max().item()
    return err <= factor * nerr + floor, err, nerr
