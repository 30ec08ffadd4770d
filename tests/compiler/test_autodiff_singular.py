"""Issue 15, item 9: gradients at benign singular points follow PyTorch, and forward mode agrees
with reverse mode (docs/autodiff.md, "Singular points").

Expected values are PyTorch's (torch 2.x, CPU, float32):
  torch.linalg.vector_norm(x) at x = 0: grad 0 (PyTorch masks the 0/0 to 0)
  torch.pow(x, y) at x = 0, y = 2: d/dy 0 (masked where x == 0 and y >= 0), d/dx = 2*x = 0
  torch.pow(x, y) at x = 3, y = 0: d/dx 0 (masked where y == 0)
  torch.sqrt / log / rsqrt at 0, asin at 1: reverse gives +-inf for that input (kept: PyTorch does too)
and forward mode is the sum over inputs of (partial * tangent), where an input whose tangent is
exactly 0 contributes 0, so `f(x, y) = sqrt(x) + 3*y` at x = 0 with tangents (0, 1) gives 3 in
forward mode, as reverse mode's finite d/dy = 3 does (instead of 0 * inf = NaN; torch.func.jvp gives
NaN there, so forward mode follows the reverse-mode values rather than torch's jvp).  Checked with
torch 2.x CPU: vector_norm grad at 0 -> [0, 0, 0]; pow grads (0, 2) -> [0, 0], (3, 0) -> [0, log 3],
(0, 0) -> [0, 0]; sqrt/log/rsqrt at 0, asin at 1 with + 3*y -> [inf / inf / -inf / inf, 3].
"""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

import slangjit as spy

RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access

pytestmark = pytest.mark.usefixtures("private_cache")


def run(device, body: str, decls: str = "", n: int = 8):
    src = "RWStructuredBuffer<float> outputBuffer;\n" + textwrap.dedent(decls) + \
        "[numthreads(1, 1, 1)]\nvoid computeMain(uint3 tid : SV_DispatchThreadID)\n{\n" + \
        textwrap.dedent(body) + "\n}\n"
    module = device.load_module_from_source("singular", src)
    k = device.create_compute_kernel(device.link_program([module], [module.entry_point("computeMain")]))
    out = device.create_buffer(element_count=n, struct_size=4, usage=RW)
    k.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out})
    return out.to_numpy().view(np.float32)


LENGTH = """
[Differentiable] float len3(float3 v) { return length(v); }
[Differentiable] float dist3(float3 a, float3 b) { return distance(a, b); }
"""


def test_length_and_distance_at_origin(device):
    out = run(device, """
        var p = diffPair(float3(0, 0, 0));
        bwd_diff(len3)(p, 1.0);
        outputBuffer[0] = p.d.x; outputBuffer[1] = p.d.y; outputBuffer[2] = p.d.z;
        outputBuffer[3] = fwd_diff(len3)(diffPair(float3(0, 0, 0), float3(1, 2, 3))).d;
        var a = diffPair(float3(1, 2, 3)); var b = diffPair(float3(1, 2, 3));
        bwd_diff(dist3)(a, b, 1.0);
        outputBuffer[4] = a.d.x; outputBuffer[5] = b.d.z;
        // away from the origin the usual gradient v / |v|
        var q = diffPair(float3(3, 0, 4));
        bwd_diff(len3)(q, 1.0);
        outputBuffer[6] = q.d.x; outputBuffer[7] = q.d.z;
    """, LENGTH)
    assert out[:6].tolist() == [0.0] * 6          # torch: vector_norm'(0) = 0
    assert out[6:8].tolist() == pytest.approx([0.6, 0.8])


POW = "[Differentiable] float pw(float x, float y) { return pow(x, y); }\n"


def test_pow_at_zero_base_and_zero_exponent(device):
    out = run(device, """
        var x = diffPair(0.0); var y = diffPair(2.0);
        bwd_diff(pw)(x, y, 1.0);
        outputBuffer[0] = x.d; outputBuffer[1] = y.d;
        outputBuffer[2] = fwd_diff(pw)(diffPair(0.0, 0.0), diffPair(2.0, 1.0)).d;
        var x2 = diffPair(3.0); var y2 = diffPair(0.0);
        bwd_diff(pw)(x2, y2, 1.0);
        outputBuffer[3] = x2.d; outputBuffer[4] = y2.d;
        var x3 = diffPair(0.0); var y3 = diffPair(0.0);
        bwd_diff(pw)(x3, y3, 1.0);
        outputBuffer[5] = x3.d; outputBuffer[6] = y3.d;
        outputBuffer[7] = fwd_diff(pw)(diffPair(2.0, 1.0), diffPair(3.0, 1.0)).d;
    """, POW)
    # torch.pow at (0, 2): grads (0, 0); at (3, 0): (0, log 3); at (0, 0): (0, 0)
    assert out[:2].tolist() == [0.0, 0.0]
    assert out[2] == 0.0
    assert out[3] == 0.0 and out[4] == pytest.approx(math.log(3.0))
    assert out[5:7].tolist() == [0.0, 0.0]
    assert out[7] == pytest.approx(3 * 4 + math.log(2) * 8)     # ordinary point unchanged


SING = """
[Differentiable] float fsqrt(float x, float y) { return sqrt(x) + 3.0 * y; }
[Differentiable] float flog(float x, float y) { return log(x) + 3.0 * y; }
[Differentiable] float frsqrt(float x, float y) { return rsqrt(x) + 3.0 * y; }
[Differentiable] float fasin(float x, float y) { return asin(x) + 3.0 * y; }
"""


@pytest.mark.parametrize("fn,x,dx_rev", [("fsqrt", 0.0, math.inf), ("flog", 0.0, math.inf),
                                         ("frsqrt", 0.0, -math.inf), ("fasin", 1.0, math.inf)])
def test_forward_and_reverse_agree_at_singular_points(device, fn, x, dx_rev):
    out = run(device, f"""
        outputBuffer[0] = fwd_diff({fn})(diffPair({x}, 0.0), diffPair(2.0, 1.0)).d;
        var a = diffPair({x}); var b = diffPair(2.0);
        bwd_diff({fn})(a, b, 1.0);
        outputBuffer[1] = a.d; outputBuffer[2] = b.d;
        outputBuffer[3] = fwd_diff({fn})(diffPair({x}, 1.0), diffPair(2.0, 0.0)).d;
    """, SING)
    assert out[0] == 3.0                      # forward, zero tangent on x: 0 (not 0 * inf = NaN) + 3
    assert out[2] == 3.0                      # reverse d/dy: the same 3
    assert out[1] == dx_rev                   # reverse d/dx: infinite, as in PyTorch
    assert out[3] == dx_rev                   # forward with a unit tangent on x: the same infinity


def test_forward_zero_tangent_is_componentwise_for_vectors(device):
    out = run(device, """
        float3 d = fwd_diff(vs)(diffPair(float3(0, 4, 0), float3(0, 1, 1))).d;
        outputBuffer[0] = d.x; outputBuffer[1] = d.y; outputBuffer[2] = d.z;
    """, "[Differentiable] float3 vs(float3 v) { return sqrt(v); }\n")
    assert out[0] == 0.0                      # zero tangent at sqrt(0): 0
    assert out[1] == pytest.approx(0.25)      # 1 / (2 * sqrt(4))
    assert out[2] == math.inf                 # unit tangent at sqrt(0): inf, as PyTorch's jvp
