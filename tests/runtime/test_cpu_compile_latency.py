"""CPU compile latency (issue 20): background C++ builds started when a program is loaded (kernels load
their library at first use), and the precompiled prelude (a GCC .gch per prefix, compiler and flags)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit.runtime import cpu_compiler as cc
from slangjit.runtime import cpu_pool

ROOT = Path(__file__).resolve().parents[2]
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access

KERNEL = """
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    y[i] = x[i] * x[i] * SCALE + OFFSET;
}
"""

LANE_KERNEL = """
RWStructuredBuffer<float> x;
RWStructuredBuffer<float> y;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    uint i = tid.x;
    float v = x[i];
    float s = 0.0;
    for (int k = 0; k < 3; k++)
        s += sin(v * float(k + 1)) * SCALE;
    y[i] = s + OFFSET;
}
"""




def _program(dev, tmp_path, template, scale, offset, name=None):
    p = tmp_path / (name or f"k_{str(scale).replace('.', '_')}_{str(offset).replace('.', '_')}.slang")
    p.write_text(template.replace("SCALE", repr(float(scale))).replace("OFFSET", repr(float(offset))))
    return dev.load_program(str(p), ["computeMain"])


def _run(dev, kernel, n=256):
    xs = np.linspace(-2.0, 2.0, n, dtype=np.float32)
    x = dev.create_buffer(element_count=n, struct_size=4, usage=RW, data=xs)
    y = dev.create_buffer(element_count=n, struct_size=4, usage=RW)
    kernel.dispatch(thread_count=[n, 1, 1], vars={"x": x, "y": y})
    return xs, y.to_numpy().view(np.float32)


def _lane_ref(xs, scale, offset):
    x = xs.astype(np.float64)
    return sum(np.sin(x * (k + 1)) * scale for k in range(3)) + offset


# ------------------------------------------------------------------------------------------ background builds


def test_loaded_programs_build_in_the_background_and_load_at_first_use(fresh_cache, tmp_path):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    progs = [_program(dev, tmp_path, KERNEL, s, o) for s, o in ((2.0, 1.0), (3.0, -1.0), (0.5, 0.25))]
    keys = [cc.library_key(p.compiled.source) for p in progs]
    assert len(set(keys)) == 3
    # every build was started when its program was loaded (still running, or done and waiting for pickup)
    assert all(k in cc._pending or k in cc._libs for k in keys)
    kernels = [dev.create_compute_kernel(p) for p in progs]
    assert all("library" not in k.__dict__ for k in kernels)          # nothing loaded before first use
    for (s, o), k in zip(((2.0, 1.0), (3.0, -1.0), (0.5, 0.25)), kernels):
        xs, ys = _run(dev, k)
        np.testing.assert_array_equal(ys, (xs * xs * np.float32(s) + np.float32(o)).astype(np.float32))
        assert k.library.compile_seconds > 0 and not k.library.from_disk and k.timings["cxx"] > 0
    assert not any(k in cc._pending for k in keys)                   # collected


def test_background_build_failure_is_raised_at_first_use_and_device_stays_usable(fresh_cache, tmp_path,
                                                                                 monkeypatch):
    dev = spy.create_device(type=spy.DeviceType.cpu)
    monkeypatch.setenv("SLANGJIT_CXXFLAGS", "-fslangjit-no-such-flag")
    bad = dev.create_compute_kernel(_program(dev, tmp_path, KERNEL, 4.0, 2.0))   # the build fails meanwhile
    with pytest.raises(cc.InternalCompilerError, match="slangjit bug") as ei:
        _run(dev, bad)
    assert "no-such-flag" in str(ei.value)
    monkeypatch.delenv("SLANGJIT_CXXFLAGS")
    good = dev.create_compute_kernel(_program(dev, tmp_path, KERNEL, 4.0, 2.5))
    xs, ys = _run(dev, good)
    np.testing.assert_array_equal(ys, (xs * xs * np.float32(4.0) + np.float32(2.5)).astype(np.float32))
    xs, ys = _run(dev, bad.device.create_compute_kernel(bad.program))          # same program, flags fixed now
    np.testing.assert_array_equal(ys, (xs * xs * np.float32(4.0) + np.float32(2.0)).astype(np.float32))


def test_kernel_library_is_waited_for_by_every_thread(fresh_cache, tmp_path):
    """Several Python threads using one kernel whose library is still building all get the same library."""
    import threading
    dev = spy.create_device(type=spy.DeviceType.cpu)
    k = dev.create_compute_kernel(_program(dev, tmp_path, KERNEL, 1.5, 0.5))
    got, errs = [], []

    def use():
        try:
            got.append(k.library)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)
    ts = [threading.Thread(target=use) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs and len(got) == 4 and all(g is got[0] for g in got)


# ------------------------------------------------------------------------------------------ precompiled prelude


def _gcc() -> bool:
    try:
        return cc._is_gcc(cc.find_compiler())
    except cc.CompilerNotFoundError:
        return False


needs_gcc = pytest.mark.skipif(not _gcc(), reason="precompiled headers are made for GCC only")


def _spy_builds(monkeypatch):
    calls = []
    real = cc._run_compiler

    def spy_run(argv):
        calls.append(list(argv))
        return real(argv)
    monkeypatch.setattr(cc, "_run_compiler", spy_run)
    return calls


@needs_gcc
@pytest.mark.parametrize("template", [KERNEL, LANE_KERNEL], ids=["scalar", "lanes"])
def test_prelude_is_precompiled_at_the_second_build_and_results_are_unchanged(fresh_cache, tmp_path, monkeypatch,
                                                                                template):
    calls = _spy_builds(monkeypatch)
    dev = spy.create_device(type=spy.DeviceType.cpu)
    pch = fresh_cache / "cpu" / "pch"
    outs = []
    for i, (s, o) in enumerate(((2.0, 1.0), (3.0, -1.0), (0.75, 0.5))):
        k = dev.create_compute_kernel(_program(dev, tmp_path, template, s, o))
        xs, ys = _run(dev, k)
        ref = (xs * xs * np.float32(s) + np.float32(o)).astype(np.float32) if template is KERNEL else \
            _lane_ref(xs, s, o)
        if template is KERNEL:
            np.testing.assert_array_equal(ys, ref)
        else:
            np.testing.assert_allclose(ys, ref, rtol=2e-5, atol=2e-5)
        outs.append(ys)
        gchs = list(pch.glob("*.h.gch"))
        used = ["-include" in c for c in calls]
        if i == 0:      # first build of this prefix: whole source, the prefix remembered
            assert not gchs and len(list(pch.glob("*.seen"))) == 1 and used == [False]
        else:           # second: the header made and used; third: used
            assert len(gchs) == 1 and used[-1] and len(list(pch.glob("*.mac"))) == 1
    # the same program built without the header gives the same bits
    monkeypatch.setenv("SLANGJIT_NO_PCH", "1")
    cc.clear_memory_cache()
    for f in (fresh_cache / "cpu").glob("*.so"):
        f.unlink()
    k = dev.create_compute_kernel(_program(dev, tmp_path, template, 0.75, 0.5))
    _, ys = _run(dev, k)
    np.testing.assert_array_equal(ys, outs[-1])
    assert "-include" not in calls[-1]


@needs_gcc
@pytest.mark.parametrize("damage", ["flipped", "forged_mac", "rejected"])
def test_damaged_precompiled_header_is_never_used(fresh_cache, tmp_path, monkeypatch, damage):
    """A .gch whose MAC does not verify is deleted and remade before use; one the compiler rejects (a valid
    MAC over bytes that are not a header) is deleted and the build runs on the whole source."""
    dev = spy.create_device(type=spy.DeviceType.cpu)
    sources = []
    for s in (2.0, 3.0):
        k = dev.create_compute_kernel(_program(dev, tmp_path, KERNEL, s, 1.0))
        _run(dev, k)
        sources.append(k.compiled.source)
    pkey = _pch_key(sources[0])
    pch = fresh_cache / "cpu" / "pch"
    (gch,) = pch.glob("*.h.gch")
    assert gch.name == pkey[:40] + ".h.gch"
    mac = pch / (pkey[:40] + ".mac")
    data = gch.read_bytes()
    if damage == "flipped":
        gch.write_bytes(data[:1000] + bytes([data[1000] ^ 0xFF]) + data[1001:])
    elif damage == "forged_mac":
        mac.write_bytes(bytes(32))
    else:   # garbage with a MAC that verifies: only the compiler can reject it
        junk = b"not a precompiled header" * 100
        gch.write_bytes(junk)
        mac.write_bytes(cc.entry_mac(fresh_cache / "cpu", pkey, junk))
    cc._pch_ok.clear()
    calls = _spy_builds(monkeypatch)
    k = dev.create_compute_kernel(_program(dev, tmp_path, KERNEL, 5.0, 1.0))
    xs, ys = _run(dev, k)
    np.testing.assert_array_equal(ys, (xs * xs * np.float32(5.0) + np.float32(1.0)).astype(np.float32))
    if damage == "rejected":
        assert len(calls) == 2 and "-include" in calls[0] and "-include" not in calls[1]
        assert not gch.exists() and not mac.exists()
    else:   # deleted, remade (the build that needed it), verified and used
        assert len(calls) == 1 and "-include" in calls[0]
        assert cc._pch_verify(gch, fresh_cache / "cpu", pkey)


def _pch_key(source: str) -> str:
    """The precompiled header's key for a generated source's prefix (as cpu_compiler computes it)."""
    import hashlib
    prefix = source[: source.index("\n" + cc.PCH_END + "\n") + 1]
    cmd, flags = cc.find_compiler(), cc.compile_flags()
    h = hashlib.sha256()
    for part in (cc._PCH_VERSION, prefix.encode(), "\0".join(cmd).encode(), cc.compiler_version(cmd).encode(),
                 "\0".join(flags).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


_CHILD = r"""
import json, sys
import numpy as np
import slangjit as spy
dev = spy.create_device(type=spy.DeviceType.cpu)
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
out = []
for path in sys.argv[1:]:
    k = dev.create_compute_kernel(dev.load_program(path, ["computeMain"]))
    xs = np.linspace(-2.0, 2.0, 256, dtype=np.float32)
    x = dev.create_buffer(element_count=256, struct_size=4, usage=RW, data=xs)
    y = dev.create_buffer(element_count=256, struct_size=4, usage=RW)
    k.dispatch(thread_count=[256, 1, 1], vars={"x": x, "y": y})
    out.append(y.to_numpy().view(np.float32).tolist())
