"""Issue 15 (runtime side): dispatch arguments are validated before launch, errors name what is wrong,
and the checked mode's runtime switch (create_device(enable_debug_layers=True) / $SLANGJIT_CHECKED)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import slangjit
from slangjit.runtime import kernel_errors
from slangjit.runtime.device import BufferUsage, DeviceType, create_device

KERNEL = """
RWStructuredBuffer<float> outputBuffer;
[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float scale, uniform int count)
{
    if (int(tid.x) < count)
        outputBuffer[tid.x] = scale * float(tid.x + 1);
}
"""


@pytest.fixture
def kernel(device, tmp_path):
    p = tmp_path / "k.slang"
    p.write_text(KERNEL)
    return device.create_compute_kernel(device.load_program(str(p), ["computeMain"]))


def _buf(device, n):
    return device.create_buffer(element_count=n, struct_size=4, usage=BufferUsage.unordered_access)


def test_thread_count_must_be_integers(device, kernel):
    out = _buf(device, 16)
    for bad in ("12", ["12"], 7.9, [7.9, 1, 1], [4.0], True, [2, True], None, b"12"):
        with pytest.raises(TypeError, match="thread_count must be 1 to 3 non-negative integers"):
            kernel.dispatch(thread_count=bad, vars={"outputBuffer": out}, scale=1.0, count=16)
    with pytest.raises(ValueError, match="must not be negative"):
        kernel.dispatch(thread_count=[-1, 1, 1], vars={"outputBuffer": out}, scale=1.0, count=16)
    with pytest.raises(ValueError, match="1 to 3 components"):
        kernel.dispatch(thread_count=[1, 1, 1, 1], vars={"outputBuffer": out}, scale=1.0, count=16)
    assert not out.to_numpy().view(np.float32).any()         # nothing ran
    kernel.dispatch(thread_count=[np.int64(8), 1, 1], vars={"outputBuffer": out}, scale=1.0, count=16)
    np.testing.assert_array_equal(out.to_numpy().view(np.float32)[:9], [1, 2, 3, 4, 5, 6, 7, 8, 0])


def test_missing_entry_point_uniform_is_named(device, kernel):
    out = _buf(device, 4)
    with pytest.raises(ValueError, match=r"no value for the entry point's uniform parameter 'count' \(int\)"):
        kernel.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out}, scale=2.0)
    with pytest.raises(ValueError, match="uniform parameter 'scale'"):
        kernel.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out}, count=4)
    kernel.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out}, scale=2.0, count=4)
    np.testing.assert_array_equal(out.to_numpy().view(np.float32), [2, 4, 6, 8])


def test_too_small_output_buffer_drops_writes_in_bounds(device, kernel):
    """Which indices a kernel writes is not known before launch: a too-small buffer drops the writes
    past its end (bounds-safe, docs/security.md); the checked mode reports them."""
    big = _buf(device, 8)
    small = _buf(device, 2)
    kernel.dispatch(thread_count=[8, 1, 1], vars={"outputBuffer": small}, scale=1.0, count=8)
    np.testing.assert_array_equal(small.to_numpy().view(np.float32), [1, 2])
    assert not big.to_numpy().any()


def test_float_that_does_not_fit_is_named(device, kernel):
    out = _buf(device, 4)
    with pytest.raises(ValueError, match=r"'scale' value 1e\+300 does not fit a float"):
        kernel.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out}, scale=np.float64(1e300), count=4)
    kernel.dispatch(thread_count=[1, 1, 1], vars={"outputBuffer": out}, scale=float("inf"), count=1)
    assert out.to_numpy().view(np.float32)[0] == np.inf


def test_big_endian_data_is_converted(device):
    be = np.arange(4, dtype=">f4")
    for b in (device.create_buffer(data=be, usage=BufferUsage.unordered_access), _buf(device, 4)):
        if not b.to_numpy().any():
            b.copy_from_numpy(be)
        np.testing.assert_array_equal(b.to_numpy().view(np.float32), [0, 1, 2, 3])
    b = _buf(device, 4)
    b.set_data(np.array([7, 9], dtype=">i4"), 4)
    np.testing.assert_array_equal(b.to_numpy().view(np.int32), [0, 7, 9, 0])


def test_load_program_compile_error_has_no_compiler_frames(device, tmp_path):
    p = tmp_path / "bad.slang"
    p.write_text("RWStructuredBuffer<float> o;\n[numthreads(1,1,1)]\n"
                 "void main(uint3 t : SV_DispatchThreadID) { o[t.x] = undefined_thing; }\n")
    with pytest.raises(slangjit.CompileError, match="E2052: undefined identifier 'undefined_thing'") as e:
        device.load_program(str(p), ["main"])
    frames = [f for f in e.traceback if "slangjit" in str(f.path)]
    assert len(frames) <= 4 and not any("/compiler/" in str(f.path) for f in frames)
    assert e.value.__cause__ is None and e.value.__suppress_context__


# ------------------------------------------------------------------------------------------ checked mode


def test_checked_mode_switch(monkeypatch, tmp_path):
    monkeypatch.delenv("SLANGJIT_CHECKED", raising=False)
    assert not create_device(type=DeviceType.cpu).checked
    assert not create_device(type=DeviceType.cpu).compile_options.checked
    d = create_device(type=DeviceType.cpu, enable_debug_layers=True)
    assert d.checked and d.compile_options.checked
    monkeypatch.setenv("SLANGJIT_CHECKED", "1")                  # read when a device is created
    assert create_device(type=DeviceType.cpu).compile_options.checked
    monkeypatch.setenv("SLANGJIT_CHECKED", "0")
    assert not create_device(type=DeviceType.cpu).checked
    # the programs of a checked device are compiled with PipelineOptions(checked=True)
    seen = []
    real = slangjit.compiler.compile_program

    def spy_compile(*a, **k):
        seen.append(k["options"])
        return real(*a, **k)

    monkeypatch.setattr(slangjit.compiler, "compile_program", spy_compile)
    p = tmp_path / "k.slang"
    p.write_text(KERNEL)
    d.load_program(str(p), ["computeMain"])
    create_device(type=DeviceType.cpu).load_program(str(p), ["computeMain"])
    assert [o.checked for o in seen] == [True, False]
    assert ("checked", True) in seen[0].changed()                # a different front-end cache key


def test_env_var_read_at_device_creation_not_import(tmp_path):
    code = textwrap.dedent("""
        import os, slangjit
        os.environ["SLANGJIT_CHECKED"] = "1"
        print(slangjit.create_device(type=slangjit.DeviceType.cpu).checked)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "True", r.stderr


