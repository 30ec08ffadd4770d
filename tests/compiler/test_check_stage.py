"""The check stage on its own: syntax trees in, a checked ir.Program out (no autodiff, no emitter,
no C++ compiler).  What autodiff needs is recorded on the program and sealed."""
from __future__ import annotations

import pytest

from slangjit.compiler import types as T
from slangjit.compiler import autodiff
from slangjit.compiler.check.program import check_program, make_checker
from slangjit.compiler.frontend import core_modules
from slangjit.compiler.ir import nodes as ir
from slangjit.compiler.ir.derivatives import Derivatives
from slangjit.compiler.ir.difftypes import diff_field_name, diff_type, is_ptr_kind
from slangjit.compiler.ir.program import Program
from slangjit.compiler.ir.walk import walk
from slangjit.compiler.parse.parser import parse_module
from slangjit.compiler.parse.preprocessor import DEFAULT_DEFINES
from slangjit.compiler.source import CompileError


def check(src: str, entries=("computeMain",)) -> Program:
    mod = parse_module(src, "unit.slang", [], dict(DEFAULT_DEFINES))
    checker = make_checker(core_modules(), target="cpp")
    return check_program(checker, [mod], list(entries))


def fn_named(program: Program, slang_name: str) -> ir.Function:
    found = [f for f in program.functions if f.slang_name == slang_name]
    assert found, f"no function {slang_name}: {[f.slang_name for f in program.functions]}"
    return found[0]


S_SRC = """
struct S : IDifferentiable { float x; int n; float y; };
[Differentiable] S twice(S s) { S r = s; r.x = 2.0 * s.x; r.y = s.y * s.y; return r; }
RWStructuredBuffer<float> result;
[numthreads(1,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID)
{
    S s = { 1.0, 3, 2.0 };
    var p = diffPair(s);
    S.Differential d = { 1.0, 1.0 };
    bwd_diff(twice)(p, d);
    result[0] = p.d.x;
}
"""


def test_checked_program_records_struct_differential():
    prog = check(S_SRC)
    assert isinstance(prog, Program) and prog.entries and prog.entries[0][1] == (1, 1, 1)
    s_type = next(s.type for f in prog.functions for p in f.params for s in [p] if str(p.type) == "S")
    d = diff_type(s_type)                       # read from the recorded facts: no checker involved
    assert isinstance(d, T.StructType) and d is not s_type
    assert [n for n, _ in d.info.field_list()] == ["x", "y"]      # n (an int) has no derivative
    assert diff_field_name(s_type, "x") == "x" and diff_field_name(s_type, "n") is None
    assert not is_ptr_kind(s_type)


def test_derivatives_are_queued_and_sealed_before_autodiff():
    prog = check(S_SRC)
    derivs = prog.derivatives
    assert isinstance(derivs, Derivatives) and derivs.source is None       # sealed: no checker handle
    kinds = [(k, fn.slang_name) for k, fn, _, _ in derivs.pending]
    assert ("bwd", "twice") in kinds
    shell = next(g for k, fn, g, _ in derivs.pending if fn.slang_name == "twice")
    assert shell.body is None                 # the checker makes the signature; autodiff the body
    autodiff.run(prog)
    assert shell.body is not None and not derivs.pending
    # the body reads and writes the pair's fields: the primal replay and the adjoint of x and y
    fields = {n.name for n in walk(shell.body) if isinstance(n, ir.Field)}
    assert {"p", "d", "x", "y"} <= fields


def test_sealed_table_refuses_unrecorded_facts():
    prog = check(S_SRC)
    stranger = ir.Function("g_1", [], T.FLOAT)
    stranger.slang_name = "g"
    stranger.attrs["decl"] = object()          # a declared function the checker never saw
    with pytest.raises(CompileError) as e:
        prog.derivatives.find_custom(stranger, "fwd")
    assert e.value.code == "E9003"
    generated = ir.Function("fwd_h_2", [], T.FLOAT)      # no declaration, no attributes: no facts to need
    generated.slang_name = "fwd_h"
    assert prog.derivatives.find_custom(generated, "bwd") is None


def test_custom_derivative_resolved_by_the_checker():
    src = """
float sq(float x) { return x * x; }
[BackwardDerivativeOf(sq)]
void sq_bwd(inout DifferentialPair<float> x, float dOut) { x = diffPair(x.p, 2.0 * x.p * dOut); }
[Differentiable] float f(float x) { return sq(x) + x; }
RWStructuredBuffer<float> result;
[numthreads(1,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID)
{
    var p = diffPair(3.0);
    bwd_diff(f)(p, 1.0);
    result[0] = p.d;
}
"""
    prog = check(src)
    sq = fn_named(prog, "sq")
    custom = prog.derivatives.find_custom(sq, "bwd")      # recorded by check/derivatives.py prepare()
    assert custom is not None and custom.slang_name == "sq_bwd"
    assert prog.derivatives.find_custom(sq, "fwd") is None
    autodiff.run(prog)
    bwd_f = next(g for g in prog.functions if g.slang_name == "bwd_f")
    called = {n.func.slang_name for n in walk(bwd_f.body) if isinstance(n, ir.Call)}
    assert "sq_bwd" in called                  # reverse mode calls the user's derivative


def test_mismatched_custom_derivative_error_is_raised_where_used():
    src = """
float sq(float x) { return x * x; }
[BackwardDerivativeOf(sq)]
float sq_bwd(inout DifferentialPair<float> x, float dOut) { return 0.0; }
[Differentiable] float f(float x) { return sq(x); }
RWStructuredBuffer<float> result;
[numthreads(1,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID) { var p = diffPair(3.0); bwd_diff(f)(p, 1.0); result[0] = p.d; }
"""
    prog = check(src)                          # recorded, not raised: f's body was not differentiated yet
    with pytest.raises(CompileError) as e:
        autodiff.run(prog)
    assert e.value.code == "E6013" and "sq_bwd" in str(e.value)
