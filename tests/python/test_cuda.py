"""flashmsa.attention on CUDA tensors (skipped without a CUDA device and a
library with the CUDA backend): forward and backward through autograd against
the fp64 reference under the rule, the stream being torch's current one, and
forward + backward captured into a CUDA graph through the Python API, replayed
bit-identical to eager calls.  test_features.py and test_merge.py run on CUDA
with FLASHMSA_TEST_DEVICE=cuda."""
import pytest
import torch

import flashmsa
from conftest import make
from test_attention import CASES, DT_ID, run_batched


def _has_cuda():
    if not torch.cuda.is_available():
        return False
    try:
        return any(d.backend == "cuda" for d in flashmsa.devices())
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _has_cuda(), reason="no CUDA device, or a library without "
                                "the CUDA backend")

# The CUDA backend takes f32 (3xTF32, head dims to 256), bf16 and f16 in both passes; the
# cases below run all three.
CUDA_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
CUDA_CASES = ["plain", "causal_sq_lt_sk", "window_causal", "softcap", "alibi_batch", "gqa",
              "d128", "everything"]


def test_fp32_backward_large_dim_refused():
    """fp32 on CUDA above head dim 256: refused by name (the forward's refusal comes
    first; the backward's pick refuses the same dims), never computed wrongly."""
    q = make((1, 16, 2, 264), torch.float32, 1).cuda().requires_grad_()
    with pytest.raises(flashmsa.NotSupportedError, match="in f32|up to 256"):
        flashmsa.attention(q, q, q).sum().backward()


def test_side_stream():
    """On a side stream: the pass is queued on torch's current stream (the
    result is right once that stream is waited for)."""
    q, k, v = (make((2, 256, 4, 64), torch.bfloat16, s).cuda() for s in range(3))
    ref = flashmsa.attention(q, k, v, causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        o = flashmsa.attention(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(o, ref)


def test_cuda_graph_forward_backward():
    """forward + loss + backward through flashmsa.attention captured once,
    replayed on new input values: bit-identical to eager runs on those values."""
    b, s, hq, hkv, d = 2, 192, 8, 2, 64
    static = [make(shape, torch.bfloat16, i).cuda().requires_grad_()
              for i, shape in enumerate(((b, s, hq, d), (b, s, hkv, d), (b, s, hkv, d)))]
    dout = make((b, s, hq, d), torch.bfloat16, 9).cuda()

    def step():
        o = flashmsa.attention(*static, causal=True, window=(100, -1))
        o.backward(dout)
        return o

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (contexts, allocator pools) off the capture
        for _ in range(2):
            for t in static:
                t.grad = None
            step()
    torch.cuda.current_stream().wait_stream(side)
    for t in static:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_static = step()
    grads_static = [t.grad for t in static]
    for seed in (20, 30):
        new = [make(t.shape, torch.bfloat16, seed + i).cuda() for i, t in enumerate(static)]
        with torch.no_grad():
            for t, n in zip(static, new):
                t.copy_(n)
        graph.replay()
        torch.cuda.synchronize()
        eager = [n.clone().requires_grad_() for n in new]
        o = flashmsa.attention(*eager, causal=True, window=(100, -1))
        o.backward(dout)
        assert torch.equal(o_static, o)
        for g_static, t in zip(grads_static, eager):
            assert torch.equal(g_static, t.grad)


def test_cuda_graph_decode_with_merge():
    """A decode step (one query row, split keys, merged) captured and replayed."""
    q = make((4, 1, 8, 128), torch.bfloat16, 1).cuda()
    k = make((4, 2048, 2, 128), torch.bfloat16, 2).cuda()
    v = make((4, 2048, 2, 128), torch.bfloat16, 3).cuda()

    def step():
        o1, l1 = flashmsa.attention(q, k[:, :1024], v[:, :1024], return_lse=True)
        o2, l2 = flashmsa.attention(q, k[:, 1024:], v[:, 1024:], return_lse=True)
        return flashmsa.merge_states(o1, l1, o2, l2)

    try:
        ref = step()
    except flashmsa.NotSupportedError as e:
        if "fmsa_merge_states is not supported by this backend" not in e.message:
            raise
        pytest.skip(f"the library says: {e.message}")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


@pytest.mark.parametrize("dtype", CUDA_DTYPES, ids=lambda t: DT_ID[t])
@pytest.mark.parametrize("case", CUDA_CASES)
def test_forward_backward_cuda(case, dtype):
    run_batched(dtype, device="cuda", **CASES[case])
