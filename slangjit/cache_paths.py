"""The per-user on-disk cache folder, shared by the front-end cache (compiler/frontend_cache.py) and
the CPU library cache (runtime/cpu_compiler.py): `$SLANGJIT_CACHE_DIR/cpu`, else
`$XDG_CACHE_HOME/slangjit/cpu`, else `~/.cache/slangjit/cpu`; a temp folder when none is writable.
Read at call time (never at import), so tests and tools can point it elsewhere."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


_cache_dirs: dict = {}


def cache_dir() -> Path:
    """The on-disk cache folder for CPU libraries (created on demand).  Remembered per environment: a
    warm start asks for it several times, and creating and probing it costs more than the check that it
    still exists."""
    env = (os.environ.get("SLANGJIT_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))
    p = _cache_dirs.get(env)
    if p is not None and os.path.isdir(p):
        return p
    p = _cache_dirs[env] = _make_cache_dir()
    return p


def _make_cache_dir() -> Path:
    d = os.environ.get("SLANGJIT_CACHE_DIR")
    if d:
        base = Path(d)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) / "slangjit" if xdg else Path.home() / ".cache" / "slangjit"
    p = base / "cpu"
    try:
        p.mkdir(parents=True, exist_ok=True)
        if not os.access(p, os.W_OK):
            raise PermissionError(str(p))
    except OSError:
        p = Path(tempfile.gettempdir()) / f"slangjit-{os.getuid() if hasattr(os, 'getuid') else 'user'}" / "cpu"
        p.mkdir(parents=True, exist_ok=True)
    return p
