"""flashmsa.attention on torch CPU tensors, forward and backward through
autograd, every option, against the fp64 reference under the project's rule
(rule.py)."""
import math

import pytest
import torch

import flashmsa
from conftest import backend_feature, make
import rule

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DT_ID = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def check_all(got, seqs, *, options, backward, dtype, sinks=None, dlse=None):
    """got: per sequence dicts of o, lse (and dq, dk, dv; dsink in the first
    with sinks); seqs: the rule's sequences (with their dout when backward);
    sinks, dlse: the rule's options (reference() documents them)."""
    dout = [s["dout"] for s in seqs] if backward else None
    rule_opts = dict(scale=options["scale"], causal=options.get("causal", False),
                     window=options.get("window", (-1, -1)), softcap=options.get("softcap", 0.0),
                     sinks=sinks, dlse=dlse)
    refs = rule.reference(seqs, dout, **rule_opts)
    nvs = rule.naive(seqs, dout, **rule_opts)
    a = rule.lse_max(refs)

    def cat(rows, key):
        return torch.cat([r[key].double().flatten() for r in rows])

    rule.check("o", cat(got, "o"), cat(refs, "o"), cat(nvs, "o"), dtype=dtype,
               factor=rule.FACTOR_FWD, softmax_units=rule.SOFTMAX_UNITS_FWD, a=a)
    rule.check("lse", cat(got, "lse"), cat(refs, "lse"), cat(nvs, "lse"), dtype=dtype,
               factor=rule.FACTOR_FWD, softmax_units=rule.SOFTMAX_UNITS_FWD, a=a, is_lse=True)
    if backward:
        for key in ("dq", "dk", "dv"):
            rule.check(key, cat(got, key), cat(refs, key), cat(nvs, key), dtype=dtype,
                       factor=rule.FACTOR_BWD, softmax_units=rule.SOFTMAX_UNITS_BWD, a=a)
        if sinks is not None and got[0].get("dsink") is not None:
            extra = rule.dsink_floor([g["o"] for g in got], dout, [g["lse"] for g in got],
                                     sinks, dtype)
            rule.check("dsink", got[0]["dsink"], refs[0]["dsink"], nvs[0]["dsink"],
                       dtype=torch.float32, factor=rule.FACTOR_BWD,
                       softmax_units=rule.SOFTMAX_UNITS_BWD, a=a, extra=extra)


def run_batched(dtype, b, sq, sk, hq, hkv, d, *, seed=0, backward=True, alibi_shape=None,
                d_v=None, sinks=False, with_dlse=False, device="cpu", **options):
    """One batched problem: flashmsa forward (+ backward through autograd)
    checked against the rule.  d_v: v's head dim (default d); sinks: random
    sink logits, differentiable; with_dlse: the loss also takes <lse, dlse>,
    so autograd hands the backward a dlse.  device: where flashmsa runs (the
    yardsticks run on the CPU)."""
    d_v = d_v or d
    q = make((b, sq, hq, d), dtype, seed).to(device).requires_grad_(backward)
    k = make((b, sk, hkv, d), dtype, seed + 1).to(device).requires_grad_(backward)
    v = make((b, sk, hkv, d_v), dtype, seed + 2).to(device).requires_grad_(backward)
    dout = make((b, sq, hq, d_v), dtype, seed + 3)
    dlse = make((b, hq, sq), torch.float32, seed + 5) if with_dlse else None
    alibi = t = None
    if alibi_shape is not None:
        alibi = (torch.rand(alibi_shape, generator=torch.Generator().manual_seed(seed + 4)) *
                 0.5).float()
    if sinks:  # around the scores' range, so the sink takes a real share of some rows
        t = (make((hq,), torch.float32, seed + 6) * 1.5).to(device).requires_grad_(backward)
    options.setdefault("scale", 1.0 / math.sqrt(d))
    o, lse = flashmsa.attention(q, k, v, alibi_slopes=None if alibi is None else alibi.to(device),
                                sinks=t, return_lse=True, **options)
    assert o.shape == (b, sq, hq, d_v) and o.dtype == dtype and o.device == q.device
    assert lse.shape == (b, hq, sq) and lse.dtype == torch.float32
    if backward:
        if with_dlse:
            torch.autograd.backward([o, lse], [dout.to(device), dlse.to(device)])
        else:
            o.backward(dout.to(device))
    def cpu(x):
        return None if x is None else x.detach().cpu()

    got, seqs = [], []
    for i in range(b):
        row = {"o": cpu(o[i]), "lse": cpu(lse[i])}
        if backward:
            row.update(dq=cpu(q.grad[i]), dk=cpu(k.grad[i]), dv=cpu(v.grad[i]))
            if t is not None:
                row["dsink"] = cpu(t.grad)
        got.append(row)
        slopes = None if alibi is None else (alibi if alibi.dim() == 1 else alibi[i])
        seqs.append({"q": cpu(q[i]), "k": cpu(k[i]), "v": cpu(v[i]), "alibi": slopes,
                     "dout": dout[i]})
    check_all(got, seqs, options=options, backward=backward, dtype=dtype, sinks=cpu(t),
              dlse=None if dlse is None else [dlse[i] for i in range(b)])
    if backward and t is not None:
        assert t.grad is not None and torch.isfinite(t.grad).all()
    return o, lse


