"""The forward on numpy arrays and other DLPack producers, without torch.

Host memory only (the CPU backend): a DLPack array on a device goes through
torch (flashmsa.attention converts it with torch.from_dlpack when torch is
installed).  numpy has no bfloat16 of its own; an array whose dtype is named
'bfloat16' (ml_dtypes) is taken as bf16.
"""
from . import _capi
from ._capi import Backend, DType

_DTYPES = {"float32": DType.F32, "float16": DType.F16, "bfloat16": DType.BF16,
           "int32": DType.I32, "uint8": DType.U8}


def _desc_tensor(a, name):
    if a is None:
        return None
    dt = _DTYPES.get(a.dtype.name)
    if dt is None:
        raise TypeError(f"flashmsa: {name} has dtype {a.dtype}, which flashmsa does not take")
    if any(s % a.itemsize for s in a.strides):
        raise ValueError(f"flashmsa: {name} has strides {a.strides} (bytes) that are not "
                         f"multiples of its element size {a.itemsize}")
    return _capi.tensor(a.ctypes.data, dt, a.shape, [s // a.itemsize for s in a.strides])


def _host_array(x, name):
    import numpy as np
    if x is None or isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    raise TypeError(f"flashmsa.attention: {name} is a {type(x).__name__}, which is neither a "
                    "torch tensor, a numpy array nor a DLPack producer")


def attention(q, k, v, *, causal, window, softcap, alibi_slopes, sinks, scale, cu_seqlens_q,
              cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table, seqused_k, return_lse):
    import numpy as np
    q, k, v = (_host_array(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k = (
        _host_array(x, n) for x, n in ((alibi_slopes, "alibi_slopes"), (sinks, "sinks"),
                                       (cu_seqlens_q, "cu_seqlens_q"),
                                       (cu_seqlens_k, "cu_seqlens_k"),
                                       (block_table, "block_table"), (seqused_k, "seqused_k")))
    packed = cu_seqlens_q is not None and q.ndim == 3
    if packed:
        q, k, v = (x[None] if x.ndim == 3 else x for x in (q, k, v))
    for a, name in ((q, "q"), (k, "k"), (v, "v")):
        if a.ndim != 4:
            raise ValueError(f"flashmsa.attention: {name} has {a.ndim} dimensions; expected "
                             "[batch, seqlen, heads, head_dim]")
    q, k, v = (a if a.strides[-1] == a.itemsize else np.ascontiguousarray(a) for a in (q, k, v))
    b, s, h, d = q.shape
    o = np.empty((b, s, h, v.shape[-1]), dtype=q.dtype)
    lse = np.empty((b, h, s), dtype=np.float32)
    if o.size:
        desc = _capi.attention_desc(
            d, scale=scale, causal=causal, window=window, softcap=softcap,
            alibi_slopes=_desc_tensor(alibi_slopes, "alibi_slopes"),
            sinks=_desc_tensor(sinks, "sinks"),
            cu_seqlens_q=_desc_tensor(cu_seqlens_q, "cu_seqlens_q"),
            cu_seqlens_k=_desc_tensor(cu_seqlens_k, "cu_seqlens_k"), max_seqlen_q=max_seqlen_q,
            max_seqlen_k=max_seqlen_k, block_table=_desc_tensor(block_table, "block_table"),
            page_size=k.shape[1] if block_table is not None else 0,
            seqused_k=_desc_tensor(seqused_k, "seqused_k"))

        def alloc(n):
            buf = np.empty(n, dtype=np.uint8)
            return buf, buf.ctypes.data

        _capi.forward(_capi.context(Backend.CPU, 0), desc, _desc_tensor(q, "q"),
                      _desc_tensor(k, "k"), _desc_tensor(v, "v"), _desc_tensor(o, "o"),
                      _desc_tensor(lse, "lse"), alloc)
    if packed:
        o, lse = o[0], lse[0]
    return (o, lse) if return_lse else o
