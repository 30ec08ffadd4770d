"""The front-end cache (slangjit/compiler/frontend_cache.py): memory + disk, validated against dependencies."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler import frontend_cache as fc

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """\
import helper;
#include "consts.h"
RWStructuredBuffer<float> result;
[numthreads(32, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID, uniform uint count)
{
    if (tid.x >= count)
        return;
    result[tid.x] = helperf(float(tid.x)) + OFFSET;
}
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(cache))
    monkeypatch.delenv("SLANGJIT_NO_FRONTEND_CACHE", raising=False)
    src = tmp_path / "src"
    src.mkdir()
    (src / "kernel.slang").write_text(KERNEL)
    (src / "helper.slang").write_text("float helperf(float x) { return x * 2.0; }\n")
    (src / "consts.h").write_text("#define OFFSET 1.0\n")
    fc.clear_memory_cache()
    # the compiler hash is computed once per process; recompute it so that a child process (which hashes the
    # compiler files afresh) agrees with this one even if the compiler's sources were edited since start-up
    monkeypatch.setattr(fc, "_compiler_hash", None)
    yield src, cache
    fc.clear_memory_cache()


def _run(src: Path, n: int = 16):
    device = spy.create_device(type=spy.DeviceType.cpu, include_paths=[str(src)])
    program = device.load_program(str(src / "kernel.slang"), ["computeMain"])
    kernel = device.create_compute_kernel(program)
    buf = device.create_buffer(element_count=n, struct_size=4, usage=spy.BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[n, 1, 1], vars={"result": buf}, count=n)
    return program.compiled, buf.to_numpy().view(np.float32)


def _where(prog) -> str:
    return getattr(prog, "frontend_cache", "compiled")


CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import slangjit as spy
    src = sys.argv[1]
    device = spy.create_device(type=spy.DeviceType.cpu, include_paths=[src])
    program = device.load_program(src + "/kernel.slang", ["computeMain"])
    kernel = device.create_compute_kernel(program)
    buf = device.create_buffer(element_count=8, struct_size=4, usage=spy.BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[8, 1, 1], vars={"result": buf}, count=8)
    print(json.dumps({"where": getattr(program.compiled, "frontend_cache", "compiled"),
                      "values": buf.to_numpy().view(np.float32).tolist(),
                      "timings": sorted(program.compiled.timings)}))
