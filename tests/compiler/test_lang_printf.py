"""`printf` in kernels (issue 19, session 12): C-style formats on the CPU (the host's stdout, one write
per call so the lines of many threads never interleave) and on CUDA (the device printf; NVRTC-compiled
here, run on a GPU machine).  Inside [Differentiable] functions printf is a side effect with no
derivative, printed once per primal run: once by `f(x)`, once by `fwd_diff(f)`, once by `bwd_diff(f)`
even when f calls a printing g (the nested backward derivative replays g quietly, ir/quiet.py).
Expected text: what C's printf prints for the same values (Python's % formatting agrees for these)."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.source import CompileError

from lang_programs import nvrtc_compiles

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def dispatch(device, tmp_path, src: str, threads: int, n_out: int, data=None) -> np.ndarray:
    p = tmp_path / "printf_prog.slang"
    p.write_text(src)
    program = device.load_program(str(p), ["computeMain"])
    k = device.create_compute_kernel(program)
    usage = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    init = np.zeros(n_out, np.float32) if data is None else np.asarray(data, np.float32)
    buf = device.create_buffer(size=4 * n_out, usage=usage, data=init)
    k.dispatch(thread_count=[threads, 1, 1], vars={"outputBuffer": buf})
    out = buf.to_numpy().view(np.float32)[:n_out].copy()      # synchronizes (CUDA prints by then)
    ctypes.CDLL(None).fflush(None)       # the C runtime's stdout buffer (where the CUDA driver writes) to fd 1
    return out


FORMATS = r"""RWStructuredBuffer<float> outputBuffer;
enum Mode { Cold = 3, Hot = 9 }
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    int a = -42;
    uint b = 4294967295u;
    float f = 3.14159;
    double d = 2.5e-3;
    half h = half(0.5);
    int64_t big = 1234567890123ll;
    bool t = true;
    Mode m = Mode.Hot;
    printf("ints %d %i %u %x %X %o %5d|%-5d|%05d\n", a, a, 7u, 255, 255u, 8, 42, 42, 42);
    printf("uint %u as %%d %d\n", b, b);
    printf("floats %f %.2f %e %g %8.3f %G\n", f, f, d, d, f, 1.0e-10);
    printf("half %g double %.4f int64 %d bool %d char %c str %s\n", h, d, big, t, 65, "ok");
    printf("tab\tescaped \"quote\" back\\slash 100%%\n");
    printf("enum %d\n", m);
    printf("no newline");
    printf(" then newline\n");
    outputBuffer[0] = f;
}
"""

F32 = float(np.float32(3.14159))
FORMATS_EXPECTED = (
    "ints -42 -42 7 ff FF 10    42|42   |00042\n"
    "uint 4294967295 as %d -1\n"
    + ("floats %f %.2f %e %g %8.3f %G\n" % (F32, F32, 2.5e-3, 2.5e-3, F32, 1.0e-10))
    + "half 0.5 double 0.0025 int64 1234567890123 bool 1 char A str ok\n"
    "tab\tescaped \"quote\" back\\slash 100%\n"
    "enum 9\n"
    "no newline then newline\n"
)


@DEV
def test_printf_formats(device, tmp_path, capfd):
    capfd.readouterr()
    out = dispatch(device, tmp_path, FORMATS, 1, 1)
    assert out[0] == np.float32(3.14159)
    got = capfd.readouterr().out
    assert got == FORMATS_EXPECTED


MANY = r"""RWStructuredBuffer<float> outputBuffer;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    float v = float(i) * 0.25;
    printf("thread %04u begin ........................................ value %8.3f end %u\n", i, v, i * i);
    outputBuffer[i] = v;
}
"""


@DEV
def test_printf_many_threads_whole_lines(device, tmp_path, capfd):
    n = 512
    capfd.readouterr()
    out = dispatch(device, tmp_path, MANY, n, n)
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) * 0.25)
    lines = capfd.readouterr().out.split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    pat = re.compile(r"thread (\d{4}) begin \.{40} value +([0-9.]+) end (\d+)")
    seen = []
    for ln in lines:
        m = pat.fullmatch(ln)
        assert m is not None, f"interleaved or malformed line: {ln!r}"
        i = int(m.group(1))
        assert float(m.group(2)) == i * 0.25 and int(m.group(3)) == i * i
        seen.append(i)
    assert sorted(seen) == list(range(n))


DIFF = r"""RWStructuredBuffer<float> outputBuffer;
[Differentiable]
float g(float x)
{
    printf("g %g\n", x);
    return x * x;
}
[Differentiable]
float f(float x)
{
    printf("f %g\n", x);
    return g(x) * 3.0 + g(2.0 * x);
}
[numthreads(1, 1, 1)]
void computeMain()
{
    printf("primal\n");
    outputBuffer[0] = f(1.5);
    printf("fwd\n");
    outputBuffer[1] = fwd_diff(f)(diffPair(1.5, 1.0)).d;
    printf("bwd\n");
    var p = diffPair(1.5);
    bwd_diff(f)(p, 1.0);
    outputBuffer[2] = p.d;
    printf("end\n");
}
"""


@DEV
def test_printf_in_differentiable_functions_prints_once_per_primal_run(device, tmp_path, capfd):
    capfd.readouterr()
    out = dispatch(device, tmp_path, DIFF, 1, 3)
    x = 1.5
    # f(x) = 3 x^2 + 4 x^2 = 7 x^2, f'(x) = 14 x
    np.testing.assert_allclose(out, [7 * x * x, 14 * x, 14 * x], rtol=1e-6)
    once = "f 1.5\ng 1.5\ng 3\n"
    assert capfd.readouterr().out == "primal\n" + once + "fwd\n" + once + "bwd\n" + once + "end\n"


LOOP = r"""RWStructuredBuffer<float> outputBuffer;
[Differentiable]
float h(float x, int n)
{
    float y = x;
    for (int i = 0; i < n; i++)
    {
        printf("it %d y=%g\n", i, y);
        y = y * x;
    }
    return y;
}
[Differentiable]
float outer(float x, int n)
{
    return h(x, n) + h(x, 1);
}
[numthreads(1, 1, 1)]
void computeMain()
{
    int n = int(outputBuffer[0]);
    var p = diffPair(1.5);
    bwd_diff(outer)(p, n, 1.0);
    outputBuffer[0] = p.d;
}
"""


@DEV
def test_printf_in_runtime_trip_count_loop_under_bwd_diff(device, tmp_path, capfd):
    capfd.readouterr()
    out = dispatch(device, tmp_path, LOOP, 1, 1, data=[3.0])
    # outer = x^4 + x^2: derivative 4 x^3 + 2 x
    np.testing.assert_allclose(out[0], 4 * 1.5 ** 3 + 2 * 1.5, rtol=1e-6)
    assert capfd.readouterr().out == "it 0 y=1.5\nit 1 y=2.25\nit 2 y=3.375\nit 0 y=1.5\n"


def test_printf_cuda_compiles_with_nvrtc():
    for src in (FORMATS, MANY, DIFF, LOOP):
        ptx = nvrtc_compiles(src)
        assert b"vprintf" in ptx


@pytest.mark.parametrize("body, code, words", [
    ('float x = 1; printf(x);', "E3100", "string literal"),
    ('printf("%d %d\\n", 1);', "E3102", "more conversions"),
    ('printf("%d\\n", 1, 2);', "E3102", "2 argument(s) given"),
    ('printf("%d\\n", 1.5);', "E3103", "argument 1 is 'float'"),
    ('printf("%f\\n", 3);', "E3103", "argument 1 is 'int'"),
    ('printf("%p\\n", 3);', "E3101", "unsupported conversion '%p'"),
    ('printf("%*d\\n", 3, 4);', "E3101", "unsupported conversion"),
    ('float3 v = 1; printf("%f\\n", v);', "E3103", "float3"),
    ('printf("50%");', "E3101", "unsupported conversion"),
])
def test_printf_diagnostics(body, code, words):
    src = "RWStructuredBuffer<float> outputBuffer;\n[numthreads(1,1,1)]\nvoid computeMain()\n{\n    " + body + "\n}\n"
    with pytest.raises(CompileError) as ei:
        compile_program([SourceSpec(text=src, name="bad")], ["computeMain"], target="cpp")
    msg = str(ei.value)
    assert code in msg and words in msg, msg
    assert "bad" in msg and ":5:" in msg      # located at the call's line


def test_user_function_named_printf_is_called(device, tmp_path):
    src = """RWStructuredBuffer<float> outputBuffer;
float printf(float x) { return x + 1; }
[numthreads(1,1,1)]
void computeMain() { outputBuffer[0] = printf(2.0); }
"""
    assert dispatch(device, tmp_path, src, 1, 1)[0] == 3.0
