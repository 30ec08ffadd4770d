"""What the on-disk caches trust (issue 15 items 1 and 8, docs/security.md): private per-user folders, entries
checked against a per-user secret and their key before they are unpickled or loaded, read-only caches still
served, and broken entries of any kind rebuilt."""
from __future__ import annotations

import hashlib
import os
import pickle
import stat
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import slangjit as spy
from slangjit import cache_paths
from slangjit.compiler import SourceSpec, compile_program
from slangjit.compiler import frontend_cache as fc
from slangjit.runtime import cpu_compiler as cc

KERNEL = """\
RWStructuredBuffer<float> result;
[numthreads(4, 1, 1)]
void computeMain(uint3 tid : SV_DispatchThreadID)
{
    result[tid.x] = float(tid.x) * SCALE;
}
"""

CPP = 'extern "C" int sj_trust_probe(void) { return %d; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    base = tmp_path / "cache"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(base))
    monkeypatch.delenv("SLANGJIT_NO_FRONTEND_CACHE", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    _forget(monkeypatch)
    yield base
    _forget(monkeypatch)


def _forget(monkeypatch=None):
    cache_paths._cache_sets.clear()
    cache_paths._secrets.clear()
    fc.clear_memory_cache()
    cc.clear_memory_cache()
    if monkeypatch is not None:
        monkeypatch.setattr(fc, "_compiler_hash", None)


def _compile(scale: str = "2.0"):
    return compile_program([SourceSpec(text=KERNEL.replace("SCALE", scale), name="trust")], ["computeMain"])


def _where(prog) -> str:
    return getattr(prog, "frontend_cache", "compiled")


def _entry(key_scale: str = "2.0") -> Path:
    (p,) = [p for p in (cache_paths.base_dir() / "cpu" / "frontend").glob("*.pkl")
            if p.name.startswith(_key(key_scale)[:48])]
    return p


def _key(scale: str) -> str:
    return fc.make_key([SourceSpec(text=KERNEL.replace("SCALE", scale), name="trust")], ["computeMain"], "cpp",
                       (), (), ())


def _probe(lib) -> int:
    f = lib.symbol("sj_trust_probe")
    f.restype = __import__("ctypes").c_int
    return f()


# ------------------------------------------------------------------------------------------ folders


def test_folders_are_created_private(cache, monkeypatch):
    monkeypatch.setattr(cc, "_version_cache", {})          # so that the compiler's version is cached on disk
    prog = _compile()
    cc.load_library(CPP % 1)
    for d in (cache / "cpu", cache / "cpu" / "frontend", cache / "cpu" / "compilers"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert stat.S_IMODE(os.stat(cache / "cpu" / "secret.key").st_mode) == 0o600
    assert "void computeMain" in prog.source or "computeMain" in prog.source


def _foreign(path: Path, monkeypatch) -> None:
    """Make `path` look owned by another user (really, where we may chown; else by changing who we are)."""
    if os.getuid() == 0:
        os.chown(path, 65534, 65534)
    else:
        real = os.getuid()
        monkeypatch.setattr(cache_paths, "_uid", lambda: real + 1)


def test_foreign_temp_fallback_is_refused(cache, tmp_path, monkeypatch):
    """The configured folder cannot be created, and another user pre-created `$TMPDIR/slangjit-<uid>` 0777."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(blocker / "cache"))
    planted = cache_paths.fallback_base()
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)
    _foreign(planted, monkeypatch)
    with pytest.raises(cache_paths.CacheSecurityError) as ei:
        cc.load_library(CPP % 2)
    msg = str(ei.value)
    assert str(planted) in msg and "not by you" in msg and "SLANGJIT_CACHE_DIR" in msg


def test_foreign_configured_folder_is_refused(cache, monkeypatch):
    (cache / "cpu").mkdir(parents=True)
    _foreign(cache / "cpu", monkeypatch)
    with pytest.raises(cache_paths.CacheSecurityError, match="owned by"):
        cache_paths.cache_dir()


def test_own_fallback_is_used_private(cache, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SLANGJIT_CACHE_DIR", str(blocker / "cache"))
    lib = cc.load_library(CPP % 3)
    assert _probe(lib) == 3
    top = cache_paths.fallback_base()
    assert Path(lib.path).parent == top / "cpu"
    assert stat.S_IMODE(os.stat(top).st_mode) == 0o700


# ------------------------------------------------------------------------------------------ front-end entries


def test_forged_entry_is_never_unpickled(cache, tmp_path, monkeypatch):
    """An entry with a well-formed header whose digest anyone can compute (as the old CRC-32 was) runs nothing,
    even with the restricted unpickler out of the way: the MAC is checked first."""
    monkeypatch.setattr(fc, "_ProgramUnpickler", pickle.Unpickler)
    first = _compile()
    entry = _entry()
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))
    payload = pickle.dumps({"key": _key("2.0"), "program": Evil(), "deps": []})
    forged_mac = hashlib.sha256(_key("2.0").encode() + payload).digest()
    source = b"int x;"
    entry.write_bytes(fc._PROG_HEADER.pack(fc._PROG_MAGIC, len(payload), forged_mac, len(source),
                                           hashlib.sha256(source).digest()) + payload + source)
    _forget()
    corrupt = fc.stats["corrupt"]
    again = _compile()
    assert not marker.exists()
    assert _where(again) == "compiled" and fc.stats["corrupt"] == corrupt + 1
    assert again.source == first.source
    _forget()
    assert _where(_compile()) == "disk"                  # rewritten, signed


def test_entry_of_another_key_is_rebuilt(cache):
    a = _compile("2.0")
    b = _compile("3.0")
    _entry("3.0").write_bytes(_entry("2.0").read_bytes())   # a valid entry, under another key's name
    _forget()
    b2 = _compile("3.0")
    assert _where(b2) == "compiled" and b2.source == b.source != a.source


def test_restricted_unpickler_refuses_other_globals(cache):
    with pytest.raises(pickle.UnpicklingError):
        fc._ProgramUnpickler(__import__("io").BytesIO(pickle.dumps(os.system))).load()


def test_directory_where_an_entry_should_be_is_rebuilt(cache):
    first = _compile()
    entry = _entry()
    entry.unlink()
    entry.mkdir()
    (entry / "x").write_text("x")
    _forget()
    again = _compile()
    assert _where(again) == "compiled" and again.source == first.source
    assert entry.is_file()
    _forget()
    assert _where(_compile()) == "disk"


# ------------------------------------------------------------------------------------------ libraries


def _lib_path(source: str) -> Path:
    return cache_paths.base_dir() / "cpu" / (cc.library_key(source)[:40] + cc._LIB_EXT)


def _plant(path: Path, data: bytes) -> None:
    """Replace a file (never rewrite it in place: this process has the old library mapped)."""
    tmp = path.with_suffix(".planting")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_library_with_a_recomputable_trailer_is_not_loaded(cache, tmp_path):
    """A planted library whose trailer is a plain sha256 (what anyone can compute) is never dlopen'ed: its
    constructor would create a marker file."""
    good = CPP % 4
    cc.load_library(good)
    marker = tmp_path / "ran"
    evil_src = tmp_path / "evil.cpp"
    evil_src.write_text('#include <cstdio>\n__attribute__((constructor)) static void pwn() { '
                        f'FILE* f = fopen("{marker}", "w"); if (f) fclose(f); }}\n' + CPP % 666)
    evil = tmp_path / "evil.so"
    subprocess.run([*cc.find_compiler(), "-shared", "-fPIC", "-o", str(evil), str(evil_src)], check=True)
    image = evil.read_bytes()
    path = _lib_path(good)
    _plant(path, image + cc._TRAILER.pack(cc._TRAILER_MAGIC, len(image), hashlib.sha256(image).digest()))
    cc.clear_memory_cache()
    lib = cc.load_library(good)
    assert not marker.exists()
    assert not lib.from_disk and _probe(lib) == 4


def test_library_of_another_key_is_rebuilt(cache):
    a, b = CPP % 5, CPP % 6
    cc.load_library(a)
    cc.load_library(b)
    _plant(_lib_path(b), _lib_path(a).read_bytes())
    cc.clear_memory_cache()
    lib = cc.load_library(b)
    assert not lib.from_disk and _probe(lib) == 6


def test_directory_where_a_library_should_be_is_rebuilt(cache):
    src = CPP % 7
    p = _lib_path(src)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.mkdir()
    (p / "junk").write_text("x")
    lib = cc.load_library(src)
    assert _probe(lib) == 7 and p.is_file()
    cc.clear_memory_cache()
    assert cc.load_library(src).from_disk


# ------------------------------------------------------------------------------------------ read-only


def test_read_only_cache_is_served(cache, monkeypatch):
    prog = _compile()
    lib = cc.load_library(CPP % 8)
    primary = cache / "cpu"
    before = sorted((p.name, p.stat().st_mtime_ns) for p in primary.rglob("*"))
    real = cache_paths.writable
    monkeypatch.setattr(cache_paths, "writable", lambda d: real(d) and Path(d) != primary)   # root ignores modes
    modes = {}
    for d in [primary] + [p for p in primary.iterdir() if p.is_dir()]:
        modes[d] = stat.S_IMODE(d.stat().st_mode)
        os.chmod(d, 0o500)
    try:
        _forget(monkeypatch)
        dirs = cache_paths.cache_dirs()
        assert dirs.read[0] == primary and dirs.write == cache_paths.fallback_base() / "cpu"
        again = _compile()
        assert _where(again) == "disk" and again.source == prog.source
        lib2 = cc.load_library(CPP % 8)
        assert lib2.from_disk and Path(lib2.path).parent == primary and _probe(lib2) == 8
        other = cc.load_library(CPP % 9)                 # a miss goes to the (private) temp folder
        assert Path(other.path).parent == dirs.write and _probe(other) == 9
        new = _compile("5.0")
        assert _where(new) == "compiled"
        _forget(monkeypatch)
        assert _where(_compile("5.0")) == "disk"         # served from the temp folder next time
    finally:
        for d, m in modes.items():
            os.chmod(d, m)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in primary.rglob("*")) == before
    assert lib.path == lib2.path
