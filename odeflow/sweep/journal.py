"""The journal of a sweep store: finished points appended to one file, folded into zarr later.

Writing a finished point straight into the zarr arrays costs a chunk file per
output (twelve, 13-17 ms a point on the project's machine), more than many a
point's solve. The journal costs one ``write`` call instead: each point is a
record appended to ``STORE/odeflow_journal/points``, and the records are
*folded* into the zarr arrays in bulk (every
:data:`odeflow.sweep.store.FOLD_SECONDS` and when the sweep ends), after which
the file is removed. ``odeflow_journal`` is an empty zarr group (so zarr and
``xarray.open_zarr`` read past it without a warning) that exists only while a
sweep runs or after one was killed (the running sweep locks the store folder
itself: :func:`odeflow.sweep.store.store_lock`).

A record is ``MAGIC | header length | payload length | crc32 | header | payload``:
the header is JSON (the point's index, each array's name, dtype and shape, and
the string outputs), the payload the arrays' raw bytes, so every float is
stored bit for bit. A record is whole once its ``write`` returned; the kernel
keeps it when the process is killed (SIGKILL). A record cut short (a write
interrupted by a crash) fails its length or checksum and is ignored, with
every byte after it, so a reader sees a prefix of the finished points.
:func:`odeflow.sweep.store.open_store` and a resumed sweep replay the records
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


def decode(data: bytes) -> list:
    """The whole records at the start of ``data``: a list of ``(index, outputs)``.

    Reading stops at the first record that is cut short or fails its checksum.
    """
    records, offset = [], 0
    while offset + _PREFIX.size <= len(data):
        magic, head, size, crc = _PREFIX.unpack_from(data, offset)
        start = offset + _PREFIX.size
        end = start + head + size
        if magic != MAGIC or end > len(data) or zlib.crc32(data[start:end]) != crc:
            break
        header = json.loads(data[start:start + head])
        outputs, at = {}, start + head
        for name, dtype, shape in header["arrays"]:
            dtype = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            value = np.frombuffer(data, dtype=dtype, count=count, offset=at)
            outputs[name] = value.reshape(shape).copy()
            at += count * dtype.itemsize
        outputs.update(header["strings"])
        records.append((tuple(header["index"]), outputs))
        offset = end
    return records


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

    def read(self) -> list:
        """Every whole record, oldest first (``[]`` when there is no journal)."""
        return read_journal(self.path.parent.parent)

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


def read_journal(store) -> list:
    """The whole records of the journal in the store folder ``store``; ``[]`` if none."""
    try:
        data = (Path(store) / JOURNAL_GROUP / JOURNAL_NAME).read_bytes()
    except FileNotFoundError:
        return []
    return decode(data)


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
    except FileNotFoundError:
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