CASES = {
    "plain": dict(b=2, sq=48, sk=48, hq=4, hkv=4, d=32),
    "causal": dict(b=2, sq=48, sk=48, hq=4, hkv=4, d=32, causal=True),
    "causal_sq_lt_sk": dict(b=2, sq=21, sk=67, hq=2, hkv=2, d=32, causal=True),
    "causal_sq_gt_sk": dict(b=1, sq=40, sk=17, hq=2, hkv=2, d=16, causal=True),
    "window": dict(b=1, sq=64, sk=64, hq=2, hkv=2, d=32, window=(9, 4)),
    "window_causal": dict(b=1, sq=50, sk=70, hq=2, hkv=2, d=32, window=(12, -1), causal=True),
    "softcap": dict(b=1, sq=40, sk=56, hq=2, hkv=2, d=64, softcap=2.5, scale=0.5),
    "alibi_heads": dict(b=2, sq=33, sk=33, hq=4, hkv=4, d=32, alibi_shape=(4,), causal=True),
    "alibi_batch": dict(b=2, sq=24, sk=40, hq=2, hkv=2, d=32, alibi_shape=(2, 2)),
    "gqa": dict(b=2, sq=40, sk=40, hq=6, hkv=2, d=32, causal=True),
    "mqa": dict(b=1, sq=32, sk=48, hq=4, hkv=1, d=64),
    "d8": dict(b=1, sq=20, sk=30, hq=2, hkv=2, d=8),
    "d128": dict(b=1, sq=24, sk=24, hq=1, hkv=1, d=128, causal=True),
    "scale": dict(b=1, sq=32, sk=32, hq=2, hkv=2, d=32, scale=0.9),
    "everything": dict(b=2, sq=30, sk=45, hq=4, hkv=2, d=40, causal=True, window=(20, -1),
                       softcap=4.0, alibi_shape=(2, 4), deterministic=True),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: DT_ID[t])
@pytest.mark.parametrize("case", list(CASES))
def test_forward_backward(case, dtype):
    run_batched(dtype, **CASES[case])


