"""Cold compile latency (issue 20): what a new process on an empty cache folder does differently now.

* The prelude declares the C math functions it calls instead of including <cmath> (glibc): the results are
  those of a build with <cmath> (`-DSJ_STD_CMATH`), bit for bit, and near float64.
* The syntax trees of the compiler's own Slang files are queued for the disk cache and written after the front
  end (when a caller waits for a C++ build, or at exit): the entries are complete and valid, the trees pickled
  later are the trees pickled at parse time, and processes sharing one empty cache all succeed.
* A background build's compiler process runs before load_library_async returns; the compiler's facts are found
  in a thread at device creation.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import frontend, frontend_cache as fc
from slangjit.runtime import cpu_compiler as cc

# syntax trees a cold compile of KERNEL queues: the core library's files but the on-demand ones (a kernel that names
# no cooperative-vector function never parses them), and slangpy.slang
LIBRARY_TREES = len(frontend._core_files(False)) + 1

ROOT = Path(__file__).resolve().parents[2]
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):
        return False




# ------------------------------------------------------------------------------------------ the prelude's math

MATH = """
RWStructuredBuffer<T> x;
RWStructuredBuffer<T> y;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    T v = x[i];
    T e;
    T ip;
    T m = frexp(v, e);
    T r[33] = { sin(v), cos(v), tan(v), asin(v), acos(v), atan(v), sinh(v), cosh(v), tanh(v), asinh(v),
        acosh(T(1.0) + v), atanh(v), exp(v), exp2(v), log(v), log2(v), log10(v), sqrt(v), floor(v * T(7.0)),
        ceil(v * T(7.0)), round(v * T(7.0)), trunc(v * T(7.0)), abs(-v), fmod(v * T(7.0), T(0.3)), pow(v, T(1.7)),
        atan2(v, T(0.3)), copysign(v, T(-1.0)), min(v, T(0.5)), max(v, T(0.5)), fma(v, T(2.0), T(0.5)),
        ldexp(v, T(3.0)), m + e, modf(v * T(7.0), ip) + ip * T(0.001) };
    for (int k = 0; k < 33; k++)
        y[i * 33 + k] = r[k];
}
"""


def _math_ref(v: np.ndarray) -> np.ndarray:
    c03, c17, c0001 = (float(np.float32(c)) for c in (0.3, 1.7, 0.001))    # Slang's literals are float
    m, e = np.frexp(v)
    f, ip = np.modf(v * 7.0)
    cols = [np.sin(v), np.cos(v), np.tan(v), np.arcsin(v), np.arccos(v), np.arctan(v), np.sinh(v), np.cosh(v),
            np.tanh(v), np.arcsinh(v), np.arccosh(1.0 + v), np.arctanh(v), np.exp(v), np.exp2(v), np.log(v),
            np.log2(v), np.log10(v), np.sqrt(v), np.floor(v * 7.0), np.ceil(v * 7.0), np.floor(v * 7.0 + 0.5),
            np.trunc(v * 7.0), np.abs(v), np.fmod(v * 7.0, c03), v ** c17, np.arctan2(v, c03), -v,
            np.minimum(v, 0.5), np.maximum(v, 0.5), v * 2.0 + 0.5, v * 8.0, m + e, f + ip * c0001]
    return np.stack(cols, 1)


def _run_math(dev, path: Path, dtype, xs: np.ndarray) -> np.ndarray:
    k = dev.create_compute_kernel(dev.load_program(str(path), ["computeMain"]))
    n = len(xs)
    bx = dev.create_buffer(element_count=n, struct_size=xs.itemsize, usage=RW, data=xs)
    by = dev.create_buffer(element_count=n * 33, struct_size=xs.itemsize, usage=RW)
    k.dispatch(thread_count=[n, 1, 1], vars={"x": bx, "y": by})
    return by.to_numpy().view(dtype).reshape(n, 33).copy()


@pytest.mark.skipif(not _glibc(), reason="the declarations replace <cmath> with glibc only")
@pytest.mark.parametrize("ctype,dtype,rtol", [("float", np.float32, 3e-6), ("double", np.float64, 1e-14)])
def test_prelude_math_without_cmath_is_bitwise_that_with_cmath(fresh_cache, tmp_path, monkeypatch, ctype, dtype, rtol):
    path = tmp_path / f"math_{ctype}.slang"
    path.write_text(f"#define T {ctype}\n" + MATH)
    xs = np.linspace(0.05, 0.95, 64).astype(dtype)
    dev = spy.create_device(type=spy.DeviceType.cpu)
    src = dev.load_program(str(path), ["computeMain"]).compiled.source
    got = _run_math(dev, path, dtype, xs)
    # the translation unit really reads no <cmath>: the preprocessor's line markers name no cmath header
    pre = subprocess.run([*cc.find_compiler(), "-std=c++17", "-x", "c++", "-E", "-"], input=src, text=True,
                         capture_output=True)
    assert pre.returncode == 0, pre.stderr[-2000:]
    assert "/cmath\"" not in pre.stdout and "specfun.h" not in pre.stdout
    monkeypatch.setenv("SLANGJIT_CXXFLAGS", "-DSJ_STD_CMATH")       # the same source built with <cmath>
    with_cmath = _run_math(dev, path, dtype, xs)
    np.testing.assert_array_equal(got.view(np.uint8), with_cmath.view(np.uint8))
    ref = _math_ref(xs.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * 4)


# ------------------------------------------------------------------------------------------ deferred tree writes

KERNEL = """
import slangpy;
RWStructuredBuffer<float> buf;
[Differentiable] float f(float x) { return sin(x) * exp(x) + pow(x, 2.5); }
[shader("compute")] [numthreads(4, 1, 1)]
void main(uint3 tid: SV_DispatchThreadID) {
    var d = diffPair(buf[tid.x]);
    bwd_diff(f)(d, 1.0);
    buf[tid.x] = d.d + f(buf[tid.x]);
}
"""

CHILD = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    import slangjit as spy
    from slangjit.compiler import frontend_cache as fc
    from slangjit.functional.module import SHADER_PATH
    mode, path = sys.argv[1], sys.argv[2]
    dev = spy.create_device(type=spy.DeviceType.cpu, include_paths=[SHADER_PATH])
    p = dev.load_program(path, ["main"])
    out = {"queued": fc.tree_stats["queued"], "stores_before_wait": fc.tree_stats["stores"]}
    k = dev.create_compute_kernel(p)
    xs = np.linspace(0.1, 1.0, 8).astype(np.float32)
    b = dev.create_buffer(element_count=8, struct_size=4, usage=spy.BufferUsage.shader_resource
                          | spy.BufferUsage.unordered_access, data=xs)
    k.dispatch(thread_count=[8, 1, 1], vars={"buf": b})
    out["values"] = b.to_numpy().view(np.float32).tolist()
    out["source"] = hashlib.sha256(p.compiled.source.encode()).hexdigest()
    if mode == "wait":              # the writer was started when the dispatch waited for the build
        if fc._tree_writer is not None:
            fc._tree_writer.join()
        out["pending_after_join"] = fc.pending_trees()
    out["stats"] = dict(fc.tree_stats)
    print(json.dumps(out))
""")


