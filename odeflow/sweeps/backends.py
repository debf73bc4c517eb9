"""Where the points run: ``serial``, ``processes`` (local cores) or ``dask`` (a cluster).

Every backend calls the same function, :func:`compute_point`, with the sweep's
plan (plain data: the spec as JSON) and one point's parameter values, and
yields ``(index, outputs)`` as points finish, in any order; the caller writes
each one to the store as it arrives.

- ``processes`` uses :class:`concurrent.futures.ProcessPoolExecutor` (standard
  library; ``as_completed`` streams finished points to the writer); workers
  are forked (:func:`start_method`). A worker started afresh (``spawn``,
  ``forkserver``) registers again the families the parent registered by a call
  (:func:`call_registered`), so their tasks run there too.
- ``dask`` uses a :class:`dask.distributed.Client` (given, or connected to a
  scheduler address and closed afterwards) and
  :func:`distributed.as_completed`. Workers need odeflow installed; only the
  plan, the point values and the targets of the families registered by a call
  travel, no user code (a worker imports such a family's module itself). Its
  batch size is automatic unless given (:func:`auto_batch`).
"""

from __future__ import annotations

import json
import math
import os
import sys
from functools import lru_cache

import numpy as np

from odeflow.errors import ValidationError
from odeflow.sweeps.spec import SweepSpec
from odeflow.sweeps.tasks import point_times, task_kind

#: The backends by name.
BACKENDS = ("processes", "serial", "dask")

#: Automatic dask batches: about this many tasks per worker thread ...
TASKS_PER_THREAD = 4
#: ... and at most this many points per task (so points still stream to the store).
MAX_AUTO_BATCH = 25


@lru_cache(maxsize=8)
def _plan(plan_json: str) -> tuple:
    raw = json.loads(plan_json)
    spec = SweepSpec(raw["grid"], raw["seeds"], raw["settings"], raw["data"], raw["times"])
    return spec, np.asarray(spec.times, dtype=float), spec.sizes


def compute_point(plan_json: str, values: dict) -> dict:
    """Run one point and return its named outputs (see :mod:`odeflow.sweeps.outputs`).

    A point whose task raises any :class:`Exception` (a
    :class:`~odeflow.errors.SolveError`, a
    :class:`~odeflow.errors.ValidationError`, ``numpy.linalg.LinAlgError``, a
    ``ValueError`` of scipy, ...) is recorded with its error,
    ``"TypeName: message"`` (status -1), and the sweep goes on.
    :class:`MemoryError` and the exceptions that are not :class:`Exception`
    (``KeyboardInterrupt``, ``SystemExit``) propagate and stop the sweep.
    """
    spec, times, sizes = _plan(plan_json)
    kind = task_kind(values["task"])
    data = spec.data_models[values.get("preset") if spec.data is None else None]
    try:
        own = point_times(kind.family, times, values[kind.horizon])
        return kind.outputs.outputs(kind.run(data, values, own), times, sizes)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 (any failure of a point is that point's result)
        return kind.outputs.failed(exc, sizes)


def compute_points(plan_json: str, batch: list, families: tuple = ()) -> list:
    """:func:`compute_point` for every point values of ``batch`` (one task of a batched run),
    after registering the ``families`` (targets of :func:`call_registered`) this process
    lacks: a dask worker, started by no initializer of ours, learns them from its tasks."""
    if families:
        _register_missing(families)
    return [compute_point(plan_json, values) for values in batch]


def _register_missing(families: tuple) -> None:
    """Register each family class of ``families`` (``module:qualname`` targets) unless a
    family of that class is registered under its name already."""
    from odeflow.families import FAMILIES, load, register_family

    for target in families:
        try:
            cls = load(target)
        except (ImportError, AttributeError) as exc:
            raise ValidationError("backend", f"this worker cannot import the family class "
                                  f"{target} that the sweep's process registered by a call "
                                  f"({type(exc).__name__}: {exc}); define it in a module "
                                  "the workers can import (not the script run as "
                                  "__main__), or use an entry point") from None
        if type(FAMILIES.get(cls.name)) is not cls:
            register_family(cls)


def _ready() -> bool:
    return True


#: Seconds between a worker's checks that its parent is still there (:func:`_worker_init`).
WATCHDOG_SECONDS = 0.5

#: ``prctl`` option of Linux: the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


def call_registered(method: str) -> tuple[str, ...]:
    """Targets (``module:qualname``) of the families registered by a call
    (:func:`odeflow.families.register_family`) that workers started by ``method`` must
    register again: none for ``"fork"`` (a forked worker has the parent's registry); for
    ``"spawn"`` and ``"forkserver"`` every one, in registration order (a family of an
    installed entry point is read by the worker itself).

    Raises
    ------
    ValidationError
        Naming ``backend`` when such a family's class cannot be imported by its
        ``module:qualname`` (a class defined inside a function): a new interpreter
        could not find it.
    """
    from odeflow.families import FAMILIES, base, load

    if method == "fork":
        return ()
    targets = []
    for name, family in FAMILIES.items():
        if name not in base.BY_CALL:
            continue
        cls = type(family)
        target = f"{cls.__module__}:{cls.__qualname__}"
        try:
            found = load(target) is cls
        except (ImportError, AttributeError):
            found = False
        if not found:
            raise ValidationError("backend", f"the family {name!r} was registered by a call "
                                  f"but its class {target} cannot be imported by a worker "
                                  f"started by {method!r}; define it at the top of a module, "
                                  f"or use backend='serial'")
        targets.append(target)
    return tuple(targets)


def _worker_init(parent: int, families: tuple = ()) -> None:
    """Worker initializer: die with the parent ``parent`` however it ends; ignore Ctrl-C;
    register the ``families`` (targets of :func:`call_registered`) again.

    Ctrl-C is the parent's to handle (it stops the pool). A parent killed with
    SIGKILL (by a user, an OOM killer, a batch scheduler) cannot stop its
    pool, and a worker left behind would wait for work for ever, holding the
    caller's stdout and stderr open (``odeflow sweep ... | tee log`` would
    never end). So on Linux the worker asks the kernel for SIGKILL when its
    parent ends (``prctl(PR_SET_PDEATHSIG)``), and on any system a daemon
    thread checks every :data:`WATCHDOG_SECONDS` that its parent is still
    ``parent`` (an orphan is adopted by another process) and ends the worker
    at once (``os._exit``) if not.
    """
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the signal was asked for
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="odeflow-watchdog",
                     daemon=True).start()
    if families:
        _register_missing(families)


