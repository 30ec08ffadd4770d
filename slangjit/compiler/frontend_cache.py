"""Front-end cache: `compile_program(...)` results, in memory and on disk.

A warm start in a new process then needs no parse / check / emit at all (and, with the
runtime's library cache, no C++ compiler): `load_program` -> first dispatch in a few ms.

* Key = sha256 over: the slangjit version, a hash of the compiler itself (every
  `slangjit/compiler/**/*.py`, `core/*.slang`, `slang/*.slang`, `emit/prelude.h`; computed once per process),
  the target, entry points, include paths (absolute), the working directory (module lookup
  falls back to it), compiler args, type conformances, the pipeline options that differ from
  their defaults (passes/options.py PipelineOptions.changed), and the path and text of each source.
* Value = the pickled `CompiledProgram` + the files the compile read besides its sources
  (imported modules, `#include`d files) with their sha256.  On load every dependency is
  re-hashed; any change (or a vanished file) is a miss and the entry is rebuilt.  The module
  paths the loader probed without finding a file (`active_absent()`), and the `#include` candidates
  the preprocessor probed before the file it used, are recorded too: one that exists now would
  shadow the import / include, so the entry is stale.
* Disk: `<cache dir>/frontend/<key>.pkl` (`slangjit.cache_paths.cache_dir()`, i.e. under
  `$SLANGJIT_CACHE_DIR`).  Entries are written atomically (temp file + os.replace) and
  carry a header (magic, the lengths of the pickled entry and of the generated source, and an
  HMAC-SHA256 of each under the cache folder's per-user secret, cache_paths.entry_mac: the entry's over key +
  pickle, the source's over source_key(key) + source), the entry's checked before anything is unpickled, and then
  only reflection classes are unpickled (_ProgramUnpickler); a truncated, corrupt, forged or
  other-key entry (or a directory in its place) is removed and rewritten.  The source is read (its MAC and sha256
  checked) only when something asks for it (lazy_source.py): a warm process whose library is cached never does.  A read-only cache
  folder is still read; new entries go to the private temp folder (docs/security.md).
* `SLANGJIT_NO_FRONTEND_CACHE=1` disables both the memory and the disk cache.
* Dependencies are collected while compiling: `compile_program`'s `_parse` appends every file it
  parses (imported modules) and passes the list to `parser.parse_module(..., deps=)` which
  appends every `#include`d file.  The list in use is held in a ContextVar (`active_deps()`).
"""
from __future__ import annotations

import atexit
import contextvars
import copy
import copyreg
import hashlib
import io
import os
import pickle
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..atomic_file import write_atomic
from .. import cache_paths
from ..cache_paths import cache_dir, cache_dirs, entry_mac, mac_ok, remove_entry
from ..version import __version__
from .parse import ast as _ast
from .passes.options import DEFAULT_OPTIONS, PipelineOptions
from .source import SourceFile
from .lazy_source import SourceRef, lazy_program, source_key
from .compiler_tree import _compiler_files, _memo_hit, _memo_path, _tree_hash  # noqa: F401  (tests reach them here)

_FORMAT = b"slangjit-frontend-v4"
_MAGIC = b"SJFE\x03\x00\x00\x00"          # syntax-tree entries (below)
_HEADER = struct.Struct("<8sQ32s")         # magic, payload length, HMAC-SHA256(secret, key, payload)
# Program entries: the header, the pickled entry (the program without its source), the source (UTF-8), each MAC'd
# on its own, so a hit reads the small part only (lazy_source.py).
_PROG_MAGIC = b"SJFE\x04\x00\x00\x00"
_PROG_HEADER = struct.Struct("<8sQ32sQ32s")  # magic, pickle length, its MAC, source length, its MAC (source_key)
_MEMORY_LIMIT = 256                         # entries kept in memory

_COMPILER_DIR = os.path.dirname(os.path.abspath(__file__))

_deps_var: contextvars.ContextVar[Optional[list]] = contextvars.ContextVar("slangjit_frontend_deps", default=None)
_absent_var: contextvars.ContextVar[Optional[list]] = contextvars.ContextVar("slangjit_frontend_absent", default=None)
_compiler_hash: Optional[bytes] = None
_memory: dict[str, object] = {}
_lock = threading.Lock()

stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "stores": 0, "corrupt": 0, "stale": 0}


def enabled() -> bool:
    return os.environ.get("SLANGJIT_NO_FRONTEND_CACHE", "").strip() not in ("1", "true", "yes", "on")


def active_deps() -> Optional[list]:
    """The dependency list of the compile in progress on this thread (None outside compile_program)."""
    return _deps_var.get()


def active_absent() -> Optional[list]:
    """The compile in progress's list of module paths probed and not found (None outside compile_program):
    the module loader (frontend.new_checker) appends every candidate it tried before the file it used, and
    an entry is stale once one of them exists (it would shadow the module the entry was compiled with)."""
    return _absent_var.get()


# ------------------------------------------------------------------------------------------ keys


def compiler_hash() -> bytes:
    """sha256 of the compiler's own files (once per process; see _tree_hash)."""
    global _compiler_hash
    h = _compiler_hash
    if h is None:
        h = _compiler_hash = _tree_hash(_COMPILER_DIR, _memo_folder())
    return h


def _memo_folder() -> Optional[Path]:
    try:
        return cache_folder()
    except Exception:  # noqa: BLE001
        return None


def _version() -> str:
    return __version__


def _source_parts(sources) -> Optional[list]:
    """(path, text) of each source; None when a file cannot be read (let the compiler report it)."""
    out = []
    for s in sources:
        if s.text is not None:
            out.append(("text", s.name or "", s.path or "", s.text))
        else:
            try:
                with open(s.path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError, TypeError):
                return None
            out.append(("file", s.name or "", os.path.abspath(s.path), text))
    return out


def _options_key(options: PipelineOptions) -> str:
    """The pipeline options that differ from their defaults ("" when none: the defaults are covered by
    the compiler hash)."""
    if options is DEFAULT_OPTIONS:       # the common case: no walk over the option fields (0.04 ms a program)
        return ""
    changed = options.changed()
    return repr(list(changed)) if changed else ""


def _hasher():
    """(a sha256, put): put(x) feeds x's bytes (str as UTF-8) length-prefixed, so parts cannot run together."""
    h = hashlib.sha256()

    def put(x) -> None:
        b = x if isinstance(x, bytes) else str(x).encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)

    return h, put


def make_key(sources, entry_points, target, include_paths, compiler_args, type_conformances,
             options: PipelineOptions = DEFAULT_OPTIONS) -> Optional[str]:
    parts = _source_parts(sources)
    if parts is None:
        return None
    try:
        tcs = repr([tuple(tc) if isinstance(tc, (list, tuple)) else tc for tc in type_conformances or ()])
    except Exception:  # noqa: BLE001
        return None
    if " at 0x" in tcs:                     # objects without a stable repr: do not cache
        return None
    h, put = _hasher()
    put(_FORMAT)
    put(_version())
    put(compiler_hash())
    put(target)
    put("\0".join(entry_points))
    put("\0".join(os.path.abspath(str(p)) for p in include_paths or ()))
    put(os.getcwd())
    put("\0".join(str(a) for a in compiler_args or ()))
    put(tcs)
    put(_options_key(options))
    put(len(parts))
    for kind, name, path, text in parts:
        put(kind)
        put(name)
        put(path)
        put(text)
    return h.hexdigest()


# ------------------------------------------------------------------------------------------ storage


def cache_folder() -> Path:
    """Where new entries are written (a read-only cache's entries are still read: _entry_paths)."""
    return cache_dir() / "frontend"


def _entry_name(key: str) -> str:
    return key[:48] + ".pkl"


def _entry_path(key: str) -> Path:
    return cache_folder() / _entry_name(key)


def _entry_paths(key: str) -> list:
    """(the cache folder whose secret signs it, the entry's path), in lookup order."""
    try:
        return [(d, d / "frontend" / _entry_name(key)) for d in cache_dirs("cpu").read]
    except OSError:
        return []


