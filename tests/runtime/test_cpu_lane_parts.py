"""Long lane-loop kernels in parts (emit/cpu_lane_split.py, CpuOptions.lane_part_lines) built by parallel compiler
processes and a link (runtime/cpu_compiler.py, on machines with CpuOptions.lane_part_min_cpus cores: 1 here): the parts build
gives the whole build's results bit for bit (half arithmetic, masks and early returns, gathers and lane-by-lane
statements, privatised adds, combined atomics, the seed MLP's gradients), and a source without parts, or a machine
with fewer cores, builds whole."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import PipelineOptions
from slangjit.runtime import cpu_compiler

from cpu_dispatch import cpp_source, dispatch, dispatch_adds, mlp_grads   # tests/helpers (on sys.path through tests/conftest.py)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cpu_lane_vregs import ADDS, HALF_MV, MIXED, _half_mv_ref, _mixed_ref, half_mv_inputs   # noqa: E402

pytestmark = pytest.mark.usefixtures("private_cache")

ROOT = Path(__file__).resolve().parents[2]
# the test kernels cut into several parts, built in parts on this machine (True) or whole (False)
SMALL = {True: PipelineOptions().with_cpu(lane_part_lines=12, lane_part_min_cpus=1),
         False: PipelineOptions().with_cpu(lane_part_lines=12, lane_part_min_cpus=10 ** 6)}
MLP = {True: PipelineOptions().with_cpu(lane_part_min_cpus=1), False: PipelineOptions().with_cpu(lane_part_min_cpus=10 ** 6)}
WHOLE = PipelineOptions().with_cpu(lane_part_lines=0)


@pytest.fixture
def builds(monkeypatch):
    """Record the compiler command lines (`next()` starts a new record)."""
    seen: list = []
    run = cpu_compiler._run_compiler

    def spy_run(argv):
        seen.append(list(argv))
        return run(argv)

    monkeypatch.setattr(cpu_compiler, "_run_compiler", spy_run)

    class B:
        argv = seen

        @staticmethod
        def next():
            seen.clear()

        @staticmethod
        def parts_built() -> set:
            return {a[i][len("-DSJ_PART="):] for a in seen for i in range(len(a)) if a[i].startswith("-DSJ_PART=")}
    return B


def _parts(src: str) -> int:
    m = re.search(r"^// slangjit: parts (\d+) on \d+\+ cores$", src[:600], re.M)
    return int(m.group(1)) if m else 1


def test_sources_in_parts_and_whole():
    """A kernel body longer than lane_part_lines is also emitted in parts (each a function under #if SJ_PART == p,
    a frame for the locals they share, the rest of the program under part 0); the default cuts the seed MLP's
    learnGradient, not its adjustParameters; lane_part_lines=0 never cuts."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cpu_mlp
    text = cpu_mlp.patched_source(True)
    full = compile_program([SourceSpec(text=text, name="mlp.slang")], ["learnGradient"], target="cpp").source
    n = _parts(full)
    assert n == 3 and "// slangjit: parts 3 on 3+ cores" in full
    assert cpu_compiler.source_parts(full, cpus=16) == 3 and cpu_compiler.source_parts(full, cpus=2) == 1
    assert "#ifndef SJ_PART" in full and "struct sj_F_learnGradient" in full
    for p in range(n):
        assert f"#if SJ_PART == {p}\nSJ_PART_FN void sj_lanes_learnGradient_p{p}(" in full
    assert "#if !defined(SJ_PART) || SJ_PART == 0" in full     # the launchers, the scalar functions
    adj = compile_program([SourceSpec(text=text, name="mlp.slang")], ["adjustParameters"], target="cpp").source
    assert _parts(adj) == 1 and "SJ_PART" not in adj
    whole = compile_program([SourceSpec(text=text, name="mlp.slang")], ["learnGradient"], target="cpp",
                            options=WHOLE).source
    assert _parts(whole) == 1 and "SJ_PART" not in whole and cpu_compiler.source_parts(whole, cpus=64) == 1
    # the header line is found first or after others; a malformed or single count is no parts
    def sp(text, cpus=8):
        return cpu_compiler.source_parts(text, cpus=cpus)
    assert sp("// slangjit: parts 3 on 3+ cores\n\nx") == 3
    assert sp("// slangjit: lane-loop kernels only\n\n// slangjit: parts 2 on 4+ cores\n") == 2
    assert sp("// slangjit: parts 2 on 9+ cores\n") == 1
    assert sp("// slangjit: parts 1 on 1+ cores\n") == sp("// slangjit: parts x on 1+ cores\n") == 1
    assert sp("x // slangjit: parts 3 on 1+ cores\n") == sp("// slangjit: parts 3\n") == 1


