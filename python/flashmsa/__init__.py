"""flashmsa: portable exact flash attention (forward and backward).

    import torch, flashmsa
    q, k, v = (torch.randn(2, 1024, 8, 64, requires_grad=True) for _ in range(3))
    o = flashmsa.attention(q, k, v, causal=True)   # [batch, seqlen, heads, head_dim]
    o.sum().backward()

The C library is found, in order, at FLASHMSA_LIBRARY, inside this package
(`pip install .` builds it there), under the prefixes of FLASHMSA_ROOT and
CMAKE_PREFIX_PATH, and on the system's library path.
"""
import dataclasses
import os

from . import _capi
from ._capi import (Backend, BackendUnavailableError, DeviceKind, FlashmsaError,
                    InvalidArgumentError, NotSupportedError, Status)

try:
    import torch as _torch_module
except ImportError:  # the numpy forward still works
    _torch_module = None

if _torch_module is not None:
    from . import _torch

__all__ = ["attention", "merge_states", "devices", "Device", "FlashmsaError",
           "InvalidArgumentError", "NotSupportedError", "BackendUnavailableError", "Status",
           "Backend", "DeviceKind", "library_path", "cmake_prefix", "__version__"]


def _package_version():
    try:
        from importlib.metadata import version
        return version("flashmsa")
    except Exception:  # run from a source tree with FLASHMSA_LIBRARY
        return "0+unknown"


__version__ = _package_version()


def attention(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
              sinks=None, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
              max_seqlen_k=None, block_table=None, seqused_k=None, return_lse=False,
              deterministic=False):
    """Exact attention softmax(scale * q k^T + masks) v, without the score matrix.

    q: [batch, seqlen_q, heads_q, head_dim]; k: [batch, seqlen_k, heads_kv,
    head_dim]; v: [batch, seqlen_k, heads_kv, head_dim_v] (head_dim_v = head_dim
    usually; the output is [batch, seqlen_q, heads_q, head_dim_v]); heads_q a
    multiple of heads_kv (GQA/MQA); float32, float16 or bfloat16, all one dtype;
    any strides (a head_dim stride other than 1 is copied).  Arithmetic is fp32.
    flashmsa.h defines each option exactly:

    causal        bottom-right aligned causal mask (as FlashAttention >= 2.1)
    window        (left, right) sliding window, -1 = unlimited
    softcap       > 0: scores become softcap * tanh(score / softcap)
    alibi_slopes  float32 [heads_q] or [batch, heads_q]
    sinks         float32 [heads_q]: per-head sink logits t_h, one more softmax
                  term per row that has no value (lse = log(exp(t_h) + sum_j
                  exp(s_ij))); differentiable
    scale         default 1/sqrt(head_dim)
    cu_seqlens_q/k  varlen: int32 [batch + 1]; q/k/v are [total, heads, head_dim]
                  (or [1, total, heads, head_dim]); max_seqlen_q/k optional bounds
    block_table   paged KV (forward only): k, v are [pages, page_size, heads_kv,
                  head_dim], block_table int32 [batch, max_pages]; seqused_k
                  int32 [batch] the keys used per sequence
    return_lse    also return the log-sum-exp, float32 [batch, heads_q, seqlen_q]
                  ([heads_q, total] for 3-D varlen); differentiable: a loss
                  that uses it passes its gradient to the backward (dlse)
    deterministic bit-identical backward run to run

    torch tensors (CPU; CUDA with the CUDA backend) run through the custom op
    flashmsa::fwd, differentiable, and compile with torch.compile.  numpy arrays
    (and other DLPack producers) run the forward and return numpy arrays (torch
    tensors for non-numpy producers when torch is installed).  A failed call
    raises FlashmsaError (InvalidArgumentError, a ValueError, for bad input)
    with the library's status and message.
    """
    options = dict(causal=causal, window=window, softcap=softcap, alibi_slopes=alibi_slopes,
                   sinks=sinks, scale=scale, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                   max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                   block_table=block_table, seqused_k=seqused_k, return_lse=return_lse)
    if _torch_module is not None:
        if isinstance(q, _torch_module.Tensor):
            return _torch.attention(q, k, v, deterministic=deterministic, **options)
        return _foreign(q, k, v, options)
    from . import _array
    return _array.attention(q, k, v, **options)


