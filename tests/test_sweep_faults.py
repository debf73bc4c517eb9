"""Process faults and backend failures of sweeps (issue: process faults).

A sweep's parent killed however it ends leaves no worker behind; every failure
of the backend or of the store (a worker that died, a dask worker killed with
no retries left, a scheduler gone, a store that cannot be written, memory)
stops the sweep with exit 3 and one line with the resume hint, and the resumed
store equals an uninterrupted run; two sweeps started on one store at any
moment end with one running and the other refused (exit 2 naming ``store``).
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")
psutil = pytest.importorskip("psutil")

from odeflow.errors import ValidationError  # noqa: E402
from odeflow.sweeps import open_store, sweep  # noqa: E402
from odeflow.sweeps import store as store_module  # noqa: E402
from odeflow.sweeps.config import parse_sweep_config  # noqa: E402
from tests.cli_helpers import cli, cli_in, one_error_line  # noqa: E402
from tests.sweep_helpers import (  # noqa: E402
    TWENTY_POINTS,
    alive,
    assert_same_numbers,
    local_cluster,
    wait_for_points,
)

#: The 20 points with BDF (about 0.1 s a point, 3x LSODA's): a sweep on two workers
#: still runs for a second or more after its first points are stored, to break it then.
CONFIG = TWENTY_POINTS.replace("t_end = 1e4", 't_end = 1e4\nmethod = "BDF"')
POINTS = 20
#: Seconds any one wait of these tests may last before it is a failure (a busy machine).
PATIENCE = 120

STOPPED = re.compile(r"^odeflow: (?P<cause>.+): (?P<stored>\d+) of (?P<total>\d+) points "
                     r"are in (?P<store>\S+); rerun with --resume$")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted sweep, serially."""
    return sweep(**{**parse_sweep_config(CONFIG), "backend": "serial"},
                 store=tmp_path_factory.mktemp("ref") / "whole.zarr")


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(CONFIG)
    return path