def _file_sha(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _deps_valid(entry) -> bool:
    for path, digest in entry["deps"]:
        if _file_sha(path) != digest:
            return False
    for path in entry.get("absent", ()):    # a module lookup that failed then must fail now (it would shadow)
        if os.path.isfile(path):
            return False
    return True


class _ProgramUnpickler(pickle.Unpickler):
    """Only the classes a CompiledProgram is made of.  Entries are unpickled only once their MAC checks
    out (so this is a second fence, not the first): an entry naming anything else is treated as corrupt."""
    _MODULES = ("slangjit.compiler.reflection", "slangjit.compiler.source", "slangjit.compiler.layout",
                "slangjit.compiler.types")
    _BUILTINS = {"set", "frozenset", "complex", "bytearray", "slice", "range"}

    def find_class(self, module: str, name: str):
        if module in self._MODULES:
            obj = super().find_class(module, name)
            if isinstance(obj, type):
                return obj
        elif module == "builtins" and name in self._BUILTINS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"front-end cache entry names {module}.{name}")


def _read_disk(key: str):
    for folder, p in _entry_paths(key):
        entry = _read_entry(folder, p, key)
        if entry is not None:
            return entry
    return None


def _read_entry(folder: Path, p: Path, key: str):
    """The program entry at p for `key` (its "_ref" says where its source lies), or None (see _read_checked)."""
    try:
        with open(p, "rb") as f:
            head = f.read(_PROG_HEADER.size)
            size = os.fstat(f.fileno()).st_size
            magic, n, mac, m, smac = _PROG_HEADER.unpack(head) if len(head) == _PROG_HEADER.size else (b"",) * 5
            payload = f.read(n) if magic == _PROG_MAGIC and size == _PROG_HEADER.size + n + m else b""
    except FileNotFoundError:
        return None
    except OSError:                     # a directory (or anything unreadable) where the entry should be
        magic = payload = b""
    try:
        if magic != _PROG_MAGIC or len(payload) != n:
            raise ValueError("bad header")
        if not mac_ok(folder, key, payload, mac):   # before unpickling: forged, damaged or another key's entry
            raise ValueError("bad mac")
        entry = _ProgramUnpickler(io.BytesIO(payload)).load()
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise ValueError("bad entry")
        sha, head_line = entry["program"].__dict__.get("_source_sha256"), entry["source_head"]
        if not isinstance(sha, bytes) or len(sha) != 32 or not isinstance(head_line, str) or entry["deps"] is None:
            raise ValueError("bad entry")
    except Exception:  # noqa: BLE001  (corrupt / truncated / foreign: drop it, it will be rewritten)
        stats["corrupt"] += 1
        if cache_paths.writable(folder):
            remove_entry(p)
        return None
    entry["_ref"] = SourceRef(folder, p, key, _PROG_HEADER.size + n, m, smac, head_line)
    return entry