""")


def _child(src: Path, cache: Path) -> dict:
    env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
    p = subprocess.run([sys.executable, "-c", CHILD, str(src)], capture_output=True, text=True, env=env, cwd=str(ROOT),
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_hit_in_new_process(proj):
    src, cache = proj
    first = _child(src, cache)
    assert first["where"] == "compiled"
    assert first["values"] == [2.0 * i + 1.0 for i in range(8)]
    entries = list((cache / "cpu" / "frontend").glob("*.pkl"))
    assert len(entries) == 1
    second = _child(src, cache)
    assert second["where"] == "disk"
    assert second["timings"] == ["frontend_cache"]
    assert second["values"] == first["values"]


def test_memory_then_disk_hit(proj):
    src, cache = proj
    p1, v1 = _run(src)
    assert _where(p1) == "compiled"
    p2, v2 = _run(src)
    assert _where(p2) == "memory"
    fc.clear_memory_cache()
    p3, v3 = _run(src)
    assert _where(p3) == "disk"
    assert p3.source == p1.source
    assert p3.reflection == p1.reflection
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(v1, v3)


def test_miss_after_editing_imported_module(proj):
    src, cache = proj
    _, v1 = _run(src)
    np.testing.assert_array_equal(v1, 2.0 * np.arange(16, dtype=np.float32) + 1.0)
    (src / "helper.slang").write_text("float helperf(float x) { return x * 3.0; }\n")
    p2, v2 = _run(src)                      # memory entry is validated too
    assert _where(p2) == "compiled"
    np.testing.assert_array_equal(v2, 3.0 * np.arange(16, dtype=np.float32) + 1.0)
    # and in a new process (disk entry)
    out = _child(src, cache)
    assert out["where"] == "disk"
    assert out["values"] == [3.0 * i + 1.0 for i in range(8)]


def test_miss_after_editing_included_file(proj):
    src, cache = proj
    _run(src)
    (src / "consts.h").write_text("#define OFFSET 10.0\n")
    out = _child(src, cache)                 # the disk entry of the first compile is stale
    assert out["where"] == "compiled"
    assert out["values"] == [2.0 * i + 10.0 for i in range(8)]
    fc.clear_memory_cache()
    p, v = _run(src)
    assert _where(p) == "disk"               # the child rewrote the entry
    np.testing.assert_array_equal(v, 2.0 * np.arange(16, dtype=np.float32) + 10.0)


def test_miss_after_editing_main_source(proj):
    src, cache = proj
    _run(src)
    (src / "kernel.slang").write_text(KERNEL.replace("+ OFFSET", "- OFFSET"))
    p, v = _run(src)
    assert _where(p) == "compiled"
    np.testing.assert_array_equal(v, 2.0 * np.arange(16, dtype=np.float32) - 1.0)


def test_deleted_dependency_is_a_miss(proj, tmp_path):
    src, cache = proj
    other = tmp_path / "other"
    other.mkdir()
    (other / "helper.slang").write_text("float helperf(float x) { return x * 5.0; }\n")
    device = spy.create_device(type=spy.DeviceType.cpu, include_paths=[str(other)])
    (src / "helper.slang").unlink()
    (src / "kernel2.slang").write_text(KERNEL.replace('#include "consts.h"', "#define OFFSET 0.0"))
    compiled = device.load_program(str(src / "kernel2.slang"), ["computeMain"]).compiled
    assert _where(compiled) == "compiled"
    (other / "helper.slang").unlink()
    fc.clear_memory_cache()
    with pytest.raises(spy.CompileError) as ei:     # never served from the cache once its import is gone
        device.load_program(str(src / "kernel2.slang"), ["computeMain"])
    assert ei.value.code == "E2002"


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "flip", "flip-header", "grow"])
def test_corrupt_entry_is_ignored_and_rewritten(proj, damage):
    src, cache = proj
    _, v1 = _run(src)
    (entry,) = list((cache / "cpu" / "frontend").glob("*.pkl"))
    data = entry.read_bytes()
    magic, n, _, m, _ = fc._PROG_HEADER.unpack_from(data, 0)
    assert magic == fc._PROG_MAGIC and len(data) == fc._PROG_HEADER.size + n + m and m > 10 * n > 0
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"not a pickle at all" * 10)
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "grow":
        entry.write_bytes(data + b"\0")
    else:                           # a bit of the pickled entry, or of the header's source MAC
        b = bytearray(data)
        b[fc._PROG_HEADER.size + n // 2 if damage == "flip" else fc._PROG_HEADER.size - 3] ^= 0xFF
        entry.write_bytes(bytes(b))
        if damage == "flip-header":     # the entry still loads; its source does not verify when read
            _source_damaged(src, entry, v1)
            return
    fc.clear_memory_cache()
    before = fc.stats["corrupt"]
    p2, v2 = _run(src)
    assert _where(p2) == "compiled"
    assert fc.stats["corrupt"] == before + 1
    np.testing.assert_array_equal(v1, v2)
    assert entry.read_bytes() != b"" and len(entry.read_bytes()) >= len(data) - 64   # rewritten
    fc.clear_memory_cache()
    p3, _ = _run(src)
    assert _where(p3) == "disk"


def _source_damaged(src, entry, v1):
    """A hit whose source region does not verify: the hit is served (its library is cached, the source never read);
    reading its source compiles the program again (the genuine source, never the stored bytes) and drops the
    entry, which the next compile writes afresh."""
    fc.clear_memory_cache()
    p2, v2 = _run(src)
    assert _where(p2) == "disk" and "_source_text" not in p2.__dict__
    np.testing.assert_array_equal(v1, v2)
    fc.clear_memory_cache()
    fresh = _run_without_cache(src)
    assert p2.source == fresh and not entry.exists()
    p3, _ = _run(src)
    assert _where(p3) == "compiled" and entry.exists()
    fc.clear_memory_cache()
    p4, v4 = _run(src)
    assert _where(p4) == "disk" and p4.source == fresh
    np.testing.assert_array_equal(v1, v4)


def _run_without_cache(src) -> str:
    old = os.environ.get("SLANGJIT_NO_FRONTEND_CACHE")
    os.environ["SLANGJIT_NO_FRONTEND_CACHE"] = "1"
    try:
        return _run(src)[0].source
    finally:
        if old is None:
            del os.environ["SLANGJIT_NO_FRONTEND_CACHE"]
        else:
            os.environ["SLANGJIT_NO_FRONTEND_CACHE"] = old


@pytest.mark.parametrize("how", ["flip", "replace", "removed"])
def test_hit_reads_its_source_only_when_asked_and_verifies_it(proj, how):
    """The source region of an entry is read when the source is asked for (a build, `.source`), MAC- and
    sha256-checked: a tampered source (same length, valid-looking code) is never used, its library is not
    built from it."""
    src, cache = proj
    p1, v1 = _run(src)
    (entry,) = list((cache / "cpu" / "frontend").glob("*.pkl"))
    data = bytearray(entry.read_bytes())
    _, n, _, m, _ = fc._PROG_HEADER.unpack_from(data, 0)
    start = fc._PROG_HEADER.size + n
    assert bytes(data[start:]).decode() == p1.source
    if how == "flip":
        data[start + m // 2] ^= 0x01
    elif how == "replace":          # another kernel's text where the source was: OFFSET 1.0 -> 9.0
        text = p1.source.replace("1.0f", "9.0f").replace("1.0", "9.0")
        assert text != p1.source and len(text) == len(p1.source)
        data[start:] = text.encode()
    if how == "removed":
        fc.clear_memory_cache()
        p2, _ = _run(src)
        assert _where(p2) == "disk"
        entry.unlink()
        assert p2.source == p1.source
        return
    entry.write_bytes(bytes(data))
    for lib in (cache / "cpu").glob("*.so"):
        lib.unlink()                # the library must be built again: from the genuine source
    __import__("slangjit.runtime.cpu_compiler", fromlist=["x"]).clear_memory_cache()
    fc.clear_memory_cache()
    p2, v2 = _run(src)
    assert _where(p2) == "disk"
    np.testing.assert_array_equal(v1, v2)
    assert p2.source == p1.source and not entry.exists()


def test_lazy_program_copies_and_pickles_as_a_plain_program(proj):
    import copy
    import pickle
    from slangjit.compiler.reflection import CompiledProgram
    src, cache = proj
    p1, _ = _run(src)
    fc.clear_memory_cache()
    p2, _ = _run(src)
    assert _where(p2) == "disk" and type(p2) is not CompiledProgram and isinstance(p2, CompiledProgram)
    c = copy.copy(p2)
    assert "_source_text" not in c.__dict__ and c.source == p1.source
    for other in (pickle.loads(pickle.dumps(p2)), copy.deepcopy(p2)):
        assert type(other) is CompiledProgram and other.source == p1.source
        assert other.source_sha256() == p1.source_sha256() and other.reflection == p1.reflection
    from slangjit.compiler.lazy_source import source_head
    assert source_head(p2) == source_head(p1) == p1.source.split("\n")[0]


def test_disabled_by_env(proj, monkeypatch):
    src, cache = proj
    monkeypatch.setenv("SLANGJIT_NO_FRONTEND_CACHE", "1")
    p1, _ = _run(src)
    p2, _ = _run(src)
    assert _where(p1) == _where(p2) == "compiled"
    assert not (cache / "cpu" / "frontend").exists() or not list((cache / "cpu" / "frontend").glob("*.pkl"))


def test_key_covers_args_entry_points_and_text(proj):
    src, cache = proj
    text = "RWStructuredBuffer<int> r;\n[numthreads(1,1,1)] void a() { r[0] = V; }\n[numthreads(1,1,1)] void b() { r[0] = 2*V; }\n"
    spec = [SourceSpec(text=text, name="m")]
    base = compile_program(spec, ["a"], compiler_args=["-DV=1"])
    assert _where(base) == "compiled"
    assert _where(compile_program(spec, ["a"], compiler_args=["-DV=1"])) == "memory"
    assert _where(compile_program(spec, ["a"], compiler_args=["-DV=2"])) == "compiled"
    assert _where(compile_program(spec, ["b"], compiler_args=["-DV=1"])) == "compiled"
    assert _where(compile_program([SourceSpec(text=text + "\n", name="m")], ["a"], compiler_args=["-DV=1"])) == "compiled"
    keys = {fc.make_key(spec, ["a"], "cpp", [], ["-DV=1"], []), fc.make_key(spec, ["a"], "cuda", [], ["-DV=1"], []),
            fc.make_key(spec, ["a"], "cpp", [str(src)], ["-DV=1"], []),
            fc.make_key(spec, ["a"], "cpp", [], ["-DV=1"], [("IFoo", "Foo", -1)])}
    assert len(keys) == 4


def test_key_covers_pipeline_options(proj):
    """A CUDA program built with a pipeline option changed (benchmarks, tests) is cached apart from the
    default build; back at the defaults the first entry is found again."""
    from slangjit.compiler.passes.options import PipelineOptions
    text = ("[numthreads(64,1,1)] void computeMain(uint3 t : SV_DispatchThreadID, uniform half* g) "
            "{ InterlockedAdd(g[0], half(1.0)); }\n")
    spec = [SourceSpec(text=text, name="m")]
    base = compile_program(spec, ["computeMain"], target="cuda")
    assert _where(base) == "compiled" and "#define SJ_RACC_MMA 1" in base.source
    regs = compile_program(spec, ["computeMain"], target="cuda", options=PipelineOptions().with_cuda(mma_slots=False))
    assert _where(regs) == "compiled" and "#define SJ_RACC_MMA 1" not in regs.source
    again = compile_program(spec, ["computeMain"], target="cuda", options=PipelineOptions().with_cuda(mma_slots=True))
    assert _where(again) == "memory" and again.source == base.source
    fused = compile_program(spec, ["computeMain"], target="cpp", options=PipelineOptions(fuse_entries=True))
    assert _where(fused) == "compiled"
    assert fc.make_key(spec, ["computeMain"], "cpp", [], [], [], PipelineOptions(fuse_entries=True)) != \
        fc.make_key(spec, ["computeMain"], "cpp", [], [], [])


def test_errors_are_not_cached(proj):
    src, cache = proj
    bad = [SourceSpec(text="[numthreads(1,1,1)] void main() { undefined_thing = 1; }\n", name="bad")]
    for _ in range(2):
        with pytest.raises(spy.CompileError):
            compile_program(bad, ["main"])


def test_compiler_hash_is_stable():
    assert fc.compiler_hash() == fc.compiler_hash()
    assert len(fc.compiler_hash()) == 32


def test_compiler_hash_memo_follows_file_changes(tmp_path):
    """The on-disk memo of the compiler hash is used while no compiler file or folder changes, and never after
    an edit, a new file (also in a new sub-folder), a removed or a renamed one."""
    root = tmp_path / "compiler"
    (root / "emit").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "emit" / "p.h").write_text("int y;\n")
    memo = tmp_path / "memo"
    h1 = fc._tree_hash(str(root), memo)
    assert len(h1) == 32 and len(list(memo.glob("compiler-tree-*.memo"))) == 1
    assert fc._tree_hash(str(root), memo) == h1 == fc._tree_hash(str(root), None)
    # A memo is trusted for the same (size, mtime) of every file and folder: a forged digest in it is served ...
    (only,) = memo.glob("compiler-tree-*.memo")
    only.write_bytes(only.read_bytes().replace(h1.hex().encode(), (b"\x01" * 32).hex().encode()))
    assert fc._tree_hash(str(root), memo) == b"\x01" * 32

    def changed(before):
        h = fc._tree_hash(str(root), memo)
        assert h != before and h != b"\x01" * 32 and h == fc._tree_hash(str(root), None)
        assert fc._tree_hash(str(root), memo) == h           # the new memo is used from then on
        return h

    # ... and an edit (same size, new mtime) is hashed afresh ...
    st = os.stat(root / "a.py")
    (root / "a.py").write_text("x = 2\n")
    os.utime(root / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    h2 = changed(h1)
    seen = {h1, h2}

    def folder_changed(folder):     # the folder's mtime moved on (a coarse clock may not have ticked yet)
        st = os.stat(folder)
        os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    # ... as is a new file, one in a new sub-folder, a removed one and a renamed one.
    for step in ("new", "subfolder", "remove", "rename"):
        if step == "new":
            (root / "b.py").write_text("")
            folder_changed(root)
        elif step == "subfolder":
            (root / "emit" / "sub").mkdir()
            folder_changed(root / "emit")
            h = changed(None)
            (root / "emit" / "sub" / "q.h").write_text("int z;\n")
            folder_changed(root / "emit" / "sub")
        elif step == "remove":
            (root / "b.py").unlink()
            folder_changed(root)
        else:
            (root / "a.py").rename(root / "c.py")
            folder_changed(root)
        h = changed(None)
        assert h not in seen, step
        seen.add(h)
    # A memo of another tree, a damaged one and an unusable memo folder only mean walking and hashing again.
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("x = 1\n")
    fc._tree_hash(str(other), memo)
    assert len(list(memo.glob("compiler-tree-*.memo"))) == 2
    (only,) = [m for m in memo.glob("compiler-tree-*.memo") if str(root).encode() in m.read_bytes()]
    for bad in (b"", b"garbage", only.read_bytes()[:-5], only.read_bytes().replace(str(root).encode(), str(other).encode())):
        only.write_bytes(bad)
        assert fc._tree_hash(str(root), memo) == h
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert fc._tree_hash(str(root), blocker / "sub") == fc._tree_hash(str(root), None)


def test_compiler_hash_matches_the_compiler_tree():
    assert fc.compiler_hash() == fc._tree_hash(fc._COMPILER_DIR, None)


SHADOW_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import slangjit as spy
    main, inc = sys.argv[1], sys.argv[2]
    device = spy.create_device(type=spy.DeviceType.cpu, include_paths=[inc])
    program = device.load_program(main + "/kernel.slang", ["computeMain"])
    kernel = device.create_compute_kernel(program)
    buf = device.create_buffer(element_count=4, struct_size=4, usage=spy.BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[4, 1, 1], vars={"result": buf}, count=4)
    print(json.dumps({"where": getattr(program.compiled, "frontend_cache", "compiled"),
                      "values": buf.to_numpy().view(np.float32).tolist()}))
""")


