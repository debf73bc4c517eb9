"""``odeflow sweep``: run a task over a parameter grid, write the store, print a summary."""

from __future__ import annotations

import sys

from odeflow.cli.common import add_mkdir_argument, check_rows, typed_path_folder
from odeflow.cli.tables import WIDTH, add_wide_argument, blocks, width_of, wrap
from odeflow.errors import ValidationError


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a solve or training task over a parameter grid",
        description="Run the task of a [sweep] table over its grid on local processes "
                    "(default), serially, or on a dask cluster; every finished point is "
                    "written to the store (zarr, or netCDF for a .nc name) at once, so an "
                    "interrupted sweep continues with --resume. See docs/sweeps.md.")
    p.add_argument("config", metavar="CONFIG.toml", help="file with a [sweep] table")
    p.add_argument("--backend", choices=["processes", "serial", "dask"],
                   help="where points run (config, else processes)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="dask scheduler address, e.g. tcp://127.0.0.1:8786 (implies dask)")
    p.add_argument("--workers", type=int, metavar="N", help="processes (all local cores)")
    p.add_argument("--batch", type=int, metavar="N",
                   help="points per task on processes/dask (1; larger cuts per-task cost)")
    p.add_argument("--out", metavar="STORE", help="store path (config, else "
                   "results/<config>.zarr); a .nc name writes netCDF. An existing store is "
                   "refused unless --resume continues it")
    add_mkdir_argument(p)
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in STORE: stored points are not run again")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume, also run again the points stored with an error")
    p.add_argument("--rows", type=int, default=20, help="points shown in the table (20; "
                   "0: no table)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_wide_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from odeflow.sweeps import sweep
    from odeflow.sweeps.config import load_sweep_config
    from odeflow.sweeps.store import check_store_target

    rows = check_rows(args.rows)
    try:
        kwargs = load_sweep_config(args.config)
    except ValidationError as exc:
        raise in_config_words(exc) from None
    label = str(args.config).rsplit("/", 1)[-1].removesuffix(".toml")
    if args.backend:
        kwargs["backend"] = args.backend
    if args.scheduler:
        if args.backend not in (None, "dask"):
            raise ValidationError("scheduler", f"is for the dask backend, not {args.backend!r}")
        kwargs["backend"] = "dask"
        kwargs["scheduler"] = args.scheduler
    if args.workers is not None:
        if args.workers < 1:
            raise ValidationError("workers", f"must be >= 1, got {args.workers}")
        kwargs["workers"] = args.workers
    if args.batch is not None:
        kwargs["batch"] = args.batch
    kwargs["store"] = args.out or kwargs.get("store") or f"results/{label}.zarr"
    fmt = kwargs.get("format")
    field = "out" if args.out else "store"
    # before any worker starts: zarr would meet a dangling link or a file with a traceback
    check_store_target(kwargs["store"], fmt if isinstance(fmt, str) else None, field)
    if args.out or kwargs["store"] != f"results/{label}.zarr":  # a path the user typed
        typed_path_folder(kwargs["store"], field, args.mkdir)
    if not args.resume:
        # named "store" as the sweep's own refusal is when another sweep made it meanwhile
        refuse_existing_store(kwargs["store"], fmt if isinstance(fmt, str) else None, "store")
    if kwargs.get("backend") == "dask":
        quiet_dask_client()
    try:
        ds = sweep(**kwargs, resume=args.resume, retry_failed=args.retry_failed,
                   progress=False if args.no_progress else None)
    except ValidationError as exc:
        raise in_config_words(exc) from None
    except KeyboardInterrupt:
        print(f"odeflow sweep: interrupted; every finished point is in {kwargs['store']}: "
              "run the same command with --resume to continue", file=sys.stderr)
        return 130
    a = ds.attrs
    if "points" not in a:  # a finished netCDF sweep, read back by --resume
        print(f"odeflow sweep: {kwargs['store']} holds the finished sweep; nothing left to run")
        a = {**a, "points": int(ds["computed"].size), "already_done": int(ds["computed"].size),
             "computed_now": 0, "failed": int((ds["error"].values.astype(str) != "").sum()),
             "wall_time": 0.0}
    records, size = a.get("journal_skipped", (0, 0))
    if records:
        print(f"odeflow sweep: {kwargs['store']}: skipped {records} damaged journal "
              f"record(s) ({size} bytes); their points were computed again", file=sys.stderr)
    width = width_of(args)
    counts = (f"(already done {a['already_done']}, computed now {a['computed_now']}, "
              f"failed {a['failed']}), wall={a['wall_time']:.2f}s")
    head = wrap(f"odeflow sweep: {label}, task={kwargs.get('task', 'exact')}, "
                f"backend={kwargs.get('backend', 'processes')}, points={a['points']}", width)
    print(f"{head} {counts}" if width is None else f"{head}\n  {counts}")
    table = summary_table(ds, rows, width)
    if table:
        print(table)
    print(f"saved {kwargs['store']}")
    return 3 if a["failed"] else 0


def refuse_existing_store(store, fmt: str | None, field: str) -> None:
    """A sweep writes a new store: one that exists (or a netCDF sweep's partial store) is
    refused, pointing to ``--resume``, before any point runs."""
    from pathlib import Path

    from odeflow.sweeps.store import partial_path

    path = Path(store)
    netcdf = (fmt or ("netcdf" if path.suffix == ".nc" else "zarr")) == "netcdf"
    for candidate in (path, *([partial_path(path)] if netcdf else [])):
        if candidate.exists():
            raise ValidationError(field, f"{str(candidate)!r} exists: add --resume to continue "
                                  "that sweep (its finished points are kept), or choose "
                                  "another --out")


#: Config keys users write for another one: field of the error -> what to write instead.
CONFIG_HINTS = {
    "grid.seed": "seeds are not a grid parameter: list them as [sweep] seeds = [0, 1, 2]",
    "settings.seed": "give the seeds as [sweep] seeds = [0, 1, 2]",
    "grid.seeds": "list the seeds as [sweep] seeds = [0, 1, 2]",
    "settings.seeds": "list the seeds as [sweep] seeds = [0, 1, 2]",
}


def in_config_words(exc: ValidationError) -> ValidationError:
    """A sweep's error in the config file's terms: ``[sweep.grid] seed`` points to
    ``[sweep] seeds``, a task parameter put in ``[sweep]`` to ``[sweep.settings]``, and
    the sweep's ``resume=True`` is the command's ``--resume``."""
    reason = exc.reason.replace("pass resume=True (--resume)", "add --resume")
    field = exc.field
    if field in CONFIG_HINTS:
        reason = f"{reason}; {CONFIG_HINTS[field]}"
    elif field.startswith("sweep.") and reason.startswith("unknown key"):
        reason += ("; a task's parameters go in [sweep.settings] (fixed) or [sweep.grid] "
                   "(swept)")
    if field.startswith(("grid.", "settings.")):
        field = f"sweep.{field}"
    return ValidationError(field, reason)


def quiet_dask_client() -> None:
    """Keep dask's client from logging tracebacks on stderr (one line per failure, see
    :class:`~odeflow.errors.SweepStopped`): a scheduler that goes away makes it log its
    failed reconnection with a traceback before odeflow reports the stop."""
    import logging

    try:
        import distributed  # noqa: F401  (its logging set-up first, then the level)
    except ImportError:  # reported by the backend itself
        return
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)


def summary_table(ds, rows: int = 20, width: int | None = WIDTH) -> str:
    """One line per point (the first ``rows``): parameters, status, nfev, t_0 (mean over
    classes, where the task has it), the final value of every output that is one series
    over time (``entropy``, ``J``; ``a``, ``population_loss``); then the failed points.
    ``rows=0``: the failed points only. Columns past ``width`` continue in a further
    block led by the parameters, failure lines wrap (None: one block, unwrapped)."""
    import numpy as np

    from odeflow.sweeps.reading import at_end

    dims = [d for d in ds["computed"].dims]
    flat = {d: np.broadcast_to(ds[d].values.reshape([-1 if e == d else 1 for e in dims]),
                               ds["computed"].shape).ravel() for d in dims}
    series = [name for name in ds.data_vars if ds[name].dims == (*dims, "time")]
    final = {name: at_end(ds[name]).values.ravel() for name in series}
    t0 = None
    if "t0" in ds.data_vars:
        t0 = ds["t0"].mean("class", skipna=True).values.ravel() if ds.sizes["class"] \
            else np.full(ds["computed"].size, np.nan)
    header = [*dims, "status", "nfev", *(["t0"] if t0 is not None else []),
              *(f"{name}(end)" for name in series)]
    errors = ds["error"].values.ravel()
    nfev = ds["nfev"].values.ravel()
    n = errors.size
    body = []
    for i in range(min(rows, n)):
        cells = [_cell(flat[d][i]).strip() for d in dims]
        cells += ["failed" if errors[i] else "ok", f"{int(nfev[i])}"]
        cells += [f"{t0[i]:.4g}"] if t0 is not None else []
        cells += [f"{final[name][i]:.6g}" for name in series]
        body.append(cells)
    lines = blocks(header, body, keys=len(dims), width=width) if rows else []
    if 0 < rows < n:
        lines.append(f"... {n - rows} more points (--rows to show more)")
    failed = np.flatnonzero(errors != "")
    for i in failed[:10]:
        where = ", ".join(f"{d}={_cell(flat[d][i]).strip()}" for d in dims)
        lines.append(wrap(f"failed: {where}: {errors[i]}", width))
    if failed.size > 10:
        lines.append(f"... {failed.size - 10} more failed points")
    return "\n".join(lines)


def _cell(value) -> str:
    import numpy as np

    if isinstance(value, (float, np.floating)):
        return f"{value:12.4g}"
    return f"{value!s:>12s}"
