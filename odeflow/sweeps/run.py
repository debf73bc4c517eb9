"""The sweep entry point: :func:`sweep` runs a task over a grid and returns an xarray.Dataset."""

from __future__ import annotations

import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from odeflow.errors import SweepStopped, ValidationError
from odeflow.solver.integrate import PROGRESS_LOG_SECONDS
from odeflow.sweeps.backends import PointRunner, failure_cause
from odeflow.sweeps.journal import journal_folder
from odeflow.sweeps.reading import check_spec_attrs, check_store_spec
from odeflow.sweeps.spec import make_spec, memory_estimate
from odeflow.sweeps.store import (
    FORMATS,
    SweepArrays,
    check_store_target,
    chunk_encoding,
    is_empty_folder,
    is_store_folder,
    open_store,
    partial_path,
    remove_partial,
    requires_netcdf,
    requires_xarray,
    store_lock,
    write_netcdf,
)
from odeflow.training.common import check_count

#: A sweep of this many points or more says so before its set-up (the store and the
#: list of pending points grow with the points).
ANNOUNCE_POINTS = 100_000


def sweep(task="exact", grid=None, *, seeds=None, settings=None, data=None,
          backend: str = "processes", store=None, resume: bool = False,
          retry_failed: bool = False, format: str | None = None, client=None,  # noqa: A002
          scheduler: str | None = None, workers: int | None = None, batch: int | None = None,
          progress: bool | None = None):
    """Run ``task`` at every point of ``grid`` (times ``seeds``) and label the outputs.

    Each point is one solve or training run of ``task`` (:func:`odeflow.sweeps.tasks.tasks`).
    Its named outputs become data variables whose dims are the grid parameters
    (in the order given), ``seed`` and the outputs' own (:mod:`odeflow.sweeps.outputs`:
    final logits, Fig. 6 entropy, ``J`` of Eqn 2, ``B_n`` of Eqn 98, ``t_0`` of CF2;
    :mod:`odeflow.sweeps.induction`: ``a(t)``, loss, ``p_S(t)``, ``w(t)``), beside
    the solver stats ``nfev``, ``njev``, ``nlu``, ``status``, ``wall_time``.

    Parameters
    ----------
    task : str or None
        The task kind; ``None`` when ``grid`` has a ``task`` list.
    grid : dict of str -> list
        Swept parameters: ``eta_y``, ``eta_z``, ``t_end`` (flows) or ``steps``
        (runs), any other parameter of the task, ``preset``, ``task``.
    seeds : list of int, optional
        Seeds of a stochastic task (``finite_t``, ``sgd``, ``adam``): a ``seed`` dim.
    settings : dict, optional
        Fixed values of parameters that are not swept.
    data : DataModel or str, optional
        The data model or a preset name (default ``syn-small``).
    backend, workers, client, scheduler, batch
        Where points run (:class:`~odeflow.sweeps.backends.PointRunner`):
        ``"processes"`` (``workers`` local processes, default every core),
        ``"serial"`` or ``"dask"`` (a ``dask.distributed`` ``client`` or
        ``scheduler`` address); ``batch`` points a task (default 1 on processes,
        :func:`~odeflow.sweeps.backends.auto_batch` on dask; a given one wins).
    store : str or Path, optional
        Where points are written as they finish (zarr; a ``.nc`` name or
        ``format="netcdf"``: netCDF once complete, needs h5netcdf and h5py,
        checked first). ``None``: memory only. ``format`` defaults from the suffix.
    resume, retry_failed : bool
        Continue the sweep in ``store`` (made for the same task, grid, seeds,
        settings and data) without running its stored points again (``retry_failed``:
        but those stored with an error); outputs added since are unknown for its
        points. Without ``resume`` a store that exists is refused.
    progress : bool, optional
        A progress bar over points (default: when stderr is a terminal).

    Returns
    -------
    xarray.Dataset
        ``attrs`` also hold ``points``, ``already_done``, ``computed_now``, ``failed``,
        ``batch``, ``wall_time`` of this call, and, resuming, ``journal_skipped``:
        ``[records, bytes]`` of damaged journal records (their points run again).

    Raises
    ------
    ValidationError
        Naming the field, before any point runs: unknown parameters, empty lists,
        non-numeric values, a store that exists (without ``resume``), is another
        sweep's or is being written, a damaged store, netCDF without h5netcdf; a
        grid over the limits of :func:`~odeflow.sweeps.spec.check_size`.
    SweepStopped
        The backend or the store failed (a worker died, the scheduler gone, the store
        unwritable, memory exhausted): stored points stay; ``resume=True`` runs the rest.
    """
    start = time.perf_counter()
    requires_xarray()
    spec = make_spec(task, grid, seeds, settings, data)  # refuses what cannot run here
    _announce(spec, progress)
    batch = None if batch is None else check_count(batch, "batch")
    runner = PointRunner(backend, workers=workers, client=client, scheduler=scheduler)
    path, fmt, target, done = _prepare_store(store, format, spec, resume)
    if done is not None:
        return done
    with runner:  # workers start before the store is opened (see PointRunner)
        ds, already, pending, batch = _run(spec, runner, path, progress, retry_failed, batch,
                                           resume)
    if fmt == "netcdf":
        write_netcdf(ds, target)
        remove_partial(target)
    return _label(ds, spec.size, already, pending, batch, time.perf_counter() - start)


