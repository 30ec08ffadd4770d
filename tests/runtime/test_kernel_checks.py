"""Generated code never leaves an object it indexes, and failures it records raise after the dispatch
(prelude 13_checks.h, runtime/kernel_errors.py): local arrays / vectors in the default mode, the checked
mode (PipelineOptions.checked), null pointers, deep recursion and reverse-mode [MaxIters] overruns."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit
from slangjit.compiler.passes.options import PipelineOptions
from slangjit.runtime.kernel_errors import ERR_INDEX, ERR_MAX_ITERS, ERR_NULL, ERR_RECURSION, KernelError

pytestmark = pytest.mark.usefixtures("private_cache")

ARRAYS = """
RWStructuredBuffer<int> outb;
uniform int idx;
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    int a[4];
    int b[4];
    for (int i = 0; i < 4; i++) { a[i] = i; b[i] = 10 + i; }
    a[idx] = -1;
    outb[0] = b[0];
    outb[1] = a[idx];
    float3 v = float3(1, 2, 3);
    outb[2] = int(v[idx]);
}
"""


def _run(device, path, vars, dtype=np.int32, n=4):
    prog = device.load_program(str(path), ["main"])
    k = device.create_compute_kernel(prog)
    buf = device.create_buffer(element_count=n, struct_size=4, usage=slangjit.BufferUsage.unordered_access,
                               data=np.zeros(n, dtype))
    k.dispatch([1, 1, 1], vars=dict(outb=buf, **vars))
    return buf.to_numpy().view(dtype)


def _file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("idx", [4, 5, 100_000_000, -1, -3])
def test_local_array_out_of_range_touches_nothing(device, tmp_path, idx):
    # default mode: the write is dropped (b[0] keeps 10), the reads give 0, no segfault
    out = _run(device, _file(tmp_path, "arr.slang", ARRAYS), {"idx": idx})
    assert out[:3].tolist() == [10, 0, 0]


def test_local_array_in_range(device, tmp_path):
    out = _run(device, _file(tmp_path, "arr.slang", ARRAYS), {"idx": 2})
    assert out[:3].tolist() == [10, -1, 3]


def test_checked_mode_names_file_and_line(tmp_path):
    dev = slangjit.create_device(slangjit.DeviceType.cpu, compile_options=PipelineOptions(checked=True))
    path = _file(tmp_path, "arr.slang", ARRAYS)
    assert _run(dev, path, {"idx": 1})[:3].tolist() == [10, -1, 2]
    with pytest.raises(KernelError, match=r"arr\.slang:10: local array index out of range .*index 4, valid range \[0, 4\)") as ei:
        _run(dev, path, {"idx": 4})
    assert ei.value.code == ERR_INDEX and ei.value.location.endswith("arr.slang:10")
    with pytest.raises(KernelError, match=r"index -7"):
        _run(dev, path, {"idx": -7})


def test_checked_mode_vector_and_buffer(tmp_path):
    dev = slangjit.create_device(slangjit.DeviceType.cpu, compile_options=PipelineOptions(checked=True))
    vec = _file(tmp_path, "vec.slang", """
RWStructuredBuffer<int> outb;
uniform int idx;
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    int3 v = int3(1, 2, 3);
    outb[0] = v[idx];
}
""")
    assert _run(dev, vec, {"idx": 2})[0] == 3
    with pytest.raises(KernelError, match=r"vec\.slang:8: vector index out of range .*index 3, valid range \[0, 3\)"):
        _run(dev, vec, {"idx": 3})
    buf = _file(tmp_path, "buf.slang", """
RWStructuredBuffer<int> outb;
uniform int idx;
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    outb[idx] = 7;
}
""")
    assert _run(dev, buf, {"idx": 3})[3] == 7
    with pytest.raises(KernelError, match=r"buf\.slang:7: buffer index out of range .*index 4, valid range \[0, 4\)"):
        _run(dev, buf, {"idx": 4})
    # the default mode keeps dropping the write silently (buffers are bounds-safe)
    assert _run(device_default(), buf, {"idx": 4}).tolist() == [0, 0, 0, 0]


def device_default():
    return slangjit.create_device(slangjit.DeviceType.cpu)


def test_null_pointer_uniform_raises(device, tmp_path):
    path = _file(tmp_path, "ptr.slang", """
