"""The per-user on-disk cache folders, shared by the front-end cache (compiler/frontend_cache.py), the
CPU library cache (runtime/cpu_compiler.py) and the CUDA image cache (runtime/cuda_compiler.py), and
the integrity check every cache entry passes before it is used (docs/security.md says what is trusted).

Folders: `<base>/cpu` and `<base>/cuda`, where `<base>` is `$SLANGJIT_CACHE_DIR`, else
`$XDG_CACHE_HOME/slangjit`, else `~/.cache/slangjit`.  Read at call time (never at import), so tests
and tools can point it elsewhere.

* Every folder slangjit creates is created 0700.  A folder it uses must be owned by the current user
  (else `CacheSecurityError`, naming the folder, its owner and the fix); one we own that others can
  write to is tightened to 0700.
* A folder we own but cannot write to (a read-only cache) is still read: its entries are served, and
  new entries go to `$TMPDIR/slangjit-<uid>/<kind>` (checked the same way: created 0700, owned by us).
  Where the configured folder cannot be created at all, that temp folder is the cache.
* Each writable folder holds `secret.key` (32 random bytes, 0600, created once).  An entry carries
  `entry_mac(folder, key, payload)` = HMAC-SHA256(secret, key, payload), checked before the payload is
  unpickled or loaded: another user cannot forge an entry, and an entry found under another key's name
  (or damaged in any way) fails the check and is rebuilt.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Optional

try:
    import pwd                      # the owner's name in a refusal message (absent on Windows)
except ImportError:                 # pragma: no cover
    pwd = None


class CacheSecurityError(PermissionError):
    """A cache folder slangjit would use is not safe to use (owned by another user)."""


_SECRET_NAME = "secret.key"
_cache_sets: dict = {}
_secrets: dict = {}
_lock = threading.Lock()


def _uid() -> Optional[int]:
    return os.getuid() if hasattr(os, "getuid") else None


def base_dir() -> Path:
    d = os.environ.get("SLANGJIT_CACHE_DIR")
    if d:
        return Path(d)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "slangjit" if xdg else Path.home() / ".cache" / "slangjit"


def fallback_base() -> Path:
    uid = _uid()
    return Path(tempfile.gettempdir()) / f"slangjit-{uid if uid is not None else 'user'}"


def _owner_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (AttributeError, KeyError):
        return f"uid {uid}"


def check_owned(folder: Path) -> None:
    """Raise CacheSecurityError unless `folder` is a real directory (not a symlink) owned by us; tighten
    one of ours that group or others may write to."""
    uid = _uid()
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise CacheSecurityError(f"slangjit cache folder {folder} is not a directory (a symlink or a file): "
                                 f"refusing to use it; remove it or set SLANGJIT_CACHE_DIR to a folder of yours")
    if uid is None:
        return
    if st.st_uid != uid:
        raise CacheSecurityError(
            f"slangjit cache folder {folder} is owned by {_owner_name(st.st_uid)}, not by you (uid {uid}): "
            f"refusing to use it, since its owner could plant code that slangjit would run; remove it or set "
            f"SLANGJIT_CACHE_DIR to a folder of yours")
    if st.st_mode & 0o022:
        try:
            os.chmod(folder, 0o700)
        except OSError:
            pass


def _make_private(folder: Path) -> None:
    """Create `folder` (and missing parents) 0700; verify it."""
    missing = []
    p = folder
    while not os.path.lexists(p):
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(m, 0o700)             # mkdir's mode is filtered by the umask
    check_owned(folder)


def writable(folder) -> bool:
    """Whether entries may be written (and broken ones removed) in `folder`."""
    return os.access(folder, os.W_OK | os.X_OK)


class CacheDirs:
    """Where one kind of entry ("cpu", "cuda") is looked up (`read`, in order) and stored (`write`)."""

    def __init__(self, read: tuple, write: Optional[Path]):
        self.read = read
        self.write = write

    def __repr__(self) -> str:
        return f"CacheDirs(read={self.read!r}, write={self.write!r})"


def cache_dirs(kind: str = "cpu") -> CacheDirs:
    """The folders of `kind`, created and verified on first use (remembered per environment)."""
    environ = os.environ
    # What the temp folder would be (the fallback), without asking tempfile.gettempdir(): its first call writes
    # and removes a probe file in each candidate folder (0.2 ms of a warm process that needs no fallback).
    # gettempdir() answers from the variables below until it has chosen once; then from tempfile.tempdir.
    env = (kind, environ.get("SLANGJIT_CACHE_DIR"), environ.get("XDG_CACHE_HOME"), environ.get("HOME"),
           tempfile.tempdir, environ.get("TMPDIR"), environ.get("TEMP"), environ.get("TMP"))
    dirs = _cache_sets.get(env)
    if dirs is not None and all(os.path.isdir(p) for p in dirs.read):
        return dirs
    with _lock:
        dirs = _cache_sets[env] = _resolve(kind)
    return dirs


def _resolve(kind: str) -> CacheDirs:
    primary = base_dir() / kind
    read = []
    try:
        _make_private(primary)
    except CacheSecurityError:
        raise
    except OSError:
        primary = None                        # cannot be created (read-only parent, ...): the temp folder
    if primary is not None:
        read.append(primary)
        if writable(primary):
            return CacheDirs(tuple(read), primary)
    top = fallback_base()
    try:
        _make_private(top)                    # `$TMPDIR/slangjit-<uid>` must be ours (another user may pre-create it)
        fallback = top / kind
        _make_private(fallback)
    except CacheSecurityError:
        raise
    except OSError:
        return CacheDirs(tuple(read), None)
    if not writable(fallback):
        return CacheDirs(tuple(read + [fallback]), None)
    return CacheDirs(tuple(read + [fallback]), fallback)


def cache_dir(kind: str = "cpu") -> Path:
    """The folder new entries of `kind` are written to."""
    d = cache_dirs(kind).write
    if d is None:
        raise PermissionError(f"no writable slangjit cache folder: {base_dir() / kind} and "
                              f"{fallback_base() / kind} cannot be written; set SLANGJIT_CACHE_DIR")
    return d


# ------------------------------------------------------------------------------------------ integrity


def secret(folder: Path) -> Optional[bytes]:
    """The folder's secret (created in a writable folder; None where there is none)."""
    folder = Path(folder)
    s = _secrets.get(folder)
    if s is not None:
        return s
    p = folder / _SECRET_NAME
    s = _read_secret(p)
    if s is None and writable(folder):
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            s = _read_secret(p)
        except OSError:
            return None
        else:
            s = os.urandom(32)
            with os.fdopen(fd, "wb") as f:
                f.write(s)
    if s is not None:
        _secrets[folder] = s
    return s


def _read_secret(p: Path) -> Optional[bytes]:
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        uid = _uid()
        if not stat.S_ISREG(st.st_mode) or (uid is not None and st.st_uid != uid) or st.st_mode & 0o077:
            return None                       # not ours or readable by others: trust no entry it signs
        s = f.read(64)
    if len(s) != 32:
        return None
    return s


MAC_SIZE = 32


def entry_mac(folder: Path, key, payload) -> Optional[bytes]:
    """HMAC-SHA256 over (key, payload) with `folder`'s secret; None when the folder has no secret."""
    s = secret(folder)
    if s is None:
        return None
    kb = key.encode() if isinstance(key, str) else bytes(key)
    m = hmac.new(s, len(kb).to_bytes(8, "little") + kb, hashlib.sha256)
    m.update(payload)
    return m.digest()


def mac_ok(folder: Path, key, payload, mac) -> bool:
    want = entry_mac(folder, key, payload)
    return want is not None and hmac.compare_digest(want, bytes(mac))


def remove_entry(path) -> None:
    """Remove a broken cache entry, whatever it is (a file, a symlink, a directory)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass
