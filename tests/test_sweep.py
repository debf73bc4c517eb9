"""Parameter sweeps (issue: sweeps): backends agree bit for bit, resume after SIGKILL,
bad input is refused naming the field and nothing is overwritten."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")

import odeflow  # noqa: E402
from odeflow.analysis.diagnostics import transition_time  # noqa: E402
from odeflow.analysis.measures import distinct_entropy  # noqa: E402
from odeflow.errors import ValidationError  # noqa: E402
from odeflow.sweeps import TASKS, open_store, register, sweep  # noqa: E402
from odeflow.sweeps.config import parse_sweep_config  # noqa: E402
from odeflow.sweeps.journal import read_journal  # noqa: E402
from odeflow.sweeps.outputs import VARYING  # noqa: E402
from tests.sweep_helpers import TWENTY_POINTS, assert_same_numbers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: A small deterministic sweep: 3 x 2 points of the exact flow, short horizon.
GRID = {"eta_y": [0.5, 1.0, 2.0], "eta_z": [0.1, 1.0]}
SETTINGS = {"t_end": 200.0}




@pytest.fixture(scope="module")
def serial():
    return sweep("exact", GRID, settings=SETTINGS, backend="serial")


# ------------------------------------------------------------------ outputs
def test_outputs_match_a_direct_solve(serial):
    data = odeflow.DataModel.preset("syn-small")
    times = serial.time.values
    traj = odeflow.solve(data, eta_y=2.0, eta_z=0.1, t_span=(0, 200.0), t_eval=times,
                         progress=False)
    point = serial.sel(eta_y=2.0, eta_z=0.1)
    np.testing.assert_array_equal(point.J.values, traj.objective)
    np.testing.assert_array_equal(point.t0.values, transition_time(traj))
    m = int(data.query_tokens[data.class_query_index[0]])
    np.testing.assert_array_equal(point.logits.sel({"class": 0}).values, traj.logits(m)[-1])
    assert int(point.nfev) == traj.stats["nfev"] and int(point.status) == 0
    assert str(point.error.values) == "" and int(point.computed) == 1
    # the log-space entropy against the plots' direct one (normalised attention)
    from odeflow.plots.entropy import distinct_entropy as direct

    np.testing.assert_allclose(point.entropy.values, direct(traj), rtol=1e-12, atol=1e-12)
    assert point.entropy.values[-1] < point.entropy.values[0]  # scanning sparsifies


def test_entropy_stays_finite_at_huge_logits():
    data = odeflow.DataModel.preset("syn-small")
    z0 = np.zeros((data.query_tokens.size, data.vocab_size))
    z0[:, [10, 20]] = 800.0  # a distinct token of each class; exp(800) overflows
    traj = odeflow.solve(data, t_span=(0, 1.0), start=(None, z0), progress=False)
    h = distinct_entropy(data, traj.z_active)
    assert np.all(np.isfinite(h)) and h[0] < 1e-6


def test_the_package_is_callable():
    ds = odeflow.sweep("exact", {"eta_z": [0.1]}, settings={"t_end": 1.0}, backend="serial")
    assert "sweep" in odeflow.__all__ and ds.J.dims == ("eta_z", "time")
    assert "exact" in odeflow.sweeps.tasks()


def test_dims_are_the_grid_then_seed_then_the_output_axes():
    ds = sweep("sgd", {"eta_z": [0.5, 1.0]}, seeds=[3, 4], backend="serial",
               settings={"steps": 20, "batch_size": 8, "seq_len": 8})
    assert ds.J.dims == ("eta_z", "seed", "time")
    assert ds.logits.dims == ("eta_z", "seed", "class", "token")
    direct = odeflow.train_sgd(odeflow.DataModel.preset("syn-small"), 1.0, 0.5, 20, 8, 8,
                               seed=4, progress=False)
    on_grid = np.isin(ds.time.values, direct.t)
    np.testing.assert_array_equal(ds.J.sel(eta_z=0.5, seed=4).values[on_grid],
                                  direct.objective[np.isin(direct.t, ds.time.values)])
    assert not np.array_equal(ds.J.sel(seed=3).values, ds.J.sel(seed=4).values)


def test_runs_with_momentum_share_the_step_axis():
    ds = sweep("sgd", {"momentum": [0.0, 0.9]}, backend="serial",
               settings={"steps": 20, "batch_size": 8, "seq_len": 8})
    assert np.isfinite(ds.J.values).all() and np.isfinite(ds.entropy.values).all()
    direct = odeflow.train_sgd(odeflow.DataModel.preset("syn-small"), 1.0, 0.1, 20, 8, 8,
                               optimizer=odeflow.Momentum(0.9), seed=0, progress=False)
    np.testing.assert_array_equal(ds.J.sel(momentum=0.9).values, direct.objective)


def test_level_t_is_a_seeded_flow_task():
    ds = odeflow.sweep("finite_t", {"seq_len": [4, 16]}, seeds=[0, 1], backend="serial",
                       settings={"t_end": 20.0, "sample_size": 4})
    assert (ds.error.values.astype(str) == "").all()
    direct = odeflow.solve(odeflow.DataModel.preset("syn-small"), flow="finite_t",
                           t_span=(0, 20.0), t_eval=ds.time.values, seq_len=16,
                           sample_size=4, seed=1, progress=False)
    np.testing.assert_array_equal(ds.J.sel(seq_len=16, seed=1).values, direct.objective)
    assert not np.array_equal(ds.J.sel(seed=0).values, ds.J.sel(seed=1).values)


def test_a_failed_point_is_recorded_not_fatal():
    # syn-small has two query tokens: the Sec. 6 system refuses it, the exact flow runs
    ds = sweep(None, {"task": ["exact", "snap"]}, settings={"t_end": 50.0}, backend="serial")
    assert str(ds.error.sel(task="exact").values) == ""
    assert "one query token" in str(ds.error.sel(task="snap").values)
    assert int(ds.status.sel(task="snap")) == -1 and ds.attrs["failed"] == 1
    assert np.isnan(ds.J.sel(task="snap").values).all()
    assert np.isfinite(ds.J.sel(task="exact").values).all()


def test_a_failed_points_message_survives_the_store(tmp_path):
    """Regression: the store kept only the first character of an error message."""
    path = tmp_path / "s.zarr"
    ds = sweep(None, {"task": ["exact", "snap"]}, settings={"t_end": 50.0}, backend="serial",
               store=path)
    message = str(ds.error.sel(task="snap").values)
    assert len(message) > 20 and "one query token" in message
    assert str(open_store(path).error.sel(task="snap").values) == message


def test_adding_a_task_kind_is_one_registry_entry(serial):
    from odeflow.sweeps.scan_snap import FLOW_PARAMETERS, solve_flow
    from odeflow.sweeps.tasks import TaskKind

    register(TaskKind("exact_copy", "flow", partial(solve_flow, flow="exact"), FLOW_PARAMETERS))
    try:  # in-process only: worker processes import the registry from the package source
        ds = sweep("exact_copy", GRID, settings=SETTINGS, backend="serial")
    finally:
        TASKS.pop("exact_copy")
    assert_same_numbers(ds, serial)


# ----------------------------------------------------------------- backends
def test_processes_store_equals_the_serial_store(tmp_path, serial):
    """The parent stores what the workers return; the store then equals the serial one
    (timings aside), and reading it back gives the same numbers as the returned dataset."""
    path = tmp_path / "p.zarr"
    ds = sweep("exact", GRID, settings=SETTINGS, backend="processes", workers=2, store=path)
    assert_same_numbers(ds, serial)
    assert_same_numbers(open_store(path), serial)
    serial_path = tmp_path / "s.zarr"
    sweep("exact", GRID, settings=SETTINGS, backend="serial", store=serial_path)
    a, b = open_store(path), open_store(serial_path)
    for name in ("logits", "entropy", "J", "t0", "nfev", "status", "computed"):
        assert np.array_equal(a[name].values, b[name].values, equal_nan=True), name


def test_a_script_without_a_main_guard_can_run_processes_sweeps_after_a_store(tmp_path):
    """Once zarr has run (it starts a thread), a processes sweep from a plain script (no
    ``if __name__ == "__main__"``) must still start its workers: a start method that
    re-imports the script in each worker would run the script's sweeps again there."""
    script = tmp_path / "plain_script.py"
    script.write_text(
        "import odeflow\n"
        f"grid = {GRID!r}\n"
        f"settings = {SETTINGS!r}\n"
        "odeflow.sweep('exact', grid, settings=settings, backend='serial', store='a.zarr')\n"
        "ds = odeflow.sweep('exact', grid, settings=settings, backend='processes', workers=2,\n"
        "                   store='b.zarr')\n"
        "print('points', int(ds.computed.sum()))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["points", "6"]


def test_processes_backend_equals_serial(serial):
    ds = sweep("exact", GRID, settings=SETTINGS, backend="processes", workers=2)
    assert_same_numbers(ds, serial)
    batched = sweep("exact", GRID, settings=SETTINGS, backend="processes", workers=2, batch=4)
    assert_same_numbers(batched, serial)


def test_dask_local_cluster_equals_serial_bit_for_bit(serial):
    distributed = pytest.importorskip("distributed")
    # scheduler and two workers on loopback TCP; the sweep connects by address
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        ds = sweep("exact", GRID, settings=SETTINGS, backend="dask",
                   scheduler=cluster.scheduler_address)
        with distributed.Client(cluster) as client:
            ran_on = client.run(lambda: os.getpid())
            again = sweep("exact", GRID, settings=SETTINGS, backend="dask", client=client,
                          batch=4)
    assert len(ran_on) == 2
    assert_same_numbers(ds, serial)
    assert_same_numbers(again, serial)


@pytest.mark.slow
def test_dask_worker_processes_equal_serial(serial):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        ds = sweep("exact", GRID, settings=SETTINGS, backend="dask",
                   scheduler=cluster.scheduler_address)
    assert_same_numbers(ds, serial)


def test_dask_without_a_scheduler_is_refused():
    with pytest.raises(ValidationError, match="scheduler"):
        sweep("exact", GRID, settings=SETTINGS, backend="dask")


# -------------------------------------------------------------------- store
def test_store_holds_what_the_sweep_returned(tmp_path, serial):
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=tmp_path / "s.zarr")
    assert_same_numbers(open_store(tmp_path / "s.zarr"), serial)
    assert_same_numbers(xr.open_zarr(tmp_path / "s.zarr", consolidated=False), ds)
    again = sweep("exact", GRID, settings=SETTINGS, backend="serial",
                  store=tmp_path / "s.zarr", resume=True)
    assert again.attrs["computed_now"] == 0 and again.attrs["already_done"] == 6
    assert int(again.computed.max()) == 1