def _label(ds, points: int, already: int, pending: int, batch: int, wall_time: float):
    """``ds`` with the counts of this call in its ``attrs`` (see :func:`sweep`'s Returns)."""
    failed = int(np.count_nonzero(ds["error"].values.astype(str) != ""))
    ds.attrs.update({"points": points, "already_done": already, "computed_now": pending,
                     "failed": failed, "batch": batch, "wall_time": wall_time})
    return ds


def _announce(spec, progress) -> None:
    """Say on stderr that a sweep of :data:`ANNOUNCE_POINTS` points or more is being set up."""
    if spec.size >= ANNOUNCE_POINTS and progress is not False:
        print(f"odeflow sweep: {spec.size:,} points, about "
              f"{memory_estimate(spec) / 2**20:,.0f} MiB of outputs in memory; setting up "
              "the store and the points before the first one runs", file=sys.stderr,
              flush=True)


def _prepare_store(store, format, spec, resume):  # noqa: A002
    """``(path, fmt, target, done)`` of a sweep's store, checked before any point runs.

    ``path`` is where points are written (the partial folder of a netCDF
    ``target``; None for memory only), ``fmt`` ``"zarr"``, ``"netcdf"`` or None;
    ``done`` the finished netCDF store when resuming one (nothing left to run),
    else None. Raises ValidationError (field ``store``) for a store that exists
    without ``resume``.
    """
    path, fmt = _store_path(store, format)
    if path is not None:
        check_store_target(path, fmt)  # before any folder is made or any point runs
    target = path
    if fmt == "netcdf":
        requires_netcdf()  # before any point runs, not after the last one
        if path.exists():
            if not resume:
                raise ValidationError("store", f"{str(path)!r} exists; pass resume=True "
                                      "(--resume) to read it or choose another path")
            done = open_store(path)
            check_spec_attrs(done.attrs, spec, path)
            return path, fmt, target, done
        path = partial_path(path)
    if path is not None and path.exists() and not resume:
        raise ValidationError("store", f"{str(path)!r} exists; pass resume=True "
                              "(--resume) to continue it or choose another path")
    return path, fmt, target, None


