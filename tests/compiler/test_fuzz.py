"""Fuzzing the compiler (issue 15, acceptance point 1): seeded token-level mutations of the conformance
programs, a few thousand per run under a time budget.

For every mutant: `compile_program` either succeeds or raises `CompileError` whose every diagnostic has a
code, is not an internal error (E9xxx, nor a Python exception quoted in a user diagnostic) and has a real
location (a file, line >= 1); no mutant may hang (each compiles in a worker process with a time limit) or
kill its worker; a sample of the accepted mutants is compiled by the system C++ compiler (the runtime's
cpu_compiler) and, where NVRTC is installed, emitted as CUDA and compiled by NVRTC -- an error there is a
failure.  The engine is scripts/fuzz.py (its long mode runs the same for hours; see benchmarks/RESULTS.md).

Environment, read when the test runs: SLANGJIT_FUZZ_SECONDS (budget, default 60), SLANGJIT_FUZZ_SEED
(default 15, fixed so that CI is repeatable: a run checks mutants 0, 1, 2, ... of the seed until the budget
is spent; `daily` takes the date, to explore new mutants), SLANGJIT_FUZZ_JOBS (worker processes, default 2),
SLANGJIT_FUZZ_TIMEOUT (per-mutant limit, default 30 s), SLANGJIT_FUZZ_COUNT (at most this many mutant indices,
default 20000: a fast machine does not wander past the mutants whose failures are listed below; 0: no cap).  A failure is reproduced with
`python scripts/fuzz.py --seed S --replay N` (printed with it).

KNOWN_FAILURES lists the distinct failures the fuzz found (issue item, failure kind, regular expression on the
failure's detail).  Every row is now "fixed:<item>": `test_known_failures_are_still_real` runs its minimal
reproducer as a regression test (it must be accepted and built, or rejected with a located diagnostic).  A row
without the "fixed:" prefix would mark an open failure: reported, not failed.  Any failure not listed fails the
fuzz test.
"""
from __future__ import annotations

import datetime
import importlib.util
import os
import signal
import sys
import time

import pytest

from slangjit.compiler.source import CompileError, Diagnostic, Loc, SourceFile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

