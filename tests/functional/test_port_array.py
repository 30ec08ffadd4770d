"""Behavioural port of SlangPy's test_array.py: lists for array parameters, lists of (typed) struct dicts for
struct arrays and vectorised over struct parameters, structs holding buffers / tensors / arrays, arrays of
StructuredBuffers, RWStructuredBuffers, Tensors, RWTensors, DiffTensors and RWDiffTensors, read-only tensors
refused for writable parameters, and clearing read-only tensors refused."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import slangjit as spy
from slangjit import BufferUsage, ResolveException, Tensor

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _fn(device, name, src):
    src = 'import "slangpy";\n' + src
    f = spy.Module.load_from_source(device, "port_arr_" + hashlib.sha256(src.encode()).hexdigest()[:12],
                                    src).find_function(name)
    assert f is not None
    return f


SUM4 = "int sum(int[4] data) { int s = 0; for (int i = 0; i < 4; i++) s += data[i]; return s; }"
VAL = "struct Val { int x; }\n"


def test_simple_array(device):
    assert _fn(device, "sum", SUM4)([1, 2, 3, 4]) == 10


def test_typed_struct_array(device):
    f = _fn(device, "sum", VAL + "int sum(Val[4] vals) { int s = 0; for (int i = 0; i < 4; i++) s += vals[i].x; return s; }")
    assert f([{"x": 1, "_type": "Val"}, {"x": 2, "_type": "Val"}, {"x": 3, "_type": "Val"}, {"x": 4, "_type": "Val"}]) == 10
    assert f([{"x": 1}, {"x": 2}, {"x": 3}, {"x": 40}]) == 46          # the parameter's type names the struct


def test_vectorize_array(device):
    r = _fn(device, "inc", "int inc(int v) { return v + 1; }")([1, 2, 3, 4], _result="numpy")
    assert isinstance(r, np.ndarray) and r.shape == (4,) and r.dtype == np.int32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])


def test_vectorize_float_array(device):
    r = _fn(device, "double_it", "float double_it(float x) { return x * 2.0; }")([1.5, 2.5, 3.5, 4.5], _result="numpy")
    assert r.shape == (4,) and r.dtype == np.float32
    np.testing.assert_array_equal(r, [3.0, 5.0, 7.0, 9.0])


def test_vectorize_struct_array(device):
    f = _fn(device, "inc", VAL + "int inc(Val v) { return v.x + 1; }")
    r = f([{"x": i, "_type": "Val"} for i in (1, 2, 3, 4)], _result="numpy")
    assert r.shape == (4,) and r.dtype == np.int32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])


def _ibuf(device, v, rw=False):
    usage = BufferUsage.shader_resource | (BufferUsage.unordered_access if rw else 0)
    return device.create_buffer(element_count=1, struct_size=4, data=np.array([v], np.int32), usage=usage)


def test_vectorize_struct_with_resource_array(device):
    f = _fn(device, "inc", "struct Val { StructuredBuffer<int> x; }\nint inc(Val v) { return v.x[0] + 1; }")
    r = f([{"x": _ibuf(device, i + 1), "_type": "Val"} for i in range(4)], _result="numpy")
    assert r.shape == (4,) and r.dtype == np.int32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])


def _ftensor(device, f, v, usage=None):
    t = (Tensor.zeros(device, dtype=f.module.float, shape=(1,)) if usage is None
         else Tensor.empty(device, dtype=f.module.float, shape=(1,), usage=usage))
    t.copy_from_numpy(np.array([v], np.float32))
    return t


TVAL = "struct Val { Tensor<float,1> x; }\n"


def test_vectorize_struct_with_tensor_array(device):
    f = _fn(device, "inc", TVAL + "float inc(Val v) { return v.x[0] + 1; }")
    r = f([{"x": _ftensor(device, f, i + 1), "_type": "Val"} for i in range(4)], _result="numpy")
    assert r.shape == (4,) and r.dtype == np.float32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])


def test_2d_mapped_vectorize_struct_with_tensor_array(device):
    f = _fn(device, "add", TVAL + "float add(Val v, float w) { return v.x[0] + w; }")
    vals = [{"x": _ftensor(device, f, i + 1), "_type": "Val"} for i in range(4)]
    r = f.map((0,), (1,))(vals, [5.0, 10.0, 15.0, 20.0], _result="numpy")
    assert r.shape == (4, 4) and r.dtype == np.float32
    np.testing.assert_array_equal(r, np.arange(1, 5)[:, None] + np.array([5.0, 10.0, 15.0, 20.0])[None, :])


def test_struct_with_scalar_array_field(device):
    f = _fn(device, "sum_inner", "struct Foo { int vals[4]; }\n"
            "int sum_inner(Foo foo) { int s = 0; for (int i = 0; i < 4; i++) s += foo.vals[i]; return s; }")
    assert f({"vals": [1, 2, 3, 4], "_type": "Foo"}) == 10


def test_struct_with_struct_array_field(device):
    f = _fn(device, "sum_inner", "struct Inner { int x; }\nstruct Outer { Inner items[4]; }\n"
            "int sum_inner(Outer o) { int s = 0; for (int i = 0; i < 4; i++) s += o.items[i].x; return s; }")
    assert f({"items": [{"x": 10 * k, "_type": "Inner"} for k in (1, 2, 3, 4)], "_type": "Outer"}) == 100


def test_array_of_structured_buffers(device):
    f = _fn(device, "sum_buffers", "int sum_buffers(StructuredBuffer<int> buffers[4]) "
            "{ int s = 0; for (int i = 0; i < 4; i++) s += buffers[i][0]; return s; }")
    assert f([_ibuf(device, (i + 1) * 10) for i in range(4)]) == 100


def test_nested_struct_with_array_field(device):
    f = _fn(device, "sum_nested", "struct Middle { int vals[4]; }\nstruct Outer { Middle m; int scale; }\n"
            "int sum_nested(Outer o) { int s = 0; for (int i = 0; i < 4; i++) s += o.m.vals[i]; return s * o.scale; }")
    assert f({"m": {"vals": [1, 2, 3, 4], "_type": "Middle"}, "scale": 2, "_type": "Outer"}) == 20


def test_broadcast_array_to_scalar(device):
    f = _fn(device, "pair_sum", "struct Pair { int vals[2]; }\nint pair_sum(Pair p) { return p.vals[0] + p.vals[1]; }")
    r = f.map((0,))([{"vals": [1, 2], "_type": "Pair"}, {"vals": [3, 4], "_type": "Pair"},
                     {"vals": [5, 6], "_type": "Pair"}], _result="numpy")
    assert r.shape == (3,) and r.dtype == np.int32
    np.testing.assert_array_equal(r, [3, 7, 11])


def test_array_of_rw_structured_buffers(device):
    f = _fn(device, "double_buffers", "void double_buffers(RWStructuredBuffer<int> buffers[4]) "
            "{ for (int i = 0; i < 4; i++) buffers[i][0] = buffers[i][0] * 2; }")
    bufs = [_ibuf(device, (i + 1) * 10, rw=True) for i in range(4)]
    f(bufs)
    assert [int(np.frombuffer(b.to_numpy(), np.int32)[0]) for b in bufs] == [20, 40, 60, 80]


def test_array_of_tensors_read(device):
    f = _fn(device, "sum_tensors", "float sum_tensors(Tensor<float, 1> tensors[4]) "
            "{ float s = 0.0; for (int i = 0; i < 4; i++) s += tensors[i].load(int[1](0)); return s; }")
    ts = [_ftensor(device, f, (i + 1) * 10, usage=BufferUsage.shader_resource) for i in range(4)]
    assert f(ts) == 100.0


def test_array_of_rwtensors_write(device):
    f = _fn(device, "double_tensors", "void double_tensors(RWTensor<float, 1> tensors[4]) "
            "{ for (int i = 0; i < 4; i++) { float v = tensors[i].load(int[1](0)); tensors[i].store(int[1](0), v * 2.0); } }")
    ts = [_ftensor(device, f, (i + 1) * 10) for i in range(4)]
    f(ts)
    assert [float(t.to_numpy()[0]) for t in ts] == [20.0, 40.0, 60.0, 80.0]


def test_array_of_difftensors_read(device):
    f = _fn(device, "sum_difftensors", "float sum_difftensors(DiffTensor<float, 1> tensors[4]) "
            "{ float s = 0.0; for (int i = 0; i < 4; i++) s += tensors[i].load(int[1](0)); return s; }")
    ts = []
    for i in range(4):
        t = Tensor.empty(device, dtype=f.module.float, shape=(1,), usage=BufferUsage.shader_resource)
        t = t.with_grads(grad_out=Tensor.zeros(device, dtype=f.module.float, shape=(1,)))
        t.copy_from_numpy(np.array([(i + 1) * 10], np.float32))
        ts.append(t)
    assert f(ts) == 100.0


def test_array_of_rwdifftensors_write(device):
    f = _fn(device, "double_difftensors", "void double_difftensors(RWDiffTensor<float, 1> tensors[4]) "
            "{ for (int i = 0; i < 4; i++) { float v = tensors[i].load(int[1](0)); tensors[i].store(int[1](0), v * 2.0); } }")
    ts = []
    for i in range(4):
        t = Tensor.zeros(device, dtype=f.module.float, shape=(1,))
        t = t.with_grads(grad_in=Tensor.zeros_like(t), grad_out=Tensor.zeros_like(t))
        t.copy_from_numpy(np.array([(i + 1) * 10], np.float32))
        ts.append(t)
    f(ts)
    assert [float(t.to_numpy()[0]) for t in ts] == [20.0, 40.0, 60.0, 80.0]


def test_clear_read_only_tensor_raises(device):
    with pytest.raises(RuntimeError, match="(?i)read-only|unordered_access|write"):
        Tensor.zeros(device, dtype="float", shape=(4,), usage=BufferUsage.shader_resource)
    ro = Tensor.empty(device, dtype="float", shape=(4,), usage=BufferUsage.shader_resource)
    with pytest.raises(RuntimeError, match="(?i)read-only|unordered_access|write"):
        ro.clear()
    np.testing.assert_array_equal(Tensor.zeros(device, dtype="float", shape=(2,)).to_numpy(), [0.0, 0.0])


def test_clear_writable_tensor_via_command_encoder(device):
    t = Tensor.empty(device, shape=(4,), dtype="float")
    t.copy_from_numpy(np.array([1, 2, 3, 4], np.float32))
    enc = device.create_command_encoder()
    t.clear(enc)
    np.testing.assert_array_equal(t.to_numpy(), [1, 2, 3, 4])         # recorded, not run yet
    device.submit_command_buffer(enc.finish())
    np.testing.assert_array_equal(t.to_numpy(), np.zeros(4))


def test_read_only_tensor_to_writable_param_raises_cleanly(device):
    f = _fn(device, "write_one", "void write_one(RWTensor<float, 1> t) { t.store(int[1](0), 1.0); }")
    t = Tensor.empty(device, dtype=f.module.float, shape=(1,), usage=BufferUsage.shader_resource)
    with pytest.raises(ResolveException, match="Can't pass a read-only tensor to a writable tensor"):
        f(t)
    np.testing.assert_array_equal(Tensor.zeros(device, dtype=f.module.float, shape=(1,)).to_numpy(), [0.0])


def test_array_of_read_only_tensors_to_rwtensor_array_raises_cleanly(device):
    f = _fn(device, "double_tensors", "void double_tensors(RWTensor<float, 1> tensors[4]) "
            "{ for (int i = 0; i < 4; i++) { float v = tensors[i].load(int[1](0)); tensors[i].store(int[1](0), v * 2.0); } }")
    ts = [Tensor.empty(device, dtype=f.module.float, shape=(1,), usage=BufferUsage.shader_resource) for _ in range(4)]
    with pytest.raises(ResolveException, match=r"does not match slang type RWTensor<float, 1>\[4\]"):
        f(ts)
