"""Generated kernels: several call elements per thread (`unroll`) and the linear kernel variant.

A generated kernel reads all the arguments of its `unroll` elements before the first call (so that a GPU thread
has several independent loads in flight), and for multi-dimensional calls a second variant addresses every view
as offset + flat index * one stride, chosen per call on the host when every view allows it (contiguous,
row-offset, fully broadcast).  These tests check real values against numpy for both variants and several unroll
factors on the CPU device, that the linear variant is taken exactly when it should be, and that the CUDA kernels
generated for a GPU (256 threads, unroll 4) compile with NVRTC with their loads ahead of their stores."""
from __future__ import annotations

import re

import numpy as np
import pytest

import slangjit as spy

SRC = r"""
[Differentiable]
float mad3(float a, float b, float c) { return a * b + c; }
[Differentiable]
float poly(float a, float b, float c, float x) { return a * x * x + b * x + c; }
float3 scale3(float3 v, float s) { return v * s; }
void split(float a, out float lo, inout float acc) { lo = a - 1; acc = acc + a; }
int ida(int id[2]) { return id[0] * 1000 + id[1]; }
uint tid(uint t) { return t; }
"""


# Tests of the generated kernels' values run on the CPU and CUDA devices (tests/conftest.py `device`; CUDA is
# skipped without a usable GPU); the others use the default (CPU) device.
CPU_AND_CUDA = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


@pytest.fixture(params=[1, 3, 4], ids=lambda u: f"unroll{u}")
def m(request, device, monkeypatch):
    """A fresh module (fresh call caches) whose kernels handle `unroll` elements per thread (on a GPU as well,
    whatever the size of the call)."""
    monkeypatch.setenv("SLANGJIT_FUNCTIONAL_UNROLL", str(request.param))
    monkeypatch.setenv("SLANGJIT_FUNCTIONAL_RESIDENT_THREADS", "1")
    mod = spy.Module.load_from_source(device, f"fastpath{request.param}", SRC)
    mod.unroll = request.param
    return mod


def _cd(node):
    """The one CallData of a function node (each test makes one call signature per node)."""
    (cd,) = node._cache.values()
    return cd


def _ints(rng, shape):
    # small integers: every product and sum below is exact in float32, whatever the evaluation order
    return rng.integers(-8, 9, shape).astype(np.float32)


@CPU_AND_CUDA
def test_unroll_factor_is_used(m, device):
    x = spy.Tensor.from_numpy(device, np.arange(5, dtype=np.float32))
    m.mad3(2.0, x, 1.0)
    cd = _cd(m.mad3)
    assert cd.unroll == m.unroll
    assert ("_sj_flat_1" in cd.code) == (m.unroll > 1)


@CPU_AND_CUDA
def test_fewer_elements_per_thread_for_small_calls(m, device):
    # On a GPU a call runs u = n / resident threads elements per thread (1 <= u <= unroll); the CPU device uses
    # unroll, so pretend to hold 100 threads: u is 1, 2, 3 ... by the size of the call.
    rng = np.random.default_rng(6)
    x0 = spy.Tensor.from_numpy(device, np.ones(4, np.float32))
    m.mad3(x0, x0, 1.0)
    cd = _cd(m.mad3)
    cd.resident = 100
    for n in (1, 50, 99, 100, 201, 250, 333, 399, 1000, 4097):
        a, b = _ints(rng, n), _ints(rng, n)
        r = m.mad3(spy.Tensor.from_numpy(device, a), spy.Tensor.from_numpy(device, b), 1.0)
        np.testing.assert_array_equal(r.to_numpy(), a * b + 1, err_msg=f"n={n}")


