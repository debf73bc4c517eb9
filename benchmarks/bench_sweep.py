"""Wall time of a 400-point sweep: serial against processes, and the dask backend's overhead.

The grid is 20 x 20 ``(eta_Y, eta_Z)`` (log-spaced, ``eta_Y`` in [0.1, 10],
``eta_Z`` in [0.01, 1]) of the exact flow on ``syn-small`` to ``t = 1e4``, as
in Figs. 3 and 9 of the paper. Printed, side by side in one run: each of
``--repeats`` rounds runs every contender once, in turn (so a slow spell of
the shared machine touches them alike); the minimum and median wall time of
each, and speed-ups and overheads per round (the minimum and median of the
rounds' ratios):

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
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import odeflow


def side_by_side(repeats: int, runs: dict) -> dict:
    """Wall times of ``repeats`` rounds; each round calls every ``run(i)`` of ``runs`` once,
    in turn, so a slow spell of the machine touches every contender alike."""
    times = {name: [] for name in runs}
    for i in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run(i)
            times[name].append(time.perf_counter() - start)
    return times


def summary(times: list) -> str:
    return f"{min(times):8.2f}{statistics.median(times):8.2f}"


def ratios(numerator: list, denominator: list) -> str:
    """min / median of the per-round ratios (each from one round's two runs)."""
    r = [a / b for a, b in zip(numerator, denominator, strict=True)]
    return f"{min(r):.2f} / {statistics.median(r):.2f}"


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
          f"{n} points, exact flow, syn-small, t_end={args.t_end:g}; {args.repeats} rounds, "
          "each running every contender once in turn")
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        solve_time = {"serial": [], "processes": []}  # sum of the points' own wall_time

        def run_store(backend, keep=True, **kw):
            def run(i):
                store = tmp / f"{backend}-{i}.zarr" if keep else None
                ds = odeflow.sweep("exact", grid, settings=settings, backend=backend,
                                   store=store, progress=False, **kw)
                assert ds.attrs["failed"] == 0, ds.attrs
                solve_time[backend].append(float(ds.wall_time.sum()))
                if keep:
                    shutil.rmtree(store)
            return run

        # warm: imports, zarr's first use and the processes backend's first pool
        for backend in ("serial", "processes"):
            odeflow.sweep("exact", {"eta_z": [0.1]}, settings=settings, backend=backend,
                          store=tmp / f"warm-{backend}.zarr", workers=2)
        t = side_by_side(args.repeats, {
            "serial (zarr store)": run_store("serial"),
            "processes x2 (zarr store)": run_store("processes", workers=2),
            "serial (no store)": run_store("serial", keep=False),
            "processes x2 (no store)": run_store("processes", keep=False, workers=2)})
        print(f"{'backend':<28s}{'wall [s]: min  median':>24s}{'per point [ms]':>16s}")
        for name, times in t.items():
            print(f"{name:<28s}{summary(times):>24s}{1e3 * min(times) / n:16.2f}")
        print("speed-up processes x2 / serial, per round (min / median): with a zarr store "
              f"{ratios(t['serial (zarr store)'], t['processes x2 (zarr store)'])} "
              "(goal >= 1.8); without a store "
              f"{ratios(t['serial (no store)'], t['processes x2 (no store)'])}")
        cost = [a - b for a, b in zip(t["serial (zarr store)"], t["serial (no store)"],
                                      strict=True)]
        print(f"the store's writes cost {1e3 * statistics.median(cost) / n:.1f} ms per point "
              "in serial (median over rounds)")
        ser, par = (statistics.median(solve_time[k]) for k in ("serial", "processes"))
        print(f"sum of the points' own solve times (median over runs): serial {ser:.2f} s, "
              f"processes x2 {par:.2f} s ({100 * (par / ser - 1):+.1f} % with both cores busy)")
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
                runs = {"serial": lambda i, kw=kw: odeflow.sweep(
                    "exact", grid, backend="serial", **kw)}
                for batch in (1, 10, None):
                    runs[batch] = lambda i, kw=kw, b=batch: odeflow.sweep(
                        "exact", grid, backend="dask", client=client, batch=b, **kw)
                t = side_by_side(args.repeats, runs)
                ser = t.pop("serial")
                for batch, dsk in t.items():
                    shown = "auto (the default)" if batch is None else batch
                    extra = [1e3 * (d - s) / n for d, s in zip(dsk, ser, strict=True)]
                    print(f"{label}, no store: serial {min(ser):.2f} s, dask (1 worker "
                          f"process, loopback, batch={shown}) {min(dsk):.2f} s (min); dask "
                          f"overhead per point, per round (min / median) {min(extra):.2f} / "
                          f"{statistics.median(extra):.2f} ms (goal < 5)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