def test_module_that_now_shadows_an_import_is_noticed_by_a_new_process(proj, tmp_path):
    """issue 15 item 5: `import helper;` found on an include path; a helper.slang created beside the main
    file (looked up first, so it shadows the other) makes the entry stale in the next process."""
    _, cache = proj
    main, inc = tmp_path / "main", tmp_path / "inc"
    main.mkdir()
    inc.mkdir()
    (main / "kernel.slang").write_text(KERNEL)
    (inc / "helper.slang").write_text("float helperf(float x) { return x * 2.0; }\n")
    (inc / "consts.h").write_text("#define OFFSET 1.0\n")

    def child():
        env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
        env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
        p = subprocess.run([sys.executable, "-c", SHADOW_CHILD, str(main), str(inc)], capture_output=True,
                           text=True, env=env, cwd=str(ROOT), timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    first = child()
    assert first["values"] == [1.0, 3.0, 5.0, 7.0]
    assert child()["where"] == "disk"                       # a warm start is still served
    (main / "helper.slang").write_text("float helperf(float x) { return x * 10.0; }\n")
    shadowed = child()
    assert shadowed["where"] == "compiled"
    assert shadowed["values"] == [1.0, 11.0, 21.0, 31.0]
    assert child()["where"] == "disk"                       # and the new entry is served again
    (main / "helper.slang").unlink()                         # gone again: the include path's helper is back
    assert child()["values"] == [1.0, 3.0, 5.0, 7.0]


def test_file_that_now_shadows_an_include_is_noticed(proj, tmp_path):
    """issue 15 item 5, for `#include`: "consts.h" found on an include path; a consts.h created beside the
    main file (searched first for a quoted include) makes the entry stale, in a new process and in this one
    (the in-process parse cache too)."""
    _, cache = proj
    main, inc = tmp_path / "main", tmp_path / "inc"
    main.mkdir()
    inc.mkdir()
    (main / "kernel.slang").write_text(KERNEL)
    (inc / "helper.slang").write_text("float helperf(float x) { return x * 2.0; }\n")
    (inc / "consts.h").write_text("#define OFFSET 1.0\n")

    def child():
        env = dict(os.environ, SLANGJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
        env.pop("SLANGJIT_NO_FRONTEND_CACHE", None)
        p = subprocess.run([sys.executable, "-c", SHADOW_CHILD, str(main), str(inc)], capture_output=True,
                           text=True, env=env, cwd=str(ROOT), timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    assert child()["values"] == [1.0, 3.0, 5.0, 7.0]
    assert child()["where"] == "disk"
    (main / "consts.h").write_text("#define OFFSET 100.0\n")
    shadowed = child()
    assert shadowed["where"] == "compiled" and shadowed["values"] == [100.0, 102.0, 104.0, 106.0]

    # The same in one process: compile, create the shadowing header, compile again.
    (main / "consts.h").unlink()
    spec = [SourceSpec(path=str(main / "kernel.slang"))]
    a = compile_program(spec, ["computeMain"], include_paths=[str(inc)])
    (main / "consts.h").write_text("#define OFFSET 7.0\n")
    b = compile_program(spec, ["computeMain"], include_paths=[str(inc)])
    assert "+ 0x1.c000000000000p+2f)" in b.source and a.source != b.source      # 7.0, not 1.0
