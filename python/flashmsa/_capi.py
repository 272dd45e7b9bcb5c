"""The one ctypes mirror of include/flashmsa/flashmsa.h.

Every struct, enum and prototype of the C API that Python uses is declared here
and nowhere else, so a field added to the header (the sink logits of
fmsa_attention_desc, say) is a change to this file alone: its struct below, and
the keyword that fills it in attention_desc().  Nothing here imports torch or
numpy; the framework layers build fmsa_tensor descriptors from their arrays and
call forward()/backward() with a workspace allocator and a stream of their own.
"""
import ctypes as C
import ctypes.util
import enum
import glob
import math
import os
import threading

# The struct layouts below are those of this API version; a library of another
# minor version (0.x: minors may change the ABI) is refused at load.
API_VERSION_MAJOR = 0
API_VERSION_MINOR = 2
MAX_DIMS = 4


class Status(enum.IntEnum):
    SUCCESS = 0
    ERR_INVALID_ARGUMENT = 1
    ERR_NOT_SUPPORTED = 2
    ERR_OUT_OF_MEMORY = 3
    ERR_BACKEND_UNAVAILABLE = 4
    ERR_DEVICE = 5
    ERR_INSUFFICIENT_WORKSPACE = 6
    ERR_INTERNAL = 7


class Backend(enum.IntEnum):
    AUTO = 0
    CPU = 1
    CUDA = 2
    HIP = 3
    OPENCL = 4


class DeviceKind(enum.IntEnum):
    OTHER = 0
    CPU = 1
    GPU = 2


class DType(enum.IntEnum):
    INVALID = 0
    F32 = 1
    F16 = 2
    BF16 = 3
    I32 = 4
    U8 = 5


class Pass(enum.IntEnum):
    FORWARD = 0
    BACKWARD = 1


class Tensor(C.Structure):
    """fmsa_tensor: pointer + byte offset, dtype, shape and strides in elements."""
    _fields_ = [("data", C.c_void_p), ("byte_offset", C.c_int64), ("dtype", C.c_int),
                ("ndim", C.c_int32), ("shape", C.c_int64 * MAX_DIMS),
                ("strides", C.c_int64 * MAX_DIMS)]


class DeviceInfo(C.Structure):
    """fmsa_device_info."""
    _fields_ = [("backend", C.c_int), ("kind", C.c_int), ("index", C.c_int),
                ("name", C.c_char * 128), ("arch", C.c_char * 32),
                ("sram_per_block", C.c_size_t), ("sram_per_block_optin", C.c_size_t),
                ("sram_per_multiprocessor", C.c_size_t), ("multiprocessors", C.c_int),
                ("warp_size", C.c_int), ("registers_per_block", C.c_int),
                ("global_memory", C.c_size_t)]


class AttentionDesc(C.Structure):
    """fmsa_attention_desc."""
    _fields_ = [("softmax_scale", C.c_float), ("causal", C.c_int),
                ("window_left", C.c_int64), ("window_right", C.c_int64),
                ("softcap", C.c_float), ("alibi_slopes", Tensor), ("mask", Tensor),
                ("cu_seqlens_q", Tensor), ("cu_seqlens_k", Tensor),
                ("max_seqlen_q", C.c_int64), ("max_seqlen_k", C.c_int64),
                ("block_table", Tensor), ("page_size", C.c_int64), ("seqused_k", Tensor),
                ("deterministic", C.c_int), ("sinks", Tensor)]


class BackwardTensors(C.Structure):
    """fmsa_backward_tensors."""
    _fields_ = [(n, Tensor) for n in ("q", "k", "v", "o", "dout", "lse", "dlse", "dq", "dk",
                                      "dv", "dsink")]


# ---------------------------------------------------------------- errors
class FlashmsaError(RuntimeError):
    """A flashmsa call failed: .status (Status), .message (fmsa_last_error()), .call."""

    def __init__(self, status, message, call=""):
        self.status = Status(status)
        self.message = message
        self.call = call
        super().__init__(f"{call}: {self.status.name}: {message}" if call
                         else f"{self.status.name}: {message}")


class InvalidArgumentError(FlashmsaError, ValueError):
    """FMSA_ERR_INVALID_ARGUMENT: the message names the field."""


class NotSupportedError(FlashmsaError, NotImplementedError):
    """FMSA_ERR_NOT_SUPPORTED: valid, but this backend or build cannot do it."""


class BackendUnavailableError(FlashmsaError):
    """FMSA_ERR_BACKEND_UNAVAILABLE: not compiled in, or no usable runtime/device."""


_ERROR_CLASS = {Status.ERR_INVALID_ARGUMENT: InvalidArgumentError,
                Status.ERR_NOT_SUPPORTED: NotSupportedError,
                Status.ERR_BACKEND_UNAVAILABLE: BackendUnavailableError}


