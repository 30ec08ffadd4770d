"""The functional layer takes its types from the compiler (issue 14, item 5).

`struct S : IDifferentiable { float x; int n; float y; }`: the compiler synthesizes S.Differential = {x, y}
(8 bytes); `.bwds` over a Tensor of S gives gradients for x and y only, n untouched, and the gradient tensors
have the Differential's layout.  Checked on the CPU (direct and through the staged path a GPU takes), and the
generated CUDA kernel compiles with NVRTC.
"""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.reflect_decls import ModuleDecls, layout
from slangjit.compiler import types as T

SRC = r"""
import slangpy;
struct S : IDifferentiable { float x; int n; float y; };

[Differentiable]
S f(S s) { S r; r.x = s.x * s.y; r.n = s.n * 2; r.y = s.x + sin(s.y); return r; }

[Differentiable]
float g(S s, float w) { return w * s.x * s.x + s.y * float(s.n); }
"""
S_DT = np.dtype([("x", "<f4"), ("n", "<i4"), ("y", "<f4")])
D_DT = np.dtype([("x", "<f4"), ("y", "<f4")])


def _device(staged: bool):
    d = spy.create_device(spy.DeviceType.cpu)
    d.functional_staged = staged
    return d


def _s_values():
    a = np.zeros(5, S_DT)
    a["x"] = [1.0, 2.0, -0.5, 3.0, 0.25]
    a["n"] = [5, 6, 7, 8, 9]
    a["y"] = [0.5, 1.0, 1.5, -2.0, 0.1]
    return a


def test_reflection_synthesizes_the_compilers_differential():
    decls = ModuleDecls.load(SRC, "s.slang", [spy.SHADER_PATH])
    s = decls.find_type("S")
    d = decls.differential(s)
    assert [n for n, _ in decls.fields(d)] == ["x", "y"]
    assert layout(s).size == 12 and layout(d).size == 8
    assert [(f.name, f.offset) for f in layout(d).fields] == [("x", 0), ("y", 4)]
    [f] = decls.functions("f")
    assert f.differentiable and f.params[0].type is s and f.return_type is s
    assert decls.find_type("vector<float,3>") == T.VectorType(T.FLOAT, 3)
    assert str(decls.find_type("Tensor<float,2>")) == "Tensor<float,2>"
    assert decls.find_type("NoSuchType") is None


@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
def test_struct_differential_layout_and_fwd(staged):
    dev = _device(staged)
    m = spy.Module.load_from_source(dev, "sdiff", SRC)
    assert m.S.derivative.fields.keys() == {"x", "y"}
    assert m.S.type.size == 12 and m.S.derivative.type.size == 8
    a = _s_values()
    t = spy.Tensor.from_numpy(dev, a, target_slang_dtype=m.S)
    r = m.f(t, _result="tensor").to_numpy().view(S_DT).reshape(-1)
    np.testing.assert_allclose(r["x"], a["x"] * a["y"], rtol=1e-6)
    np.testing.assert_array_equal(r["n"], a["n"] * 2)
    np.testing.assert_allclose(r["y"], a["x"] + np.sin(a["y"]), rtol=1e-6)
    # a dict is an S value too; the result comes back as a dict
    out = m.f({"x": 2.0, "n": 3, "y": 0.5})
    assert out["n"] == 6 and out["x"] == pytest.approx(1.0) and out["y"] == pytest.approx(2.0 + np.sin(0.5))


@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
def test_bwds_over_tensor_of_struct(staged):
    check_bwds_over_tensor_of_struct(_device(staged))


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_bwds_over_tensor_of_struct_on_cuda(device):
    """The same .bwds run on the CUDA device (skips without a usable GPU)."""
    check_bwds_over_tensor_of_struct(device)


def check_bwds_over_tensor_of_struct(dev):
    m = spy.Module.load_from_source(dev, "sdiff", SRC)
    a = _s_values()
    t = spy.Tensor.from_numpy(dev, a, target_slang_dtype=m.S).with_grads()
    assert t.grad_out.dtype.name == "S.Differential" and t.grad_out.dtype.size == 8
    r = m.f(t, _result="tensor").with_grads()
    assert r.grad_in.dtype.size == 8
    up = np.zeros(5, D_DT)
    up["x"] = [1.0, -2.0, 0.5, 1.5, 3.0]
    up["y"] = [0.25, 1.0, -1.0, 2.0, 0.5]
    r.grad_in.copy_from_numpy(up)
    m.f.bwds(t, _result=r)
    g = t.grad_out.to_numpy().view(D_DT).reshape(-1)
    # r.x = x*y, r.y = x + sin(y):  dx = ux*y + uy,  dy = ux*x + uy*cos(y)
    np.testing.assert_allclose(g["x"], up["x"] * a["y"] + up["y"], rtol=1e-5)
    np.testing.assert_allclose(g["y"], up["x"] * a["x"] + up["y"] * np.cos(a["y"]), rtol=1e-5)
    after = t.to_numpy().view(S_DT).reshape(-1)
    np.testing.assert_array_equal(after, a)                   # primal (n included) untouched


