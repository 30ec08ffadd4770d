"""`slangjit compile` / `python -m slangjit compile`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

KERNEL = textwrap.dedent("""\
    import helpers;
    RWStructuredBuffer<float> res;
    StructuredBuffer<float3> pts;

    struct Acc { float s; [mutating] void add(float v) { s += v; } }

    [numthreads(64, 1, 1)]
    void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
    {
        if (tid.x >= count) return;
        Acc a = { 0.0 };
        a.add(length(pts[tid.x]));
        a.add(helper(float(tid.x)));
        res[tid.x] = a.s + SCALE;
    }

    [numthreads(8, 1, 1)]
    void other(uint3 tid : SV_DispatchThreadID) { res[tid.x] = 0.0; }
""")


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "slangjit", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or str(ROOT), timeout=300)


def _cxx():
    for c in (os.environ.get("CXX", "").split() or [None])[:1] + ["g++", "c++", "clang++"]:
        if c and shutil.which(c):
            return shutil.which(c)
    pytest.skip("no C++ compiler")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "helpers.slang").write_text("float helper(float x) { return x * 0.5; }\n")
    k = tmp_path / "kernel.slang"
    k.write_text(KERNEL)
    return tmp_path, k


def _syntax_check(cpp: Path):
    p = subprocess.run([_cxx(), "-std=c++17", "-fsyntax-only", "-x", "c++", str(cpp)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]


def test_compile_to_stdout_and_gxx_accepts_it(project):
    tmp, k = project
    p = _cli("compile", str(k), "--target", "cpp", "-I", str(tmp / "inc"), "-D", "SCALE=2.0")
    assert p.returncode == 0, p.stderr
    assert "computeMain" in p.stdout and "extern \"C\"" in p.stdout
    cpp = tmp / "stdout.cpp"
    cpp.write_text(p.stdout)
    _syntax_check(cpp)


def test_compile_to_file_with_entry(project):
    tmp, k = project
    out = tmp / "out" / "k.cpp"
    out.parent.mkdir()
    p = _cli("compile", str(k), "-e", "other", "--target", "cpp", "-o", str(out), "-I", str(tmp / "inc"),
             "-D", "SCALE=1")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    text = out.read_text()
    assert "other" in text
    _syntax_check(out)


def test_compile_two_entries(project):
    tmp, k = project
    out = tmp / "two.cpp"
    p = _cli("compile", str(k), "-e", "computeMain", "-e", "other", "-o", str(out), "-I", str(tmp / "inc"),
             "-D", "SCALE=1")
    assert p.returncode == 0, p.stderr
    _syntax_check(out)


def test_default_entry_and_target(tmp_path):
    k = tmp_path / "simple.slang"
    k.write_text("RWStructuredBuffer<int> r;\n[numthreads(1,1,1)]\nvoid computeMain() { r[0] = 1; }\n")
    p = _cli("compile", str(k))
    assert p.returncode == 0, p.stderr
    (tmp_path / "simple.cpp").write_text(p.stdout)
    _syntax_check(tmp_path / "simple.cpp")


def test_syntax_error_exit_code_and_diagnostic(tmp_path):
    bad = tmp_path / "bad.slang"
    bad.write_text("RWStructuredBuffer<float> r;\n[numthreads(1,1,1)]\nvoid computeMain( {\n}\n")
    out = tmp_path / "bad.cpp"
    p = _cli("compile", str(bad), "-o", str(out))
    assert p.returncode != 0
    assert "bad.slang:3:" in p.stderr and "E0" in p.stderr and "^" in p.stderr
    assert "Traceback" not in p.stderr
    assert not out.exists()


def test_type_error_exit_code_and_diagnostic(tmp_path):
    bad = tmp_path / "bad2.slang"
    bad.write_text("RWStructuredBuffer<float> r;\n[numthreads(1,1,1)]\nvoid computeMain()\n{\n  r[0] = nope;\n}\n")
    p = _cli("compile", str(bad))
    assert p.returncode != 0
    assert "bad2.slang:5:" in p.stderr and "nope" in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == ""


def test_missing_entry_point(project):
    tmp, k = project
    p = _cli("compile", str(k), "-e", "noSuchEntry", "-I", str(tmp / "inc"), "-D", "SCALE=1")
    assert p.returncode != 0
    assert "noSuchEntry" in p.stderr and "Traceback" not in p.stderr


def test_missing_file(tmp_path):
    p = _cli("compile", str(tmp_path / "missing.slang"))
    assert p.returncode != 0
    assert "missing.slang" in p.stderr and "Traceback" not in p.stderr


def test_bad_usage():
    p = _cli("compile")
    assert p.returncode == 2
    assert "usage" in p.stderr.lower()