def _parent_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent ends; False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False  # pragma: no cover
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover (no prctl: the watchdog still runs)
        return False


def _watch_parent(parent: int) -> None:
    import time

    while os.getppid() == parent:
        time.sleep(WATCHDOG_SECONDS)
    os._exit(1)


class PointRunner:
    """A started backend: ``with PointRunner(...) as runner: runner.run(plan, points)``.

    For ``"processes"`` the workers are forked at entry (:func:`start_method`):
    forking costs milliseconds where starting interpreters costs seconds, and
    unlike ``spawn`` and ``forkserver`` it does not import the caller's script
    again in every worker (a script without ``if __name__ == "__main__"``
    would run its sweeps there).

    Parameters
    ----------
    backend : {"processes", "serial", "dask"}
    workers : int, optional
        Processes for ``"processes"`` (default: every local core).
    client : distributed.Client, optional
        For ``"dask"``: the client to submit to.
    scheduler : str, optional
        For ``"dask"``: a scheduler address (``tcp://host:8786``) to connect to
        when no client is given; the connection is closed at exit.
    """

    def __init__(self, backend: str, workers: int | None = None, client=None,
                 scheduler: str | None = None):
        if backend not in BACKENDS:
            raise ValidationError("backend", f"unknown backend {backend!r}; choose one of "
                                  f"{list(BACKENDS)}")
        if backend == "dask" and client is None and not scheduler:
            raise ValidationError("scheduler", "the dask backend needs a scheduler address "
                                  "(e.g. tcp://127.0.0.1:8786) or a Client")
        self.backend, self.workers, self.client, self.scheduler = (backend, workers, client,
                                                                    scheduler)
        self._pool = None
        self._own_client = False

    def __enter__(self):
        if self.backend == "processes":
            self._pool = _start_pool(self.workers or os.cpu_count() or 1)
        elif self.backend == "dask" and self.client is None:
            self.client = _connect(self.scheduler)
            self._own_client = True
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._own_client:
            self.client.close()
        return False

    def batch_size(self, points: int, batch: int | None = None) -> int:
        """Points per task for a run of ``points`` points: ``batch``, else the default.

        The default is 1 for ``"serial"`` and ``"processes"`` and
        :func:`auto_batch` over the cluster's worker threads for ``"dask"``.
        """
        if batch is not None:
            return batch
        if self.backend != "dask":
            return 1
        return auto_batch(points, _dask_threads(self.client))

    def run(self, plan_json: str, points: list, batch: int | None = None):
        """Yield ``(index, outputs)`` for every ``(index, values)`` in ``points`` as they finish.

        ``batch`` points make one task of the ``processes`` and ``dask``
        backends: fewer, longer tasks cut the per-task cost of the backend, but
        a batch's points reach the caller (and the store) together. ``None``:
        :meth:`batch_size` (automatic on dask).
        """
        if self.backend == "serial":
            for index, values in points:
                yield index, compute_point(plan_json, values)
            return
        batch = self.batch_size(len(points), batch)
        batches = [points[i:i + batch] for i in range(0, len(points), batch)]
        work = [[values for _, values in part] for part in batches]
        if self.backend == "processes":
            from concurrent.futures import as_completed

            futures = {self._pool.submit(compute_points, plan_json, part): i
                       for i, part in enumerate(work)}
            try:
                for future in as_completed(futures):
                    yield from _unbatch(batches[futures[future]], future.result())
            finally:
                for future in futures:
                    future.cancel()
        else:
            yield from _dask(self.client, plan_json, batches, work)


