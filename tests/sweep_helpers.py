"""Helpers shared by the sweep tests: a 20-point sweep
config, comparing two sweep datasets number for number, and watching sweeps in
subprocesses (their stored points, their workers, a local dask cluster)."""

from __future__ import annotations

import time

import numpy as np

from odeflow.sweeps.journal import read_journal
from odeflow.sweeps.outputs import VARYING

#: A 20-point sweep of the exact flow on syn-small (about 4 s serially; 0.6 s of
#: solves on a quiet machine): long enough to break midway.
TWENTY_POINTS = """
[sweep]
task = "exact"
backend = "serial"
[sweep.grid]
eta_y = [0.25, 0.5, 1.0, 2.0]
eta_z = [0.05, 0.1, 0.2, 0.4, 0.8]
[sweep.settings]
t_end = 1e4
"""


def assert_same_numbers(a, b, skip=VARYING):
    """Every data variable of ``a`` and ``b`` equal bit for bit (NaN where the other has NaN;
    strings as ``str``), except ``skip`` (default: the timings, which differ run to run),
    and the same coordinates."""
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        if name in skip:
            continue
        x, y = a[name].values, b[name].values
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), name
        else:
            assert np.array_equal(x.astype(str) if x.dtype.kind in "OU" else x,
                                  y.astype(str) if y.dtype.kind in "OU" else y), name
    for name in a.coords:
        assert np.array_equal(a[name].values, b[name].values), name


def wait_for_points(proc, store, n: int, patience: float = 120.0) -> bool:
    """Wait until ``n`` points are in the journal of ``store`` while the sweep ``proc``
    (a :class:`subprocess.Popen`) runs; False if it ended first or ``patience`` s passed."""
    deadline = time.monotonic() + patience
    while len(read_journal(store)) < n:
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def alive(pids) -> list:
    """The processes of ``pids`` still running (a zombie has ended); needs psutil."""
    import psutil

    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def local_cluster(**config):
    """A dask ``LocalCluster`` of two single-threaded worker processes on loopback,
    made under the dask ``config`` (e.g. ``distributed.scheduler.allowed-failures``)."""
    import dask
    import distributed

    with dask.config.set(config):
        return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                        host="127.0.0.1", dashboard_address=None,
                                        scheduler_port=0)
