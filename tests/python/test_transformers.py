"""A randomly initialised tiny Llama-style model (built from a config, nothing
downloaded) on attn_implementation="flashmsa" beside "sdpa": logits and
parameter gradients against the same model in fp64, under the project's rule
with torch's SDPA run as the same-precision yardstick (factor 2 for logits, 3
for gradients; the floor of check_rule.h for fp32 storage, with A the largest
|LSE| flashmsa met in the model's attention calls)."""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

import flashmsa  # noqa: E402
import flashmsa.integrations.transformers  # noqa: E402,F401  registers "flashmsa"
import rule  # noqa: E402


def tiny_config():
    return transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        attention_dropout=0.0)


def models():
    torch.manual_seed(0)
    cfg = tiny_config()
    fm = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg),
                                                       attn_implementation="flashmsa")
    sd = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg),
                                                       attn_implementation="sdpa")
    ref = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg),
                                                        attn_implementation="sdpa")
    sd.load_state_dict(fm.state_dict())
    ref.load_state_dict(fm.state_dict())
    ref.double()
    assert fm.config._attn_implementation == "flashmsa"
    assert sd.config._attn_implementation == "sdpa"
    return fm, sd, ref


@pytest.fixture
def lse_probe(monkeypatch):
    """Records the largest finite |LSE| of flashmsa's calls (A of the rule) and
    counts them, so a model that silently fell back to another attention fails."""
    seen = {"a": 0.0, "calls": 0}
    real = flashmsa.attention

    def probe(*args, **kwargs):
        o, lse = real(*args, **dict(kwargs, return_lse=True))
        finite = lse[torch.isfinite(lse)]
        if finite.numel():
            seen["a"] = max(seen["a"], finite.abs().max().item())
        seen["calls"] += 1
        return o

    monkeypatch.setattr(flashmsa, "attention", probe)
    return seen


def check(name, got, yard, ref, a, factor, units):
    rule.check(name, got.double(), ref.double(), yard.double(), dtype=torch.float32,
               factor=factor, softmax_units=units, a=a)


def test_logits_and_gradients_match_sdpa(lse_probe):
    fm, sd, ref = models()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 96, (2, 40), generator=g)
    labels = torch.randint(0, 96, (2, 40), generator=g)
    outs = {}
    for name, m in (("flashmsa", fm), ("sdpa", sd), ("ref", ref)):
        out = m(ids, labels=labels)
        out.loss.backward()
        outs[name] = (out.logits.detach(), {n: p.grad for n, p in m.named_parameters()})
    assert lse_probe["calls"] == 2  # two layers, forward
    a = lse_probe["a"]
    check("logits", outs["flashmsa"][0], outs["sdpa"][0], outs["ref"][0], a, 2.0, 3.0)
    for n in outs["ref"][1]:
        check(f"grad {n}", outs["flashmsa"][1][n], outs["sdpa"][1][n], outs["ref"][1][n], a,
              3.0, 6.0)


def test_padded_batch(lse_probe):
    """Left padding: the batch runs as varlen over the real tokens."""
    fm, sd, ref = models()
    ids = torch.randint(0, 96, (3, 24), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, 24, dtype=torch.long)
    mask[0, :7] = 0
    mask[2, :1] = 0
    logits = {name: m(ids, attention_mask=mask).logits.detach()
              for name, m in (("flashmsa", fm), ("sdpa", sd), ("ref", ref))}
    assert lse_probe["calls"] == 2
    keep = mask.bool()
    check("padded logits", logits["flashmsa"][keep], logits["sdpa"][keep], logits["ref"][keep],
          lse_probe["a"], 2.0, 3.0)


def test_decoding_with_a_cache(lse_probe):
    """A prefill then one token at a time through the KV cache: each step is a
    query of length 1 against every cached key (the bottom-right causal mask)."""
    fm, sd, ref = models()
    ids = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(3))
    steps = {}
    for name, m in (("flashmsa", fm), ("sdpa", sd), ("ref", ref)):
        with torch.no_grad():
            out = m(ids[:, :16], use_cache=True)
            cache, last = out.past_key_values, [out.logits[:, -1]]
            for t in range(16, 20):
                out = m(ids[:, t:t + 1], past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                last.append(out.logits[:, -1])
        steps[name] = torch.stack(last)
    assert lse_probe["calls"] == 2 * 5
    check("decode logits", steps["flashmsa"], steps["sdpa"], steps["ref"], lse_probe["a"], 2.0,
          3.0)


def test_dropout_and_attention_outputs_refused():
    cfg = tiny_config()
    cfg.attention_dropout = 0.1
    m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="flashmsa")
    m.train()
    with pytest.raises(NotImplementedError, match="dropout"):
        m(torch.zeros(1, 4, dtype=torch.long))


def test_flash_style_functions_behind_the_name():
    """transformers takes a name with "flash" in it for a FlashAttention build
    and asks for its functions; it gets flashmsa's, which match flashmsa.attention."""
    fa = pytest.importorskip("transformers.modeling_flash_attention_utils")
    if not hasattr(fa, "lazy_import_flash_attention"):
        pytest.skip("this transformers imports no FlashAttention functions by name")
    (func, varlen, *_), _ = fa.lazy_import_flash_attention("flashmsa")
    q, k, v = (torch.randn(2, 12, 2, 16, generator=torch.Generator().manual_seed(s))
               for s in range(3))
    want, want_lse = flashmsa.attention(q, k, v, causal=True, window=(4, 0), return_lse=True)
    assert torch.equal(func(q, k, v, causal=True, window_size=(4, 0)), want)
    out, lse, probs = func(q, k, v, causal=True, window_size=(4, 0), return_attn_probs=True)
    assert torch.equal(out, want) and torch.equal(lse, want_lse) and probs is None
    cu = torch.tensor([0, 12, 24], dtype=torch.int32)
    packed = [t.reshape(24, 2, 16) for t in (q, k, v)]
    assert torch.equal(varlen(*packed, cu, cu, 12, 12, causal=True, window_size=(4, 0)),
                       want.reshape(24, 2, 16))
    with pytest.raises(NotImplementedError, match="dropout"):
        func(q, k, v, dropout_p=0.1)
