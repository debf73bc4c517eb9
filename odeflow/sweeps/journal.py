"""The journal of a sweep store: finished points appended to one file, folded into zarr later.

Writing a finished point straight into the zarr arrays costs a chunk file per
output, more than many a point's solve (``docs/benchmarks.md``, "Sweeps"). The
journal costs one ``write`` call instead: each point is a
record appended to ``STORE/odeflow_journal/points``, and the records are
*folded* into the zarr arrays in bulk (every
:data:`odeflow.sweeps.store.FOLD_SECONDS` and when the sweep ends), after which
the file is removed. ``odeflow_journal`` is an empty zarr group (so zarr and
``xarray.open_zarr`` read past it without a warning) that exists only while a
sweep runs or after one was killed (the running sweep locks the store folder
itself: :func:`odeflow.sweeps.store.store_lock`).

A record is ``MAGIC | header length | payload length | crc32 | header | payload``:
the header is JSON (the point's index, each array's name, dtype and shape, and
the string outputs), the payload the arrays' raw bytes, so every float is
stored bit for bit. A record is whole once its ``write`` returned; the kernel
keeps it when the process is killed (SIGKILL). A record cut short (a write
interrupted by a crash) or damaged later fails its length or checksum and is
skipped: reading resynchronises at the next record that starts with
:data:`MAGIC` and passes its checksum (:func:`decode`), so one bad byte costs
one point, and the reader is told how many records and bytes it skipped. A
record whose checksum is valid but that is not what odeflow writes is refused.
:func:`odeflow.sweeps.store.open_store` and a resumed sweep replay the records
over the zarr arrays; replaying twice gives the same arrays (a record holds
values, not increments).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from odeflow.errors import ValidationError

#: The zarr group (a folder of the store) holding the journal.
JOURNAL_GROUP = "odeflow_journal"

#: The journal's file name in :data:`JOURNAL_GROUP`.
JOURNAL_NAME = "points"

#: Start of every record (format version 1).
MAGIC = b"OFJ1"

_PREFIX = struct.Struct("<4sIII")  # magic, header bytes, payload bytes, crc32(header+payload)


def encode(index: tuple, outputs: dict) -> bytes:
    """One record: the point ``index`` and its ``outputs`` (arrays, numbers and strings)."""
    arrays, strings, payload = [], {}, []
    for name, value in outputs.items():
        if isinstance(value, str):
            strings[name] = value
            continue
        value = np.asarray(value)  # (not ascontiguousarray: it makes a 0-d value 1-d)
        if value.dtype.kind not in "biuf":
            raise TypeError(f"journal: output {name!r} has dtype {value.dtype}, "
                            "not a number or a str")
        arrays.append([name, value.dtype.str, list(value.shape)])
        payload.append(value.tobytes(order="C"))
    header = json.dumps({"index": [int(i) for i in index], "arrays": arrays,
                         "strings": strings}, separators=(",", ":")).encode()
    body = header + b"".join(payload)
    return _PREFIX.pack(MAGIC, len(header), len(body) - len(header),
                        zlib.crc32(body)) + body


class Records(list):
    """The records of a journal, oldest first, and what was skipped reading it.

    Attributes
    ----------
    skipped_records : int
        Damaged stretches skipped (each a record, or records, that failed
        their length or checksum; a torn last record is one).
    skipped_bytes : int
        Bytes in those stretches.
    """

    skipped_records = 0
    skipped_bytes = 0


#: Data types a record's arrays may have (what :func:`encode` writes for the outputs).
RECORD_DTYPES = ("<f8", "<i8")


def decode(data: bytes) -> Records:
    """The whole records in ``data``: a :class:`Records` list of ``(index, outputs)``.

    A stretch that is not a whole record with a valid checksum (a record cut
    short by a crash, a damaged byte) is skipped: reading goes on at the next
    :data:`MAGIC` that starts a valid record, and the stretch is counted in
    ``skipped_records`` and ``skipped_bytes``.

    Raises
    ------
    ValidationError
        Naming ``journal``: a record whose checksum is valid but whose header
        is not what :func:`encode` writes (not JSON, fields of another kind,
        a payload of another size).
    """
    records, offset, skipping = Records(), 0, False
    while offset < len(data):
        whole = offset + _PREFIX.size <= len(data)
        if whole:
            magic, head, size, crc = _PREFIX.unpack_from(data, offset)
            start = offset + _PREFIX.size
            end = start + head + size
            whole = magic == MAGIC and end <= len(data) \
                and zlib.crc32(data[start:end]) == crc
        if not whole:
            following = data.find(MAGIC, offset + 1)
            following = len(data) if following < 0 else following
            records.skipped_records += not skipping
            records.skipped_bytes += following - offset
            offset, skipping = following, True
            continue
        skipping = False
        records.append(_record(data, start, head, size, len(records)))
        offset = end
    return records


def _record(data: bytes, start: int, head: int, size: int, number: int) -> tuple:
    """``(index, outputs)`` of the checksum-valid record whose header starts at ``start``."""
    where = f"record {number + 1} (byte {start - _PREFIX.size})"
    try:
        header = json.loads(data[start:start + head])
        index = tuple(header["index"])
        arrays, strings = header["arrays"], header["strings"]
        ok = (set(header) == {"index", "arrays", "strings"} and isinstance(arrays, list)
              and isinstance(strings, dict)
              and all(type(i) is int for i in index)
              and all(isinstance(v, str) for v in strings.values()))
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        raise ValidationError("journal", f"{where}: its header is not what odeflow writes "
                              "(JSON with index, arrays and strings)")
    outputs, at = {}, start + head
    for item in arrays:
        try:
            name, dtype, shape = item
            ok = isinstance(name, str) and dtype in RECORD_DTYPES and isinstance(shape, list) \
                and all(type(n) is int and 0 <= n < 1 << 31 for n in shape)
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise ValidationError("journal", f"{where}: array entry {item!r:.80} is not "
                                  "[name, '<f8' or '<i8', shape]")
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if at + count * dtype.itemsize > start + head + size:
            raise ValidationError("journal", f"{where}: its arrays need more bytes than "
                                  "its payload holds")
        value = np.frombuffer(data, dtype=dtype, count=count, offset=at)
        outputs[name] = value.reshape(shape).copy()
        at += count * dtype.itemsize
    if at != start + head + size:
        raise ValidationError("journal", f"{where}: its payload has bytes its header does "
                              "not describe")
    outputs.update(strings)
    return index, outputs


class Journal:
    """The append-only journal of the store folder ``store``.

    Parameters
    ----------
    store : str or Path
        The zarr store's folder; the journal is
        ``store / JOURNAL_GROUP / JOURNAL_NAME`` (:func:`journal_folder` makes the group).
    """

    def __init__(self, store):
        self.path = Path(store) / JOURNAL_GROUP / JOURNAL_NAME
        self._fd = None

    def append(self, index: tuple, outputs: dict) -> None:
        """Add one finished point (a single ``write`` of one record)."""
        record = memoryview(encode(index, outputs))
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        while record:  # a regular file takes it whole unless the disk is full
            record = record[os.write(self._fd, record):]

    def remove(self) -> None:
        """Close and delete the journal (its records are in the zarr arrays now)."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_journal(store) -> Records:
    """The whole records of the journal in the store folder ``store`` (none if no journal).

    Raises
    ------
    ValidationError
        Naming ``store`` and the path: ``odeflow_journal`` that is not a
        folder, a journal that is not a regular file or cannot be read, a
        checksum-valid record that is not what odeflow writes (:func:`decode`).
    """
    check_journal_paths(store)
    path = Path(store) / JOURNAL_GROUP / JOURNAL_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Records()
    except OSError as exc:
        raise ValidationError("store", f"{str(store)!r}: cannot read its journal "
                              f"{JOURNAL_GROUP}/{JOURNAL_NAME}: {exc.strerror or exc}") from None
    try:
        return decode(data)
    except ValidationError as exc:
        raise ValidationError("store", f"{str(store)!r}: its journal {JOURNAL_GROUP}/"
                              f"{JOURNAL_NAME} is damaged: {exc.reason}") from None


