"""Sweep tasks and points: the ``adam`` task, any task error recorded per point, netCDF
checked before the sweep, solver statistics per point (old stores still resume), and the
dask backend's automatic batch size."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

import odeflow  # noqa: E402
from odeflow.analysis.measures import distinct_entropy  # noqa: E402
from odeflow.errors import SweepStopped, ValidationError  # noqa: E402
from odeflow.results import Trajectory  # noqa: E402
from odeflow.sweeps import TASKS, open_store, register, sweep  # noqa: E402
from odeflow.sweeps.backends import MAX_AUTO_BATCH, auto_batch  # noqa: E402
from odeflow.sweeps.scan_snap import FLOW_PARAMETERS, solve_flow  # noqa: E402
from odeflow.sweeps.tasks import TaskKind  # noqa: E402
from odeflow.training import Protocol, train  # noqa: E402
from tests.sweep_helpers import assert_same_numbers  # noqa: E402

DATA = odeflow.DataModel.preset("syn-small")
GRID = {"eta_y": [0.5, 1.0, 2.0], "eta_z": [0.1, 1.0]}
SETTINGS = {"t_end": 200.0}
RUN = {"steps": 60, "batch_size": 8, "seq_len": 8}




@pytest.fixture(scope="module")
def serial():
    return sweep("exact", GRID, settings=SETTINGS, backend="serial")


@pytest.fixture
def task_kind():
    """Register a flow task kind for one test (in-process: use the serial backend)."""
    names = []

    def make(name, run):
        names.append(name)
        return register(TaskKind(name, "flow", run, FLOW_PARAMETERS))

    yield make
    for name in names:
        TASKS.pop(name, None)


# --------------------------------------------------------------------- adam
def test_adam_sweep_equals_the_trainer_called_directly():
    ds = sweep("adam", {"eta_z": [0.5, 1.0]}, seeds=[3, 4], settings=RUN, backend="serial")
    assert ds.J.dims == ("eta_z", "seed", "time") and ds.attrs["failed"] == 0
    assert ds.attrs["setting_beta1"] == 0.9 and ds.attrs["setting_beta2"] == 0.999
    assert ds.attrs["setting_eps"] == 1e-8
    every = int(ds.time.values[1] - ds.time.values[0])
    for eta_z in (0.5, 1.0):
        for seed in (3, 4):
            protocol = Protocol(optimizer="adam", eta_y=1.0, eta_z=eta_z, batch_size=8,
                                seq_len=8, steps=60)
            run = train(DATA, **protocol.options(), seeds=[seed], record=every, progress=False)
            point = ds.sel(eta_z=eta_z, seed=seed)
            np.testing.assert_array_equal(ds.time.values, run.steps)
            np.testing.assert_array_equal(point.entropy.values,
                                          distinct_entropy(DATA, run.z_active[0]))
            traj = run.trajectory(0)
            for k, m in enumerate(DATA.query_tokens[DATA.class_query_index]):
                np.testing.assert_array_equal(point.logits.sel({"class": k}).values,
                                              traj.logits(int(m))[-1])
            # J where the trainer keeps the decoder: the first and the last step
            ends = Trajectory(DATA, run.steps[[0, -1]], run.z_active[0][[0, -1]],
                              run.z_base[0], decoder_lumped=np.stack(
                                  [run.decoder_initial[0], run.decoder_final[0]]))
            np.testing.assert_array_equal(point.J.values[[0, -1]], ends.objective)
            assert np.isnan(point.J.values[1:-1]).all()
            assert int(point.nfev) == 60 and int(point.status) == 0
            assert str(point.error.values) == "" and float(point.wall_time) > 0
    np.testing.assert_allclose(ds.J.values[..., 0], -np.log(DATA.vocab_size))
    assert not np.array_equal(ds.entropy.sel(seed=3).values, ds.entropy.sel(seed=4).values)


def test_adam_parameters_are_swept_and_reach_the_optimiser():
    ds = sweep("adam", {"beta1": [0.5, 0.9], "beta2": [0.99, 0.999]},
               settings={**RUN, "eps": 1e-6, "eta_z": 2.0}, backend="serial")
    protocol = Protocol(optimizer="adam", eta_y=1.0, eta_z=2.0, betas=(0.5, 0.99), eps=1e-6,
                        batch_size=8, seq_len=8, steps=60)
    run = train(DATA, **protocol.options(), seeds=[0], record=1, progress=False)
    np.testing.assert_array_equal(ds.entropy.sel(beta1=0.5, beta2=0.99).values,
                                  distinct_entropy(DATA, run.z_active[0]))
    assert not np.array_equal(ds.entropy.sel(beta1=0.5).values,
                              ds.entropy.sel(beta1=0.9).values)


@pytest.mark.parametrize("kwargs, field", [
    ({"settings": {"beta1": 1.0}}, "settings.beta1"),
    ({"settings": {"beta2": -0.1}}, "settings.beta2"),
    ({"settings": {"beta1": "0.9"}}, "settings.beta1"),
    ({"settings": {"eps": 0.0}}, "settings.eps"),
    ({"settings": {"eps": float("inf")}}, "settings.eps"),
    ({"settings": {"betas": [0.9, 0.999]}}, "settings.betas"),
    ({"settings": {"momentum": 0.9}}, "settings.momentum"),
    ({"grid": {"beta2": [0.99, 1.5]}}, "grid.beta2[1]"),
    ({"grid": {"eps": [1e-8, -1e-8]}}, "grid.eps[1]"),
    ({"grid": {"batch_size": [8, 0]}}, "grid.batch_size[1]"),
    ({"seeds": [0, 0]}, "seeds"),
])
def test_bad_adam_settings_name_the_field(kwargs, field):
    with pytest.raises(ValidationError) as info:
        sweep("adam", backend="serial", **kwargs)
    assert info.value.field == field


def test_sgd_keeps_its_parameters():
    # the sgd task is unchanged (old sgd stores keep their spec): no Adam parameters
    with pytest.raises(ValidationError) as info:
        sweep("sgd", settings={"beta1": 0.9}, backend="serial")
    assert info.value.field == "settings.beta1"
    kinds = odeflow.sweeps.tasks()
    assert "adam" in kinds and kinds["adam"].stochastic and kinds["adam"].family == "run"


# ------------------------------------------------------------ point errors
def singular(data, values, times):
    if values["eta_z"] == 1.0:
        np.linalg.inv(np.zeros((2, 2)))  # numpy.linalg.LinAlgError: Singular matrix
    return solve_flow(data, values, times, flow="exact")


def small_budget(data, values, times):
    return odeflow.solve(data, eta_y=values["eta_y"], eta_z=values["eta_z"] * 1e12,
                         t_span=(0.0, 10.0), t_eval=times[times <= 10.0], max_nfev=200,
                         progress=False)


def test_a_point_stopped_by_its_budget_keeps_its_solver_statistics(task_kind):
    task_kind("small_budget", small_budget)
    ds = sweep("small_budget", {"eta_z": [1.0]}, settings={"t_end": 10.0}, backend="serial")
    point = ds.isel(eta_z=0)
    assert "after max_nfev = 200" in str(point.error.values)
    assert int(point.status) == -1 and int(point.nfev) == 200 and int(point.njev) >= 1
    assert float(point.wall_time) > 0


def bad_bracket(data, values, times):
    from scipy.optimize import brentq

    if values["eta_z"] == 1.0:
        brentq(lambda x: x * x + 1.0, 0.0, 1.0)  # ValueError of scipy
    return solve_flow(data, values, times, flow="exact")


@pytest.mark.parametrize("run, error", [
    (singular, "LinAlgError: Singular matrix"),
    (bad_bracket, "ValueError: f(a) and f(b) must have different signs"),
])
def test_any_exception_of_a_task_is_recorded_as_that_points_error(tmp_path, serial, task_kind,
                                                                   run, error):
    task_kind("fails_at_eta_z_1", run)
    ds = sweep("fails_at_eta_z_1", GRID, settings=SETTINGS, backend="serial",
               store=tmp_path / "s.zarr")
    assert ds.attrs["failed"] == 3 and ds.attrs["computed_now"] == 6
    failed = ds.sel(eta_z=1.0)
    assert (failed.error.values.astype(str) == error).all()
    assert (failed.status.values == -1).all() and (failed.nfev.values == -1).all()
    assert np.isnan(failed.J.values).all() and np.isnan(failed.wall_time.values).all()
    ok = ds.sel(eta_z=0.1)
    assert (ok.error.values.astype(str) == "").all()
    assert_same_numbers(ok, serial.sel(eta_z=0.1))
    stored = open_store(tmp_path / "s.zarr").error.values.astype(str)
    assert ((stored != "") == (ds.error.values.astype(str) != "")).all()


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, MemoryError])
def test_interrupts_and_memory_errors_still_stop_the_sweep(task_kind, exc):
    def run(data, values, times):
        raise exc()

    task_kind("stops", run)
    stops = SweepStopped if exc is MemoryError else exc  # memory: a stop with the resume hint
    with pytest.raises(stops) as info:
        sweep("stops", GRID, settings=SETTINGS, backend="serial")
    if exc is MemoryError:
        assert info.value.cause == "out of memory" and info.value.stored == 0
        assert isinstance(info.value.__cause__, MemoryError)


# ------------------------------------------------------------------ netCDF
@pytest.mark.parametrize("missing", ["h5netcdf", "h5py"])
@pytest.mark.parametrize("name, fmt", [("s.nc", None), ("s.out", "netcdf")])
def test_netcdf_without_its_writer_is_refused_before_any_point_runs(tmp_path, monkeypatch,
                                                                   task_kind, missing, name,
                                                                   fmt):
    ran = []

    def run(data, values, times):
        ran.append(values["eta_z"])
        return solve_flow(data, values, times, flow="exact")

    task_kind("counted", run)
    monkeypatch.setitem(sys.modules, missing, None)  # ``import missing`` raises ImportError
    with pytest.raises(ValidationError, match="h5netcdf and h5py") as info:
        sweep("counted", GRID, settings=SETTINGS, backend="serial", store=tmp_path / name,
              format=fmt)
    assert info.value.field == "format"
    assert ran == [] and list(tmp_path.iterdir()) == []


# -------------------------------------------------------------- statistics
@pytest.mark.parametrize("method", ["BDF", "RK45"])
def test_solver_statistics_of_each_point(method):
    ds = sweep("exact", {"eta_z": [0.1, 1.0]}, settings={"t_end": 50.0, "method": method},
               backend="serial")
    traj = odeflow.solve(DATA, eta_y=1.0, eta_z=1.0, t_span=(0, 50.0), t_eval=ds.time.values,
                         method=method, progress=False)
    point = ds.sel(eta_z=1.0)
    for name in ("nfev", "njev", "nlu", "status"):
        assert int(point[name]) == traj.stats[name], name
    assert (int(point.njev) > 0) == (method == "BDF") and int(point.nlu) >= 0
    assert np.all(ds.wall_time.values > 0) and np.all(np.isfinite(ds.wall_time.values))
    assert ds.wall_time.attrs["units"] == "s"


def test_runs_have_no_jacobian_statistics():
    ds = sweep("gradient_ascent", {"eta_z": [0.1]}, settings={"steps": 10},
               backend="serial").isel(eta_z=0)
    assert int(ds.njev) == -1 and int(ds.nlu) == -1 and int(ds.nfev) == 10
    assert float(ds.wall_time) > 0


def old_store(path: Path, done: int) -> None:
    """Make ``path`` a store as written before njev, nlu, wall_time (and before checksums
    and the integrity record): ``done`` points stored."""
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial")
    ds = ds.drop_vars(["njev", "nlu", "wall_time"])
    ds.attrs = {k: v for k, v in ds.attrs.items()
                if k in ("odeflow_sweep", "title", "time_axis") or k.startswith("setting_")}
    ds["computed"].values.ravel()[done:] = 0
    ds["error"] = ds["error"].astype(object)
    ds.to_zarr(path, consolidated=False)


def snapshot(path: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_store_written_before_the_statistics_resumes_as_before(tmp_path, serial):
    path = tmp_path / "old.zarr"
    old_store(path, done=2)
    before, attrs = snapshot(path), dict(zarr.open_group(path, mode="r").attrs)
    # another sweep is still refused, naming what differs, and the store is untouched
    with pytest.raises(ValidationError, match=r"different sweep \(grid\.eta_z differ"):
        sweep("exact", {**GRID, "eta_z": [0.1, 2.0]}, settings=SETTINGS, backend="serial",
              store=path, resume=True)
    with pytest.raises(ValidationError, match="exists"):
        sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    assert snapshot(path) == before
    # the same sweep resumes: the stored points are kept, the missing ones computed
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path, resume=True)
    assert ds.attrs["already_done"] == 2 and ds.attrs["computed_now"] == 4
    assert dict(zarr.open_group(path, mode="r").attrs) == attrs
    stored = open_store(path)
    assert_same_numbers(stored, serial, skip=("njev", "nlu", "wall_time"))
    assert_same_numbers(stored, ds)
    njev, wall = stored.njev.values.ravel(), stored.wall_time.values.ravel()
    assert (njev[:2] == -1).all() and np.isnan(wall[:2]).all()  # stored before: unknown
    assert (njev[2:] >= 0).all() and (wall[2:] > 0).all()
    np.testing.assert_array_equal(stored.njev.values.ravel()[2:], serial.njev.values.ravel()[2:])
    again = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path, resume=True)
    assert again.attrs["computed_now"] == 0 and (again.computed.values == 1).all()


# ------------------------------------------------------------------ batches
def test_auto_batch_rule():
    assert auto_batch(6, 2) == 1  # fewer points than 4 tasks per thread
    assert auto_batch(40, 2) == 5  # 8 tasks of 5
    assert auto_batch(81, 2) == 11
    assert auto_batch(10**6, 64) == MAX_AUTO_BATCH  # large grids: streaming still
    assert auto_batch(100, 0) == MAX_AUTO_BATCH  # no worker yet: as for one thread
    assert auto_batch(0, 4) == 1


def test_the_default_batch_is_one_off_dask(serial):
    assert serial.attrs["batch"] == 1
    ds = sweep("exact", GRID, settings=SETTINGS, backend="processes", workers=2)
    assert ds.attrs["batch"] == 1
    assert sweep("exact", GRID, settings=SETTINGS, backend="serial", batch=3).attrs["batch"] == 3


def test_dask_batches_automatically_and_an_explicit_batch_wins():
    distributed = pytest.importorskip("distributed")
    grid = {"eta_y": [0.25, 0.5, 1.0, 2.0, 4.0], "eta_z": [0.05, 0.1, 0.2, 0.4, 0.8,
                                                          1.6, 3.2, 6.4]}
    settings = {"t_end": 20.0}
    reference = sweep("exact", grid, settings=settings, backend="serial")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            auto = sweep("exact", grid, settings=settings, backend="dask", client=client)
            given = sweep("exact", grid, settings=settings, backend="dask", client=client,
                          batch=1)
    assert auto.attrs["batch"] == auto_batch(40, 2) == 5 and given.attrs["batch"] == 1
    assert_same_numbers(auto, reference)
    assert_same_numbers(given, reference)


@pytest.mark.parametrize("batch", [0, -1, 1.5, "auto", True])
def test_a_bad_batch_is_refused(batch):
    with pytest.raises(ValidationError) as info:
        sweep("exact", GRID, settings=SETTINGS, backend="serial", batch=batch)
    assert info.value.field == "batch"
