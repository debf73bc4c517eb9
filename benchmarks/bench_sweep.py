"""Wall time of a 400-point sweep: serial against processes, and the dask backend's overhead.

The grid is 20 x 20 ``(eta_Y, eta_Z)`` (log-spaced, ``eta_Y`` in [0.1, 10],
``eta_Z`` in [0.01, 1]) of the exact flow on ``syn-small`` to ``t = 1e4``, as
in Figs. 3 and 9 of the paper. Printed, side by side in one run (best of
``--repeats``):

1. serial and ``processes`` on 2 workers, each writing a zarr store, and the
   speed-up (goal: >= 1.8 on 2 cores); the same without a store (the
   computation alone), and what the store's writes cost per point;
2. the per-point overhead of the dask backend against serial, without a
   store: a ``LocalCluster`` with one single-threaded worker process on
   loopback runs the same points one at a time, so
   ``(dask - serial) / points`` is what dask adds per point (goal: < 5 ms);
   the same on near-empty points (``t_end = 1e-3``) shows the floor; with
   ``batch=10`` ten points make one dask task, and with the default (automatic)
   batch about four tasks go to each worker thread.

Usage::

    python benchmarks/bench_sweep.py [--repeats 3] [--side 20] [--skip-dask]

Run it on a quiet machine: other processes on the two cores slow the parallel
run more than the serial one.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import odeflow


def timed(repeats: int, run) -> float:
    """Best wall time of ``repeats`` calls of ``run(i)``."""
    best = float("inf")
    for i in range(repeats):
        start = time.perf_counter()
        run(i)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--side", type=int, default=20, help="grid side (20: 400 points)")
    parser.add_argument("--t-end", type=float, default=1e4)
    parser.add_argument("--skip-dask", action="store_true")
    args = parser.parse_args(argv)
    grid = {"eta_y": np.geomspace(0.1, 10, args.side).tolist(),
            "eta_z": np.geomspace(0.01, 1, args.side).tolist()}
    n = args.side ** 2
    settings = {"t_end": args.t_end}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"odeflow {odeflow.__version__}, numpy {np.__version__}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus, load average {load:.2f}; "
          f"{n} points, exact flow, syn-small, t_end={args.t_end:g}; best of {args.repeats}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        def run_store(backend, keep=True, **kw):
            def run(i):
                store = tmp / f"{backend}-{i}.zarr" if keep else None
                ds = odeflow.sweep("exact", grid, settings=settings, backend=backend,
                                   store=store, progress=False, **kw)
                assert ds.attrs["failed"] == 0, ds.attrs
                if keep:
                    shutil.rmtree(store)
            return run

        odeflow.sweep("exact", {"eta_z": [0.1]}, settings=settings, backend="serial")  # warm
        serial = timed(args.repeats, run_store("serial"))
        procs = timed(args.repeats, run_store("processes", workers=2))
        print(f"{'backend':<28s}{'wall [s]':>10s}{'per point [ms]':>16s}")
        print(f"{'serial (zarr store)':<28s}{serial:10.2f}{1e3 * serial / n:16.2f}")
        print(f"{'processes x2 (zarr store)':<28s}{procs:10.2f}{1e3 * procs / n:16.2f}")
        print(f"speed-up processes x2 / serial: {serial / procs:.2f} (goal >= 1.8)")
        serial_mem = timed(args.repeats, run_store("serial", keep=False))
        procs_mem = timed(args.repeats, run_store("processes", keep=False, workers=2))
        print(f"{'serial (no store)':<28s}{serial_mem:10.2f}{1e3 * serial_mem / n:16.2f}")
        print(f"{'processes x2 (no store)':<28s}{procs_mem:10.2f}{1e3 * procs_mem / n:16.2f}")
        print(f"speed-up without a store: {serial_mem / procs_mem:.2f}; the store's writes "
              f"cost {1e3 * (serial - serial_mem) / n:.1f} ms per point in serial")
        if args.skip_dask:
            return
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None) as cluster, \
                Client(cluster) as client:
            for label, t_end in (("exact flow", args.t_end), ("near-empty points", 1e-3)):
                kw = {"settings": {"t_end": t_end}, "progress": False}
                odeflow.sweep("exact", {"eta_z": [0.1]}, backend="dask", client=client,
                              **kw)  # warm the worker
                ser = timed(args.repeats, lambda i, kw=kw: odeflow.sweep(
                    "exact", grid, backend="serial", **kw))
                for batch in (1, 10, None):
                    dsk = timed(args.repeats, lambda i, kw=kw, b=batch: odeflow.sweep(
                        "exact", grid, backend="dask", client=client, batch=b, **kw))
                    shown = "auto (the default)" if batch is None else batch
                    print(f"{label}, no store: serial {ser:.2f} s, dask (1 worker process, "
                          f"loopback, batch={shown}) {dsk:.2f} s; dask overhead per point "
                          f"{1e3 * (dsk - ser) / n:.2f} ms (goal < 5)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