def test_fully_masked_rows():
    """A window that hides every key from some rows: O = 0, LSE = -inf, zero gradients."""
    run_batched(torch.float32, b=1, sq=32, sk=8, hq=2, hkv=1, d=16, causal=True)
    run_batched(torch.bfloat16, b=1, sq=24, sk=24, hq=2, hkv=2, d=16, window=(2, -1), causal=True,
                seed=9)
    q = make((1, 32, 1, 16), torch.float32, 5, True)
    k = make((1, 8, 1, 16), torch.float32, 6, True)
    v = make((1, 8, 1, 16), torch.float32, 7, True)
    # sq > sk with causal: the first sq - sk rows see no key
    o, lse = flashmsa.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(o[0, :24], torch.zeros_like(o[0, :24]))
    assert torch.isinf(lse[0, 0, :24]).all() and (lse[0, 0, :24] < 0).all()
    o.sum().backward()
    assert torch.equal(q.grad[0, :24], torch.zeros_like(q.grad[0, :24]))


def test_deterministic_backward_is_bit_identical():
    grads = []
    for _ in range(2):
        q = make((2, 64, 4, 32), torch.float32, 1, True)
        k = make((2, 64, 2, 32), torch.float32, 2, True)
        v = make((2, 64, 2, 32), torch.float32, 3, True)
        flashmsa.attention(q, k, v, causal=True, deterministic=True).square().sum().backward()
        grads.append((q.grad, k.grad, v.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_lse_unused_passes_no_dlse():
    """A loss that ignores the returned lse gives the same bits as one that
    never asked for it: autograd hands the backward None, not zeros."""
    grads = []
    for return_lse in (False, True):
        q, k, v = (make((1, 24, 2, 16), torch.float32, s, True) for s in range(3))
        out = flashmsa.attention(q, k, v, causal=True, return_lse=return_lse)
        o = out[0] if return_lse else out
        assert not return_lse or out[1].requires_grad
        o.square().sum().backward()
        grads.append([t.grad for t in (q, k, v)])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- against SDPA
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: DT_ID[t])
def test_against_sdpa(dtype):
    """Beside torch's SDPA as the same-precision yardstick (its causal mask is
    top-left, the same as flashmsa's when sq == sk): O and the gradients."""
    b, s, h, d = 2, 64, 4, 32
    q = make((b, s, h, d), dtype, 11, True)
    k = make((b, s, h, d), dtype, 12, True)
    v = make((b, s, h, d), dtype, 13, True)
    dout = make((b, s, h, d), dtype, 14)
    o = flashmsa.attention(q, k, v, causal=True)
    o.backward(dout)
    ours = [o.detach()] + [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    o_sdpa = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2) for t in (q, k, v)), is_causal=True).transpose(1, 2)
    o_sdpa.backward(dout)
    theirs = [o_sdpa.detach()] + [t.grad.clone() for t in (q, k, v)]
    seqs = [{"q": q[i].detach(), "k": k[i].detach(), "v": v[i].detach()} for i in range(b)]
    refs = rule.reference(seqs, [dout[i] for i in range(b)], scale=d ** -0.5, causal=True)
    a = rule.lse_max(refs)
    for n, (key, factor, units) in enumerate((("o", 2.0, 3.0), ("dq", 3.0, 6.0),
                                              ("dk", 3.0, 6.0), ("dv", 3.0, 6.0))):
        ref = torch.stack([r[key] for r in refs])
        rule.check(key, ours[n], ref, theirs[n], dtype=dtype, factor=factor,
                   softmax_units=units, a=a)


# ---------------------------------------------------------------- varlen
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: DT_ID[t])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen(dtype, causal):
    """Three sequences (one empty) packed as [total, heads, head_dim], GQA,
    forward and backward."""
    lens_q, lens_k = [17, 0, 30], [25, 6, 30]
    hq, hkv, d = 4, 2, 32
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32)
    q = make((sum(lens_q), hq, d), dtype, 21, True)
    k = make((sum(lens_k), hkv, d), dtype, 22, True)
    v = make((sum(lens_k), hkv, d), dtype, 23, True)
    dout = make((sum(lens_q), hq, d), dtype, 24)
    o, lse = flashmsa.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                                causal=causal, return_lse=True)
    assert o.shape == q.shape and lse.shape == (hq, sum(lens_q))
    o.backward(dout)
    got, seqs = [], []
    for i in range(len(lens_q)):
        a0, a1, b0, b1 = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
        got.append({"o": o[a0:a1].detach(), "lse": lse[:, a0:a1], "dq": q.grad[a0:a1],
                    "dk": k.grad[b0:b1], "dv": v.grad[b0:b1]})
        seqs.append({"q": q[a0:a1].detach(), "k": k[b0:b1].detach(), "v": v[b0:b1].detach(),
                     "dout": dout[a0:a1]})
    check_all(got, seqs, options=dict(scale=d ** -0.5, causal=causal), backward=True,
              dtype=dtype)


