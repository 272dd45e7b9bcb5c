"""torch.compile(fullgraph=True) of modules that call flashmsa.attention: one
graph (a break is an error under fullgraph), the custom op inside it, the same
bits as eager forward and backward."""
import torch
import torch._dynamo.testing

import flashmsa
from conftest import make


class Attention(torch.nn.Module):
    """Takes [b, heads, s, d] (the transformers layout), as a model would."""

    def __init__(self, window=(-1, -1)):
        super().__init__()
        self.window = window

    def forward(self, q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        o = flashmsa.attention(q, k, v, causal=True, window=self.window)
        o2 = flashmsa.attention(q, k, v, softcap=3.0)
        return (0.5 * o + o2).transpose(1, 2)


def _run(module, fn, seed):
    q = make((2, 4, 40, 32), torch.float32, seed, True)
    k = make((2, 2, 40, 32), torch.float32, seed + 1, True)
    v = make((2, 2, 40, 32), torch.float32, seed + 2, True)
    out = fn(q, k, v)
    out.backward(make(out.shape, torch.float32, seed + 3))
    return [out.detach(), q.grad, k.grad, v.grad]


def test_compile_fullgraph_inductor():
    torch._dynamo.reset()
    module = Attention(window=(16, -1))
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(module, fullgraph=True, backend=counter, dynamic=False)
    eager = _run(module, module, 0)
    got = _run(module, compiled, 0)
    assert counter.frame_count == 1
    for a, b in zip(got, eager):
        assert torch.equal(a, b)
    # a second call with new values reuses the graph
    _run(module, compiled, 10)
    assert counter.frame_count == 1


def test_compiled_graph_holds_the_custom_ops():
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm

    module = Attention()
    compiled = torch.compile(module, fullgraph=True, backend=backend)
    _run(module, compiled, 0)
    assert len(graphs) == 1 and graphs[0].count("flashmsa.fwd") == 2
