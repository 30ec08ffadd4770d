"""Device-independent parts of the torch integration: create_torch_device, lazy import."""
import numpy as np
import torch

import slangjit as spy
from torch_src import SRC


def test_create_torch_device():
    dev = spy.create_torch_device("cpu")
    m = spy.Module.load_from_source(dev, "torch_dev", SRC)
    assert m.module is m.device_module
    np.testing.assert_allclose(m.add_f(torch.ones(2), 1.0).numpy(), [2, 2])


def test_import_slangjit_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, slangjit; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_readme_torch_example():
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    ns: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)
    exec(compile(blocks[1], "README.md", "exec"), ns)
    np.testing.assert_array_equal(ns["x"].grad.cpu().numpy(), [12, 16, 20, 24])
