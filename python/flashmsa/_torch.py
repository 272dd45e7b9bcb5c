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


def _desc(head_dim, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
          page_size, causal, window_left, window_right, softcap, scale, max_seqlen_q,
          max_seqlen_k, deterministic):
    return _capi.attention_desc(
        head_dim, scale=scale, causal=causal, window=(window_left, window_right),
        softcap=softcap, alibi_slopes=_desc_tensor(alibi_slopes, "alibi_slopes"),
        sinks=_desc_tensor(sinks, "sinks"),
        cu_seqlens_q=_desc_tensor(cu_seqlens_q, "cu_seqlens_q"),
        cu_seqlens_k=_desc_tensor(cu_seqlens_k, "cu_seqlens_k"), max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, block_table=_desc_tensor(block_table, "block_table"),
        page_size=page_size, seqused_k=_desc_tensor(seqused_k, "seqused_k"),
        deterministic=deterministic)


def _lse_shape(q):
    b, s, h, _ = q.shape
    return (b, h, s)


def _o_shape(q, v):
    """o is [b, s_q, heads_q, Dv]: q's rows, v's head dim."""
    return tuple(q.shape[:-1]) + (v.shape[-1],)


def _eager(*tensors):
    """True when a call may run an op's implementation itself instead of through
    torch's dispatcher, which costs more host time than the rest of a small call
    (bench/RESULTS.md): outside torch.compile's tracing, with no dispatch or
    torch-function mode watching (profilers, flop counters) and with plain
    tensors (fake, functional and other subclass tensors of a trace or a mode
    still go through the op, its fake implementation and its autograd)."""
    return (not torch.compiler.is_compiling() and torch._C._len_torch_dispatch_stack() == 0 and
            not torch._C._is_torch_function_mode_enabled() and
            all(t is None or type(t) is Tensor for t in tensors))


def _fwd_impl(q: Tensor, k: Tensor, v: Tensor, alibi_slopes: Optional[Tensor],
         sinks: Optional[Tensor], cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
         block_table: Optional[Tensor], seqused_k: Optional[Tensor], causal: bool,
         window_left: int, window_right: int, softcap: float, scale: float, max_seqlen_q: int,
         max_seqlen_k: int, deterministic: bool) -> tuple[Tensor, Tensor]:
    q, k, v = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
    o = torch.empty(_o_shape(q, v), dtype=q.dtype, device=q.device)
    lse = torch.empty(_lse_shape(q), dtype=torch.float32, device=q.device)
    if o.numel() == 0:
        return o, lse
    desc = _desc(q.shape[-1], alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, block_table,
                 seqused_k, k.shape[1] if block_table is not None else 0, causal, window_left,
                 window_right, softcap, scale, max_seqlen_q, max_seqlen_k, deterministic)
    _capi.forward(_context(q.device), desc, _desc_tensor(q, "q"), _desc_tensor(k, "k"),
                  _desc_tensor(v, "v"), _desc_tensor(o, "o"), _desc_tensor(lse, "lse"),
                  _allocator(q.device), _stream(q.device))
    return o, lse


_fwd = torch.library.custom_op("flashmsa::fwd", mutates_args=())(_fwd_impl)


@_fwd.register_fake
def _fwd_fake(q, k, v, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
              causal, window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
              deterministic):
    return (q.new_empty(_o_shape(q, v)), q.new_empty(_lse_shape(q), dtype=torch.float32))


