"""SlangPy compatibility of values (issue 16 items 1, 4 and 6): results that were silently wrong, conversions
SlangPy performs, raw dispatch, and SlangPy's error wording.  Every value is checked against numpy or an
analytic derivative."""
import numpy as np
import pytest

import slangjit as spy
from slangjit.functional.errors import BoundVariableException

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

SRC = r"""
import "slangpy";
float add(float a, float b) { return a + b; }
float foo(float a) { return a; }
float foo2(float a, float b) { return a + b; }
float foo_v3(float3 a) { return a.x; }
float foo_ol(float a) { return a; }
float foo_ol(float a, float b) { return a + b; }

struct P : IDifferentiable { float x; float y; };
[Differentiable] float poly(P p) { return p.x * p.x + 3.0 * p.y; }
[Differentiable] float2 poly_v(float2 v) { return float2(v.x * v.y, v.x + 2.0 * v.y); }
[Differentiable] float sq(float x) { return x * x; }
[Differentiable] float3 scale3(float3 v, float k) { return v * k; }

struct Val { int x; }
int sum_vals(Val[4] vals) { int s = 0; for (int i = 0; i < 4; i++) s += vals[i].x; return s; }
struct Pair { int a; float b; }
float sum_pairs(Pair[2] ps) { return float(ps[0].a) + ps[0].b + float(ps[1].a) + ps[1].b; }
int read_int(StructuredBuffer<int> b, int i) { return b[i]; }
float read_float(StructuredBuffer<float> b, int i) { return b[i]; }
void write_float(RWStructuredBuffer<float> b, int i, float v) { b[i] = v; }
float intfoo(int a) { return float(a) * 2.0; }

void ndbuffer_multiply(uint3 dispatchThreadID, RWTensor<uint3, 1> buffer, uint amount) {
    buffer[dispatchThreadID.x] = dispatchThreadID * amount;
}
extern static const int VAL;
void ndbuffer_multiply_const(uint3 dispatchThreadID, RWTensor<uint3, 1> buffer) {
    buffer[dispatchThreadID.x] = dispatchThreadID * VAL;
}
struct Params { int k; }
ParameterBlock<Params> params;
void ndbuffer_multiply_uniform(uint3 dispatchThreadID, RWTensor<uint3, 1> buffer) {
    buffer[dispatchThreadID.x] = dispatchThreadID * params.k;
}
void raw_overloaded(uint3 t) {}
void raw_overloaded(uint3 t, int x) {}
void raw_out(uint3 t, out int x) { x = 1; }
int raw_returns(uint3 t) { return 1; }
struct Thing { int n; void method(uint3 t) {} }
"""


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "slangpy_values", SRC)


def tensor(device, a, grads=False):
    t = spy.Tensor.from_numpy(device, np.asarray(a, dtype=np.float32))
    return t.with_grads(zero=True) if grads else t


# --------------------------------------------------------------------------- item 1: silently wrong results

def test_scalar_function_over_vector_values(m, device):
    # each vector is its own container: [1+4, 2+5, 3+6], never b + b
    t = spy.Tensor.empty(device, shape=(3,), dtype=float)
    m.add(spy.float3(1, 2, 3), spy.float3(4, 5, 6), _result=t)
    np.testing.assert_array_equal(t.to_numpy(), [5, 7, 9])
    # lists and matrices convert per call too: two temporaries alive at once
    np.testing.assert_array_equal(m.add([1.0, 2.0, 3.0], [10.0, 20.0, 30.0], _result="numpy"), [11, 22, 33])
    np.testing.assert_array_equal(m.add(spy.float2x2([[1, 2], [3, 4]]), spy.float2x2([[10, 20], [30, 40]]),
                                        _result="numpy"), [[11, 22], [33, 44]])
    np.testing.assert_array_equal(m.intfoo(range(3, 6), _result="numpy"), [6, 8, 10])


def test_soa_dict_gradients_in_bwds(m, device):
    xv, yv = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    xs, ys = tensor(device, xv, True), tensor(device, yv, True)
    res = m.poly({"x": xs, "y": ys})
    np.testing.assert_allclose(res.to_numpy(), xv * xv + 3 * yv)
    res = res.with_grads()
    gv = np.array([1.0, 0.5, 2.0], np.float32)
    res.grad.copy_from_numpy(gv)
    m.poly.bwds({"x": xs, "y": ys}, res)
    np.testing.assert_allclose(xs.grad.to_numpy(), 2 * xv * gv)          # d/dx = 2x
    np.testing.assert_allclose(ys.grad.to_numpy(), 3 * gv)               # d/dy = 3
    # a second call accumulates
    m.poly.bwds({"x": xs, "y": ys}, res)
    np.testing.assert_allclose(xs.grad.to_numpy(), 4 * xv * gv)


