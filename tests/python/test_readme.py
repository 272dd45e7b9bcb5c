"""The README's Python example runs exactly as printed."""
import os
import re

import torch

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_example():
    text = open(README, encoding="utf-8").read()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)
    assert blocks, "no ```python block in README.md"
    scope = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    o, q = scope["o"], scope["q"]
    assert o.shape == (2, 1024, 8, 64) and q.grad is not None and torch.isfinite(q.grad).all()