def test_a_grid_out_of_alphabetical_order_reads_back_in_its_own_order(tmp_path, serial):
    # the spec is stored as JSON with sorted keys; the store's dims keep the given order
    reordered = {"eta_z": GRID["eta_z"], "eta_y": GRID["eta_y"]}
    sweep("exact", reordered, settings=SETTINGS, backend="serial", store=tmp_path / "s.zarr")
    stored = open_store(tmp_path / "s.zarr")
    assert stored.computed.dims == ("eta_z", "eta_y")
    assert_same_numbers(stored.transpose("eta_y", "eta_z", ...), serial)


def test_netcdf_on_request(tmp_path, serial):
    # no importorskip: the test extra installs h5netcdf[h5py], and a skip would hide its loss
    path = tmp_path / "s.nc"
    sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    assert path.is_file() and not (tmp_path / "s.nc.partial.zarr").exists()
    assert_same_numbers(open_store(path), serial)
    assert_same_numbers(xr.open_dataset(path, engine="h5netcdf"), serial)


def test_retry_failed_runs_only_the_failed_points(tmp_path):
    path = tmp_path / "f.zarr"
    grid = {"task": ["exact", "snap"]}
    sweep(None, grid, settings={"t_end": 50.0}, backend="serial", store=path)
    ds = sweep(None, grid, settings={"t_end": 50.0}, backend="serial", store=path,
               resume=True, retry_failed=True)
    assert ds.attrs["computed_now"] == 1
    assert ds.computed.sel(task="snap") == 2 and ds.computed.sel(task="exact") == 1


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, field", [
    ({"grid": {"eta_q": [1.0]}}, "grid.eta_q"),
    ({"grid": {"eta_y": []}}, "grid.eta_y"),
    ({"grid": {"eta_y": [1.0, "fast"]}}, "grid.eta_y[1]"),
    ({"grid": {"eta_y": [1.0, -2.0]}}, "grid.eta_y[1]"),
    ({"grid": {"eta_y": [1.0, float("nan")]}}, "grid.eta_y[1]"),
    ({"grid": {"eta_y": [1.0, True]}}, "grid.eta_y[1]"),
    ({"grid": {"eta_y": 1.0}}, "grid.eta_y"),
    ({"grid": {"eta_y": [1.0, 1.0]}}, "grid.eta_y"),
    ({"grid": {"steps": [10]}}, "grid.steps"),
    ({"grid": {"preset": ["syn-huge"]}}, "grid.preset[0]"),
    ({"grid": {"method": ["Euler"]}}, "grid.method[0]"),
    ({"settings": {"rtol": "tight"}}, "settings.rtol"),
    ({"settings": {"eta_q": 1.0}}, "settings.eta_q"),
    ({"settings": {"task": "sgd"}}, "settings.task"),
    ({"settings": "t_end=1"}, "settings"),
    ({"grid": [("eta_y", [1.0])]}, "grid"),
    ({"grid": {"eta_y": [1.0]}, "settings": {"eta_y": 2.0}}, "settings.eta_y"),
    ({"seeds": [0, 1]}, "seeds"),
    ({"task": "exactly"}, "task"),
    ({"task": None, "grid": {"task": ["exact", "sgd"]}}, "grid.task"),
    ({"backend": "mpi"}, "backend"),
    ({"batch": 0}, "batch"),
    ({"data": "syn-huge"}, "preset"),
])
def test_bad_input_names_the_field(kwargs, field):
    kwargs = {"task": "exact", "backend": "serial", **kwargs}
    task = kwargs.pop("task")
    with pytest.raises(ValidationError) as info:
        sweep(task, **kwargs)
    assert info.value.field == field