def failure_cause(exc: BaseException) -> str | None:
    """What failed, in a few words, when ``exc`` is a failure of the backend; else None.

    A backend failure stops the whole sweep (:class:`~odeflow.errors.SweepStopped`),
    unlike a point's own error, which :func:`compute_point` records: a
    worker process that died (``BrokenProcessPool``: killed, out of memory, a
    crash in native code), a dask worker that died running a task with no
    retries left (``KilledWorker``), a dask scheduler gone or unreachable
    (cancelled tasks, a closed connection), memory exhausted in the parent.
    """
    from concurrent.futures import CancelledError
    from concurrent.futures.process import BrokenProcessPool

    name = type(exc).__name__
    if isinstance(exc, BrokenProcessPool):
        return "a worker died"
    if name == "KilledWorker":
        return "a dask worker died and its task has no retries left (KilledWorker)"
    if isinstance(exc, CancelledError) or name in ("CancelledError", "FutureCancelledError"):
        return "the dask scheduler is gone (its tasks were cancelled)"
    if name == "CommClosedError":
        return "the connection to the dask scheduler was lost"
    if isinstance(exc, MemoryError):
        return "out of memory"
    return None


def auto_batch(points: int, threads: int) -> int:
    """The dask backend's default points per task for ``points`` points on ``threads``.

    About :data:`TASKS_PER_THREAD` tasks per worker thread (so the load still
    balances when points differ in cost), at most :data:`MAX_AUTO_BATCH` points
    per task (so finished points keep streaming to the store):
    ``clip(ceil(points / (4 threads)), 1, 25)``. A dask task costs milliseconds of
    scheduling and transfer whatever it computes (``docs/sweeps.md``); a large grid
    gets 25 points a task, a grid of fewer than ``4 threads`` points one point a task.
    """
    threads = max(1, int(threads))
    return int(min(MAX_AUTO_BATCH, max(1, math.ceil(points / (TASKS_PER_THREAD * threads)))))


def _dask_threads(client) -> int:
    """Worker threads of ``client``'s cluster now (0 while no worker has joined)."""
    try:
        return int(sum(client.nthreads().values()))
    except Exception:  # noqa: BLE001 (a scheduler that cannot say: assume one thread)
        return 1


def _unbatch(batch, results):
    for (index, _), outputs in zip(batch, results, strict=True):
        yield index, outputs


def start_method() -> str:
    """How ``processes`` starts its workers: ``"fork"`` on Linux, whatever runs.

    A fork copies only the calling thread; the other threads' locks are copied
    as they are. The one thread a sweep's parent has besides its own is zarr's
    event loop (started when the store is first used), and the workers never
    use zarr: they compute points (numpy, scipy) and return them, and the
    parent writes the store. Elsewhere (macOS: system libraries that are not
    fork-safe) workers are forked only from a single-threaded process, else
    they come from a ``forkserver`` (or ``spawn``), which re-imports the main
    script in each worker (the script needs ``if __name__ == "__main__"``).
    """
    import multiprocessing
    import threading

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and (sys.platform.startswith("linux")
                              or threading.active_count() == 1):
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"  # pragma: no cover


def _start_pool(workers: int):
    import multiprocessing
    import warnings
    from concurrent.futures import ProcessPoolExecutor

    method = start_method()
    context = multiprocessing.get_context(method)
    if method == "forkserver":  # pragma: no cover (not on Linux)
        context.set_forkserver_preload([__name__])
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_worker_init,
                               initargs=(os.getpid(), call_registered(method)))
    with warnings.catch_warnings():
        # Python >= 3.12 warns on any fork of a multi-threaded process; zarr's idle
        # event-loop thread is not used by the workers (see start_method)
        warnings.filterwarnings("ignore", message=".*multi-threaded, use of fork",
                                category=DeprecationWarning)
        # start every worker now (one task each), not at the first point
        for future in [pool.submit(_ready) for _ in range(workers)]:
            future.result()
    return pool


def _connect(scheduler: str):
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover
        raise ValidationError("backend", "the dask backend needs dask.distributed: "
                              "pip install 'odeflow[sweep]'") from None
    try:
        return Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ValidationError("scheduler", f"cannot connect to {scheduler!r}: {exc}") from None


def _dask(client, plan_json, batches, work):
    from concurrent.futures import CancelledError

    from distributed import as_completed

    families = call_registered("spawn")  # a dask worker is another interpreter
    futures = client.map(compute_points, [plan_json] * len(work), work,
                         [families] * len(work), pure=False)
    which = {f.key: i for i, f in enumerate(futures)}
    try:
        for future, results in as_completed(futures, with_results=True):
            if future.status != "finished":  # cancelled (scheduler gone): its exception
                raise results if isinstance(results, BaseException) else \
                    CancelledError(f"task {future.status}")
            yield from _unbatch(batches[which[future.key]], results)
    finally:
        client.cancel(futures)
