"""Deterministic code generation (issue 15 item 7): the same source and options give byte-identical
C++/CUDA, compiled twice in one process with the front-end cache off, and in two processes (whose
string hashes differ).  Names come from counters owned by the compile (ir/program.py `numbering`)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.ir import nodes as ir
from slangjit.compiler.ir.program import numbering, unique_name
from slangjit.compiler import types as T

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """\
RWStructuredBuffer<float> outputBuffer;
struct P : IDifferentiable { float a; float b; };
[Differentiable] float inner(float x, float y) { float t = x * y; return sin(t) + 0.5 * y; }
[Differentiable] float outer(P p) { float s = 0; for (int i = 0; i < 3; i++) s += inner(p.a, p.b + i); return s; }
[numthreads(1, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    var dp = diffPair(1.5, 1.0);
    var f = fwd_diff(inner)(dp, diffPair(2.0, 0.0));
    var q = diffPair(P(1.0, 2.0));
    bwd_diff(outer)(q, 1.0);
    outputBuffer[0] = f.d + q.d.a + q.d.b;
}
"""

_SCRIPT = """
import hashlib, sys
from slangjit.compiler import SourceSpec, compile_program
text = open(sys.argv[1]).read()
for target in ("cpp", "cuda"):
    src = compile_program([SourceSpec(text=text, name="det")], ["computeMain"], target=target).source
    print(target, hashlib.sha256(src.encode()).hexdigest())
"""


def _digests(text: str) -> list:
    out = []
    for target in ("cpp", "cuda"):
        src = compile_program([SourceSpec(text=text, name="det")], ["computeMain"], target=target).source
        out.append(f"{target} {hashlib.sha256(src.encode()).hexdigest()}")
    return out


@pytest.fixture
def no_frontend_cache(monkeypatch):
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")


def test_same_source_twice_in_one_process(no_frontend_cache):
    first = _digests(PROGRAM)
    compile_program([SourceSpec(text=PROGRAM.replace("0.5", "0.25"), name="other")], ["computeMain"])  # in between
    assert _digests(PROGRAM) == first


def test_same_source_in_two_processes(no_frontend_cache, tmp_path):
    f = tmp_path / "det.slang"
    f.write_text(PROGRAM)
    script = tmp_path / "det.py"
    script.write_text(_SCRIPT)
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT), SLANGJIT_NO_FRONTEND_CACHE="1")
        p = subprocess.run([sys.executable, str(script), str(f)], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout.split("\n")[:2])
    assert outs[0] == outs[1]
    assert outs[0] == _digests(PROGRAM)        # and the same as this process, after other compiles


def test_numbering_is_per_compile_and_unique_within_it():
    with numbering():
        a = [unique_name("f"), unique_name("f"), ir.Var("x", T.FLOAT).uid, ir.Var("y", T.FLOAT).uid]
    with numbering():
        b = [unique_name("f"), unique_name("f"), ir.Var("x", T.FLOAT).uid, ir.Var("y", T.FLOAT).uid]
    assert a == b == ["f_1", "f_2", 1, 2]
