"""The compiler's own files and their hash (frontend_cache.compiler_hash, part of every front-end cache key).

The hash covers every `slangjit/compiler/**/*.py`, `core/*.slang`, `slang/*.slang` and `emit/**/*.h`.  Hashing
~1 MB of sources in every new process would be most of a warm start, so the digest is memoized in the cache folder
with the (size, mtime) of every file and folder of the tree (the test Python uses to trust a .pyc): a warm process
stats ~120 paths and reads one small file.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional

from ..atomic_file import write_atomic


def _compiler_files(root: str, dirs: Optional[list] = None) -> list:
    """(relative path, absolute path, stat stamp) of the files that make up the compiler under `root`,
    sorted; the stamp is "size:mtime_ns" ("?" for a file that cannot be stat'ed).  `dirs`, when given,
    receives (absolute path, stamp) of every folder walked (`root` first)."""
    files = []
    stack = [("", root)]
    while stack:
        rel, folder = stack.pop()
        if dirs is not None:
            dirs.append((folder, _stamp(folder)))
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            n = e.name
            if n.endswith(".py") or (rel in ("core", "slang") and n.endswith(".slang")) or \
                    (rel.startswith("emit") and n.endswith(".h")):
                try:
                    st = e.stat()
                    stamp = f"{st.st_size}:{st.st_mtime_ns}"
                except OSError:
                    stamp = "?"
                files.append((rel + "/" + n if rel else n, e.path, stamp))
            elif n != "__pycache__" and not n.startswith(".") and e.is_dir():
                stack.append((rel + "/" + n if rel else n, e.path))
    files.sort()
    return files


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "?"
    return f"{st.st_size}:{st.st_mtime_ns}"


_TREE_MEMO = "slangjit-compiler-tree-v1"


def _memo_path(root: str, memo_dir: Path) -> Path:
    return memo_dir / f"compiler-tree-{hashlib.sha256(root.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.memo"


def _memo_hit(root: str, memo: Path) -> Optional[bytes]:
    """The digest the memo holds if every folder and file it lists has the (size, mtime) it lists, else None.
    A file added to, removed from or renamed in a folder changes the folder's mtime (POSIX), an edit the
    file's: so neither the folders need listing nor the files hashing while nothing changed (~0.3 ms of a
    warm process, against the walk's 0.5)."""
    try:
        with open(memo, "rb") as f:
            parts = f.read().decode("utf-8", "surrogateescape").split("\0")
    except OSError:
        return None
    if len(parts) < 4 or parts[0] != _TREE_MEMO or parts[1] != root or len(parts) % 2:
        return None
    try:
        digest = bytes.fromhex(parts[2])
    except ValueError:
        return None
    if len(digest) != 32:
        return None
    stat = os.stat
    try:
        for i in range(4, len(parts), 2):
            st = stat(parts[i])
            if parts[i + 1] != f"{st.st_size}:{st.st_mtime_ns}":
                return None
    except OSError:
        return None
    return digest


def _tree_hash(root: str, memo_dir: Optional[Path]) -> bytes:
    """sha256 over the contents of the compiler files under `root`.

    Reading and hashing ~1 MB of sources is most of a warm start's front-end time, so the digest is
    memoized on disk (`compiler-tree-<root>.memo` in `memo_dir`) with the (size, mtime) of every file and
    folder of the tree: the same test Python uses to trust a .pyc.  Any edit, new file or removal changes
    one of them, and the tree is walked and hashed afresh."""
    memo = _memo_path(root, memo_dir) if memo_dir is not None else None
    if memo is not None:
        digest = _memo_hit(root, memo)
        if digest is not None:
            return digest
    dirs: list = []
    files = _compiler_files(root, dirs)     # stat'ed before reading: an edit during the hashing shows next time
    d = hashlib.sha256()
    for rel, p, _ in files:
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            data = b"<unreadable>"
        b = rel.encode()
        d.update(len(b).to_bytes(8, "little") + b)
        d.update(len(data).to_bytes(8, "little") + data)
    digest = d.digest()
    if memo is not None and "\0" not in root:
        items = [_TREE_MEMO, root, digest.hex(), str(len(dirs))]
        for path, stamp in dirs + [(p, st) for _, p, st in files]:
            items += (path, stamp)
        try:
            write_atomic(str(memo), ("\0".join(items).encode("utf-8", "surrogateescape"),))
        except (OSError, UnicodeEncodeError):   # a read-only cache only costs the walk and hashing next time
            pass
    return digest
