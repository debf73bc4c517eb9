"""The sweep store: a zarr group written point by point, readable by ``xarray.open_zarr``.

Layout: one data variable per output (:mod:`odeflow.sweep.outputs`), with the
point dimensions first; the per-point variables (logits, entropy, ...) are
chunked one point per chunk, the scalar ones (``computed``, ``error``, ...)
in one chunk. zarr writes every chunk to a temporary file and renames it, so
a chunk is either the old one or the new one. A finished point's outputs are
written first and its ``computed`` count last: a sweep killed in between
leaves ``computed == 0`` and the point is run again on resume, never half
stored. The sweep's spec (JSON) is the group attribute ``odeflow_sweep``; a
store made for another spec is refused, never overwritten.

netCDF (``format="netcdf"``): points go to a zarr store beside the target
(``NAME.nc.partial.zarr``); once every point is done the dataset is written
to ``NAME.nc`` atomically (:func:`odeflow.io.atomic_write`) and the partial
store is removed.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np

from odeflow.errors import ValidationError
from odeflow.io import atomic_write
from odeflow.sweep.outputs import ATTRS, FILL, VARIABLES
from odeflow.sweep.spec import SweepSpec

#: Group attribute holding the spec.
SPEC_ATTR = "odeflow_sweep"

#: Output formats.
FORMATS = ("zarr", "netcdf")


def requires_xarray():
    """Import xarray and zarr, or say which extra to install."""
    try:
        import xarray
        import zarr  # noqa: F401
    except ImportError:  # pragma: no cover
        raise ValidationError("store", "sweeps need xarray and zarr: "
                              "pip install 'odeflow[sweep]'") from None
    return xarray


class SweepArrays:
    """Every output of every point, in memory, and the store they are mirrored to.

    Parameters
    ----------
    spec : SweepSpec
    path : Path or None
        The zarr store (``None``: memory only).
    """

    def __init__(self, spec: SweepSpec, path: Path | None = None):
        self.spec = spec
        self.path = path
        self.sizes = {"class": spec.num_classes, "token": spec.vocab_size,
                      "time": len(spec.times)}
        self.values = {}
        for name, (dims, dtype) in VARIABLES.items():
            shape = spec.shape + tuple(self.sizes[d] for d in dims)
            if dtype == "str":
                self.values[name] = np.full(shape, "", dtype=object)
            else:
                self.values[name] = np.full(shape, FILL[dtype], dtype=dtype)
        self.values["computed"][...] = 0
        self._arrays = None

    # ------------------------------------------------------------- dataset
    def dataset(self):
        """The outputs as an :class:`xarray.Dataset` (coords: grid, seed, time, class, token)."""
        xr = requires_xarray()
        point_dims = self.spec.dims
        data_vars = {}
        for name, (dims, _) in VARIABLES.items():
            values = self.values[name]
            if name == "error":
                values = values.astype(str)
            data_vars[name] = (point_dims + dims, values, ATTRS[name])
        coords = {k: np.asarray(v) for k, v in self.spec.coords.items()}
        coords.update({"time": np.asarray(self.spec.times), "class": np.arange(
            self.sizes["class"]), "token": np.arange(self.sizes["token"])})
        attrs = {SPEC_ATTR: self.spec.to_json(),
                 "title": "odeflow sweep", "time_axis": "flow time t" if
                 self.spec.family == "flow" else "training step"}
        attrs.update({f"setting_{k}": _attr(v) for k, v in self.spec.settings.items()})
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)

    # --------------------------------------------------------------- store
    def create(self) -> None:
        """Write an empty store (every point pending); refuses an existing path."""
        requires_xarray()
        ds = self.dataset()
        n = len(self.spec.dims)
        encoding = {}
        for name, (dims, _) in VARIABLES.items():
            shape = ds[name].shape
            chunks = shape if not dims else (1,) * n + shape[n:]
            encoding[name] = {"chunks": chunks}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr v3 consolidated-metadata notice
            ds.to_zarr(self.path, mode="w-", encoding=encoding, consolidated=False)

    def load(self) -> None:
        """Read a store made for this spec; a store of another sweep is refused."""
        xr = requires_xarray()
        check_store_spec(self.path, self.spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = xr.open_zarr(self.path, consolidated=False)
            for name in VARIABLES:
                values = ds[name].values
                self.values[name] = values.astype(object) if name == "error" else values

    def write(self, index: tuple, outputs: dict) -> None:
        """Store one finished point: its outputs, then its ``computed`` count."""
        outputs = dict(outputs)
        outputs["computed"] = self.values["computed"][index] + 1
        changed = []
        for name, value in outputs.items():
            old = np.array(self.values[name][index], copy=True)
            self.values[name][index] = value
            if not _same(old, self.values[name][index]):
                changed.append(name)
        if self.path is None:
            return
        arrays = self._open_arrays()
        for name in changed:  # the store already holds the unchanged ones (e.g. NaN B)
            if name != "computed":
                arrays[name][index] = self.values[name][index]
        arrays["computed"][index] = self.values["computed"][index]

    def _open_arrays(self) -> dict:
        if self._arrays is None:
            import zarr

            group = zarr.open_group(self.path, mode="r+")
            self._arrays = {name: group[name] for name in VARIABLES}
        return self._arrays


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.all((a == b) | ((a != a) & (b != b))))


def _attr(value):
    return value if isinstance(value, (str, int, float)) else json.dumps(value)


def check_store_spec(path: Path, spec: SweepSpec) -> None:
    """Refuse ``path`` unless it is a sweep store made for ``spec`` (naming what differs)."""
    try:
        import zarr

        attrs = dict(zarr.open_group(path, mode="r").attrs)
    except Exception as exc:  # zarr raises several kinds for a path that is no store
        raise ValidationError("store", f"{str(path)!r} is not a readable zarr store: "
                              f"{exc}") from None
    check_spec_attrs(attrs, spec, path)


def check_spec_attrs(attrs: dict, spec: SweepSpec, path: Path) -> None:
    """Refuse the store at ``path`` (attributes ``attrs``) unless it was made for ``spec``."""
    if SPEC_ATTR not in attrs:
        raise ValidationError("store", f"{str(path)!r} is not an odeflow sweep store")
    stored = json.loads(attrs[SPEC_ATTR])
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


def open_store(path, fmt: str | None = None):
    """Read a finished (or partial) sweep store as an :class:`xarray.Dataset` in memory."""
    xr = requires_xarray()
    path = Path(path)
    fmt = fmt or ("netcdf" if path.suffix == ".nc" else "zarr")
    if not path.exists():
        partial = partial_path(path)
        if fmt == "netcdf" and partial.exists():
            path, fmt = partial, "zarr"
        else:
            raise ValidationError("store", f"no sweep store at {str(path)!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if fmt == "netcdf":
                ds = xr.open_dataset(path, engine="h5netcdf").load()
            else:
                ds = xr.open_zarr(path, consolidated=False).load()
        except Exception as exc:  # xarray/zarr raise many kinds for an unreadable store
            raise ValidationError("store", f"cannot read {str(path)!r}: {exc}") from None
    if SPEC_ATTR not in ds.attrs:
        raise ValidationError("store", f"{str(path)!r} is not an odeflow sweep store")
    return ds


def partial_path(path: Path) -> Path:
    """Where a netCDF sweep keeps its points until it is complete."""
    return path.with_name(path.name + ".partial.zarr")


def write_netcdf(ds, path: Path) -> Path:
    """Write ``ds`` to ``path`` (netCDF-4 via h5netcdf) atomically."""
    try:
        import h5netcdf  # noqa: F401
        import h5py  # noqa: F401  (h5netcdf's writer; an extra of h5netcdf since 1.4)
    except ImportError:  # pragma: no cover
        raise ValidationError("format", "netCDF output needs h5netcdf and h5py: "
                              "pip install 'odeflow[sweep]'") from None
    out = ds.copy()
    out["error"] = out["error"].astype(str)
    payload = out.to_netcdf(engine="h5netcdf")  # bytes in memory; then one atomic write
    return atomic_write(path, lambda fh: fh.write(payload))


def remove_partial(path: Path) -> None:
    shutil.rmtree(partial_path(path), ignore_errors=False)