def test_gpu_unroll_policy(device, monkeypatch):
    # the factor a GPU device would get: by the container bytes each element moves, 1 without containers
    monkeypatch.delenv("SLANGJIT_FUNCTIONAL_UNROLL", raising=False)
    mod = spy.Module.load_from_source(device, "fastpath_policy", SRC)
    x = spy.Tensor.from_numpy(device, np.ones(64, np.float32)).with_grads(zero=True)
    y = mod.poly(2.0, 8.0, -1.0, x).with_grads()
    want = [(mod.poly.debug_build_call_data(2.0, 8.0, -1.0, x, _result=y), 8),     # 8 bytes per element
            (mod.poly.bwds.debug_build_call_data(2.0, 8.0, -1.0, x, y), 4),        # 16 bytes
            (mod.scale3.debug_build_call_data(np.ones((4, 3), np.float32), 2.0,
                                              _result=np.zeros((4, 3), np.float32)), 2),   # 24 bytes
            (mod.tid.debug_build_call_data(spy.thread_id(), _result=np.zeros(4, np.uint32)), 8),
            (mod.mad3.debug_build_call_data(1.0, 2.0, 3.0), 1)]                    # no containers
    for cd, u in want:
        assert cd.unroll == 1                         # the CPU device runs its threads in order
        cd.gpu = True
        assert cd._pick_unroll() == u, cd.code


@CPU_AND_CUDA
@pytest.mark.parametrize("shape", [(37, 53), (1, 1000), (7, 1), (3, 5, 11), (2, 1)])
def test_contiguous_2d_takes_linear_kernel(m, device, shape):
    rng = np.random.default_rng(1)
    a, b, c = (_ints(rng, shape) for _ in range(3))
    ta, tb, tc = (spy.Tensor.from_numpy(device, v) for v in (a, b, c))
    r = m.mad3(ta, tb, tc)
    np.testing.assert_array_equal(r.to_numpy(), a * b + c)
    cd = _cd(m.mad3)
    assert cd.last_linear
    assert "_sj_cid" not in cd.code_linear and "_sj_cid" in cd.code


def _views(device, base: np.ndarray) -> dict:
    """name -> (tensor view, the same values in numpy, linear kernel expected) for an [8, 12] call; base: [12, 24]."""
    t = spy.Tensor.from_numpy(device, base)
    tt = spy.Tensor.from_numpy(device, np.ascontiguousarray(base[:12, :8]))     # [12, 8]
    return {
        "contiguous": (spy.Tensor.from_numpy(device, np.ascontiguousarray(base[:8, :12])), base[:8, :12], True),
        "column_slice": (t[:8, :12], base[:8, :12], False),             # row stride 24, rows of 12
        "every_other": (t[:8, ::2], base[:8, ::2], True),               # offset 2 * flat
        "transposed": (tt.view((8, 12), (1, 8)), base[:12, :8].T, False),
        "row_broadcast": (spy.Tensor.from_numpy(device, base[0, :12].copy()).broadcast_to((8, 12)),
                          np.broadcast_to(base[0, :12], (8, 12)), False),
        "col_broadcast": (spy.Tensor.from_numpy(device, base[:8, :1].copy()).broadcast_to((8, 12)),
                          np.broadcast_to(base[:8, :1], (8, 12)), False),
        "scalar_broadcast": (spy.Tensor.from_numpy(device, base[:1, :1].copy()).broadcast_to((8, 12)),
                             np.broadcast_to(base[:1, :1], (8, 12)), True),
    }


@CPU_AND_CUDA
@pytest.mark.parametrize("which", ["contiguous", "column_slice", "every_other", "transposed", "row_broadcast",
                                   "col_broadcast", "scalar_broadcast"])
