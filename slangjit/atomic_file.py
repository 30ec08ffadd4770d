"""Writing a cache file so that readers never see half of it: a temp file in the same folder,
then os.replace (atomic on POSIX and Windows); the temp file is removed if writing fails."""
from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, chunks) -> None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)   # cache folders are private (docs/security.md)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
