"""The pass pipeline (compiler/passes/pipeline.py) and its options (passes/options.py): which passes run
for each target and option set, options are values (frozen, compared, keyed by what differs from the
defaults), and they reach the emitted code through compile_program and the device APIs."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import DEFAULT_OPTIONS, CudaOptions, PipelineOptions
from slangjit.compiler.passes.pipeline import pipeline

ADDS = ("[numthreads(64, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID, uniform float* g)\n"
        "{ for (int i = 0; i < 3; i++) InterlockedAdd(g[i], float(i + 1)); }\n")


def _names(target: str, options: PipelineOptions) -> list[str]:
    return [p.name for p in pipeline(target, lambda e: None) if p.enabled(options)]


def test_passes_per_target_and_options():
    assert _names("cpp", DEFAULT_OPTIONS) == ["simplify", "fuse_entries", "plan_cpu_adds", "fuse_privatised",
                                              "inline_for_lanes", "jam_lane_loops"]
    assert _names("cpp", PipelineOptions().with_cpu(jam=1)) == ["simplify", "fuse_entries", "plan_cpu_adds",
                                                                "fuse_privatised", "inline_for_lanes"]
    no_lanes = PipelineOptions().with_cpu(lane_loops=False)
    assert _names("cpp", no_lanes) == ["simplify", "fuse_entries", "plan_cpu_adds", "fuse_privatised"]
    assert _names("cpp", PipelineOptions().with_cpu(lanes=False)) == _names("cpp", no_lanes)
    assert _names("cpp", no_lanes.with_cpu(fuse_all=False)) == ["simplify", "plan_cpu_adds", "fuse_privatised"]
    assert _names("cpp", PipelineOptions(fuse_entries=True).with_cpu(lane_loops=False)) == \
        ["simplify", "fuse_entries", "plan_cpu_adds", "fuse_privatised"]
    assert _names("cpp", no_lanes.with_cpu(fuse=False, fuse_all=False)) == ["simplify", "plan_cpu_adds"]
    assert _names("cpp", no_lanes.with_cpu(privatize_adds=False, fuse_all=False)) == ["simplify"]
    assert _names("cuda", DEFAULT_OPTIONS) == ["simplify", "lower_atomic_adds", "plan_red_adds", "fuse_coarse",
                                               "cover_slots"]
    assert _names("cuda", PipelineOptions().with_cuda(fuse_coarse=False, lower_atomic_adds=False)) == \
        ["simplify", "plan_red_adds", "cover_slots"]
    assert _names("cuda", PipelineOptions(fuse_entries=True)) == _names("cuda", DEFAULT_OPTIONS)   # CPU-only switch


def test_options_are_values():
    assert DEFAULT_OPTIONS.changed() == ()
    o = PipelineOptions(fuse_entries=True).with_cuda(mma_slots=False, max_slots=8)
    assert o.changed() == (("fuse_entries", True), ("cuda.max_slots", 8), ("cuda.mma_slots", False))
    assert o == PipelineOptions(fuse_entries=True, cuda=CudaOptions(max_slots=8, mma_slots=False))
    assert PipelineOptions().with_cuda(mma_slots=True) == DEFAULT_OPTIONS      # a default spelled out is the default
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.fuse_entries = False
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.cuda.max_slots = 1


def test_options_reach_the_cuda_emitter():
    spec = [SourceSpec(text=ADDS, name="adds.slang")]
    coarse = compile_program(spec, ["computeMain"], target="cuda")
    assert coarse.reflection.entry_points["computeMain"].grid_stride and "// slots: 3" in coarse.source
    plain = compile_program(spec, ["computeMain"], target="cuda", options=PipelineOptions().with_cuda(max_slots=2))
    assert not plain.reflection.entry_points["computeMain"].grid_stride and "// slots:" not in plain.source
    assert "#define SJ_RED_CACHE 1" in plain.source           # too many slots: the block cache instead
    again = compile_program(spec, ["computeMain"], target="cuda")
    assert again.source == coarse.source


def test_device_compile_options(tmp_path):
    """A device's compile_options apply to its programs; load_program's override them."""
    p = tmp_path / "k.slang"
    p.write_text("int twice(int x) { return x * 2; }\n"
                 "[numthreads(4, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID, uniform int* o)\n"
                 "{ int a = twice(int(t.x)); int b = twice(int(t.x)); o[t.x] = a + b; }\n")
    fused = spy.create_device(type=spy.DeviceType.cpu, compile_options=PipelineOptions(fuse_entries=True))
    assert fused.compile_options.fuse_entries
    plain_prog = fused.load_program(str(p), ["computeMain"], compile_options=PipelineOptions().with_cpu(fuse_all=False))
    fused_prog = fused.load_program(str(p), ["computeMain"])
    assert plain_prog.compiled.source != fused_prog.compiled.source      # twice() inlined and reused when fused
    for prog in (plain_prog, fused_prog):
        k = fused.create_compute_kernel(prog)
        out = fused.create_buffer(size=16, usage=spy.BufferUsage.unordered_access)
        k.dispatch([4, 1, 1], o=out.device_address)
        np.testing.assert_array_equal(out.to_numpy().view(np.int32), [0, 4, 8, 12])