def _foreign(q, k, v, options):
    """numpy or another DLPack producer with torch installed: the forward on
    torch views of the same memory (no copy), results in the caller's kind."""
    import numpy as np
    torch = _torch_module
    is_numpy = isinstance(q, np.ndarray)

    def view(x):
        if x is None or isinstance(x, torch.Tensor):
            return x
        if isinstance(x, np.ndarray):
            return torch.from_numpy(x)
        if hasattr(x, "__dlpack__"):
            return torch.from_dlpack(x)
        raise TypeError(f"flashmsa.attention: a {type(x).__name__} is neither a torch tensor, "
                        "a numpy array nor a DLPack producer")

    for key in ("alibi_slopes", "sinks", "cu_seqlens_q", "cu_seqlens_k", "block_table",
                "seqused_k"):
        options[key] = view(options[key])
    with torch.no_grad():
        out = _torch.attention(view(q), view(k), view(v), deterministic=False, **options)
    if is_numpy:
        out = tuple(t.numpy() for t in out) if isinstance(out, tuple) else out.numpy()
    return out


def merge_states(o_a, lse_a, o_b, lse_b, out=None):
    """Merges two partial attention results of the same queries over disjoint
    key sets into (o, lse), as the online softmax merges its states (ring
    attention, split-KV decode, a shared prefix):

        lse = log(exp(lse_a) + exp(lse_b))
        o   = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b

    A side with lse = -inf (no visible key) contributes nothing; both -inf give
    o = 0, lse = -inf.  o_a, o_b: [batch, seqlen, heads, head_dim_v] (float32,
    float16 or bfloat16, may differ), lse_a, lse_b: float32 [batch, heads,
    seqlen] -- attention()'s (o, lse) with return_lse=True; 3-D varlen results
    ([total, heads, head_dim_v], [heads, total]) work too.  Returns new tensors
    (o in the promoted dtype of o_a and o_b), differentiable in all four inputs;
    out=(o, lse) writes into given tensors instead (o may be o_a or o_b, lse may
    be lse_a or lse_b: in place), not differentiable.  torch tensors only.
    """
    if _torch_module is None:
        raise ImportError("flashmsa.merge_states takes torch tensors; torch is not installed")
    return _torch.merge_states(o_a, lse_a, o_b, lse_b, out=out)


@dataclasses.dataclass(frozen=True)
class Device:
    """One device of the library's enumeration (fmsa_device_info)."""
    backend: str
    kind: str
    index: int
    name: str
    arch: str
    sram_per_block: int
    sram_per_block_optin: int
    sram_per_multiprocessor: int
    multiprocessors: int
    warp_size: int
    registers_per_block: int
    global_memory: int


def devices():
    """Every device of every compiled-in backend, best first (AUTO's order)."""
    out = []
    for i in _capi.device_infos():
        out.append(Device(backend=_capi.backend_name(i.backend),
                          kind=DeviceKind(i.kind).name.lower(), index=i.index,
                          name=i.name.decode(errors="replace"),
                          arch=i.arch.decode(errors="replace"), sram_per_block=i.sram_per_block,
                          sram_per_block_optin=i.sram_per_block_optin,
                          sram_per_multiprocessor=i.sram_per_multiprocessor,
                          multiprocessors=i.multiprocessors, warp_size=i.warp_size,
                          registers_per_block=i.registers_per_block,
                          global_memory=i.global_memory))
    return out


def library_path():
    """Path of the loaded C library."""
    return _capi.library_path()


def cmake_prefix():
    """The install prefix inside this package (lib/, include/, lib/cmake/flashmsa),
    for C projects: -DCMAKE_PREFIX_PATH=$(python -c 'import flashmsa;
    print(flashmsa.cmake_prefix())'); None if this package carries no library."""
    here = os.path.dirname(os.path.abspath(__file__))
    return here if os.path.isdir(os.path.join(here, "include", "flashmsa")) else None