def test_soa_dict_for_a_vector_in_bwds(m, device):
    xv, yv = np.array([1, 2], np.float32), np.array([3, -1], np.float32)
    xs, ys = tensor(device, xv, True), tensor(device, yv, True)
    res = m.poly_v({"x": xs, "y": ys}).with_grads()
    np.testing.assert_allclose(res.to_numpy().reshape(-1, 2), np.stack([xv * yv, xv + 2 * yv], 1))
    res.grad.copy_from_numpy(np.array([[1, 0], [0, 1]], np.float32))
    m.poly_v.bwds({"x": xs, "y": ys}, res)
    # element 0: grad of out.x = x*y -> (y, x) = (3, 1); element 1: grad of out.y = x + 2y -> (1, 2)
    np.testing.assert_allclose(xs.grad.to_numpy(), [3, 1])
    np.testing.assert_allclose(ys.grad.to_numpy(), [1, 2])


def test_soa_dict_with_a_plain_field_in_bwds(m, device):
    xv = np.array([1, 2, 3], np.float32)
    xs = tensor(device, xv, True)
    res = spy.Tensor.empty(device, shape=(3,), dtype=float).with_grads()
    res.grad.copy_from_numpy(np.ones(3, np.float32))
    m.poly.bwds({"x": xs, "y": 2.0}, res)
    np.testing.assert_allclose(xs.grad.to_numpy(), 2 * xv)


def test_diffpair_defaults(m):
    p = spy.DiffPair()
    assert p.primal == 0.0 and p.grad == 0.0
    p = spy.diffPair(3.0)
    assert p.primal == 3.0 and p.grad == 0.0
    v = spy.DiffPair(spy.float3(1, 2, 3))
    assert isinstance(v.grad, spy.float3) and list(v.grad) == [0, 0, 0]
    # a default gradient reads as zero in a call
    x = spy.diffPair(3.0)
    m.sq.bwds(x, 1.0)
    assert x.grad == pytest.approx(6.0)
    x = spy.diffPair(3.0)
    assert m.sq(x) == pytest.approx(9.0)


# --------------------------------------------------------------------------- item 1: raw dispatch

def _uint3_rows(t):
    return t.to_numpy().reshape(-1, 3)


def test_dispatch_scalar_argument(m, device):
    b = spy.Tensor.empty(device, shape=(32,), dtype=m.uint3)
    m.ndbuffer_multiply.dispatch(spy.uint3(32, 1, 1), buffer=b, amount=10)
    np.testing.assert_array_equal(_uint3_rows(b), [[i * 10, 0, 0] for i in range(32)])


def test_dispatch_constants(m, device):
    b = spy.Tensor.empty(device, shape=(32,), dtype=m.uint3)
    m.ndbuffer_multiply_const.constants({"VAL": 5}).dispatch(spy.uint3(32, 1, 1), buffer=b)
    np.testing.assert_array_equal(_uint3_rows(b), [[i * 5, 0, 0] for i in range(32)])
    m.ndbuffer_multiply_const.constants({"VAL": 7}).dispatch(spy.uint3(32, 1, 1), buffer=b)
    np.testing.assert_array_equal(_uint3_rows(b), [[i * 7, 0, 0] for i in range(32)])


def test_dispatch_honours_set(m, device):
    b = spy.Tensor.empty(device, shape=(32,), dtype=m.uint3)
    func = m.ndbuffer_multiply_uniform.as_func().set({"params": {"k": 20}})
    func.dispatch(spy.uint3(32, 1, 1), buffer=b)
    np.testing.assert_array_equal(_uint3_rows(b), [[i * 20, 0, 0] for i in range(32)])
    func = m.ndbuffer_multiply_uniform.as_func().set(lambda x: {"params": {"k": 30}})
    func.dispatch(spy.uint3(32, 1, 1), buffer=b)
    np.testing.assert_array_equal(_uint3_rows(b), [[i * 30, 0, 0] for i in range(32)])
    # `vars` given to dispatch itself win over .set
    func.dispatch(spy.uint3(32, 1, 1), vars={"params": {"k": 2}}, buffer=b)
    np.testing.assert_array_equal(_uint3_rows(b), [[i * 2, 0, 0] for i in range(32)])