def _bwd_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
         dlse: Optional[Tensor], alibi_slopes: Optional[Tensor], sinks: Optional[Tensor],
         cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], causal: bool,
         window_left: int, window_right: int, softcap: float, scale: float, max_seqlen_q: int,
         max_seqlen_k: int, deterministic: bool,
         want_dsink: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """dq, dk, dv and dsink (fp32 [heads_q] when want_dsink, else empty)."""
    dout, q, k, v, o = (_last_contiguous(t) for t in (dout, q, k, v, o))
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    dsink = torch.empty(_dsink_shape(q, want_dsink), dtype=torch.float32, device=q.device)
    if dq.numel() == 0:  # no query rows: nothing reaches the keys or the sinks
        return dq, dk.zero_(), dv.zero_(), dsink.zero_()
    desc = _desc(q.shape[-1], alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, None, None, 0,
                 causal, window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
                 deterministic)
    _capi.backward(_context(q.device), desc, *(_desc_tensor(t, n) for t, n in (
        (q, "q"), (k, "k"), (v, "v"), (o, "o"), (dout, "dout"), (lse, "lse"), (dq, "dq"),
        (dk, "dk"), (dv, "dv"))), _allocator(q.device), _stream(q.device),
        dlse=_desc_tensor(dlse, "dlse"),
        dsink=_desc_tensor(dsink, "dsink") if want_dsink else None)
    return dq, dk, dv, dsink


_bwd = torch.library.custom_op("flashmsa::bwd", mutates_args=())(_bwd_impl)


def _dsink_shape(q, want_dsink):
    return (q.shape[2],) if want_dsink else (0,)


@_bwd.register_fake
def _bwd_fake(dout, q, k, v, o, lse, dlse, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k,
              causal, window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
              deterministic, want_dsink):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            q.new_empty(_dsink_shape(q, want_dsink), dtype=torch.float32))


_SINKS_INPUT = 4  # the position of sinks among flashmsa::fwd's inputs


def _setup_context(ctx, inputs, output):
    (q, k, v, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, block_table, _seqused_k, causal,
     window_left, window_right, softcap, scale, max_seqlen_q, max_seqlen_k,
     deterministic) = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k)
    ctx.settings = (causal, window_left, window_right, softcap, scale, max_seqlen_q,
                    max_seqlen_k, deterministic)
    ctx.paged = block_table is not None
    # An output the loss does not use arrives as None rather than zeros, so a
    # loss that ignores the lse passes no dlse (and needs no backend support
    # for it).
    ctx.set_materialize_grads(False)


def _backward(ctx, dout, dlse):
    if ctx.paged:
        raise NotImplementedError("flashmsa: paged KV (block_table) is forward-only in the C "
                                  "library; call attention() under torch.no_grad()")
    q, k, v, o, lse, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    if dout is None:  # only the lse reaches the loss
        dout = torch.zeros_like(o)
    if dlse is not None:  # autograd may hand over a broadcast (stride 0) view
        dlse = dlse.contiguous()
    want_dsink = sinks is not None and ctx.needs_input_grad[_SINKS_INPUT]
    bwd_args = (dout, q, k, v, o, lse, dlse, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k)
    bwd = _bwd_impl if _eager(*bwd_args) else torch.ops.flashmsa.bwd
    dq, dk, dv, dsink = bwd(*bwd_args, *ctx.settings, want_dsink)
    return (dq, dk, dv, None, dsink if want_dsink else None) + (None,) * 12


torch.library.register_autograd("flashmsa::fwd", _backward, setup_context=_setup_context)


class _Attention(torch.autograd.Function):
    """The same autograd as flashmsa::fwd's registration, for attention()'s
    eager calls: torch's generic wrapper of a custom op's autograd costs far
    more host time a call than an autograd.Function around the op
    (bench/RESULTS.md, 2026-12-02).  Under torch.compile the op's own
    registration is used, so the graph holds flashmsa::fwd itself."""

    @staticmethod
    def forward(ctx, *inputs):
        output = (_fwd_impl if _eager(*inputs[:9]) else torch.ops.flashmsa.fwd)(*inputs)
        _setup_context(ctx, inputs, output)
        return output

    @staticmethod
    def backward(ctx, dout, dlse):
        return _backward(ctx, dout, dlse)


