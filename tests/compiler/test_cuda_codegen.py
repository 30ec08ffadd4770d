"""CUDA codegen, checked without a GPU: the generated CUDA C++ must compile with NVRTC (to PTX for sm_90).

Covers every conformance program that the front end compiles (core, autodiff, selftest), every Slang
kernel found in the test files and in the package, and targeted feature kernels (atomics of every
type, wave ops, groupshared, statics, half). Skips only when the NVRTC wheel (cuda-bindings +
nvidia-cuda-nvrtc) is absent; install with `pip install -e '.[test,cuda]'`.
"""
from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys

import pytest

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")

from slangjit.compiler import SourceSpec, compile_program  # noqa: E402
from slangjit.compiler.source import CompileError  # noqa: E402
from slangjit.runtime import cuda_compiler  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
ARCH = "compute_90"


def _nvrtc_usable():
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    if not cuda_compiler.cuda_include_dirs():
        pytest.fail("cuda_fp16.h not found (the cuda extra installs nvidia-cuda-runtime, which ships it)")


def _conformance_root():
    for c in (os.environ.get("SLANGJIT_CONFORMANCE"), os.path.join(ROOT, "..", "shared", "conformance"),
              os.path.join(ROOT, "shared", "conformance"), os.path.join(ROOT, ".gpu", "conformance"),
              "/work/shared/conformance"):
        if c and os.path.isdir(os.path.join(c, "tests")):
            return os.path.abspath(c)
    return None


CONF = _conformance_root()


def _conformance_programs():
    if CONF is None:
        return []
    out = []
    for sub in ("tests/core", "tests/autodiff", "selftest"):
        out += sorted(glob.glob(os.path.join(CONF, sub, "**", "*.slang"), recursive=True))
    return out


def _entry_of(text: str) -> str:
    m = re.search(r"\[\s*numthreads\s*\([^)]*\)\s*\]\s*(?:\[[^\]]*\]\s*)*void\s+(\w+)", text)
    return m.group(1) if m else "computeMain"


def _compile_cuda(sources, entries, include_paths=()):
    return compile_program(sources, entries, target="cuda", include_paths=list(include_paths))


def _nvrtc(src: str):
    ptx, _log = cuda_compiler.compile_source(src, ARCH)
    assert b".entry" in ptx or b".visible .entry" in ptx
    return ptx


@pytest.mark.parametrize("path", _conformance_programs(),
                         ids=lambda p: os.path.relpath(p, CONF) if CONF else p)
def test_conformance_program_nvrtc(path):
    _nvrtc_usable()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    entry = "computeMain" if "computeMain" in text else _entry_of(text)
    try:
        prog = _compile_cuda([SourceSpec(path=path)], [entry], [os.path.dirname(path)])
    except CompileError as e:
        # The front end rejects it for the CPU too: not a CUDA codegen problem (reported by the CPU suites).
        pytest.skip(f"front end: {str(e).splitlines()[0][:160]}")
    _nvrtc(prog.source)


def _test_file_kernels():
    """Slang kernels written as string literals in the test files of the whole tests/ tree (and .slang files
    in the repo); each is named by its file's basename (unique in the tree)."""
    found = []
    for py in sorted(glob.glob(os.path.join(TESTS, "**", "test_*.py"), recursive=True),
                     key=os.path.basename):
        if os.path.basename(py) == os.path.basename(__file__):
            continue
        try:
            tree = ast.parse(open(py, encoding="utf-8").read())
        except SyntaxError:
            continue
        k = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "numthreads" in node.value \
                    and re.search(r"\[\s*numthreads", node.value):
                found.append((f"{os.path.basename(py)}#{k}", node.value))
                k += 1
    for sl in sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.slang"), recursive=True)) + \
            sorted(glob.glob(os.path.join(ROOT, "benchmarks", "**", "*.slang"), recursive=True)):
        text = open(sl, encoding="utf-8").read()
        if re.search(r"\[\s*numthreads", text):
            found.append((os.path.relpath(sl, ROOT), text))
    return found


@pytest.mark.parametrize("name,text", _test_file_kernels(), ids=lambda x: x if isinstance(x, str) and "#" in x or
                         (isinstance(x, str) and x.endswith(".slang")) else "")
