"""The v0.2 features through the Python API: attention sinks (forward and
dsink), the lse gradient through autograd (dlse), a value head dim of its own
(Dv != D), against the fp64 reference under the project's rule (rule.py).

A backend whose kernels lack a feature refuses it with the feature gate's
message; backend_feature() skips only on that message (and fails instead for
the features FLASHMSA_TEST_REQUIRE names), so a library that has a feature
runs these tests for real.  FLASHMSA_TEST_DEVICE=cuda runs flashmsa on CUDA
tensors (the yardsticks stay on the CPU)."""
import math
import os

import pytest
import torch

import flashmsa
import rule
from conftest import backend_feature, make
from test_attention import DT_ID, DTYPES, check_all, run_batched

DEVICE = os.environ.get("FLASHMSA_TEST_DEVICE", "cpu")

SINK_CASES = {
    "plain": dict(b=2, sq=40, sk=40, hq=4, hkv=4, d=32),
    "causal_gqa": dict(b=2, sq=33, sk=47, hq=6, hkv=2, d=32, causal=True),
    # sq > sk, causal: the first rows see no key (O = 0, lse = t_h)
    "rows_without_keys": dict(b=1, sq=30, sk=12, hq=2, hkv=1, d=16, causal=True),
    "window_softcap": dict(b=1, sq=48, sk=48, hq=2, hkv=2, d=64, window=(7, 3), softcap=3.0),
    "deterministic": dict(b=2, sq=32, sk=32, hq=4, hkv=2, d=32, causal=True, deterministic=True),
}


# dsink takes D_i = rowsum(dO_i * O_i) from the O the backward receives, rounded
# to its dtype (flashmsa.h), an error the naive's rowsum(P dP) never has: the
# rule's part (d) (common/check_rule.h, rule.dsink_floor) allows exactly it.


def _sink_params():
    for case in SINK_CASES:
        for dtype in DTYPES:
            yield pytest.param(case, dtype, id=f"{case}-{DT_ID[dtype]}")


@pytest.mark.parametrize("case, dtype", list(_sink_params()))
def test_sinks(case, dtype):
    """O, lse, dq, dk, dv and dsink (summed over the batch) with sink logits."""
    with backend_feature("sinks"):
        run_batched(dtype, sinks=True, device=DEVICE, **SINK_CASES[case])


def test_sinks_rows_without_keys_give_the_sink():
    """flashmsa.h: a row with no visible key gives O = 0 and lse = t_h."""
    q = make((1, 10, 2, 16), torch.float32, 1).to(DEVICE)
    k = make((1, 4, 2, 16), torch.float32, 2).to(DEVICE)
    t = torch.tensor([0.5, -2.0], device=DEVICE)
    with backend_feature("sinks"):
        o, lse = flashmsa.attention(q, k, k, causal=True, sinks=t, return_lse=True)
    assert torch.equal(o[0, :6].cpu(), torch.zeros(6, 2, 16))
    assert torch.equal(lse[0, :, :6].cpu(), t.cpu()[:, None].expand(2, 6))


