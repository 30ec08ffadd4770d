"""Is the generated C++ the same bytes on two trees?  (A check for changes that should only make the compiler
faster: session 13's lane-path compile-time work.)

    # on each tree (PYTHONPATH picks the slangjit that is imported; an empty cache each time):
    PYTHONPATH=/path/to/tree python benchmarks/lane_cpp_identity.py dump OUT_DIR [--tests]
    python benchmarks/lane_cpp_identity.py compare OUT_A OUT_B

`dump` writes every C++ text the emitter assembles (emit/program.py `assemble`), in order: the seed MLP's
learnGradient and adjustParameters (benchmarks/cpu_mlp.py's patched shader) with the register-resident lane
emitter and with the row emitter; with --tests also every kernel that the lane tests compile
(tests/runtime/test_cpu_lane_loops.py, test_cpu_lane_vregs.py, test_cpu_jam.py of the tree that is imported,
run there through pytest with this file as a plugin).  `compare` lists the files that differ or exist on one side only (exit status 1 if any)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANE_TESTS = ["tests/runtime/test_cpu_lane_loops.py", "tests/runtime/test_cpu_lane_vregs.py",
              "tests/runtime/test_cpu_jam.py"]


def _record() -> None:
    """Wrap emit.assemble so that each C++ text lands in $SJ_DUMP_DIR as NNNN_<target>.cpp."""
    import slangjit.compiler.emit as E
    import slangjit.compiler.emit.program as P
    orig = P.assemble
    count = [0]

    def assemble(program, target):
        src, refl = orig(program, target)
        out = Path(os.environ["SJ_DUMP_DIR"])
        out.mkdir(parents=True, exist_ok=True)
        count[0] += 1
        (out / f"{count[0]:04d}_{type(target).__name__}.cpp").write_text(src)
        return src, refl

    P.assemble = assemble
    E.assemble = assemble


if os.environ.get("SJ_DUMP_DIR") and __name__ != "__main__":
    _record()           # loaded as a pytest plugin (-p lane_cpp_identity)


def dump(out: Path, tests: bool) -> None:
    import slangjit
    tree = Path(slangjit.__file__).resolve().parents[1]     # the tree whose compiler is measured: its tests
    sys.path.insert(0, str(tree / "benchmarks"))
    import cpu_mlp
    os.environ["SJ_DUMP_DIR"] = str(out / "mlp")
    os.environ["SLANGJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="sj_identity")
    _record()
    from slangjit.compiler import SourceSpec, compile_program
    from slangjit.compiler.passes.options import PipelineOptions
    with tempfile.TemporaryDirectory() as d:
        shader = Path(d) / "mlp.slang"
        shader.write_text(cpu_mlp.patched_source(True))
        for opts in (PipelineOptions(), PipelineOptions().with_cpu(lane_vregs=False)):
            for entry in ("learnGradient", "adjustParameters"):
                compile_program([SourceSpec(path=str(shader))], [entry], target="cpp", options=opts)
    if tests:
        env = dict(os.environ, SJ_DUMP_DIR=str(out / "tests"),
                   PYTHONPATH=os.pathsep.join([str(tree), str(ROOT / "benchmarks")] +
                                              [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "lane_cpp_identity"] + LANE_TESTS,
                           cwd=tree, env=env)
        if r.returncode:
            sys.exit(f"the lane tests failed (exit status {r.returncode})")
    print(f"{sum(1 for _ in out.rglob('*.cpp'))} C++ files in {out}")


def compare(a: Path, b: Path) -> int:
    fa = {p.relative_to(a) for p in a.rglob("*.cpp")}
    fb = {p.relative_to(b) for p in b.rglob("*.cpp")}
    bad = sorted(str(p) + " (one side only)" for p in fa ^ fb)
    bad += sorted(str(p) for p in fa & fb if (a / p).read_bytes() != (b / p).read_bytes())
    for x in bad:
        print("differs:", x)
    print(f"{len(fa & fb)} files compared, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "dump":
        dump(Path(sys.argv[2]), "--tests" in sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
