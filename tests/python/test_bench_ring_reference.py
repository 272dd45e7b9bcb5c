"""The fp64 references (bench/cuda_rows_check.py, also the CUDA sweeps' check) and
the shard maps that bench/ring_multi_gpu.py checks a multi-GPU ring with (issue 17)
are right: against autograd of plain attention in fp64, and against the layouts of
flashmsa_dist.h.  They run on the CPU, so the multi-GPU check is trusted before a
machine with several GPUs ever runs it."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import cuda_rows_check as refs  # noqa: E402
import ring_multi_gpu as ring  # noqa: E402


def attention_grads(q, k, v, do, causal):
    """O, dQ, dK, dV of batch 0 by autograd, [S, H, D] each."""
    q, k, v = (x[0].double().transpose(0, 1).requires_grad_(True) for x in (q, k, v))
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v
    o.backward(do[0].double().transpose(0, 1))
    return [x.transpose(0, 1) for x in (o.detach(), q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("causal", [False, True])
def test_references_match_autograd(causal):
    g = torch.Generator().manual_seed(7)
    q, k, v, do = (torch.randn(1, 96, 2, 16, generator=g) for _ in range(4))
    o, dq, dk, dv = attention_grads(q, k, v, do, causal)
    idx = torch.tensor([0, 5, 47, 95])
    ro, rdq = refs.reference_rows(q, k, v, do, idx, causal)
    rdk, rdv = refs.reference_keys(q, k, v, do, idx, causal, block=40)  # blocks cut rows
    for got, want in ((ro, o), (rdq, dq), (rdk, dk), (rdv, dv)):
        assert (got - want[idx]).abs().max().item() < 1e-12


def test_naive_keys_are_rounded_not_exact():
    g = torch.Generator().manual_seed(8)
    q, k, v, do = (torch.randn(1, 64, 1, 16, generator=g) for _ in range(4))
    idx = torch.tensor([3, 60])
    exact = refs.reference_keys(q, k, v, do, idx, True)
    naive = refs.reference_keys(q, k, v, do, idx, True, torch.bfloat16)
    for e, n in zip(exact, naive):
        err = (n.double() - e).abs().max().item()
        assert 0 < err < 0.05 * e.abs().max().item()


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("P", [1, 2, 3, 4, 8])
def test_positions_are_the_shards_rows(layout, P):
    c = 6
    seq = torch.arange(P * c).view(1, P * c, 1, 1)
    seen = []
    for r in range(P):
        pos = ring.positions(c, r, P, layout, "cpu")
        assert torch.equal(ring.shard(seq, 1, r, P, layout).view(-1), pos)
        seen.append(pos)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(P * c))