# ---------------------------------------------------------------- loading
def _candidates():
    """Where the shared library may be, in order: FLASHMSA_LIBRARY, the copy
    installed inside this package, the prefixes of FLASHMSA_ROOT and
    CMAKE_PREFIX_PATH (an installed `cmake --install` tree), the system's."""
    env = os.environ.get("FLASHMSA_LIBRARY")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    prefixes = [here]
    for var in ("FLASHMSA_ROOT", "CMAKE_PREFIX_PATH"):
        prefixes += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    out = []
    for p in prefixes:
        for libdir in sorted(glob.glob(os.path.join(p, "lib*"))):
            for name in ("libflashmsa.so", "libflashmsa.dylib", "flashmsa.dll"):
                f = os.path.join(libdir, name)
                if os.path.exists(f):
                    out.append(f)
            out += sorted(glob.glob(os.path.join(libdir, "libflashmsa.so.*")))
    system = ctypes.util.find_library("flashmsa")
    if system:
        out.append(system)
    return out, False


def prototype(lib):
    """Declares the C API's prototypes on a ctypes.CDLL of libflashmsa (the
    benchmarks load builds of their own with it) and returns it."""
    P = C.POINTER
    T = P(Tensor)
    protos = {
        "fmsa_status_string": (C.c_char_p, [C.c_int]),
        "fmsa_last_error": (C.c_char_p, []),
        "fmsa_version": (C.c_int, []),
        "fmsa_backend_name": (C.c_char_p, [C.c_int]),
        "fmsa_device_count": (C.c_int, [P(C.c_int)]),
        "fmsa_device_get": (C.c_int, [C.c_int, P(DeviceInfo)]),
        "fmsa_context_create": (C.c_int, [C.c_int, C.c_int, P(C.c_void_p)]),
        "fmsa_context_destroy": (None, [C.c_void_p]),
        "fmsa_context_device": (C.c_int, [C.c_void_p, P(DeviceInfo)]),
        "fmsa_attention_desc_init": (AttentionDesc, [C.c_int64]),
        "fmsa_workspace_size": (C.c_int, [C.c_void_p, C.c_int, P(AttentionDesc), T, T, T,
                                          P(C.c_size_t)]),
        "fmsa_forward": (C.c_int, [C.c_void_p, P(AttentionDesc)] + [T] * 5 +
                         [C.c_void_p, C.c_size_t, C.c_void_p]),
        "fmsa_backward": (C.c_int, [C.c_void_p, P(AttentionDesc), P(BackwardTensors),
                                    C.c_void_p, C.c_size_t, C.c_void_p]),
        "fmsa_merge_states": (C.c_int, [C.c_void_p] + [T] * 6 + [C.c_void_p]),
        "fmsa_synchronize": (C.c_int, [C.c_void_p, C.c_void_p]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


_lib = None
_lib_path = None
_lock = threading.RLock()  # context() loads the library while holding it


def library():
    """The loaded C library (ctypes.CDLL), loaded on first use."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        paths, explicit = _candidates()
        errors = []
        for path in paths:
            try:
                lib = C.CDLL(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                if explicit:
                    break
                continue
            prototype(lib)
            v = lib.fmsa_version()
            if (v // 10000, v // 100 % 100) != (API_VERSION_MAJOR, API_VERSION_MINOR):
                errors.append(f"{path}: library version {v // 10000}.{v // 100 % 100}."
                              f"{v % 100}, these bindings mirror API "
                              f"{API_VERSION_MAJOR}.{API_VERSION_MINOR}")
                if explicit:
                    break
                continue
            _lib, _lib_path = lib, path
            return lib
        tried = "; ".join(errors) if errors else "no libflashmsa found in the package, " \
            "FLASHMSA_ROOT, CMAKE_PREFIX_PATH or the system's library path"
        raise OSError(f"flashmsa: cannot load the C library ({tried}); set FLASHMSA_LIBRARY "
                      "to the path of libflashmsa.so")


def library_path():
    library()
    return _lib_path


def check(status, call):
    """Raises the FlashmsaError of a failed call, with fmsa_last_error()'s message."""
    if status != Status.SUCCESS:
        msg = library().fmsa_last_error()
        msg = msg.decode(errors="replace") if msg else ""
        raise _ERROR_CLASS.get(status, FlashmsaError)(status, msg, call)


def version():
    v = library().fmsa_version()
    return (v // 10000, v // 100 % 100, v % 100)


# ---------------------------------------------------------------- devices
def device_infos():
    lib = library()
    n = C.c_int()
    check(lib.fmsa_device_count(C.byref(n)), "fmsa_device_count")
    out = []
    for i in range(n.value):
        info = DeviceInfo()
        check(lib.fmsa_device_get(i, C.byref(info)), "fmsa_device_get")
        out.append(info)
    return out


def backend_name(backend):
    return library().fmsa_backend_name(int(backend)).decode()


_contexts = {}


def context(backend, index):
    """The process's context for (backend, device index), created on first use
    and kept: a CPU context holds its pass buffers between calls, so repeated
    calls reuse them (flashmsa.h, fmsa_context_destroy)."""
    key = (int(backend), int(index))
    ctx = _contexts.get(key)
    if ctx is not None:
        return ctx
    with _lock:
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = C.c_void_p()
            check(library().fmsa_context_create(key[0], key[1], C.byref(ctx)),
                  f"fmsa_context_create({backend_name(key[0])}, {key[1]})")
            _contexts[key] = ctx
    return ctx


# ---------------------------------------------------------------- passes
def tensor(ptr, dtype, shape, strides, byte_offset=0):
    """An fmsa_tensor of a pointer, a DType and shape/strides in elements."""
    t = Tensor()
    t.data = ptr
    t.byte_offset = byte_offset
    t.dtype = int(dtype)
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i] = n
        t.strides[i] = s
    return t


ABSENT = Tensor()  # an optional tensor left out (data == NULL)


def attention_desc(head_dim, *, scale=None, causal=False, window=(-1, -1), softcap=0.0,
                   alibi_slopes=None, sinks=None, cu_seqlens_q=None, cu_seqlens_k=None,
                   max_seqlen_q=0, max_seqlen_k=0, block_table=None, page_size=0, seqused_k=None,
                   deterministic=False):
    """fmsa_attention_desc from the library's defaults and these settings
    (tensors are Tensor descriptors or None)."""
    d = library().fmsa_attention_desc_init(int(head_dim))
    if scale is not None:
        d.softmax_scale = float(scale)
    d.causal = 1 if causal else 0
    d.window_left, d.window_right = int(window[0]), int(window[1])
    d.softcap = float(softcap)
    for name, t in (("alibi_slopes", alibi_slopes), ("sinks", sinks),
                    ("cu_seqlens_q", cu_seqlens_q),
                    ("cu_seqlens_k", cu_seqlens_k), ("block_table", block_table),
                    ("seqused_k", seqused_k)):
        if t is not None:
            setattr(d, name, t)
    d.max_seqlen_q = int(max_seqlen_q or 0)
    d.max_seqlen_k = int(max_seqlen_k or 0)
    d.page_size = int(page_size)
    d.deterministic = 1 if deterministic else 0
    return d


def _workspace(ctx, pass_, desc, q, k, v, alloc):
    """(pointer, bytes) of a workspace from the framework's allocator; alloc(n)
    returns (keepalive, pointer) and the caller holds keepalive until the call
    has been queued."""
    n = C.c_size_t()
    check(library().fmsa_workspace_size(ctx, int(pass_), C.byref(desc), C.byref(q), C.byref(k),
                                        C.byref(v), C.byref(n)), "fmsa_workspace_size")
    if n.value == 0:
        return None, None, 0
    keep, ptr = alloc(n.value)
    return keep, ptr, n.value


def forward(ctx, desc, q, k, v, o, lse, alloc, stream=None):
    """fmsa_forward; lse may be None.  Queues the pass on stream and returns."""
    keep, ws, nbytes = _workspace(ctx, Pass.FORWARD, desc, q, k, v, alloc)
    check(library().fmsa_forward(ctx, C.byref(desc), C.byref(q), C.byref(k), C.byref(v),
                                 C.byref(o), C.byref(lse if lse is not None else ABSENT),
                                 ws, nbytes, stream), "fmsa_forward")
    del keep


def backward(ctx, desc, q, k, v, o, dout, lse, dq, dk, dv, alloc, stream=None, dlse=None,
             dsink=None):
    """fmsa_backward; dlse and dsink may be None.  Queues the pass on stream and returns."""
    keep, ws, nbytes = _workspace(ctx, Pass.BACKWARD, desc, q, k, v, alloc)
    t = BackwardTensors(q=q, k=k, v=v, o=o, dout=dout, lse=lse, dq=dq, dk=dk, dv=dv,
                        dlse=dlse if dlse is not None else ABSENT,
                        dsink=dsink if dsink is not None else ABSENT)
    check(library().fmsa_backward(ctx, C.byref(desc), C.byref(t), ws, nbytes, stream),
          "fmsa_backward")
    del keep


def merge_states(ctx, o_a, lse_a, o_b, lse_b, o, lse, stream=None):
    """fmsa_merge_states.  Queues the merge on stream and returns."""
    check(library().fmsa_merge_states(ctx, C.byref(o_a), C.byref(lse_a), C.byref(o_b),
                                      C.byref(lse_b), C.byref(o), C.byref(lse), stream),
          "fmsa_merge_states")


def default_scale(head_dim):
    return 1.0 / math.sqrt(head_dim)