print(json.dumps(out))
"""


def test_processes_compiling_the_same_module_at_once_all_succeed(tmp_path):
    """Three processes load the same two programs at once into one cache whose prefix was seen before (so
    each may make the precompiled header too): all succeed with the right values, one library per program."""
    cache = tmp_path / "cache"
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SLANGJIT_NO_PCH", None)
    paths = []
    for s, o in ((2.0, 1.0), (3.0, -1.0), (1.25, 0.0)):
        p = tmp_path / f"m_{len(paths)}.slang"
        p.write_text(KERNEL.replace("SCALE", repr(s)).replace("OFFSET", repr(o)))
        paths.append(str(p))
    first = subprocess.run([sys.executable, "-c", _CHILD, paths[2]], env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, *paths[:2]], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    xs = np.linspace(-2.0, 2.0, 256, dtype=np.float32)
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        ys = json.loads(out)
        for (s, o), got in zip(((2.0, 1.0), (3.0, -1.0)), ys):
            np.testing.assert_array_equal(np.array(got, np.float32), (xs * xs * np.float32(s) + np.float32(o)))
    pool = cpu_pool.library_name()        # the native worker pool's, built at the first dispatch
    assert len([f for f in (cache / "cpu").glob("*.so") if f.name != pool]) == 3
    assert not [f for f in (cache / "cpu").iterdir() if f.name.startswith(".")]
    if _gcc():
        assert not [f for f in (cache / "cpu" / "pch").iterdir() if f.name.startswith(".")]
        assert len(list((cache / "cpu" / "pch").glob("*.h.gch"))) == 1


# ------------------------------------------------------------------------------------------ cheaper flags


def test_lane_loop_kernels_build_with_fewer_passes_and_the_same_bits(fresh_cache, tmp_path):
    """A translation unit of lane-loop kernels only is marked on its first line and built without the GCC passes
    of LANE_KERNEL_FLAGS (CpuOptions.lane_compile_flags); its results are bit for bit those of the full -O2 build.
    A scalar kernel's translation unit is not marked."""
    from slangjit.compiler.passes.options import CpuOptions, PipelineOptions
    dev = spy.create_device(type=spy.DeviceType.cpu)
    p = tmp_path / "lanes.slang"
    p.write_text(LANE_KERNEL.replace("SCALE", "1.75").replace("OFFSET", "0.5"))
    on = dev.load_program(str(p), ["computeMain"])
    off = dev.load_program(str(p), ["computeMain"],
                           compile_options=PipelineOptions(cpu=CpuOptions(lane_compile_flags=False)))
    assert on.compiled.source.startswith(cc.LANE_KERNELS_ONLY + "\n")
    assert "sj_lanes_computeMain" in on.compiled.source          # a lane-blocked kernel
    assert not off.compiled.source.startswith(cc.LANE_KERNELS_ONLY)
    cmd = cc.find_compiler()
    if _gcc():
        assert set(cc.LANE_KERNEL_FLAGS) <= set(cc.source_flags(on.compiled.source, cmd, cc.compile_flags()))
    assert cc.source_flags(off.compiled.source, cmd, cc.compile_flags()) == cc.compile_flags()
    xs, y_on = _run(dev, dev.create_compute_kernel(on), n=4096)
    _, y_off = _run(dev, dev.create_compute_kernel(off), n=4096)
    np.testing.assert_array_equal(y_on, y_off)
    np.testing.assert_allclose(y_on, _lane_ref(xs, 1.75, 0.5), rtol=2e-5, atol=2e-5)
    scalar = _program(dev, tmp_path, KERNEL, 2.0, 1.0)
    assert not scalar.compiled.source.startswith(cc.LANE_KERNELS_ONLY)
