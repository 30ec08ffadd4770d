"""Behavioural port of SlangPy's test_shapes.py: the call shape, per-argument call dimensionality and
vector mapping of a float3 dot product under broadcasting, explicit input / output transforms, results of
the wrong shape; a tensor-reading function (NDBuffer<float,2> parameter) with invalid shapes; raw buffers
for StructuredBuffer parameters.  Values are checked against numpy where the call computes something."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit import NDBuffer, ValueRef, float3, float4, floatRef

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

DOT = "float dot3(float3 a, float3 b) { return dot(a, b); }"
# SlangPy's version indexes with `texture[{index.x, index.y}]`, which real Slang rejects (an initializer list
# for overloaded subscripts is ambiguous); SlangPy's tests only reach its shape checks, which come first there.
READ = 'import "slangpy"; float read_slice(int2 index, NDBuffer<float,2> texture) { return texture[{index.x,index.y}]; }'
COPY = ("void copy_at(int index, StructuredBuffer<float4> fr, RWStructuredBuffer<float4> to) "
        "{ to[index] = fr[index]; }")

SHAPE_KINDS = [tuple, list]


def _fbuf(device, shape, dtype=float):
    return NDBuffer(device=device, shape=shape, dtype=dtype)


def _summary(cd, **kw):
    cd.call(None, **kw)
    nodes = []
    for b in cd.debug_only_bindings.kwargs.values():
        b.get_input_list(nodes)
    cs = cd.last_call_shape
    return {"call_shape": list(cs) if cs is not None else None,
            "node_call_dims": [n.call_dimensionality for n in nodes],
            "node_transforms": [list(n.vector_mapping) for n in nodes]}


def _dot(device, a, b, result, transforms=None):
    f = spy.Module.load_from_source(device, "port_shapes_dot", DOT).dot3
    if transforms:
        f = f.map(**transforms)
    return _summary(f.debug_build_call_data(a=a, b=b, _result=result), a=a, b=b, _result=result)


def _read(device, index, texture, result, transforms=None):
    f = spy.Module.load_from_source(device, "port_shapes_read", READ).read_slice
    if transforms:
        f = f.map(**transforms)
    return _summary(f.debug_build_call_data(index=index, texture=texture, _result=result),
                    index=index, texture=texture, _result=result)


def _copy(device, index, fr, to):
    f = spy.Module.load_from_source(device, "port_shapes_copy", COPY).copy_at
    return _summary(f.debug_build_call_data(index=index, fr=fr, to=to), index=index, fr=fr, to=to)


def _rand(device, shape, seed=0):
    a = np.random.default_rng(seed).random(tuple(shape)).astype(np.float32)
    return NDBuffer.from_numpy(device, a), a


def test_dotproduct_scalar(device):
    assert _dot(device, float3(), float3(), None) == {"call_shape": [], "node_call_dims": [0, 0, 0],
                                                       "node_transforms": [[], [], []]}


def test_dotproduct_scalar_floatref(device):
    r = floatRef()
    assert _dot(device, float3(1, 2, 3), float3(4, 5, 6), r) == {
        "call_shape": [], "node_call_dims": [0, 0, 0], "node_transforms": [[], [], []]}
    assert r.value == 32.0


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_broadcast_a(device, kind):
    b, bd = _rand(device, kind((100, 3)))
    assert _dot(device, float3(1, 2, 3), b, None) == {"call_shape": [100], "node_call_dims": [0, 1, 1],
                                                       "node_transforms": [[], [0], [0]]}
    r = spy.Module.load_from_source(device, "port_shapes_dot", DOT).dot3(float3(1, 2, 3), b, _result="numpy")
    np.testing.assert_allclose(r, bd @ np.array([1.0, 2.0, 3.0]), rtol=1e-5)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_broadcast_b(device, kind):
    assert _dot(device, _fbuf(device, kind((100, 3))), float3(), None) == {
        "call_shape": [100], "node_call_dims": [1, 0, 1], "node_transforms": [[0], [], [0]]}


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_broadcast_b_from_buffer(device, kind):
    a, ad = _rand(device, kind((100, 3)))
    b, bd = _rand(device, kind((1, 3)), seed=1)
    assert _dot(device, a, b, None) == {"call_shape": [100], "node_call_dims": [1, 1, 1],
                                        "node_transforms": [[0], [0], [0]]}
    r = spy.Module.load_from_source(device, "port_shapes_dot", DOT).dot3(a, b, _result="numpy")
    np.testing.assert_allclose(r, ad @ bd[0], rtol=1e-5)


def test_dotproduct_shape_error(device):
    # SlangPy skips this case ("TODO: Catch this error"); slangjit catches it
    with pytest.raises(ValueError):
        _dot(device, _fbuf(device, (100, 4)), _fbuf(device, (3,)), None)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_broadcast_error(device, kind):
    with pytest.raises(ValueError):
        _dot(device, _fbuf(device, kind((100, 3))), _fbuf(device, kind((1000, 3))), None)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_broadcast_result(device, kind):
    assert _dot(device, _fbuf(device, kind((100, 3))), _fbuf(device, kind((3,))), ValueRef(float())) == {
        "call_shape": [100], "node_call_dims": [1, 0, 0], "node_transforms": [[0], [], []]}


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_broadcast_invalid_result(device, kind):
    with pytest.raises(ValueError):
        _dot(device, _fbuf(device, kind((100, 3))), _fbuf(device, kind((3,))), _fbuf(device, kind((3,))))


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_big_tensors(device, kind):
    a, ad = _rand(device, kind((8, 1, 2, 3)))
    b, bd = _rand(device, kind((8, 4, 2, 3)), seed=1)
    res = _fbuf(device, kind((8, 4, 2)))
    assert _dot(device, a, b, res) == {"call_shape": [8, 4, 2], "node_call_dims": [3, 3, 3],
                                       "node_transforms": [[0, 1, 2], [0, 1, 2], [0, 1, 2]]}
    np.testing.assert_allclose(res.to_numpy(), np.einsum("abcd,abcd->abc", np.broadcast_to(ad, bd.shape), bd),
                               rtol=1e-5)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_input_transform(device, kind):
    a, ad = _rand(device, kind((8, 1, 2, 3)))
    b, bd = _rand(device, kind((4, 8, 2, 3)), seed=1)
    assert _dot(device, a, b, None, transforms={"b": (1, 0, 2)}) == {
        "call_shape": [8, 4, 2], "node_call_dims": [3, 3, 3],
        "node_transforms": [[0, 1, 2], [1, 0, 2], [0, 1, 2]]}
    f = spy.Module.load_from_source(device, "port_shapes_dot", DOT).dot3.map(b=(1, 0, 2))
    r = f(a=a, b=b, _result="numpy")
    bt = bd.transpose(1, 0, 2, 3)
    np.testing.assert_allclose(r, np.einsum("abcd,abcd->abc", np.broadcast_to(ad, bt.shape), bt), rtol=1e-5)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_dotproduct_output_transform(device, kind):
    a, ad = _rand(device, kind((10, 3)))
    b, bd = _rand(device, kind((5, 3)), seed=1)
    assert _dot(device, a, b, None, transforms={"a": (0,), "b": (1,)}) == {
        "call_shape": [10, 5], "node_call_dims": [1, 2, 2], "node_transforms": [[0], [1], [0, 1]]}
    r = spy.Module.load_from_source(device, "port_shapes_dot", DOT).dot3.map(a=(0,), b=(1,))(a=a, b=b, _result="numpy")
    np.testing.assert_allclose(r, ad @ bd.T, rtol=1e-5)


def test_readslice_values(device):
    tex = np.random.default_rng(2).random((50, 16, 8)).astype(np.float32)
    idx = np.stack([np.arange(50) % 16, np.arange(50) % 8], axis=1).astype(np.int32)
    f = spy.Module.load_from_source(device, "port_shapes_read", READ).read_slice
    r = f(NDBuffer.from_numpy(device, idx), NDBuffer.from_numpy(device, tex), _result="numpy")
    np.testing.assert_array_equal(r, tex[np.arange(50), idx[:, 0], idx[:, 1]])


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_readslice_invalid_shape(device, kind):
    with pytest.raises(ValueError):
        _read(device, _fbuf(device, kind((50, 2))), _fbuf(device, kind((50, 256, 128, 3))), None)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_readslice_invalid_broadcast(device, kind):
    with pytest.raises(ValueError):
        _read(device, _fbuf(device, kind((50, 2))), _fbuf(device, kind((75, 256, 128, 4))), None)


def _raw_vec4(device, n, seed=None):
    nd = NDBuffer(device=device, shape=(n,), dtype=float4)
    if seed is not None:
        nd.copy_from_numpy(np.random.default_rng(seed).random((n, 4)).astype(np.float32))
    return nd.storage


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_copyatindex_both_buffers_defined(device, kind):
    idx = NDBuffer.from_numpy(device, np.arange(50, dtype=np.int32).reshape(kind((50,))))
    fr, to = _raw_vec4(device, 100, seed=3), _raw_vec4(device, 100)
    assert _copy(device, idx, fr, to) == {"call_shape": [50], "node_call_dims": [1, 0, 0],
                                          "node_transforms": [[0], [], []]}
    src = fr.to_numpy().view(np.float32).reshape(100, 4)
    got = to.to_numpy().view(np.float32).reshape(100, 4)
    np.testing.assert_array_equal(got[:50], src[:50])
    np.testing.assert_array_equal(got[50:], 0.0)


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_copyatindex_undersized_output(device, kind):
    # SlangPy can't detect the overrun; slangjit keeps the writes past the end out of memory
    idx = NDBuffer.from_numpy(device, np.arange(50, dtype=np.int32))
    fr, to = _raw_vec4(device, 100, seed=4), _raw_vec4(device, 10)
    assert _copy(device, idx, fr, to) == {"call_shape": [50], "node_call_dims": [1, 0, 0],
                                          "node_transforms": [[0], [], []]}
    np.testing.assert_array_equal(to.to_numpy().view(np.float32).reshape(10, 4),
                                  fr.to_numpy().view(np.float32).reshape(100, 4)[:10])


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_copyatindex_undefined_output_size(device, kind):
    with pytest.raises(Exception):
        _copy(device, NDBuffer(device=device, shape=kind((50,)), dtype=int), _raw_vec4(device, 100), None)


def _ibuf(device, shape):
    return NDBuffer(device=device, shape=shape, dtype=int)


def test_readslice_scalar(device):
    assert _read(device, _ibuf(device, (2,)), _fbuf(device, (256, 128)), None) == {
        "call_shape": [], "node_call_dims": [0, 0, 0], "node_transforms": [[], [], []]}


def test_readslice_broadcast_slice(device):
    assert _read(device, _ibuf(device, (50, 2)), _fbuf(device, (256, 128)), None) == {
        "call_shape": [50], "node_call_dims": [1, 0, 1], "node_transforms": [[0], [], [0]]}