def test_sgd_seeds_must_be_integers():
    with pytest.raises(ValidationError) as info:
        sweep("sgd", {"eta_y": [1.0]}, seeds=[0, 1.5], backend="serial")
    assert info.value.field == "seeds[1]"
    with pytest.raises(ValidationError, match="empty"):
        sweep("sgd", {"eta_y": [1.0]}, seeds=[], backend="serial")


def snapshot(path: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_store_of_another_sweep_is_refused_and_untouched(tmp_path):
    path = tmp_path / "s.zarr"
    sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    before = snapshot(path)
    other = {"eta_y": [0.5, 1.0, 2.0], "eta_z": [0.1, 2.0]}
    with pytest.raises(ValidationError, match=r"different sweep \(grid\.eta_z differ") as info:
        sweep("exact", other, settings=SETTINGS, backend="serial", store=path, resume=True)
    assert info.value.field == "store"
    with pytest.raises(ValidationError, match="settings.t_end"):
        sweep("exact", GRID, settings={"t_end": 300.0}, backend="serial", store=path,
              resume=True)
    with pytest.raises(ValidationError, match="exists"):
        sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    assert snapshot(path) == before
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("a user's file")
    with pytest.raises(ValidationError, match="store"):
        sweep("exact", GRID, settings=SETTINGS, backend="serial", store=tmp_path / "plain",
              resume=True)
    assert os.listdir(tmp_path / "plain") == ["notes.txt"]


# ---------------------------------------------------------------------- CLI
CONFIG = TWENTY_POINTS


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "odeflow", *args], capture_output=True,
                          text=True, cwd=cwd)