def _read_checked(folder: Path, p: Path, key: str, unpickler, fields, counts: dict, check=None):
    """The entry dict stored at p for `key`, or None: the header and the MAC are checked before anything is
    unpickled (with `unpickler`, which admits only its own classes); the dict must name `key` and hold
    `fields`, and `check(entry)` (if given) must not raise.  A corrupt, truncated or foreign entry is counted
    in counts["corrupt"] and removed where the folder is ours to write (it is rewritten after the rebuild)."""
    try:
        with open(p, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError:                     # a directory (or anything unreadable) where the entry should be
        data = b""
    try:
        if len(data) < _HEADER.size:
            raise ValueError("short")
        magic, n, mac = _HEADER.unpack_from(data, 0)
        payload = memoryview(data)[_HEADER.size:]
        if magic != _MAGIC or n != len(payload):
            raise ValueError("bad header")
        if not mac_ok(folder, key, payload, mac):   # before unpickling: forged, damaged or another key's entry
            raise ValueError("bad mac")
        entry = unpickler(io.BytesIO(payload)).load()
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise ValueError("bad entry")
        for name in fields:
            entry[name]                 # noqa: B018  (KeyError -> corrupt)
        if check is not None:
            check(entry)
    except Exception:  # noqa: BLE001  (corrupt / truncated / foreign: drop it, it will be rewritten)
        counts["corrupt"] += 1
        if cache_paths.writable(folder):
            remove_entry(p)
        return None
    return entry


def _write_disk(key: str, entry: dict) -> None:
    folder = cache_dir()
    prog = entry["program"]
    text = prog.source
    prog.source_sha256()                # kept in the program's __dict__: a hit keys its library without the source
    bare = copy.copy(prog)
    bare.__dict__["source"] = ""        # the source goes to its own region (read when asked for: lazy_source.py)
    i = text.find("\n")
    payload = pickle.dumps(dict(entry, program=bare, source_head=text if i < 0 else text[:i]),
                           protocol=pickle.HIGHEST_PROTOCOL)
    source = text.encode("utf-8", "surrogatepass")
    mac = entry_mac(folder, key, payload)
    smac = entry_mac(folder, source_key(key), source)
    if mac is None or smac is None:
        raise OSError("no cache secret")
    path = folder / "frontend" / _entry_name(key)
    if os.path.lexists(path) and not os.path.isfile(path):
        remove_entry(path)              # a directory where the entry goes: it would block os.replace forever
    write_atomic(str(path), (_PROG_HEADER.pack(_PROG_MAGIC, len(payload), mac, len(source), smac), payload, source))


def _remember(key: str, entry: dict) -> None:
    with _lock:
        if len(_memory) >= _MEMORY_LIMIT:
            _memory.pop(next(iter(_memory)))
        _memory[key] = entry


def _hit(entry: dict, seconds: float, where: str):
    ref = entry.get("_ref")
    prog = copy.copy(entry["program"]) if ref is None else lazy_program(entry["program"], ref)
    prog.timings = {"frontend_cache": seconds}
    prog.cached_timings = dict(entry["program"].timings)   # the stages of the compile that filled the entry
    prog.frontend_cache = where
    return prog


def clear_memory_cache() -> None:
    with _lock:
        _memory.clear()


# ------------------------------------------------------------------------------------------ the hook


def _normalize_deps(raw: Sequence[str], key_paths: set) -> Optional[list]:
    out = {}
    for p in raw:
        try:
            ap = os.path.realpath(p)
        except (OSError, TypeError, ValueError):
            return None
        if ap in out or ap in key_paths or ap.startswith(_COMPILER_DIR + os.sep):
            continue                        # sources are in the key; the compiler's files are in compiler_hash
        digest = _file_sha(ap)
        if digest is None:
            return None
        out[ap] = digest
    return sorted(out.items())


# Called once, at the process's first compile that runs the front end (a miss, or the cache off), with the
# target and the pipeline options: the CPU runtime starts its early precompiled prelude there
# (runtime/cpu_compiler.py on_first_front_end; registered by the runtime, which this stage cannot import).
first_miss_hooks: list = []


def _first_miss(target: str, options: PipelineOptions) -> None:
    if first_miss_hooks:
        with _lock:
            hooks = list(first_miss_hooks)
            first_miss_hooks.clear()
        for h in hooks:
            try:
                h(target, options)
            except Exception:  # noqa: BLE001 -- an optimisation only
                pass


def cached_compile(compile_fn: Callable, sources, entry_points, *, target, include_paths, compiler_args,
                   type_conformances, options: PipelineOptions = DEFAULT_OPTIONS):
    """Run `compile_fn(sources, entry_points, target=..., ...)` through the cache."""
    kwargs = dict(target=target, include_paths=include_paths, compiler_args=compiler_args,
                  type_conformances=type_conformances, options=options)
    if not enabled():
        _first_miss(target, options)
        return compile_fn(sources, entry_points, **kwargs)
    t0 = time.perf_counter()
    key = make_key(sources, list(entry_points), target, include_paths, compiler_args, type_conformances, options)
    if key is None:
        _first_miss(target, options)
        return compile_fn(sources, entry_points, **kwargs)
    entry = _memory.get(key)
    if entry is not None and _deps_valid(entry):
        stats["memory_hits"] += 1
        return _hit(entry, time.perf_counter() - t0, "memory")
    entry = _read_disk(key)
    if entry is not None:
        entry["_ref"].recompile = lambda: compile_fn(sources, entry_points, **kwargs)   # if its source is lost
        if _deps_valid(entry):
            stats["disk_hits"] += 1
            _remember(key, entry)
            return _hit(entry, time.perf_counter() - t0, "disk")
        stats["stale"] += 1
    stats["misses"] += 1
    _first_miss(target, options)

    deps: list = []
    absent: list = []
    token = _deps_var.set(deps)
    token_absent = _absent_var.set(absent)
    try:
        prog = compile_fn(sources, entry_points, **kwargs)
    finally:
        _absent_var.reset(token_absent)
        _deps_var.reset(token)
    key_paths = {os.path.realpath(s.path) for s in sources if s.text is None and s.path}
    norm = _normalize_deps(deps, key_paths)
    if norm is None:
        return prog
    source_sha256 = getattr(prog, "source_sha256", None)
    if source_sha256 is not None:
        source_sha256()                 # kept in the program's __dict__, so pickled with it: a hit does not hash
    entry = {"key": key, "program": prog, "deps": norm, "absent": sorted({os.path.abspath(p) for p in absent})}
    try:
        _write_disk(key, entry)
        stats["stores"] += 1
    except Exception:  # noqa: BLE001  (unpicklable / read-only disk: keep the memory entry only)
        pass
    _remember(key, entry)
    return prog


# ------------------------------------------------------------------------------------------ syntax trees
#
# The core library (compiler/core/*.slang) and the shader library (compiler/slang/*.slang, e.g. slangpy.slang,
# ~0.2 s of preprocessing and parsing) are parsed by every new process that reflects a module's declarations
# (functional `Module.load_*`) or compiles one.  Their syntax trees are kept on disk beside the front-end
# entries: `<cache dir>/ast/<key>.pkl`, same header, HMAC and removal rules as the program entries,
# unpickled only once the MAC checks out and then only with the syntax-tree classes (_TreeUnpickler).
# Key = sha256 over the format, version, compiler hash (which covers these files), the file's path and text,
# the include paths and the defines; the files it #included are re-hashed on load and the include candidates
# probed before them must still be absent (as for program entries).  Only files inside the compiler's own
# folder are cached: a user's module is small and parses in a few ms.

_TREE_FORMAT = b"slangjit-ast-v3"
tree_stats = {"disk_hits": 0, "misses": 0, "stores": 0, "corrupt": 0, "stale": 0, "queued": 0}


class _TreeUnpickler(pickle.Unpickler):
    """Only the classes a parsed module is made of (a second fence: the MAC is checked first)."""
    _MODULES = ("slangjit.compiler.parse.ast", "slangjit.compiler.source")
    _BUILTINS = {"set", "frozenset"}
    _OWN = {"LazyBodyFuncDecl"}

    def find_class(self, module: str, name: str):
        if module in self._MODULES or (module == __name__ and name in self._OWN):
            obj = super().find_class(module, name)
            if isinstance(obj, type):
                return obj
        elif module == "builtins" and name in self._BUILTINS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"syntax-tree cache entry names {module}.{name}")


