"""The README's Python examples run exactly as printed: the first block, then
the sinks / lse / merge_states block in the same scope."""
import os
import re

import torch

from conftest import backend_feature

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def _blocks():
    text = open(README, encoding="utf-8").read()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)
    assert len(blocks) >= 2, "expected the example and the sinks/merge block in README.md"
    return blocks


def test_readme_example():
    scope = {}
    exec(compile(_blocks()[0], "README.md", "exec"), scope)
    o, q = scope["o"], scope["q"]
    assert o.shape == (2, 1024, 8, 64) and q.grad is not None and torch.isfinite(q.grad).all()


def test_readme_sinks_and_merge_example():
    blocks = _blocks()
    scope = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    with backend_feature("sinks", "dlse"):
        exec(compile(blocks[1], "README.md", "exec"), scope)
    assert scope["sinks"].grad is not None and torch.isfinite(scope["sinks"].grad).all()
    assert scope["o12"].shape == (2, 1024, 8, 64) and scope["l12"].shape == (2, 8, 1024)
