"""What keeps a cold compile's front end short (issue 20), and keeps it correct.

Core modules declared on demand (compiler/frontend.py ON_DEMAND_CORE, check/scope.py CoreEnv): the cooperative
vector modules are parsed and declared only when a program looks up a name they declare.  The trigger list must
be exactly what they declare (else a program naming the missing one would not find it), a program that names
none of it never loads them, and one that reaches them only through a member (`v.fill`, `V.load`) or an enum
case still works (values: the reference compiler's).
The cyclic garbage collector paused during a compile comes back as it was."""
from __future__ import annotations

import os

import numpy as np
import pytest

from slangjit.compiler import frontend
from slangjit.compiler.check.program import check_program, make_checker
from slangjit.compiler.parse import ast
from slangjit.compiler.parse.parser import parse_module

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _declared(mod) -> set:
    out = set()
    for d in mod.decls:
        if isinstance(d, ast.ExtensionDecl):
            out |= {m.name for m in d.members if getattr(m, "name", None)}
            continue
        if isinstance(d, ast.EnumDecl) and not d.is_class:
            out |= {c.name for c in d.cases}
        assert getattr(d, "name", None), f"an on-demand core declaration without a name: {d}"
        out.add(d.name)
    return out


def test_triggers_are_what_the_on_demand_modules_declare():
    lazy = frontend.on_demand_core_modules()
    assert [os.path.basename(m.path) for m in lazy] == list(frontend.ON_DEMAND_CORE)
    declared = set().union(*(_declared(m) for m in lazy))
    assert declared == set(frontend.ON_DEMAND_TRIGGERS)
    eager = frontend.core_modules()
    assert not any(os.path.basename(m.path) in frontend.ON_DEMAND_CORE for m in eager)
    eager_names = set()
    for m in eager:
        for d in m.decls:
            if getattr(d, "name", None):
                eager_names.add(d.name)
            if isinstance(d, ast.EnumDecl) and not d.is_class:
                eager_names |= {c.name for c in d.cases}
    assert not declared & eager_names


def _check(src: str, entry: str):
    loads = []

    def load():
        loads.append(1)
        return frontend.on_demand_core_modules()
    checker = make_checker(frontend.core_modules(), target="cpp",
                           on_demand=(frontend.ON_DEMAND_TRIGGERS, load))
    program = check_program(checker, [parse_module(src, "m.slang")], [entry])
    return program, loads, checker


def test_a_program_without_cooperative_vectors_does_not_load_them():
    src = """RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain() { float4 v = float4(1, 2, 3, 4); outputBuffer[0] = dot(v, v); }
"""
    program, loads, checker = _check(src, "computeMain")
    assert loads == [] and checker.core_env.on_demand is not None
    assert [f.slang_name for f, _ in program.entries] == ["computeMain"]


def test_a_member_or_an_enum_case_loads_them_once():
    src = """RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain() { CoopVec<float, 4> v; v.fill(2.0); outputBuffer[0] = v[0]; }
"""
    _, loads, checker = _check(src, "computeMain")
    assert loads == [1] and checker.core_env.on_demand is None
    src = """RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain() { outputBuffer[0] = float(int(CoopVecMatrixLayout.ColumnMajor) + int(Float16)); }
"""
    _, loads, _ = _check(src, "computeMain")
    assert loads == [1]


def test_unknown_name_is_still_an_error():
    from slangjit.compiler.source import CompileError
    src = """RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain() { outputBuffer[0] = coopVecMatMulz(1.0); }
"""
    with pytest.raises(CompileError, match="coopVecMatMulz"):
        _check(src, "computeMain")


MEMBERS_ONLY = """RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain()
{
    CoopVec<float, 4> v;
    v.fill(1.5);
    v.store(outputBuffer, 4);
    CoopVec<float, 4> w = CoopVec<float, 4>.load(outputBuffer, 4) * 2.0;
    outputBuffer[0] = w[0] + w[3];
    outputBuffer[1] = float(int(CoopVecMatrixLayout.ColumnMajor)) + float(int(CoopVecComponentType.Float32));
}
"""


def test_members_and_cases_compile_with_nvrtc():
    """The on-demand modules serve the CUDA target alike: the generated CUDA compiles (skips without NVRTC)."""
    assert nvrtc_compiles(MEMBERS_ONLY, "members_only")


@DEV
def test_members_and_cases_run(device, tmp_path):
    # v = 1.5 everywhere, stored at byte 4 (elements 1..4); w = 3.0: 3 + 3; ColumnMajor = 1, Float32 = 3.
    # The reference compiler's output (harness.py run --backend oracle): 6 4 1.5 1.5 1.5
    out = run_program(device, tmp_path, MEMBERS_ONLY, 5)
    assert np.allclose(out, [6.0, 4.0, 1.5, 1.5, 1.5])


def test_a_compile_restores_the_cycle_collector():
    """driver.py pauses Python's cyclic garbage collector while it compiles (and restores its state after,
    also when the compile fails)."""
    import gc
    from slangjit.compiler import SourceSpec
    from slangjit.compiler.driver import compile_uncached
    from slangjit.compiler.source import CompileError
    ok = """RWStructuredBuffer<float> outputBuffer;
[numthreads(1, 1, 1)]
void computeMain() { outputBuffer[0] = 1.0; }
"""
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            prog = compile_uncached([SourceSpec(text=ok, name="ok")], ["computeMain"])
            assert "computeMain" in prog.source and gc.isenabled() == enabled
            with pytest.raises(CompileError):
                compile_uncached([SourceSpec(text=ok.replace("1.0;", "nope;"), name="bad")], ["computeMain"])
            assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
