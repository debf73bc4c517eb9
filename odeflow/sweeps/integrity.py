"""Integrity of a sweep store: what odeflow wrote is read back, or the store is refused.

A store written by this version of odeflow is *checked*:

- every chunk of every array (outputs and coordinates) ends with a CRC-32C of
  its compressed bytes (zarr's ``crc32c`` codec, after ``zstd`` with its own
  content checksum), so a flipped bit or a chunk cut short fails to decode;
- every chunk exists (arrays are written with ``write_empty_chunks``), so a
  deleted chunk is not read as fill values;
- the root attribute :data:`INTEGRITY_ATTR` records a SHA-256 of each array's
  metadata document (``NAME/zarr.json``), of the root attributes and of the
  ``computed`` flags (updated before each fold writes the arrays), so an edited
  shape, data type, fill value or attribute, and a ``computed`` chunk that does
  not say what the last fold wrote, are refused.

Stores written before (no :data:`INTEGRITY_ATTR`, no checksums in ``computed``)
are read with the structural checks only (every output of the task's set,
:class:`~odeflow.sweeps.outputs.OutputSet`, there with the spec's shape, dims and data
type; ``njev``, ``nlu``, ``wall_time`` may be missing: its ``added_later``).
Every refusal is a :class:`~odeflow.errors.ValidationError` naming ``store``,
the store's path and what is wrong.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from pathlib import Path

import numpy as np

from odeflow.errors import ValidationError

#: Root attribute holding the integrity record (JSON).
INTEGRITY_ATTR = "odeflow_integrity"

#: Version of the integrity record.
STORE_FORMAT = "odeflow-store/2"

#: zarr v3 data type of each output dtype.
_ZARR_DTYPES = {"float64": "float64", "int64": "int64", "str": "string"}


def compressors() -> tuple:
    """The bytes-to-bytes codecs of every array: zstd (content checksum) then CRC-32C."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    return (ZstdCodec(level=0, checksum=True), Crc32cCodec())


def refuse(path, what: str) -> ValidationError:
    """The error for the store at ``path``: ``store: 'PATH' <what>``."""
    return ValidationError("store", f"{str(path)!r} {what}")