def _child(cache: Path, mode: str, src: Path) -> dict:
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(src)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _want(xs: np.ndarray) -> np.ndarray:
    x = xs.astype(np.float64)
    f = np.sin(x) * np.exp(x) + x ** 2.5
    df = np.cos(x) * np.exp(x) + np.sin(x) * np.exp(x) + 2.5 * x ** 1.5
    return df + f


@pytest.mark.parametrize("mode", ["wait", "exit"])
def test_deferred_tree_writes_complete_and_valid(tmp_path, mode):
    """Cold: the library trees are queued during the front end (none written before the build is waited for),
    written by the background writer (`wait`) or at exit (`exit`); the next process reads every one of them
    (no miss, nothing corrupt) and compiles the same C++ source to the same values."""
    src = tmp_path / "k.slang"
    src.write_text(KERNEL)
    cache = tmp_path / "cache"
    cold = _child(cache, mode, src)
    # the core library's files this kernel uses (not the on-demand cooperative-vector ones) + slangpy.slang
    assert cold["queued"] >= LIBRARY_TREES and cold["stores_before_wait"] == 0
    if mode == "wait":
        assert cold["pending_after_join"] == 0 and cold["stats"]["stores"] == cold["queued"]
    entries = sorted((cache / "cpu" / "ast").glob("*.pkl"))
    assert len(entries) == cold["queued"]
    assert not [p for p in (cache / "cpu" / "ast").iterdir() if not p.name.endswith(".pkl")]   # no temp files
    np.testing.assert_allclose(cold["values"], _want(np.linspace(0.1, 1.0, 8).astype(np.float32)), rtol=2e-5)
    import shutil
    shutil.rmtree(cache / "cpu" / "frontend")      # program entries gone: the next process compiles again
    warm = _child(cache, mode, src)
    assert warm["stats"]["disk_hits"] == cold["queued"] and warm["stats"]["misses"] == 0
    assert warm["stats"]["corrupt"] == 0 and warm["queued"] == 0
    assert warm["source"] == cold["source"] and warm["values"] == cold["values"]


