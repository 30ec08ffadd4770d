"""End-to-end autodiff through the compute API (module -> program -> kernel -> dispatch), against analytic
derivatives: seed 003's examples (square, Point : IDifferentiable, custom derivatives, gradients into a
RWStructuredBuffer<Atomic<float>> from many threads), parameter directions (inout / out) under fwd_diff and
bwd_diff, [MaxIters] loops (including a run-time trip count above the bound), and half / double."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import slangjit as spy
from slangjit.runtime.kernel_errors import KernelError

RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access

pytestmark = pytest.mark.usefixtures("private_cache")


def kernel(device, source: str, name: str):
    module = device.load_module_from_source(name, textwrap.dedent(source))
    return device.create_compute_kernel(device.link_program([module], [module.entry_point("computeMain")]))


def buf(device, data=None, n=0, dtype=np.float32):
    if data is not None:
        data = np.ascontiguousarray(data)
        return device.create_buffer(element_count=data.size, struct_size=data.itemsize, usage=RW, data=data)
    return device.create_buffer(element_count=n, struct_size=np.dtype(dtype).itemsize, usage=RW)


def read(b, dtype=np.float32):
    return b.to_numpy().view(dtype)


def run1(device, source, name, n=8, threads=1, **vars):
    """Dispatch `threads` threads of a kernel writing float outputBuffer; returns the buffer."""
    k = kernel(device, source, name)
    out = buf(device, n=n)
    k.dispatch(thread_count=[threads, 1, 1], vars={"outputBuffer": out, **vars})
    return read(out)


# ------------------------------------------------------------------------------------------ seed 003


SQUARE = """
RWStructuredBuffer<float> outputBuffer;

[Differentiable]
float square(float x, float y)
{
    return x * x + y * y;
}

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    // x=3, dx/dtheta = 1; y=4, dy/dgamma = 0
    let x = diffPair(3.0, 1.0);
    let y = diffPair(4.0, 0.0);
    let result = fwd_diff(square)(x, y);
    outputBuffer[0] = result.d;     // 6.0
    outputBuffer[1] = result.p;     // 25.0
    var bx = diffPair(3.0, 0.0);    // initial gradient 0
    var by = diffPair(4.0, 0.0);
    let dL_dSquare = 1.0f;
    bwd_diff(square)(bx, by, dL_dSquare);
    outputBuffer[2] = bx.d;         // 6.0
    outputBuffer[3] = by.d;         // 8.0
    outputBuffer[4] = bx.p;         // primal unchanged: 3.0
}
"""


def test_seed003_square_fwd_and_bwd(device):
    out = run1(device, SQUARE, "ad_square")
    np.testing.assert_array_equal(out[:5], [6.0, 25.0, 6.0, 8.0, 3.0])


POINT = """
RWStructuredBuffer<float> outputBuffer;
StructuredBuffer<float2> pts;

struct Point : IDifferentiable
{
    float x;
    float y;
    int id;             // not differentiable: no field in Point.Differential
}

[Differentiable]
float square(Point p)
{
    return p.x * p.x + p.y * p.y;
}

[Differentiable]
Point scaled(Point p, float s)
{
    Point q;
    q.x = p.x * s;
    q.y = p.y * s * s;
    q.id = p.id;
    return q;
}

