"""The sweep store: zarr arrays plus a journal of the points not yet folded into them.

Layout: one data variable per output (:mod:`odeflow.sweeps.outputs`), with the
point dimensions first, in chunks of about :data:`CHUNK_BYTES` (whole output
axes, as many points as fit: :func:`chunk_shape`). A finished point is appended
to the store's journal (:mod:`odeflow.sweeps.journal`, one ``write`` call) and
the journal is folded into the zarr arrays every :data:`FOLD_SECONDS` and when
the sweep ends, each touched chunk written once (zarr writes a chunk to a
temporary file and renames it, so a chunk is either the old one or the new
one); the journal is removed only after the fold. A sweep killed at any moment
keeps every point whose record was written: :func:`open_store` and a resumed
sweep replay the journal over the arrays. The sweep's spec (JSON) is the group
attribute ``odeflow_sweep``; a store made for another spec is refused, never
overwritten. One sweep at a time writes a store (:func:`store_lock`). Every
chunk has a checksum, and every reader
(:func:`odeflow.sweeps.reading.read_store`) refuses a store that is not what
odeflow wrote (:mod:`odeflow.sweeps.integrity`).

netCDF (``format="netcdf"``): points go to a zarr store beside the target
(``NAME.nc.partial.zarr``); once every point is done the dataset is written
to ``NAME.nc`` atomically (:func:`odeflow.io.atomic_write`) and the partial
store is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import warnings
from pathlib import Path

import numpy as np

from odeflow.errors import ValidationError
from odeflow.io import atomic_write, writable_folder, writable_target
from odeflow.sweeps.integrity import compressors, layout, refuse, update_computed, write_record
from odeflow.sweeps.journal import Journal, remove_journal_folder
from odeflow.sweeps.outputs import FILL
from odeflow.sweeps.reading import SPEC_ATTR, StaleComputed, read_store
from odeflow.sweeps.spec import SweepSpec

#: Output formats.
FORMATS = ("zarr", "netcdf")

#: Target size of a store chunk, in bytes (whole output axes, as many points as fit).
CHUNK_BYTES = 1 << 20

#: Seconds between folds of the journal into the zarr arrays while a sweep runs.
FOLD_SECONDS = 30.0

#: Bytes assumed per error message when sizing the ``error`` chunks.
_STR_BYTES = 64


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
        self.sizes = spec.sizes
        self.variables = spec.outputs.variables
        self.values = {}
        for name, (dims, dtype) in self.variables.items():
            shape = spec.shape + tuple(self.sizes[d] for d in dims)
            if dtype == "str":
                self.values[name] = np.full(shape, "", dtype=object)
            else:
                self.values[name] = np.full(shape, FILL[dtype], dtype=dtype)
        self.values["computed"][...] = 0
        self.journal = None if path is None else Journal(path)
        self._unfolded = set()
        self.skipped = (0, 0)  # damaged journal records and bytes skipped by load()
        self._last_fold = time.monotonic()
        self._arrays = None

    # ------------------------------------------------------------- dataset
    def dataset(self):
        """The outputs as an :class:`xarray.Dataset` (coords: grid, seed, time, class, token)."""
        xr = requires_xarray()
        point_dims = self.spec.dims
        data_vars = {}
        outputs = self.spec.outputs
        for name, (dims, _) in self.variables.items():
            values = self.values[name]
            if name == "error":
                values = values.astype(str)
            data_vars[name] = (point_dims + dims, values, outputs.attrs[name])
        coords = {k: np.asarray(v) for k, v in self.spec.coords.items()}
        coords["time"] = np.asarray(self.spec.times)
        coords.update({k: np.asarray(v) for k, v in outputs.coords(
            list(self.spec.data_models.values()), self.sizes).items()})
        attrs = {SPEC_ATTR: self.spec.to_json(),
                 "title": "odeflow sweep", "time_axis": "flow time t" if
                 self.spec.family == "flow" else "training step"}
        attrs.update({f"setting_{k}": _attr(v) for k, v in self.spec.settings.items()})
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)

    # --------------------------------------------------------------- store
    def create(self) -> None:
        """Write an empty store (every point pending); refuses an existing path.

        The target is checked first (:func:`check_zarr_target`): a dangling
        symlink, a file, or a folder that cannot be written is a
        :class:`ValidationError` naming ``store``, before zarr creates anything.
        """
        requires_xarray()
        check_zarr_target(self.path, "store")
        ds = self.dataset()
        # variable-length strings: a fixed-width "<U1" (every message empty at creation)
        # would cut each later error message to its first character
        ds["error"] = ds["error"].astype(object)
        encoding = chunk_encoding(ds, len(self.spec.dims), self.variables)
        encoding.update({name: {"compressors": compressors()} for name in ds.coords})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr v3 consolidated-metadata notice
            try:
                ds.to_zarr(self.path, mode="w-", encoding=encoding, consolidated=False,
                           write_empty_chunks=True)
            except (FileExistsError, NotADirectoryError, PermissionError) as exc:
                # the target changed since the check (or the file system refused it)
                raise ValidationError("store", f"cannot create the zarr store "
                                      f"{str(self.path)!r}: {exc.strerror or exc}") from None
        write_record(self.path, list(layout(self.spec)), self.values["computed"])

    def load(self) -> None:
        """Read a store made for this spec, journal included; a store of another sweep is
        refused. The journal's points are in memory only until :meth:`fold`."""
        ds, records = read_store(self.path, self.spec)
        for name in self.variables:
            values = ds[name].values
            self.values[name] = values.astype(object) if name == "error" else values
        for index, outputs in records:
            self._put(index, outputs)
            self._unfolded.add(index)
        self.skipped = (records.skipped_records, records.skipped_bytes)

    def write(self, index: tuple, outputs: dict) -> None:
        """Store one finished point: in memory and, with a store, as a journal record.

        ``computed`` becomes the point's count plus one. The journal is folded
        into the zarr arrays when :data:`FOLD_SECONDS` have passed since the
        last fold.
        """
        outputs = dict(outputs)
        outputs["computed"] = np.int64(self.values["computed"][index] + 1)
        self._put(index, outputs)
        if self.path is None:
            return
        self.journal.append(index, outputs)
        self._unfolded.add(tuple(index))
        if time.monotonic() - self._last_fold >= FOLD_SECONDS:
            self.fold()

    def fold(self) -> None:
        """Write the journal's points into the zarr arrays, then remove the journal.

        Every chunk holding such a point is written once, from memory (which
        holds the store's other points too); ``computed`` last. Killed before
        the journal is removed, the store still has the journal, and
        replaying it again gives the same arrays.
        """
        if self.path is None:
            return
        if self._unfolded:
            update_computed(self.path, self.values["computed"])  # before the arrays change
            arrays = self._open_arrays()
            n = len(self.spec.dims)
            for name in self.variables:  # "computed" is the last output
                chunks = arrays[name].chunks[:n]
                blocks = {tuple(i // c for i, c in zip(index, chunks, strict=True))
                          for index in self._unfolded}
                for block in sorted(blocks):
                    where = tuple(slice(b * c, min((b + 1) * c, size)) for b, c, size
                                  in zip(block, chunks, self.spec.shape, strict=True))
                    arrays[name][where] = self.values[name][where]
        self.journal.remove()
        self._unfolded.clear()
        self._last_fold = time.monotonic()

    def close(self) -> None:
        """Close the journal (its records stay until the next :meth:`fold`)."""
        if self.journal is not None:
            self.journal.close()

    def _put(self, index: tuple, outputs: dict) -> None:
        for name, value in outputs.items():
            self.values[name][index] = value

    def _open_arrays(self) -> dict:
        if self._arrays is None:
            import zarr

            group = zarr.open_group(self.path, mode="r+")
            # every chunk is kept, fill values too: a missing chunk is damage
            self._arrays = {name: group[name].with_config({"write_empty_chunks": True})
                            for name in self.variables}
        return self._arrays


def chunk_shape(points: tuple, inner: tuple, itemsize: int, target: int = CHUNK_BYTES) -> tuple:
    """Chunks of a store array of point shape ``points`` and per-point shape ``inner``.

    Whole per-point axes, and as many points as fit in ``target`` bytes, taken
    from the last point dimension backwards (at least one point).
    """
    budget = max(1, target // max(1, int(np.prod(inner, dtype=np.int64)) * itemsize))
    chunks = []
    for size in reversed(points):
        take = max(1, min(size, budget))
        chunks.append(take)
        budget = budget // size if take == size else 1
    return tuple(reversed(chunks)) + tuple(inner)


def chunk_encoding(ds, n: int, names) -> dict:
    """zarr ``encoding`` (chunks, :func:`chunk_shape`) of the outputs ``names`` of ``ds``,
    whose first ``n`` dims are the point dims."""
    encoding = {}
    for name in names:
        shape = ds[name].shape
        itemsize = _STR_BYTES if ds[name].dtype == object else ds[name].dtype.itemsize
        encoding[name] = {"chunks": chunk_shape(shape[:n], shape[n:], itemsize),
                          "compressors": compressors()}
    return encoding


@contextlib.contextmanager
def store_lock(path: Path):
    """Take the store folder ``path`` for one sweep before anything is written in it.

    The folder is made if missing (with its parents) and locked at once
    (``fcntl.flock`` on the folder itself): taking a store is one step, so of
    two sweeps started on one path at any moment one holds it and the other
    gets a :class:`ValidationError` naming ``store``, before either decides
    whether to create or resume it (see :func:`odeflow.sweeps.run.sweep`). The
    system drops the lock when the process ends, however it ends, so a killed
    sweep leaves nothing to clean before ``--resume``. At the end the
    journal's group is removed unless it still holds a journal, and the folder
    if it is still empty (a sweep refused before it made the store). Without
    ``fcntl`` (Windows) the store is not locked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        yield
        return
    while True:
        try:
            os.makedirs(path, exist_ok=True)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:  # removed meanwhile by a sweep refused on it: again
            continue
        except OSError as exc:
            raise ValidationError("store", f"cannot create the zarr store {str(path)!r}: "
                                  f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValidationError("store", f"{str(path)!r} is being written by another "
                                  "sweep; wait for it to end or choose another path") from None
        try:  # the folder locked must still be the store folder (not one removed meanwhile)
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        try:
            remove_journal_folder(path)
            with contextlib.suppress(OSError):  # not empty: the store (or another's files)
                os.rmdir(path)
        finally:
            os.close(fd)


def is_store_folder(path: Path) -> bool:
    """Whether the folder ``path`` holds a zarr group (any kind of store: checked later)."""
    return (Path(path) / "zarr.json").exists() or (Path(path) / ".zgroup").exists()


def is_empty_folder(path: Path) -> bool:
    """Whether ``path`` is a folder with nothing in it (a store can be made there)."""
    try:
        return not os.listdir(path)
    except OSError:
        return False


def _attr(value):
    return value if isinstance(value, (str, int, float)) else json.dumps(value)


def open_store(path, fmt: str | None = None):
    """Read a finished (or partial) sweep store as an :class:`xarray.Dataset` in memory.

    A zarr store's journal (the points not yet folded into its arrays: a
    running or killed sweep's) is replayed over the arrays, so every stored
    point is there; ``xarray.open_zarr`` alone shows only the folded ones.
    ``attrs["journal_skipped"]`` is ``[records, bytes]`` of the journal's
    damaged records, skipped (:func:`odeflow.sweeps.journal.decode`).

    Raises
    ------
    ValidationError
        Naming ``store``, the path and what is wrong: no store there, a store
        that is not an odeflow sweep's, or one that is damaged
        (:func:`odeflow.sweeps.reading.read_store`).
    """
    requires_xarray()
    path = Path(path)
    fmt = fmt or ("netcdf" if path.suffix == ".nc" else "zarr")
    if not path.exists():
        partial = partial_path(path)
        if fmt == "netcdf" and partial.exists():
            path, fmt = partial, "zarr"
        else:
            raise ValidationError("store", f"no sweep store at {str(path)!r}")
    if fmt == "netcdf":
        return _open_netcdf(path)
    for attempt in range(3):  # a fold running meanwhile can pair old flags with new arrays
        try:
            ds, records = read_store(path)
            break
        except StaleComputed:
            if attempt == 2:
                raise refuse(path, "is damaged: its 'computed' flags are not those odeflow "
                             "recorded (a chunk of 'computed' was changed or replaced)") \
                    from None
            time.sleep(0.2)
    ds["error"] = ds["error"].astype(object)
    replay(ds, records)
    ds["error"] = ds["error"].astype(str)  # zarr's variable-length strings -> numpy's str
    ds.attrs["journal_skipped"] = [records.skipped_records, records.skipped_bytes]
    return ds


def _open_netcdf(path: Path):
    xr = requires_xarray()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ds = xr.open_dataset(path, engine="h5netcdf").load()
        except Exception as exc:  # h5netcdf raises many kinds for an unreadable file
            raise ValidationError("store", f"cannot read {str(path)!r}: {exc}") from None
    if SPEC_ATTR not in ds.attrs:
        raise ValidationError("store", f"{str(path)!r} is not an odeflow sweep store")
    return ds


def replay(ds, records) -> None:
    """Put the journal ``records`` (:func:`odeflow.sweeps.journal.read_journal`) into the
    in-memory dataset ``ds``, in order (a later record of a point wins)."""
    for index, outputs in records:
        for name, value in outputs.items():
            if name in ds:
                ds[name].data[index] = value


def check_zarr_target(path, field: str = "store") -> Path:
    """As for :func:`odeflow.io.writable_folder` (``field``: ``"out"`` for ``--out``), for
    a zarr store, checked before zarr touches the path (zarr creates the store folder
    itself and fails with a raw ``FileExistsError`` or ``PermissionError`` otherwise)."""
    return writable_folder(path, field, what="a zarr store",
                           hint=" (a .nc name writes netCDF)")


def check_store_target(store, fmt: str | None = None, field: str = "store") -> None:
    """Check where a sweep will write before it runs: :func:`check_zarr_target` for a zarr
    store; for netCDF the file (:func:`odeflow.io.writable_target`, unless it is already
    there, i.e. a finished sweep) and the partial zarr store beside it."""
    text = os.fspath(store) if isinstance(store, (str, os.PathLike)) else None
    if not text:
        raise ValidationError(field, f"must be a path, got {store!r:.80}")
    path = Path(text)
    fmt = fmt or ("netcdf" if path.suffix == ".nc" else "zarr")
    if fmt not in FORMATS:
        raise ValidationError("format", f"must be one of {list(FORMATS)}, got {fmt!r}")
    if fmt == "netcdf":
        if not path.exists():
            writable_target(path, field)
            check_zarr_target(partial_path(path), field)
    else:
        check_zarr_target(path, field)


def partial_path(path: Path) -> Path:
    """Where a netCDF sweep keeps its points until it is complete."""
    return path.with_name(path.name + ".partial.zarr")


def requires_netcdf() -> None:
    """Import h5netcdf and h5py (netCDF output), or a :class:`ValidationError` naming ``format``."""
    try:
        import h5netcdf  # noqa: F401
        import h5py  # noqa: F401  (h5netcdf's writer; an extra of h5netcdf since 1.4)
    except ImportError:
        raise ValidationError("format", "netCDF output needs h5netcdf and h5py: "
                              "pip install 'odeflow[sweep]'") from None


def write_netcdf(ds, path: Path) -> Path:
    """Write ``ds`` to ``path`` (netCDF-4 via h5netcdf) atomically.

    Every numeric variable has HDF5's Fletcher-32 checksum, so a damaged
    chunk fails to read (:func:`open_store` refuses the file) instead of
    giving other numbers; the text variable ``error`` has none (HDF5 filters
    do not apply to variable-length strings).
    """
    requires_netcdf()
    out = ds.copy()
    out["error"] = out["error"].astype(str)
    encoding = {name: {"fletcher32": True} for name in out.variables
                if out[name].dtype.kind in "fiu"}
    # bytes in memory; then one atomic write
    payload = out.to_netcdf(engine="h5netcdf", encoding=encoding)
    return atomic_write(path, lambda fh: fh.write(payload))


def remove_partial(path: Path) -> None:
    shutil.rmtree(partial_path(path), ignore_errors=False)