def journal_count(path: Path) -> int:
    """Points in the store's journal (a cheap poll while a sweep runs)."""
    return len(read_journal(path))


def computed_count(path: Path) -> int:
    """Points stored: the zarr arrays and the journal's records, as open_store reads them."""
    return int(np.count_nonzero(open_store(path).computed.values > 0))


def test_sigkill_then_resume_recomputes_nothing_and_matches_an_uninterrupted_run(tmp_path):
    cfg = tmp_path / "grid.toml"
    cfg.write_text(CONFIG)
    store = tmp_path / "killed.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "odeflow", "sweep", str(cfg), "--out",
                             str(store), "--no-progress"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while journal_count(store) < 4 and time.monotonic() < deadline:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    done_at_kill = computed_count(store)
    assert 4 <= done_at_kill < 20, done_at_kill
    resumed = run_cli("sweep", str(cfg), "--out", str(store), "--resume", "--no-progress",
                      cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (f"already done {done_at_kill}, computed now {20 - done_at_kill}, failed 0"
            in resumed.stdout), resumed.stdout
    final = open_store(store)
    assert (final.computed.values == 1).all()  # no point was computed twice
    reference = sweep(**parse_sweep_config(CONFIG), store=tmp_path / "whole.zarr")
    xr.testing.assert_identical(final.drop_vars(VARYING),
                                open_store(tmp_path / "whole.zarr").drop_vars(VARYING))
    assert_same_numbers(final, reference)


def test_cli_sweep_prints_a_summary_and_refuses_bad_config(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text('[sweep]\ntask = "exact"\nbackend = "serial"\n'
                   "[sweep.grid]\neta_z = [0.1, 1.0]\n[sweep.settings]\nt_end = 20.0\n")
    result = run_cli("sweep", str(cfg), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "points=2" in result.stdout and "entropy(end)" in result.stdout
    assert (tmp_path / "results" / "small.zarr").is_dir()
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep]\n[sweep.grid]\neta_y = []\n")
    result = run_cli("sweep", str(bad), cwd=tmp_path)
    assert result.returncode == 2 and "grid.eta_y" in result.stderr
    assert "Traceback" not in result.stderr


# -------------------------------------------------------------------- plots
def test_plot_from_a_store(tmp_path):
    pytest.importorskip("matplotlib")
    from odeflow.plots.sweep import plot_sweep, sweep_values

    path = tmp_path / "p.zarr"
    ds = odeflow.sweep("sgd", {"eta_y": [0.5, 1.0], "eta_z": [0.5, 1.0, 2.0]}, seeds=[0, 1],
                       settings={"steps": 10, "batch_size": 4, "seq_len": 4},
                       backend="serial", store=path)
    heat = sweep_values(ds, "J", ("eta_y", "eta_z"))
    expected = ds.J.isel(time=-1).mean("seed").transpose("eta_y", "eta_z")
    np.testing.assert_array_equal(heat.values, expected.values)
    fig = plot_sweep(path, "J", x="eta_z", y="eta_y")
    assert fig.axes[0].get_xlabel() == r"$\eta_Z$ (attention rate)" and len(fig.axes) == 2
    assert "task = sgd" in fig.axes[0].get_title() and "mean of 2 seeds" in \
        fig.axes[0].get_title()  # the settings not on an axis
    fig = plot_sweep(path, "entropy", x="eta_z", hue="eta_y")
    assert len(fig.axes[0].lines) == 2
    with pytest.raises(ValidationError, match="select"):
        plot_sweep(path, "logits", x="eta_z", y="eta_y")
    result = run_cli("plot", "sweep", "--store", str(path), "--var", "t0", "--x", "eta_z",
                     "--hue", "eta_y", "--select", "seed=1", "--out", str(tmp_path / "t.png"),
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "t.png").stat().st_size > 0


@pytest.mark.parametrize("values, scale", [
    ([0.25, 1.0, 4.0], "log"),        # a constant factor (the docs' worked example)
    ([0.05, 0.2, 0.8, 3.2], "log"),
    ([0.01, 0.1, 0.5], "log"),        # 50x
    ([1.0, 2.0, 3.0], "linear"),      # a constant step
    ([0.5, 1.0], "linear"),           # two values: nothing to tell
    ([1.0, 3.0, 4.0], "linear"),
])
def test_sweep_map_axes_are_log_for_geometric_values(values, scale):
    pytest.importorskip("matplotlib")
    from odeflow.plots.sweep import plot_sweep

    ds = sweep("exact", {"eta_y": values, "eta_z": [0.1, 1.0]}, settings={"t_end": 1.0},
               backend="serial")
    ax = plot_sweep(ds, "J", x="eta_z", y="eta_y").axes[0]
    assert ax.get_yscale() == scale
    # few values: ticked at exactly the swept values, labelled as given
    np.testing.assert_allclose(ax.get_yticks(), values)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{v:g}" for v in values]
    assert len(ax.yaxis.get_minorticklocs()) == 0


# ------------------------------------------- config reader and store target checks
def test_sweep_config_is_read_like_the_data_configs(tmp_path):
    from odeflow.sweeps.config import load_sweep_config

    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'[sweep]\ntask = "exact"\xff\n')
    with pytest.raises(ValidationError, match=r"^config: .*not UTF-8 text"):
        load_sweep_config(bad)
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000)
    with pytest.raises(ValidationError, match=r"^config: nested too deeply"):
        load_sweep_config(deep)
    with pytest.raises(ValidationError, match=r"^config: cannot read"):
        load_sweep_config(tmp_path / "missing.toml")


