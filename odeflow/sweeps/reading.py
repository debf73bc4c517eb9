"""Reading a sweep store with every check: the spec it was made for, its integrity
(:mod:`odeflow.sweeps.integrity`), its journal's records, and only then its values.

Every reader of a zarr sweep store (:func:`odeflow.sweeps.store.open_store`,
``odeflow plot sweep``, a resumed sweep) goes through :func:`read_store`; a
store that is not what odeflow wrote is a :class:`~odeflow.errors.ValidationError`
naming ``store``, the path and what is wrong.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from odeflow.errors import ValidationError
from odeflow.sweeps.integrity import (
    array_metadata,
    check_arrays,
    check_computed,
    layout,
    read_record,
    refuse,
    root_attributes,
)
from odeflow.sweeps.journal import check_journal_paths, read_journal
from odeflow.sweeps.spec import SweepSpec, spec_from_dict

#: Group attribute holding the spec.
SPEC_ATTR = "odeflow_sweep"


def check_store_spec(path: Path, spec: SweepSpec) -> list:
    """Refuse ``path`` unless it is an undamaged-looking sweep store made for ``spec``.

    The attributes, the arrays' metadata (and, for a checked store, every
    chunk's presence) and the journal's files are checked; the chunks
    themselves are decoded by :func:`read_store`. Returns the outputs a store
    written before them lacks (the output set's ``added_later``).
    """
    spec, record, swept = store_spec(path, spec)
    missing = check_arrays(path, spec, record, swept)
    check_journal_paths(path)
    return missing


def stored_names(stored: dict) -> tuple[dict, dict]:
    """``(stored, swept)``: a store's spec dict with the old parameter names of its task
    kinds (their ``renamed``, ``docs/api.md``) read as the new ones, and ``{new name:
    old name}`` of those swept (their arrays and dims keep the old name in the store).

    A spec that does not name known tasks is returned as it is (refused, by name, by
    the checks that follow).
    """
    from odeflow.sweeps.tasks import new_parameter_names, task_kind

    grid, settings = stored.get("grid"), stored.get("settings")
    if not isinstance(grid, dict) or not isinstance(settings, dict):
        return stored, {}
    try:
        names = grid["task"] if "task" in grid else [settings.get("task")]
        kinds = [task_kind(name) for name in names]
        grid = new_parameter_names(kinds, grid, "grid", warn=False)
        settings = new_parameter_names(kinds, settings, "settings", warn=False)
    except (ValidationError, TypeError):
        return stored, {}
    renames = {old: new for kind in kinds for old, new in kind.renamed.items()}
    swept = {renames[old]: old for old in stored["grid"] if old in renames}
    return {**stored, "grid": grid, "settings": settings}, swept


def store_spec(path: Path, spec: SweepSpec | None):
    """``(spec, integrity record or None, swept)`` of the store at ``path``; with ``spec``,
    a store of another sweep is refused naming what differs. ``swept``: ``{new name: old
    name}`` of parameters swept under a name they have lost (:func:`stored_names`); such
    a store is read, not resumed."""
    attrs = root_attributes(path)
    if spec is not None:
        check_spec_attrs(attrs, spec, path)
        return spec, read_record(path, attrs), {}
    stored, swept = _stored_spec(attrs, path)
    try:
        spec = spec_from_dict(grid_in_store_order(path, stored, swept))
    except ValidationError as exc:
        raise refuse(path, f"is damaged: the attribute {exc.field!r} {exc.reason}") from None
    return spec, read_record(path, attrs), swept


def _stored_spec(attrs: dict, path: Path) -> tuple[dict, dict]:
    """The spec dict in the store's attributes ``attrs`` and its ``swept``
    (:func:`stored_names`); a store without one, or with one that is not a JSON object,
    is refused."""
    if SPEC_ATTR not in attrs:
        raise refuse(path, "is not an odeflow sweep store")
    text = attrs[SPEC_ATTR]
    try:
        stored = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        stored = None
    if not isinstance(stored, dict):
        raise refuse(path, f"is damaged: the attribute {SPEC_ATTR!r} is not a JSON object "
                     f"(got {text!r:.40})")
    return stored_names(stored)


def grid_in_store_order(path: Path, stored: dict, swept: dict | None = None) -> dict:
    """``stored`` (a spec dict) with its grid in the order of the store's point dims.

    The spec is written as JSON with sorted keys, so a grid given in another order
    (``eta_z`` before ``eta_y``, ``prior.alpha`` before ``flow``) reads back sorted;
    the dims of the ``computed`` array keep the order the sweep was given in
    (``swept``: ``{new name: old name}`` of dims named by a parameter's old name).
    """
    meta = array_metadata(path, "computed")
    dims = meta.get("dimension_names") if isinstance(meta, dict) else None
    if isinstance(dims, list) and swept:
        new = {old: name for name, old in swept.items()}
        dims = [new.get(d, d) for d in dims]
    grid = stored.get("grid")
    if not isinstance(dims, list) or not isinstance(grid, dict) or not set(grid) <= set(dims):
        return stored  # refused, naming what is wrong, by the checks that follow
    return {**stored, "grid": {name: grid[name] for name in dims if name in grid}}


def check_spec_attrs(attrs: dict, spec: SweepSpec, path: Path) -> None:
    """Refuse the store at ``path`` (attributes ``attrs``) unless it was made for ``spec``
    (its old parameter names read as the new ones, :func:`stored_names`; a store that
    swept a renamed parameter is refused: it is read, not resumed)."""
    stored, swept = _stored_spec(attrs, path)
    if swept:
        raise ValidationError("store", f"{str(path)!r} sweeps {sorted(swept.values())}, "
                              f"since renamed {sorted(swept)}; it can be read "
                              "(open_store) but not resumed: sweep again into another store")
    differ = spec.differences(stored)
    if differ:
        details = "; ".join(f"{key}: store has {_lookup(stored, key)!r:.80}, this sweep "
                            f"{_lookup(spec.to_dict(), key)!r:.80}" for key in differ[:4])
        raise ValidationError("store", f"{str(path)!r} belongs to a different sweep "
                              f"({', '.join(differ)} differ: {details}); choose another "
                              "--out or rerun with the store's parameters")


def _lookup(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


class StaleComputed(Exception):
    """The ``computed`` flags did not match the record (perhaps a fold ran meanwhile)."""


def read_store(path: Path, spec: SweepSpec | None = None):
    """The arrays of the zarr sweep store ``path`` and its journal, every check passed.

    The attributes, every array's metadata and chunks (present, checksums,
    decoding), the journal (its files; each record fits the store) and the
    ``computed`` flags (:func:`odeflow.sweeps.integrity.check_computed`) are
    checked. With ``spec``, a store of another sweep is refused.

    Returns
    -------
    (xarray.Dataset, odeflow.sweeps.journal.Records)
        The arrays as stored (the journal not replayed) and the journal's records.

    Raises
    ------
    ValidationError
        Naming ``store``, the path and what is wrong.
    """
    import xarray as xr

    # the journal first: a fold running meanwhile writes its records into the arrays
    # before removing it, so the arrays read next hold them either way
    records = read_journal(path)
    spec, record, swept = store_spec(path, spec)
    check_arrays(path, spec, record, swept)
    check_records(path, spec, records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ds = xr.open_zarr(path, consolidated=False)
        except Exception as exc:  # xarray/zarr raise many kinds for an unreadable store
            raise refuse(path, f"cannot be read: {exc}") from None
        for name in list(ds.variables):
            try:
                ds[name] = ds[name].load()
            except Exception as exc:  # a checksum that fails, a chunk that does not decode
                raise refuse(path, f"is damaged: a chunk of {name!r} does not decode "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") \
                    from None
    if swept:                   # a parameter swept under its old name: read as the new one
        ds = ds.rename({old: name for name, old in swept.items()})
    computed = ds["computed"].values
    if computed.dtype != np.int64 or (computed < 0).any():
        raise refuse(path, "is damaged: 'computed' holds values that are not counts")
    replayed = computed.copy()
    for index, outputs in records:
        replayed[index] = outputs.get("computed", replayed[index])
    if not check_computed(record, computed, replayed):
        raise StaleComputed()
    return ds, records


def check_records(path: Path, spec: SweepSpec, records) -> None:
    """Refuse a journal record that does not fit the store of ``spec`` (its point's index,
    an output's name, shape or type), naming the record."""
    shapes = {name: shape[len(spec.dims):] for name, (_, shape, _) in layout(spec).items()
              if name in spec.outputs.variables}
    for number, (index, outputs) in enumerate(records, 1):
        where = f"its journal record {number} (point {list(index)!r:.40})"
        if len(index) != len(spec.shape) or not all(
                0 <= i < n for i, n in zip(index, spec.shape, strict=False)):
            raise refuse(path, f"is damaged: {where} is not a point of the grid "
                         f"{list(spec.shape)}")
        for name, value in outputs.items():
            kind = spec.outputs.variables.get(name, (None, None))[1]
            ok = kind is not None and (isinstance(value, str) if kind == "str" else (
                not isinstance(value, str) and value.dtype == np.dtype(kind)
                and value.shape == shapes[name]))
            if not ok:
                raise refuse(path, f"is damaged: {where} has an output {name!r} that does "
                             "not fit the store (name, shape or type)")


def at_end(da):
    """The last stored (finite) value of the store variable ``da`` along ``time`` at every
    point (its own horizon; NaN where none), as a DataArray without ``time``."""
    values = np.moveaxis(da.values, da.get_axis_num("time"), -1)
    finite = np.isfinite(values)
    last = np.where(finite.any(-1), values.shape[-1] - 1 - np.argmax(finite[..., ::-1], -1), 0)
    picked = np.take_along_axis(values, last[..., None], -1)[..., 0]
    picked = np.where(finite.any(-1), picked, np.nan)
    dims = [d for d in da.dims if d != "time"]
    return da.isel(time=0, drop=True).copy(data=picked).transpose(*dims)
