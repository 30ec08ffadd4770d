"""The on-disk syntax trees of the compiler's Slang library (frontend_cache.load_tree / store_tree): a warm
module load in a new process reflects what a cold one does without parsing the library again; tampered,
foreign and stale entries are rejected and rebuilt."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slangjit.compiler import frontend_cache as fc

ROOT = Path(__file__).resolve().parents[2]

SRC_A = """
struct Pair { float a; float3 b; int c; };
[Differentiable]
float polynomial(float a, float b, float c, float x) { return a * x * x + b * x + c; }
float pick(Pair p, int i) { return i == 0 ? p.a : p.b.y; }
"""
SRC_B = SRC_A + "\nfloat twice(float v, out float w) { w = v; return 2 * v; }\n"

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import slangjit as spy
    from slangjit.compiler import frontend_cache as fc
    src = sys.stdin.read()
    dev = spy.create_device(type=spy.DeviceType.cpu)
    m = spy.Module.load_from_source(dev, "refl", src)
    out = {}
    for name in ("polynomial", "pick", "twice"):
        f = m._refl.functions(name)
        out[name] = [[(p.name, p.direction, p.type.name) for p in fi.params] + [fi.return_type.name] for fi in f]
    t = m._refl.find_type("Pair")
    out["Pair"] = [t.size, t.align, sorted((k, v.name) for k, v in t.fields.items())]
    out["tensor"] = m._refl.find_type("Tensor<float,2>").name
    x = spy.Tensor.from_numpy(dev, np.arange(4, dtype=np.float32))
    out["values"] = m.polynomial(a=2.0, b=8.0, c=-1.0, x=x).to_numpy().tolist()
    fc.flush_trees()                   # the deferred tree writes (otherwise done in the background / at exit)
    out["stats"] = fc.tree_stats
    print(json.dumps(out))
""")


def _child(cache: Path, src: str) -> dict:
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
    r = subprocess.run([sys.executable, "-c", CHILD], input=src, capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "stats"}


def _entries(cache: Path) -> list:
    return sorted((cache / "cpu" / "ast").glob("*.pkl"))


def test_warm_load_reflects_like_cold(tmp_path):
    cache = tmp_path / "cache"
    cold = _child(cache, SRC_A)
    assert cold["stats"]["disk_hits"] == 0 and cold["stats"]["stores"] >= 2     # core library + slangpy.slang
    assert cold["values"] == [2.0 * x * x + 8.0 * x - 1.0 for x in range(4)]
    assert cold["polynomial"] == [[["a", "in", "float"], ["b", "in", "float"], ["c", "in", "float"],
                                   ["x", "in", "float"], "float"]]
    assert cold["Pair"][:2] == [20, 4] and [f for f, _ in cold["Pair"][2]] == ["a", "b", "c"]
    assert len(_entries(cache)) == cold["stats"]["stores"]
    warm = _child(cache, SRC_A)
    assert warm["stats"]["misses"] == 0 and warm["stats"]["stores"] == 0
    assert warm["stats"]["disk_hits"] == cold["stats"]["stores"]
    assert _strip(warm) == _strip(cold)


def test_source_change_is_seen(tmp_path):
    cache = tmp_path / "cache"
    a = _child(cache, SRC_A)
    assert a["twice"] == []
    b = _child(cache, SRC_B)                  # the library trees are reused; the module's change is reflected
    assert b["stats"]["misses"] == 0
    assert b["twice"] == [[["v", "in", "float"], ["w", "out", "float"], "float"]]
    assert _strip(b) == dict(_strip(a), twice=b["twice"])