# ---------------------------------------------------------------- merge_states
def _merge_tensors(o_a, lse_a, o_b, lse_b, o, lse):
    return [_desc_tensor(t, n) for t, n in ((o_a, "o_a"), (lse_a, "lse_a"), (o_b, "o_b"),
                                            (lse_b, "lse_b"), (o, "o"), (lse, "lse"))]


def _merge_into(o_a, lse_a, o_b, lse_b, o, lse):
    if o.numel() == 0 and lse.numel() == 0:
        return
    _capi.merge_states(_context(o_a.device), *_merge_tensors(o_a, lse_a, o_b, lse_b, o, lse),
                       _stream(o_a.device))


@torch.library.custom_op("flashmsa::merge", mutates_args=())
def _merge(o_a: Tensor, lse_a: Tensor, o_b: Tensor, lse_b: Tensor) -> tuple[Tensor, Tensor]:
    o = torch.empty(o_a.shape, dtype=torch.promote_types(o_a.dtype, o_b.dtype),
                    device=o_a.device)
    lse = torch.empty(lse_a.shape, dtype=torch.float32, device=lse_a.device)
    _merge_into(o_a, lse_a, o_b, lse_b, o, lse)
    return o, lse


@_merge.register_fake
def _merge_fake(o_a, lse_a, o_b, lse_b):
    return (o_a.new_empty(o_a.shape, dtype=torch.promote_types(o_a.dtype, o_b.dtype)),
            lse_a.new_empty(lse_a.shape, dtype=torch.float32))


@torch.library.custom_op("flashmsa::merge_out", mutates_args=("o", "lse"))
def _merge_out(o_a: Tensor, lse_a: Tensor, o_b: Tensor, lse_b: Tensor, o: Tensor,
               lse: Tensor) -> None:
    _merge_into(o_a, lse_a, o_b, lse_b, o, lse)


@_merge_out.register_fake
def _merge_out_fake(o_a, lse_a, o_b, lse_b, o, lse):
    return None


def _merge_setup_context(ctx, inputs, output):
    o_a, lse_a, o_b, lse_b = inputs
    ctx.save_for_backward(o_a, lse_a, o_b, lse_b, output[1])
    ctx.set_materialize_grads(False)


def _merge_backward(ctx, do, dlse):
    """With w_x = exp(lse_x - lse) (0 for a side with lse_x = -inf) and
    D_x = rowsum(do * o_x): do_x = w_x do, dlse_x = w_x (D_x - D + dlse),
    D = w_a D_a + w_b D_b, in fp32."""
    o_a, lse_a, o_b, lse_b, lse = ctx.saved_tensors

    def weight(lse_x):
        w = torch.exp(lse_x - lse)
        return torch.where(lse_x == -torch.inf, torch.zeros_like(w), w)

    def rows(w):  # [B, H, S] -> [B, S, H, 1], o's layout
        return w.transpose(1, 2).unsqueeze(-1)

    w_a, w_b = weight(lse_a), weight(lse_b)
    out = [None] * 4
    if do is not None:
        g = do.float()
        d_a = (g * o_a.float()).sum(-1).transpose(1, 2)
        d_b = (g * o_b.float()).sum(-1).transpose(1, 2)
        d = w_a * d_a + w_b * d_b
        out[0] = (rows(w_a) * g).to(o_a.dtype)
        out[2] = (rows(w_b) * g).to(o_b.dtype)
        out[1], out[3] = w_a * (d_a - d), w_b * (d_b - d)
    if dlse is not None:
        out[1] = w_a * dlse if out[1] is None else out[1] + w_a * dlse
        out[3] = w_b * dlse if out[3] is None else out[3] + w_b * dlse
    return tuple(out)


torch.library.register_autograd("flashmsa::merge", _merge_backward,
                                setup_context=_merge_setup_context)


