"""Compile a Slang compute program to C++ with given pipeline options, or dispatch it on the CPU device with
buffers bound by name: shared by the lane-kernel tests (test_cpu_lane_loops.py, test_cpu_jam.py)."""
from __future__ import annotations

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler.passes.options import PipelineOptions

RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


def cpp_source(text: str, options: PipelineOptions = PipelineOptions(), name: str = "k.slang") -> str:
    return compile_program([SourceSpec(text=text, name=name)], ["computeMain"], target="cpp",
                           options=options).source


def dispatch(text, threads, bufs, options, tmp_path, name="k", **uniforms):
    """Dispatch computeMain with the buffers bound by name (vars) and the uniforms; returns the arrays."""
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=options)
    p = tmp_path / f"{name}.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    made = {n: dev.create_buffer(element_count=a.size, struct_size=a.itemsize, usage=RW, data=a) for n, a in bufs.items()}
    k.dispatch(thread_count=list(threads), vars=made, **uniforms)
    return {n: b.to_numpy().view(bufs[n].dtype)[: bufs[n].size].copy() for n, b in made.items()}
