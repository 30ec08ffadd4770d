"""More of SlangPy's functional API: `Function.prelude` (SlangPy's test_linking.py), link-time constants
from a linked module or `.constants`."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

BASE = """
import "slangpy";
extern static const bool BOOL;
extern static const int INT;
extern static const float FLOAT;
float foo() { return BOOL ? float(INT) * FLOAT : 0.0; }
"""

SCALED = """
extern static const int K;
int scaled(int x) { return x * K; }
"""


def test_link_module_constants(device):
    im = device.load_module_from_source("sj_more_import", "export static const bool BOOL = true;\n"
                                        "export static const int INT = 10;\nexport static const float FLOAT = 42.0;\n")
    m = spy.Module.load_from_source(device, "sj_more_base", BASE, link=[im])
    assert m.foo() == 420.0
    m2 = spy.Module.load_from_source(device, "sj_more_base2", BASE)
    assert m2.foo.constants({"BOOL": True, "INT": 20, "FLOAT": 15.0})() == 300.0


def test_prelude_defines_link_time_constant(device):
    m = spy.Module.load_from_source(device, "sj_more_prelude", SCALED)
    assert m.scaled.prelude("export static const int K = 7;")(3) == 21
    five = m.scaled.prelude("export static const int K = 5;")
    np.testing.assert_array_equal(five(np.arange(4, dtype=np.int32), _result="numpy"), [0, 5, 10, 15])
    assert m.scaled.prelude("export static const int K = 7;")(2) == 14        # a different kernel per prelude


def test_prelude_errors(device):
    m = spy.Module.load_from_source(device, "sj_more_prelude_err", SCALED)
    with pytest.raises(TypeError, match="prelude: expected Slang source text"):
        m.scaled.prelude(5)
    with pytest.raises(spy.KernelGenException, match=r"sj_more_prelude_err\.slang:\d+:\d+: error"):
        m.scaled.prelude("this is not slang")(3)


ARRAYS = """
int arr_ctor(int x)
{
    int a[3] = int[3](x, 2);            // as {x, 2}: the last element is 0 (checked against slangc)
    float c[2] = float[2](1.5, 2);
    int one[1] = int[1](0);
    return a[0] + a[1] * 10 + a[2] * 100 + int(c[0] * 2 + c[1]) + one[0];
}
int[2] arr_ret(int x) { return int[2](x, x + 1); }
"""


def test_array_constructor_syntax(device):
    m = spy.Module.load_from_source(device, "sj_more_arrays", ARRAYS)
    assert m.arr_ctor(7) == 7 + 20 + 0 + 5
    np.testing.assert_array_equal(m.arr_ctor(np.array([1, 2], np.int32), _result="numpy"), [26, 27])
    assert list(m.arr_ret(4)) == [4, 5]


def test_array_constructor_too_many_values(device):
    # the whole module is checked at load (issue 19 group 11), so the error comes from load_from_source
    with pytest.raises(Exception, match=r"sj_more_arrays_bad\.slang:1:\d+: error E3055: too many initializers "
                                        r"for 'int\[2\]'"):
        m = spy.Module.load_from_source(device, "sj_more_arrays_bad",
                                        "int f(int x) { int a[2] = int[2](x, 1, 2); return a[0]; }")
        m.f(1)


PTRS = """
int read_ptr(int* buffer) { return *buffer; }
int read_idx(int idx, int* ptr) { return ptr[idx]; }
int read_sb(int idx, StructuredBuffer<int*> buffer) { return *buffer[idx]; }
"""


def test_pointers_from_addresses(device):
    """SlangPy's test_pointers.py: device addresses as pointer arguments, a buffer of pointers, and a container
    of 64-bit addresses vectorised over a pointer parameter."""
    m = spy.Module.load_from_source(device, "sj_more_ptrs", PTRS)
    rng = np.random.default_rng(7)
    vals = rng.integers(0, 100, 1000).astype(np.int32)
    data = device.create_buffer(size=4 * 1000, usage=spy.BufferUsage.shader_resource, data=vals)
    assert m.read_ptr(data.device_address + 4 * 17) == vals[17]
    np.testing.assert_array_equal(m.read_idx(spy.grid(shape=(1000,)), data.device_address, _result="numpy"), vals)
    idx = rng.integers(0, 1000, 64).astype(np.uint64)
    ptrs = idx * 4 + np.uint64(data.device_address)
    pbuf = device.create_buffer(struct_size=8, element_count=64, usage=spy.BufferUsage.shader_resource, data=ptrs)
    np.testing.assert_array_equal(m.read_sb(spy.grid(shape=(64,)), pbuf, _result="numpy"), vals[idx.astype(int)])
    np.testing.assert_array_equal(m.read_ptr(spy.NDBuffer.from_numpy(device, ptrs), _result="numpy"),
                                  vals[idx.astype(int)])
    with pytest.raises(Exception, match="does not match slang type int\\*"):
        m.read_ptr(spy.NDBuffer.from_numpy(device, ptrs.astype(np.float64)))


@pytest.mark.parametrize("sync", ["none", "global", "resource"])
def test_encoder_barriers_and_buffer_states(device, sync):
    """SlangPy's test_pointer_barriers: two recorded copies through pointers, with global barriers or
    buffer-state transitions between them (in-order execution: both are no-ops that check their arguments)."""
    m = spy.Module.load_from_source(device, "sj_more_barriers",
                                    "void ptp(int idx, int* src, int* dst) { dst[idx] = src[idx]; }")
    vals = np.random.default_rng(8).integers(0, 100, 200).astype(np.int32)
    rw = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    src = device.create_buffer(element_count=200, struct_size=4, usage=spy.BufferUsage.shader_resource, data=vals)
    tmp = device.create_buffer(element_count=200, struct_size=4, usage=rw)
    dst = device.create_buffer(element_count=200, struct_size=4, usage=rw)
    enc = device.create_command_encoder()
    g = spy.grid(shape=(200,))
    if sync == "global":
        enc.global_barrier()
    else:
        enc.set_buffer_state(tmp, spy.ResourceState.unordered_access)
    m.ptp(g, src, tmp, _append_to=enc)
    if sync == "global":
        enc.global_barrier()
    elif sync == "resource":
        enc.set_buffer_state(tmp, spy.ResourceState.shader_resource)
        enc.set_buffer_state(dst, spy.ResourceState.unordered_access)
    m.ptp(g, tmp, dst, _append_to=enc)
    assert not dst.to_numpy().any()                  # nothing has run before submit
    device.submit_command_buffer(enc.finish())
    np.testing.assert_array_equal(dst.to_numpy().view(np.int32), vals)
    with pytest.raises(TypeError, match="set_buffer_state: expected a Buffer"):
        device.create_command_encoder().set_buffer_state(np.zeros(3), spy.ResourceState.general)
    with pytest.raises(RuntimeError, match="finished"):
        enc.global_barrier()


STRUCTS = """
import "slangpy";
struct SimpleVec2 { float x; float y; };
float sum_vec2(SimpleVec2 v) { return v.x + v.y; }
struct TrainingSample { float valid; int material_id; float2 uv; float3 wi; float3 wo; int mip_level; float3 target; };
"""


def test_struct_buffer_layout_and_structured_numpy(device):
    """SlangPy's test_structured_numpy.py: `Struct.buffer_layout.stride` equals the packed numpy itemsize, and
    structured arrays round-trip through NDBuffer / Tensor of the struct."""
    m = spy.Module.load_from_source(device, "sj_more_structs", STRUCTS)
    ts = np.dtype([("valid", np.float32), ("material_id", np.int32), ("uv", np.float32, (2,)),
                   ("wi", np.float32, (3,)), ("wo", np.float32, (3,)), ("mip_level", np.int32),
                   ("target", np.float32, (3,))])
    assert m.TrainingSample.buffer_layout.stride == ts.itemsize == 56
    assert m.SimpleVec2.buffer_layout.stride == 8 and m.SimpleVec2.buffer_layout.alignment == 4
    data = np.zeros(5, dtype=ts)
    data["valid"] = np.arange(5)
    data["material_id"] = np.arange(5) * 10
    data["target"] = 0.5
    buf = spy.NDBuffer(device, dtype=m.TrainingSample, shape=(5,))
    buf.copy_from_numpy(data)
    assert buf.to_numpy().tobytes() == data.tobytes()
    v2 = np.array([(1.0, 2.0), (3.0, 4.5)], dtype=[("x", np.float32), ("y", np.float32)])
    t = spy.Tensor.from_numpy(device, v2, dtype=m.SimpleVec2)
    np.testing.assert_allclose(m.sum_vec2(t, _result="numpy"), [3.0, 7.5])
