"""Fault campaign of ``odeflow sweep``: kills, backend failures, racing starts, write limits.

Every trial runs the project's own command line in subprocesses on a 20-point
sweep of the exact flow on ``syn-small`` (4 x 5 learning rates to ``t = 1e4``
with BDF, about 2 s of solves serially), breaks it, resumes it with ``--resume`` where it stopped,
and compares the store with an uninterrupted serial run, bit for bit:

1. ``--kills N``: SIGKILL of the parent of a ``--backend processes --workers 2``
   sweep at a random moment (start-up, store creation, points, the final
   fold), then ``--resume``;
2. ``--worker-kills N``: SIGKILL of one worker of such a sweep once a point is
   stored (expected: exit 3 and one line with the resume hint);
3. ``--dask N``: a local dask cluster on loopback with
   ``distributed.scheduler.allowed-failures = 0`` whose workers are killed
   mid-sweep (exit 3, ``KilledWorker``), and a cluster closed mid-sweep
   (exit 3, the scheduler gone); each N times;
4. ``--races N``: two sweeps started on one store at a random offset of
   0-1.5 s (expected: one exit 0, one exit 2 naming ``store``);
5. ``--limits N``: a sweep under a random file-size limit of 4-60 kB
   (``RLIMIT_FSIZE``, as ``prlimit --fsize``; a full disk takes the same
   path), expected exit 3 (or 0 if the limit did not bite).

Printed: the trials of each kind and their exit codes, then the counts the
campaign aims at 0: points lost (a point stored before the fault whose values
changed or vanished afterwards, or a resumed store that differs from the
uninterrupted run), processes left behind (workers of a killed parent alive 5 s
later), callers hung on pipes (a killed sweep's output not at its end 5 s after
that: a worker left holds it), tracebacks (in any stderr), unexpected exit
codes.

Usage::

    python benchmarks/fault_campaign.py [--kills 8] [--worker-kills 3] [--dask 2]
                                        [--races 8] [--limits 4] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from odeflow.sweeps.journal import read_journal
from odeflow.sweeps.outputs import VARYING

#: The campaign's sweep: the exact flow on syn-small over 4 x 5 learning rates with BDF.
CONFIG = """
[sweep]
task = "exact"
backend = "serial"
[sweep.grid]
eta_y = [0.25, 0.5, 1.0, 2.0]
eta_z = [0.05, 0.1, 0.2, 0.4, 0.8]
[sweep.settings]
t_end = 1e4
method = "BDF"
"""


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


class Campaign:
    """Runs the trials in ``folder``; keeps the counts."""

    def __init__(self, folder: Path, seed: int):
        self.folder = folder
        self.config = folder / "grid.toml"
        self.config.write_text(CONFIG)
        self.rng = random.Random(seed)
        self.trials = Counter()
        self.codes = {}
        self.lost = 0
        self.left_behind = 0
        self.hung = 0
        self.tracebacks = 0
        self.unexpected = []
        self.n = 0
        done = self.cli(self.store("reference"), "--backend", "serial")
        assert done.returncode == 0, done.stderr
        self.reference = self.read(self.store("reference"))

    # ------------------------------------------------------------- helpers
    def store(self, name: str) -> Path:
        return self.folder / f"{name}.zarr"

    def new_store(self, kind: str) -> Path:
        self.n += 1
        return self.store(f"{kind}-{self.n}")

    def command(self, store, *extra) -> list:
        return [sys.executable, "-m", "odeflow", "sweep", str(self.config), "--out",
                str(store), "--no-progress", *extra]

    def start(self, store, *extra, **popen):
        return subprocess.Popen(self.command(store, *extra), cwd=self.folder, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)

    def cli(self, store, *extra, **popen):
        proc = self.start(store, *extra, **popen)
        out, err = proc.communicate()
        self.look(err)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def look(self, err: str) -> None:
        self.tracebacks += err.count("Traceback")

    def expect(self, kind: str, code: int, allowed, err: str = "") -> None:
        self.trials[kind] += 1
        self.codes.setdefault(kind, Counter())[code] += 1
        if code not in allowed:
            self.unexpected.append(f"{kind}: exit {code}: {err.strip()[-300:]}")

    @staticmethod
    def read(store: Path):
        from odeflow.sweeps import open_store

        return open_store(store)

    def stored_points(self, store: Path) -> dict:
        """``index -> values`` of every point stored now (none if there is no store)."""
        if not store.exists():
            return {}
        try:
            ds = self.read(store)
        except Exception:  # noqa: BLE001 (a store killed while being created: nothing stored)
            return {}
        done = np.argwhere(ds.computed.values > 0)
        return {tuple(i): point_values(ds, tuple(i)) for i in done}

    def resume_and_check(self, kind: str, store: Path, *extra) -> None:
        """Resume ``store``; count points lost against what it held and the reference."""
        before = self.stored_points(store)
        done = self.cli(store, "--resume", *extra)
        self.expect(f"{kind} (resume)", done.returncode, (0,), done.stderr)
        if done.returncode != 0:
            self.lost += 20 - len(before)
            return
        final = self.read(store)
        lost = {i for i, values in before.items() if not same(values, point_values(final, i))}
        lost |= {tuple(i) for i in np.argwhere(final.computed.values != 1)}
        lost |= differing(final, self.reference)
        self.lost += len(lost)

    # -------------------------------------------------------------- trials
    def parent_kill(self) -> None:
        import psutil

        store = self.new_store("kill")
        proc = self.start(store, "--backend", "processes", "--workers", "2")
        at = time.monotonic() + self.rng.uniform(0.0, 5.0)
        workers = set()
        while time.monotonic() < at and proc.poll() is None:
            try:
                workers |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(5.0)
        left = alive(workers)
        self.left_behind += len(left)
        try:  # the caller reads the output to its end: a worker left holds the pipes
            _, err = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.hung += 1
            for pid in alive(left):
                os.kill(pid, signal.SIGKILL)
            _, err = proc.communicate()
        for pid in alive(left):
            os.kill(pid, signal.SIGKILL)
        self.look(err)
        self.expect("parent SIGKILL", proc.returncode, (-9, 0), err)
        self.resume_and_check("parent SIGKILL", store)

    def worker_kill(self) -> None:
        import psutil

        store = self.new_store("worker")
        proc = self.start(store, "--backend", "processes", "--workers", "2")
        if wait_for_points(proc, store, 1):
            children = psutil.Process(proc.pid).children()
            if children:
                os.kill(self.rng.choice(children).pid, signal.SIGKILL)
        _, err = proc.communicate()
        self.look(err)
        self.expect("worker SIGKILL", proc.returncode, (3,), err)
        self.resume_and_check("worker SIGKILL", store)

    def dask_kill(self) -> None:
        import distributed

        cluster = local_cluster(**{"distributed.scheduler.allowed-failures": 0})
        store = self.new_store("dask-kill")
        try:
            with distributed.Client(cluster) as client:
                pids = list(client.run(os.getpid).values())
                proc = self.start(store, "--scheduler", cluster.scheduler_address,
                                  "--batch", "1")
                if wait_for_points(proc, store, self.rng.randint(1, 8)):
                    for pid in pids:
                        os.kill(pid, signal.SIGKILL)
                _, err = proc.communicate()
        finally:
            cluster.close()
        self.look(err)
        self.expect("dask worker killed, allowed-failures=0", proc.returncode, (3,), err)
        self.resume_and_check("dask worker killed", store, "--backend", "serial")

    def dask_close(self) -> None:
        cluster = local_cluster()
        store = self.new_store("dask-close")
        try:
            proc = self.start(store, "--scheduler", cluster.scheduler_address, "--batch", "1")
            if wait_for_points(proc, store, self.rng.randint(1, 8)):
                cluster.close()
            _, err = proc.communicate()
        finally:
            cluster.close()
        self.look(err)
        self.expect("dask scheduler closed", proc.returncode, (3,), err)
        self.resume_and_check("dask scheduler closed", store, "--backend", "serial")

    def race(self) -> None:
        store = self.new_store("race")
        first = self.start(store, "--backend", "serial")
        time.sleep(self.rng.uniform(0.0, 1.5))
        resume = self.rng.random() < 0.5
        second = self.start(store, "--backend", "serial", *(["--resume"] if resume else []))
        ends = []
        for proc in (first, second):
            _, err = proc.communicate()
            self.look(err)
            ends.append((proc.returncode, err))
        codes = sorted(code for code, _ in ends)
        self.trials["racing starts"] += 1
        self.codes.setdefault("racing starts", Counter())[tuple(codes)] += 1
        if codes != [0, 2] and not (resume and codes == [0, 0]):
            self.unexpected.append(f"racing starts: exits {codes}: {ends}")
        for code, err in ends:
            if code == 2 and "store" not in err:
                self.unexpected.append(f"racing starts: refusal without 'store': {err}")
        final = self.read(store)
        self.lost += len(differing(final, self.reference) |
                         {tuple(i) for i in np.argwhere(final.computed.values != 1)})

    def write_limit(self) -> None:
        store = self.new_store("limit")
        limit = self.rng.randint(4_000, 60_000)

        def small_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        done = self.cli(store, "--backend", "serial", preexec_fn=small_files)
        self.expect("write limit", done.returncode, (3, 0), done.stderr)
        if done.returncode == 3 and "rerun with --resume" not in done.stderr:
            self.unexpected.append(f"write limit: no resume hint: {done.stderr}")
        self.resume_and_check("write limit", store)


def point_values(ds, index: tuple) -> dict:
    return {name: ds[name].values[index] for name in ds.data_vars if name not in VARYING}


def same(a: dict, b: dict) -> bool:
    return all(np.array_equal(np.asarray(a[k]).astype(str) if np.asarray(a[k]).dtype.kind
                              in "OU" else a[k],
                              np.asarray(b[k]).astype(str) if np.asarray(b[k]).dtype.kind
                              in "OU" else b[k], equal_nan=np.asarray(a[k]).dtype.kind == "f")
               for k in a)


def differing(ds, reference) -> set:
    """Indices of the points of ``ds`` whose values differ from ``reference``."""
    out = set()
    for index in np.ndindex(*reference.computed.shape):
        if not same(point_values(ds, index), point_values(reference, index)):
            out.add(index)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--worker-kills", type=int, default=3)
    parser.add_argument("--dask", type=int, default=2)
    parser.add_argument("--races", type=int, default=8)
    parser.add_argument("--limits", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import logging

    import distributed  # noqa: F401  (its logging set-up first, then quiet: trials check stderr)

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    start = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="odeflow-faults-"))
    try:
        campaign = Campaign(folder, args.seed)
        for _ in range(args.kills):
            campaign.parent_kill()
        for _ in range(args.worker_kills):
            campaign.worker_kill()
        for _ in range(args.dask):
            campaign.dask_kill()
            campaign.dask_close()
        for _ in range(args.races):
            campaign.race()
        for _ in range(args.limits):
            campaign.write_limit()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"fault campaign (seed {args.seed}), {time.perf_counter() - start:.0f} s:")
    for kind, count in campaign.trials.items():
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(campaign.codes[kind].items(),
                                                                key=str))
        print(f"  {kind:45s} {count:3d} trials, exit codes {{{codes}}}")
    print(f"points lost:             {campaign.lost}")
    print(f"processes left behind:   {campaign.left_behind}")
    print(f"callers hung on pipes:   {campaign.hung}")
    print(f"tracebacks:              {campaign.tracebacks}")
    print(f"unexpected exit codes:   {len(campaign.unexpected)}")
    for line in campaign.unexpected:
        print(f"  {line}")
    bad = (campaign.lost + campaign.left_behind + campaign.hung + campaign.tracebacks
           + len(campaign.unexpected))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