class _BodyUnpickler(_TreeUnpickler):
    """A function body pickled on its own: its source files are the enclosing tree's (`_source_file(i)` in the
    blob is the i-th of them)."""

    def __init__(self, data, files):
        super().__init__(io.BytesIO(data))
        self._files = files

    def find_class(self, module: str, name: str):
        if module == __name__ and name == "_source_file":
            return self._files.__getitem__
        return super().find_class(module, name)


def _source_file(i: int):
    """Stands, in a pickled function body, for the enclosing tree's i-th source file (_BodyUnpickler)."""
    raise pickle.UnpicklingError("a function body's source file outside its tree")


class LazyBodyFuncDecl(_ast.LazyBodyFuncDecl):
    """A function of a cached syntax tree whose body is unpickled when first read (ast.LazyBodyFuncDecl): a
    warm start does not rebuild the thousands of statement nodes of library functions it never compiles."""

    def _sj_load(self):
        d = self.__dict__
        return _BodyUnpickler(d["_sj_blob"], d["_sj_files"]).load()


class _TreePickler(pickle.Pickler):
    """Pickles a syntax tree with every function body that has one as a separate blob (LazyBodyFuncDecl).
    Through dispatch tables (reductions by exact type, looked up by the C pickler), not reducer_override or
    persistent_id: those call back into Python for every object of the ~100k a library tree has."""

    def __init__(self, file, protocol=pickle.HIGHEST_PROTOCOL):
        super().__init__(file, protocol=protocol)
        self.dispatch_table = {_ast.FuncDecl: self._reduce_func, _ast.LazyBodyFuncDecl: self._reduce_func,
                               LazyBodyFuncDecl: self._reduce_func}

    def _reduce_func(self, obj):
        if obj.body is None:        # (a body the parser deferred is parsed here, in the writer thread)
            return (copyreg.__newobj__, (_ast.FuncDecl,), _plain_state(obj))
        files: list = []
        ids: dict = {}

        def file_ref(x):
            i = ids.get(id(x))
            if i is None:
                i = ids[id(x)] = len(files)
                files.append(x)
            return (_source_file, (i,))
        buf = io.BytesIO()
        p = pickle.Pickler(buf, protocol=self._protocol)
        p.dispatch_table = {SourceFile: file_ref}
        p.dump(obj.body)
        state = _plain_state(obj)
        del state["body"]
        state["_sj_blob"] = buf.getvalue()
        state["_sj_files"] = files
        return (LazyBodyFuncDecl, (), state)

    _protocol = pickle.HIGHEST_PROTOCOL


