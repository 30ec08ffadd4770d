"""CPU runtime tests with hand-written C++ following the ABI in slangjit/compiler/reflection.py.

No Slang front end is involved (except in the last, optional test): each test builds the
`CompiledProgram` + `ProgramReflection` by hand and makes a kernel with
`Device._create_kernel_from_compiled`.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import slangjit
import slangjit.runtime.device
from slangjit.compiler.reflection import (CompiledProgram, EntryPointInfo, FieldLayout, ProgramReflection,
                                          TypeLayout)
from slangjit.runtime import cpu_compiler, layout_pack

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("private_cache")   # a cache of its own, never the user's


# ------------------------------------------------------------------------------------------ layouts


def scalar(t: str) -> TypeLayout:
    size = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "int32": 4, "uint32": 4,
            "float32": 4, "int64": 8, "uint64": 8, "float64": 8}[t]
    name = {"int32": "int", "uint32": "uint", "float32": "float", "float64": "double", "uint64": "uint64_t",
            "int64": "int64_t", "bool": "bool", "float16": "half"}.get(t, t)
    return TypeLayout("scalar", name, size, size, scalar=t)


def vector(t: str, n: int) -> TypeLayout:
    s = scalar(t)
    return TypeLayout("vector", f"{s.name}{n}", s.size * n, s.align, scalar=t, count=n)


def matrix(t: str, r: int, c: int) -> TypeLayout:
    s = scalar(t)
    return TypeLayout("matrix", f"{s.name}{r}x{c}", s.size * r * c, s.align, scalar=t, count=r, cols=c)


def array(el: TypeLayout, n: int) -> TypeLayout:
    return TypeLayout("array", f"{el.name}[{n}]", el.size * n, el.align, count=n, element=el)


def buffer(el: TypeLayout | None, writable: bool, kind: str = "structured") -> TypeLayout:
    if kind == "byteaddress":
        name = "RWByteAddressBuffer" if writable else "ByteAddressBuffer"
    else:
        name = f"{'RW' if writable else ''}StructuredBuffer<{el.name}>"
    return TypeLayout("buffer", name, 16, 8, element=el, writable=writable, buffer_kind=kind)


def pointer(el: TypeLayout) -> TypeLayout:
    return TypeLayout("pointer", f"{el.name}*", 8, 8, element=el)


def struct_(name: str, fields: list[tuple[str, TypeLayout]]) -> TypeLayout:
    off, align, out = 0, 1, []
    for fname, fl in fields:
        off = -(-off // fl.align) * fl.align
        out.append(FieldLayout(fname, off, fl))
        off += fl.size
        align = max(align, fl.align)
    return TypeLayout("struct", name, -(-off // align) * align, align, fields=out)


def block_fields(fields: list[tuple[str, TypeLayout]]) -> tuple[list[FieldLayout], int]:
    s = struct_("block", fields)
    return s.fields, s.size


def program(source: str, globals_: list[tuple[str, TypeLayout]], entries: dict[str, tuple],
            ) -> CompiledProgram:
    """entries: name -> (numthreads, params [(name, layout)])"""
    gf, gsize = block_fields(globals_)
    eps = {}
    for name, (nt, params) in entries.items():
        pf, psize = block_fields(params)
        eps[name] = EntryPointInfo(name, name, tuple(nt), pf, psize)
    return CompiledProgram(source, "cpp", ProgramReflection(gf, gsize, eps))


PRELUDE = r"""
#include <cstdint>
#include <cstring>
#include <atomic>
struct Buf { void* data; uint64_t count; };
#define GROUP_LOOP(NX, NY, NZ, BODY) \
  for (uint32_t gi = begin; gi < end; ++gi) { \
    uint32_t gx = gi % gc[0], gy = (gi / gc[0]) % gc[1], gz = gi / (gc[0] * gc[1]); \
    for (uint32_t tz = 0; tz < NZ; ++tz) for (uint32_t ty = 0; ty < NY; ++ty) for (uint32_t tx = 0; tx < NX; ++tx) { \
      uint32_t idx = gx * NX + tx, idy = gy * NY + ty, idz = gz * NZ + tz; (void)idx; (void)idy; (void)idz; \
      BODY } }