def test_views_match_numpy_and_pick_the_variant(m, device, which):
    rng = np.random.default_rng(2)
    base = _ints(rng, (12, 24))
    b = _ints(rng, (8, 12))
    c = _ints(rng, (8, 12))
    tb, tc = spy.Tensor.from_numpy(device, b), spy.Tensor.from_numpy(device, c)
    v, nv, lin = _views(device, base)[which]
    # a contiguous call first (linear kernel), then the view in each position, then contiguous again: one
    # CallData switching between its two kernels
    m.mad3(tb, tb, tc)
    for pos in range(3):
        args = [tb, tb, tc]
        args[pos] = v
        r = m.mad3(*args)
        nargs = [b, b, c]
        nargs[pos] = nv
        np.testing.assert_array_equal(r.to_numpy(), nargs[0] * nargs[1] + nargs[2], err_msg=f"{which} at {pos}")
        assert _cd(m.mad3).last_linear == lin, (which, pos)
    r = m.mad3(tb, tb, tc)
    np.testing.assert_array_equal(r.to_numpy(), b * b + c)
    assert _cd(m.mad3).last_linear


@CPU_AND_CUDA
def test_contiguous_rows_at_an_offset_are_linear(m, device):
    rng = np.random.default_rng(3)
    base = _ints(rng, (10, 12))
    v = spy.Tensor.from_numpy(device, base)[2:9]          # rows 2..8: row-major, offset 24
    b = _ints(rng, (7, 12))
    r = m.mad3(v, spy.Tensor.from_numpy(device, b), 0.5)
    np.testing.assert_array_equal(r.to_numpy(), base[2:9] * b + np.float32(0.5))
    assert _cd(m.mad3).last_linear


@CPU_AND_CUDA
def test_numpy_vector_elements_linear(m, device):
    # float3 from the last numpy dimension (element strides) over a 2-D call
    rng = np.random.default_rng(4)
    v = _ints(rng, (5, 7, 3))
    r = m.scale3(v, 2.0, _result=np.zeros((5, 7, 3), np.float32))
    np.testing.assert_array_equal(r, v * 2)
    assert _cd(m.scale3).last_linear
    r = m.scale3(np.ascontiguousarray(v.transpose(1, 0, 2)).transpose(1, 0, 2), 3.0,
                 _result=np.zeros((5, 7, 3), np.float32))
    np.testing.assert_array_equal(r, v * 3)


@CPU_AND_CUDA
def test_out_and_inout_with_tail(m, device):
    # sizes that leave a partly filled last group (CPU group: 32 threads x unroll elements)
    for n in (1, 31, 33, 100, 129, 1000):
        a = np.arange(n, dtype=np.float32)
        lo = np.zeros(n, np.float32)
        acc = np.full(n, 10, np.float32)
        m.split(a, lo, acc)
        np.testing.assert_array_equal(lo, a - 1)
        np.testing.assert_array_equal(acc, a + 10)


@CPU_AND_CUDA
def test_generators_under_unroll(m, device):
    r = m.ida(spy.call_id(), _result=np.zeros((9, 17), np.int32))
    rows, cols = np.meshgrid(np.arange(9), np.arange(17), indexing="ij")
    np.testing.assert_array_equal(r, rows * 1000 + cols)
    assert _cd(m.ida).last_linear           # the linear kernel splits the index only for call_id
    t = m.tid(spy.thread_id(), _result=np.zeros(77, np.uint32))
    np.testing.assert_array_equal(t, np.arange(77))


@CPU_AND_CUDA
def test_poly_fwd_bwds_1d(m, device):
    n = 1000
    xs = (np.arange(n) % 9 - 4).astype(np.float32)
    x = spy.Tensor.from_numpy(device, xs).with_grads(zero=True)
    y = m.poly(2.0, 8.0, -1.0, x)
    np.testing.assert_array_equal(y.to_numpy(), 2 * xs * xs + 8 * xs - 1)
    y = y.with_grads()
    y.grad.copy_from_numpy(np.full(n, 2, np.float32))
    m.poly.bwds(2.0, 8.0, -1.0, x, y)
    np.testing.assert_array_equal(x.grad.to_numpy(), 2 * (4 * xs + 8))
    m.poly.bwds(2.0, 8.0, -1.0, x, y)               # gradients accumulate
    np.testing.assert_array_equal(x.grad.to_numpy(), 4 * (4 * xs + 8))


