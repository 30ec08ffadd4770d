"""Issue 19 group 10, run-time loop bounds in reverse mode without [MaxIters]: a loop whose trip
count is a parameter, a uniform, or decided by the values it computes (`while`, `do ... while`,
`break`), with iterations that overwrite what the reverse sweep needs, is replayed rather than
stored (autodiff/recompute.py): the forward sweep records the loop's entry state and trip count,
the reverse sweep re-runs iterations from that state.  Nested loops of either kind, arrays as loop
state, differentiable calls in the body.  Values against float64 finite differences of the same
loops in Python, both modes, CPU and CUDA (and NVRTC)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import slangjit as spy
from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


LOOPS = """RWStructuredBuffer<float> outputBuffer;
uniform int steps;

[Differentiable]
float powLoop(float x, int n)
{
    float r = 1.0;
    for (int i = 0; i < n; i++)
        r = r * x + sin(r);
    return r;
}

[Differentiable]
float whileLoop(float x, uint n)
{
    float r = x;
    uint k = 0;
    while (k < n) { r = r * r * 0.5 + x; k++; }
    return r;
}

[Differentiable]
float step(float v, float x) { return v * cos(x) + 0.1 * v * v; }

[Differentiable]
float nested(float x, int n, int m)
{
    float acc = 0.0;
    float v = x;
    for (int i = 0; i < n; i++)
    {
        float w = v;
        int j = 0;
        while (j < m + i) { w = step(w, x); j++; }
        if (w > 2.0) break;
        acc += w * w;
        v = v * 0.9 + acc * 0.01;
    }
    return acc + v;
}

[Differentiable]
float integrate(float x)
{
    float p = x;
    float vel = 0.0;
    for (int i = 0; i < steps; i++)
    {
        float a = -sin(p);
        vel = vel + 0.1 * a;
        p = p + 0.1 * vel;
    }
    return p;
}

[Differentiable]
float arrState(float x, int n)
{
    float s[3] = { x, 2.0 * x, 0.5 };
    [ForceUnroll]
    for (int t = 0; t < 3; t++) s[t] = s[t] * x;
    int k = 0;
    do
    {
        float tmp = s[0];
        s[0] = s[1] * s[2];
        s[1] = s[2] + tmp * 0.5;
        s[2] = tmp * x;
        k++;
    } while (k < n);
    return s[0] + s[1] + s[2];
}

[Differentiable]
float untilConverged(float x)
{
    float y = x;
    while (y < 10.0) y = y * 1.5 + x * 0.25;
    return y;
}

[Differentiable]
float insideBounded(float x, int n)
{
    float y = x;
    for (int i = 0; i < 3; i++)
    {
        for (int j = 0; j < n + i; j++) y = y * 0.75 + sin(y * x);
        y = y * y * 0.5;
    }
    return y;
}

[numthreads(1, 1, 1)]
void computeMain()
{
    for (int n = 0; n < 3; n++)
    {
        var p = diffPair(0.7);
        bwd_diff(powLoop)(p, n * 3 + 1, 1.0);
        outputBuffer[n] = p.d;
    }
    var q = diffPair(0.9);
    bwd_diff(whileLoop)(q, 5u, 1.0);
    outputBuffer[3] = q.d;
    var p1 = diffPair(0.6);
    bwd_diff(nested)(p1, 4, 2, 1.0);
    outputBuffer[4] = nested(0.6, 4, 2);
    outputBuffer[5] = p1.d;
    outputBuffer[6] = fwd_diff(nested)(diffPair(0.6, 1.0), 4, 2).d;
    var p2 = diffPair(1.2);
    bwd_diff(integrate)(p2, 1.0);
    outputBuffer[7] = integrate(1.2);
    outputBuffer[8] = p2.d;
    var p3 = diffPair(0.8);
    bwd_diff(arrState)(p3, 5, 1.0);
    outputBuffer[9] = arrState(0.8, 5);
    outputBuffer[10] = p3.d;
    outputBuffer[11] = fwd_diff(arrState)(diffPair(0.8, 1.0), 5).d;
    var p4 = diffPair(0.3);
    bwd_diff(untilConverged)(p4, 1.0);
    outputBuffer[12] = p4.d;
    var p5 = diffPair(0.4);
    bwd_diff(insideBounded)(p5, 2, 1.0);
    outputBuffer[13] = p5.d;
}
"""


def pow_loop(x, n):
    r = 1.0
    for _ in range(n):
        r = r * x + math.sin(r)
    return r


def while_loop(x, n):
    r = x
    for _ in range(n):
        r = r * r * 0.5 + x
    return r


def nested(x, n, m):
    acc, v = 0.0, x
    for i in range(n):
        w = v
        for _ in range(m + i):
            w = w * math.cos(x) + 0.1 * w * w
        if w > 2.0:
            break
        acc += w * w
        v = v * 0.9 + acc * 0.01
    return acc + v


def integrate(x, steps=6):
    p, vel = x, 0.0
    for _ in range(steps):
        vel += 0.1 * -math.sin(p)
        p += 0.1 * vel
    return p


def arr_state(x, n):
    s = [x * x, 2 * x * x, 0.5 * x]
    for _ in range(max(n, 1)):
        tmp = s[0]
        s = [s[1] * s[2], s[2] + tmp * 0.5, tmp * x]
    return sum(s)


def until_converged(x):
    y = x
    while y < 10.0:
        y = y * 1.5 + x * 0.25
    return y


def inside_bounded(x, n):
    y = x
    for i in range(3):
        for _ in range(n + i):
            y = y * 0.75 + math.sin(y * x)
        y = y * y * 0.5
    return y


def run_loops(device, tmp_path, steps=6):
    p = tmp_path / "loops.slang"
    p.write_text(LOOPS)
    k = device.create_compute_kernel(device.load_program(str(p), ["computeMain"]))
    buf = device.create_buffer(size=4 * 14, usage=spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource,
                               data=np.zeros(14, np.float32))
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": buf, "steps": steps})
    return buf.to_numpy().view(np.float32).copy()


@DEV
def test_runtime_bounded_loops_in_reverse_mode(device, tmp_path):
    got = run_loops(device, tmp_path)
    want = [fd(lambda x: pow_loop(x, n), 0.7) for n in (1, 4, 7)]
    want += [fd(lambda x: while_loop(x, 5), 0.9)]
    d = fd(lambda x: nested(x, 4, 2), 0.6)
    want += [nested(0.6, 4, 2), d, d]
    want += [integrate(1.2), fd(integrate, 1.2)]
    d = fd(lambda x: arr_state(x, 5), 0.8)
    want += [arr_state(0.8, 5), d, d]
    want += [fd(until_converged, 0.3), fd(lambda x: inside_bounded(x, 2), 0.4)]
    np.testing.assert_allclose(got, want, rtol=2e-4)


@DEV
def test_uniform_bound_changes_at_run_time(device, tmp_path):
    # the same compiled kernel with another trip count: the recorded count drives the replay
    for steps in (0, 1, 13):
        got = run_loops(device, tmp_path, steps)
        np.testing.assert_allclose(got[7:9], [integrate(1.2, steps), fd(lambda x: integrate(x, steps), 1.2)],
                                   rtol=2e-4, atol=1e-6)


def test_cuda_compiles():
    nvrtc_compiles(LOOPS, "runtime_loops")