def start(config, store, *extra, **popen):
    """``odeflow sweep CONFIG --out STORE EXTRA`` in a subprocess (its output piped)."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "odeflow", "sweep", str(config), "--out",
                             str(store), "--no-progress", *extra], cwd=config.parent,
                            text=True, **popen)


def stored(proc, store, n):
    """Wait until ``n`` points are stored while the sweep ``proc`` runs."""
    if not wait_for_points(proc, store, n, PATIENCE):
        pytest.fail(f"the sweep stored no {n} points while it ran: {proc.poll()}")


def workers_of(proc) -> list:
    """Pids of the pool workers of the sweep ``proc``: its children forked from it (same
    command line; not a helper such as multiprocessing's resource tracker)."""
    parent = psutil.Process(proc.pid)
    return [c.pid for c in parent.children() if c.cmdline() == parent.cmdline()]


def stopped_line(err: str, store) -> re.Match:
    """The one stderr line of a stopped sweep, checked; its match."""
    assert "Traceback" not in err, err
    match = STOPPED.match(one_error_line(err))
    assert match, err
    assert match["store"] == str(store) and int(match["total"]) == POINTS
    return match


def resume_and_compare(config, store, stored, reference):
    """``--resume`` completes the store (in-process: the resumed run is not the fault under
    test); it equals the uninterrupted run."""
    if store.exists():
        assert int(np.count_nonzero(open_store(store).computed.values > 0)) == stored
    else:
        assert stored == 0
    done = cli_in(config.parent, "sweep", config, "--out", store, "--resume", "--no-progress",
                  "--backend", "serial")
    assert done.returncode == 0, done.stderr
    assert f"already done {stored}, computed now {POINTS - stored}, failed 0" in done.stdout
    final = open_store(store)
    assert (final.computed.values == 1).all()
    assert_same_numbers(final, reference)


# ------------------------------------------------------------- orphaned workers
def test_workers_die_with_a_killed_parent_and_release_its_pipes(config, tmp_path):
    store = tmp_path / "s.zarr"
    proc = start(config, store, "--backend", "processes", "--workers", "2")
    workers = []
    try:
        stored(proc, store, 1)
        workers = workers_of(proc)
        assert len(workers) == 2
        os.kill(proc.pid, signal.SIGKILL)
        # the caller reads the sweep's output to its end: no worker holds the pipes
        proc.communicate(timeout=PATIENCE)
        deadline = time.monotonic() + PATIENCE
        while alive(workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = alive(workers)
    finally:
        for pid in alive(workers):  # never leave them behind, even when the test fails
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert left == []


# --------------------------------------------------------- one rule for failures
def test_a_killed_worker_stops_the_sweep_with_the_resume_hint(config, tmp_path, reference):
    store = tmp_path / "s.zarr"
    proc = start(config, store, "--backend", "processes", "--workers", "2")
    stored(proc, store, 2)
    os.kill(workers_of(proc)[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 3, err
    match = stopped_line(err, store)
    assert match["cause"] == "a worker died"
    resume_and_compare(config, store, int(match["stored"]), reference)


def test_a_store_that_cannot_be_written_stops_the_sweep(config, tmp_path, reference):
    """A file-size limit (``prlimit --fsize``; a full disk takes the same path)."""
    store = tmp_path / "s.zarr"
    limit = 12_000  # bytes of any one file: the journal holds a few points

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = start(config, store, "--backend", "serial", preexec_fn=small_files)
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 3, err
    match = stopped_line(err, store)
    assert match["cause"] == "cannot write the store (File too large)"
    assert 0 < int(match["stored"]) < POINTS
    resume_and_compare(config, store, int(match["stored"]), reference)


def test_a_store_that_cannot_even_be_created_stops_the_sweep(config, tmp_path, reference):
    store = tmp_path / "s.zarr"

    def tiny_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))

    proc = start(config, store, "--backend", "serial", preexec_fn=tiny_files)
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 3, err
    match = stopped_line(err, store)
    assert (match["cause"], match["stored"]) == ("cannot write the store (File too large)", "0")
    assert not store.exists()  # no store cut short: --resume makes it anew
    resume_and_compare(config, store, 0, reference)


def test_memory_exhausted_stops_the_sweep_with_the_resume_hint(config, tmp_path, capsys,
                                                                monkeypatch, reference):
    from odeflow.sweeps import backends

    real = backends.compute_point
    calls = {"n": 0}

    def runs_out(plan, values):
        calls["n"] += 1
        if calls["n"] == 6:
            raise MemoryError
        return real(plan, values)

    monkeypatch.setattr(backends, "compute_point", runs_out)
    store = tmp_path / "s.zarr"
    code, out, err = cli(capsys, "sweep", config, "--out", store, "--backend", "serial",
                         "--no-progress")
    assert code == 3
    match = stopped_line(err, store)
    assert (match["cause"], match["stored"]) == ("out of memory", "5")
    monkeypatch.setattr(backends, "compute_point", real)
    resume_and_compare(config, store, 5, reference)


# ------------------------------------------------------------------------ dask
@pytest.fixture
def strict_cluster():
    """A local cluster whose scheduler allows no retry of a task on a worker that died."""
    cluster = local_cluster(**{"distributed.scheduler.allowed-failures": 0})
    yield cluster
    cluster.close()


@pytest.fixture
def dask_cluster():
    """A local cluster with dask's defaults."""
    cluster = local_cluster()
    yield cluster
    cluster.close()


def test_a_dask_worker_killed_without_retries_stops_the_sweep(config, tmp_path, reference,
                                                               strict_cluster):
    import distributed

    store = tmp_path / "s.zarr"
    with distributed.Client(strict_cluster) as client:
        pids = list(client.run(os.getpid).values())
        proc = start(config, store, "--scheduler", strict_cluster.scheduler_address,
                     "--batch", "1")
        stored(proc, store, 2)
        for pid in pids:  # both are computing: whichever task ran there has no retry left
            os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 3, err
    match = stopped_line(err, store)
    assert "KilledWorker" in match["cause"]
    resume_and_compare(config, store, int(match["stored"]), reference)


def test_a_closed_scheduler_stops_the_sweep(config, tmp_path, reference, dask_cluster):
    store = tmp_path / "s.zarr"
    proc = start(config, store, "--scheduler", dask_cluster.scheduler_address, "--batch", "1")
    stored(proc, store, 2)
    dask_cluster.close()
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 3, err
    match = stopped_line(err, store)
    assert "scheduler" in match["cause"]
    resume_and_compare(config, store, int(match["stored"]), reference)


# ------------------------------------------------------------ taking a store
def test_a_store_is_taken_in_one_step(tmp_path, monkeypatch):
    """A sweep that starts while another creates the store is refused, the store unharmed."""
    grid = {"eta_y": [1.0], "eta_z": [0.1, 1.0]}
    path = tmp_path / "s.zarr"
    real = store_module.SweepArrays.create
    seen = {}

    def create_then_race(self):
        real(self)  # the first sweep has made its store; the second one starts now
        with pytest.raises(ValidationError) as info:
            sweep("exact", grid, settings={"t_end": 10.0}, backend="serial", store=path,
                  resume=True)
        seen["error"] = info.value

    monkeypatch.setattr(store_module.SweepArrays, "create", create_then_race)
    ds = sweep("exact", grid, settings={"t_end": 10.0}, backend="serial", store=path)
    assert ds.attrs["computed_now"] == 2
    assert seen["error"].field == "store"
    assert "being written by another sweep" in str(seen["error"])
    assert (open_store(path).computed.values == 1).all()


def race(config, store, offset, resume=False):
    """Two sweeps on one store, the second ``offset`` seconds after the first: their
    ``(returncode, stderr)``."""
    first = start(config, store, "--backend", "serial")
    time.sleep(offset)
    second = start(config, store, "--backend", "serial", *(["--resume"] if resume else []))
    errors = [p.communicate(timeout=PATIENCE)[1] for p in (first, second)]
    return [(p.returncode, err) for p, err in zip((first, second), errors, strict=True)]


SMALL = CONFIG.replace("t_end = 1e4", "t_end = 10.0")


@pytest.mark.parametrize("offset", [0.0, 0.3, pytest.param(0.6, marks=pytest.mark.slow),
                                    pytest.param(0.9, marks=pytest.mark.slow)])
def test_two_sweeps_on_one_store_one_runs_one_is_refused(tmp_path, offset):
    config = tmp_path / "grid.toml"
    config.write_text(SMALL)
    store = tmp_path / "s.zarr"
    ends = race(config, store, offset)
    codes = sorted(code for code, _ in ends)
    assert codes == [0, 2], ends
    for code, err in ends:
        assert "Traceback" not in err
        if code == 2:
            line = one_error_line(err)
            assert line.startswith("odeflow: error: store: ") and "mode" not in line, line
    assert (open_store(store).computed.values == 1).all()


# --------------------------------------------------------------- up-front checks
def test_a_run_beyond_the_step_cap_is_refused_naming_the_key():
    from odeflow.sweeps import make_spec

    with pytest.raises(ValidationError, match=r"must be <= 100,000 training steps") as info:
        make_spec("gradient_ascent", {"steps": [10, 1_000_000_000_000]})
    assert info.value.field == "grid.steps"
    with pytest.raises(ValidationError) as info:
        make_spec("sgd", settings={"steps": 200_000})
    assert info.value.field == "settings.steps"


def test_a_batch_beyond_the_token_cap_is_refused_naming_the_key():
    from odeflow.sweeps import make_spec

    with pytest.raises(ValidationError, match=r"batch_size x seq_len") as info:
        make_spec("sgd", settings={"batch_size": 1_000_000_000, "steps": 10})
    assert info.value.field == "settings.batch_size"
    with pytest.raises(ValidationError) as info:
        make_spec("adam", {"batch_size": [128, 100_000]}, settings={"seq_len": 1000})
    assert info.value.field == "grid.batch_size"
    make_spec("sgd", settings={"batch_size": 10_000, "seq_len": 1000})  # 1e7 tokens: allowed


def test_a_grid_beyond_the_machines_memory_is_refused_before_set_up(tmp_path, capsys,
                                                                       monkeypatch):
    from odeflow.sweeps import spec as spec_module

    monkeypatch.setattr(spec_module, "machine_memory", lambda: 8 * 2**30)
    values = ", ".join(f"{0.01 * (i + 1):.2f}" for i in range(3000))
    config = tmp_path / "big.toml"
    config.write_text(f"[sweep]\ntask = \"exact\"\n[sweep.grid]\neta_y = [{values}]\n"
                      f"eta_z = [{values}]\n")
    code, _, err = cli(capsys, "sweep", config, "--out", tmp_path / "big.zarr")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith("odeflow: error: grid: 3,000 x 3,000 = 9,000,000 points") and \
        "GiB" in line
    assert not (tmp_path / "big.zarr").exists()


def test_a_large_sweep_says_so_before_its_set_up(tmp_path, capsys, monkeypatch):
    from odeflow.sweeps import run as run_module

    monkeypatch.setattr(run_module, "ANNOUNCE_POINTS", 2)
    sweep("exact", {"eta_y": [1.0, 2.0]}, settings={"t_end": 1.0}, backend="serial")
    assert "odeflow sweep: 2 points, about 0 MiB of outputs in memory; setting up" in \
        capsys.readouterr().err
    sweep("exact", {"eta_y": [1.0, 2.0]}, settings={"t_end": 1.0}, backend="serial",
          progress=False)
    assert capsys.readouterr().err == ""


def test_a_sweep_off_a_terminal_says_how_far_it_got(capsys, monkeypatch):
    from odeflow.sweeps import run as run_module

    monkeypatch.setattr(run_module, "PROGRESS_LOG_SECONDS", 0.0)
    sweep("exact", {"eta_y": [1.0, 2.0]}, settings={"t_end": 1.0}, backend="serial")
    lines = capsys.readouterr().err.splitlines()  # stderr is no terminal here
    assert len(lines) == 2
    for k, line in enumerate(lines, 1):
        assert re.fullmatch(rf"odeflow sweep: {k} of 2 points, \d+ s", line), line
