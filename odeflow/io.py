"""Atomic file output: write to a temporary file beside the target, then rename.

A reader never sees a half-written result, and an interrupted run leaves the
previous file in place.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path, write: Callable, binary: bool = True) -> Path:
    """Call ``write(fh)`` on a temporary file in the target's folder, then rename it.

    Parameters
    ----------
    path : str or Path
        Final location; its folder is created if missing.
    write : callable
        Receives the open temporary file object.
    binary : bool
        Open the temporary file in binary mode.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        mode = {"mode": "wb"} if binary else {"mode": "w", "encoding": "utf-8"}
        with os.fdopen(fd, **mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    return atomic_write(path, lambda fh: fh.write(text), binary=False)


def atomic_write_npz(path, arrays: dict) -> Path:
    """Write ``arrays`` as a compressed ``.npz`` to ``path`` atomically."""
    import numpy as np

    def write(fh):
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        fh.write(buf.getvalue())

    return atomic_write(path, write)
