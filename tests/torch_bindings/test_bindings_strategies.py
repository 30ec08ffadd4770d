"""Every differentiable view of seed 004 (DiffTensorView, ...AA load / loadFixed / loadUniform /
loadUniformOnce, ...R<T, N>, ...ASR<T, N>): gradients against float64 finite differences of the kernel's own
forward launch, plus each strategy's documented contract; element types double, float, half, float3."""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import slangjit.torch as st                                     # noqa: E402

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
N = 10
BS, GS = (32, 1, 1), (1, 1, 1)


@pytest.fixture(scope="module")
def m64(device):
    SLANG = Path(__file__).resolve().parent / "slang"
    return st.loadModule(str(SLANG / "strategies.slang"), defines={"T": "double"})


def _fwd(kernel, ins: dict, n=N):
    y = torch.zeros(n, dtype=torch.float64, device=next(iter(ins.values())).device)
    kernel(**ins, y=y).launchRaw(blockSize=BS, gridSize=GS)
    return y


def _fd_grads(kernel, ins: dict, gy, h=1e-6):
    """d(sum(gy * y)) / d(input) by central differences in float64."""
    out = {}
    for name, x in ins.items():
        g = torch.zeros_like(x)
        for j in range(x.numel()):
            xp, xm = x.clone(), x.clone()
            xp.view(-1)[j] += h
            xm.view(-1)[j] -= h
            lp = (gy * _fwd(kernel, {**ins, name: xp})).sum()
            lm = (gy * _fwd(kernel, {**ins, name: xm})).sum()
            g.view(-1)[j] = (lp - lm) / (2 * h)
        out[name] = g
    return out


def _bwd(kernel, ins: dict, gy, init=None):
    grads = {k: (torch.zeros_like(v) if init is None else init[k].clone()) for k, v in ins.items()}
    y = torch.zeros_like(gy)
    gyc = gy.clone()
    kernel.bwd(**{k: (v, grads[k]) for k, v in ins.items()}, y=(y, gyc)).launchRaw(blockSize=BS, gridSize=GS)
    return grads, gyc


def _check(kernel, ins, tdev):
    gen = torch.Generator().manual_seed(5)
    gy = torch.rand(N, generator=gen, dtype=torch.float64).to(tdev)
    fd = _fd_grads(kernel, ins, gy)
    got, gy_after = _bwd(kernel, ins, gy)
    for k in ins:
        assert torch.allclose(got[k], fd[k], rtol=1e-6, atol=1e-6), (k, got[k], fd[k])
    return got, gy, gy_after


def _x(n, tdev, seed=1):
    return (torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + 0.5).to(tdev)


def test_difftensorview_load_store(m64, tdev):
    ins = {"x": _x(3, tdev)}
    got, gy, gy_after = _check(m64.atomic_load, ins, tdev)
    assert torch.equal(gy_after, torch.zeros_like(gy))       # store's backward reads and zeroes dL/dy


def test_difftensorview_once(m64, tdev):
    ins = {"x": _x(N, tdev)}
    got, gy, gy_after = _check(m64.once_ops, ins, tdev)
    assert torch.equal(gy_after, gy)                          # storeOnce's backward only reads dL/dy
    init = {"x": torch.full((N,), 100., dtype=torch.float64, device=tdev)}
    again, _ = _bwd(m64.once_ops, ins, gy, init)
    assert torch.allclose(again["x"], got["x"])               # loadOnce's backward assigns (=), no +=
    # fwd: tangents through loadOnce / storeOnce
    x = ins["x"]
    xd = torch.ones_like(x)
    y, yd = torch.zeros_like(x), torch.zeros_like(x)
    m64.once_ops.fwd(x=(x, xd), y=(y, yd)).launchRaw(blockSize=BS, gridSize=GS)
    assert torch.allclose(yd, torch.cos(x) * x + torch.sin(x))


def test_aa_load_fixed(m64, tdev):
    ins = {"x": _x(N, tdev), "b": _x(2, tdev, 2)}
    got, gy, _ = _check(m64.aa_fixed, ins, tdev)
    assert torch.allclose(got["b"], torch.stack([(gy * ins["x"]).sum(), gy.sum()]))


def test_aa_load_uniform_accumulates(m64, tdev):
    ins = {"x": _x(N, tdev)}
    got, gy, _ = _check(m64.aa_uniform, ins, tdev)
    init = {"x": torch.full((N,), 1.0, dtype=torch.float64, device=tdev)}
    again, _ = _bwd(m64.aa_uniform, ins, gy, init)
    assert torch.allclose(again["x"], got["x"] + 1.0)         # loadUniform's backward is +=


def test_aa_load_uniform_once_assigns(m64, tdev):
    ins = {"x": _x(N, tdev)}
    got, gy, _ = _check(m64.aa_uniform_once, ins, tdev)
    init = {"x": torch.full((N,), 7.0, dtype=torch.float64, device=tdev)}
    again, _ = _bwd(m64.aa_uniform_once, ins, gy, init)
    assert torch.allclose(again["x"], got["x"])               # loadUniformOnce's backward is =