@CPU_AND_CUDA
@pytest.mark.parametrize("a_kind", ["full", "broadcast", "row"])
def test_bwds_2d_grads(m, device, a_kind):
    rng = np.random.default_rng(5)
    shape = (13, 21)
    b = _ints(rng, shape)
    a = {"full": _ints(rng, shape), "broadcast": _ints(rng, (1, 1)), "row": _ints(rng, (1, 21))}[a_kind]
    gy = _ints(rng, shape)
    ta = spy.Tensor.from_numpy(device, a).with_grads(zero=True)
    if a_kind != "full":
        ta = ta.broadcast_to(shape)
    tb = spy.Tensor.from_numpy(device, b).with_grads(zero=True)
    y = m.mad3(ta, tb, 1.0).with_grads()
    y.grad.copy_from_numpy(gy)
    m.mad3.bwds(ta, tb, 1.0, y)
    cd = _cd(m.mad3.bwds)
    # a fully broadcast view is linear too (stride 0; its gradient uses atomics), a broadcast row is not
    assert cd.last_linear == (a_kind != "row")
    np.testing.assert_array_equal(tb.grad.to_numpy(), np.broadcast_to(a, shape) * gy)
    want_a = {"full": b * gy, "broadcast": np.array([[np.sum(b * gy)]], np.float32),
              "row": np.sum(b * gy, axis=0, keepdims=True)}[a_kind]
    np.testing.assert_array_equal(ta.grad.to_numpy().reshape(want_a.shape), want_a)


# ------------------------------------------------------------------------------------------ CUDA codegen

def _nvrtc_ptx(cd, **kw):
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")  # noqa: F841
    from slangjit.compiler import SourceSpec, compile_program
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    code = cd._codegen(cd._gen_args, nt=256, **kw)
    prog = compile_program([SourceSpec(text=cd.module._source_text + "\n" + code, name="k")], ["_sj_main"],
                           target="cuda")
    ptx, _ = cuda_compiler.compile_source(prog.source, "compute_90")
    return ptx.decode()


def _loads_before_first_store(ptx: str) -> int:
    body = ptx[ptx.index(".entry"):]
    first_st = body.index("st.global")
    return len(re.findall(r"ld\.global", body[:first_st]))


@pytest.mark.parametrize("linear", [False, True])
def test_cuda_kernels_compile_with_loads_first(device, monkeypatch, linear):
    # generated on the CPU device (no GPU needed), written with a GPU's group size and unroll
    monkeypatch.setenv("SLANGJIT_FUNCTIONAL_UNROLL", "1")
    mod = spy.Module.load_from_source(device, "fastpath_cuda", SRC)
    x = spy.Tensor.from_numpy(device, np.ones(64, np.float32)).with_grads(zero=True)
    y = mod.poly(2.0, 8.0, -1.0, x).with_grads()
    x2 = spy.Tensor.from_numpy(device, np.ones((4, 16), np.float32)).with_grads(zero=True)
    y2 = mod.mad3(x2, x2, 1.0).with_grads()
    cases = [
        (mod.poly.debug_build_call_data(2.0, 8.0, -1.0, x, _result=y), 4),            # forward: x (4 elements)
        (mod.poly.bwds.debug_build_call_data(2.0, 8.0, -1.0, x, y), 12),             # x, y.grad, x.grad
        (mod.mad3.bwds.debug_build_call_data(x2, x2, 1.0, y2), 16),                   # 2-D: a, b, a.grad, b.grad
        (mod.split.debug_build_call_data(np.ones(8, np.float32), np.ones(8, np.float32),
                                         np.ones(8, np.float32)), 8),
    ]
    for cd, want in cases:
        ptx = _nvrtc_ptx(cd, unroll=4, linear=linear and cd.cd >= 2)
        assert ".entry" in ptx
        assert _loads_before_first_store(ptx) >= want, cd.code