def _plain_state(obj) -> dict:
    """A FuncDecl's fields without a lazy one's loader, blob or loaded body (`body` read through the property)."""
    state = {k: v for k, v in obj.__dict__.items() if not k.startswith("_sj_")}
    state["body"] = obj.body
    return state


def tree_cacheable(path: str) -> bool:
    """Whether the syntax tree of the file at `path` goes through the disk cache (the compiler's own files)."""
    return enabled() and compiler_library(path)


def compiler_library(path: str) -> bool:
    """Whether `path` is one of the compiler's own files (core/, slang/), cache or not."""
    if not path:
        return False
    try:
        return os.path.realpath(path).startswith(_COMPILER_DIR + os.sep)
    except (OSError, TypeError, ValueError):
        return False


def tree_key(text: str, path: str, include_paths, defines: dict) -> str:
    h, put = _hasher()
    put(_TREE_FORMAT)
    put(_version())
    put(compiler_hash())
    put(os.path.abspath(path))
    put(text)
    put("\0".join(os.path.abspath(str(p)) for p in include_paths or ()))
    put(repr(sorted((str(k), str(v)) for k, v in defines.items())))
    return h.hexdigest()


def _tree_name(key: str) -> str:
    return key[:48] + ".pkl"


def _check_tree_entry(entry: dict) -> None:
    if type(entry["module"]).__module__ != "slangjit.compiler.parse.ast":
        raise ValueError("bad module")


def load_tree(key: str):
    """(module, included paths, missed paths) from the disk cache, or None (absent, stale or rejected)."""
    try:
        places = [(d, d / "ast" / _tree_name(key)) for d in cache_dirs("cpu").read]
    except OSError:
        return None
    for folder, p in places:
        entry = _read_checked(folder, p, key, _TreeUnpickler, ("module", "deps", "missed"), tree_stats,
                              _check_tree_entry)
        if entry is None:
            continue
        mod, deps, missed = entry["module"], entry["deps"], entry["missed"]
        if not _deps_valid({"deps": deps, "absent": missed}):
            tree_stats["stale"] += 1
            continue
        tree_stats["disk_hits"] += 1
        return mod, [d for d, _ in deps], list(missed)
    tree_stats["misses"] += 1
    return None


def store_tree(key: str, mod, included: Sequence[str], missed: Sequence[str]) -> None:
    """Write a parsed module to the disk cache now (silently skipped where it cannot be: read-only cache,
    a dependency that cannot be read, a tree too deep to pickle)."""
    deps = _tree_deps(included)
    if deps is None:
        return
    try:
        folder = cache_dir()
    except OSError:
        return
    _write_tree(key, mod, deps, list(missed), folder)