#define ENTRY(name) extern "C" void name(void* g_, void* p_, const uint32_t gc[3], uint32_t begin, uint32_t end)
"""

SAXPY_SRC = PRELUDE + r"""
struct G { Buf a; Buf b; Buf out; };
struct P { float scale; uint32_t count; };
ENTRY(saxpy) {
  G* g = (G*)g_; P* p = (P*)p_;
  GROUP_LOOP(64, 1, 1, {
    if (idx < p->count && idx < g->out.count)
      ((float*)g->out.data)[idx] = ((const float*)g->a.data)[idx] * p->scale + ((const float*)g->b.data)[idx];
  })
}
static std::atomic<uint32_t> next_id{1};
static thread_local uint32_t my_id = 0;
ENTRY(thread_ids) {
  G* g = (G*)g_;
  for (uint32_t gi = begin; gi < end; ++gi) {
    if (!my_id) my_id = next_id++;
    ((uint32_t*)g->out.data)[gi] = my_id;
  }
}
ENTRY(grid3d) {   // out[linear] = x | y << 10 | z << 20, for a 3-D grid of 4x2x2 groups
  struct P3 { uint32_t count; };
  G* g = (G*)g_; P3* p = (P3*)p_;
  GROUP_LOOP(4, 2, 2, {
    uint32_t W = p->count;   // width of the grid in threads (x), H = 6, D = 3
    if (idx < W && idy < 6 && idz < 3)
      ((uint32_t*)g->out.data)[idx + W * (idy + 6 * idz)] = idx | (idy << 10) | (idz << 20);
  })
}
"""

F32 = scalar("float32")
U32 = scalar("uint32")


def saxpy_program() -> CompiledProgram:
    return program(SAXPY_SRC,
                   [("a", buffer(F32, False)), ("b", buffer(F32, False)), ("out", buffer(F32, True))],
                   {"saxpy": ((64, 1, 1), [("scale", F32), ("count", U32)]),
                    "thread_ids": ((1, 1, 1), []),
                    "grid3d": ((4, 2, 2), [("count", U32)])})


RW = slangjit.BufferUsage.shader_resource | slangjit.BufferUsage.unordered_access


# ------------------------------------------------------------------------------------------ dispatch


def test_saxpy_million_threads(device):
    n = 1 << 20
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    k = device._create_kernel_from_compiled(saxpy_program(), "saxpy")
    ba = device.create_buffer(data=a, usage=slangjit.BufferUsage.shader_resource)
    bb = device.create_buffer(data=b, usage=slangjit.BufferUsage.shader_resource)
    bo = device.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[n, 1, 1], vars={"a": ba, "b": bb, "out": bo}, scale=2.5, count=n)
    got = bo.to_numpy().view(np.float32)
    want = a * np.float32(2.5) + b
    assert got.dtype == np.float32 and got.shape == (n,)
    np.testing.assert_array_equal(got, want)


def test_partial_group_and_uneven_count(device):
    n = 1000   # not a multiple of 64: the kernel bounds-checks
    a = np.arange(n, dtype=np.float32)
    k = device._create_kernel_from_compiled(saxpy_program(), "saxpy")
    ba = device.create_buffer(data=a)
    bo = device.create_buffer(element_count=n + 5, struct_size=4, usage=RW)
    k.dispatch([n], vars={"a": ba, "b": ba, "out": bo}, scale=1.0, count=n)
    got = bo.to_numpy().view(np.float32)
    np.testing.assert_array_equal(got[:n], 2 * a)
    np.testing.assert_array_equal(got[n:], 0)


def test_3d_grid(device):
    W = 10
    k = device._create_kernel_from_compiled(saxpy_program(), "grid3d")
    bo = device.create_buffer(element_count=W * 6 * 3, struct_size=4, usage=RW)
    dummy = device.create_buffer(size=16)

    class Uint3:
        x, y, z = W, 6, 3
    k.dispatch(Uint3(), vars={"a": dummy, "b": dummy, "out": bo}, count=W)
    got = bo.to_numpy().view(np.uint32).reshape(3, 6, W)
    z, y, x = np.meshgrid(np.arange(3), np.arange(6), np.arange(W), indexing="ij")
    np.testing.assert_array_equal(got, (x | (y << 10) | (z << 20)).astype(np.uint32))


@pytest.mark.parametrize("nthreads", [None, "4", "1"])
def test_threads_used(device, monkeypatch, nthreads):
    if nthreads is not None:
        monkeypatch.setenv("SLANGJIT_NUM_THREADS", nthreads)
    groups = 4096
    k = device._create_kernel_from_compiled(saxpy_program(), "thread_ids")
    bo = device.create_buffer(element_count=groups, struct_size=4, usage=RW)
    dummy = device.create_buffer(size=16)
    k.dispatch([groups, 1, 1], vars={"a": dummy, "b": dummy, "out": bo})
    ids = bo.to_numpy().view(np.uint32)
    assert (ids != 0).all()
    distinct = len(set(ids.tolist()))
    expected = min(groups, slangjit.runtime.device.num_threads())
    assert distinct == expected
    # each thread got one contiguous range
    changes = int((np.diff(ids.astype(np.int64)) != 0).sum())
    assert changes == expected - 1


def test_zero_threads_is_noop(device):
    k = device._create_kernel_from_compiled(saxpy_program(), "saxpy")
    bo = device.create_buffer(size=16, usage=RW)
    k.dispatch([0, 1, 1], vars={"a": bo, "b": bo, "out": bo}, scale=1.0, count=4)
    assert not bo.to_numpy().any()


# ------------------------------------------------------------------------------------------ binding errors


def _saxpy_kernel(device):
    return device._create_kernel_from_compiled(saxpy_program(), "saxpy")


def test_unknown_variable(device):
    k = _saxpy_kernel(device)
    b = device.create_buffer(size=16, usage=RW)
    with pytest.raises(ValueError, match=r"'outputBuffer'.*valid names: a, b, out"):
        k.dispatch([4], vars={"a": b, "b": b, "outputBuffer": b}, scale=1.0, count=4)
    with pytest.raises(ValueError, match=r"'scal'.*valid names: scale, count"):
        k.dispatch([4], vars={"a": b, "b": b, "out": b}, scal=1.0, count=4)


def test_entry_params_accepted_in_vars(device):
    k = _saxpy_kernel(device)
    a = device.create_buffer(data=np.arange(8, dtype=np.float32))
    o = device.create_buffer(size=32, usage=RW)
    k.dispatch([8], vars={"a": a, "b": a, "out": o, "scale": 3.0, "count": 8})
    np.testing.assert_array_equal(o.to_numpy().view(np.float32), np.arange(8) * 4.0)


def test_missing_buffer(device):
    k = _saxpy_kernel(device)
    b = device.create_buffer(size=16, usage=RW)
    with pytest.raises(ValueError, match=r"no binding for 'out'"):
        k.dispatch([4], vars={"a": b, "b": b}, scale=1.0, count=4)


def test_wrong_types(device):
    k = _saxpy_kernel(device)
    b = device.create_buffer(size=16, usage=RW)
    with pytest.raises(TypeError, match=r"'a' expects StructuredBuffer<float> \(a Buffer\), got float"):
        k.dispatch([4], vars={"a": 1.0, "b": b, "out": b}, scale=1.0, count=4)
    with pytest.raises(TypeError, match=r"'count' expects uint"):
        k.dispatch([4], vars={"a": b, "b": b, "out": b}, scale=1.0, count=4.5)
    with pytest.raises(TypeError, match=r"'scale' expects float"):
        k.dispatch([4], vars={"a": b, "b": b, "out": b}, scale="x", count=4)
    ro = device.create_buffer(size=16, usage=slangjit.BufferUsage.shader_resource)
    with pytest.raises(TypeError, match=r"'out' is RWStructuredBuffer<float>.*unordered_access"):
        k.dispatch([4], vars={"a": b, "b": b, "out": ro}, scale=1.0, count=4)
    with pytest.raises(ValueError, match=r"'count' value -2147483649 is out of range for uint"):
        k.dispatch([4], vars={"a": b, "b": b, "out": b}, scale=1.0, count=-(1 << 31) - 1)


# ------------------------------------------------------------------------------------------ packing


S_LAYOUT = struct_("S", [("v", vector("float32", 3)), ("i", scalar("int32")), ("flag", scalar("bool")),
                         ("d", scalar("float64"))])
PACK_GLOBALS = [
    ("scale", F32),                                  # 0
    ("v", vector("float32", 3)),                     # 4
    ("m", matrix("float32", 2, 3)),                  # 16
    ("arr", array(scalar("int32"), 4)),              # 40
    ("s", S_LAYOUT),                                 # 56
    ("buf", buffer(F32, True)),                      # 88
    ("bab", buffer(None, False, "byteaddress")),     # 104
    ("ptr", pointer(F32)),                           # 120
    ("u64", scalar("uint64")),                       # 128
    ("sarr", array(struct_("P", [("a", scalar("uint16")), ("b", vector("int8", 2))]), 2)),   # 136
    ("h", scalar("float16")),                        # 144
    ("u8", scalar("uint8")),                         # 146
]


def test_layout_offsets():
    f, size = block_fields(PACK_GLOBALS)
    offs = {x.name: x.offset for x in f}
    assert offs == {"scale": 0, "v": 4, "m": 16, "arr": 40, "s": 56, "buf": 88, "bab": 104, "ptr": 120,
                    "u64": 128, "sarr": 136, "h": 144, "u8": 146}
    assert size == 152
    assert S_LAYOUT.size == 32 and [x.offset for x in S_LAYOUT.fields] == [0, 12, 16, 24]


class XYZ:
    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z


ECHO_SRC = PRELUDE + r"""
ENTRY(echo) {   // copy the globals block (size in params) into the output buffer (pointer in params)
  struct P { uint64_t size; void* out; };
  P* p = (P*)p_;
  if (begin == 0 && end > 0) memcpy(p->out, g_, p->size);
}
"""


def _pack_values(device, bufs):
    return {
        "scale": 1.5, "v": XYZ(1, 2, 3), "m": [[1, 2, 3], [4, 5, 6]],
        "arr": np.array([1, -2, 3, -4], dtype=np.int64),
        "s": {"v": np.array([7, 8, 9], np.float32), "i": -5, "flag": True},   # d left zero
        "buf": bufs[0], "bab": bufs[1], "ptr": bufs[2], "u64": bufs[2].device_address + 4,
        "sarr": [{"a": 65535, "b": (-1, 2)}, {"a": -1, "b": [3, 4]}],
        "h": np.float16(0.5), "u8": 255,
    }


def _check_packed(raw: bytes, bufs):
    assert struct.unpack_from("<f", raw, 0)[0] == 1.5
    assert struct.unpack_from("<3f", raw, 4) == (1, 2, 3)
    assert struct.unpack_from("<6f", raw, 16) == (1, 2, 3, 4, 5, 6)
    assert struct.unpack_from("<4i", raw, 40) == (1, -2, 3, -4)
    assert struct.unpack_from("<3fi?", raw, 56) == (7, 8, 9, -5, True)
    assert struct.unpack_from("<d", raw, 80)[0] == 0.0
    assert struct.unpack_from("<QQ", raw, 88) == (bufs[0].device_address, 64 // 4)
    assert struct.unpack_from("<QQ", raw, 104) == (bufs[1].device_address, 40)   # byte address: bytes
    assert struct.unpack_from("<Q", raw, 120)[0] == bufs[2].device_address
    assert struct.unpack_from("<Q", raw, 128)[0] == bufs[2].device_address + 4
    assert struct.unpack_from("<Hbb", raw, 136) == (65535, -1, 2)
    assert struct.unpack_from("<Hbb", raw, 140) == (65535, 3, 4)
    assert struct.unpack_from("<e", raw, 144)[0] == 0.5
    assert raw[146] == 255


def test_pack_block_direct(device):
    f, size = block_fields(PACK_GLOBALS)
    bufs = [device.create_buffer(size=64, usage=RW), device.create_buffer(size=40), device.create_buffer(size=8)]
    ctx = layout_pack.PackContext()
    block = layout_pack.pack_block(layout_pack.field_map(f), size, _pack_values(device, bufs), ctx,
                                   layout_pack.required_bindings(f))
    assert block.ctypes.data % 64 == 0
    _check_packed(block.tobytes(), bufs)


def test_pack_through_kernel(device):
    prog = program(ECHO_SRC, PACK_GLOBALS, {"echo": ((1, 1, 1), [("size", scalar("uint64")), ("out", pointer(F32))])})
    k = device._create_kernel_from_compiled(prog, "echo")
    bufs = [device.create_buffer(size=64, usage=RW), device.create_buffer(size=40), device.create_buffer(size=8)]
    out = device.create_buffer(size=prog.reflection.globals_size, usage=RW)
    k.dispatch([1, 1, 1], vars=_pack_values(device, bufs), size=prog.reflection.globals_size, out=out)
    _check_packed(out.to_numpy().tobytes(), bufs)
    assert k.reflection.buf.type_layout.name == "RWStructuredBuffer<float>"
    rb = device.create_buffer(resource_type_layout=k.reflection.buf, element_count=10, usage=RW)
    assert rb.size == 40


def _pack_one(layout: TypeLayout, value, name="x"):
    f, size = block_fields([(name, layout)])
    return layout_pack.pack_block(layout_pack.field_map(f), size, {name: value}, layout_pack.PackContext()).tobytes()


def test_pack_errors():
    with pytest.raises(ValueError, match=r"dispatch: 'x' expects float3 \(3 values\), got 2 values"):
        _pack_one(vector("float32", 3), [1.0, 2.0])
    with pytest.raises(ValueError, match=r"'params.scale' expects float3 \(3 values\), got 2 values"):
        _pack_one(struct_("Params", [("scale", vector("float32", 3))]), {"scale": (1, 2)}, "params")
    with pytest.raises(ValueError, match=r"unknown variable 'params.bogus' in Params \(valid names: scale\)"):
        _pack_one(struct_("Params", [("scale", F32)]), {"bogus": 1}, "params")
    with pytest.raises(TypeError, match=r"'params' expects Params \(a dict of its fields\), got float"):
        _pack_one(struct_("Params", [("scale", F32)]), 1.0, "params")
    with pytest.raises(ValueError, match=r"'x' expects int\[4\] \(4 elements\), got 3 elements"):
        _pack_one(array(scalar("int32"), 4), [1, 2, 3])
    with pytest.raises(TypeError, match=r"'x\[1\]' expects int \(an integer\), got float"):
        _pack_one(array(scalar("int32"), 2), [1, 2.5])
    with pytest.raises(TypeError, match=r"'x' expects float3"):
        _pack_one(vector("float32", 3), 1.0)
    with pytest.raises(ValueError, match=r"'x\[1\]' expects 3 values, got 2"):
        _pack_one(matrix("float32", 2, 3), [[1, 2, 3], [4, 5]])
    with pytest.raises(TypeError, match=r"'x' expects float\* \(a device address or Buffer\)"):
        _pack_one(pointer(F32), 1.5)


def test_pack_scalars_wrap_and_convert():
    assert _pack_one(U32, -1) == b"\xff\xff\xff\xff"
    assert _pack_one(scalar("int32"), 0xFFFFFFFF) == struct.pack("<i", -1)
    assert _pack_one(scalar("uint16"), np.int16(-2)) == struct.pack("<H", 65534)
    assert _pack_one(scalar("uint64"), -1) == b"\xff" * 8
    assert _pack_one(F32, float("inf")) == struct.pack("<f", float("inf"))
    with pytest.raises(ValueError, match=r"'x' value 1e\+39 does not fit a float"):     # never a silent inf
        _pack_one(F32, 1e39)
    assert _pack_one(scalar("float64"), np.float32(0.1)) == struct.pack("<d", float(np.float32(0.1)))
    assert _pack_one(scalar("bool"), True) == b"\x01"
    with pytest.raises(ValueError, match="out of range"):
        _pack_one(scalar("uint8"), 256)


def test_pack_numpy_fast_paths():
    raw = _pack_one(array(F32, 4), np.arange(4, dtype=np.float64))
    assert struct.unpack("<4f", raw) == (0, 1, 2, 3)
    words = np.array([0x3F800000, 0x40000000], dtype=np.uint32)         # raw data=[...] words
    raw = _pack_one(array(F32, 2), words)
    assert struct.unpack("<2f", raw) == (1, 2)
    raw = _pack_one(struct_("T", [("a", F32), ("b", U32)]), words)      # raw struct bytes
    assert struct.unpack("<fI", raw) == (1.0, 0x40000000)
    raw = _pack_one(array(vector("int32", 2), 2), np.array([[1, 2], [3, 4]]))
    assert struct.unpack("<4i", raw) == (1, 2, 3, 4)
    raw = _pack_one(matrix("float32", 2, 2), np.array([[1, 2], [3, 4]], dtype=np.float32))
    assert struct.unpack("<4f", raw) == (1, 2, 3, 4)
    raw = _pack_one(vector("bool", 3), [True, 0, 1])
    assert raw == b"\x01\x00\x01"


# ------------------------------------------------------------------------------------------ buffers


def test_create_buffer_rules(device):
    BU = slangjit.BufferUsage
    b = device.create_buffer(size=64, usage=BU.unordered_access)
    assert b.size == 64 and b.desc.size == 64 and b.struct_size == 0 and b.usage == BU.unordered_access
    assert b.device_address % 64 == 0 and b.desc.memory_type == slangjit.MemoryType.device_local
    assert not b.to_numpy().any() and b.to_numpy().dtype == np.uint8
    b = device.create_buffer(element_count=10, struct_size=12)
    assert b.size == 120 and b.struct_size == 12
    data = np.arange(6, dtype=np.float32)
    b = device.create_buffer(data=data)
    assert b.size == 24
    np.testing.assert_array_equal(b.to_numpy().view(np.float32), data)
    b = device.create_buffer(size=24, data=data)
    assert b.size == 24
    with pytest.raises(ValueError, match="must match"):
        device.create_buffer(size=32, data=data)
    with pytest.raises(ValueError, match="must match"):
        device.create_buffer(size=16, data=data)
    b = device.create_buffer(element_count=4, struct_size=8, data=data[:2])   # shorter: rest is zero
    assert b.size == 32
    np.testing.assert_array_equal(b.to_numpy().view(np.float32), [0, 1, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError):
        device.create_buffer(element_count=1, struct_size=4, data=data)
    with pytest.raises(ValueError, match="> 0"):
        device.create_buffer()
    # copy_from_numpy / to_numpy is a copy
    b = device.create_buffer(size=16)
    b.copy_from_numpy(np.array([1, 2], dtype=np.uint32))
    assert b.to_numpy().view(np.uint32).tolist() == [1, 2, 0, 0]
    t = b.to_numpy()
    t[:] = 0
    assert b.to_numpy().view(np.uint32).tolist() == [1, 2, 0, 0]
    with pytest.raises(ValueError):
        b.copy_from_numpy(np.zeros(5, np.uint32))


def test_device_api_misc(tmp_path):
    assert slangjit.DeviceType.cpu == 5 and slangjit.DeviceType.automatic == 0 and slangjit.DeviceType.wgpu == 7
    assert slangjit.BufferUsage.shared == 2048 and slangjit.BufferUsage.unordered_access == 16
    d = slangjit.create_device()      # automatic: CUDA when a GPU is usable, else the CPU
    assert d.type in (slangjit.DeviceType.cpu, slangjit.DeviceType.cuda) and d.info is not None
    from slangjit.runtime import cuda as _cuda
    if not _cuda.is_available():
        assert d.type == slangjit.DeviceType.cpu
        with pytest.raises(RuntimeError, match="CUDA"):
            slangjit.create_device(type=slangjit.DeviceType.cuda)
    d2 = slangjit.create_device(include_paths=[str(tmp_path)])
    (tmp_path / "mymod.slang").write_text("// empty\n")
    m = d2.load_module("mymod")
    assert m.name == "mymod" and m.path == str(tmp_path / "mymod.slang")
    assert d2.load_module("mymod.slang").path == m.path
    ep = m.entry_point("main", type_conformances=[("IFoo", "Foo", 0)])
    assert ep.name == "main" and ep.type_conformances == (("IFoo", "Foo", 0),)
    with pytest.raises(FileNotFoundError, match=r"'nothere' not found; tried: .*nothere\.slang"):
        d2.load_module("nothere")
    d.wait()
    d.wait_for_idle()
    d.close()


# ------------------------------------------------------------------------------------------ C++ compiler + cache

_DRIVER = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
from slangjit.runtime import cpu_compiler
src = open(sys.argv[1]).read()
t0 = time.perf_counter()
lib = cpu_compiler.load_library(src)
dt = time.perf_counter() - t0
f = lib.symbol("answer")
import ctypes
f.restype = ctypes.c_int
print(json.dumps({{"from_disk": lib.from_disk, "seconds": dt, "value": f(), "path": lib.path}}))
"""