def test_kernel_error_formats_the_record():
    rec = kernel_errors.ErrorRecord()
    kernel_errors.raise_if_failed(rec, lambda i: "?", "main")                   # code 0: nothing failed
    rec.code, rec.site, rec.index, rec.count = kernel_errors.ERR_INDEX, 1, 5, 4
    sites = kernel_errors.sites_lookup(["a.slang:1: x", "k.slang:6: buffer index out of range (float[])"])
    with pytest.raises(slangjit.KernelError, match=r"^k\.slang:6: buffer index out of range \(float\[\]\): "
                                                   r"index 5, valid range \[0, 4\) \(dispatch of 'main'\)") as e:
        kernel_errors.raise_if_failed(rec, sites, "main")
    assert isinstance(e.value, IndexError) and isinstance(e.value, RuntimeError)
    assert e.value.location == "k.slang:6" and e.value.code == kernel_errors.ERR_INDEX


OOB_KERNEL = """
RWStructuredBuffer<float> outputBuffer;
[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform int offset)
{
    outputBuffer[tid.x + offset] = 1.0;
}
"""


def test_checked_device_raises_out_of_range_with_file_and_line(tmp_path, monkeypatch):
    """The device switch end to end: a device made with enable_debug_layers=True compiles its programs
    checked, and a store past the end of a buffer raises KernelError naming the Slang file:line; the same
    program on a default device drops the store (bounds-safe) and raises nothing."""
    monkeypatch.delenv("SLANGJIT_CHECKED", raising=False)
    p = tmp_path / "oob.slang"
    p.write_text(OOB_KERNEL)
    d = create_device(type=DeviceType.cpu, enable_debug_layers=True)
    k = d.create_compute_kernel(d.load_program(str(p), ["computeMain"]))
    out = _buf(d, 4)
    k.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out}, offset=0)            # in range: no error
    assert k.compiled.reflection.error_sites and any("oob.slang:6" in s for s in k.compiled.reflection.error_sites)
    with pytest.raises(slangjit.KernelError, match=r"oob\.slang:6: buffer index out of range .*: index [45], valid range \[0, 4\)"):
        k.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out}, offset=2)
    plain = create_device(type=DeviceType.cpu)
    k2 = plain.create_compute_kernel(plain.load_program(str(p), ["computeMain"]))
    out2 = _buf(plain, 4)
    k2.dispatch(thread_count=[4, 1, 1], vars={"outputBuffer": out2}, offset=2)
    assert list(out2.to_numpy().view(np.float32)) == [0.0, 0.0, 1.0, 1.0]