[numthreads(16, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    Point p;
    p.x = pts[i].x;
    p.y = pts[i].y;
    p.id = int(i);
    Point.Differential dp;
    dp.x = 1.0;
    dp.y = 0.5;
    outputBuffer[i * 8 + 0] = fwd_diff(square)(diffPair(p, dp)).d;      // 2x + y
    var bp = diffPair(p);
    bwd_diff(square)(bp, 2.0);
    outputBuffer[i * 8 + 1] = bp.d.x;                                    // 4x
    outputBuffer[i * 8 + 2] = bp.d.y;                                    // 4y
    // a struct-valued function: d/ds of (x s, y s^2) at s = 1.5, and its backward pass
    var ps = diffPair(p);
    var s = diffPair(1.5, 0.0);
    Point.Differential dq;
    dq.x = 1.0;
    dq.y = -2.0;
    bwd_diff(scaled)(ps, s, dq);
    outputBuffer[i * 8 + 3] = ps.d.x;                                    // s = 1.5
    outputBuffer[i * 8 + 4] = ps.d.y;                                    // -2 s^2 = -4.5
    outputBuffer[i * 8 + 5] = s.d;                                       // x - 4 y s
    let r = fwd_diff(scaled)(diffPair(p, dp), diffPair(1.5, 1.0));
    outputBuffer[i * 8 + 6] = r.d.x;                                     // s + x
    outputBuffer[i * 8 + 7] = r.d.y;                                     // 0.5 s^2 + 2 y s
}
"""


def test_seed003_point_idifferentiable(device):
    rng = np.random.default_rng(3)
    pts = rng.uniform(-2, 2, (16, 2)).astype(np.float32)
    k = kernel(device, POINT, "ad_point")
    out = buf(device, n=16 * 8)
    k.dispatch(thread_count=[16, 1, 1], vars={"outputBuffer": out, "pts": buf(device, pts)})
    got = read(out).reshape(16, 8).astype(np.float64)
    x, y, s = pts[:, 0].astype(np.float64), pts[:, 1].astype(np.float64), 1.5
    want = np.stack([2 * x + y, 4 * x, 4 * y, np.full(16, s), np.full(16, -2 * s * s), x - 4 * y * s,
                     s + x, 0.5 * s * s + 2 * y * s], 1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------ directions


DIRECTIONS = """
RWStructuredBuffer<float> outputBuffer;

[Differentiable]
void step(inout float acc, float x)
{
    acc = acc * x + sin(x);
}

[Differentiable]
void polar(float r, float t, out float px, out float py)
{
    px = r * cos(t);
    py = r * sin(t);
}

[Differentiable]
float useBoth(float a, float x)
{
    float acc = a;
    step(acc, x);
    float px, py;
    polar(acc, x, px, py);
    return px * py;
}

[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    // fwd_diff: an inout parameter is an inout pair updated with its primal and tangent
    var acc = diffPair(1.5, 1.0);
    fwd_diff(step)(acc, diffPair(0.5, 0.0));
    outputBuffer[0] = acc.p;                  // 1.5 * 0.5 + sin(0.5)
    outputBuffer[1] = acc.d;                  // d(acc_after)/d(acc) = x = 0.5
    var acc2 = diffPair(1.5, 0.0);
    fwd_diff(step)(acc2, diffPair(0.5, 1.0));
    outputBuffer[2] = acc2.d;                 // acc + cos(x) = 1.5 + cos(0.5)

    // bwd_diff: the inout pair's .d is dL/d(acc after) on entry and dL/d(acc before) on return
    var b = diffPair(1.5, 2.0);
    var bx = diffPair(0.5, 0.0);
    bwd_diff(step)(b, bx);
    outputBuffer[3] = b.d;                    // 2 x = 1
    outputBuffer[4] = bx.d;                   // 2 (acc + cos x)
    outputBuffer[5] = b.p;                    // primal not updated: 1.5

    // out parameters: fwd_diff writes pairs; bwd_diff takes one derivative per output
    DifferentialPair<float> qx, qy;
    fwd_diff(polar)(diffPair(2.0, 0.0), diffPair(0.25, 1.0), qx, qy);
    outputBuffer[6] = qx.d;                   // -r sin t
    outputBuffer[7] = qy.d;                   //  r cos t
    var r = diffPair(2.0, 0.0);
    var t = diffPair(0.25, 0.0);
    bwd_diff(polar)(r, t, 1.0, -3.0);
    outputBuffer[8] = r.d;                    // cos t - 3 sin t
    outputBuffer[9] = t.d;                    // -r sin t - 3 r cos t

    // both inside a differentiated caller
    var a = diffPair(0.75, 0.0);
    var x = diffPair(-0.4, 0.0);
    bwd_diff(useBoth)(a, x, 1.0);
    outputBuffer[10] = a.d;
    outputBuffer[11] = x.d;
    outputBuffer[12] = fwd_diff(useBoth)(diffPair(0.75, 1.0), diffPair(-0.4, 0.0)).d;
    outputBuffer[13] = fwd_diff(useBoth)(diffPair(0.75, 0.0), diffPair(-0.4, 1.0)).d;
}
"""


def test_inout_and_out_parameter_conventions(device):
    o = run1(device, DIRECTIONS, "ad_directions", n=14).astype(np.float64)
    xs, acc0 = 0.5, 1.5
    r, t = 2.0, 0.25
    np.testing.assert_allclose(o[:10], [acc0 * xs + np.sin(xs), xs, acc0 + np.cos(xs), 2 * xs,
                                        2 * (acc0 + np.cos(xs)), acc0, -r * np.sin(t), r * np.cos(t),
                                        np.cos(t) - 3 * np.sin(t), -r * np.sin(t) - 3 * r * np.cos(t)],
                               rtol=1e-6, atol=1e-6)

    def use_both(a, x):
        acc = a * x + np.sin(x)
        return acc * np.cos(x) * acc * np.sin(x)

    h = 1e-6
    da = (use_both(0.75 + h, -0.4) - use_both(0.75 - h, -0.4)) / (2 * h)
    dx = (use_both(0.75, -0.4 + h) - use_both(0.75, -0.4 - h)) / (2 * h)
    np.testing.assert_allclose(o[10:14], [da, dx, da, dx], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------ buffer gradients


GRAD_BUFFER = """
RWStructuredBuffer<float> paramBuffer;
RWStructuredBuffer<Atomic<float>> gradBuffer;

ATTR_ON_GETPARAM
float getParam(int idx)
{
    return paramBuffer[idx];
}

ATTR_ON_BWD
void getParamBwd(int idx, float dOut)
{
    gradBuffer[idx] += dOut; // atomic gradient accumulation
}

[Differentiable]
float compute(int idx)
{
    float w = getParam(idx);
    return w * w + 0.5 * w;
}

[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint t = tid.x;
    bwd_diff(compute)(int(t % 4), 0.25 * float(1 + (t / 4) % 3));
}
"""


@pytest.mark.parametrize("form", ["BackwardDerivative", "BackwardDerivativeOf"])
def test_custom_backward_derivative_atomic_gradient_buffer_256_threads(device, monkeypatch, form):
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "4")      # several workers race on the same 4 slots
    src = GRAD_BUFFER.replace("ATTR_ON_GETPARAM", "[BackwardDerivative(getParamBwd)]" if form == "BackwardDerivative"
                              else "").replace("ATTR_ON_BWD", "[BackwardDerivativeOf(getParam)]"
                                               if form == "BackwardDerivativeOf" else "")
    k = kernel(device, src, f"ad_gradbuf_{form}")
    w = np.array([1.5, -0.75, 2.25, 0.5], np.float32)
    grad = buf(device, np.zeros(4, np.float32))
    for _ in range(2):                                  # accumulates across dispatches too
        k.dispatch(thread_count=[256, 1, 1], vars={"paramBuffer": buf(device, w), "gradBuffer": grad})
    t = np.arange(256)
    dout = 0.25 * (1 + (t // 4) % 3)
    want = np.zeros(4)
    for slot in range(4):
        want[slot] = 2 * np.sum((2 * w[slot] + 0.5) * dout[t % 4 == slot])
    # every partial sum is a small dyadic rational: exact in float32 whatever the order of the atomic adds
    np.testing.assert_array_equal(read(grad), want.astype(np.float32))


# ------------------------------------------------------------------------------------------ loops


LOOPS = """
RWStructuredBuffer<float> outputBuffer;
StructuredBuffer<float> xs;

[Differentiable]
float grow(float x)
{
    float y = x;
    int k = 0;
    [MaxIters(3)]
    while (y < 10.0)
    {
        y = y * x;
        k++;
    }
    return y;
}

[numthreads(8, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    float x = xs[i];
    var p = diffPair(x, 0.0);
    bwd_diff(grow)(p, 1.0);
    outputBuffer[i * 4 + 0] = p.d;
    outputBuffer[i * 4 + 1] = fwd_diff(grow)(diffPair(x, 1.0)).d;
    outputBuffer[i * 4 + 2] = grow(x);
    outputBuffer[i * 4 + 3] = -7.0;      // sentinel after the reverse pass's storage was used
}
"""


def test_maxiters_loop_gradients_and_overrun_raises(device):
    # y = x^(k+1) where k is the number of loop trips; derivative (k+1) x^k.
    xs = np.array([4.0, 2.5, 2.0, 11.0, 3.5, 4.0, 2.5, 2.0], np.float32)     # all within [MaxIters(3)]
    k = kernel(device, LOOPS, "ad_loops")
    out = buf(device, n=8 * 4)
    k.dispatch(thread_count=[8, 1, 1], vars={"outputBuffer": out, "xs": buf(device, xs)})
    o = read(out).reshape(8, 4).astype(np.float64)
    np.testing.assert_array_equal(o[:, 3], -7.0)
    for i, x in enumerate(xs.astype(np.float64)):
        y, n = x, 0
        while y < 10.0:
            y, n = y * x, n + 1
        assert n <= 3
        np.testing.assert_allclose(o[i, :3], [(n + 1) * x ** n, (n + 1) * x ** n, y], rtol=1e-5)
    # more trips than [MaxIters(3)] (x = 1.5 needs 5): the kernel records the overrun, the dispatch raises
    # naming the loop (issue 15: never a silently wrong gradient)
    xs[3] = 1.5
    with pytest.raises(KernelError, match=r"ad_loops\.slang:11: loop in 'grow' ran past its \[MaxIters\(3\)\] bound"):
        k.dispatch(thread_count=[8, 1, 1], vars={"outputBuffer": out, "xs": buf(device, xs)})
    np.testing.assert_array_equal(read(out).reshape(8, 4)[:, 3], -7.0)     # and nothing was overwritten


# ------------------------------------------------------------------------------------------ half / double


HALF_DOUBLE = """
RWStructuredBuffer<float> outputBuffer;
RWStructuredBuffer<double> doubleOut;
StructuredBuffer<double> dx;

[Differentiable]
half fh(half x, half y)
{
    return x * x * y + sin(x);
}

[Differentiable]
double fd(double x, double y)
{
    return exp(x) * y + x * x * x * y;
}

[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    half hx = half(0.5) + half(i) * half(0.25);
    half hy = half(-1.5);
    outputBuffer[i * 3 + 0] = float(fwd_diff(fh)(diffPair(hx, half(1.0)), diffPair(hy, half(0.0))).d);
    var px = diffPair(hx, half(0.0));
    var py = diffPair(hy, half(0.0));
    bwd_diff(fh)(px, py, half(1.0));
    outputBuffer[i * 3 + 1] = float(px.d);
    outputBuffer[i * 3 + 2] = float(py.d);

    double x = dx[i];
    double y = 0.375;        // dyadic: the literal is exact in float too
    doubleOut[i * 3 + 0] = fwd_diff(fd)(diffPair(x, 1.0), diffPair(y, 0.0)).d;
    var qx = diffPair(x, 0.0);
    var qy = diffPair(y, 0.0);
    bwd_diff(fd)(qx, qy, 1.0);
    doubleOut[i * 3 + 1] = qx.d;
    doubleOut[i * 3 + 2] = qy.d;
}
"""


def test_half_and_double(device):
    xd = np.array([0.1, -0.7, 1.3, 2.0 / 3.0], np.float64)
    k = kernel(device, HALF_DOUBLE, "ad_half_double")
    out, dout = buf(device, n=12), buf(device, n=12, dtype=np.float64)
    k.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out, "doubleOut": dout, "dx": buf(device, xd)})
    # half: about 3 significant digits
    hx = 0.5 + 0.25 * np.arange(4)
    hy = -1.5
    h = read(out).reshape(4, 3).astype(np.float64)
    want_h = np.stack([2 * hx * hy + np.cos(hx), 2 * hx * hy + np.cos(hx), hx * hx], 1)
    np.testing.assert_allclose(h, want_h, rtol=4e-3, atol=4e-3)
    # double: to double precision (a float32 computation would be off by ~1e-7)
    d = read(dout, np.float64).reshape(4, 3)
    y = 0.375
    want_d = np.stack([np.exp(xd) * y + 3 * xd * xd * y, np.exp(xd) * y + 3 * xd * xd * y, np.exp(xd) + xd ** 3], 1)
    np.testing.assert_allclose(d, want_d, rtol=1e-13, atol=1e-14)


def test_more_elementary_derivatives_and_wave_sum():
    """asinh / atanh / acosh / fmax / WaveActiveSum rules, both modes, vs the analytic derivative."""
    import math
    import numpy as np
    import slangjit as spy
    src = """
RWStructuredBuffer<float> outputBuffer;
[Differentiable] float f(float x) { return asinh(x) + atanh(x * 0.5) + acosh(x + 2.0) + fmax(x, 0.1) + WaveActiveSum(x * x); }
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outputBuffer[0] = fwd_diff(f)(diffPair(0.5, 1.0)).d;
    var p = diffPair(0.5, 0.0);
    bwd_diff(f)(p, 1.0);
    outputBuffer[1] = p.d;
}
"""
    device = spy.create_device(type=spy.DeviceType.cpu)
    m = device.load_module_from_source("ad_more", src)
    k = device.create_compute_kernel(device.link_program([m], [m.entry_point("computeMain")]))
    out = device.create_buffer(element_count=2, struct_size=4,
                               usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access)
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out})
    x = 0.5
    want = 1 / math.sqrt(x * x + 1) + 0.5 / (1 - (x * 0.5) ** 2) + 1 / math.sqrt((x + 2) ** 2 - 1) + 1 + 2 * x
    np.testing.assert_allclose(out.to_numpy().view(np.float32), [want, want], rtol=1e-5)
