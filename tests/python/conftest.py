"""Shared fixtures: torch on as many threads as the machine has cores, and
problems built from a seed.  flashmsa is imported from where pip installed it,
or from the source tree (python/) with FLASHMSA_LIBRARY set."""
import contextlib
import os
import re
import sys

import pytest
import torch

try:
    import flashmsa  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

torch.set_num_threads(max(1, os.cpu_count() or 1))


def make(shape, dtype, seed, requires_grad=False):
    """A tensor of dtype values drawn from N(0, 1) with its own seed."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)
    return t.requires_grad_(requires_grad)


@pytest.fixture
def rng_tensor():
    return make


# What each backend's feature gate (common/feature_gate.c) says when it refuses
# a feature its kernels lack.
GATE_MESSAGES = {
    "sinks": r"attention sinks \(desc\.sinks\) are not supported by this backend",
    "dlse": r"the lse gradient \(dlse\) is not supported by this backend",
    "dim_v": r"a value head dim of its own is not supported by this backend",
    "large_dim": r"this backend runs head dims up to",
    "merge": r"fmsa_merge_states is not supported by this backend",
    # a backend without kernels for a dtype in a pass (CUDA: f32 past head dim 256)
    "dtype": r"runs bf16 and f16 inputs|f32 inputs are not supported by this backend|in f32",
}


def required_features():
    """FLASHMSA_TEST_REQUIRE: features (comma separated, or "all") whose
    refusal fails the test instead of skipping it."""
    names = {n.strip() for n in os.environ.get("FLASHMSA_TEST_REQUIRE", "").split(",")}
    return set(GATE_MESSAGES) if "all" in names else names & set(GATE_MESSAGES)


@contextlib.contextmanager
def backend_feature(*features):
    """Runs a test body that needs features a backend may not have yet.  It
    skips only when the library refuses one of them with the gate's own
    message (not supported by this backend), and fails when that feature is
    in FLASHMSA_TEST_REQUIRE; any other error, a wrong result included, fails
    as usual, and a library that has the feature runs the test for real.  The
    dtype gate (a backend without fp32 kernels) always counts as one of them."""
    import flashmsa
    try:
        yield
    except Exception as e:  # noqa: BLE001 - torch may wrap the library's error (opcheck)
        refusal = e
        while refusal is not None and not isinstance(refusal, flashmsa.NotSupportedError):
            refusal = refusal.__cause__ or refusal.__context__
        for f in (features + ("dtype",)) if refusal is not None else ():
            if re.search(GATE_MESSAGES[f], refusal.message):
                if f in required_features():
                    raise AssertionError(f"FLASHMSA_TEST_REQUIRE has {f}, and the library "
                                         f"refused it: {refusal.message}") from e
                pytest.skip(f"the library says: {refusal.message}")
        raise