CUDA_CHILD = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[2])
import slangjit
from slangjit.runtime import kernel_errors
import cuda_stub_driver as drv
drv.install()
rec = kernel_errors.ErrorRecord(kernel_errors.ERR_INDEX, 0, 7, 4)
def memcpy(dst, src, n, stream):
    drv.calls.append(("cuMemcpyDtoHAsync", (src, n)))
    ctypes.memmove(dst, ctypes.addressof(rec), n)
    return (0,)
drv.cuMemcpyDtoHAsync = memcpy
drv.cuStreamSynchronize = lambda s: (0,)
drv.cuMemsetD8Async = lambda p, v, n, s: drv.calls.append(("cuMemsetD8Async", (p, v, n))) or (0,)
plain = slangjit.create_device(type=slangjit.DeviceType.cuda)
k0 = plain.create_compute_kernel(plain.load_program(sys.argv[1], ["computeMain"]))
assert k0._check_ptr is None
dev = slangjit.create_device(type=slangjit.DeviceType.cuda, enable_debug_layers=True)
k = dev.create_compute_kernel(dev.load_program(sys.argv[1], ["computeMain"]))
assert k._check_ptr == 0x1000
assert (b"sj_error_record",) in [c[1] for c in drv.calls if c[0] == "cuModuleGetGlobal"]
k.compiled.reflection.error_sites = [sys.argv[1] + ":6: buffer index out of range"]
try:
    k._check_after()
except slangjit.KernelError as e:
    print("RAISED", e)
print([c for c in drv.calls if c[0] in ("cuMemcpyDtoHAsync", "cuMemsetD8Async")])
"""


def test_cuda_checked_kernel_reads_its_error_record(tmp_path):
    """The CUDA device's side of the checked mode, on the stub driver (no GPU): a checked kernel looks up
    `sj_error_record`, reads it after a launch, raises KernelError and re-arms it."""
    from slangjit.runtime import cuda_compiler
    try:
        cuda_compiler.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")
    import os
    p = tmp_path / "k.slang"
    p.write_text(KERNEL)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / "cache"), SLANGJIT_CHECKED="0",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", CUDA_CHILD, str(p), os.path.join(root, "tests", "helpers")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RAISED " + str(p) + ":6: buffer index out of range: index 7, valid range [0, 4)" in r.stdout
    assert "('cuMemcpyDtoHAsync', (4096, 24))" in r.stdout and "('cuMemsetD8Async', (4096, 0, 24))" in r.stdout
