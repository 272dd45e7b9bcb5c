"""The project's correctness rule (common/check_rule.h) for the Python tests,
with its two yardsticks written in torch:

- reference(): fp64, through autograd for the gradients;
- naive(): the same-precision naive implementation of
  common/naive.c -- materialised S and P, every sum in fp32
  and in order (a Python loop over the summed index, one rounding per add),
  S, P, dP, dS and the outputs rounded to the input dtype where a framework
  would round them.

check() then asserts max|x - ref| <= factor * max|naive - ref| + floor, the
floor as fmsa_rule_floor() derives it, and no NaN.

A problem is a list of sequences, each a dict of its q [sq, Hq, D],
k [sk, Hkv, D], v [sk, Hkv, Dv] (input dtype) and alibi slopes [Hq] (or
None), so plain batches, varlen batches and paged caches all reduce to it;
sink logits and the lse gradient are options of the whole problem.
"""
import math

import torch

U = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
FLOOR_UNITS, FLOOR_F32_UNITS = 2.0, 2.0
SOFTMAX_UNITS_FWD, SOFTMAX_UNITS_BWD = 3.0, 6.0
FACTOR_FWD, FACTOR_BWD = 2.0, 3.0


def visible(sq, sk, causal, window):
    """[sq, sk] bool: key j visible from query i (flashmsa.h's definition)."""
    left, right = window
    if causal:
        right = 0
    i = torch.arange(sq)[:, None]
    j = torch.arange(sk)[None, :]
    diag = i + sk - sq
    ok = torch.ones(sq, sk, dtype=torch.bool)
    if left >= 0:
        ok &= j >= diag - left
    if right >= 0:
        ok &= j <= diag + right
    return ok


def _alibi_bias(slopes, sq, sk):
    """-slope[h] * |i + sk - sq - j| as [H, sq, sk] (fp64)."""
    i = torch.arange(sq, dtype=torch.float64)[:, None]
    j = torch.arange(sk, dtype=torch.float64)[None, :]
    return -slopes.double()[:, None, None] * (i + sk - sq - j).abs()