@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
def test_bwds_broadcast_struct_accumulates_atomically(staged):
    """One S broadcast over a call of 4: its gradient is the sum over the call (the atomic path)."""
    check_bwds_broadcast_struct(_device(staged))


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_bwds_broadcast_struct_on_cuda(device):
    check_bwds_broadcast_struct(device)


def check_bwds_broadcast_struct(dev):
    m = spy.Module.load_from_source(dev, "sdiff", SRC)
    a = np.zeros(1, S_DT)
    a["x"], a["n"], a["y"] = 1.5, 3, -0.75
    s = spy.Tensor.from_numpy(dev, a, target_slang_dtype=m.S).with_grads()
    w_np = np.array([0.5, 1.0, 2.0, -1.0], np.float32)
    w = spy.Tensor.from_numpy(dev, w_np).with_grads()
    res = m.g(s, w, _result="tensor")
    np.testing.assert_allclose(res.to_numpy(), w_np * 1.5 ** 2 + (-0.75) * 3, rtol=1e-6)
    res = res.with_grads()
    res.grad_in.copy_from_numpy(np.ones(4, np.float32))
    m.g.bwds(s, w, _result=res)
    gs = s.grad_out.to_numpy().view(D_DT).reshape(-1)
    # g = w*x^2 + y*n: dx = sum(2*w*x), dy = sum(n)
    assert gs["x"][0] == pytest.approx(float(np.sum(2 * w_np * 1.5)), rel=1e-5)
    assert gs["y"][0] == pytest.approx(4 * 3.0, rel=1e-5)
    np.testing.assert_allclose(w.grad_out.to_numpy(), np.full(4, 1.5 ** 2), rtol=1e-6)


def test_bwds_matches_finite_differences():
    dev = _device(False)
    m = spy.Module.load_from_source(dev, "sdiff", SRC)
    a = _s_values()
    up = np.zeros(5, D_DT)
    up["x"], up["y"] = 1.0, 1.0

    def loss(arr):
        out = m.f(spy.Tensor.from_numpy(dev, arr, target_slang_dtype=m.S), _result="tensor")
        o = out.to_numpy().view(S_DT).reshape(-1).astype([("x", "<f8"), ("n", "<i4"), ("y", "<f8")])
        return o["x"] + o["y"]

    t = spy.Tensor.from_numpy(dev, a, target_slang_dtype=m.S).with_grads()
    r = m.f(t, _result="tensor").with_grads()
    r.grad_in.copy_from_numpy(up)
    m.f.bwds(t, _result=r)
    g = t.grad_out.to_numpy().view(D_DT).reshape(-1)
    h = 1e-2
    for field in ("x", "y"):
        ap, am = a.copy(), a.copy()
        ap[field] += h
        am[field] -= h
        np.testing.assert_allclose(g[field], (loss(ap) - loss(am)) / (2 * h), rtol=2e-2, atol=2e-3)


def test_bwds_kernel_for_struct_compiles_with_nvrtc():
    """The `.bwds` kernel a GPU call generates (256 threads, several elements per thread) as CUDA C++, compiled
    with NVRTC to PTX (the GPU run itself is in the GPU checks)."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    dev = _device(True)
    m = spy.Module.load_from_source(dev, "sdiff", SRC)
    t = spy.Tensor.from_numpy(dev, _s_values(), target_slang_dtype=m.S).with_grads()
    r = m.f(t, _result="tensor").with_grads()
    cd = m.f.bwds.debug_build_call_data(t, _result=r)
    for code in (cd.code, cd._codegen(cd._gen_args, nt=256, unroll=4)):
        assert "S.Differential" in code and "InterlockedAdd" in code
        prog = compile_program([SourceSpec(path="sdiff.slang", text=m._source_text + "\n" + code, name="sdiff")],
                               ["_sj_main"], target="cuda", include_paths=[spy.SHADER_PATH])
        ptx, _log = cuda_compiler.compile_source(prog.source, "compute_90")
        assert b".entry" in ptx