def test_test_kernel_nvrtc(name, text):
    _nvrtc_usable()
    entry = _entry_of(text)
    try:
        prog = _compile_cuda([SourceSpec(text=text, name="k")], [entry])
    except CompileError as e:
        pytest.skip(f"front end (snippet may be a negative test or need imports): {str(e).splitlines()[0][:120]}")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"front end raised {type(e).__name__}")
    _nvrtc(prog.source)


# ---------------------------------------------------------------------------- targeted features

ATOMICS = r"""
RWStructuredBuffer<int> ib;
RWStructuredBuffer<uint> ub;
RWStructuredBuffer<float> fb;
RWStructuredBuffer<int64_t> lb;
RWStructuredBuffer<uint64_t> ulb;
RWStructuredBuffer<Atomic<float>> af;
RWStructuredBuffer<Atomic<half>> ah;
RWStructuredBuffer<Atomic<double>> ad;
RWStructuredBuffer<Atomic<int>> ai;
RWStructuredBuffer<Atomic<uint64_t>> au64;
RWByteAddressBuffer bab;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    int o;
    InterlockedAdd(ib[0], 1);
    InterlockedAdd(ib[1], 2, o);
    InterlockedMin(ib[2], int(tid.x));
    InterlockedMax(ub[0], tid.x);
    InterlockedAnd(ub[1], 0xF0u);
    InterlockedOr(ub[2], 1u << (tid.x & 31));
    InterlockedXor(ub[3], tid.x);
    uint prev;
    InterlockedCompareExchange(ub[4], 0u, tid.x, prev);
    InterlockedExchange(ub[5], tid.x, prev);
    InterlockedAdd(fb[0], 0.5);
    InterlockedAdd(lb[0], int64_t(1));
    InterlockedMax(ulb[0], uint64_t(tid.x));
    af[0].add(1.0);
    af[1].max(float(tid.x));
    ah[0].add(half(1.0));
    ad[0].add(1.0);
    ai[0].compareExchange(0, 5);
    ai[1].exchange(3);
    au64[0].or(uint64_t(1));
    bab.InterlockedAdd(0, 1u);
    bab.InterlockedAddF32(4, 1.0);
    bab.InterlockedMax(8, tid.x);
}
"""

WAVES = r"""
RWStructuredBuffer<float> f;
RWStructuredBuffer<uint> u;
RWStructuredBuffer<float3> v;
[numthreads(128, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    float x = f[tid.x];
    f[tid.x] = WaveActiveSum(x) + WaveActiveMax(x) + WaveActiveMin(x) + WaveActiveProduct(x) + WavePrefixSum(x);
    u[tid.x] = WaveGetLaneIndex() + WaveGetLaneCount() + (WaveIsFirstLane() ? 1u : 0u)
             + WaveActiveCountBits(x > 0.0) + WavePrefixCountBits(x > 1.0) + WaveActiveBitOr(tid.x)
             + WaveReadLaneFirst(tid.x) + WaveReadLaneAt(tid.x, 3);
    if (tid.x % 3 == 0)
        v[tid.x] = WaveActiveSum(v[tid.x]);
    if (WaveActiveAllTrue(x > -1.0) && WaveActiveAnyTrue(x > 2.0))
        u[0] = 1;
}
"""

SHARED_STATIC = r"""
RWStructuredBuffer<float> outp;
groupshared float tile[64];
groupshared int counter;
static int perThread = 7;
static const float table[4] = { 1.0, 2.0, 3.0, 4.0 };
static const float inf = 1.0 / 0.0;
struct S { float a = 1.0; int b; };
groupshared S sh;
uniform float scale;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uint gi : SV_GroupIndex, uint3 gid : SV_GroupID,
                 uint3 gtid : SV_GroupThreadID, uniform float bias)
{
    tile[gi] = outp[tid.x];
    if (gi == 0) { counter = 0; sh.a = 2.0; }
    GroupMemoryBarrierWithGroupSync();
    perThread += int(gi);
    InterlockedAdd(counter, 1);
    float s = 0;
    for (int i = 0; i < 64; i++) s += tile[i];
    AllMemoryBarrierWithGroupSync();
    outp[tid.x] = s * scale + bias + table[gi % 4] + float(perThread) + float(gid.x + gtid.x) + sh.a
                  + (isinf(inf) ? 1.0 : 0.0);
}
"""

