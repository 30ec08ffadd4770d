"""The CUDA image cache and the warm load path, without a GPU (NVRTC builds real cubins; the driver is
tests/cuda_stub_driver.py in child processes).

A warm start (front-end cache + image cache on disk) must not import NVRTC, the emitter, or re-read
anything but the cached entries; a changed toolchain or a damaged entry must be rebuilt.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from slangjit import cache_paths

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")

from slangjit.compiler import SourceSpec, compile_program  # noqa: E402
from slangjit.runtime import cuda_compiler as cc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HELPERS = os.path.join(ROOT, "tests", "helpers")     # cuda_stub_driver.py, imported by the child process

KERNEL = r"""
RWStructuredBuffer<float> outp;
uniform float scale;
[numthreads(64, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform float bias)
{
    outp[tid.x] = scale * float(tid.x) + bias;
}
"""


def _usable():
    try:
        cc.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC library not loadable: {e}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path))
    cc._mem_cache.clear()
    yield tmp_path
    cc._mem_cache.clear()


def _source(tag: str) -> str:
    prog = compile_program([SourceSpec(text=KERNEL, name="load")], ["computeMain"], target="cuda")
    return prog.source + f"\n// {tag}\n"


def _entry_file(cache_root, key: str, ext: str = "cubin") -> str:
    return os.path.join(str(cache_root), "cuda", f"{key[:40]}.{ext}")


def test_key_covers_source_arch_and_options():
    src = _source("key")
    k = cc.cache_key(src, "sm_90", cc.default_options("sm_90"))
    assert k == cc.cache_key(src, "sm_90", cc.default_options("sm_90"))
    assert k != cc.cache_key(src + " ", "sm_90", cc.default_options("sm_90"))
    assert k != cc.cache_key(src, "sm_80", cc.default_options("sm_90"))
    assert k != cc.cache_key(src, "sm_90", cc.default_options("sm_90") + ["--fmad=false"])


def test_cached_program_carries_its_source_digest(tmp_path, monkeypatch):
    """A warm start keys the cubin lookup by the digest stored with the cached program: it must be the
    source's sha256, survive the front-end cache's disk round trip, and give the same key as hashing."""
    import hashlib
    from slangjit.compiler import frontend_cache
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path))
    frontend_cache.clear_memory_cache()
    cold = compile_program([SourceSpec(text=KERNEL, name="digest")], ["computeMain"], target="cuda")
    frontend_cache.clear_memory_cache()
    warm = compile_program([SourceSpec(text=KERNEL, name="digest")], ["computeMain"], target="cuda")
    assert warm.frontend_cache == "disk"
    want = hashlib.sha256(cold.source.encode()).digest()
    assert warm.__dict__.get("_source_sha256") == want        # stored, not recomputed
    opts = cc.default_options("sm_90")
    assert cc.cache_key(warm.source, "sm_90", opts, warm.source_sha256()) == cc.cache_key(cold.source, "sm_90", opts)


def test_fmad_env_changes_the_key(monkeypatch):
    src = _source("fmad")
    a = cc.cache_key(src, "sm_90", cc.default_options("sm_90"))
    monkeypatch.setenv("SLANGJIT_CUDA_FMAD", "0")
    assert cc.cache_key(src, "sm_90", cc.default_options("sm_90")) != a


def test_disk_hit_needs_no_nvrtc(cache, monkeypatch):
    _usable()
    src = _source(str(cache))
    a = cc.compile_cached(src, "sm_90")
    assert not a.cached and a.image[:4] == b"\x7fELF"
    meta_path = _entry_file(cache, a.key)
    assert os.path.isfile(meta_path)
    cc._mem_cache.clear()

    def no_nvrtc():
        raise AssertionError("a cache hit must not use NVRTC")
    monkeypatch.setattr(cc, "nvrtc_module", no_nvrtc)
    monkeypatch.setattr(cc, "nvrtc_version", no_nvrtc)
    b = cc.compile_cached(src, "sm_90")
    assert b.cached and b.image == a.image and b.key == a.key
    c = cc.compile_cached(src, "sm_90")            # now from memory
    assert c.cached and c.image == a.image


def test_entry_records_the_toolchain(cache):
    _usable()
    src = _source(str(cache))
    a = cc.compile_cached(src, "compute_90")
    with open(_entry_file(cache, a.key, "ptx"), "rb") as f:
        data = f.read()
    magic, n_meta, n_img, _mac = cc._HEADER.unpack_from(data, 0)
    meta = json.loads(data[cc._HEADER.size:cc._HEADER.size + n_meta])
    assert magic == cc._MAGIC and data[cc._HEADER.size + n_meta:] == a.image
    assert meta["nvrtc"] == list(cc.nvrtc_version())
    names = [os.path.basename(f[0]) for f in meta["files"]]
    assert "cuda_fp16.h" in names
    if sys.platform.startswith("linux"):
        assert meta["libraries_listed"] and any(n.startswith("libnvrtc") for n in names)


def _rewrite_meta(path: str, change, key: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    _, n_meta, n_img, _mac = cc._HEADER.unpack_from(data, 0)
    meta = json.loads(data[cc._HEADER.size:cc._HEADER.size + n_meta])
    change(meta)
    img = data[cc._HEADER.size + n_meta:]
    m = json.dumps(meta).encode()
    with open(path, "wb") as f:
        mac = cache_paths.entry_mac(os.path.dirname(path), key, m + img)   # re-signed: only the toolchain changed
        f.write(cc._HEADER.pack(cc._MAGIC, len(m), len(img), mac) + m + img)


def test_changed_toolchain_is_rebuilt(cache):
    _usable()
    src = _source(str(cache))
    a = cc.compile_cached(src, "sm_90")
    path = _entry_file(cache, a.key)

    def touch(meta):            # as if cuda_fp16.h (or libnvrtc) had been replaced since
        meta["files"][0][2] += 1
    _rewrite_meta(path, touch, a.key)
    cc._mem_cache.clear()
    stale = cc.stats["stale"]
    b = cc.compile_cached(src, "sm_90")
    assert not b.cached and b.image == a.image and cc.stats["stale"] == stale + 1
    cc._mem_cache.clear()
    assert cc.compile_cached(src, "sm_90").cached        # the rebuilt entry is current again


def test_unlisted_libraries_compare_the_nvrtc_version(cache):
    _usable()
    src = _source(str(cache))
    a = cc.compile_cached(src, "sm_90")
    path = _entry_file(cache, a.key)

    def other_nvrtc(meta):
        meta["libraries_listed"] = False
        meta["nvrtc"] = [1, 0]
    _rewrite_meta(path, other_nvrtc, a.key)
    cc._mem_cache.clear()
    assert not cc.compile_cached(src, "sm_90").cached

    def same_nvrtc(meta):
        meta["libraries_listed"] = False
    _rewrite_meta(path, same_nvrtc, a.key)
    cc._mem_cache.clear()
    assert cc.compile_cached(src, "sm_90").cached


@pytest.mark.parametrize("damage", ["truncate", "magic", "old_format"])
def test_damaged_entry_is_rebuilt(cache, damage):
    _usable()
    src = _source(str(cache))
    a = cc.compile_cached(src, "sm_90")
    path = _entry_file(cache, a.key)
    with open(path, "r+b") as f:
        if damage == "truncate":
            f.truncate(os.path.getsize(path) - 1)
        elif damage == "magic":
            f.write(b"XXXXXXXX")
        else:                   # the v1 layout: <8-byte length><image>
            f.truncate(0)
            f.write(len(a.image).to_bytes(8, "little") + a.image)
    cc._mem_cache.clear()
    b = cc.compile_cached(src, "sm_90")
    assert not b.cached and b.image == a.image
    cc._mem_cache.clear()
    assert cc.compile_cached(src, "sm_90").cached


WARM_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import slangjit
import cuda_stub_driver as drv
drv.install()
dev = slangjit.create_device(type=slangjit.DeviceType.cuda)
before = set(sys.modules)
out = {}
for entry in ("computeMain", "other"):
    k = dev.create_compute_kernel(dev.load_program(sys.argv[1], [entry]))
    out[entry] = {"cache_hit": k.timings["cache_hit"], "nvrtc": k.timings["nvrtc"],
                  "frontend": getattr(k.compiled, "frontend_cache", None), "symbol": k.entry.symbol}
out["new_modules"] = sorted(set(sys.modules) - before)
out["images"] = [len(i) for i in drv.images]
out["host_allocs"] = sum(1 for c in drv.calls if c[0] == "cuMemHostAlloc")
out["functions"] = [c[1][0].decode() for c in drv.calls if c[0] == "cuModuleGetFunction"]
print(json.dumps(out))
"""

TWO_ENTRIES = KERNEL + r"""
[numthreads(32, 1, 1)]
void other(uint3 tid : SV_DispatchThreadID)
{
    outp[tid.x] = 1.0;
}
"""


def _child(shader: str, cache_dir: str) -> dict:
    env = dict(os.environ, SLANGJIT_CACHE_DIR=cache_dir, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", WARM_CHILD, shader, HELPERS], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_warm_start_in_a_new_process(tmp_path):
    """Cold: NVRTC builds both kernels.  Warm (new process, same caches): nothing is compiled, and neither
    NVRTC nor the compiler's emitter / IR modules are imported; pinned staging memory is not allocated
    before a launch needs it."""
    _usable()
    shader = tmp_path / "two.slang"
    shader.write_text(TWO_ENTRIES)
    cache_dir = str(tmp_path / "cache")
    cold = _child(str(shader), cache_dir)
    assert cold["computeMain"]["cache_hit"] == 0.0 and cold["other"]["cache_hit"] == 0.0
    assert "cuda.bindings.nvrtc" in cold["new_modules"]
    warm = _child(str(shader), cache_dir)
    for e in ("computeMain", "other"):
        assert warm[e]["cache_hit"] == 1.0 and warm[e]["nvrtc"] == 0.0 and warm[e]["frontend"] == "disk"
    assert warm["images"] == cold["images"]
    assert warm["functions"] == ["sj_entry_computeMain", "sj_entry_other"]
    banned = [m for m in warm["new_modules"] if m.startswith("cuda.bindings.nvrtc") or m.startswith("cuda.pathfinder")
              or m.startswith("slangjit.compiler.emit") or m.startswith("slangjit.compiler.ir")
              or m.startswith("slangjit.compiler.check")]
    assert banned == []
    assert warm["host_allocs"] == 0