@pytest.mark.parametrize("text, field", [
    ("[foo]\nx = 1\n[sweep]\npreset = 'syn-small'\n", "foo"),
    ("'' = 1\n[sweep]\npreset = 'syn-small'\n", "''"),
    ("[sweep]\n'' = 1\n", "sweep.''"),
    ("[sweep]\n[sweep.grid]\n'' = [1.0]\n", "sweep.grid.''"),
    ("[sweep]\n[sweep.settings]\n' ' = 1.0\n", "sweep.settings.' '"),
    ("[data]\nvocab_size = 3\n[extra]\n[sweep]\n", "extra"),
    ("data = 3\n[sweep]\n", "data"),
    ("run = 3\n[sweep]\n", "run"),
    ("[sweep]\ntask = 'exact'\n[sweep.grid]\ntask = ['exact']\n", "sweep.task"),
])
def test_sweep_config_refuses_keys_by_name(text, field):
    with pytest.raises(ValidationError) as info:
        parse_sweep_config(text)
    assert info.value.field == field, str(info.value)
    assert "also defines a data model" not in str(info.value)


def test_sweep_config_unknown_top_level_key_lists_the_allowed_ones():
    with pytest.raises(ValidationError, match=r"^foo: unknown top-level key 'foo'; .*"
                       r"\['sweep', 'run', 'classes', 'normalize', 'vocab_size'\]"):
        parse_sweep_config("[foo]\n[sweep]\npreset = 'syn-small'\n")


