"""Fit a 2-D image with a Slang function inside an nn.Module, trained with torch.optim.Adam.

    python examples/torch/fit_image.py                      # CPU, ~200 steps, writes fit_image.png
    python examples/torch/fit_image.py --cuda --size 256    # on the GPU

The model (blobs.slang) is a sum of K Gaussian blobs through a sigmoid, evaluated per pixel by a Slang
function; its parameters are ordinary nn.Parameters and their gradients come from torch.autograd (the
call's .bwds kernel).  The PNG shows the target and the fit side by side (a numpy-only PNG writer, below).
"""
from __future__ import annotations

import argparse
import os
import struct
import time
import zlib

import numpy as np
import torch

import slangjit as spy

HERE = os.path.dirname(os.path.abspath(__file__))
K = 24


def target_image(n: int) -> np.ndarray:
    """A ring and a disk on a soft background, in [0, 1]."""
    y, x = np.mgrid[0:n, 0:n] / (n - 1) * 2 - 1
    r = np.hypot(x + 0.25, y + 0.1)
    ring = np.exp(-((r - 0.45) / 0.08) ** 2)
    disk = 1 / (1 + np.exp((np.hypot(x - 0.45, y - 0.35) - 0.2) / 0.02))
    return np.clip(0.15 + 0.8 * ring + 0.7 * disk, 0, 1).astype(np.float32)


class Blobs(torch.nn.Module):
    def __init__(self, module, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.render = module.render
        self.cx = torch.nn.Parameter(torch.rand(1, K, generator=g) * 1.6 - 0.8)
        self.cy = torch.nn.Parameter(torch.rand(1, K, generator=g) * 1.6 - 0.8)
        self.size = torch.nn.Parameter(torch.full((1, K), 0.3))
        self.weight = torch.nn.Parameter(torch.randn(1, K, generator=g) * 0.5)

    def forward(self, p):                       # p: (N, 2) pixel centres in [-1, 1]
        return self.render(p, self.cx, self.cy, self.size, self.weight)


def write_png(path: str, img: np.ndarray) -> None:
    """An 8-bit greyscale PNG from a float image in [0, 1] (zlib + the three chunks a PNG needs)."""
    a = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
    h, w = a.shape
    raw = b"".join(b"\x00" + a[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default="fit_image.png")
    a = ap.parse_args(argv)
    tdev = torch.device("cuda") if a.cuda else torch.device("cpu")
    device = spy.create_torch_device(tdev)
    module = spy.Module.load_from_file(device, os.path.join(HERE, "blobs.slang"))
    n = a.size
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, n), torch.linspace(-1, 1, n), indexing="ij")
    p = torch.stack([xs, ys], -1).reshape(-1, 2).to(tdev)
    tgt = torch.from_numpy(target_image(n)).reshape(-1).to(tdev)
    model = Blobs(module).to(tdev)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    t0 = time.perf_counter()
    first = None
    for step in range(a.steps):
        opt.zero_grad()
        loss = ((model(p) - tgt) ** 2).mean()
        loss.backward()
        opt.step()
        if first is None:
            first = loss.item()
        if step % 50 == 0 or step == a.steps - 1:
            print(f"step {step:4d}  mse {loss.item():.5f}", flush=True)
    secs = time.perf_counter() - t0
    with torch.no_grad():
        fit = model(p).reshape(n, n).cpu().numpy()
    write_png(a.out, np.concatenate([tgt.reshape(n, n).cpu().numpy(), fit], axis=1))
    print(f"{a.steps} Adam steps in {secs:.2f} s; wrote {a.out}")
    return {"first_mse": first, "final_mse": loss.item(), "seconds": secs}


if __name__ == "__main__":
    main()