RWStructuredBuffer<int> outb;
uniform int* p;
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    outb[0] = *p;
}
""")
    with pytest.raises(KernelError, match=r"ptr\.slang:7: null pointer dereference") as ei:
        _run(device, path, {"p": 0})
    assert ei.value.code == ERR_NULL
    src = device.create_buffer(element_count=1, struct_size=4, data=np.array([42], np.int32))
    assert _run(device, path, {"p": src.device_address})[0] == 42


RECURSION = """
RWStructuredBuffer<int> outb;
uniform int n;
int depth(int k)
{
    int a[64];
    for (int i = 0; i < 64; i++) a[i] = k + i;
    if (k <= 0) return 0;
    int r = depth(k - 1) + depth(k - 2 - k);
    return r + a[(k * 7) & 63] - a[(k * 7) & 63] + 1;
}
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID) { outb[0] = depth(n); }
"""


def test_deep_recursion_raises_instead_of_crashing(device, tmp_path):
    path = _file(tmp_path, "rec.slang", RECURSION)
    assert _run(device, path, {"n": 500})[0] == 500
    with pytest.raises(KernelError, match=r"rec\.slang:4: recursion too deep in 'depth'") as ei:
        _run(device, path, {"n": 10_000_000})
    assert ei.value.code == ERR_RECURSION
    assert _run(device, path, {"n": 300})[0] == 300      # the guard resets for the next dispatch


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_deep_recursion_raises_on_cuda(device, tmp_path):
    """CUDA: the depth-counted guard (prelude sj::depth_exceeded; emit/cuda.py CudaTarget.depth_limit sizes
    the limit to the per-thread stack the runtime sets) stops recursion before the stack overflows -- a
    KernelError naming the site, not a fault that poisons the context -- and the device keeps working."""
    path = _file(tmp_path, "rec.slang", RECURSION)
    assert _run(device, path, {"n": 3})[0] == 3
    with pytest.raises(KernelError, match=r"rec\.slang:4: recursion too deep in 'depth'") as ei:
        _run(device, path, {"n": 10_000_000})
    assert ei.value.code == ERR_RECURSION
    assert _run(device, path, {"n": 3})[0] == 3          # the context is healthy: the next dispatch runs
    assert _run(device, path, {"n": 12})[0] == 12        # inside the limit (16 levels for this frame)
    flat = _file(tmp_path, "flat.slang", "RWStructuredBuffer<int> outb;\n[numthreads(1,1,1)]\n"
                                         "void main(uint3 tid : SV_DispatchThreadID) { outb[0] = 7; }\n")
    assert _run(device, flat, {})[0] == 7


RECURSIVE_AD = """
RWStructuredBuffer<float> outb;
uniform int n;
[Differentiable]
float p(float x, int k) { if (k <= 0) return 1.0; return x * p(x, k - 1); }
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    var d = fwd_diff(p)(diffPair(1.5, 1.0), n);
    var q = diffPair(1.5, 0.0);
    bwd_diff(p)(q, n, 1.0);
    outb[0] = d.p; outb[1] = d.d; outb[2] = q.d;
}
"""


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
def test_recursive_derivatives_are_guarded_and_exact(device, tmp_path):
    """fwd_diff / bwd_diff of a recursive function: the derivative functions are on call cycles too (on CUDA
    they carry the depth counter); x^n and n x^(n-1) at x = 1.5, and a too deep n raises."""
    path = _file(tmp_path, "recad.slang", RECURSIVE_AD)
    out = _run(device, path, {"n": 5}, dtype=np.float32)
    np.testing.assert_allclose(out[:3], [1.5 ** 5, 5 * 1.5 ** 4, 5 * 1.5 ** 4], rtol=1e-6)
    with pytest.raises(KernelError, match=r"recad\.slang:5: recursion too deep in '"):
        _run(device, path, {"n": 10_000_000}, dtype=np.float32)
    np.testing.assert_allclose(_run(device, path, {"n": 2}, dtype=np.float32)[:3], [2.25, 3.0, 3.0], rtol=1e-6)


MAXITERS = """
RWStructuredBuffer<float> outb;
uniform int n;
[Differentiable]
float f(float x, int count)
{
    float y = x;
    [MaxIters(4)]
    for (int i = 0; i < count; i++)
        y = y * x + 1.0;
    return y;
}
[numthreads(1,1,1)]
void main(uint3 tid : SV_DispatchThreadID)
{
    var p = diffPair(1.5, 0.0);
    bwd_diff(f)(p, n, 1.0);
    outb[0] = p.d;
}
"""


def _poly_grad(x, count):
    y, dy = x, 1.0
    for _ in range(count):
        y, dy = y * x + 1.0, dy * x + y
    return dy


@pytest.mark.parametrize("count", [0, 3, 4])
def test_max_iters_within_bound(device, tmp_path, count):
    out = _run(device, _file(tmp_path, "mi.slang", MAXITERS), {"n": count}, np.float32)
    assert out[0] == pytest.approx(_poly_grad(1.5, count), rel=1e-5)


@pytest.mark.parametrize("count", [5, 16, 1000])
def test_max_iters_overrun_raises(device, tmp_path, count):
    with pytest.raises(KernelError, match=r"mi\.slang:9: loop in 'f' ran past its \[MaxIters\(4\)\] bound") as ei:
        _run(device, _file(tmp_path, "mi.slang", MAXITERS), {"n": count}, np.float32)
    assert ei.value.code == ERR_MAX_ITERS


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_max_iters_overrun_raises_on_cuda(device, tmp_path):
    """On the GPU too (default mode): a program with a [MaxIters] loop in a reverse-mode derivative has its
    error record read back after the launch."""
    with pytest.raises(KernelError, match=r"mi\.slang:9: loop in 'f' ran past its \[MaxIters\(4\)\] bound"):
        _run(device, _file(tmp_path, "mi.slang", MAXITERS), {"n": 16}, np.float32)
    _run(device, _file(tmp_path, "mi2.slang", MAXITERS), {"n": 3}, np.float32)        # within the bound: fine


def test_max_iters_overrun_through_functional_api(tmp_path):
    mod_path = _file(tmp_path, "mifn.slang", """
[Differentiable]
float f(float x, int count)
{
    float y = x;
    [MaxIters(4)]
    for (int i = 0; i < count; i++)
        y = y * x + 1.0;
    return y;
}
""")
    dev = device_default()
    m = slangjit.Module.load_from_file(dev, str(mod_path))

    def grads(count):
        x = slangjit.Tensor.from_numpy(dev, np.array([1.5, 1.5], np.float32)).with_grads(zero=True)
        r = m.f(x, count, _result="tensor").with_grads()
        r.grad.copy_from_numpy(np.ones(2, np.float32))
        m.f.bwds(x, count, _result=r)
        return x.grad.to_numpy()
    np.testing.assert_allclose(grads(3), [_poly_grad(1.5, 3)] * 2, rtol=1e-5)
    with pytest.raises(KernelError, match=r"mifn\.slang:7: loop in 'f' ran past its \[MaxIters\(4\)\] bound"):
        grads(9)
