"""Errors, devices, the numpy/DLPack forward, the library's discovery."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import flashmsa
from flashmsa import _array
from conftest import backend_feature, make


def qkv(shape=(1, 16, 2, 16), dtype=torch.float32):
    return tuple(make(shape, dtype, s) for s in range(3))


# ---------------------------------------------------------------- bad inputs
def test_library_error_carries_status_and_message():
    q, k, v = qkv()
    k = make((1, 16, 3, 16), torch.float32, 1)
    with pytest.raises(flashmsa.InvalidArgumentError) as e:
        flashmsa.attention(q, k, v[:, :, :1].expand(1, 16, 3, 16))
    assert e.value.status == flashmsa.Status.ERR_INVALID_ARGUMENT
    assert "heads_kv" in e.value.message and "ERR_INVALID_ARGUMENT" in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, flashmsa.FlashmsaError)


@pytest.mark.parametrize("what, call, match", [
    ("k and v of different lengths",
     lambda: flashmsa.attention(make((1, 8, 2, 16), torch.float32, 0),
                                make((1, 9, 2, 16), torch.float32, 1),
                                make((1, 8, 2, 16), torch.float32, 2)), "v"),
    ("dtypes differ",
     lambda: flashmsa.attention(make((1, 8, 2, 16), torch.float32, 0),
                                make((1, 8, 2, 16), torch.float16, 1),
                                make((1, 8, 2, 16), torch.float32, 2)), "dtype"),
    ("cu_seqlens do not end at the total",
     lambda: flashmsa.attention(*(make((20, 2, 16), torch.float32, s) for s in range(3)),
                                cu_seqlens_q=torch.tensor([0, 5, 19], dtype=torch.int32),
                                cu_seqlens_k=torch.tensor([0, 5, 20], dtype=torch.int32)),
     "cu_seqlens_q"),
    ("alibi of the wrong length",
     lambda: flashmsa.attention(*qkv(), alibi_slopes=torch.ones(3)), "alibi"),
    ("block table page out of range",
     lambda: flashmsa.attention(make((1, 4, 1, 16), torch.float32, 0),
                                make((2, 16, 1, 16), torch.float32, 1),
                                make((2, 16, 1, 16), torch.float32, 2),
                                block_table=torch.tensor([[0, 5]], dtype=torch.int32)),
     "block_table"),
])
def test_library_rejects(what, call, match):
    with pytest.raises(flashmsa.InvalidArgumentError, match=match):
        call()


def test_unsupported_head_dim():
    """Valid but not supported: NotSupportedError, a NotImplementedError."""
    with pytest.raises(flashmsa.NotSupportedError, match="head_dim") as e:
        flashmsa.attention(*qkv((1, 8, 2, 12)))
    assert e.value.status == flashmsa.Status.ERR_NOT_SUPPORTED
    assert isinstance(e.value, NotImplementedError)


def test_bad_input_leaves_nothing_behind():
    """A rejected call raises before autograd records anything."""
    q = make((1, 8, 2, 16), torch.float32, 0, True)
    k = make((1, 8, 3, 16), torch.float32, 1, True)
    with pytest.raises(flashmsa.InvalidArgumentError):
        flashmsa.attention(q, k, k)
    assert q.grad is None and k.grad is None


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(dtype=torch.float64), TypeError, "float64"),
    (dict(ndim=3), ValueError, "dimensions"),
    (dict(cu=torch.int64), TypeError, "int32"),
    (dict(alibi=torch.float64), TypeError, "alibi_slopes"),
    (dict(window=5), ValueError, "window"),
])
def test_python_side_checks(kwargs, exc, match):
    dtype = kwargs.get("dtype", torch.float32)
    shape = (16, 2, 16) if kwargs.get("ndim") == 3 else (1, 16, 2, 16)
    q, k, v = (make(shape, torch.float32, s).to(dtype) for s in range(3))
    opts = {}
    if "cu" in kwargs:
        opts = dict(cu_seqlens_q=torch.tensor([0, 16], dtype=kwargs["cu"]),
                    cu_seqlens_k=torch.tensor([0, 16], dtype=kwargs["cu"]))
    if "alibi" in kwargs:
        opts = dict(alibi_slopes=torch.ones(2, dtype=kwargs["alibi"]))
    if "window" in kwargs:
        opts = dict(window=kwargs["window"])
    with pytest.raises(exc, match=match):
        flashmsa.attention(q, k, v, **opts)


def test_mixed_frameworks_rejected():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="torch tensors"):
        flashmsa.attention(q, k.numpy(), v)


# ---------------------------------------------------------------- devices
def test_devices():
    devs = flashmsa.devices()
    cpus = [d for d in devs if d.backend == "cpu"]
    assert len(cpus) == 1 and cpus[0].kind == "cpu" and cpus[0].multiprocessors >= 1
    assert all(d.name and d.arch for d in devs)
    assert cpus[0].global_memory > 0


def test_version():
    assert flashmsa._capi.version()[:2] == (flashmsa._capi.API_VERSION_MAJOR,
                                           flashmsa._capi.API_VERSION_MINOR) == (0, 2)


# ---------------------------------------------------------------- numpy / DLPack
def test_numpy_forward_matches_torch():
    q, k, v = qkv((2, 24, 4, 32))
    ref, ref_lse = flashmsa.attention(q, k, v, causal=True, return_lse=True)
    o, lse = flashmsa.attention(q.numpy(), k.numpy(), v.numpy(), causal=True, return_lse=True)
    assert isinstance(o, np.ndarray) and isinstance(lse, np.ndarray)
    assert np.array_equal(o, ref.numpy()) and np.array_equal(lse, ref_lse.numpy())


def test_numpy_path_without_torch_matches():
    """The torch-free path (flashmsa._array, used when torch is absent) on
    numpy arrays, strided ones included, gives the torch path's bits."""
    q, k, v = qkv((2, 24, 4, 32))
    ref = flashmsa.attention(q, k, v, window=(5, 3))
    qn = np.ascontiguousarray(q.numpy().transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    o = _array.attention(qn, k.numpy(), v.numpy(), causal=False, window=(5, 3), softcap=0.0,
                         alibi_slopes=None, sinks=None, scale=None, cu_seqlens_q=None,
                         cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, block_table=None,
                         seqused_k=None, return_lse=False)
    assert np.array_equal(o, ref.numpy())
    with pytest.raises(flashmsa.InvalidArgumentError, match="heads"):
        _array.attention(qn, k.numpy()[:, :, :3], v.numpy()[:, :, :3], causal=False,
                         window=(-1, -1), softcap=0.0, alibi_slopes=None, sinks=None,
                         scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                         max_seqlen_k=0, block_table=None, seqused_k=None, return_lse=False)


class _DLPackOnly:
    """An array of some other framework: speaks DLPack and nothing else."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_forward():
    q, k, v = qkv((1, 20, 2, 16))
    o = flashmsa.attention(*(_DLPackOnly(t.numpy()) for t in (q, k, v)), causal=True)
    assert isinstance(o, torch.Tensor)
    assert torch.equal(o, flashmsa.attention(q, k, v, causal=True))


# ---------------------------------------------------------------- the library
def test_library_found_and_prefix():
    path = flashmsa.library_path()
    assert os.path.exists(path)
    prefix = flashmsa.cmake_prefix()
    if prefix is not None:  # installed by pip: a complete install prefix in the package
        assert os.path.commonpath([prefix, path]) == prefix
        assert os.path.exists(os.path.join(prefix, "include", "flashmsa", "flashmsa.h"))
        cmake_dirs = [d for d in os.listdir(prefix) if d.startswith("lib")]
        assert any(os.path.exists(os.path.join(prefix, d, "cmake", "flashmsa",
                                               "flashmsaConfig.cmake")) for d in cmake_dirs)


def _import_in_child(env_update):
    env = dict(os.environ, **env_update)
    code = "import flashmsa; print(flashmsa.library_path())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(__file__))


def test_flashmsa_library_variable():
    """FLASHMSA_LIBRARY wins; a wrong one is an error naming it, not a fallback."""
    path = flashmsa.library_path()
    r = _import_in_child({"FLASHMSA_LIBRARY": path})
    assert r.returncode == 0 and r.stdout.strip() == path, r.stderr
    r = _import_in_child({"FLASHMSA_LIBRARY": "/nonexistent/libflashmsa.so"})
    assert r.returncode != 0 and "/nonexistent/libflashmsa.so" in r.stderr


def test_cmake_prefix_discovery(tmp_path):
    """An installed prefix (lib/libflashmsa.so*) found through CMAKE_PREFIX_PATH
    when the package carries no library of its own."""
    real = flashmsa.library_path()
    lib = tmp_path / "prefix" / "lib"
    lib.mkdir(parents=True)
    os.symlink(real, lib / "libflashmsa.so")
    pkg = tmp_path / "pkg"
    # a copy of the Python sources alone, so only the prefix can supply the library
    subprocess.run(["cp", "-r", os.path.dirname(flashmsa.__file__), str(pkg)], check=True)
    for sub in os.listdir(pkg):
        if sub in ("lib", "lib64", "bin", "include"):
            subprocess.run(["rm", "-rf", str(pkg / sub)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "FLASHMSA_LIBRARY"}
    env.update(CMAKE_PREFIX_PATH=str(tmp_path / "prefix"), PYTHONPATH=str(tmp_path))
    os.rename(pkg, tmp_path / "flashmsa")
    code = "import flashmsa; print(flashmsa.library_path())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(lib / "libflashmsa.so")


def test_merge_states_as_the_first_call():
    """merge_states before any attention() loads the library from inside the
    context lock (it once deadlocked there)."""
    code = ("import torch, flashmsa; o = torch.zeros(1, 4, 2, 8); l = torch.zeros(1, 2, 4); "
            "print(flashmsa.merge_states(o, l, o, l)[1].sum().item())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(__file__))
    assert r.returncode == 0, r.stderr
    assert abs(float(r.stdout) - 8 * math.log(2)) < 1e-5


def test_numpy_forward_with_sinks_and_value_dim():
    """The torch-free path takes sinks and a v of its own head dim too."""
    q, k = qkv((1, 12, 2, 16))[:2]
    v = make((1, 12, 2, 8), torch.float32, 5)
    t = torch.tensor([0.5, -1.0])
    with backend_feature("sinks", "dim_v"):
        ref, ref_lse = flashmsa.attention(q, k, v, sinks=t, causal=True, return_lse=True)
    o, lse = _array.attention(q.numpy(), k.numpy(), v.numpy(), causal=True, window=(-1, -1),
                              softcap=0.0, alibi_slopes=None, sinks=t.numpy(), scale=None,
                              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                              max_seqlen_k=0, block_table=None, seqused_k=None, return_lse=True)
    assert o.shape == (1, 12, 2, 8)
    assert np.array_equal(o, ref.numpy()) and np.array_equal(lse, ref_lse.numpy())
