"""Two processes loading (and launching) the same new module at once, on one empty cache folder: both succeed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

CHILD = r"""
import sys, torch, slangjit.torch as st
m = st.loadModule(sys.argv[1])
x = torch.arange(8.); y = torch.zeros(8)
m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
assert torch.equal(y, x * x), y
print("ok")
"""


def test_two_processes_load_at_once(slang_dir, tmp_path):
    src = tmp_path / "square.slang"
    src.write_text((slang_dir / "square.slang").read_text().replace("input[i.x] * input[i.x]",
                                                                      "input[i.x] * input[i.x] + 0.0"))
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(src)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "ok"
    assert sorted(os.listdir(tmp_path)) == ["cache", "square.slang"]