def test_trees_are_not_changed_by_compiling(monkeypatch):
    """What the deferred writer pickles after the front end is what was parsed: compiling (check, autodiff,
    passes, emit) leaves the library trees as they were (pickled byte for byte the same)."""
    import io
    import pickle
    from slangjit.compiler import SourceSpec, compile_program, frontend
    from slangjit.compiler.source import read_source
    from slangjit.functional.module import SHADER_PATH
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")      # parse afresh (no disk trees, no program entries)
    monkeypatch.setattr(frontend, "_core_modules", None)
    monkeypatch.setattr(frontend, "_parsed", {})
    defines = frontend._defines_from_args(())
    search = [str(SHADER_PATH), os.path.join(os.path.dirname(frontend.__file__), "slang")]
    sp = os.path.join(str(SHADER_PATH), "slangpy.slang")
    trees = list(frontend.core_modules()) + [frontend._parse(read_source(sp), sp, search, defines)]

    def dump(mod) -> bytes:
        buf = io.BytesIO()
        fc._TreePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(mod)
        return buf.getvalue()
    before = [dump(m) for m in trees]
    parsed = []
    real = frontend.parse_module
    monkeypatch.setattr(frontend, "parse_module", lambda text, path, *a, **k: parsed.append(path) or real(text, path, *a, **k))
    for target in ("cpp", "cuda"):
        compile_program([SourceSpec(text=KERNEL, name="k")], ["main"], target=target, include_paths=[SHADER_PATH])
    compile_program([SourceSpec(path=str(ROOT / "examples" / "mlp_training" / "mlp.slang"))],
                    ["learnGradient", "adjustParameters"], target="cpp")
    assert all(not os.path.realpath(p).startswith(os.path.dirname(frontend.__file__)) for p in parsed), parsed
    assert [dump(m) for m in trees] == before         # the compiles above used these very trees


def test_processes_sharing_an_empty_cache(tmp_path):
    """Three processes compiling at once into one empty cache folder: each queues and writes the library trees
    (atomic replaces), all succeed with exact values; a fourth reads every tree and compiles nothing of them."""
    src = tmp_path / "k.slang"
    src.write_text(KERNEL)
    cache = tmp_path / "cache"
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, "exit", str(src)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    want = _want(np.linspace(0.1, 1.0, 8).astype(np.float32))
    for o in outs:
        np.testing.assert_allclose(o["values"], want, rtol=2e-5)
        assert o["values"] == outs[0]["values"] and o["stats"]["corrupt"] == 0
    ast = cache / "cpu" / "ast"
    assert not [p for p in ast.iterdir() if not p.name.endswith(".pkl")]
    import shutil
    shutil.rmtree(cache / "cpu" / "frontend")
    warm = _child(cache, "exit", src)
    assert warm["stats"]["misses"] == 0 and warm["stats"]["corrupt"] == 0 and warm["stats"]["disk_hits"] >= LIBRARY_TREES
    assert warm["values"] == outs[0]["values"]


def test_flush_writes_what_is_queued(fresh_cache):
    from slangjit.compiler.parse.parser import parse_module
    mod = parse_module("float f(float x) { return x; }", "m.slang", [], {})
    fc.defer_tree("q1" * 32, mod, [], [])
    assert fc.load_tree("q1" * 32) is None          # queued, not written yet
    assert fc.pending_trees() >= 1
    fc.flush_trees()
    assert fc.pending_trees() == 0
    hit = fc.load_tree("q1" * 32)
    assert hit is not None and [d.name for d in hit[0].decls] == ["f"]
    # queued under the folder in use when it was queued, even if the variable changes before the write
    fc.defer_tree("q2" * 32, mod, [], [])
    os.environ["SLANGJIT_CACHE_DIR"] = str(fresh_cache.parent / "other")
    try:
        fc.write_trees_in_background()
        fc.flush_trees()
    finally:
        os.environ["SLANGJIT_CACHE_DIR"] = str(fresh_cache)
    assert (fresh_cache / "cpu" / "ast" / (("q2" * 32)[:48] + ".pkl")).is_file()
    assert not (fresh_cache.parent / "other" / "cpu" / "ast").exists()