def _run_driver(tmp_path, src_text, env_extra):
    src = tmp_path / "src.cpp"
    src.write_text(src_text)
    drv = tmp_path / "driver.py"
    drv.write_text(_DRIVER.format(root=str(ROOT)))
    env = dict(os.environ)
    env.update(env_extra)
    p = subprocess.run([sys.executable, str(drv), str(src)], capture_output=True, text=True, env=env)
    return p


def _fake_cxx(tmp_path) -> tuple[Path, Path, Path]:
    """A compiler wrapper that logs every run and only works while `enabled` exists."""
    log = tmp_path / "cxx.log"
    flag = tmp_path / "enabled"
    script = tmp_path / "fakecxx"
    real = cpu_compiler.find_compiler()[0]
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n[ -e {flag} ] || exit 3\nexec {real} \"$@\"\n")
    script.chmod(0o755)
    flag.touch()
    return script, log, flag


def test_cache_warm_start_runs_no_compiler(tmp_path):
    import json
    cxx, log, flag = _fake_cxx(tmp_path)
    env = {"SLANGJIT_CACHE_DIR": str(tmp_path / "cache"), "CXX": str(cxx)}
    src = 'extern "C" int answer() { return 42; }\n'
    p = _run_driver(tmp_path, src, env)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["value"] == 42 and not r["from_disk"]
    runs = log.read_text().splitlines()
    builds = [r for r in runs if "-shared" in r]
    assert runs[0] == "--version" and len(builds) == 1      # --version, probes of flags (per compiler), the build
    flag.unlink()                              # from now on the "compiler" fails
    times = []
    for _ in range(3):
        p = _run_driver(tmp_path, src, env)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["value"] == 42 and r["from_disk"]
        times.append(r["seconds"])
    assert log.read_text().splitlines() == runs   # no compiler process was started
    # a different source needs the compiler, which now fails
    p = _run_driver(tmp_path, src + "// changed\n", env)
    assert p.returncode != 0 and "InternalCompilerError" in p.stderr