def _run(spec, runner, path, progress, retry_failed, batch, resume=False):
    """Take, then open or create the store, run the pending points;
    ``(dataset, done, run, batch)``."""
    arrays = SweepArrays(spec, path)
    if path is None:
        return _compute(arrays, runner, progress, retry_failed, batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    with store_lock(path):  # the folder is made and locked before anything is written
        existed = is_store_folder(path)
        if existed and not resume:  # made by a sweep that ended since sweep() looked
            raise ValidationError("store", f"{str(path)!r} exists; pass resume=True "
                                  "(--resume) to continue it or choose another path")
        missing = []
        if existed or not is_empty_folder(path):
            # a store of another sweep, a damaged store, a folder of other files
            missing = check_store_spec(path, spec)
        try:
            try:
                if not existed:
                    arrays.create()
                journal_folder(path)
                if existed:
                    add_missing_outputs(arrays, missing)
                    arrays.load()
                    arrays.fold()  # an empty journal before this run appends to it
            except OSError as exc:  # disk full, file-size limit: before any point ran
                if not existed:  # a store cut short: none, so that --resume makes it anew
                    shutil.rmtree(path, ignore_errors=True)
                stored = int(np.count_nonzero(arrays.values["computed"] > 0))
                raise SweepStopped(_write_cause(exc), stored, spec.size, str(path)) from exc
            result = _compute(arrays, runner, progress, retry_failed, batch)
            try:
                arrays.fold()
            except OSError as exc:  # the journal keeps every point: nothing is lost
                stored = int(np.count_nonzero(arrays.values["computed"] > 0))
                raise SweepStopped(_write_cause(exc), stored, spec.size, str(path)) from exc
            result[0].attrs["journal_skipped"] = list(arrays.skipped)
        finally:
            arrays.close()  # after a failure the journal keeps its points for --resume
    return result


def _compute(arrays, runner, progress, retry_failed, batch):
    """Run the points of ``arrays`` still pending; ``(dataset, done, run, batch)``."""
    spec = arrays.spec
    computed = arrays.values["computed"]
    pending_mask = computed == 0
    if retry_failed:
        pending_mask |= arrays.values["error"] != ""
    already = int(np.count_nonzero(computed > 0))
    plan = spec.to_json()
    pending = [(index, values) for index, values in spec.points() if pending_mask[index]]
    batch = runner.batch_size(len(pending), batch)
    bar = _bar(len(pending), progress)
    stored = int(np.count_nonzero(computed > 0))
    where = None if arrays.path is None else str(arrays.path)
    try:
        for index, outputs in runner.run(plan, pending, batch):
            new = bool(arrays.values["computed"][index] == 0)
            try:
                arrays.write(index, outputs)
            except OSError as exc:  # disk full, file-size limit, store removed, ...
                raise SweepStopped(_write_cause(exc), stored, spec.size, where) from exc
            stored += new
            if bar is not None:
                bar.update()
    except (Exception, MemoryError) as exc:
        cause = failure_cause(exc)
        if cause is None:
            raise
        raise SweepStopped(cause, stored, spec.size, where) from exc
    finally:
        if bar is not None:
            bar.close()
    return arrays.dataset(), already, len(pending), batch


def _write_cause(exc: OSError) -> str:
    """What :class:`SweepStopped` says of a store that cannot be written."""
    return f"cannot write the store ({exc.strerror or exc})"


def add_missing_outputs(arrays, missing) -> list:
    """Add to the store of ``arrays`` the outputs ``missing`` it was written without.

    A store written before an output existed (``njev``, ``nlu``, ``wall_time``:
    :data:`~odeflow.sweeps.outputs.ADDED_LATER`) is resumed as before; its
    stored points get that output's fill value (-1, NaN: unknown), the points
    computed now their own. ``missing`` comes from
    :func:`~odeflow.sweeps.reading.check_store_spec`, which refuses a store of
    another sweep, and any other missing output, untouched.
    """
    import zarr

    group = zarr.open_group(arrays.path, mode="r")
    if not missing:
        return missing
    ds = arrays.dataset()[missing]  # every point at the fill value
    ds = ds.drop_vars(list(ds.coords))
    ds.attrs = dict(group.attrs)  # xarray writes the group's attributes: keep them as they are
    encoding = chunk_encoding(ds, len(arrays.spec.dims), missing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr v3 consolidated-metadata notice
        ds.to_zarr(arrays.path, mode="a", encoding=encoding, consolidated=False)
    return missing


def _store_path(store, fmt):
    if fmt is not None and fmt not in FORMATS:
        raise ValidationError("format", f"must be one of {list(FORMATS)}, got {fmt!r}")
    if store is None:
        if fmt is not None:
            raise ValidationError("format", "needs a store path")
        return None, None
    try:
        path = Path(store)
    except TypeError:
        raise ValidationError("store", f"must be a path, got {store!r}") from None
    fmt = fmt or ("netcdf" if path.suffix == ".nc" else "zarr")
    return path, fmt


def _bar(total: int, enabled: bool | None):
    """Progress over ``total`` points: a bar on a terminal; off a terminal (``enabled``
    None: logs, pipes) a line every :data:`~odeflow.solver.integrate.PROGRESS_LOG_SECONDS`."""
    if total == 0 or enabled is False:
        return None
    if enabled is None and not sys.stderr.isatty():
        return _ProgressLines(total)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="sweep", unit="point")


class _ProgressLines:
    """Progress of a sweep off a terminal: ``odeflow sweep: K of N points, T s`` on stderr
    every :data:`~odeflow.solver.integrate.PROGRESS_LOG_SECONDS` (a short sweep says nothing)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.start = time.monotonic()
        self.next_line = self.start + PROGRESS_LOG_SECONDS

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now >= self.next_line:
            self.next_line = now + PROGRESS_LOG_SECONDS
            print(f"odeflow sweep: {self.done:,} of {self.total:,} points, "
                  f"{now - self.start:.0f} s", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass
