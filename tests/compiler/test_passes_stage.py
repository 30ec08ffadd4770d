"""The passes stage on its own: each pass takes a checked (and differentiated) ir.Program and rewrites or
answers questions about it, with no emitter and no C++ compiler involved.  The programs come from the check
stage (check_program) so the IR is what the real pipeline sees."""
from __future__ import annotations

from slangjit.compiler import autodiff
from slangjit.compiler.check.program import check_program, make_checker
from slangjit.compiler.frontend import core_modules
from slangjit.compiler.ir import nodes as ir
from slangjit.compiler.ir.fold import fold_value
from slangjit.compiler.ir.program import Program
from slangjit.compiler.ir.walk import walk
from slangjit.compiler.parse.parser import parse_module
from slangjit.compiler.parse.preprocessor import DEFAULT_DEFINES
from slangjit.compiler.passes.atomic_adds import lower_atomic_adds
from slangjit.compiler.passes.effects import Effects
from slangjit.compiler.passes.fusion import inline_copy, reuse_and_prune
from slangjit.compiler.passes.options import PipelineOptions
from slangjit.compiler.passes.pipeline import run_pipeline
from slangjit.compiler.passes.reach import intrinsic_calls, reachable, system_value_params
from slangjit.compiler.passes.simplify import optimize
from slangjit.compiler.passes.uniformity import Uniformity


def program(src: str, entries=("computeMain",)) -> Program:
    mod = parse_module(src, "passes.slang", [], dict(DEFAULT_DEFINES))
    return autodiff.run(check_program(make_checker(core_modules(), target="cpp"), [mod], list(entries)))


def fn_named(prog: Program, slang_name: str) -> ir.Function:
    return next(f for f in prog.functions if f.slang_name == slang_name)


def nodes(fn: ir.Function, cls) -> list:
    return [n for n in walk(fn.body) if isinstance(n, cls)]


def test_simplify_folds_constants_and_drops_dead_code():
    prog = program("""
RWStructuredBuffer<int> result;
static const int K = 6;
int f(int x)
{
    int unused = 123;
    int y = K * 2;
    if (y > 10) { return x + (K << 2); }
    return -x;
    return 5;
}
[numthreads(1,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID) { result[0] = f(int(t.x)); }
""")
    f = fn_named(prog, "f")
    consts = lambda: {n.value for n in nodes(f, ir.Const)}
    assert nodes(f, ir.GlobalRef) and 5 in consts() and any(d.var.name == "unused" for d in nodes(f, ir.VarDecl))
    optimize(f, fold_value)
    assert not nodes(f, ir.GlobalRef)              # K * 2 and K << 2 folded ...
    assert {12, 24} <= consts()                    # ... to their values
    assert 5 not in consts()                       # the statement after a return is gone
    assert not any(d.var.name == "unused" for d in nodes(f, ir.VarDecl))   # a never-read local too
    assert len(nodes(f, ir.Return)) == 2 and nodes(f, ir.If)               # the rest stays


ATOMICS = """
RWStructuredBuffer<Atomic<float>> acc;
RWStructuredBuffer<float> result;
[numthreads(32,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID) { acc[0].add(float(t.x)); %s }
"""


def test_lower_atomic_adds_only_for_pure_accumulators():
    prog = program(ATOMICS % "")
    assert lower_atomic_adds(prog.functions) == 1
    main = fn_named(prog, "computeMain")
    adds = [n for n in walk(main.body) if isinstance(n, ir.Intrinsic) and n.name == "sj::InterlockedAdd"]
    assert len(adds) == 1 and isinstance(adds[0].args[0], ir.Field) and adds[0].args[0].name == "value"
    # A program that also reads the atomic keeps every add as it is (a deferred add would not be seen).
    prog = program(ATOMICS % "result[0] = acc[0].load();")
    assert lower_atomic_adds(prog.functions) == 0
    assert not any(isinstance(n, ir.Intrinsic) and n.name == "sj::InterlockedAdd"
                   for n in walk(fn_named(prog, "computeMain").body))


FUSE = """
RWStructuredBuffer<float> data;
float sq(float x) { return x * x; }
float twice(float x) { return sq(x) + sq(x); }
[numthreads(1,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID) { float unused = sq(3.0); data[t.x] = twice(data[t.x]); }
"""


def test_inline_then_reuse_and_prune():
    prog = program(FUSE)
    main = fn_named(prog, "computeMain")
    assert {c.func.slang_name for c in nodes(main, ir.Call)} == {"sq", "twice"}
    old_body = main.body
    inline_copy(main)
    assert main.body is not old_body and not nodes(main, ir.Call)     # every call inlined, on a copy
    muls = lambda: sum(1 for n in walk(main.body) if isinstance(n, ir.Binary) and n.op == "*")
    before = muls()
    assert before == 3                            # sq(3.0) for `unused`, and sq(x) twice
    reuse_and_prune(main)
    assert muls() == 1                            # the second sq(x) reuses the first; `unused` is dead
    assert any(isinstance(n, ir.Index) for n in walk(main.body))       # the buffer store stays


def test_effects_readonly():
    prog = program(FUSE)
    eff = Effects()
    assert eff.readonly(fn_named(prog, "sq")) and eff.readonly(fn_named(prog, "twice"))
    assert not eff.readonly(fn_named(prog, "computeMain"))            # it stores into a buffer


def test_reach_and_uniformity():
    prog = program("""
RWStructuredBuffer<float> data;
uniform float scale;
float g(float x) { return sin(x) * scale; }
[numthreads(64,1,1)]
void computeMain(uint3 t : SV_DispatchThreadID) { float u = scale * 2.0; data[t.x] = g(data[t.x]) + u; }
""")
    main = fn_named(prog, "computeMain")
    assert {f.slang_name for f in reachable(main)} == {"computeMain", "g"}
    assert any("sin" in n.name for n in intrinsic_calls(reachable(main)))
    svp = system_value_params(main)
    assert svp == {0}
    u = Uniformity(main, svp)
    decl_u = next(d for d in nodes(main, ir.VarDecl) if d.var.name == "u")
    assert u.is_uniform(decl_u.init)             # a uniform parameter times a constant
    store = next(n for n in walk(main.body) if isinstance(n, ir.Assign))
    assert not u.is_uniform(store.rhs)           # depends on the thread id through data[t.x]
    assert not u.address_is_uniform(store.lhs)   # data[t.x]: another element per thread


def test_pipeline_runs_named_passes_by_target_and_options():
    cpp = run_pipeline(program(FUSE), "cpp")
    assert cpp.ran == ["simplify", "fuse_entries", "plan_cpu_adds", "fuse_privatised", "inline_for_lanes",
                       "jam_lane_loops"]
    assert cpp.plan is None
    plain = run_pipeline(program(FUSE), "cpp", PipelineOptions().with_cpu(fuse_all=False, privatize_adds=False,
                                                                          lane_loops=False))
    assert plain.ran == ["simplify"]
    fused = run_pipeline(program(FUSE), "cpp", PipelineOptions(fuse_entries=True).with_cpu(privatize_adds=False,
                                                                                           lane_loops=False))
    assert fused.ran == ["simplify", "fuse_entries"]
    assert not nodes(fn_named(fused.program, "computeMain"), ir.Call)
    cuda = run_pipeline(program(ATOMICS % ""), "cuda")
    assert cuda.ran == ["simplify", "lower_atomic_adds", "plan_red_adds", "fuse_coarse", "cover_slots"]
    assert cuda.plan is not None
    off = run_pipeline(program(ATOMICS % ""), "cuda", PipelineOptions().with_cuda(lower_atomic_adds=False,
                                                                                 fuse_coarse=False))
    assert off.ran == ["simplify", "plan_red_adds", "cover_slots"]