# ------------------------------------------------------------------------------------------ build start, facts

def test_compiler_runs_before_load_library_async_returns(fresh_cache, monkeypatch):
    events = []
    real = cc._run_process

    def spy_run(argv):
        events.append("spawn")
        return real(argv)
    monkeypatch.setattr(cc, "_run_process", spy_run)
    monkeypatch.setattr(cc, "_START_WAIT", 60.0)       # the bound only: the build thread ends the wait
    src = 'extern "C" int sj_cold_probe() { return 41 + 1; }\n'
    assert cc.load_library_async(src)
    events.append("returned")
    lib = cc.load_library(src)
    f = lib.symbol("sj_cold_probe")
    assert f() == 42
    assert events[:2] == ["spawn", "returned"]


def test_failed_build_does_not_block_load_library_async(fresh_cache, monkeypatch):
    monkeypatch.setattr(cc, "_START_WAIT", 60.0)
    monkeypatch.setenv("SLANGJIT_CXXFLAGS", "-fno-such-flag-sj")
    src = 'extern "C" int sj_cold_bad() { return 1; }\n'
    assert cc.load_library_async(src)                   # returns once the compiler ran (and failed)
    with pytest.raises(cc.InternalCompilerError):
        cc.load_library(src)


def test_compiler_facts_found_from_the_first_front_end_miss_and_errors_left_to_the_build(tmp_path, monkeypatch):
    """Device creation starts nothing; the first front-end miss for the CPU starts the facts thread (its front end
    overlaps `--version` and the ISA probe), a warm process (every front end a cache hit) starts no thread and
    reads the facts from the cache folder; a missing compiler never fails device creation: the build raises."""
    code = textwrap.dedent("""
        import sys, threading, slangjit as spy
        from slangjit.runtime import cpu_compiler as cc, cpu_prepare
        started = []
        real = cpu_prepare.prepare_async
        cpu_prepare.prepare_async = lambda *a: started.append(threading.current_thread().name) or real(*a)
        dev = spy.create_device(type=spy.DeviceType.cpu)      # never raises for a missing compiler
        print("after-device", cpu_prepare._facts_started, len(started))
        try:
            prog = dev.load_program(sys.argv[1], ["computeMain"])
            y = dev.create_buffer(element_count=64, struct_size=4, usage=spy.BufferUsage.unordered_access)
            dev.create_compute_kernel(prog).dispatch(thread_count=[64, 1, 1], vars={"y": y})
            import numpy as np
            ok = np.array_equal(y.to_numpy().view(np.float32), np.arange(64, dtype=np.float32) * 3.0)
            print("ran", ok, "thread" if cpu_prepare._facts_started else "no-thread", len(started), getattr(prog.compiled, "frontend_cache", None))
        except cc.CompilerNotFoundError as e:
            print("missing", "CXX" in str(e))
    """)
    src = tmp_path / "k.slang"
    src.write_text("RWStructuredBuffer<float> y;\n[numthreads(32, 1, 1)]\n"
                   "void computeMain(uint3 t : SV_DispatchThreadID) { y[t.x] = float(t.x) * 3.0; }\n")
    runs = (("cold", None, "thread 1 None"), ("warm", None, "no-thread 0 disk"), ("missing", "/nonexistent/c++", None))
    for case, cxx, want in runs:
        env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / ("missing" if cxx else "cache")), PYTHONPATH=str(ROOT))
        env.pop("CXX", None)
        env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
        if cxx:
            env["CXX"] = cxx
        r = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        assert lines[0] == "after-device False 0", (case, lines)
        assert lines[1] == (f"ran True {want}" if want else "missing True"), (case, lines)


# ------------------------------------------------------------------------------------------ early precompiled prelude

def _early_device():
    import dataclasses
    from slangjit.compiler.passes.options import DEFAULT_OPTIONS
    opts = dataclasses.replace(DEFAULT_OPTIONS, cpu=dataclasses.replace(DEFAULT_OPTIONS.cpu, early_pch=True))
    return spy.create_device(type=spy.DeviceType.cpu, compile_options=opts)


