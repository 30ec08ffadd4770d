"""The README's Python example runs and computes what its comments say."""
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example():
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(block, "README.md", "exec"), ns)
    np.testing.assert_array_equal(ns["y"].to_numpy(), [9, 23, 41, 63])
    np.testing.assert_array_equal(ns["x"].grad.to_numpy(), [12, 16, 20, 24])


def test_readme_has_exactly_two_setup_commands():
    text = README.read_text()
    sh_blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert len(sh_blocks) == 2
    assert sh_blocks[0].strip().endswith("python examples/mlp_training/train.py")
    assert sh_blocks[1].strip().endswith("python -m pytest -q tests")
    ci = (README.parent / ".ci" / "run").read_text()
    install = re.search(r"pip install -e '([^']+)'", sh_blocks[1]).group(1)
    assert f"pip install -e '{install}'" in ci and "python -m pytest -q tests" in ci