def test_varlen_4d_layout_matches_3d():
    cu = torch.tensor([0, 10, 32], dtype=torch.int32)
    q, k, v = (make((32, 2, 16), torch.float32, s) for s in range(3))
    o3 = flashmsa.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)
    o4, lse4 = flashmsa.attention(q[None], k[None], v[None], cu_seqlens_q=cu, cu_seqlens_k=cu,
                                  causal=True, return_lse=True)
    assert torch.equal(o3, o4[0]) and lse4.shape == (1, 2, 32)


# ---------------------------------------------------------------- paged KV
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: DT_ID[t])
def test_paged_kv_forward(dtype):
    """K/V in a page pool, read through a block table and seqused_k (forward only)."""
    b, sq, hq, hkv, d, page, pages_per_seq = 2, 5, 4, 2, 32, 16, 3
    used = [37, 20]
    pool = 8
    k_pool = make((pool, page, hkv, d), dtype, 31)
    v_pool = make((pool, page, hkv, d), dtype, 32)
    table = torch.tensor([[5, 0, 7], [2, 6, 1]], dtype=torch.int32)
    q = make((b, sq, hq, d), dtype, 33)
    o, lse = flashmsa.attention(q, k_pool, v_pool, block_table=table,
                                seqused_k=torch.tensor(used, dtype=torch.int32), causal=True,
                                return_lse=True)
    got, seqs = [], []
    for i in range(b):
        keys = torch.cat([k_pool[p] for p in table[i].tolist()])[:used[i]]
        vals = torch.cat([v_pool[p] for p in table[i].tolist()])[:used[i]]
        got.append({"o": o[i], "lse": lse[i]})
        seqs.append({"q": q[i], "k": keys, "v": vals})
    check_all(got, seqs, options=dict(scale=d ** -0.5, causal=True), backward=False,
              dtype=dtype)
    assert pages_per_seq == table.shape[1]


