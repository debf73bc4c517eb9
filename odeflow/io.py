"""The one writer of odeflow: every file odeflow saves goes through :func:`atomic_write`.

Rules (the same for trajectories, snap results, induction-head results,
data-model TOML, figures and sweep stores):

- A symlink is followed: its *target* is replaced, the link stays a link.
- A target that exists and is not a regular file (directory, device, FIFO,
  socket) is refused with a :class:`~odeflow.errors.ValidationError` naming the
  path; so is a folder that cannot be written.
- The new content goes to a temporary file in the target's folder, named
  ``.NAME.odeflow-tmp-PID-RANDOM``; it is flushed and fsync'ed, renamed over
  the target (atomic on POSIX) and the folder is fsync'ed. A reader sees the
  old file or the new one, never a mix.
- The temporary file is removed on every failure Python sees (an exception,
  Ctrl-C, SIGTERM). Temporary files of an earlier save of the same path by a
  process that no longer runs (e.g. one killed with SIGKILL) are removed at
  the next save.
- The file mode follows the umask (as for ``open(path, "w")``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from odeflow.errors import ValidationError

#: Marker in the names of odeflow's temporary files: ``.NAME.odeflow-tmp-PID-RANDOM``.
TEMP_MARK = ".odeflow-tmp-"


def _describe(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "not a regular file")


def writable_target(path, field: str = "path") -> Path:
    """The file a save of ``path`` replaces: symlinks resolved, checked to be replaceable.

    Parameters
    ----------
    path : str or os.PathLike
        Where the user asked to save.
    field : str
        Name used in the error (e.g. ``"out"`` for a command-line flag).

    Returns
    -------
    Path
        The resolved target (it may not exist yet).

    Raises
    ------
    ValidationError
        If ``path`` is empty, names an existing non-regular file (directory,
        device, FIFO, socket) or a symlink loop.
    """
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not text or "\0" in str(text):
        raise ValidationError(field, f"must be a file path, got {path!r:.80}")
    try:
        target = Path(os.path.realpath(text))
        info = os.stat(target)
    except FileNotFoundError:
        return target
    except (OSError, ValueError) as exc:
        raise ValidationError(field, f"cannot write {str(path)!r}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        shown = str(path) if str(target) == os.path.abspath(text) else f"{path} -> {target}"
        raise ValidationError(field, f"{shown!r} exists and is {_describe(info.st_mode)}; "
                              "odeflow only replaces regular files")
    return target


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (``lstat``: a link counts as existing)."""
    for candidate in (path, *path.parents):
        try:
            os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):  # not there, or under a file
            continue
        return candidate
    return Path(".")  # pragma: no cover (a relative path's last parent is ".")