def _json_file(path: Path, store) -> object:
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise refuse(store, f"cannot be read: {path.name} in "
                     f"{path.parent.name!r}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise refuse(store, f"is damaged: {_relative(path, store)} is not JSON") from None


def _relative(path: Path, store) -> str:
    try:
        return str(path.relative_to(Path(store)))
    except ValueError:
        return str(path)


def root_attributes(store) -> dict:
    """The root group's attributes, read from ``STORE/zarr.json`` (checked to be a group)."""
    path = Path(store)
    meta = _json_file(path / "zarr.json", path)
    if meta is None:
        raise refuse(path, "is not a zarr store (no zarr.json)")
    if not isinstance(meta, dict) or meta.get("node_type") != "group" \
            or not isinstance(meta.get("attributes", {}), dict):
        raise refuse(path, "is damaged: zarr.json is not a zarr group's metadata")
    return meta.get("attributes", {})


def array_metadata(store, name: str) -> dict | None:
    """The metadata document of array ``name`` (``None`` when the array is missing)."""
    meta = _json_file(Path(store) / name / "zarr.json", store)
    if meta is not None and (not isinstance(meta, dict) or meta.get("node_type") != "array"):
        raise refuse(store, f"is damaged: {name}/zarr.json is not an array's metadata")
    return meta


def digest(value) -> str:
    """SHA-256 of ``value``: JSON (sorted keys) or a numpy array's little-endian bytes."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    else:
        data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()


def computed_digest(computed) -> str:
    """The digest of the ``computed`` flags (int64, C order)."""
    return digest(np.asarray(computed, dtype=np.int64))


def _other_attributes(attrs: dict) -> dict:
    return {k: v for k, v in attrs.items() if k != INTEGRITY_ATTR}


def write_record(store, names, computed) -> None:
    """Write the integrity record of a store just created (arrays ``names``)."""
    import zarr

    record = {"format": STORE_FORMAT, "checksum": "crc32c",
              "attributes": digest(_other_attributes(root_attributes(store))),
              "metadata": {n: digest(array_metadata(store, n)) for n in names},
              "computed": computed_digest(computed)}
    zarr.open_group(store, mode="r+").attrs[INTEGRITY_ATTR] = json.dumps(record, sort_keys=True)


def update_computed(store, computed) -> None:
    """Record the ``computed`` flags a fold is about to write (before it writes them).

    Only the ``computed`` digest changes; a store without a record (written
    before) is left as it is.
    """
    import zarr

    group = zarr.open_group(store, mode="r+")
    text = group.attrs.get(INTEGRITY_ATTR)
    if text is None:
        return
    record = json.loads(text)
    record["computed"] = computed_digest(computed)
    group.attrs[INTEGRITY_ATTR] = json.dumps(record, sort_keys=True)


def read_record(store, attrs: dict) -> dict | None:
    """The store's integrity record (checked for form), or ``None`` for a store of before.

    A store without a record whose ``computed`` array has checksums was
    written by this version and lost its record: refused.
    """
    text = attrs.get(INTEGRITY_ATTR)
    if text is None:
        meta = array_metadata(store, "computed")
        codecs = meta.get("codecs") if isinstance(meta, dict) else None
        if isinstance(codecs, list) and any(isinstance(c, dict) and c.get("name") == "crc32c"
                                            for c in codecs):
            raise refuse(store, f"is damaged: its arrays have checksums but the attribute "
                         f"{INTEGRITY_ATTR!r} is missing")
        return None
    try:
        record = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or record.get("format") != STORE_FORMAT \
            or not isinstance(record.get("metadata"), dict) \
            or not all(isinstance(record.get(k), str) for k in ("attributes", "computed")):
        raise refuse(store, f"is damaged: the attribute {INTEGRITY_ATTR!r} is not what "
                     "odeflow writes")
    if digest(_other_attributes(attrs)) != record["attributes"]:
        raise refuse(store, "is damaged: its attributes (zarr.json) are not what odeflow "
                     "wrote")
    return record


def layout(spec) -> dict:
    """Every array of a store of ``spec``: ``name -> (dims, shape, zarr data type or None)``."""
    sizes = spec.sizes
    out = {}
    for name, (dims, dtype) in spec.outputs.variables.items():
        out[name] = (spec.dims + dims, spec.shape + tuple(sizes[d] for d in dims),
                     _ZARR_DTYPES[dtype])
    for name, values in spec.coords.items():
        out[name] = ((name,), (len(values),), None)
    for name in sizes:
        out[name] = ((name,), (sizes[name],), None)
    return out


def check_arrays(store, spec, record, store_names: dict | None = None) -> list:
    """Check every array's metadata against ``spec`` (and ``record``); the missing outputs
    a store of before may be given (the output set's ``added_later``).

    ``store_names`` maps a parameter's name in ``spec`` to the one its array and
    dimension have in the store (a swept parameter renamed since,
    :func:`odeflow.sweeps.reading.stored_names`).
    """
    names = dict(store_names or {})
    missing = []
    for name, (dims, shape, dtype) in layout(spec).items():
        dims = tuple(names.get(d, d) for d in dims)
        name = names.get(name, name)
        meta = array_metadata(store, name)
        if meta is None:
            if record is None and name in spec.outputs.added_later:
                missing.append(name)
                continue
            raise refuse(store, f"is damaged: the array {name!r} is missing")
        if record is not None and digest(meta) != record["metadata"].get(name):
            raise refuse(store, f"is damaged: the metadata of {name!r} ({name}/zarr.json) "
                         "is not what odeflow wrote")
        got = (meta.get("dimension_names"), meta.get("shape"), meta.get("data_type"))
        if got[0] != list(dims) or got[1] != list(shape) or (dtype and got[2] != dtype):
            raise refuse(store, f"is damaged: {name!r} has dims {got[0]!r:.80}, shape "
                         f"{got[1]!r:.80}, data type {got[2]!r:.40}; a store of this sweep "
                         f"has {list(dims)}, {list(shape)}, {dtype or 'its coordinate type'}")
    if record is not None:
        stored = [names.get(n, n) for n in layout(spec)]
        extra = set(record["metadata"]) - set(stored)
        if extra:
            raise refuse(store, f"is damaged: its integrity record names arrays "
                         f"{sorted(extra)!r:.80} that a store of this sweep does not have")
        check_chunks(store, stored)
    return missing


def check_chunks(store, names) -> None:
    """Every chunk file of the arrays ``names`` exists (a checked store writes them all)."""
    for name in names:
        meta = array_metadata(store, name)
        try:
            shape = meta["shape"]
            chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
            counts = [math.ceil(s / c) for s, c in zip(shape, chunks, strict=True)]
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            raise refuse(store, f"is damaged: the chunk grid of {name!r} is not what "
                         "odeflow writes") from None
        for block in itertools.product(*(range(n) for n in counts)):
            key = "/".join(["c", *map(str, block)])
            if not (Path(store) / name / key).is_file():
                raise refuse(store, f"is damaged: the chunk {name}/{key} is missing")


def check_computed(record, computed, replayed) -> bool:
    """Whether the ``computed`` flags read (``computed``: the arrays; ``replayed``: with the
    journal) are those the record describes (either: a fold may have stopped part way).
    Always true for a store of before (no record)."""
    if record is None:
        return True
    return record["computed"] in (computed_digest(computed), computed_digest(replayed))
