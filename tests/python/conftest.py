"""Shared fixtures: torch on as many threads as the machine has cores, and
problems built from a seed.  flashmsa is imported from where pip installed it,
or from the source tree (python/) with FLASHMSA_LIBRARY set."""
import os
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
