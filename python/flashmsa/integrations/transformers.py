"""flashmsa as a Hugging Face transformers attention implementation.

    import flashmsa.integrations.transformers  # registers "flashmsa" and "fmsa"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="flashmsa")

transformers takes any name containing "flash" for a FlashAttention build, and
a model that lists the FlashAttention builds it can run (gpt-oss, whose sinks
plain FlashAttention lacks) replaces such a name with one of its own list; the
same implementation is therefore registered as "fmsa" too, the name for those
models.

Importing this module registers the attention function under the name
"flashmsa" in transformers' AttentionInterface, and beside it a mask function
in AttentionMaskInterface that hands over the 2-D padding mask (or None when
nothing is padded) instead of a dense 4-D mask: flashmsa applies causal and
sliding-window masks itself (bottom-right aligned, which is also right for
decoding with a cache), and a padded batch runs as a varlen batch
(cu_seqlens) over the tokens that are not padding.
"""
import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

import flashmsa

NAME = "flashmsa"
ALIAS = "fmsa"  # without "flash": for models that substitute their own FlashAttention builds


def padding_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                 attention_mask=None, **kwargs):
    """The mask transformers passes to flashmsa_attention_forward: the 2-D
    boolean padding mask of the last kv_length keys, or None when no key is
    padded (the causal or sliding-window pattern is flashmsa's own)."""
    if attention_mask is None:
        return None
    attention_mask = attention_mask[:, -kv_length:]
    if attention_mask.shape[1] == kv_length and bool(attention_mask.all()):
        return None
    return attention_mask


def _unpad(x, mask):
    """Tokens of x [b, s, h, d] where mask [b, s] is true, as [total, h, d],
    with their flat indices and int32 cu_seqlens [b + 1]."""
    b, s = mask.shape
    index = mask.reshape(-1).nonzero().squeeze(1)
    lengths = mask.sum(dim=1, dtype=torch.int32)
    cu = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
    return x.reshape(b * s, *x.shape[2:]).index_select(0, index), index, cu


def flashmsa_attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                               scaling=None, is_causal=None, sliding_window=None, softcap=None,
                               s_aux=None, **kwargs):
    """transformers' attention-function signature: query [b, heads_q, s_q, d],
    key/value [b, heads_kv, s_k, d]; returns ([b, s_q, heads_q, d], None)."""
    if dropout and dropout > 0.0:
        raise NotImplementedError("flashmsa: attention dropout is not implemented; set the "
                                  "config's attention_dropout to 0 or call model.eval()")
    if kwargs.get("output_attentions", False):
        raise NotImplementedError("flashmsa never materialises the attention probabilities; "
                                  "output_attentions needs attn_implementation='eager'")
    if attention_mask is not None and attention_mask.dim() != 2:
        raise ValueError("flashmsa: expected a 2-D padding mask (the mask function registered "
                         f"with the attention); got a mask of shape {tuple(attention_mask.shape)}")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = (-1, -1)
    if sliding_window is not None:
        window = (sliding_window - 1, 0 if causal else sliding_window - 1)
    # s_aux: the sink logits of models such as gpt-oss, a parameter in the
    # model's dtype; flashmsa takes them in fp32 (the gradient flows back through .float())
    sinks = None if s_aux is None else s_aux.float()
    options = dict(causal=bool(causal), window=window, softcap=softcap or 0.0, scale=scaling,
                   sinks=sinks)
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [b, s, h, d] views
    if attention_mask is None:
        return flashmsa.attention(q, k, v, **options), None
    b, s_q = q.shape[0], q.shape[1]
    mask_k = attention_mask.to(torch.bool)
    mask_q = mask_k[:, -s_q:]
    q_u, index_q, cu_q = _unpad(q, mask_q)
    k_u, _, cu_k = _unpad(k, mask_k)
    v_u, _, _ = _unpad(v, mask_k)
    o_u = flashmsa.attention(q_u, k_u, v_u, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **options)
    o = o_u.new_zeros((b * s_q,) + tuple(o_u.shape[1:])).index_copy(0, index_q, o_u)
    return o.view(b, s_q, *o_u.shape[1:]), None


def _flash_style(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                 deterministic, return_attn_probs, **varlen):
    """flashmsa.attention called with FlashAttention 2's argument names and
    return convention ((out, lse, None) with return_attn_probs)."""
    if dropout_p:
        raise NotImplementedError("flashmsa: attention dropout is not implemented")
    out = flashmsa.attention(q, k, v, causal=causal, window=tuple(window_size),
                             softcap=softcap or 0.0, alibi_slopes=alibi_slopes,
                             scale=softmax_scale, return_lse=return_attn_probs,
                             deterministic=deterministic, **varlen)
    return out + (None,) if return_attn_probs else out


def _flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                     return_attn_probs=False):
    """FlashAttention 2's flash_attn_func calling convention, on flashmsa."""
    return _flash_style(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                        alibi_slopes, deterministic, return_attn_probs)


def _flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                            softcap=0.0, alibi_slopes=None, deterministic=False,
                            return_attn_probs=False):
    """FlashAttention 2's flash_attn_varlen_func calling convention, on flashmsa."""
    return _flash_style(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                        alibi_slopes, deterministic, return_attn_probs,
                        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


def _answer_flash_import(name):
    """transformers takes every attn_implementation whose name contains "flash"
    for a FlashAttention build and imports one when a model is created
    (modeling_flash_attention_utils._lazy_imports); for name, it is given
    flashmsa's FlashAttention-style functions instead of a failed import.
    Versions without that function need nothing."""
    try:
        from transformers import modeling_flash_attention_utils as fa
    except ImportError:
        return
    original = getattr(fa, "_lazy_imports", None)
    if original is None:
        return
    names = getattr(original, "flashmsa_names", None)
    if names is not None:
        names.add(name)
        return

    def lazy_imports(implementation, *args, **kwargs):
        if implementation in lazy_imports.flashmsa_names:
            return (_flash_attn_func, _flash_attn_varlen_func, None,
                    getattr(fa, "_pad_input", None), getattr(fa, "_unpad_input", None))
        return original(implementation, *args, **kwargs)

    lazy_imports.flashmsa_names = {name}
    fa._lazy_imports = lazy_imports


def register(name=NAME):
    """Registers flashmsa under name (done once on import, as "flashmsa")."""
    AttentionInterface.register(name, flashmsa_attention_forward)
    AttentionMaskInterface.register(name, padding_mask)
    if "flash" in name:
        _answer_flash_import(name)


register()
register(ALIAS)
