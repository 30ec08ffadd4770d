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
