"""Result files of every model family: an ``.npz`` archive of numeric arrays and
one JSON ``metadata`` record (shared).

:func:`read_result_file` opens such a file and checks it is intact and of the
expected ``"<kind>/<version>"`` format before any family reads its arrays;
:func:`jsonable` turns the metadata a result carries into plain JSON values.
Nothing is ever unpickled.
"""

from __future__ import annotations

import json

import numpy as np

from odeflow.errors import ValidationError
from odeflow.io import atomic_write_npz, provenance, readable_file

__all__ = ["REQUIRED_ARRAYS", "SERIES_PREFIX", "jsonable", "read_result_file", "series_arrays",
           "stored_data_model", "stored_series", "write_result_file"]

#: Arrays every file of a kind holds (besides ``metadata``), by kind.
REQUIRED_ARRAYS = {"odeflow-trajectory": ("t", "z_base")}
#: Name prefix, in every family's result file, of the arrays holding a result's ``series``
#: (a Level R flow's ``margin``, an optimiser flow's ``velocity``, ``moment1``, ...).
SERIES_PREFIX = "series__"


def series_arrays(series: dict) -> dict:
    """The arrays of a result file that store a result's ``series``, by prefixed name."""
    return {f"{SERIES_PREFIX}{name}": np.asarray(value) for name, value in series.items()}


def stored_series(arrays: dict, n: int, where: str) -> dict:
    """The series a result file's ``arrays`` hold, each with ``n`` rows (one per time).

    Raises
    ------
    ValidationError
        Naming ``path``, for a series array without ``n`` rows.
    """
    out = {}
    for name, value in arrays.items():
        if name.startswith(SERIES_PREFIX):
            if value.ndim == 0 or value.shape[0] != n:
                raise ValidationError("path", f"{where}: array {name!r} has shape "
                                      f"{value.shape}; expected {n} times on its first axis")
            out[name[len(SERIES_PREFIX):]] = value
    return out


def stored_data_model(data_class: type, record, where: str,
                      errors: tuple = (ValidationError,)):
    """``data_class.from_dict(record)``; one of ``errors`` becomes a ValidationError naming
    ``path`` ("the stored data model is invalid")."""
    try:
        return data_class.from_dict(record)
    except errors as exc:
        raise ValidationError("path", f"{where}: the stored data model is invalid "
                              f"({exc})") from None


