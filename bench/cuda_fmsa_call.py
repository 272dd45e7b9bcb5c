"""flashmsa's CUDA forward / backward through ctypes on torch tensors, for the
bench scripts (cuda_vs_peers.py, cuda_f32_bwd.py): one context, descriptors
and workspace built once per shape, the torch stream passed as the stream."""
import ctypes as C
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flashmsa._capi import BackwardTensors, prototype  # noqa: E402
from cuda_rows_check import tdesc  # noqa: E402

FMSA_BACKEND_CUDA, FMSA_FWD, FMSA_BWD = 2, 0, 1


class Library:
    """The shared library and one CUDA context on torch's current device."""

    def __init__(self, path):
        self.lib = prototype(C.CDLL(os.path.abspath(path)))
        torch.cuda.init()
        self.ctx = C.c_void_p()
        self.check(self.lib.fmsa_context_create(FMSA_BACKEND_CUDA, torch.cuda.current_device(),
                                                C.byref(self.ctx)), "fmsa_context_create(cuda)")

    def check(self, st, what):
        if st != 0:
            raise RuntimeError(f"{what}: status {st}: {self.lib.fmsa_last_error().decode()}")


class Fmsa:
    """flashmsa's forward / backward on fixed tensors; do defaults to randn."""

    def __init__(self, L, q, k, v, causal, do=None, det=False, backward=True):
        b, s, h, d = q.shape
        self.L = L
        self.desc = L.lib.fmsa_attention_desc_init(d)
        self.desc.causal = int(causal)
        self.desc.deterministic = int(det)
        self.o = torch.empty(b, s, h, v.shape[3], device="cuda", dtype=q.dtype)
        self.lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        self.do = torch.randn_like(self.o) if do is None else do
        self.dq, self.dk, self.dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        self.t = [tdesc(x) for x in (q, k, v, self.o, self.lse, self.do, self.dq, self.dk, self.dv)]
        ws = []
        for p in (FMSA_FWD, FMSA_BWD) if backward else (FMSA_FWD,):
            n = C.c_size_t()
            L.check(L.lib.fmsa_workspace_size(L.ctx, p, C.byref(self.desc),
                                              *map(C.byref, self.t[:3]), C.byref(n)),
                    "fmsa_workspace_size")
            ws.append(n.value)
        self.ws = torch.empty(max(ws + [1]), device="cuda", dtype=torch.uint8)

    def fwd(self):
        tq, tk, tv, to, tl = self.t[:5]
        self.L.check(self.L.lib.fmsa_forward(
            self.L.ctx, C.byref(self.desc), C.byref(tq), C.byref(tk), C.byref(tv), C.byref(to),
            C.byref(tl), self.ws.data_ptr(), self.ws.numel(),
            torch.cuda.current_stream().cuda_stream), "fmsa_forward")

    def bwd(self):
        t = self.t
        bt = BackwardTensors(q=t[0], k=t[1], v=t[2], o=t[3], lse=t[4], dout=t[5], dq=t[6],
                             dk=t[7], dv=t[8])
        self.L.check(self.L.lib.fmsa_backward(
            self.L.ctx, C.byref(self.desc), C.byref(bt), self.ws.data_ptr(), self.ws.numel(),
            torch.cuda.current_stream().cuda_stream), "fmsa_backward")

    def synchronize(self):
        self.L.check(self.L.lib.fmsa_synchronize(self.L.ctx,
                                                 torch.cuda.current_stream().cuda_stream),
                     "fmsa_synchronize")