def _expand_kv(x, hq):
    return x.repeat_interleave(hq // x.shape[1], dim=1)


def reference(seqs, dout=None, *, scale, causal=False, window=(-1, -1), softcap=0.0,
              sinks=None, dlse=None):
    """fp64 O [sq, Hq, Dv], LSE [Hq, sq] per sequence, and with dout (a list of
    [sq, Hq, Dv]) the fp64 dq, dk, dv per sequence, through autograd of the
    loss <o, dout> + <lse, dlse> (dlse: a list of [Hq, sq], or None).  sinks
    (fp32 [Hq]): the extra softmax term of flashmsa.h; its gradient dsink,
    summed over the sequences, is in every sequence's dict."""
    out = []
    t = None if sinks is None else sinks.double().requires_grad_()
    for n, sqn in enumerate(seqs):
        q = sqn["q"].double().requires_grad_()
        k = sqn["k"].double().requires_grad_()
        v = sqn["v"].double().requires_grad_()
        sq, hq = q.shape[0], q.shape[1]
        sk = k.shape[0]
        s = torch.einsum("ihd,jhd->hij", q, _expand_kv(k, hq)) * scale
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        if sqn.get("alibi") is not None:
            s = s + _alibi_bias(sqn["alibi"], sq, sk)
        vis = visible(sq, sk, causal, window)
        s = s.masked_fill(~vis, -math.inf)
        if t is not None:  # the sink is one more column of scores, without a value
            s = torch.cat([t[:, None, None].expand(hq, sq, 1), s], dim=-1)
        m = s.detach().amax(-1, keepdim=True) if s.shape[-1] else \
            torch.full((hq, sq, 1), -math.inf, dtype=torch.float64)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(s - m)
        l = e.sum(-1, keepdim=True)
        p = e / torch.where(l > 0, l, torch.ones_like(l))
        lse = (m + torch.log(l)).squeeze(-1)
        if t is not None:
            p = p[..., 1:]
        o = torch.einsum("hij,jhd->ihd", p, _expand_kv(v, hq))
        res = {"o": o.detach(), "lse": lse.detach()}
        if dout is not None:
            outs, grads = [o], [dout[n].double()]
            if dlse is not None:
                outs.append(lse)
                grads.append(dlse[n].double())
            inputs = (q, k, v) + ((t,) if t is not None else ())
            g = torch.autograd.grad(outs, inputs, grads, allow_unused=True)
            dq, dk, dv = g[:3]
            res.update(dq=torch.zeros_like(q) if dq is None else dq,
                       dk=torch.zeros_like(k) if dk is None else dk,
                       dv=torch.zeros_like(v) if dv is None else dv)
            if t is not None:
                res["dsink_part"] = torch.zeros_like(t) if g[3] is None else g[3]
        out.append(res)
    if t is not None and dout is not None:
        total = sum(r["dsink_part"] for r in out)
        for r in out:
            r["dsink"] = total
    return out


def _rnd(x, dtype):
    return x.to(dtype).float()


def _seq_sum(terms, n):
    """sum_{j < n} terms(j) in fp32, in order, one rounding per add."""
    acc = None
    for j in range(n):
        t = terms(j)
        acc = t.clone() if acc is None else acc + t
    return acc


def naive(seqs, dout=None, *, scale, causal=False, window=(-1, -1), softcap=0.0, sinks=None,
          dlse=None):
    """The same-precision naive O, LSE (and dq, dk, dv, dsink with dout), as
    fp64 tensors holding the naive's values.  A sink is one more column of S
    without a value, and dsink is what autograd of that column gives: its dS
    rounded to the dtype, summed in fp32 (common/naive.c, fmsa_naive_dsink)."""
    out = []
    dsink = None if sinks is None else torch.zeros(sinks.shape[0])
    for n, sqn in enumerate(seqs):
        dt = sqn["q"].dtype
        q = sqn["q"].float().transpose(0, 1)                    # [Hq, sq, D]
        hq, sq, d = q.shape
        k = _expand_kv(sqn["k"].float(), hq).transpose(0, 1)    # [Hq, sk, D]
        v = _expand_kv(sqn["v"].float(), hq).transpose(0, 1)    # [Hq, sk, Dv]
        sk, dv_dim = k.shape[1], sqn["v"].shape[-1]
        if sq == 0:  # an empty sequence: nothing to compute, its keys get zero gradients
            kz = torch.zeros(sqn["k"].shape, dtype=torch.float64)
            out.append({"o": torch.zeros(0, hq, dv_dim, dtype=torch.float64),
                        "lse": torch.zeros(hq, 0, dtype=torch.float64), "dq":
                        torch.zeros(0, hq, d, dtype=torch.float64), "dk": kz,
                        "dv": torch.zeros(sqn["v"].shape, dtype=torch.float64)})
            continue
        scale32 = torch.tensor(scale, dtype=torch.float32)
        acc = _seq_sum(lambda c: q[:, :, None, c] * k[:, None, :, c], d) if sk else \
            torch.zeros(hq, sq, 0)
        x = acc * scale32
        if softcap > 0:
            cap = torch.tensor(softcap, dtype=torch.float32)
            x = cap * torch.tanh(x / cap)
        capped = x
        if sqn.get("alibi") is not None:
            x = x + _alibi_bias(sqn["alibi"], sq, sk).float()
        vis = visible(sq, sk, causal, window).expand(hq, sq, sk)
        s = _rnd(x, dt).masked_fill(~vis, -math.inf)
        m = s.amax(-1, keepdim=True) if sk else torch.full((hq, sq, 1), -math.inf)
        if sinks is not None:
            t = sinks.float()[:, None, None].expand(hq, sq, 1)
            m = torch.maximum(m, t)
        empty = ~torch.isfinite(m)
        m0 = torch.where(empty, torch.zeros_like(m), m)
        e = torch.exp(s - m0)
        l0 = torch.zeros(hq, sq, 1) if sinks is None else torch.exp(t - m0)
        l = l0 + _seq_sum(lambda j: e[:, :, j:j + 1], sk) if sk else l0
        p = _rnd(e / torch.where(empty, torch.ones_like(l), l), dt)
        p = torch.where(empty, torch.zeros_like(p), p)
        if sinks is not None:  # the sink's column of P, rounded like the others
            psink = _rnd(l0 / l, dt)
        lse = torch.where(empty, m, m + torch.log(l)).squeeze(-1)
        o = _rnd(_seq_sum(lambda j: p[:, :, j, None] * v[:, None, j, :], sk), dt) if sk else \
            torch.zeros(hq, sq, dv_dim)
        res = {"o": o.transpose(0, 1).double(), "lse": lse.double()}
        if dout is not None:
            g = dout[n].float().transpose(0, 1)                 # [Hq, sq, Dv]
            dp = _rnd(_seq_sum(lambda c: g[:, :, None, c] * v[:, None, :, c], dv_dim), dt) \
                if sk else torch.zeros(hq, sq, 0)
            di = _seq_sum(lambda j: p[:, :, j:j + 1] * dp[:, :, j:j + 1], sk) if sk else \
                torch.zeros(hq, sq, 1)
            if dlse is not None:
                di = di - dlse[n].float()[:, :, None]
            ds = _rnd(p * (dp - di), dt)
            if softcap > 0:
                ds = _rnd(ds * (1.0 - (capped / cap) * (capped / cap)), dt)
            dq = _rnd(_seq_sum(lambda j: ds[:, :, j, None] * k[:, None, j, :], sk) * scale32,
                      dt) if sk else torch.zeros(hq, sq, d)
            hk = _seq_sum(lambda i: ds[:, i, :, None] * q[:, i, None, :], sq)  # [Hq, sk, D]
            hv = _seq_sum(lambda i: p[:, i, :, None] * g[:, i, None, :], sq)
            hkv = sqn["k"].shape[1]
            group = hq // hkv
            dk = torch.zeros(hkv, sk, d)
            dv = torch.zeros(hkv, sk, dv_dim)
            for h in range(hq):  # each query head adds into its kv head, in order
                dk[h // group] += hk[h] * scale32
                dv[h // group] += hv[h]
            if sinks is not None:  # the sink column's dS = P_sink (0 - D_i), rounded,
                ds_sink = _rnd(psink * (0.0 - di), dt).squeeze(-1)   # [Hq, sq]
                for i in range(sq):  # summed in fp32 over the batch, then the rows
                    dsink = dsink + ds_sink[:, i]
            res.update(dq=dq.transpose(0, 1).double(), dk=_rnd(dk, dt).transpose(0, 1).double(),
                       dv=_rnd(dv, dt).transpose(0, 1).double())
        out.append(res)
    if dsink is not None and dout is not None:
        for r in out:
            r["dsink"] = dsink.double()
    return out


def lse_max(refs):
    """A of check_rule.h: max |LSE| of the reference over rows with a visible key."""
    a = 0.0
    for r in refs:
        finite = r["lse"][torch.isfinite(r["lse"])]
        if finite.numel():
            a = max(a, finite.abs().max().item())
    return a


def dsink_floor(outs, douts, lses, sinks, dtype):
    """Part (d) of common/check_rule.h, per head: the backward gets O rounded to
    its dtype, so D_i = rowsum(dO O) carries u(dtype) sum_d |dO||O|, which
    dsink sums with the sink's weight exp(t_h - lse_i) (the naive's D_i =
    rowsum(P dP) never reads the rounded O).  outs, douts: per sequence
    [sq, Hq, Dv] as the backward saw them; lses: per sequence [Hq, sq]."""
    t = sinks.double()
    x = torch.zeros_like(t)
    for o, do, lse in zip(outs, douts, lses):
        n = (do.double().abs() * o.double().abs()).sum(-1)  # [sq, Hq]
        w = torch.exp(t[:, None] - lse.double())           # [Hq, sq]
        x += U[dtype] * (w * n.transpose(0, 1)).sum(-1)
    return x


def check(name, got, ref, nv, *, dtype, factor, softmax_units, a, is_lse=False, extra=None):
    """Asserts the rule for one tensor (got, ref, nv: fp64 tensors of one shape;
    extra: a per-element allowance of its own, part (d) for dsink)."""
    got, ref, nv = got.double(), ref.double(), nv.double()
    assert not torch.isnan(got).any(), f"{name}: NaN in the result"
    inf = torch.isinf(ref)
    if inf.any():  # the -inf LSE of a row with no visible key: exactly that value
        assert torch.equal(got[inf], ref[inf]), f"{name}: expected -inf where the reference is"
        got, ref, nv = got[~inf], ref[~inf], nv[~inf]
    if ref.numel() == 0:
        return
    ref_max = ref.abs().max().item()
    err = ((got - ref).abs() - (0.0 if extra is None else extra.double())).max().item()
    naive_err = (nv - ref).abs().max().item()
    u32 = U[torch.float32]
    store = torch.float32 if is_lse else dtype
    floor = (FLOOR_UNITS * U[store] + FLOOR_F32_UNITS * u32) * ref_max
    softmax = u32 * softmax_units * (1.0 + a)
    floor += softmax if is_lse else softmax * ref_max
    bound = factor * naive_err + floor
    assert err <= bound, (f"{name}: error {err:.3e} > {factor} x naive {naive_err:.3e} + floor "
                          f"{floor:.3e} (max|ref| {ref_max:.3e})")
    return err, bound
