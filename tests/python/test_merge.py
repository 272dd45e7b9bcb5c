"""flashmsa.merge_states (fmsa_merge_states): against the fp64 merge formula
under the project's rule, rows with lse = -inf on either or both sides, in
place, autograd through it, and ring attention (two key halves merged) giving
full attention's gradients through dlse.  FLASHMSA_TEST_DEVICE=cuda runs the
merges on CUDA tensors."""
import math
import os

import pytest
import torch

import flashmsa
import rule
from conftest import backend_feature, make

DEVICE = os.environ.get("FLASHMSA_TEST_DEVICE", "cpu")
NEG_INF = -math.inf


def _partials(b, s, h, dv, dtype_a, dtype_b, seed, masked=True):
    """Two partial results: o [b, s, h, dv], lse [b, h, s], some rows -inf on
    one side (their o rows NaN, which must not leak) and some on both (o_a, o_b
    NaN there as well)."""
    o_a = make((b, s, h, dv), torch.float32, seed).to(dtype_a)
    o_b = make((b, s, h, dv), torch.float32, seed + 1).to(dtype_b)
    lse_a = make((b, h, s), torch.float32, seed + 2) * 3
    lse_b = make((b, h, s), torch.float32, seed + 3) * 3
    if masked:
        lse_a[:, :, 1::5] = NEG_INF
        lse_b[:, :, 2::5] = NEG_INF
        lse_a[:, :, 3::7] = NEG_INF
        lse_b[:, :, 3::7] = NEG_INF
        for o, lse in ((o_a, lse_a), (o_b, lse_b)):
            o.transpose(1, 2)[torch.isinf(lse)] = math.nan
    return o_a, lse_a, o_b, lse_b


def _merge_ref(o_a, lse_a, o_b, lse_b, dtype):
    """fp64 (o, lse) of flashmsa.h's formula, and the same formula in fp32 with
    o rounded to dtype as the same-precision yardstick."""
    out = []
    for ft in (torch.float64, torch.float32):
        la, lb = lse_a.to(ft), lse_b.to(ft)
        lse = torch.logaddexp(la, lb)
        row = []
        for o, l in ((o_a, la), (o_b, lb)):
            w = torch.where(torch.isinf(l), torch.zeros_like(l), torch.exp(l - lse))
            w = w.transpose(1, 2).unsqueeze(-1)
            row.append(torch.where(w == 0, torch.zeros_like(w), w * torch.nan_to_num(o.to(ft))))
        o = row[0] + row[1]
        out.append((o if ft == torch.float64 else o.to(dtype).double(), lse.double()))
    return out


CASES = [
    (torch.float32, torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16, torch.bfloat16),
    (torch.float16, torch.float16, torch.float16),
    (torch.float32, torch.float32, torch.bfloat16),  # fp32 partials into a bf16 result
    (torch.bfloat16, torch.float32, torch.float32),
]


@pytest.mark.parametrize("dtypes", CASES, ids=lambda c: "-".join(str(t)[6:] for t in c))
def test_merge_against_formula(dtypes):
    dtype_a, dtype_b, dtype_o = dtypes
    o_a, lse_a, o_b, lse_b = _partials(2, 35, 3, 24, dtype_a, dtype_b, 1)
    (ref_o, ref_lse), (nv_o, nv_lse) = _merge_ref(o_a, lse_a, o_b, lse_b, dtype_o)
    dev = [x.to(DEVICE) for x in (o_a, lse_a, o_b, lse_b)]
    o = torch.full(o_a.shape, math.nan, dtype=dtype_o, device=DEVICE)
    lse = torch.full(lse_a.shape, math.nan, device=DEVICE)
    with backend_feature("merge"):
        got_o, got_lse = flashmsa.merge_states(*dev, out=(o, lse))
    assert got_o is o and got_lse is lse
    a = ref_lse[torch.isfinite(ref_lse)].abs().max().item()
    rule.check("o", o.cpu(), ref_o, nv_o, dtype=dtype_o, factor=rule.FACTOR_FWD,
               softmax_units=rule.SOFTMAX_UNITS_FWD, a=a)
    rule.check("lse", lse.cpu(), ref_lse, nv_lse, dtype=torch.float32, factor=rule.FACTOR_FWD,
               softmax_units=rule.SOFTMAX_UNITS_FWD, a=a, is_lse=True)
    # rows with one side -inf are the other side exactly; both -inf give 0, -inf
    both = torch.isinf(lse_a) & torch.isinf(lse_b)           # [b, h, s]
    only_b = torch.isinf(lse_a) & ~torch.isinf(lse_b)
    rows = o.cpu().transpose(1, 2)                             # [b, h, s, dv]
    assert both.any() and only_b.any()
    assert torch.equal(rows[both].float(), torch.zeros(int(both.sum()), 24))
    assert torch.isinf(lse.cpu()[both]).all()
    assert torch.equal(rows[only_b], o_b.transpose(1, 2)[only_b].to(dtype_o))
    assert torch.equal(lse.cpu()[only_b], lse_b[only_b])
    # the functional form gives the same bits when the dtypes agree
    if dtype_a == dtype_b == dtype_o:
        o2, lse2 = flashmsa.merge_states(*dev)
        assert o2.dtype == dtype_o and torch.equal(o2, o) and torch.equal(lse2, lse)