def _sinks_formula(q, k, v, t, scale):
    """The sink as gpt-oss writes it, in torch: one more logit column per head,
    softmax, the column dropped.  q [b, sq, h, d], k/v [b, sk, h, d]."""
    s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    col = t[None, :, None, None].expand(s.shape[0], -1, s.shape[2], 1).to(s.dtype)
    p = torch.softmax(torch.cat([col, s], dim=-1), dim=-1)[..., 1:]
    return torch.einsum("bhij,bjhd->bihd", p, v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_sinks_against_torch_formula(dtype):
    """Beside the torch formula in the input precision as the yardstick:
    O and the gradients of q, k, v and the sinks."""
    b, s, h, d = 2, 48, 4, 32
    scale = d ** -0.5
    q, k, v = (make((b, s, h, d), dtype, 51 + i).to(DEVICE).requires_grad_() for i in range(3))
    t = (make((h,), torch.float32, 55) * 2).to(DEVICE).requires_grad_()
    dout = make((b, s, h, d), dtype, 56).to(DEVICE)
    with backend_feature("sinks"):
        o = flashmsa.attention(q, k, v, sinks=t)
        o.backward(dout)
    ours = [o.detach()] + [x.grad.clone() for x in (q, k, v, t)]
    for x in (q, k, v, t):
        x.grad = None
    o_ref = _sinks_formula(q, k, v, t, scale)
    o_ref.backward(dout)
    theirs = [o_ref.detach()] + [x.grad.clone() for x in (q, k, v, t)]
    seqs = [{"q": q[i].detach().cpu(), "k": k[i].detach().cpu(), "v": v[i].detach().cpu()}
            for i in range(b)]
    refs = rule.reference(seqs, [dout[i].cpu() for i in range(b)], scale=scale,
                          sinks=t.detach().cpu())
    a = rule.lse_max(refs)
    extra = rule.dsink_floor([ours[0][i].cpu() for i in range(b)],
                             [dout[i].cpu() for i in range(b)], [r["lse"] for r in refs],
                             t.detach().cpu(), dtype)
    for n, key in enumerate(("o", "dq", "dk", "dv", "dsink")):
        ref = refs[0]["dsink"] if key == "dsink" else torch.stack([r[key] for r in refs])
        fwd = key == "o"
        rule.check(key, ours[n].cpu(), ref, theirs[n].cpu(),
                   dtype=torch.float32 if key == "dsink" else dtype,
                   factor=rule.FACTOR_FWD if fwd else rule.FACTOR_BWD,
                   softmax_units=rule.SOFTMAX_UNITS_FWD if fwd else rule.SOFTMAX_UNITS_BWD, a=a,
                   extra=extra if key == "dsink" else None)


def test_sinks_varlen():
    """Three packed sequences (one empty) with sinks: dsink sums over them."""
    lens_q, lens_k = [9, 0, 21], [15, 5, 21]
    hq, hkv, d = 4, 2, 32
    cu_q = torch.tensor([0, 9, 9, 30], dtype=torch.int32)
    cu_k = torch.tensor([0, 15, 20, 41], dtype=torch.int32)
    q = make((30, hq, d), torch.float32, 61).to(DEVICE).requires_grad_()
    k = make((41, hkv, d), torch.float32, 62).to(DEVICE).requires_grad_()
    v = make((41, hkv, d), torch.float32, 63).to(DEVICE).requires_grad_()
    t = make((hq,), torch.float32, 64).to(DEVICE).requires_grad_()
    dout = make((30, hq, d), torch.float32, 65)
    with backend_feature("sinks"):
        o, lse = flashmsa.attention(q, k, v, cu_seqlens_q=cu_q.to(DEVICE),
                                    cu_seqlens_k=cu_k.to(DEVICE), max_seqlen_q=max(lens_q),
                                    max_seqlen_k=max(lens_k), causal=True, sinks=t,
                                    return_lse=True)
        o.backward(dout.to(DEVICE))
    got, seqs = [], []
    for i in range(3):
        a0, a1, b0, b1 = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
        got.append({"o": o[a0:a1].detach().cpu(), "lse": lse[:, a0:a1].cpu(),
                    "dq": q.grad[a0:a1].cpu(), "dk": k.grad[b0:b1].cpu(),
                    "dv": v.grad[b0:b1].cpu(), "dsink": t.grad.cpu()})
        seqs.append({"q": q[a0:a1].detach().cpu(), "k": k[b0:b1].detach().cpu(),
                     "v": v[b0:b1].detach().cpu(), "dout": dout[a0:a1]})
    check_all(got, seqs, options=dict(scale=d ** -0.5, causal=True), backward=True,
              dtype=torch.float32, sinks=t.detach().cpu())


def test_sinks_without_grad_pass_no_dsink():
    """Sinks that do not require grad: no dsink asked for, q's gradient the same."""
    t = make((2,), torch.float32, 7).to(DEVICE)
    grads = []
    for grad in (False, True):
        q, k, v = (make((1, 16, 2, 16), torch.float32, s).to(DEVICE).requires_grad_()
                   for s in range(3))
        ts = t.clone().requires_grad_(grad)
        with backend_feature("sinks"):
            flashmsa.attention(q, k, v, sinks=ts).sum().backward()
        assert (ts.grad is not None) == grad
        grads.append(q.grad)
    assert torch.equal(grads[0], grads[1])


# ---------------------------------------------------------------- dlse
DLSE_CASES = {
    "plain": dict(b=2, sq=32, sk=40, hq=4, hkv=4, d=32),
    "causal_gqa": dict(b=1, sq=40, sk=40, hq=4, hkv=2, d=32, causal=True),
    "rows_without_keys": dict(b=1, sq=24, sk=8, hq=2, hkv=2, d=16, causal=True),
    "with_sinks": dict(b=2, sq=24, sk=24, hq=2, hkv=1, d=32, causal=True, sinks=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", list(DLSE_CASES))
def test_dlse_through_autograd(case, dtype):
    """The loss <o, dout> + <lse, dlse>: the gradients are those of torch's
    autograd through the fp64 reference's logsumexp."""
    features = ("dlse", "sinks") if DLSE_CASES[case].get("sinks") else ("dlse",)
    with backend_feature(*features):
        run_batched(dtype, with_dlse=True, device=DEVICE, **DLSE_CASES[case])


def test_loss_of_the_lse_alone():
    """lse.sum(): autograd hands a broadcast dlse and no dout."""
    b, s, h, d = 1, 20, 2, 16
    q, k, v = (make((b, s, h, d), torch.float32, 71 + i).to(DEVICE).requires_grad_()
               for i in range(3))
    with backend_feature("dlse"):
        _, lse = flashmsa.attention(q, k, v, causal=True, return_lse=True)
        lse.sum().backward()
    assert torch.equal(v.grad.cpu(), torch.zeros(b, s, h, d))  # lse does not depend on v
    qd, kd = (x.detach().cpu().double().requires_grad_() for x in (q, k))
    sc = torch.einsum("bihd,bjhd->bhij", qd, kd) * d ** -0.5
    sc = sc.masked_fill(~rule.visible(s, s, True, (-1, -1)), -math.inf)
    torch.logsumexp(sc, -1).sum().backward()
    seqs = [{"q": q[0].detach().cpu(), "k": k[0].detach().cpu(), "v": v[0].detach().cpu()}]
    zero = [torch.zeros(s, h, d)]
    nv = rule.naive(seqs, zero, scale=d ** -0.5, causal=True, dlse=[torch.ones(h, s)])[0]
    a = rule.lse_max(rule.reference(seqs, scale=d ** -0.5, causal=True))
    for got, ref, key in ((q.grad, qd.grad, "dq"), (k.grad, kd.grad, "dk")):
        rule.check(key, got[0].cpu(), ref[0], nv[key], dtype=torch.float32,
                   factor=rule.FACTOR_BWD, softmax_units=rule.SOFTMAX_UNITS_BWD, a=a)


# ---------------------------------------------------------------- Dv != D
DV_CASES = {
    "d64_dv32": dict(b=2, sq=24, sk=32, hq=4, hkv=2, d=64, d_v=32, causal=True),
    "d32_dv64": dict(b=1, sq=32, sk=24, hq=2, hkv=2, d=32, d_v=64),
    "mla_192_128": dict(b=1, sq=16, sk=20, hq=2, hkv=1, d=192, d_v=128, causal=True),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: DT_ID[t])
@pytest.mark.parametrize("case", list(DV_CASES))
def test_value_head_dim(case, dtype):
    """v with its own head dim: o and dout are [.., Dv], dv like v."""
    with backend_feature("dim_v"):
        run_batched(dtype, device=DEVICE, **DV_CASES[case])


def test_value_head_dim_with_sinks_and_dlse():
    with backend_feature("dim_v", "sinks", "dlse"):
        run_batched(torch.float32, b=2, sq=20, sk=28, hq=4, hkv=2, d=48, d_v=24, causal=True,
                    sinks=True, with_dlse=True, device=DEVICE)


def test_large_head_dims():
    """D = 576, Dv = 512 (MLA's decode shapes): beyond the small-dim kernels."""
    with backend_feature("dim_v", "large_dim"):
        run_batched(torch.bfloat16, b=1, sq=8, sk=12, hq=2, hkv=1, d=576, d_v=512,
                    causal=True, device=DEVICE)


# ---------------------------------------------------------------- bad inputs
def test_bad_sinks_and_value_dims():
    q, k, v = (make((1, 8, 4, 16), torch.float32, s).to(DEVICE) for s in range(3))
    with pytest.raises(flashmsa.InvalidArgumentError, match="sinks") as e:
        flashmsa.attention(q, k, v, sinks=torch.zeros(3, device=DEVICE))
    assert e.value.status == flashmsa.Status.ERR_INVALID_ARGUMENT
    with pytest.raises(TypeError, match="sinks must be a torch.float32"):
        flashmsa.attention(q, k, v, sinks=torch.zeros(4, dtype=torch.float64, device=DEVICE))
    with pytest.raises(TypeError, match="sinks must be a torch.float32"):
        flashmsa.attention(q, k, v, sinks=[0.0] * 4)
    with pytest.raises(flashmsa.NotSupportedError, match=r"head_dim_v\) = 12"):
        flashmsa.attention(q, k, make((1, 8, 4, 12), torch.float32, 9).to(DEVICE))
    with pytest.raises(flashmsa.InvalidArgumentError, match="v"):
        flashmsa.attention(q, k, make((1, 9, 4, 16), torch.float32, 9).to(DEVICE))