HALF = r"""
RWStructuredBuffer<half> h;
RWStructuredBuffer<half3> h3;
RWStructuredBuffer<float> f;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    half a = h[tid.x];
    half3 b = h3[tid.x];
    h[tid.x] = a * half(2.0) + sin(a) + max(a, half(0.5));
    h3[tid.x] = b * a + normalize(b);
    f[tid.x] = float(a) + dot(float3(b), float3(1, 2, 3)) + f16tof32(f32tof16(f[tid.x])) + asfloat(asuint(f[tid.x]));
}
"""


@pytest.mark.parametrize("name", ["ATOMICS", "WAVES", "SHARED_STATIC", "HALF"])
def test_feature_kernels_nvrtc(name):
    _nvrtc_usable()
    text = globals()[name]
    prog = _compile_cuda([SourceSpec(text=text, name=name.lower())], ["computeMain"])
    src = prog.source
    assert 'extern "C" __global__ void __launch_bounds__(' in src
    ptx = _nvrtc(src)
    if name == "ATOMICS":
        assert b"atom.global.add.f32" in ptx or b"red.global.add.f32" in ptx      # native float atomicAdd
        assert re.search(rb"(atom|red)(\.global)?\.add\.noftz\.f16", ptx)        # native half atomicAdd
        assert b"add.f64" in ptx
    if name == "WAVES":
        assert b"shfl.sync.bfly" in ptx and b"activemask" in ptx
    if name == "SHARED_STATIC":
        assert b".shared" in ptx and b"bar.sync" in ptx
        info = prog.reflection.entry_points["computeMain"]
        assert [p.name for p in info.params] == ["bias"] and info.numthreads == (64, 1, 1)
        assert [g.name for g in prog.reflection.globals] == ["outp", "scale"]


def test_reflection_matches_cpu_layout():
    _nvrtc_usable()
    text = SHARED_STATIC.replace("GroupMemoryBarrierWithGroupSync();", "").replace("AllMemoryBarrierWithGroupSync();", "")
    a = compile_program([SourceSpec(text=text, name="l")], ["computeMain"], target="cpp").reflection
    b = _compile_cuda([SourceSpec(text=text, name="l")], ["computeMain"]).reflection
    assert [(f.name, f.offset, f.layout.size) for f in a.globals] == [(f.name, f.offset, f.layout.size) for f in b.globals]
    assert a.globals_size == b.globals_size
    ea, eb = a.entry_points["computeMain"], b.entry_points["computeMain"]
    assert (ea.symbol, ea.params_size, ea.numthreads) == (eb.symbol, eb.params_size, eb.numthreads)


def test_fast_math_off_and_cubin():
    _nvrtc_usable()
    opts = cuda_compiler.default_options("sm_90")
    assert "--ftz=false" in opts and "--prec-div=true" in opts and not any("fast" in o for o in opts)
    prog = _compile_cuda([SourceSpec(text=ATOMICS, name="c")], ["computeMain"])
    cubin, _ = cuda_compiler.compile_source(prog.source, "sm_90")
    assert cubin[:4] == b"\x7fELF"


def test_cache_roundtrip(tmp_path, monkeypatch):
    _nvrtc_usable()
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path))
    prog = _compile_cuda([SourceSpec(text=HALF, name="cache")], ["computeMain"])
    src = prog.source + "\n// cache test " + str(tmp_path) + "\n"
    a = cuda_compiler.compile_cached(src, "sm_90")
    assert not a.cached
    cuda_compiler._mem_cache.clear()
    b = cuda_compiler.compile_cached(src, "sm_90")
    assert b.cached and b.image == a.image
    # A truncated cache file is rebuilt, not trusted.
    files = glob.glob(os.path.join(str(tmp_path), "cuda", "*.cubin"))
    assert len(files) == 1
    with open(files[0], "r+b") as f:
        f.truncate(100)
    cuda_compiler._mem_cache.clear()
    c = cuda_compiler.compile_cached(src, "sm_90")
    assert not c.cached and c.image == a.image


def test_nvrtc_error_is_reported():
    _nvrtc_usable()
    with pytest.raises(cuda_compiler.NvrtcError, match="error"):
        cuda_compiler.compile_source("__global__ void k() { undefined_thing(); }", ARCH)


def test_cli_target_cuda(tmp_path):
    _nvrtc_usable()
    src = tmp_path / "k.slang"
    src.write_text(WAVES)
    out = tmp_path / "k.cu"
    r = subprocess.run([sys.executable, "-m", "slangjit", "compile", str(src), "-e", "computeMain", "--target", "cuda",
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "sj_entry_computeMain" in text and "__global__" in text
    _nvrtc(text)
