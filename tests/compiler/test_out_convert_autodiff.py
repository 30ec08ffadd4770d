"""An intrinsic's out-arguments of another type in a differentiated function (`int s, c; sincos(x, s, c)`):
the derivative code stores the outputs through the conversion (was E9001 "cannot emit OutConvert", fuzz
seed 15 mutant 17790).  The int outputs carry no derivative, so
    f(x) = s c + degrees(x) + radians(x),  s = int(sin x), c = int(cos x)
has f'(x) = 180/pi + pi/180 wherever s c is constant."""
import math

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.usefixtures("private_cache")

SRC = """
RWStructuredBuffer<float> outb;
[Differentiable]
float f(float x)
{
    int s, c;
    sincos(x, s, c);
    return s * c + degrees(x) + radians(x);
}
[Differentiable]
float g(float x)
{
    int s;
    uint c;
    sincos(x, s, c);
    return float(s) + float(c) + x * x;
}
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    outb[0] = fwd_diff(f)(diffPair(0.4, 1.0)).d;
    var x = diffPair(-1.3, 0.0);
    bwd_diff(f)(x, 0.5);
    outb[1] = x.d;
    outb[2] = f(0.4);
    outb[3] = f(1.5);
    var y = diffPair(3.0, 0.0);
    bwd_diff(g)(y, 1.0);
    outb[4] = y.d;
    outb[5] = g(3.0);
}
"""


def test_int_out_arguments_of_sincos_in_derivatives(device):
    m = device.load_module_from_source("outconvert_sincos", SRC)
    k = device.create_compute_kernel(device.link_program([m], [m.entry_point("computeMain")]))
    buf = device.create_buffer(element_count=6, struct_size=4,
                               usage=spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access)
    k.dispatch(thread_count=[1, 1, 1], vars={"outb": buf})
    o = buf.to_numpy().view(np.float32)
    k1 = 180 / math.pi + math.pi / 180
    assert o[0] == pytest.approx(k1, rel=1e-6)
    assert o[1] == pytest.approx(0.5 * k1, rel=1e-6)
    assert o[2] == pytest.approx(0.4 * k1, rel=1e-6)                         # int(sin .4) = int(cos .4) = 0
    assert o[3] == pytest.approx(int(math.sin(1.5)) * int(math.cos(1.5)) + 1.5 * k1, rel=1e-6)
    assert o[4] == pytest.approx(6.0, rel=1e-6)
    # int(sin 3) = 0; cos 3 = -0.99 -> int 0 -> uint 0
    assert o[5] == pytest.approx(9.0, rel=1e-6)


def test_int_out_arguments_compile_with_nvrtc():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")
    from slangjit.compiler import SourceSpec, compile_program
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    src = compile_program([SourceSpec(text=SRC, name="oc")], ["computeMain"], target="cuda").source
    ptx, _log = cuda_compiler.compile_source(src, "compute_90")
    assert b".entry" in ptx