def test_corrupt_cache_is_rebuilt(tmp_path):
    import json
    env = {"SLANGJIT_CACHE_DIR": str(tmp_path / "cache")}
    src = 'extern "C" int answer() { return 7; }\n'
    p = _run_driver(tmp_path, src, env)
    assert p.returncode == 0, p.stderr
    path = Path(json.loads(p.stdout)["path"])
    data = path.read_bytes()
    for corrupt in (data[: len(data) // 2], b"garbage", data[:-1] + bytes([data[-1] ^ 0xFF]), b""):   # last byte flipped (never a no-op)
        path.write_bytes(corrupt)
        p = _run_driver(tmp_path, src, env)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["value"] == 7 and not r["from_disk"]
    p = _run_driver(tmp_path, src, env)
    assert json.loads(p.stdout)["from_disk"]


def test_concurrent_compilation(tmp_path):
    import json
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / "cache"))
    src = tmp_path / "src.cpp"
    src.write_text('#include <vector>\n#include <map>\nextern "C" int answer() { std::map<int,int> m; m[1] = 5; '
                   'return m[1]; }\n')
    drv = tmp_path / "driver.py"
    drv.write_text(_DRIVER.format(root=str(ROOT)))
    procs = [subprocess.Popen([sys.executable, str(drv), str(src)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(4)]
    outs = [p.communicate() for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out)["value"] == 5
    libs = list((tmp_path / "cache" / "cpu").glob("*.so"))
    assert len(libs) == 1
    assert not [f for f in (tmp_path / "cache" / "cpu").iterdir() if f.name.startswith(".")]   # no temp files left


def test_compiler_error_is_internal_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(cpu_compiler.InternalCompilerError, match=r"slangjit bug.*error") as ei:
        cpu_compiler.load_library('extern "C" int f() { return undefined_thing; }\n')
    assert "undefined_thing" in str(ei.value)
    assert ei.value.source_path and Path(ei.value.source_path).is_file()


def test_no_compiler(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(cpu_compiler.CompilerNotFoundError, match="CXX"):
        cpu_compiler.load_library('extern "C" int f() { return 1; }\n')


def test_in_process_cache(device):
    k1 = device._create_kernel_from_compiled(saxpy_program(), "saxpy")
    k2 = device._create_kernel_from_compiled(saxpy_program(), "thread_ids")
    assert k1.library is k2.library


# ------------------------------------------------------------------------------------------ end to end (front end)


def test_end_to_end_with_front_end(tmp_path):
    pytest.importorskip("slangjit.compiler.parse.parser")
    (tmp_path / "k.slang").write_text(textwrap.dedent("""
        RWStructuredBuffer<float> outputBuffer;
        uniform float scale;
        [shader("compute")]
        [numthreads(32, 1, 1)]
        void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count) {
            if (tid.x < count) outputBuffer[tid.x] = float(tid.x) * scale;
        }
    """))
    d = slangjit.create_device(type=slangjit.DeviceType.cpu, include_paths=[str(tmp_path)])
    prog = d.load_program("k.slang", ["computeMain"])
    k = d.create_compute_kernel(prog)
    n = 100
    buf = d.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[n, 1, 1], vars={"outputBuffer": buf, "scale": 0.5}, count=n)
    np.testing.assert_array_equal(buf.to_numpy().view(np.float32), np.arange(n, dtype=np.float32) * 0.5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_dispatch_after_fork(device):
    k = _saxpy_kernel(device)
    a = device.create_buffer(data=np.arange(1024, dtype=np.float32))
    o = device.create_buffer(size=4096, usage=RW)
    k.dispatch([1024], vars={"a": a, "b": a, "out": o}, scale=1.0, count=1024)      # pool exists now
    pid = os.fork()
    if pid == 0:   # child: must not hang on the parent's (dead) worker threads
        ok = False
        try:
            k.dispatch([1024], vars={"a": a, "b": a, "out": o}, scale=2.0, count=1024)
            ok = np.array_equal(o.to_numpy().view(np.float32), np.arange(1024) * 3.0)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_harness_project_dispatch(tmp_path, monkeypatch):
    """The conformance harness's adapter, with the front end replaced by the hand-written saxpy program."""
    harness_path = ROOT.parent / "shared" / "conformance" / "harness.py"
    if not harness_path.is_file():
        pytest.skip("conformance harness not available")
    import importlib.util
    spec = importlib.util.spec_from_file_location("sj_conformance_harness", harness_path)
    H = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = H
    spec.loader.exec_module(H)
    import slangjit.compiler
    calls = []

    def fake_compile(sources, entry_points, *, target="cpp", include_paths=(), compiler_args=(), type_conformances=(),
                     options=None):
        calls.append((sources, list(entry_points), list(include_paths), list(compiler_args), list(type_conformances)))
        return saxpy_program()
    monkeypatch.setattr(slangjit.compiler, "compile_program", fake_compile)
    src = tmp_path / "t.slang"
    src.write_text("// stands in for the real program\n")
    n = 100
    a = np.arange(n, dtype=np.float32)
    base = {"source": str(src), "search_paths": [str(tmp_path)], "entry": "saxpy", "device": "cpu",
            "thread_count": [128, 1, 1], "compiler_args": ["-DFOO=1"],
            "buffers": {"a": {"data": a.view(np.uint8), "element_count": n, "struct_size": 4, "as_pointer": False},
                        "b": {"data": a.view(np.uint8), "element_count": n, "struct_size": 4, "as_pointer": False},
                        "out": {"data": np.zeros(4 * n, np.uint8), "element_count": n, "struct_size": 4,
                                "as_pointer": False}},
            "uniforms": {"scale": 2.0, "count": n}, "outputs": ["out"]}
    for tcs in ([], [("IFoo", "Foo", 3)]):
        res = H.project_dispatch(slangjit, dict(base, type_conformances=tcs))
        np.testing.assert_array_equal(res["out"].view(np.float32), a * 3)
        sources, eps, inc, args, tc = calls[-1]
        assert eps == ["saxpy"] and inc == [str(tmp_path)] and args == ["-DFOO=1"] and tc == tcs
        assert sources[0].path == str(src)


def test_half_flag_probe_is_kept_on_disk(tmp_path, monkeypatch):
    """A GCC >= 13 needs -fexcess-precision=16; whether it accepts it is probed once and kept beside its
    version, so a later process (here: emptied in-process caches) starts no compiler for it."""
    from slangjit.runtime import cpu_compiler as cc
    log = tmp_path / "calls.log"
    fake = tmp_path / "gxx13"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                    "if [ \"$1\" = --version ]; then echo 'g++ (GCC) 13.3.0'; exit 0; fi\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "cache"))
    cmd = (str(fake),)
    for _ in range(2):
        monkeypatch.setattr(cc, "_half_flags", {})
        monkeypatch.setattr(cc, "_version_cache", {})
        assert cc.half_rounding_flags(cmd) == ("-fexcess-precision=16",)
    calls = log.read_text().splitlines()
    assert calls.count("--version") == 1 and sum("-fexcess-precision=16" in c for c in calls) == 1, calls
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"     # another compiler (new stat): asked again; refuses
                    "if [ \"$1\" = --version ]; then echo 'g++ (GCC) 13.3.0'; exit 0; fi\nexit 1\n")
    monkeypatch.setattr(cc, "_half_flags", {})
    monkeypatch.setattr(cc, "_version_cache", {})
    assert cc.half_rounding_flags(cmd) == ()