def test_paged_kv_has_no_backward():
    k_pool = make((4, 16, 1, 16), torch.float32, 1, True)
    v_pool = make((4, 16, 1, 16), torch.float32, 2, True)
    q = make((1, 3, 1, 16), torch.float32, 3, True)
    o = flashmsa.attention(q, k_pool, v_pool, block_table=torch.tensor([[1, 3]],
                                                                       dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="forward-only"):
        o.sum().backward()


# ---------------------------------------------------------------- layouts
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_non_contiguous_inputs(dtype):
    """q from [b, h, s, d] transposed, k a slice of a wider tensor, v with a
    head_dim stride of 2 (copied); gradients land in the original layouts."""
    b, s, h, d = 2, 40, 4, 32
    q_bhsd = make((b, h, s, d), dtype, 41, True)
    k_wide = make((b, s + 9, h, 2 * d), dtype, 42, True)
    v_big = make((b, s, h, d, 2), dtype, 43, True)
    dout = make((b, s, h, d), dtype, 44)
    q = q_bhsd.transpose(1, 2)
    k = k_wide[:, 4:4 + s, :, 8:8 + d]
    v = v_big[..., 0]
    assert not q.is_contiguous() and not k.is_contiguous() and v.stride(-1) == 2
    o, lse = flashmsa.attention(q, k, v, causal=True, return_lse=True)
    o.backward(dout)
    got = [{"o": o[i].detach(), "lse": lse[i], "dq": q_bhsd.grad.transpose(1, 2)[i],
            "dk": k_wide.grad[i, 4:4 + s, :, 8:8 + d], "dv": v_big.grad[i, ..., 0]}
           for i in range(b)]
    seqs = [{"q": q[i].detach(), "k": k[i].detach(), "v": v[i].detach(), "dout": dout[i]}
            for i in range(b)]
    check_all(got, seqs, options=dict(scale=d ** -0.5, causal=True), backward=True,
              dtype=dtype)
    # gradient outside the views is exactly zero
    assert k_wide.grad[:, :4].abs().max() == 0 and v_big.grad[..., 1].abs().max() == 0
    # the same problem on contiguous copies gives bit-identical results
    o2 = flashmsa.attention(q.detach().contiguous(), k.detach().contiguous(),
                            v.detach().contiguous(), causal=True)
    assert torch.equal(o.detach(), o2)


def test_empty_batch():
    q = torch.empty(0, 8, 2, 16)
    o, lse = flashmsa.attention(q, q, q, return_lse=True)
    assert o.shape == (0, 8, 2, 16) and lse.shape == (0, 2, 8)


def test_opcheck():
    """torch.library.opcheck: schema, fake (meta) implementation and autograd
    registration of flashmsa::fwd and flashmsa::bwd agree with the real ops."""
    q = make((1, 16, 2, 16), torch.float32, 1, True)
    k = make((1, 24, 1, 16), torch.float32, 2, True)
    v = make((1, 24, 1, 16), torch.float32, 3, True)
    args = (q, k, v, None, None, None, None, None, None, True, -1, -1, 0.0, 0.25, 0, 0, False)
    o, lse = torch.ops.flashmsa.fwd(*args)
    dout = torch.randn_like(o)
    torch.library.opcheck(torch.ops.flashmsa.bwd.default,
                          (dout, q.detach(), k.detach(), v.detach(), o.detach(), lse.detach(),
                           None, None, None, None, None, True, -1, -1, 0.0, 0.25, 0, 0, False,
                           False))
    with backend_feature("dlse"):  # its autograd check differentiates the lse output too
        torch.library.opcheck(torch.ops.flashmsa.fwd.default, args)


def test_opcheck_v02():
    """The same with sinks, a value head dim of its own, dlse and dsink."""
    q = make((1, 12, 2, 16), torch.float32, 1, True)
    k = make((1, 20, 1, 16), torch.float32, 2, True)
    v = make((1, 20, 1, 8), torch.float32, 3, True)
    t = make((2,), torch.float32, 4, True)
    args = (q, k, v, None, t, None, None, None, None, True, -1, -1, 0.0, 0.25, 0, 0, False)
    with backend_feature("sinks", "dim_v", "dlse"):
        o, lse = torch.ops.flashmsa.fwd(*args)
        torch.library.opcheck(torch.ops.flashmsa.bwd.default,
                              (torch.randn_like(o), q.detach(), k.detach(), v.detach(),
                               o.detach(), lse.detach(), torch.randn_like(lse), None, t.detach(),
                               None, None, True, -1, -1, 0.0, 0.25, 0, 0, False, True))
        torch.library.opcheck(torch.ops.flashmsa.fwd.default, args)


def test_opcheck_merge():
    o_a, o_b = (make((2, 8, 2, 16), torch.float32, s, True) for s in (1, 2))
    lse_a, lse_b = (make((2, 2, 8), torch.float32, s, True) for s in (3, 4))
    torch.library.opcheck(torch.ops.flashmsa.merge.default, (o_a, lse_a, o_b, lse_b))
    outs = (torch.empty_like(o_a), torch.empty_like(lse_a))
    torch.library.opcheck(torch.ops.flashmsa.merge_out.default,
                          tuple(x.detach() for x in (o_a, lse_a, o_b, lse_b)) + outs)