_spec = importlib.util.spec_from_file_location("slangjit_fuzz_script", os.path.join(ROOT, "scripts", "fuzz.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

pytestmark = pytest.mark.usefixtures("private_cache")

# (issue 15 item, failure kind, pattern searched in the failure's detail or signature).  scripts/fuzz.py reads
# this list too (keep it a literal).
KNOWN_FAILURES = [
    ("fixed:6", "internal E9000", r"bad system value type"),
    ("fixed:6", "internal E9000", r"'C(pp|pu)Emitter' object has no attribute 's_NoneType'"),
    ("fixed:6", "c++ error", r"convert: cannot widen a vector"),
    ("fixed:3", "nvrtc error", r"__builtin_huge_val"),
    ("fixed:6", "unlocated", r"E5001 at <unknown>.*entry point .* not found"),
    ("fixed:6", "c++ error", r"invalid cast from type .sj::vec<\w+, \d+>. to type"),
    ("fixed:6", "nvrtc error", r"no suitable conversion function from \"sj::vec<\w+, \d+>\" to"),
    ("fixed:6", "internal E9000", r"'NoneType' object has no attribute 'attrs'"),
    ("fixed:6", "c++ error", r"static assertion failed: vector size must be 1\.\.4"),
    ("fixed:6", "nvrtc error", r"static assertion failed with \"vector size must be 1\.\.4\""),
    ("fixed:6", "c++ error", r"narrowing conversion of .\d+. from .long int. to .int."),
    ("fixed:6", "nvrtc error", r"invalid narrowing conversion from \"long\" to \"int\""),
    ("fixed:6", "internal E9000", r"cannot add differentials of type"),
    ("fixed:6", "c++ error", r"invalid use of type .void. in parameter declaration"),
    ("fixed:6", "internal E9001", r"cannot emit OutConvert"),
    ("fixed:6", "nvrtc error", r"no suitable user-defined conversion from \"sj::vec<uint32_t, 3>\".* to \"sj::vec<uint32_t, 4>\""),
    ("fixed:6", "c++ error", r"conversion from .float. to non-scalar type .sj::vec<"),
    ("fixed:6", "c++ error", r"static assertion failed: matrix size must be 1\.\.4"),
    ("fixed:6", "nvrtc error", r"static assertion failed with \"convert: cannot widen a vector\""),
    ("fixed:6", "nvrtc error", r"no suitable constructor exists to convert from \"float\" to \"sj::vec<__nv_bool, 3>\""),
    # A [Differentiable] function that reaches fwd_diff/bwd_diff of itself: the compiler did not return
    # (item 4); now E6018.  Only for mutants with a [Differentiable] function whose body calls fwd_diff / bwd_diff.
    ("fixed:4", "hang", r"no result in", r"\[Differentiable\][^{]*\{[^}]*\b(fwd_diff|bwd_diff)\s*\("),
    ("fixed:4", "MemoryError", r"", r"\[Differentiable\][^{]*\{[^}]*\b(fwd_diff|bwd_diff)\s*\("),
    ("fixed:6", "c++ error", r"static assertion failed: bit_cast: size mismatch"),
    ("fixed:6", "internal E9001", r"cannot emit type _"),
    # a struct whose base does not resolve (`struct Quad : b`), first met while a parameter type was probed:
    # the half-built struct stayed cached and reached autodiff (seed 15 mutant 18493); now E2052 at the base
    ("fixed:6", "internal E9003", r"no autodiff facts were recorded for struct"),
]

# One minimal reproducer per row (found by the fuzz, reduced by hand): (row index, source, entry point).
# Kernel texts here are built from pieces: test_cuda_codegen.py compiles every string literal of the test tree that
# holds a whole `[numthreads` kernel with NVRTC, and these reproducers fail there on purpose.
_NT = "[" + "numthreads(1, 1, 1)]\n"
_HEAD = "RWStructuredBuffer<float> outputBuffer;\n" + _NT
_INOUT = ("RWStructuredBuffer<float> outputBuffer;\nvoid g(inout int v) { v = v * 10 + 1; }\n" + _NT +
          "void computeMain(uint3 tid : SV_DispatchThreadID) { float3 a = 0; g(a); outputBuffer[0] = a.x; }\n")
_BIGARR = _HEAD + \
    "void computeMain(uint3 tid : SV_DispatchThreadID) { float w[0xffffffff] = { 1.0, 2.0 }; outputBuffer[0] = w[1]; }\n"
REPRODUCERS = [
    # a non-vector type on SV_DispatchThreadID: E9000 "bad system value type float*" (float3x3 too, issue item 6)
    (0, _HEAD + "void computeMain(float* tid : SV_DispatchThreadID) { outputBuffer[0] = 1.0; }\n", "computeMain"),
    # a [BackwardDerivative] member whose body has a type error (Optional<int> * Optional<int>) is not
    # checked when the method also has a [ForwardDerivative]: E9000 from the C++ emitter
    (1, ("tests/autodiff/custom/custom-derivative-member-fn.slang", "        float t = tanh(x.p / limit);\n        updateDiff",
         "        Optional<int> t = tanh(x.p / limit);\n        updateDiff"), "computeMain"),
    # float4 on SV_DispatchThreadID is accepted; the generated C++ fails a static_assert (issue item 6)
    (2, _HEAD + "void computeMain(float4 tid : SV_DispatchThreadID) { outputBuffer[0] = tid.w; }\n",
     "computeMain"),
    # a float literal past FLT_MAX is accepted (becomes inf); the CUDA emitter spells it HUGE_VAL, which
    # NVRTC rejects (__builtin_huge_val undefined).  The front end should reject the literal (item 3).
    (3, _HEAD + "void computeMain(uint3 tid : SV_DispatchThreadID) { outputBuffer[0] = 3.5e38; }\n",
     "computeMain"),
    # the requested entry point is missing: E5001 has no location (<unknown>:0:0)
    (4, _HEAD + "void other(uint3 tid : SV_DispatchThreadID) { outputBuffer[0] = 1.0; }\n", "computeMain"),
    # a float3 passed to an `inout int` parameter is accepted; the C++ (and the CUDA) fails to build
    # (issue item 6 names `int` into `inout uint3`)
    (5, _INOUT, "computeMain"),
    (6, _INOUT, "computeMain"),
    # fwd_diff of nothing, inside fwd_diff: E9000 (AttributeError) instead of a diagnostic
    (7, "RWStructuredBuffer<float> outputBuffer;\n[Differentiable] float h(float x) { return x * x; }\n"
        + _NT + "void computeMain(uint3 tid : SV_DispatchThreadID) {\n"
        "    let yy = fwd_diff(fwd_diff( ))(diffPair(diffPair(1.0, 0.0), diffPair(0.0, 0.0)));\n"
        "    outputBuffer[0] = 1.0;\n}\n", "computeMain"),
    # vector<float,5> is accepted; the C++ / CUDA prelude's static_assert rejects it (issue item 6)
    (8, _HEAD + "void computeMain(uint3 tid : SV_DispatchThreadID) { vector<float,5> v = 1.0; outputBuffer[0] = v[0]; }\n",
     "computeMain"),
    (9, _HEAD + "void computeMain(uint3 tid : SV_DispatchThreadID) { vector<float,5> v = 1.0; outputBuffer[0] = v[0]; }\n",
     "computeMain"),
    # a local array of 0xffffffff elements is accepted; its size is emitted as a narrowing int (items 2, 6)
    (10, _BIGARR, "computeMain"),
    (11, _BIGARR, "computeMain"),
    # a custom Differential struct with a uint8_t field: E9000 "cannot add differentials of type uint8_t"
    (12, ("tests/autodiff/types/custom-differential-typealias.slang", "    float dr;", "    uint8_t dr;"),
     "computeMain"),
    # void on SV_DispatchThreadID is accepted; the C++ has a `void` parameter (item 6)
    (13, _HEAD + "void computeMain(void tid : SV_DispatchThreadID) { outputBuffer[0] = 1.0; }\n", "computeMain"),
    # int out-arguments of an intrinsic in a differentiated function (`int s, c; sincos(x, s, c)`, fuzz seed 15
    # mutant 17790): E9001 "cannot emit OutConvert" (a derivative rule storing the outputs through the conversion)
    (14, ("tests/autodiff/intrinsics/sincos-degrees-radians.slang", "    float s, c;", "    int s, c;"), "computeMain"),
    (14, ("tests/autodiff/control/call-in-loop.slang", "    float x = x0;", "    int3 x = x0;"), "computeMain"),
    # uint4 on SV_DispatchThreadID: accepted, NVRTC rejects the CUDA (item 6, as float4)
    (15, _HEAD + "void computeMain(uint4 tid : SV_DispatchThreadID) { outputBuffer[0] = float(tid.w); }\n",
     "computeMain"),
    # an interface requirement `uint3 act(float)` met by `float act(float)`: accepted, the C++ fails
    (16, ("tests/autodiff/generics/dynamic-dispatch.slang", "    float act(float x);", "    uint3 act(float x);"),
     "computeMain"),
    # matrix<float,2,-1> (item 6)
    (17, _HEAD + "void computeMain(uint3 tid : SV_DispatchThreadID) { matrix<float,2,-1> m = 0; "
     "outputBuffer[0] = m[0][0]; }\n", "computeMain"),
    # float4 on SV_DispatchThreadID, the CUDA side of row 2
    (18, _HEAD + "void computeMain(float4 tid : SV_DispatchThreadID) { outputBuffer[0] = tid.w; }\n",
     "computeMain"),    # a [BackwardDerivative] whose dOut is bool3 instead of float: accepted, NVRTC rejects the CUDA (item 6)
    (19, ("tests/autodiff/custom/custom-bwd-nodiff-int-param.slang", "\nvoid pickBwd(inout DifferentialPair<float> x, int k, float dOut)",
          "\nvoid pickBwd(inout DifferentialPair<float> x, int k, bool3 dOut)"),
     "computeMain"),
    # a [Differentiable] function taking fwd_diff of itself (item 4): the compiler did not return (fuzz seed 15
    # mutant 7649, `python scripts/fuzz.py --seed 15 --replay 7649`); now a located E6018
    (20, "RWStructuredBuffer<float> outputBuffer;\n[Differentiable]\nfloat f(float x) { return x * fwd_diff(f)(diffPair(x, 1.0)).d; }\n"
         + _NT + "void computeMain(uint3 tid : SV_DispatchThreadID) { outputBuffer[0] = fwd_diff(f)(diffPair(2.0, 1.0)).d; }\n",
     "computeMain"),
    (21, "RWStructuredBuffer<float> outputBuffer;\n[Differentiable]\nfloat f(float x) { var p = diffPair(x, 0.0); bwd_diff(f)(p, 1.0); return x * p.d; }\n"
         + _NT + "void computeMain(uint3 tid : SV_DispatchThreadID) { outputBuffer[0] = f(2.0); }\n",
     "computeMain"),
    # reinterpret<int> of a float4 (fuzz seed 9 mutant 1300): the C++ bit_cast asserted equal sizes; now as Slang,
    # the leading bytes, the rest zero
    (22, ("tests/core/generic-type-tests.slang", "(b as int).value);", "(b as float4).value);"), "computeMain"),
    # a generic function declared to return an interface type, falling off its end (seed 9 mutant 9849): E9001
    # "cannot emit type IAccumulator" (the dynamic value's layout was never made)
    (23, ("tests/core/interface-generic-requirements.slang", "void feed<A : IAccumulator>", "IAccumulator feed<A : IAccumulator>"),
     "computeMain"),
    # a struct base that names nothing, the struct first used as a parameter type (seed 15 mutant 18493)
    (24, "RWStructuredBuffer<float> outputBuffer;\nstruct Quad : b { float lo; };\n"
         "[Differentiable] float eval(Quad q, float x) { return q.lo * x; }\n"
         "[Differentiable] float f(float a, float x) { Quad q; q.lo = a; return eval(q, x); }\n" + _NT +
         "void computeMain(uint3 tid : SV_DispatchThreadID) { var a = diffPair(2.0, 0.0); var x = diffPair(3.0, 0.0); "
         "bwd_diff(f)(a, x, 1.0); outputBuffer[0] = a.d; }\n",
     "computeMain"),
]


def _conformance_mutant(rel, old, new):
    """(path, text) of conformance program `rel` with `old` replaced by `new`; (None, None) without the corpus."""
    p = os.path.join(fuzz.conformance_root() or "", rel)
    if not os.path.exists(p):
        return None, None
    text = open(p, encoding="utf-8").read()
    assert old in text, (rel, old)
    return p, text.replace(old, new, 1)


def _env_int(name, default):
    v = os.environ.get(name, "").strip()
    return int(v) if v else default


def _env_float(name, default):
    v = os.environ.get(name, "").strip()
    return float(v) if v else default


# ------------------------------------------------------------------------------------------ the engine itself


def test_mutants_are_a_function_of_seed_and_index():
    progs = fuzz.corpus()
    if not progs:
        pytest.skip("conformance programs not found (set SLANGJIT_CONFORMANCE)")
    a = [fuzz.make_mutant(progs, 5, i) for i in range(50)]
    b = [fuzz.make_mutant(progs, 5, i) for i in range(50)]
    assert a == b
    assert sum(1 for (p, t, _) in a if t != dict(progs)[p]) >= 45        # nearly all actually mutate
    assert len({t for _, t, _ in a}) >= 45
    c = [fuzz.make_mutant(progs, 6, i)[1] for i in range(50)]
    assert c != [t for _, t, _ in a]


def test_tokenizer_round_trips_every_program():
    for path, text in fuzz.corpus():
        assert "".join(v for _, v in fuzz.tokenize(text)) == text, path


GOOD = """
RWStructuredBuffer<float> outputBuffer;
""" + _NT + """void computeMain(uint3 tid : SV_DispatchThreadID) { outputBuffer[tid.x] = 2.0 * float(tid.x); }
"""


def test_check_one_classifies_accepted_and_rejected(tmp_path):
    p = str(tmp_path / "prog.slang")
    assert fuzz.check_one(p, GOOD, True, False) == {"status": "accepted", "cxx": True}
    r = fuzz.check_one(p, GOOD.replace("2.0 *", "2.0 * ;"), False, False)
    assert r == {"status": "rejected", "code": "E0010"}, r      # E0010: a parse error


@pytest.mark.parametrize("raise_, kind", [
    (CompileError(Diagnostic("E9000", "internal compiler error (KeyError: 'x')", Loc(SourceFile("m", "x"), 1, 1))),
     "internal E9000"),
    (CompileError(Diagnostic("E5001", "entry point 'main' not found", Loc(None, 0, 0))), "unlocated"),
    (CompileError(Diagnostic("E0010", "could not parse this (IndexError: list index out of range)",
                             Loc(SourceFile("m", "x"), 1, 1))), "masked internal E0010"),
    (CompileError(Diagnostic("E2001", "past the end", Loc(SourceFile("m", "x"), 7, 1))), "located past the end"),
    (CompileError(Diagnostic("", "no code", Loc(SourceFile("m", "x"), 1, 1))), "no-code"),
    (KeyError("boom"), "KeyError"),
    (RecursionError("deep"), "RecursionError"),
])
def test_check_one_flags_internal_and_unlocated_errors(monkeypatch, tmp_path, raise_, kind):
    import slangjit.compiler as comp

    def broken(*a, **k):
        raise raise_
    monkeypatch.setattr(comp, "compile_program", broken)
    r = fuzz.check_one(str(tmp_path / "m.slang"), GOOD, False, False)
    assert r["status"] == "fail" and r["kind"] == kind, r


def test_cxx_check_reports_a_cpp_error_on_an_accepted_program(monkeypatch, tmp_path):
    import slangjit.compiler as comp
    real = comp.compile_program

    def bad_cpp(*a, **k):
        prog = real(*a, **k)
        prog.source += "\nint this_is_not_cpp = undeclared_name;\n"
        return prog
    monkeypatch.setattr(comp, "compile_program", bad_cpp)
    r = fuzz.check_one(str(tmp_path / "m.slang"), GOOD, True, False)
    assert r["status"] == "fail" and r["kind"] == "c++ error" and "undeclared_name" in r["detail"]


def _hang_or_crash(path, text, cxx, nvrtc):
    if text == "HANG":
        time.sleep(60)
    if text == "CRASH":
        os.kill(os.getpid(), signal.SIGKILL)      # as a segfault or the OOM killer would end it
    return {"status": "rejected", "code": "E0001"}


def test_pool_survives_hangs_and_crashes(monkeypatch):
    """A mutant past its time limit is a 'hang', a worker that dies is 'worker died'; the pool goes on."""
    monkeypatch.setattr(fuzz, "check_one", _hang_or_crash)     # the workers are forked after this
    pool = fuzz.Pool(jobs=2, timeout=1.5)
    got = {}
    t0 = time.time()
    try:
        pool.run(((k, ("p", k, False, False)) for k in ("a", "HANG", "b", "CRASH", "c")),
                 lambda key, r: got.__setitem__(key, r))
    finally:
        pool.close()
    assert time.time() - t0 < 20
    assert got["HANG"]["kind"] == "hang" and got["CRASH"]["kind"] == "worker died"
    assert all(got[k]["status"] == "rejected" for k in "abc")


def _check_entry(path, text, entry, cxx, nvrtc, monkeypatch):
    monkeypatch.setattr(fuzz, "entry_of", lambda _t: entry)
    return fuzz.check_one(path, text, cxx, nvrtc)


@pytest.mark.parametrize("row,text,entry", REPRODUCERS, ids=[f"known{r[0]}" for r in REPRODUCERS])
def test_known_failures_are_still_real(row, text, entry, tmp_path, monkeypatch):
    """Each known failure's reproducer either still fails exactly as listed (reported), or is now handled
    cleanly (accepted and built, or rejected with a located diagnostic): then its KNOWN_FAILURES row is stale
    and should be deleted -- reported, so that fixing the item does not break this test."""
    item, kind, pattern = KNOWN_FAILURES[row][:3]
    fixed = item.startswith("fixed:")
    if isinstance(text, tuple):
        path, text = _conformance_mutant(*text)
        if path is None:
            pytest.skip("conformance programs not found")
    else:
        path = str(tmp_path / "repro.slang")
    nvrtc = kind.startswith("nvrtc")
    if nvrtc and not fuzz._nvrtc_ok():
        pytest.skip("NVRTC not installed")
    r = _check_entry(path, text, entry, not nvrtc, nvrtc, monkeypatch)
    if fixed:                 # a fixed row is a regression test: its reproducer must now be handled cleanly
        assert r["status"] != "fail", r
        return
    if r["status"] == "fail":
        import re
        assert r["kind"] == kind and (re.search(pattern, r["detail"]) or re.search(pattern, r["sig"])), r
        print(f"known failure (issue 15 item {item}) still present: {r['detail'][:200]}", file=sys.stderr)
    else:
        print(f"KNOWN_FAILURES row {row} ({pattern}) is fixed: delete it", file=sys.stderr)


# ------------------------------------------------------------------------------------------ the fuzz run


def _seed():
    v = os.environ.get("SLANGJIT_FUZZ_SEED", "").strip()
    if v == "daily":
        return int(datetime.date.today().strftime("%Y%m%d"))
    return int(v) if v else 15


def test_fuzz_conformance_mutants():
    if not fuzz.corpus():
        pytest.skip("conformance programs not found (set SLANGJIT_CONFORMANCE)")
    seconds = _env_float("SLANGJIT_FUZZ_SECONDS", 60.0)
    seed = _seed()
    jobs = _env_int("SLANGJIT_FUZZ_JOBS", 2)
    timeout = _env_float("SLANGJIT_FUZZ_TIMEOUT", 30.0)
    c = fuzz.Campaign(seed=seed, jobs=jobs, timeout=timeout, cxx_every=40, nvrtc_every=40, known=KNOWN_FAILURES)
    count = _env_int("SLANGJIT_FUZZ_COUNT", 20000) or None
    c.run(seconds=seconds, count=count)
    report = c.report()
    print(f"\nfuzz (seed {seed}, {seconds:.0f} s, {jobs} jobs): {report}", file=sys.stderr)
    new = {s: f for s, f in c.failures.items() if not c.known_item(s, f)}
    # Not vacuous: the budget bought mutants, and some were accepted and built by the C++ compiler.
    assert c.counts["mutants"] >= min(1000, int(20 * seconds), int(0.9 * (count or 10 ** 9))), report
    assert c.counts["accepted"] > 0 and c.counts["rejected"] > 0, report
    if seconds >= 30:
        assert c.counts["cxx_checked"] >= 3, report
    lines = []
    for s, f in new.items():
        lines.append(f"=== {s} (x{f['count']}; replay: python scripts/fuzz.py --seed {seed} --replay {f['index']})\n"
                     f"{f['detail']}\n--- mutant of {os.path.basename(f['path'])} {f['ops']}:\n{f['text'][:3000]}")
    assert not new, f"{len(new)} new distinct fuzz failure(s):\n" + "\n".join(lines)