def test_half_matvec_parts_equal_whole(builds, tmp_path):
    """Half products and sums in a kernel cut into parts: numpy's float16 bit for bit, as the whole build."""
    assert _parts(cpp_source(HALF_MV, SMALL[True])) >= 2
    n = 1000
    x, w, b = half_mv_inputs(21)
    want = _half_mv_ref(x, w, b)
    for on in (True, False):
        builds.next()
        got = dispatch(HALF_MV, (-(-n // 32) * 32, 1, 1), {"x": x, "w": w, "b": b, "o": np.zeros(n * 8, np.float16)},
                       SMALL[on], tmp_path, name=f"mv_{on}", count=n)["o"]
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16), err_msg=f"parallel={on}")
        assert builds.parts_built() == ({str(p) for p in range(_parts(cpp_source(HALF_MV, SMALL[on])))} if on else set())


def test_masks_returns_and_lane_statements_in_parts(builds, tmp_path):
    """Divergent ifs, an early return under a mask, gathers, integer division, math calls, float -> uint, in a
    kernel cut into parts: the float64 reference's values as the whole build (masked-out lanes untouched)."""
    assert _parts(cpp_source(MIXED, SMALL[True])) >= 2
    rng = np.random.default_rng(4)
    count, div = 300, 3
    x = rng.uniform(-3, 3, count).astype(np.float32)
    idx = rng.integers(0, count, count).astype(np.int32)
    o, u, q, ret = _mixed_ref(x, idx, count, div)
    for on in (True, False):
        builds.next()
        out = dispatch(MIXED, (-(-count // 32) * 32, 1, 1),
                       {"x": x, "idx": idx, "o": np.full(count, -7.0, np.float32),
                        "u": np.full(count, 7, np.uint32), "q": np.full(count, -1, np.int32)},
                       SMALL[on], tmp_path, name=f"mixed_{on}", count=count, div=div)
        keep = ~ret
        np.testing.assert_allclose(out["o"][keep], o[keep], rtol=2e-6, atol=1e-6, err_msg=f"parallel={on}")
        np.testing.assert_array_equal(out["u"][keep], u[keep])
        np.testing.assert_array_equal(out["q"][keep], q[keep])
        assert (out["o"][ret] == -7.0).all() and (out["q"][ret] == -1).all()
        assert (len(builds.parts_built()) >= 2) if on else not builds.parts_built()


def test_privatised_adds_in_parts(builds, monkeypatch, tmp_path):
    """Privatised float and half adds from a kernel cut into parts (one worker): the whole build's sums bit for bit,
    and float64's within float rounding."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "1")
    src = cpp_source(ADDS, SMALL[True])
    assert _parts(src) >= 2 and "sj::lacc_claim" in src
    n = 4000 + 13
    x = np.random.default_rng(9).uniform(-1, 1, n).astype(np.float16)
    got = {}
    for on in (True, False):
        builds.next()
        got[on] = dispatch_adds(ADDS, SMALL[on], tmp_path, f"adds_{on}", x, n)
        assert (len(builds.parts_built()) >= 2) if on else not builds.parts_built()
    h = np.float16
    p = [(x * h(k + 1)).astype(h).astype(np.float64) for k in range(4)]
    want_g = [(pk * np.float64(np.float32(0.1))).sum() for pk in p] + \
        [x.astype(np.float64)[x.astype(np.float64) > 0.25].sum()] * 4
    np.testing.assert_allclose(got[True]["g"], want_g, rtol=1e-5)
    np.testing.assert_array_equal(got[True]["g"].view(np.uint32), got[False]["g"].view(np.uint32))
    np.testing.assert_array_equal(got[True]["gh"].view(np.uint16), got[False]["gh"].view(np.uint16))


def test_mlp_gradients_in_parts_equal_whole(builds, monkeypatch, tmp_path):
    """The seed MLP's learnGradient in three parts (the default cut): the whole build's gradients and loss bit for
    bit (one worker), and the float64 reference's within half rounding."""
    monkeypatch.setenv("SLANGJIT_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT / "examples" / "mlp_training"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cpu_mlp
    import train as T
    import mlp_reference
    shader = tmp_path / "mlp.slang"
    shader.write_text(cpu_mlp.patched_source(True))
    params = T.init_parameters(3)
    xy = np.random.default_rng(3).uniform(-1, 1, (1 << 12, 2)).astype(np.float32)
    grads = {}
    for on in (True, False):
        builds.next()
        grads[on] = mlp_grads(T, shader, MLP[on], params, xy)
        assert builds.parts_built() == ({"0", "1", "2"} if on else set())
    np.testing.assert_array_equal(grads[True].view(np.uint16), grads[False].view(np.uint16))
    _, want = mlp_reference.loss_and_grad(T, params.astype(np.float64), xy.astype(np.float16).astype(np.float64))
    got = grads[True].astype(np.float64) / cpu_mlp.LOSS_SCALE
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 5e-3


def test_a_part_that_fails_to_compile_is_reported(builds, monkeypatch, tmp_path):
    """A compiler error in one part of a parallel build reaches the caller as the whole build's would: an
    InternalCompilerError with the compiler's message, the source kept."""
    src = cpp_source(HALF_MV, SMALL[True])
    broken = src.replace("#if SJ_PART == 1\n", "#if SJ_PART == 1\nthis is not C++;\n", 1)
    assert broken != src
    with pytest.raises(cpu_compiler.InternalCompilerError) as e:
        cpu_compiler.load_library(broken)
    assert "this is not C++" in str(e.value) or "error" in str(e.value)
    assert "-DSJ_PART=1" in " ".join(" ".join(a) for a in builds.argv)


def test_a_program_with_a_kernel_in_parts_and_others_links(builds):
    """learnGradient (in parts) and adjustParameters (a lane kernel in one piece) in one program: the parallel build
    links (every launcher and the trailer compiled once, by part 0) and exports both entry points."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cpu_mlp
    src = compile_program([SourceSpec(text=cpu_mlp.patched_source(True), name="mlp.slang")],
                          ["learnGradient", "adjustParameters"], target="cpp", options=MLP[True]).source
    assert _parts(src) == 3
    lib = cpu_compiler.load_library(src)
    assert builds.parts_built() == {"0", "1", "2"}
    for sym in ("sj_entry_learnGradient", "sj_entry_adjustParameters", "sj_run_chunks", "sj_finish_chunks"):
        assert lib.symbol(sym) is not None


def test_a_parts_build_is_replaced_by_the_whole_build_in_the_cache(builds, tmp_path):
    """After a build in parts the same source is built whole in the background over the cached library (the next
    process loads the faster kernel); the loaded library stays the one in use; the upgraded entry verifies."""
    src = cpp_source(HALF_MV, SMALL[True]) + "\n// a source no other test builds\n"
    lib = cpu_compiler.load_library(src)
    assert builds.parts_built() == {str(p) for p in range(_parts(src))}
    for t in list(cpu_compiler._early_threads):
        t.join(120)
    data = Path(lib.path).read_bytes()
    assert b"sj_lanes_computeMain_p1" not in data          # the whole build: no part functions
    assert cpu_compiler._verify(Path(lib.path), Path(lib.path).parent, lib.key)
    assert not list(Path(lib.path).parent.glob(".upgrade-*"))
