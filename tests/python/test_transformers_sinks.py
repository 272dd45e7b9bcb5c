"""A randomly initialised tiny gpt-oss-style model (attention sinks, sliding
and full layers, GQA; built from a config, nothing downloaded) on
attn_implementation="fmsa" (gpt-oss replaces any name with "flash" in it by
a FlashAttention build of its own list) beside "eager": logits and every parameter's
gradient (the sinks' included) against the same model in fp64, under the
project's rule with eager in fp32 as the same-precision yardstick."""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "GptOssConfig"):
    pytest.skip("this transformers has no gpt-oss", allow_module_level=True)

import flashmsa.integrations.transformers  # noqa: E402,F401  registers "flashmsa", "fmsa"
from conftest import backend_feature  # noqa: E402
from test_transformers import check, lse_probe  # noqa: E402,F401  (a fixture)


def models():
    torch.manual_seed(0)
    cfg = transformers.GptOssConfig(
        vocab_size=96, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
        num_experts_per_tok=2, sliding_window=8, layer_types=["sliding_attention",
                                                              "full_attention"],
        max_position_embeddings=128, attention_dropout=0.0)
    built = {}
    # eager experts: the grouped matrix product of the default takes no fp64 (the reference)
    for name, impl in (("flashmsa", "fmsa"), ("eager", "eager"), ("ref", "eager")):
        built[name] = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg),
                                                                    attn_implementation=impl,
                                                                    experts_implementation="eager")
    with torch.no_grad():  # sinks away from zero, so that they matter
        for layer in built["flashmsa"].model.layers:
            layer.self_attn.sinks.copy_(torch.linspace(-1.0, 2.0, 4))
    for name in ("eager", "ref"):
        built[name].load_state_dict(built["flashmsa"].state_dict())
    built["ref"].double()
    assert built["flashmsa"].config._attn_implementation == "fmsa"
    return built


def test_gpt_oss_logits_and_gradients_match_eager(lse_probe):  # noqa: F811
    built = models()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 96, (2, 24), generator=g)
    labels = torch.randint(0, 96, (2, 24), generator=g)
    outs = {}
    with backend_feature("sinks"):
        for name, m in built.items():
            out = m(ids, labels=labels)
            out.loss.backward()
            outs[name] = (out.logits.detach(), {n: p.grad for n, p in m.named_parameters()})
    assert lse_probe["calls"] == 2
    a = lse_probe["a"]
    check("logits", outs["flashmsa"][0], outs["eager"][0], outs["ref"][0], a, 2.0, 3.0)
    sink_grads = 0
    for n, ref in outs["ref"][1].items():
        if ref is None:  # experts no token was routed to
            assert outs["flashmsa"][1][n] is None
            continue
        sink_grads += n.endswith("sinks")
        check(f"grad {n}", outs["flashmsa"][1][n], outs["eager"][1][n], ref, a, 3.0, 6.0)
    assert sink_grads == 2
