"""PyTorch layer: two custom ops (flashmsa::fwd, flashmsa::bwd) with fake
implementations and autograd, so torch.compile keeps a call in one graph.

The ops run on whatever device the tensors are on: a CPU tensor goes to the
CPU backend, a CUDA tensor to the CUDA backend (device i of CUDA's own
numbering, as torch's), with torch's current stream as the stream and every
output and workspace from torch's allocator.  Nothing here synchronises, so a
CUDA graph can capture a call.
"""
from typing import Optional

import torch
from torch import Tensor

from . import _capi
from ._capi import Backend, DType

_DTYPES = {torch.float32: DType.F32, torch.float16: DType.F16, torch.bfloat16: DType.BF16,
           torch.int32: DType.I32, torch.uint8: DType.U8}
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _desc_tensor(t, name):
    """The fmsa_tensor of a torch tensor (None stays None)."""
    if t is None:
        return None
    dt = _DTYPES.get(t.dtype)
    if dt is None:
        raise TypeError(f"flashmsa: {name} has dtype {t.dtype}, which flashmsa does not take")
    return _capi.tensor(t.data_ptr(), dt, tuple(t.shape), t.stride())


def _last_contiguous(t):
    """t itself when its head_dim stride is 1 (any other strides are passed as
    they are), else a contiguous copy."""
    if t is None or t.dim() == 0 or t.stride(-1) == 1 or t.shape[-1] <= 1:
        return t
    return t.contiguous()


def _context(device):
    if device.type == "cpu":
        return _capi.context(Backend.CPU, 0)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        backend = Backend.HIP if getattr(torch.version, "hip", None) else Backend.CUDA
        return _capi.context(backend, index)
    raise _capi.NotSupportedError(_capi.Status.ERR_NOT_SUPPORTED,
                                  f"tensors on {device} (flashmsa takes cpu and cuda tensors)",
                                  "flashmsa.attention")


def _stream(device):
    """torch's current stream on device, as the backend's native handle."""
    if device.type == "cuda":
        return torch.cuda.current_stream(device).cuda_stream
    return None


def _allocator(device):
    def alloc(nbytes):
        buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return buf, buf.data_ptr()
    return alloc


def _desc(head_dim, alibi_slopes, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, page_size,
          causal, window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
          deterministic):
    return _capi.attention_desc(
        head_dim, scale=scale, causal=causal, window=(window_left, window_right),
        softcap=softcap, alibi_slopes=_desc_tensor(alibi_slopes, "alibi_slopes"),
        cu_seqlens_q=_desc_tensor(cu_seqlens_q, "cu_seqlens_q"),
        cu_seqlens_k=_desc_tensor(cu_seqlens_k, "cu_seqlens_k"), max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, block_table=_desc_tensor(block_table, "block_table"),
        page_size=page_size, seqused_k=_desc_tensor(seqused_k, "seqused_k"),
        deterministic=deterministic)


def _lse_shape(q):
    b, s, h, _ = q.shape
    return (b, h, s)


@torch.library.custom_op("flashmsa::fwd", mutates_args=())
def _fwd(q: Tensor, k: Tensor, v: Tensor, alibi_slopes: Optional[Tensor],
         cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
         block_table: Optional[Tensor], seqused_k: Optional[Tensor], causal: bool,
         window_left: int, window_right: int, softcap: float, scale: float, max_seqlen_q: int,
         max_seqlen_k: int, deterministic: bool) -> tuple[Tensor, Tensor]:
    q, k, v = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(_lse_shape(q), dtype=torch.float32, device=q.device)
    if o.numel() == 0:
        return o, lse
    desc = _desc(q.shape[-1], alibi_slopes, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
                 k.shape[1] if block_table is not None else 0, causal, window_left,
                 window_right, softcap, scale, max_seqlen_q, max_seqlen_k, deterministic)
    _capi.forward(_context(q.device), desc, _desc_tensor(q, "q"), _desc_tensor(k, "k"),
                  _desc_tensor(v, "v"), _desc_tensor(o, "o"), _desc_tensor(lse, "lse"),
                  _allocator(q.device), _stream(q.device))
    return o, lse


@_fwd.register_fake
def _fwd_fake(q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, causal,
              window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
              deterministic):
    return (q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32))