@pytest.mark.parametrize("fn,msg", [
    ("raw_overloaded", "Cannot use raw dispatch on overloaded functions."),
    ("raw_out", "Raw dispatch functions cannot have out or inout parameters."),
    ("raw_returns", "Raw dispatch functions cannot have return values."),
])
def test_dispatch_misuse(m, fn, msg):
    with pytest.raises(ValueError, match=msg.replace(".", r"\.")):
        getattr(m, fn).dispatch(spy.uint3(1, 1, 1))


def test_dispatch_on_a_method_is_refused(m):
    with pytest.raises(ValueError, match=r"Cannot use raw dispatch on type methods\."):
        m.Thing.method.dispatch(spy.uint3(1, 1, 1))


# --------------------------------------------------------------------------- item 4: conversions

def test_list_of_dicts_into_struct_array(m):
    assert m.sum_vals([{"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}]) == 10
    assert m.sum_vals([{"x": -5}, {"x": 20}, {"x": 0}, {"x": 7}]) == 22
    assert m.sum_pairs([{"a": 1, "b": 0.5}, {"a": 10, "b": 0.25}]) == pytest.approx(11.75)
    with pytest.raises(ValueError):
        m.sum_vals([{"x": 1}, {"x": 2}, {"x": 3}])              # 3 elements for Val[4]
    with pytest.raises(ValueError):
        m.sum_vals([{"x": 1}, {"x": 2}, {"x": 3}, {"nope": 4}])


def test_tensor_into_structured_buffer(m, device):
    ib = spy.Tensor.from_numpy(device, np.arange(10, dtype=np.int32) * 3)
    assert m.read_int(ib, 4) == 12
    fb = tensor(device, np.linspace(0, 1, 8))
    np.testing.assert_allclose(m.read_float(fb, spy.Tensor.from_numpy(device, np.arange(8, dtype=np.int32)),
                                            _result="numpy"), np.linspace(0, 1, 8), rtol=1e-6)
    wb = spy.Tensor.zeros(device, shape=(4,), dtype=float)
    m.write_float(wb, 2, 1.5)
    np.testing.assert_array_equal(wb.to_numpy(), [0, 0, 1.5, 0])
    with pytest.raises(ValueError):
        m.read_int(fb, 0)                # float elements for StructuredBuffer<int>


def test_bwds_with_a_plain_float_result(m):
    x = spy.diffPair(3.0)
    m.sq.bwds(x, 1.0)
    assert x.grad == pytest.approx(6.0)
    x = spy.diffPair(-2.0)
    m.sq.bwds(x, _result=0.5)
    assert x.grad == pytest.approx(-2.0)
    v = spy.diffPair(spy.float3(1, 2, 3))
    k = spy.diffPair(2.0)
    m.scale3.bwds(v, k, spy.float3(1, 1, 1))
    np.testing.assert_allclose(list(v.grad), [2, 2, 2])
    assert k.grad == pytest.approx(6.0)


def test_float_tensor_into_int_parameter(m, device):
    data = np.array([0.5, 1.9, -2.7, 4.0], np.float32)
    buf = tensor(device, data)
    with pytest.raises(ValueError):
        m.intfoo(buf)                                   # implicitly: refused, as SlangPy
    want = np.trunc(data) * 2
    np.testing.assert_array_equal(m.intfoo.map((0,))(buf).to_numpy(), want)
    np.testing.assert_array_equal(m.intfoo.map(float)(buf).to_numpy(), want)
    assert m.intfoo(7.9) == 14.0                        # a single value converts


# --------------------------------------------------------------------------- item 6: SlangPy's error wording

def test_error_wording(m, device):
    with pytest.raises(ValueError, match=r"Too many arguments: expected 1, got 2"):
        m.foo(1.0, 2.0)
    with pytest.raises(ValueError, match=r"No parameter named"):
        m.foo(b=10.0)
    with pytest.raises(ValueError, match=r"Parameter 'a' not specified"):
        m.foo()
    with pytest.raises(ValueError, match=r"Parameter 'b' not specified"):
        m.foo2(10.0)
    with pytest.raises(ValueError, match=r"Parameter 'a' specified multiple times"):
        m.foo2(10.0, a=20.0)
    with pytest.raises(BoundVariableException, match=r"Unsupported type"):
        m.foo("hello")
    with pytest.raises(ValueError, match=r"Argument 'a' could not be resolved"):
        m.foo_v3(spy.Tensor.empty(device, shape=(10,), dtype=spy.float4))
    with pytest.raises(ValueError, match=r"Shape mismatch"):
        m.foo2(spy.Tensor.empty(device, shape=(10, 5), dtype=float), spy.Tensor.empty(device, shape=(10, 10),
                                                                                       dtype=float))
    with pytest.raises(AttributeError, match=r"has no function or type named"):
        m.nope
    with pytest.raises(ValueError, match=r"Explicit vectorization raised exception\: NotImplementedError"):
        m.foo_ol.map(()).call(None)
    with pytest.raises(ValueError, match=r"Unsupported type"):
        m.foo(None)


def test_copy_from_numpy_wording(device):
    t = spy.Tensor.empty(device, shape=(4,), dtype=float)
    with pytest.raises(ValueError, match=r"Numpy array is larger than the tensor storage \(32 > 16\)"):
        t.copy_from_numpy(np.zeros(8, np.float32))
    with pytest.raises(ValueError, match=r"Source Numpy array must be contiguous"):
        t.copy_from_numpy(np.zeros(8, np.float32)[::2])
    b = device.create_buffer(size=16, usage=spy.BufferUsage.shader_resource)
    with pytest.raises(ValueError, match=r"numpy array is larger than the buffer \(32 > 16\)"):
        b.copy_from_numpy(np.zeros(8, np.float32))
    t.copy_from_numpy(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(t.to_numpy(), [0, 1, 2, 3])


# --------------------------------------------------------------------------- lists of structs and resources

ARRAY_SRC = r"""
import "slangpy";
struct Val { int x; }
int inc(Val val) { return val.x + 1; }
struct BufVal { StructuredBuffer<int> x; }
int inc_buf(BufVal val) { return val.x[0] + 1; }
struct TenVal { Tensor<float, 1> x; }
float add_ten(TenVal val, float val2) { return val.x[0] + val2; }
struct Pair { int vals[2]; }
int pair_sum(Pair p) { return p.vals[0] + p.vals[1]; }
int sum_buffers(StructuredBuffer<int> buffers[4]) { int s = 0; for (int i = 0; i < 4; i++) s += buffers[i][0]; return s; }
void double_buffers(RWStructuredBuffer<int> buffers[4]) { for (int i = 0; i < 4; i++) buffers[i][0] = buffers[i][0] * 2; }
float sum_tensors(Tensor<float, 1> tensors[4]) { float s = 0.0; for (int i = 0; i < 4; i++) s += tensors[i][0]; return s; }
void double_tensors(RWTensor<float, 1> tensors[4]) { for (int i = 0; i < 4; i++) tensors[i][0] = tensors[i][0] * 2.0; }
"""


@pytest.fixture(scope="module")
def ma(device):
    return spy.Module.load_from_source(device, "slangpy_values_arrays", ARRAY_SRC)


def test_list_of_dicts_vectorised_over_a_struct(ma):
    r = ma.inc([{"x": i, "_type": "Val"} for i in (1, 2, 3, 4)], _result="numpy")
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, [2, 3, 4, 5])
    np.testing.assert_array_equal(ma.inc([{"x": 7}, {"x": -1}], _result="numpy"), [8, 0])
    r = ma.pair_sum.map((0,))([{"vals": [1, 2]}, {"vals": [3, 4]}, {"vals": [5, 6]}], _result="numpy")
    np.testing.assert_array_equal(r, [3, 7, 11])


def _int_buffer(device, v, rw=False):
    usage = spy.BufferUsage.shader_resource | (spy.BufferUsage.unordered_access if rw else 0)
    return device.create_buffer(element_count=1, struct_size=4, data=np.array([v], np.int32), usage=usage)


def test_structs_holding_resources_vectorised(ma, device):
    bufs = [_int_buffer(device, i + 1) for i in range(4)]
    np.testing.assert_array_equal(ma.inc_buf([{"x": b, "_type": "BufVal"} for b in bufs], _result="numpy"),
                                  [2, 3, 4, 5])
    ts = [spy.Tensor.from_numpy(device, np.array([i + 1], np.float32)) for i in range(4)]
    r = ma.add_ten.map((0,), (1,))([{"x": t} for t in ts], [5.0, 10.0, 15.0, 20.0], _result="numpy")
    np.testing.assert_array_equal(r, np.arange(1, 5)[:, None] + np.array([5, 10, 15, 20])[None, :])


def test_arrays_of_buffers_and_tensors(ma, device):
    bufs = [_int_buffer(device, (i + 1) * 10, rw=True) for i in range(4)]
    assert ma.sum_buffers(bufs) == 100
    ma.double_buffers(bufs)
    assert [int(b.to_numpy().view(np.int32)[0]) for b in bufs] == [20, 40, 60, 80]
    with pytest.raises(ValueError):
        ma.double_buffers([_int_buffer(device, 1) for _ in range(4)])      # read-only buffers for RW
    ts = [spy.Tensor.from_numpy(device, np.array([(i + 1) * 10], np.float32)) for i in range(4)]
    assert ma.sum_tensors(ts) == pytest.approx(100.0)
    ma.double_tensors(ts)
    assert [float(t.to_numpy()[0]) for t in ts] == [20, 40, 60, 80]


# --------------------------------------------------------------------------- SOA `this` of a mutating method

PARTICLE_SRC = r"""
import "slangpy";
struct Material { float3 color; float3 emission; }
struct Particle {
    float2 position; float2 velocity; float size; Material material;
    [mutating] void reset(float2 p, float2 v) {
        position = p; velocity = v; size = 0.5; material.color = float3(1); material.emission = float3(0);
    }
    [mutating] void update_position(float dt) { position += velocity * dt; }
}
"""


class ThisType:
    def __init__(self, data):
        self.data = data
        self.get_called = 0
        self.update_called = 0

    def get_this(self):
        self.get_called += 1
        return self.data

    def update_this(self, value):
        self.update_called += 1


def test_soa_this_with_plain_values(device):
    m = spy.Module.load_from_source(device, "slangpy_values_particles", PARTICLE_SRC)
    this = ThisType({"position": spy.Tensor.zeros(device, dtype=spy.float2, shape=(1,)),
                     "velocity": spy.float2(1, 0), "size": 0.5,
                     "material": {"color": spy.float3(1, 1, 1), "emission": spy.float3(0, 0, 0)}})
    m.Particle.reset.bind(this)(spy.float2(1, 2), spy.float2(3, 4))
    np.testing.assert_array_equal(this.data["position"].to_numpy().reshape(-1), [1, 2])
    # the plain values are inputs: the method's writes to them are dropped, the Python values stay
    assert list(this.data["velocity"]) == [1, 0] and this.data["size"] == 0.5
    # SlangPy's counts: get_this once for the signature, once to set the call up, once for the call
    assert this.get_called == 3 and this.update_called == 1
    # a plain velocity is read by a later method
    m.Particle.update_position.bind(this)(0.5)
    np.testing.assert_array_equal(this.data["position"].to_numpy().reshape(-1), [1.5, 2])
    # ValueRefs read the writes back
    this2 = ThisType({"position": spy.Tensor.zeros(device, dtype=spy.float2, shape=(1,)),
                      "velocity": spy.ValueRef(spy.float2(9, 9)), "size": spy.floatRef(9.0),
                      "material": {"color": spy.ValueRef(spy.float3(9)), "emission": spy.ValueRef(spy.float3(9))}})
    m.Particle.reset.bind(this2)(spy.float2(1, 2), spy.float2(3, 4))
    assert list(this2.data["velocity"].value) == [3, 4] and this2.data["size"].value == 0.5
    assert list(this2.data["material"]["color"].value) == [1, 1, 1]


# --------------------------------------------------------------------------- structured numpy arrays

STRUCT_NP_SRC = r"""
import "slangpy";
struct Sample { float valid; int material_id; float2 uv; float3 wi; };
struct SimpleVec2 { float x; float y; };
float sum_vec2(SimpleVec2 v) { return v.x + v.y; }
"""


def test_structured_numpy(device):
    m = spy.Module.load_from_source(device, "slangpy_values_structnp", STRUCT_NP_SRC)
    dt = np.dtype([("x", np.float32), ("y", np.float32)])
    data = np.array([(1.0, 2.0), (3.0, 4.5)], dtype=dt)
    t = spy.Tensor.from_numpy(device, data, dtype=m.SimpleVec2)
    assert t.shape == (2,) and t.to_numpy().tobytes() == data.tobytes()
    np.testing.assert_array_equal(m.sum_vec2(t).to_numpy(), [3.0, 7.5])
    t2 = spy.Tensor.empty(device, dtype=m.SimpleVec2, shape=(2,))
    t2.copy_from_numpy(data)
    assert t2.to_numpy().tobytes() == data.tobytes()
    with pytest.raises(ValueError, match="Structured numpy dtype"):
        spy.Tensor.from_numpy(device, data)
    with pytest.raises(ValueError, match="does not match"):
        spy.Tensor.from_numpy(device, data, dtype=m.Sample)
    with pytest.raises(ValueError, match="byte size"):
        spy.Tensor.empty(device, dtype=m.Sample, shape=(1,)).copy_from_numpy(data[:1])
    with pytest.raises(BoundVariableException, match="Structured numpy dtype"):
        m.sum_vec2(data)


def test_ithis_without_update_this(device):
    m = spy.Module.load_from_source(device, "slangpy_values_ithis", r"""
struct Lin<int N, int M> { float[M] eval(float[N] x) { float[M] r; for (int i = 0; i < M; ++i) r[i] = x[0]; return r; } };
float run<int K, E>(E e, float v) { return float(K) + v; }
""")

    class ReadOnlyThis:
        def get_this(self):
            return {"_type": "Lin<2, 3>"}

    f = m.find_function("run<4, Lin<2, 3>>")
    assert f(ReadOnlyThis(), 0.5) == pytest.approx(4.5)


ARRAY_RET_SRC = r"""
import "slangpy";
half[NumChannels] channels<let NumChannels : int>(half[NumChannels] data)
{
    [ForceUnroll]
    for (int i = 0; i < NumChannels; ++i) { data[i] = 2.h * data[i]; }
    return data;
}
vector<float, N> twice<let N : int>(vector<float, N> v) { return v * 2.0; }
"""


def test_python_lists_resolve_generic_lengths(device):
    m = spy.Module.load_from_source(device, "slangpy_values_arrays_ret", ARRAY_RET_SRC)
    out = m.channels([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])       # N = 8 from the list; floats into half
    assert isinstance(out, list) and len(out) == 8
    np.testing.assert_allclose(np.array(out, np.float32), 2.0 * np.arange(1, 9))
    out = m.find_function("channels<8>")(spy.Tensor.from_numpy(device, np.ones(8, np.float16)))
    np.testing.assert_allclose(np.array(out, np.float32), 2.0)
    x = (np.random.default_rng(4).random((4, 4, 8)).astype(np.float16) - np.float16(0.5))
    y = m.find_function("channels<8>").return_type(spy.Tensor)(spy.Tensor.from_numpy(device, x)).to_numpy()
    assert y.shape == (4, 4, 8)
    np.testing.assert_allclose(y.astype(np.float32), x.astype(np.float32) * 2, atol=1e-3)
    r = m.twice([1, 2, 3])                                              # ints into vector<float, N>
    assert list(r) == [2.0, 4.0, 6.0]


def test_gradient_tensors_must_have_the_derivative_type(device):
    p = spy.Tensor.zeros(device, shape=(4,), dtype="float")
    with pytest.raises(ValueError, match=r"[Ii]nvalid element type"):
        p.with_grads(grad_out=spy.Tensor.zeros(device, shape=(4,), dtype="int"))
    with pytest.raises(ValueError, match=r"[Ii]nvalid element type"):
        p.with_grads(grad_in=spy.Tensor.zeros(device, shape=(4,), dtype="double"))
    g = spy.Tensor.zeros(device, shape=(4,), dtype="float")
    assert p.with_grads(grad_in=g, grad_out=g).grad_out is g


def test_nested_ithis_gets_the_value_the_kernel_wrote(device):
    m = spy.Module.load_from_source(device, "slangpy_values_particles", PARTICLE_SRC)

    class CustomList:
        """get_this() makes a new tensor each time: the kernel's writes must reach update_this."""

        def __init__(self, data):
            self.data = data
            self.get_called = 0

        def get_this(self):
            self.get_called += 1
            return spy.Tensor.from_numpy(device, np.array(self.data, np.float32))

        def update_this(self, value):
            self.data = value.to_numpy().reshape(-1, 2).tolist()

    positions = CustomList([[1, 1], [2, 2], [3, 3]])
    this = ThisType({"position": positions, "velocity": spy.float2(0, 1), "size": 0.5,
                     "material": {"color": spy.float3(1, 1, 1), "emission": spy.float3(0, 0, 0)}})
    m.Particle.update_position.bind(this)(2.0)
    assert positions.data == [[1, 3], [2, 4], [3, 5]]
    n = positions.get_called
    m.Particle.update_position.bind(this)(1.0)
    assert positions.data == [[1, 4], [2, 5], [3, 6]]
    assert positions.get_called - n <= 2          # the signature and the call, not once per leaf
