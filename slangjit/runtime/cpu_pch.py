"""The precompiled prefix of generated C++ (GCC), and the compiler processes of runtime/cpu_compiler.py.

Every generated translation unit starts with the prelude and the target's fixed parts, up to the line
PCH_END (emit/program.py): text that depends on the target's options (lanes, privatised adds, vector math),
never on the program.  With GCC, that prefix is precompiled (a .gch, ~20 MB) once per prefix, compiler and
flags into `<cache>/cpu/pch/`, and a build compiles only the rest with `-include` (the prelude's parsing is
~0.1 s of every build).  The header is made the second time a prefix is built in a cache folder (a one-off
temporary cache never pays for it), by the build that needs it.  A .gch carries an HMAC (`<name>.mac`, the
folder's secret, as every entry) checked once per process before the compiler may read it; a header the
compiler rejects is deleted and the build runs on the whole source.

CpuOptions.early_pch makes the headers of the two common prefixes at once instead, while a process's first front end
runs (runtime/cpu_compiler.py precompile_prefix); a build that comes while one is being made waits a little
for it (_EARLY_WAIT), and at exit a header still being made is abandoned (its compiler stopped, its temporary
files removed: stop_early).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path

from ..atomic_file import write_atomic
from ..cache_paths import entry_mac, mac_ok, remove_entry

_lock = threading.Lock()
_tls = threading.local()                # .started: a background build's Event (_spawned); .early: making an early header
_early_procs: set = set()               # early headers' compiler processes running now


def _run_process(argv: list) -> "subprocess.CompletedProcess":
    """subprocess.run(argv, capture_output=True, text=True), telling a waiting load_library_async once the
    process runs (_spawned)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _spawned()
    early = getattr(_tls, "early", False)
    if early:                           # an early header: stopped at exit (_stop_early) rather than waited for
        with _lock:
            _early_procs.add(p)
    try:
        out, err = p.communicate()
    finally:
        if early:
            with _lock:
                _early_procs.discard(p)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


_tls = threading.local()


def _spawned() -> None:
    """A background build's compiler process is running: the thread that started the build may go on
    (load_library_async waits for this, so the compiler never waits for the GIL behind the next front end)."""
    ev = getattr(_tls, "started", None)
    if ev is not None:
        ev.set()



PCH_END = "// slangjit: end of the precompiled prefix"      # emit/program.py PCH_END
_PCH_VERSION = b"slangjit-pch-v1"
_pch_ok: dict = {}                      # .gch path -> True once its MAC was checked in this process
_pch_locks: dict = {}


def precompiled_prefix(source: str, cmd: tuple[str, ...], version: str, flags: tuple[str, ...], d: Path,
                       early: bool = False):
    """(the `-include` argument naming the prefix's .gch, the source after the prefix), or None: no prefix
    marker, no header yet (made here the second time a prefix is built, or at once when `early`), or it
    cannot be made.  A build that comes while the header is being made waits for it (the prefix's lock).
    `cmd` is GCC (the caller checks), `version` its `--version` output."""
    i = source.find("\n" + PCH_END + "\n")
    if i < 0 or os.environ.get("SLANGJIT_NO_PCH"):
        return None
    prefix, rest = source[: i + 1], source[i + 1:]
    h = hashlib.sha256()
    for part in (_PCH_VERSION, prefix.encode("utf-8"), "\0".join(cmd).encode(), version.encode(),
                 "\0".join(flags).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    pkey = h.hexdigest()
    folder = d / "pch"
    header = folder / (pkey[:40] + ".h")            # the compiler reads header + ".gch"; the header never exists
    gch = folder / (pkey[:40] + ".h.gch")
    with _lock:
        lock = _pch_locks.setdefault(pkey, threading.Lock())
        making_early = pkey in _early_making
    if early:
        with _lock:
            _early_making.add(pkey)
    # an early header under way: wait a little for it, else build without
    if not lock.acquire(timeout=_EARLY_WAIT if making_early and not early else -1):
        return None
    try:
        return _precompiled_prefix_locked(prefix, rest, cmd, flags, d, early, folder, header, gch, pkey)
    finally:
        lock.release()
        if early:
            with _lock:
                _early_making.discard(pkey)


_early_making: set = set()              # keys of the early headers being made
_EARLY_WAIT = 0.05                      # seconds a build waits for an early header of its prefix (a unit's full
                                        # build costs ~0.04-0.06 s more than one with the header)


def _precompiled_prefix_locked(prefix, rest, cmd, flags, d, early, folder, header, gch, pkey):
    """_precompiled_prefix with the prefix's lock held."""
    body = "// (prelude: the precompiled header)\n" + rest
    if _pch_ok.get(str(gch)) and os.path.isfile(gch):
        return str(header), body
    if os.path.lexists(gch):
        if _pch_verify(gch, d, pkey):
            _pch_ok[str(gch)] = True
            return str(header), body
        drop_pch(str(header))
    seen = folder / (pkey[:40] + ".seen")
    if not early and not os.path.exists(seen):
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            seen.touch()
        except OSError:
            pass
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if not _make_pch(prefix, cmd, flags, d, folder, gch, pkey):
        return None
    _pch_ok[str(gch)] = True
    return str(header), body


def _pch_verify(gch: Path, d: Path, pkey: str) -> bool:
    try:
        with open(gch, "rb") as f:
            data = f.read()
        with open(str(gch)[: -len(".h.gch")] + ".mac", "rb") as f:
            mac = f.read()
    except OSError:
        return False
    return mac_ok(d, pkey, data, mac)


def _make_pch(prefix: str, cmd, flags, d: Path, folder: Path, gch: Path, pkey: str) -> bool:
    fd, h_tmp = tempfile.mkstemp(dir=str(folder), prefix=".pch-", suffix=".h")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(prefix)
    g_tmp = h_tmp + ".gch"
    try:
        try:
            p = _run_process([*cmd, *flags, "-x", "c++-header", "-o", g_tmp, h_tmp])
        except OSError:
            return False
        if p.returncode != 0 or not os.path.isfile(g_tmp):
            return False
        with open(g_tmp, "rb") as f:
            mac = entry_mac(d, pkey, f.read())
        if mac is None:
            return False
        write_atomic(str(folder / (pkey[:40] + ".mac")), (mac,))
        os.replace(g_tmp, gch)
        return True
    finally:
        _unlink(h_tmp)
        _unlink(g_tmp)


def drop_pch(header: str) -> None:
    _pch_ok.pop(header + ".gch", None)
    for p in (header + ".gch", header[: -len(".h")] + ".mac"):
        if os.path.lexists(p):
            remove_entry(p)



def _unlink(p) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def stop_early() -> None:
    """At exit: stop the compilers of early headers still being made (their threads then remove the files)."""
    with _lock:
        procs = list(_early_procs)
    for p in procs:
        try:
            p.kill()
        except OSError:
            pass


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    _early_procs.clear()
    _early_making.clear()
    _pch_locks.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