def check_journal_paths(store) -> None:
    """Refuse a store whose journal group or journal is not what odeflow makes
    (``odeflow_journal`` a file, ``points`` a folder, a link to elsewhere)."""
    folder = Path(store) / JOURNAL_GROUP
    checks = ((folder, "folder", os.path.isdir), (folder / JOURNAL_NAME, "regular file",
                                                  os.path.isfile))
    for path, kind, test in checks:
        if not os.path.lexists(path):
            return
        if os.path.islink(path) or not test(path):
            raise ValidationError("store", f"{str(store)!r} is damaged: "
                                  f"{path.relative_to(store)} is not a {kind}")


def journal_folder(store) -> Path:
    """Make the journal's group in the zarr store folder ``store`` (if missing); its path."""
    import zarr

    folder = Path(store) / JOURNAL_GROUP
    if not (folder / "zarr.json").exists():
        group = zarr.open_group(store, mode="r+").require_group(JOURNAL_GROUP)
        group.attrs["description"] = ("odeflow: finished points not yet written into the "
                                      f"arrays ({JOURNAL_NAME}); not data")
    return folder


def remove_journal_folder(store) -> None:
    """Remove the journal's group from ``store`` if it holds no journal.

    Only the group's metadata and a lock file (of odeflow before the store
    folder itself was locked) may be in it; anything else (a journal, a file of
    unknown origin) keeps it.
    """
    folder = Path(store) / JOURNAL_GROUP
    try:
        names = set(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):  # none, or damage the readers report
        return
    if not names <= {"zarr.json", "lock"}:
        return
    for name in names:
        try:
            os.unlink(folder / name)
        except FileNotFoundError:
            pass
    try:
        os.rmdir(folder)
    except OSError:  # something appeared meanwhile: leave it
        pass