def test_merge_in_place():
    """out=(o_a, lse_a) and out=(o_b, lse_b): the same bits as a fresh output."""
    o_a, lse_a, o_b, lse_b = (x.to(DEVICE) for x in
                              _partials(1, 40, 4, 32, torch.float32, torch.float32, 7))
    with backend_feature("merge"):
        ref_o, ref_lse = flashmsa.merge_states(o_a, lse_a, o_b, lse_b)
    a_o, a_lse, b_o, b_lse = (x.clone() for x in (o_a, lse_a, o_b, lse_b))
    flashmsa.merge_states(a_o, a_lse, o_b, lse_b, out=(a_o, a_lse))
    assert torch.equal(a_o, ref_o) and torch.equal(a_lse, ref_lse)
    flashmsa.merge_states(o_a, lse_a, b_o, b_lse, out=(b_o, b_lse))
    assert torch.equal(b_o, ref_o) and torch.equal(b_lse, ref_lse)


def test_merge_varlen_3d_layout():
    """attention()'s 3-D varlen results ([total, H, Dv], [H, total]) merge as they are."""
    o_a, lse_a, o_b, lse_b = _partials(1, 30, 2, 16, torch.float32, torch.float32, 3, False)
    with backend_feature("merge"):
        o3, lse3 = flashmsa.merge_states(o_a[0].to(DEVICE), lse_a[0].to(DEVICE),
                                         o_b[0].to(DEVICE), lse_b[0].to(DEVICE))
    o4, lse4 = flashmsa.merge_states(*(x.to(DEVICE) for x in (o_a, lse_a, o_b, lse_b)))
    assert o3.shape == (30, 2, 16) and lse3.shape == (2, 30)
    assert torch.equal(o3, o4[0]) and torch.equal(lse3, lse4[0])


def test_merge_backward():
    """merge_states' gradients in all four inputs beside torch's autograd of
    the formula: fp64 as the reference, fp32 as the yardstick."""
    o_a, lse_a, o_b, lse_b = _partials(2, 20, 2, 16, torch.float32, torch.float32, 11)
    # keep the -inf rows, but no NaN: autograd of the formula would spread it
    o_a, o_b = torch.nan_to_num(o_a), torch.nan_to_num(o_b)
    do = make(o_a.shape, torch.float32, 15)
    dl = make(lse_a.shape, torch.float32, 16)

    def formula(oa, la, ob, lb):
        lse = torch.logaddexp(la, lb)
        wa = torch.exp(la - lse).nan_to_num(0.0).transpose(1, 2).unsqueeze(-1)
        wb = torch.exp(lb - lse).nan_to_num(0.0).transpose(1, 2).unsqueeze(-1)
        return wa * oa + wb * ob, lse

    def grads(fn, ft, device):
        xs = [x.detach().to(ft).to(device).requires_grad_() for x in (o_a, lse_a, o_b, lse_b)]
        o, lse = fn(*xs)
        fin = torch.isfinite(lse)
        loss = (o * do.to(ft).to(device)).sum() + (lse[fin] * dl.to(ft).to(device)[fin]).sum()
        loss.backward()
        return [x.grad.cpu().double() for x in xs]

    with backend_feature("merge"):
        got = grads(flashmsa.merge_states, torch.float32, DEVICE)
    ref = grads(formula, torch.float64, "cpu")
    nv = grads(formula, torch.float32, "cpu")
    a = lse_a[torch.isfinite(lse_a)].abs().max().item() + 1
    for name, g, r, n in zip(("do_a", "dlse_a", "do_b", "dlse_b"), got, ref, nv):
        r = r.nan_to_num(0.0)
        n = n.nan_to_num(0.0)
        rule.check(name, g, r, n, dtype=torch.float32, factor=rule.FACTOR_BWD,
                   softmax_units=rule.SOFTMAX_UNITS_BWD, a=a)


