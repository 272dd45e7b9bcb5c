"""torch.compile(fullgraph=True) of modules that call flashmsa.attention: one
graph (a break is an error under fullgraph), the custom op inside it, the same
bits as eager forward and backward."""
import torch
import torch._dynamo.testing

import flashmsa
from conftest import backend_feature, make


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


class RingAttention(torch.nn.Module):
    """Sinks, the lse returned and used, merge_states: the v0.2 surface in one
    graph.  Two key halves attended separately and merged, as ring attention
    does, so the backward passes a dlse."""

    def __init__(self, heads):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.linspace(-1.0, 1.0, heads))

    def forward(self, q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        cut = k.shape[1] // 2
        o1, l1 = flashmsa.attention(q, k[:, :cut], v[:, :cut], sinks=self.sinks,
                                    return_lse=True)
        o2, l2 = flashmsa.attention(q, k[:, cut:], v[:, cut:], return_lse=True)
        o, lse = flashmsa.merge_states(o1, l1, o2, l2)
        return o.transpose(1, 2) * torch.sigmoid(lse).unsqueeze(-1)   # [b, h, s, d] * [b, h, s, 1]


def test_compile_sinks_lse_and_merge_in_one_graph():
    """Dynamo's graph holds both attention calls and the merge; under
    AOTAutograd (aot_eager), which traces the backward too, the values and
    the gradients (the sinks' included) are eager's bits."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm

    module = RingAttention(4)
    with backend_feature("sinks", "dlse"):
        eager = _run(module, module, 0) + [module.sinks.grad]
        module.sinks.grad = None
        _run(module, torch.compile(module, fullgraph=True, backend=backend), 0)
        module.sinks.grad = None
        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        got = _run(module, torch.compile(module, fullgraph=True, backend=counter), 0) + \
            [module.sinks.grad]
    assert len(graphs) == 1 and counter.frame_count == 1
    assert graphs[0].count("flashmsa.fwd") == 2 and graphs[0].count("flashmsa.merge") == 1
    for a, b in zip(got, eager):
        assert torch.equal(a, b)


def test_dispatch_modes_see_the_custom_ops():
    """An eager call on plain tensors skips torch's dispatcher (flashmsa._torch._eager)
    only where nothing would watch it: under a dispatch mode (a profiler, a flop
    counter) the forward and the backward still reach flashmsa::fwd / bwd."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    q, k, v = (make((1, 8, 2, 16), torch.float32, s, requires_grad=True) for s in (1, 2, 3))
    with Seen() as seen:
        with torch.no_grad():
            flashmsa.attention(q, k, v, causal=True)
    assert "flashmsa.fwd" in seen.ops, seen.ops
    with Seen() as seen:
        flashmsa.attention(q, k, v, causal=True).sum().backward()
    assert {"flashmsa.fwd", "flashmsa.bwd"} <= seen.ops, seen.ops
