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


def mlp_grads(T, shader, options: PipelineOptions, params, xy):
    """The seed MLP's parameter gradients (raw half buffer) of one learnGradient over the batch xy, with the
    example's host program `T` (train.py) on a CPU device with `options` and the shader file `shader`."""
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=options)
    old, T.SHADER = T.SHADER, shader
    try:
        tr = T.MLPTrainer(dev, params, len(xy))
    finally:
        T.SHADER = old
    tr.set_inputs(xy)
    tr.learn_gradient(0, len(xy), 0)
    return tr.read_grads()


def dispatch_adds(text: str, options: PipelineOptions, tmp_path, name: str, x, n: int) -> dict:
    """Dispatch computeMain(x: half buffer, g: float*, gh: half*, n) of `text` over n threads: the g (8 floats)
    and gh (4 halves) it adds into."""
    import numpy as np
    dev = spy.create_device(type=spy.DeviceType.cpu, compile_options=options)
    p = tmp_path / f"{name}.slang"
    p.write_text(text)
    k = dev.create_compute_kernel(dev.load_program(str(p), ["computeMain"]))
    arrays = {"x": x, "g": np.zeros(8, np.float32), "gh": np.zeros(4, np.float16)}
    bufs = {nm: dev.create_buffer(element_count=a.size, struct_size=a.itemsize, usage=RW, data=a)
            for nm, a in arrays.items()}
    k.dispatch(thread_count=[-(-n // 32) * 32, 1, 1], vars={"x": bufs["x"]}, g=bufs["g"].device_address,
               gh=bufs["gh"].device_address, n=n)
    return {nm: bufs[nm].to_numpy().view(arrays[nm].dtype)[: arrays[nm].size].copy() for nm in ("g", "gh")}