def test_ring_attention_matches_full_attention():
    """Keys in two halves, each attended separately (return_lse), merged: the
    result and the gradients through dlse and merge_states match attention
    over all keys, within the rule of full attention."""
    b, sq, sk, h, d = 2, 24, 40, 2, 32
    q, k, v = (make((b, n, h, d), torch.float32, 81 + i).to(DEVICE).requires_grad_()
               for i, n in enumerate((sq, sk, sk)))
    dout = make((b, sq, h, d), torch.float32, 84)
    cut = 17
    with backend_feature("dlse", "merge"):
        o1, l1 = flashmsa.attention(q, k[:, :cut], v[:, :cut], return_lse=True)
        o2, l2 = flashmsa.attention(q, k[:, cut:], v[:, cut:], return_lse=True)
        o, lse = flashmsa.merge_states(o1, l1, o2, l2)
        o.backward(dout.to(DEVICE))
    seqs = [{"q": q[i].detach().cpu(), "k": k[i].detach().cpu(), "v": v[i].detach().cpu()}
            for i in range(b)]
    douts = [dout[i] for i in range(b)]
    refs = rule.reference(seqs, douts, scale=d ** -0.5)
    nvs = rule.naive(seqs, douts, scale=d ** -0.5)
    a = rule.lse_max(refs)
    got = {"o": o.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    for key in ("o", "lse", "dq", "dk", "dv"):
        fwd = key in ("o", "lse")
        rule.check(key, got[key].cpu(), torch.stack([r[key] for r in refs]),
                   torch.stack([r[key] for r in nvs]), dtype=torch.float32,
                   factor=rule.FACTOR_FWD if fwd else rule.FACTOR_BWD,
                   softmax_units=rule.SOFTMAX_UNITS_FWD if fwd else rule.SOFTMAX_UNITS_BWD,
                   a=a, is_lse=key == "lse")


def test_merge_bad_inputs():
    o_a, lse_a, o_b, lse_b = (x.to(DEVICE) for x in
                              _partials(1, 8, 2, 16, torch.float32, torch.float32, 5, False))
    with pytest.raises(flashmsa.InvalidArgumentError, match="o_b") as e:
        flashmsa.merge_states(o_a, lse_a, o_b[:, :7], lse_b)
    assert e.value.status == flashmsa.Status.ERR_INVALID_ARGUMENT
    with pytest.raises(flashmsa.InvalidArgumentError, match="lse_b"):
        flashmsa.merge_states(o_a, lse_a, o_b, lse_b[:, :1])
    with pytest.raises(flashmsa.InvalidArgumentError, match="lse"):
        flashmsa.merge_states(o_a, lse_a, o_b, lse_b, out=(torch.empty_like(o_a),
                                                            torch.empty(1, 1, 8, device=DEVICE)))
    with pytest.raises(TypeError, match="lse_a"):
        flashmsa.merge_states(o_a, lse_a.double(), o_b, lse_b)
    with pytest.raises(TypeError, match="o_b"):
        flashmsa.merge_states(o_a, lse_a, o_b.numpy() if DEVICE == "cpu" else None, lse_b)
    with pytest.raises(RuntimeError, match="not differentiable"):
        flashmsa.merge_states(o_a.requires_grad_(), lse_a, o_b, lse_b,
                              out=(torch.empty_like(o_b), torch.empty_like(lse_b)))
    with pytest.raises(flashmsa.NotSupportedError, match="head_dim_v"):
        flashmsa.merge_states(o_a[..., :12], lse_a, o_b[..., :12], lse_b)