def test_replicated(m64, tdev):
    ins = {"x": _x(3, tdev)}
    got, gy, _ = _check(m64.replicated, ins, tdev)
    init = {"x": torch.full((3,), 2.0, dtype=torch.float64, device=tdev)}
    again, _ = _bwd(m64.replicated, ins, gy, init)
    assert torch.allclose(again["x"], got["x"] + 2.0)         # the after step adds the replicas' sum


def test_scatter_reduce(m64, tdev):
    ins = {"x": _x(5, tdev)}
    _check(m64.scatter_reduce, ins, tdev)                     # includes loads past the N=2 slots per thread


def test_float_matches_double(tdev):
    SLANG = Path(__file__).resolve().parent / "slang"
    m32 = st.loadModule(str(SLANG / "strategies.slang"), defines={"T": "float"})
    x = _x(N, tdev).float()
    b = _x(2, tdev, 2).float()
    gy = torch.ones(N, device=tdev)
    gx, gb, y = torch.zeros_like(x), torch.zeros_like(b), torch.zeros(N, device=tdev)
    m32.aa_fixed.bwd(x=(x, gx), b=(b, gb), y=(y, gy)).launchRaw(blockSize=BS, gridSize=GS)
    assert torch.allclose(gb, torch.stack([x.sum(), torch.tensor(float(N), device=tdev)]), rtol=1e-5)
    assert torch.allclose(gx, b[0].expand(N))


def test_vector_and_half_elements(tdev):
    SLANG = Path(__file__).resolve().parent / "slang"
    m = st.loadModule(str(SLANG / "vec_half.slang"))
    x = torch.randn(6, 3, device=tdev)
    gx, y, gy = torch.zeros_like(x), torch.zeros(6, device=tdev), torch.rand(6, device=tdev)
    m.norm2(x=x, y=y).launchRaw(blockSize=BS, gridSize=GS)
    assert torch.allclose(y, (x * x).sum(1))
    m.norm2.bwd(x=(x, gx), y=(y, gy.clone())).launchRaw(blockSize=BS, gridSize=GS)
    assert torch.allclose(gx, 2 * x * gy[:, None])
    with pytest.raises(ValueError, match="last dimension of 3"):
        m.norm2(x=torch.zeros(6, 4, device=tdev), y=y).launchRaw(blockSize=BS, gridSize=GS)
    xh = torch.tensor([1., 2., 3., 4.], dtype=torch.half, device=tdev)
    bh = torch.tensor([0.5], dtype=torch.half, device=tdev)
    gxh, gbh = torch.zeros_like(xh), torch.zeros_like(bh)
    yh, gyh = torch.zeros_like(xh), torch.ones_like(xh)
    m.half_fixed.bwd(x=(xh, gxh), b=(bh, gbh), y=(yh, gyh)).launchRaw(blockSize=BS, gridSize=GS)
    assert torch.equal(gbh.cpu(), torch.tensor([10.], dtype=torch.half))
    assert torch.equal(gxh.cpu(), torch.full((4,), 0.5, dtype=torch.half))


def test_waves_have_the_backend_width(tdev):
    SLANG = Path(__file__).resolve().parent / "slang"
    m = st.loadModule(str(SLANG / "vec_half.slang"))
    out = torch.zeros(64, dtype=torch.int32, device=tdev)
    with pytest.raises(TypeError, match="torch.uint32"):
        m.lanes(result=out).launchRaw(blockSize=(64, 1, 1), gridSize=(1, 1, 1))
    if not hasattr(torch, "uint32"):
        return
    out = torch.zeros(64, dtype=torch.uint32, device=tdev)
    m.lanes(result=out).launchRaw(blockSize=(64, 1, 1), gridSize=(1, 1, 1))
    width = 1 if tdev == "cpu" else 32                        # the CPU backend's wave is one thread
    assert torch.equal(out.cpu().to(torch.int64), torch.full((64,), width * 1000 + width, dtype=torch.int64))


def test_eight_dims_strided(tdev):
    SLANG = Path(__file__).resolve().parent / "slang"
    m = st.loadModule(str(SLANG / "vec_half.slang"))
    base = torch.randn(2, 3, 2, 2, 1, 2, 3, 4, device=tdev)
    x = base.transpose(0, 7)                                  # strided, no copy
    y = torch.zeros(x.numel(), device=tdev)
    m.dims8(x=x, y=y).launchRaw(blockSize=(1, 1, 1), gridSize=(1, 1, 1))
    assert torch.equal(y, x.contiguous().view(-1))
    with pytest.raises(ValueError, match="at most 8"):
        m.dims8(x=torch.zeros([1] * 9, device=tdev), y=y).launchRaw(blockSize=(1, 1, 1), gridSize=(1, 1, 1))