SCALAR = """
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID) { uint i = tid.x; y[i] = x[i] * x[i] * 3.0 - 1.0; }
"""


@pytest.mark.skipif(not cc._is_gcc(cc.find_compiler()), reason="precompiled headers are made with GCC only")
def test_early_pch_headers_are_the_programs_prefixes(fresh_cache, tmp_path, monkeypatch):
    """CpuOptions.early_pch: the first front-end miss starts the headers of the scalar and the lane-loop
    (privatised) prefixes; they are exactly the MLP's two units' prefixes, MAC-checked, and a later scalar
    program's build includes its header and computes exact values."""
    from slangjit.compiler import frontend_cache
    from slangjit.compiler.emit.program import PCH_END
    from slangjit.runtime import cpu_pch
    monkeypatch.setattr(frontend_cache, "first_miss_hooks", [cc._early_pch])
    cc._pch_ok.clear()
    dev = _early_device()
    mlp = ROOT / "examples" / "mlp_training" / "mlp.slang"
    sources = [dev.load_program(str(mlp), [e]).compiled.source for e in ("learnGradient", "adjustParameters")]
    for t in list(cc._early_threads):
        t.join(60)
    pch = fresh_cache / "cpu" / "pch"
    gchs = sorted(pch.glob("*.h.gch"))
    assert len(gchs) == 2 and not list(pch.glob(".pch-*"))
    cmd = cc.find_compiler()
    for src in sources:
        prefix = src[: src.index("\n" + PCH_END + "\n") + 1]
        flags = cc.source_flags(src, cmd, cc.compile_flags())
        import hashlib
        h = hashlib.sha256()
        for part in (cpu_pch._PCH_VERSION, prefix.encode(), "\0".join(cmd).encode(), cc.compiler_version(cmd).encode(),
                     "\0".join(flags).encode()):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        gch = pch / (h.hexdigest()[:40] + ".h.gch")
        assert gch in gchs and cpu_pch._pch_verify(gch, fresh_cache / "cpu", h.hexdigest())
    calls = []
    real = cc._run_compiler
    monkeypatch.setattr(cc, "_run_compiler", lambda argv: calls.append(list(argv)) or real(argv))
    p = tmp_path / "scalar.slang"
    p.write_text(SCALAR)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    xs = np.linspace(-2, 2, 64).astype(np.float32)
    bx = dev.create_buffer(element_count=64, struct_size=4, usage=RW, data=xs)
    by = dev.create_buffer(element_count=64, struct_size=4, usage=RW)
    k.dispatch(thread_count=[64, 1, 1], vars={"x": bx, "y": by})
    np.testing.assert_array_equal(by.to_numpy().view(np.float32), (xs * xs * np.float32(3.0) - np.float32(1.0)))
    assert len(calls) == 1 and "-include" in calls[0]


@pytest.mark.skipif(not cc._is_gcc(cc.find_compiler()), reason="precompiled headers are made with GCC only")
def test_early_pch_abandoned_at_exit_leaves_no_files(tmp_path):
    """A process that exits while its early headers are being made stops their compilers: no temporary file
    is left, and whatever header is there is complete (its MAC checks out)."""
    code = textwrap.dedent("""
        import dataclasses, sys
        import slangjit as spy
        from slangjit.compiler import SourceSpec, compile_program
        from slangjit.compiler.passes.options import DEFAULT_OPTIONS
        opts = dataclasses.replace(DEFAULT_OPTIONS, cpu=dataclasses.replace(DEFAULT_OPTIONS.cpu, early_pch=True))
        compile_program([SourceSpec(text=sys.argv[1], name="k")], ["computeMain"], target="cpp", options=opts)
    """)
    for _ in range(2):
        cache = tmp_path / f"cache{_}"
        env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
        env.pop("SLANGJIT_NO_PCH", None)
        r = subprocess.run([sys.executable, "-c", code, SCALAR], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        pch = cache / "cpu" / "pch"
        left = [p.name for p in pch.iterdir()] if pch.exists() else []
        assert not [n for n in left if n.startswith(".")], left
        from slangjit.runtime import cpu_pch
        for gch in pch.glob("*.h.gch") if pch.exists() else []:
            mac = gch.with_name(gch.name[: -len(".h.gch")] + ".mac")
            assert mac.is_file()