def writable_folder(path, field: str = "path", what: str = "a folder",
                    hint: str = "") -> Path:
    """Refuse a path where a folder cannot be created or written into.

    Checked before anything is made there:

    - a dangling symlink (no folder can be made where the link is);
    - an existing path that is not a folder (a regular file, a device, ...);
    - a folder above it that is a file, or that cannot be written.

    Parameters
    ----------
    path : str or os.PathLike
        The folder (it may not exist yet).
    field : str
        Name used in the error.
    what : str
        What the folder is, for the error (``"a zarr store"``).
    hint : str
        Added to the error for an existing non-folder.

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    ValidationError
        Naming ``field`` and the path.
    """
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not text or "\0" in str(text):
        raise ValidationError(field, f"must be a path, got {path!r:.80}")
    path = Path(text)
    try:
        existing = _nearest_existing(path)
        info = os.lstat(existing)
        if stat.S_ISLNK(info.st_mode):
            try:
                info = os.stat(existing)
            except FileNotFoundError:
                target = os.readlink(existing)
                raise ValidationError(field, f"{str(existing)!r} is a dangling symbolic link "
                                      f"(to {target!r}); no folder can be made there: "
                                      "remove the link or choose another path") from None
    except OSError as exc:  # a symlink loop, a name too long, ...
        raise ValidationError(field, f"cannot use {text!r}: "
                              f"{exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        kind = "a regular file" if stat.S_ISREG(info.st_mode) else "not a folder"
        if existing == path:
            raise ValidationError(field, f"{text!r} exists and is {kind}; {what} must "
                                  f"be a folder: choose another path{hint}")
        raise ValidationError(field, f"cannot create {text!r}: {str(existing)!r} is {kind}, "
                              "not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValidationError(field, f"cannot write {text!r}: {str(existing)!r} is not "
                              "writable")
    return path


def _pid_of(name: str, prefix: str) -> int | None:
    try:
        return int(name[len(prefix):].split("-", 1)[0])
    except ValueError:
        return None


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, owned by someone else
        return True
    return True


def remove_stale_temps(target) -> list[Path]:
    """Remove temporary files of earlier saves of ``target`` whose process is gone.

    Parameters
    ----------
    target : str or Path
        The resolved file a save replaces (see :func:`writable_target`).

    Returns
    -------
    list of Path
        The files removed. Temporary files of a process that still runs (a
        concurrent save) are left alone.
    """
    target = Path(target)
    prefix = f".{target.name}{TEMP_MARK}"
    removed = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = _pid_of(name, prefix)
        if pid is None or _running(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(target.parent / name)
            removed.append(target.parent / name)
    return removed


class _TerminateAsException:
    """While active (main thread only), SIGTERM raises SystemExit so cleanup runs.

    A handler the program installed itself is left in place.
    """

    def __enter__(self):
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGTERM)
            if current in (signal.SIG_DFL, None):
                self.previous = current
                signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise SystemExit(128 + signum)

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        return False


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems do not sync folders
        pass
    finally:
        os.close(fd)


def _unwritable(field: str, path, exc: OSError) -> ValidationError:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        reason += " (the folder is not writable)"
    return ValidationError(field, f"cannot write {str(path)!r}: {reason}")


def atomic_write(path, write: Callable, binary: bool = True, field: str = "path") -> Path:
    """Call ``write(fh)`` on a temporary file beside the target, then rename it over the target.

    Parameters
    ----------
    path : str or os.PathLike
        Final location; its folder is created if missing. A symlink is followed.
    write : callable
        Receives the open temporary file object.
    binary : bool
        Open the temporary file in binary mode (else UTF-8 text).
    field : str
        Name used in a :class:`ValidationError` (``"path"``; ``"out"`` for the CLI).

    Returns
    -------
    Path
        ``path`` as given (not the resolved symlink target).

    Raises
    ------
    ValidationError
        If the target is not a regular file or cannot be written (the message
        names the path). Anything ``write`` raises propagates unchanged; in
        every case the temporary file is removed and the old file is intact.
    """
    target = writable_target(path, field)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(field, path, exc) from None
    remove_stale_temps(target)
    tmp = target.parent / f".{target.name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    with _TerminateAsException():
        try:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except OSError as exc:
                raise _unwritable(field, path, exc) from None
            mode = {"mode": "wb"} if binary else {"mode": "w", "encoding": "utf-8"}
            with os.fdopen(fd, **mode) as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            writable_target(path, field)  # refuse a target replaced meanwhile by a non-file
            os.replace(tmp, target)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise _unwritable(field, path, exc) from None
            raise
    _fsync_dir(target.parent)
    return Path(path)


def atomic_write_text(path, text: str, field: str = "path") -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8); see :func:`atomic_write`."""
    return atomic_write(path, lambda fh: fh.write(text), binary=False, field=field)


def atomic_write_npz(path, arrays: dict, field: str = "path") -> Path:
    """Write ``arrays`` as a compressed ``.npz`` to ``path`` atomically; see :func:`atomic_write`.

    Object arrays (which numpy would pickle) are refused: odeflow files hold
    numbers and text only, so they load with ``allow_pickle=False``.
    """
    import numpy as np

    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    for name, value in arrays.items():
        if value.dtype.hasobject:
            raise ValidationError(name, "is an object array; odeflow files hold numbers and "
                                  "text only (no pickle)")
    return atomic_write(path, lambda fh: np.savez_compressed(fh, **arrays), field=field)


def readable_file(path, field: str = "path") -> None:
    """Refuse, before opening, a path that is not a regular file.

    Opening a FIFO blocks until a writer comes and a device may never end, so
    readers check first: a directory, FIFO, socket or device (or a symlink to
    one) is a :class:`ValidationError` naming ``field``. A missing or
    unreadable path is left to ``open`` (whose error the reader translates).
    """
    try:
        info = os.stat(path)
    except (OSError, TypeError, ValueError):
        return
    if not stat.S_ISREG(info.st_mode):
        raise ValidationError(field, f"{str(path)!r:.200} is {_describe(info.st_mode)}, "
                              "not a file odeflow can read")


def read_text(path, field: str = "config") -> str:
    """The UTF-8 text of ``path``; an unreadable or undecodable file is a ValidationError.

    Parameters
    ----------
    path : str or os.PathLike
    field : str
        Name used in the error.
    """
    readable_file(path, field)
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise ValidationError(field, f"{str(path)!r} is not UTF-8 text (byte {exc.start}: "
                              f"{exc.reason})") from None
    except (OSError, ValueError, TypeError) as exc:
        raise ValidationError(field, f"cannot read {str(path)!r:.200}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None


def provenance(seeds: dict | None = None) -> dict:
    """Where a saved result came from, for its metadata.

    Returns
    -------
    dict
        ``odeflow``, ``numpy``, ``scipy`` and ``python`` versions, ``created``
        (UTC, ISO 8601), ``command`` (the process's command line) and
        ``seeds`` (the random seeds of the run, if any).
    """
    import datetime
    import platform
    import sys

    import numpy
    import scipy

    from odeflow.version import __version__

    return {"odeflow": __version__, "numpy": numpy.__version__, "scipy": scipy.__version__,
            "python": platform.python_version(),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "command": [str(a) for a in sys.argv], "seeds": dict(seeds or {})}
