"""examples/torch/fit_image.py runs on the CPU, lowers the loss and writes a valid PNG."""
import importlib.util
import struct
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "torch" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fit_image_example(tmp_path):
    fit = _load("fit_image")
    out = tmp_path / "fit.png"
    r = fit.main(["--size", "32", "--steps", "60", "--out", str(out)])
    assert r["final_mse"] < 0.5 * r["first_mse"]
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert (w, h) == (64, 32)
    idat = data.index(b"IDAT")
    n = struct.unpack(">I", data[idat - 4:idat])[0]
    raw = np.frombuffer(zlib.decompress(data[idat + 4: idat + 4 + n]), np.uint8).reshape(32, 65)
    img = raw[:, 1:].astype(np.float32) / 255
    tgt = fit.target_image(32)
    np.testing.assert_allclose(img[:, :32], tgt, atol=1 / 255 + 1e-6)      # the left half is the target
    assert np.mean((img[:, 32:] - tgt) ** 2) < 0.5 * r["first_mse"] + 1e-3  # the right half is the fit