def test_tampered_entry_is_rejected_and_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    cold = _child(cache, SRC_A)
    entries = _entries(cache)
    biggest = max(entries, key=lambda p: p.stat().st_size)
    data = bytearray(biggest.read_bytes())
    data[len(data) // 2] ^= 0x40               # one flipped bit in the payload: the MAC no longer matches
    biggest.write_bytes(bytes(data))
    other = [p for p in entries if p != biggest][0]
    other.write_bytes(b"junk")                 # truncated
    r = _child(cache, SRC_A)
    assert r["stats"]["corrupt"] == 2 and r["stats"]["stores"] == 2
    assert _strip(r) == _strip(cold)
    again = _child(cache, SRC_A)               # rebuilt entries are good again
    assert again["stats"]["corrupt"] == 0 and again["stats"]["misses"] == 0


def test_entry_under_another_key_or_secret_is_rejected(tmp_path, monkeypatch):
    from slangjit.compiler.parse.parser import parse_module
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "c1"))
    mod = parse_module("float f(float x) { return x; }", "m.slang", [], {})
    fc.store_tree("k1" * 32, mod, [], [])
    hit = fc.load_tree("k1" * 32)
    assert hit is not None and type(hit[0]) is type(mod)
    assert [d.name for d in hit[0].decls] == ["f"]
    # the same bytes under another key's name: the MAC covers the key
    src = tmp_path / "c1" / "cpu" / "ast" / (("k1" * 32)[:48] + ".pkl")
    dst = src.with_name(("k2" * 32)[:48] + ".pkl")
    dst.write_bytes(src.read_bytes())
    before = fc.tree_stats["corrupt"]
    assert fc.load_tree("k2" * 32) is None and fc.tree_stats["corrupt"] == before + 1
    assert not dst.exists()                    # removed, to be rewritten
    # an entry written under another cache folder's secret (another user's, say)
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "c2"))
    fc.store_tree("k3" * 32, mod, [], [])
    theirs = tmp_path / "c2" / "cpu" / "ast" / (("k3" * 32)[:48] + ".pkl")
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "c1"))
    mine = tmp_path / "c1" / "cpu" / "ast" / theirs.name
    mine.write_bytes(theirs.read_bytes())
    assert fc.load_tree("k3" * 32) is None


def test_included_file_change_makes_entry_stale(tmp_path, monkeypatch):
    from slangjit.compiler.parse.parser import parse_module
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(tmp_path / "c"))
    inc = tmp_path / "inc.h"
    inc.write_text("float g(float x) { return x; }\n")
    files: list = []
    mod = parse_module('#include "inc.h"\nfloat f(float x) { return g(x); }', str(tmp_path / "m.slang"),
                       [str(tmp_path)], {}, deps=files, absent=[])
    assert os.path.realpath(str(inc)) in {os.path.realpath(p) for p in files}
    fc.store_tree("k4" * 32, mod, files, [])
    assert fc.load_tree("k4" * 32) is not None
    inc.write_text("float g(float x) { return 2 * x; }\n")
    stale = fc.tree_stats["stale"]
    assert fc.load_tree("k4" * 32) is None and fc.tree_stats["stale"] == stale + 1


def test_user_modules_are_not_cached(tmp_path):
    assert fc.tree_cacheable(os.path.join(os.path.dirname(fc.__file__), "core", "core.slang"))
    assert not fc.tree_cacheable(str(tmp_path / "m.slang"))
    assert not fc.tree_cacheable("")


COMPILE_CHILD = textwrap.dedent("""
    import hashlib, json, sys
    from slangjit.compiler import SourceSpec, compile_program, frontend_cache as fc
    from slangjit.functional.module import SHADER_PATH
    src = sys.stdin.read()
    out = {}
    for target in ("cpp", "cuda"):
        p = compile_program([SourceSpec(text=src, name="k")], ["main"], target=target, include_paths=[SHADER_PATH])
        out[target] = hashlib.sha256(p.source.encode()).hexdigest()
    fc.flush_trees()                   # the deferred tree writes (otherwise done in the background / at exit)
    out["stats"] = fc.tree_stats
    print(json.dumps(out))
""")

KERNEL = """
import slangpy;
RWStructuredBuffer<float> buf;
[Differentiable] float f(float x) { return sin(x) * exp(x) + pow(x, 2.5); }
[shader("compute")] [numthreads(4, 1, 1)]
void main(uint3 tid: SV_DispatchThreadID) {
    var d = diffPair(buf[tid.x]);
    bwd_diff(f)(d, 1.0);
    buf[tid.x] = d.d + f(buf[tid.x]);
}
"""


def test_compile_from_cached_trees_is_identical(tmp_path):
    """Library function bodies unpickled lazily compile to the very same C++ and CUDA source as parsed ones."""
    import shutil
    cache = tmp_path / "cache"
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)

    def run() -> dict:
        r = subprocess.run([sys.executable, "-c", COMPILE_CHILD], input=KERNEL, capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    cold = run()
    assert cold["stats"]["disk_hits"] == 0 and cold["stats"]["stores"] >= 2
    shutil.rmtree(cache / "cpu" / "frontend")     # program entries gone: the next process compiles again
    warm = run()
    assert warm["stats"]["disk_hits"] >= 2 and warm["stats"]["misses"] == 0
    assert (warm["cpp"], warm["cuda"]) == (cold["cpp"], cold["cuda"])