def test_sweep_config_with_a_data_table_or_top_level_model_still_parses():
    model = odeflow.DataModel.preset("syn-small").to_toml_string()
    for text in (model, "[data]\n" + model.replace("[[classes]]", "[[data.classes]]")):
        kwargs = parse_sweep_config(text + "\n[run]\nt_end = 5.0\n[sweep]\ntask = 'exact'\n")
        assert kwargs["data"] == odeflow.DataModel.preset("syn-small")


def test_sweep_into_a_dangling_symlink_is_refused_before_zarr(tmp_path):
    link = tmp_path / "link.zarr"
    link.symlink_to(tmp_path / "gone.zarr")
    with pytest.raises(ValidationError, match=r"^store: .*dangling symbolic link"):
        sweep("exact", {"eta_y": [1.0]}, settings={"t_end": 1.0}, backend="serial",
              store=link)
    assert link.is_symlink() and not (tmp_path / "gone.zarr").exists()


def test_zarr_target_checks(tmp_path, monkeypatch):
    from odeflow.sweeps.store import check_store_target, check_zarr_target

    (tmp_path / "file").write_text("x")
    with pytest.raises(ValidationError, match=r"^store: .*exists and is a regular file"):
        check_zarr_target(tmp_path / "file")
    with pytest.raises(ValidationError, match=r"^out: .*is a regular file, not a folder"):
        check_zarr_target(tmp_path / "file" / "s.zarr", "out")
    with pytest.raises(ValidationError, match=r"^store: must be a path"):
        check_store_target(5)
    with pytest.raises(ValidationError, match=r"^format: must be one of"):
        check_store_target(tmp_path / "s.zarr", "hdf5")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(ValidationError, match=r"^store: cannot use"):
        check_zarr_target(loop / "s.zarr")
    assert check_zarr_target(tmp_path / "new" / "s.zarr") == tmp_path / "new" / "s.zarr"
    (tmp_path / "real.zarr").mkdir()
    (tmp_path / "ok.zarr").symlink_to(tmp_path / "real.zarr")  # a link to a folder is fine
    check_zarr_target(tmp_path / "ok.zarr")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p) == tmp_path
                        else real_access(p, mode, *a, **k))
    with pytest.raises(ValidationError, match=r"^store: .*is not writable"):
        check_store_target(tmp_path / "x.nc")
    assert not (tmp_path / "x.nc").exists()