@torch.library.custom_op("flashmsa::bwd", mutates_args=())
def _bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
         alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
         cu_seqlens_k: Optional[Tensor], causal: bool, window_left: int, window_right: int,
         softcap: float, scale: float, max_seqlen_q: int, max_seqlen_k: int,
         deterministic: bool) -> tuple[Tensor, Tensor, Tensor]:
    dout, q, k, v, o = (_last_contiguous(t) for t in (dout, q, k, v, o))
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if dq.numel() == 0:
        return dq, dk.zero_(), dv.zero_()
    desc = _desc(q.shape[-1], alibi_slopes, cu_seqlens_q, cu_seqlens_k, None, None, 0, causal,
                 window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
                 deterministic)
    _capi.backward(_context(q.device), desc, *(_desc_tensor(t, n) for t, n in (
        (q, "q"), (k, "k"), (v, "v"), (o, "o"), (dout, "dout"), (lse, "lse"), (dq, "dq"),
        (dk, "dk"), (dv, "dv"))), _allocator(q.device), _stream(q.device))
    return dq, dk, dv


@_bwd.register_fake
def _bwd_fake(dout, q, k, v, o, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k, causal,
              window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
              deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    (q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k, block_table, _seqused_k, causal,
     window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
     deterministic) = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k)
    ctx.settings = (causal, window_left, window_right, softcap, scale, max_seqlen_q,
                    max_seqlen_k, deterministic)
    ctx.paged = block_table is not None
    # fmsa_backward takes no gradient of the LSE yet (issue 13 adds dlse), so
    # the LSE output is a constant for autograd rather than a silently wrong
    # gradient.
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    if ctx.paged:
        raise NotImplementedError("flashmsa: paged KV (block_table) is forward-only in the C "
                                  "library; call attention() under torch.no_grad()")
    q, k, v, o, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    dq, dk, dv = torch.ops.flashmsa.bwd(dout, q, k, v, o, lse, alibi_slopes, cu_seqlens_q,
                                        cu_seqlens_k, *ctx.settings)
    return (dq, dk, dv) + (None,) * 13


torch.library.register_autograd("flashmsa::fwd", _backward, setup_context=_setup_context)


def _check_float(t, name):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"flashmsa.attention: {name} is a {type(t).__name__}; q, k and v must all "
                        "be torch tensors (or all numpy/DLPack arrays)")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"flashmsa.attention: {name} has dtype {t.dtype}; flashmsa takes "
                        "float32, float16 or bfloat16")


def _check_index(t, name):
    if t is not None and (not isinstance(t, torch.Tensor) or t.dtype != torch.int32):
        what = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"flashmsa.attention: {name} has dtype {what}; it must be a torch.int32 "
                        "tensor (as in FlashAttention)")


def attention(q, k, v, *, causal, window, softcap, alibi_slopes, scale, cu_seqlens_q,
              cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table, seqused_k, return_lse,
              deterministic):
    """flashmsa.attention on torch tensors (the public function documents it)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check_float(t, name)
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"),
                    (block_table, "block_table"), (seqused_k, "seqused_k")):
        _check_index(t, name)
    if alibi_slopes is not None and (not isinstance(alibi_slopes, torch.Tensor) or
                                     alibi_slopes.dtype != torch.float32):
        raise TypeError("flashmsa.attention: alibi_slopes must be a torch.float32 tensor "
                        "[heads_q] or [batch, heads_q]")
    for t, name in ((k, "k"), (v, "v"), (alibi_slopes, "alibi_slopes"),
                    (cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"),
                    (block_table, "block_table"), (seqused_k, "seqused_k")):
        if t is not None and t.device != q.device:
            raise ValueError(f"flashmsa.attention: {name} is on {t.device}, q on {q.device}; "
                             "every tensor must be on q's device")
    packed = cu_seqlens_q is not None and q.dim() == 3
    if packed:  # FlashAttention's varlen layout [total, heads, head_dim]
        q = q.unsqueeze(0)
        k = k.unsqueeze(0) if k.dim() == 3 else k
        v = v.unsqueeze(0) if v.dim() == 3 else v
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if t.dim() != 4:
            raise ValueError(f"flashmsa.attention: {name} has {t.dim()} dimensions; expected "
                             "[batch, seqlen, heads, head_dim] (or [total, heads, head_dim] "
                             "with cu_seqlens)")
    if not (isinstance(window, (tuple, list)) and len(window) == 2):
        raise ValueError(f"flashmsa.attention: window = {window!r}; expected (left, right), "
                         "-1 for unlimited")
    if scale is None:
        scale = q.shape[-1] ** -0.5
    o, lse = torch.ops.flashmsa.fwd(
        q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, bool(causal),
        int(window[0]), int(window[1]), float(softcap), float(scale), int(max_seqlen_q or 0),
        int(max_seqlen_k or 0), bool(deterministic))
    if packed:
        o, lse = o.squeeze(0), lse.squeeze(0)
    return (o, lse) if return_lse else o