def _tree_deps(included: Sequence[str]) -> Optional[list]:
    deps = []
    for p in included:
        digest = _file_sha(p)
        if digest is None:
            return None
        deps.append((p, digest))
    return deps


def _write_tree(key: str, mod, deps: list, missed: list, folder: Path) -> None:
    try:
        buf = io.BytesIO()
        _TreePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(
            {"key": key, "module": mod, "deps": deps, "missed": missed})
        payload = buf.getvalue()
        mac = entry_mac(folder, key, payload)
        if mac is None:
            return
        path = folder / "ast" / _tree_name(key)
        if os.path.lexists(path) and not os.path.isfile(path):
            remove_entry(path)
        write_atomic(str(path), (_HEADER.pack(_MAGIC, len(payload), mac), payload))
        tree_stats["stores"] += 1
    except Exception:  # noqa: BLE001  (RecursionError, read-only disk: the next process parses again)
        pass


# Writing the trees is ~0.05-0.08 s of pickling on an empty cache folder, in the middle of a cold compile's
# front end.  `defer_tree` queues them instead (the dependencies are hashed at once: what was parsed is what
# is recorded); they are pickled and written by a daemon thread once `write_trees_in_background()` is called
# (by the CPU runtime when a caller starts waiting for a C++ build: the front end is done and the process
# idle), and whatever is still queued at exit is written then (`flush_trees`).  Syntax trees are never
# changed after parsing (the checker builds IR and new declarations, it does not annotate the trees), so the
# pickle written later is the one that would have been written at once (tests/compiler/test_tree_writes.py).

_tree_pending: list = []                # (key, module, deps, missed, folder), oldest first
_tree_writer: Optional[threading.Thread] = None
_tree_lock = threading.Lock()


def defer_tree(key: str, mod, included: Sequence[str], missed: Sequence[str]) -> None:
    """Queue a parsed module for the disk cache (see above); skipped where store_tree would skip it."""
    deps = _tree_deps(included)
    if deps is None:
        return
    try:
        folder = cache_dir()            # the folder in use now, even if $SLANGJIT_CACHE_DIR changes later
    except OSError:
        return
    with _tree_lock:
        _tree_pending.append((key, mod, deps, list(missed), folder))
        tree_stats["queued"] += 1


def pending_trees() -> int:
    """Trees queued or being written."""
    with _tree_lock:
        return len(_tree_pending) + (_tree_writer is not None)


def write_trees_in_background() -> None:
    """Start writing the queued trees in a daemon thread, unless none is queued or a writer runs already."""
    global _tree_writer
    with _tree_lock:
        if not _tree_pending or _tree_writer is not None:
            return
        t = _tree_writer = threading.Thread(target=_drain_trees, name="slangjit-trees", daemon=True)
    t.start()


def _drain_trees() -> None:
    global _tree_writer
    while True:
        with _tree_lock:
            if not _tree_pending:
                if _tree_writer is threading.current_thread():
                    _tree_writer = None
                return
            job = _tree_pending.pop(0)
        _write_tree(*job)


def flush_trees() -> None:
    """Write every queued tree before returning (waits for the background writer); registered at exit."""
    global _tree_writer
    while True:
        with _tree_lock:
            t = _tree_writer
            job = _tree_pending.pop(0) if t is None and _tree_pending else None
        if t is not None:
            t.join()
            with _tree_lock:            # a writer that died without clearing itself (it cannot, but never hang)
                if _tree_writer is t and not t.is_alive():
                    _tree_writer = None
        elif job is not None:
            _write_tree(*job)
        else:
            return


def _trees_after_fork_in_child() -> None:
    global _tree_lock, _tree_writer
    _tree_lock = threading.Lock()       # a lock held by the parent's writer at fork() would never be released
    _tree_writer = None
    _tree_pending.clear()               # the parent writes its own queue


atexit.register(flush_trees)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_trees_after_fork_in_child)