def jsonable(value):
    """Plain-python copy of ``value`` (numpy scalars and arrays to lists) for JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def write_result_file(path, file_format: str, result, arrays: dict, data, field: str = "path",
                      seeds: dict | None = None, **entries):
    """Write ``arrays`` and the ``metadata`` record of ``result`` to ``path`` (``.npz``)
    through :func:`odeflow.io.atomic_write_npz` (``field`` names the path in errors).

    The record holds ``file_format``, ``data`` (a data model's dict, ``{}`` or ``None``),
    the other ``entries``, and ``result.stats`` and ``result.meta`` as JSON, the meta with
    ``provenance`` (:func:`odeflow.io.provenance` of ``seeds``: versions, UTC time,
    command line, seeds) unless it carries one (a loaded file keeps its origin).
    """
    meta = {**result.meta}
    meta.setdefault("provenance", provenance(seeds))
    record = {"format": file_format, "data": data, **entries, "stats": jsonable(result.stats),
              "meta": jsonable(meta)}
    return atomic_write_npz(path, {**arrays, "metadata": np.array(json.dumps(record))},
                            field=field)


def read_result_file(path, file_format: str) -> tuple[dict, dict]:
    """Arrays and metadata of an odeflow result file, checked to be intact.

    Parameters
    ----------
    path : str or os.PathLike
    file_format : str
        The expected ``"<kind>/<version>"`` tag, e.g. ``"odeflow-trajectory/1"``.

    Returns
    -------
    (arrays, metadata) : (dict of str -> ndarray, dict)
        Every array numeric and finite; ``metadata`` a dict with ``format``,
        ``data``, ``stats`` and ``meta``.

    Raises
    ------
    ValidationError
        Naming ``path``, for a file that is not such a result (no raw decoder
        exception ever escapes; nothing is unpickled).
    """
    where = f"{str(path)!r}"
    arrays = _read_archive(path, where)
    metadata = _read_metadata(arrays.pop("metadata"), where)
    _check_format(metadata, file_format, where)
    _check_arrays(arrays, file_format.partition("/")[0], where)
    return arrays, metadata


def _read_archive(path, where: str) -> dict:
    """Every member of the ``.npz`` at ``path`` as an array (``metadata`` among them)."""
    readable_file(path, "path")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except (OSError, TypeError, ValueError) as exc:
        raise ValidationError("path", f"cannot read {where}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    if magic != b"PK\x03\x04":
        raise ValidationError("path", f"{where} is not an odeflow result file (not an .npz "
                              "archive)")
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except MemoryError:
        raise ValidationError("path", f"{where}: an array is too large to load; the file is "
                              "damaged or not an odeflow result") from None
    except Exception as exc:  # zip, zlib, npy-header and EOF errors of a damaged file
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        if "pickle" in reason.lower():  # numpy's refusal of an object array
            reason = "it holds an object array, which odeflow never writes and never loads"
        raise ValidationError("path", f"{where} is damaged or not an odeflow result file "
                              f"({reason})") from None
    for name, value in arrays.items():  # numpy hands back a member not named .npy as bytes
        if not isinstance(value, np.ndarray):
            raise ValidationError("path", f"{where}: member {name!r} is not an .npy array; "
                                  "not an odeflow result file")
    if "metadata" not in arrays:
        raise ValidationError("path", f"{where} is not an odeflow result file (no metadata)")
    return arrays


def _read_metadata(record: np.ndarray, where: str) -> dict:
    """The JSON object stored as the 0-d text array ``metadata``."""
    try:
        if record.dtype.kind != "U" or record.shape != ():
            raise ValueError("not a text record")
        metadata = json.loads(str(record))
    except (ValueError, RecursionError) as exc:
        raise ValidationError("path", f"{where}: the metadata record is damaged "
                              f"({str(exc)[:200]})") from None
    if not isinstance(metadata, dict):
        raise ValidationError("path", f"{where}: the metadata record is damaged (not an object)")
    return metadata


def _check_format(metadata: dict, file_format: str, where: str) -> None:
    """The format tag is ``file_format`` and ``data``, ``stats``, ``meta`` are objects."""
    found = metadata.get("format")
    kind, _, _ = file_format.partition("/")
    if not isinstance(found, str) or found.partition("/")[0] != kind:
        raise ValidationError("path", f"{where} is not an {kind} file (format {found!r:.80})")
    if found != file_format:
        raise ValidationError("path", f"{where} has format version {found!r:.80}; this odeflow "
                              f"reads {file_format!r}")
    for key in ("data", "stats", "meta"):
        if key == "data" and kind == "odeflow-snap" and metadata.get(key, 0) is None:
            continue  # a snap result solved from parameters, without a data model
        if not isinstance(metadata.get(key), dict):
            raise ValidationError("path", f"{where}: the metadata record is damaged ({key!r} "
                                  "is missing or not an object)")


def _check_arrays(arrays: dict, kind: str, where: str) -> None:
    """The kind's required arrays are present; every array is numeric and finite."""
    for name in REQUIRED_ARRAYS.get(kind, ()):
        if name not in arrays:
            raise ValidationError("path", f"{where}: array {name!r} is missing")
    for name, value in arrays.items():
        if value.dtype.kind not in "fiu" or value.dtype.kind == "b":
            raise ValidationError("path", f"{where}: array {name!r} has type {value.dtype}; "
                                  "expected numbers")
        if not np.all(np.isfinite(value)):
            raise ValidationError("path", f"{where}: array {name!r} holds non-finite values")