def merge_states(o_a, lse_a, o_b, lse_b, out=None):
    """flashmsa.merge_states on torch tensors (the public function documents it)."""
    for t, name in ((o_a, "o_a"), (o_b, "o_b")):
        _check_float(t, name, "merge_states")
    for t, name in ((lse_a, "lse_a"), (lse_b, "lse_b")):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            what = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(f"flashmsa.merge_states: {name} is {what}; it must be a "
                            "torch.float32 tensor [batch, heads, seqlen]")
    if out is not None:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("flashmsa.merge_states: out must be a pair (o, lse) of tensors")
        o, lse = out
        _check_float(o, "out[0]", "merge_states")
    tensors = [o_a, lse_a, o_b, lse_b] + ([] if out is None else list(out))
    for t, name in zip(tensors[1:], ("lse_a", "o_b", "lse_b", "out[0]", "out[1]")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"flashmsa.merge_states: {name} is a {type(t).__name__}")
        if t.device != o_a.device:
            raise ValueError(f"flashmsa.merge_states: {name} is on {t.device}, o_a on "
                             f"{o_a.device}; every tensor must be on o_a's device")
    packed = o_a.dim() == 3  # attention()'s 3-D varlen results: [total, H, Dv], [H, total]
    if packed:
        tensors = [t.unsqueeze(0) for t in tensors]
    if out is None:
        o, lse = torch.ops.flashmsa.merge(*tensors)
        return (o.squeeze(0), lse.squeeze(0)) if packed else (o, lse)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise RuntimeError("flashmsa.merge_states: out= writes in place and is not "
                           "differentiable; leave out out (or call it under torch.no_grad())")
    torch.ops.flashmsa.merge_out(*tensors)
    return out[0], out[1]


def _check_float(t, name, fn="attention"):
    if not isinstance(t, torch.Tensor):
        what = ("q, k and v must all be torch tensors (or all numpy/DLPack arrays)"
                if fn == "attention" else "merge_states takes torch tensors")
        raise TypeError(f"flashmsa.{fn}: {name} is a {type(t).__name__}; {what}")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"flashmsa.{fn}: {name} has dtype {t.dtype}; flashmsa takes "
                        "float32, float16 or bfloat16")


def _check_index(t, name):
    if t is not None and (not isinstance(t, torch.Tensor) or t.dtype != torch.int32):
        what = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"flashmsa.attention: {name} has dtype {what}; it must be a torch.int32 "
                        "tensor (as in FlashAttention)")


def attention(q, k, v, *, causal, window, softcap, alibi_slopes, sinks, scale, cu_seqlens_q,
              cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table, seqused_k, return_lse,
              deterministic):
    """flashmsa.attention on torch tensors (the public function documents it)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check_float(t, name)
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"),
                    (block_table, "block_table"), (seqused_k, "seqused_k")):
        _check_index(t, name)
    for t, name, shape in ((alibi_slopes, "alibi_slopes", "[heads_q] or [batch, heads_q]"),
                           (sinks, "sinks", "[heads_q]")):
        if t is not None and (not isinstance(t, torch.Tensor) or t.dtype != torch.float32):
            raise TypeError(f"flashmsa.attention: {name} must be a torch.float32 tensor {shape}")
    for t, name in ((k, "k"), (v, "v"), (alibi_slopes, "alibi_slopes"), (sinks, "sinks"),
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
    args = (q, k, v, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
            bool(causal), int(window[0]), int(window[1]), float(softcap), float(scale),
            int(max_seqlen_q or 0), int(max_seqlen_k or 0), bool(deterministic))
    if (torch.is_grad_enabled() and not torch.compiler.is_compiling() and
            any(t is not None and t.requires_grad for t in args[:5])):
        o, lse = _Attention.apply(*args)  # eager autograd: the cheaper wrapper
    elif _eager(*args[:9]):
        o, lse = _fwd_impl(*args)  # no autograd needed: the implementation itself
    else:
        o, lse = torch.ops.flashmsa.fwd(*args)
    if packed:
        o, lse = o.squeeze(0), lse.squeeze(0)
    return (o, lse) if return_lse else o
