"""Background NVRTC builds (runtime/cuda_compiler.py compile_async) and the NVRTC library prefetch, without a
GPU: a program loaded for a CUDA device starts its build at once, the kernel waits for it; images equal the
synchronous build's, errors reach compile_cached's caller, cached images start nothing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")

from slangjit.compiler import SourceSpec, compile_program  # noqa: E402
from slangjit.runtime import cuda_compiler as cc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HELPERS = os.path.join(ROOT, "tests", "helpers")

KERNEL = r"""
RWStructuredBuffer<float> outp;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID) { outp[tid.x] = sin(float(tid.x)) * 2.0; }
[numthreads(32, 1, 1)]
void other(uint3 tid : SV_DispatchThreadID) { InterlockedAdd(outp[0], float(tid.x)); }
"""


def _usable():
    try:
        cc.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path))
    for fut in list(cc._pending.values()):      # builds an earlier test of this process started and never
        try:                                    # collected: finished first, so `_pending` is this test's own
            fut.exception()
        except BaseException:  # noqa: BLE001
            pass
    cc._pending.clear()
    cc._mem_cache.clear()
    yield tmp_path
    cc._mem_cache.clear()


def _src(entry: str, tag: str) -> str:
    return compile_program([SourceSpec(text=KERNEL, name="k")], [entry], target="cuda").source + f"\n// {tag}\n"


def test_background_build_gives_the_synchronous_image(cache):
    _usable()
    src = _src("computeMain", "async-1")
    n = cc.stats["compiles"]
    assert cc.compile_async(src, "sm_90") is True
    assert cc.compile_async(src, "sm_90") is False          # already being built
    img = cc.compile_cached(src, "sm_90")
    assert not img.cached and img.compile_seconds > 0
    assert cc.stats["compiles"] == n + 1
    assert img.image == cc.compile_source(src, "sm_90")[0]
    assert cc.compile_cached(src, "sm_90").cached            # memory hit now
    assert not cc._pending


def test_concurrent_builds_match_sequential_ones(cache):
    _usable()
    srcs = [_src("computeMain", "conc"), _src("other", "conc"), _src("computeMain", "conc-b")]
    for s in srcs:
        assert cc.compile_async(s, "sm_90")
    imgs = [cc.compile_cached(s, "sm_90").image for s in srcs]
    assert imgs == [cc.compile_source(s, "sm_90")[0] for s in srcs]


def test_an_nvrtc_error_in_the_background_reaches_the_caller(cache):
    _usable()
    bad = _src("computeMain", "bad") + "this is not CUDA;\n"
    assert cc.compile_async(bad, "sm_90")
    with pytest.raises(cc.NvrtcError, match="failed to compile"):
        cc.compile_cached(bad, "sm_90")
    assert not cc._pending
    with pytest.raises(cc.NvrtcError):                       # and again, synchronously
        cc.compile_cached(bad, "sm_90")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_does_not_wait_for_the_parents_build(cache):
    """A fork waits for the builds under way (NVRTC's locks could be held by a worker thread the child does not
    have); the child collects the finished build and compiles on its own afterwards."""
    _usable()
    src = _src("computeMain", "fork")
    assert cc.compile_async(src, "sm_90")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                             # the child: report the image size, never return
        code = 1
        signal.alarm(300)                                    # a deadlock fails the test instead of hanging it
        try:
            img = cc.compile_cached(src, "sm_90")
            other = cc.compile_cached(_src("other", "fork-child"), "sm_90")      # NVRTC in the child
            os.write(w, f"{len(img.image)} {int(img.cached)} {len(other.image)}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    got = os.read(r, 64)
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0
    size, cached, other = map(int, got.split())
    assert size == len(cc.compile_cached(src, "sm_90").image) and cached == 0 and other > 0


def test_a_cached_image_starts_no_build(cache):
    _usable()
    src = _src("other", "cached")
    cc.compile_cached(src, "sm_90")
    cc._mem_cache.clear()
    n = cc.stats["compiles"]
    assert cc.compile_async(src, "sm_90") is False           # disk hit, now in memory
    assert cc.compile_cached(src, "sm_90").cached
    assert cc.stats["compiles"] == n


def test_prefetch_names_the_loaded_libraries():
    _usable()
    files = cc.nvrtc_library_files()
    assert any(os.path.basename(f).startswith("libnvrtc.so") for f in files)
    assert any("builtins" in os.path.basename(f) for f in files)
    mapped = cc._loaded_nvrtc_libraries()
    if mapped:              # the files found are the ones this process loaded
        assert {os.path.realpath(f) for f in mapped} <= {os.path.realpath(f) for f in files}
    t = cc.prefetch_toolchain()
    assert t is cc.prefetch_toolchain()                      # once per process
    t.join(30)
    assert not t.is_alive()



def test_prefetch_lists_the_nvrtc_that_is_loaded(tmp_path, monkeypatch):
    """Once NVRTC is mapped, the prefetch list is the libraries beside the one this process loaded, not another
    copy found first on the search path (a GPU host with a CUDA toolkit and torch's wheel has two)."""
    d = tmp_path / "toolkit" / "lib"
    d.mkdir(parents=True)
    for n in ("libnvrtc.so.13.0.88", "libnvrtc-builtins.so.13.0.88", "libother.so"):
        (d / n).write_bytes(b"x")
    monkeypatch.setattr(cc, "_loaded_nvrtc_libraries", lambda: [str(d / "libnvrtc.so.13.0.88")])
    assert cc.nvrtc_library_files() == [str(d / "libnvrtc-builtins.so.13.0.88"), str(d / "libnvrtc.so.13.0.88")]


CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import slangjit
import cuda_stub_driver as drv
drv.install()
from slangjit.runtime import cuda_compiler as cc
dev = slangjit.create_device(type=slangjit.DeviceType.cuda)
progs = [dev.load_program(sys.argv[1], [e]) for e in ("computeMain", "other")]
started = len(cc._pending)
ks = [dev.create_compute_kernel(p) for p in progs]
loaded_at_creation = len(drv.images)
hit = [k.timings["cache_hit"] for k in ks]          # reading the timings loads the kernel (waits for its image)
print(json.dumps({"started": started, "pending_after": len(cc._pending), "images": [len(i) for i in drv.images],
                  "hit": hit, "compiles": cc.stats["compiles"], "loaded_at_creation": loaded_at_creation}))
"""


def test_device_starts_each_programs_build_when_it_is_loaded(tmp_path):
    """Through a CUDA device (stub driver): both programs' builds are under way before the first kernel is
    created; a kernel loads its module on first use (here: reading its timings) and gets the build's image;
    a warm start starts none."""
    _usable()
    shader = tmp_path / "two.slang"
    shader.write_text(KERNEL)
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run():
        r = subprocess.run([sys.executable, "-c", CHILD, str(shader), HELPERS], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    cold = run()
    assert cold["started"] == 2 and cold["pending_after"] == 0 and cold["compiles"] == 2
    assert cold["hit"] == [0.0, 0.0] and all(n > 0 for n in cold["images"])
    assert cold["loaded_at_creation"] == 0 and len(cold["images"]) == 2
    warm = run()
    assert warm["started"] == 0 and warm["compiles"] == 0 and warm["hit"] == [1.0, 1.0]
    assert warm["images"] == cold["images"]


GPU_KERNEL = r"""
RWStructuredBuffer<float> a;
RWStructuredBuffer<float> b;
[numthreads(64, 1, 1)]
void first(uint3 tid : SV_DispatchThreadID) { a[tid.x] = sin(float(tid.x)) * 2.0; }
[numthreads(32, 1, 1)]
void second(uint3 tid : SV_DispatchThreadID) { InterlockedAdd(b[0], float(tid.x)); }
"""


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_gpu_kernels_built_in_the_background_run(device, tmp_path):
    """On a GPU (skipped elsewhere): two programs loaded one after the other build in the background; their
    kernels load on first use and compute what numpy does."""
    import numpy as np
    import slangjit as spy
    shader = tmp_path / "bg.slang"
    shader.write_text(GPU_KERNEL)
    progs = [device.load_program(str(shader), [e]) for e in ("first", "second")]
    ks = [device.create_compute_kernel(p) for p in progs]
    usage = spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource
    a = device.create_buffer(size=4 * 256, usage=usage, data=np.zeros(256, np.float32))
    b = device.create_buffer(size=4 * 4, usage=usage, data=np.zeros(4, np.float32))
    ks[0].dispatch(thread_count=[256, 1, 1], vars={"a": a, "b": b})     # every global of the module is bound
    ks[1].dispatch(thread_count=[64, 1, 1], vars={"a": a, "b": b})
    got_a = a.to_numpy().view(np.float32)[:256]
    np.testing.assert_allclose(got_a, np.sin(np.arange(256, dtype=np.float32)) * 2.0, rtol=1e-6, atol=1e-6)
    assert b.to_numpy().view(np.float32)[0] == float(sum(range(64)))
    assert all(k.timings["cache_hit"] == 0.0 and k.timings["nvrtc"] > 0 for k in ks)


def test_a_cached_image_never_reads_a_lazy_source(cache):
    """The source may be a callable (a cached program's lazily read text: runtime/cuda.py passes one); a memory or
    disk hit, or a build already under way, never calls it; a build calls it once."""
    _usable()
    src = _src("other", "lazy")
    sha = __import__("hashlib").sha256(src.encode()).digest()
    calls = []

    def lazy():
        calls.append(1)
        return src

    def never():
        raise AssertionError("the source was read for a cached image")
    assert cc.compile_async(lazy, "sm_90", sha) is True
    assert cc.compile_cached(never, "sm_90", sha).image == cc.compile_source(src, "sm_90")[0]
    assert calls == [1]
    assert cc.compile_cached(never, "sm_90", sha).cached                 # memory
    cc._mem_cache.clear()
    assert cc.compile_async(never, "sm_90", sha) is False                 # disk
    assert cc.compile_cached(never, "sm_90", sha).cached
