"""A family defined outside the package (tests/linear_family.py) plugs in with one call.

The two-layer linear network of ``docs/families.md`` is registered with
:func:`odeflow.families.register_family` and then served, with no change to
shared code, by ``odeflow.solve`` (every option), the optimiser flows, ensembles,
a sweep, a figure, ``odeflow.verify``, a configuration file, the command line and
the flat API. Each result is compared with something computed another way: the
closed form of the balanced scalar network, central differences, separate solves,
the discrete optimiser recursion.
"""

from __future__ import annotations

import numpy as np
import pytest

import odeflow
from odeflow.errors import SolveError, ValidationError
from odeflow.families import (
    FAMILIES,
    family_named,
    family_of,
    find_preset,
    register_family,
    unregister_family,
)
from tests.linear_family import Linear2, LinearData, LinearPopulation, balanced_scalar

#: A short span over which the small preset's loss falls by orders of magnitude.
T_END = 20.0


@pytest.fixture(scope="module", autouse=True)
def linear2():
    """The family registered for this module, and removed (with its flat-API name) after."""
    family = register_family(Linear2)
    yield family
    unregister_family(family.name)
    assert "LinearData" not in vars(odeflow) and "linear2-loss" not in odeflow.plots.FIGURES


@pytest.fixture
def small():
    return LinearData.preset("linear2-small")


def test_registry_finds_the_family_its_presets_and_its_flat_name(small):
    assert family_of(small) is family_named("linear2")
    assert find_preset("linear2-scalar") == LinearData(((2.0,),))
    assert family_named("linear2").preset_list() == tuple(LinearData.preset_table())
    assert odeflow.LinearData is LinearData
    with pytest.raises(ValidationError, match="flow"):
        odeflow.solve(small, flow="exact")


def test_an_entry_point_registers_the_family(monkeypatch):
    """A distribution's entry point in the group ``odeflow.families`` (its object the family
    class) is read the first time odeflow looks a family up."""
    import importlib.metadata

    import odeflow.families as registry

    point = importlib.metadata.EntryPoint("linear2", f"{Linear2.__module__}:Linear2",
                                          registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setitem(registry._loaded, "entry_points", False)  # as in a fresh process
    monkeypatch.delitem(FAMILIES, "linear2")
    monkeypatch.setattr(registry.base, "BY_CALL", set())   # as if never registered by a call
    assert type(registry.families()["linear2"]) is Linear2
    assert family_of(LinearData(((1.0,),))).name == "linear2"


def test_strategy_hook_and_docs_page():
    """The family's hook (``DATA_MODELS`` of its ``strategies`` module) serves
    ``odeflow.testing.family_data_models``; its docs page is in the toctree and the help."""
    from hypothesis import given

    from odeflow.testing import family_data_models
    from tests.test_family_api import family_page_problems

    assert family_page_problems(family_named("linear2")) == []

    @given(family_data_models(["linear2"]))
    def round_trips(data):
        assert isinstance(data, LinearData)
        assert LinearData.from_toml_string(data.to_toml_string()) == data

    round_trips()


def test_data_type_is_checked_and_round_trips_through_toml(small):
    assert LinearData.from_toml_string(small.to_toml_string()) == small
    with pytest.raises(ValidationError) as info:
        LinearData.from_dict({"teacher": [[1.0]], "init": {"scael": 0.1}})
    assert info.value.field == "init.scael"
    with pytest.raises(ValidationError, match="^init: "):
        odeflow.data.parse_config('family = "linear2"\nteacher = [[1.0]]\ninit = 3\n')
    with pytest.raises(ValidationError) as info:
        LinearData(((1.0,),), init_scale=-1.0)
    assert info.value.field == "init.scale"
    with pytest.raises(ValidationError, match="teacher"):
        LinearData(((1.0, float("nan")),))


def test_jacobian_equals_central_differences(small):
    field = LinearPopulation(small, rate=0.7)
    y = np.random.default_rng(1).standard_normal(field.size)
    h = 1e-6
    numeric = np.stack([(field.rhs(0.0, y + h * e) - field.rhs(0.0, y - h * e)) / (2 * h)
                        for e in np.eye(field.size)], axis=1)
    assert np.allclose(field.jacobian(0.0, y), numeric, rtol=1e-7, atol=1e-8)


def test_solve_descends_the_loss_on_the_given_times(small):
    t = np.linspace(0.0, T_END, 41)
    traj = odeflow.solve(small, t_span=(0.0, T_END), t_eval=t, progress=False)
    assert np.array_equal(traj.t, t) and traj.status == 0
    assert np.all(np.diff(traj.loss) <= 1e-12) and traj.loss[-1] < 1e-6 * traj.loss[0]
    field = LinearPopulation(small)
    assert np.allclose(traj.loss, field.loss(traj.y.T), rtol=1e-12)
    assert traj.meta["flow"] == "population" and traj.meta["rate"] == 1.0


def test_closed_form_and_tolerances():
    """The balanced scalar network against its logistic solution: tighter tolerances,
    smaller error; a doubled rate runs twice as fast."""
    t, a, s = np.geomspace(1e-2, 5.0, 40), 2.0, 0.1
    data = LinearData(((a,),))
    errors = []
    for rtol, atol in ((1e-4, 1e-6), (1e-10, 1e-12)):
        traj = odeflow.solve(data, start=[s, s], t_span=(0.0, 5.0), t_eval=t, rtol=rtol,
                             atol=atol, method="DOP853", progress=False)
        errors.append(np.max(np.abs(traj.W1[:, 0, 0] * traj.W2[:, 0, 0]
                                    - balanced_scalar(t, a, s * s))))
    assert errors[1] < 1e-8 and errors[1] < errors[0] / 100
    fast = odeflow.solve(data, rate=2.0, start=[s, s], t_span=(0.0, 2.5), t_eval=t / 2,
                         rtol=1e-10, atol=1e-12, progress=False)
    assert np.allclose(fast.W1[:, 0, 0] ** 2, balanced_scalar(t, a, s * s), rtol=1e-7)


@pytest.mark.parametrize("method", ["Radau", "BDF", "LSODA"])
def test_implicit_methods_take_the_analytic_jacobian(small, method):
    t = np.linspace(0.0, T_END, 11)
    ref = odeflow.solve(small, t_span=(0.0, T_END), t_eval=t, method="DOP853", rtol=1e-11,
                        atol=1e-13, progress=False)
    traj = odeflow.solve(small, t_span=(0.0, T_END), t_eval=t, method=method, rtol=1e-9,
                         atol=1e-12, progress=False)
    assert traj.stats["method"] == method
    if method != "LSODA":  # LSODA may finish in its non-stiff mode, without a Jacobian
        assert traj.stats["njev"] >= 1
    assert np.allclose(traj.y, ref.y, rtol=1e-6, atol=1e-8)


def test_dense_output_and_a_plain_callable_event(small):
    field = LinearPopulation(small)
    target = 1e-3 * field.loss(field.initial_state())

    def small_loss(t, y):
        return field.loss(y) - target

    small_loss.terminal = True
    traj = odeflow.solve(small, t_span=(0.0, T_END), dense_output=True, events=small_loss,
                         progress=False)
    (hit,) = traj.t_events[0]
    assert traj.status == 1 and traj.event_times("small_loss")[0] == hit
    assert traj.t[-1] <= hit and field.loss(traj.y_events[0][0]) == pytest.approx(target)
    mid = 0.37 * hit
    at_mid = odeflow.solve(small, t_span=(0.0, hit), t_eval=[mid], progress=False)
    assert np.allclose(traj.sol(mid), at_mid.y[:, 0], rtol=1e-6, atol=1e-9)


def test_budget_and_progress(small, capsys):
    with pytest.raises(SolveError, match="t"):
        odeflow.solve(small, t_span=(0.0, T_END), method="RK45", max_nfev=20, progress=False)
    quiet = odeflow.solve(small, t_span=(0.0, T_END), progress=False)
    shown = odeflow.solve(small, t_span=(0.0, T_END), progress=True)
    assert "population" in capsys.readouterr().err
    assert np.array_equal(quiet.y, shown.y)


def recursion(field, optimizer, steps):
    """``steps`` of ``optimizer.step`` on the field's gradient (the discrete optimiser)."""
    theta = field.initial_state()
    state = optimizer.init_state(theta.shape)
    for k in range(1, steps + 1):
        optimizer.step(theta, field.gradient(theta), state, k, field.rate_vector)
    return theta


#: Step-h families of the optimisers (heavy ball: ``mu_h = 1 - (1 - mu) h``, rate ``eta h^2``;
#: Adam: betas ``b^h``, rate ``eta h``, ``1/h`` exact steps), each tending to one ODE as h -> 0.
STEP_H = {"momentum": lambda h: (odeflow.Momentum(1.0 - 0.1 * h), 0.2 * h * h),
          "adam": lambda h: (odeflow.Adam((0.9 ** h, 0.999 ** h), exact_steps=round(1 / h)),
                             0.02 * h)}


@pytest.mark.parametrize("kind", sorted(STEP_H))
def test_optimizer_flows_follow_the_discrete_optimizer(small, kind):
    """The flow at step 20/h against 20/h steps of ``optimizer.step`` (which the library's
    recursion also takes): read staggered, the recursion is the ODE's midpoint rule, so
    the distance falls like h^2 (it falls like h for a flow read forward, ``offset=0``)."""
    errors = []
    for h in (0.25, 0.125, 0.0625):
        optimizer, rate = STEP_H[kind](h)
        steps = round(20 / h)
        theta = recursion(LinearPopulation(small, rate=rate), optimizer, steps)
        library = odeflow.optimizer_steps(LinearPopulation(small, rate=rate), optimizer, steps,
                                          record=steps, progress=False)
        assert np.allclose(library.y[:theta.size, -1], theta, rtol=1e-12, atol=1e-14)
        flow = odeflow.solve(small, rate=rate, optimizer=optimizer, t_span=(0.0, steps),
                             t_eval=[0.0, steps], rtol=1e-11, atol=1e-13, progress=False)
        assert flow.meta["optimizer"]["kind"] == kind
        errors.append(np.max(np.abs(flow.y[:theta.size, -1] - theta)))
    order = np.log2(np.array(errors[:-1]) / errors[1:])
    moved = np.max(np.abs(theta - LinearPopulation(small).initial_state()))
    assert np.all(order > 1.8) and errors[-1] < 1e-3 * moved, (errors, order)


def test_ensemble_of_starts_equals_separate_solves(small):
    rng = np.random.default_rng(3)
    starts = [0.3 * rng.standard_normal(10) for _ in range(3)]
    t = np.linspace(0.0, T_END, 21)
    runs = odeflow.solve_ensemble(small, starts, t_span=(0.0, T_END), t_eval=t, progress=False)
    assert len(runs) == 3 and runs[0].stats["ensemble_size"] == 3
    for start, run in zip(starts, runs, strict=True):
        alone = odeflow.solve(small, start=start, t_span=(0.0, T_END), t_eval=t,
                              method="RK45", progress=False)
        assert np.allclose(run.W1, alone.W1, atol=1e-6) and np.allclose(run.W2, alone.W2,
                                                                        atol=1e-6)
    heavy = odeflow.solve_ensemble(small, starts[:2], rate=0.05, optimizer=odeflow.Momentum(0.9),
                                   t_span=(0.0, 50.0), progress=False)
    alone = odeflow.solve(small, start=starts[1], rate=0.05, optimizer=odeflow.Momentum(0.9),
                          t_span=(0.0, 50.0), method="RK45", progress=False)
    assert np.allclose(heavy[1].loss, alone.loss, rtol=1e-5, atol=1e-8)


def test_sweep_2x2_into_a_store(small, tmp_path):
    grid = {"rate": [0.5, 1.0], "init.scale": [0.05, 0.2]}
    ds = odeflow.sweep("linear2_flow", grid, data="linear2-small", settings={"t_end": T_END},
                       backend="serial", store=tmp_path / "linear.zarr", progress=False)
    back = odeflow.sweeps.open_store(tmp_path / "linear.zarr")
    assert dict(back["loss"].sizes) == {"rate": 2, "init.scale": 2, "time": ds.sizes["time"]}
    assert (back["status"] == 0).all() and (back["error"] == "").all()
    times = back["time"].values
    for rate in grid["rate"]:
        for scale in grid["init.scale"]:
            model = LinearData(small.teacher, small.hidden, scale, small.seed)
            alone = odeflow.solve(model, rate=rate, t_span=(0.0, T_END), t_eval=times,
                                  progress=False)
            stored = back["loss"].sel({"rate": rate, "init.scale": scale}).values
            assert np.array_equal(stored, alone.loss)


def test_spawned_sweep_workers_register_the_family(small, tmp_path, monkeypatch):
    """Workers started afresh (``spawn``, as on macOS; Linux forks them) register again the
    families the parent registered by a call, so the linear family's task runs there."""
    from odeflow.sweeps import backends

    monkeypatch.setattr(backends, "start_method", lambda: "spawn")
    assert backends.call_registered("spawn") == (f"{Linear2.__module__}:Linear2",)
    assert backends.call_registered("fork") == ()
    grid = {"rate": [0.5, 1.0]}
    ds = odeflow.sweep("linear2_flow", grid, data="linear2-small", settings={"t_end": 5.0},
                       backend="processes", workers=2, store=tmp_path / "spawn.zarr",
                       progress=False)
    assert (ds["status"] == 0).all() and (ds["error"] == "").all()
    for rate in grid["rate"]:
        alone = odeflow.solve(small, rate=rate, t_span=(0.0, 5.0), t_eval=ds["time"].values,
                              progress=False)
        assert np.array_equal(ds["loss"].sel(rate=rate).values, alone.loss)

    class Local(Linear2):
        name = "linear2_local"

    register_family(Local)
    try:
        with pytest.raises(ValidationError, match="^backend: .*linear2_local.*<locals>"):
            backends.call_registered("spawn")
    finally:
        unregister_family("linear2_local")


def test_a_worker_that_cannot_import_a_family_says_which():
    """A worker started by no process of the user's (``dask worker``) cannot import a
    class of the user's script (``__main__``): the task fails naming ``backend`` and the
    class, not with a bare AttributeError."""
    from odeflow.sweeps import backends

    with pytest.raises(ValidationError, match=r"^backend: .*__main__:NoSuchFamily"):
        backends.compute_points("{}", [], ("__main__:NoSuchFamily",))


def test_dask_workers_register_the_family(small, tmp_path):
    """Dask workers (other interpreters, started by no initializer of ours) register the
    families the client registered by a call from their tasks, so the linear family's
    sweep runs on a local cluster of worker processes."""
    Client = pytest.importorskip("distributed").Client  # noqa: N806
    from tests.sweep_helpers import local_cluster

    grid = {"rate": [0.5, 1.0]}
    with local_cluster() as cluster, Client(cluster) as client:
        ds = odeflow.sweep("linear2_flow", grid, data="linear2-small",
                           settings={"t_end": 5.0}, backend="dask", client=client,
                           store=tmp_path / "dask.zarr", progress=False)
    assert (ds["status"] == 0).all() and (ds["error"] == "").all()
    for rate in grid["rate"]:
        alone = odeflow.solve(small, rate=rate, t_span=(0.0, 5.0), t_eval=ds["time"].values,
                              progress=False)
        assert np.array_equal(ds["loss"].sel(rate=rate).values, alone.loss)


def test_figure_draws_the_loss(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    fig = odeflow.plots.make_figure("linear2-loss", data="linear2-scalar", t_end=5.0)
    (line,) = fig.axes[0].get_lines()
    traj = odeflow.solve(LinearData.preset("linear2-scalar"), t_span=(0.0, 5.0), progress=False)
    assert np.array_equal(line.get_ydata(), traj.loss)
    with pytest.raises(ValidationError, match="eta_y"):
        odeflow.plots.make_figure("linear2-loss", eta_y=1.0)


def test_verify_runs_the_family_check():
    """The check runs, and the closing line names the family's own times (its CheckFamily's
    ``grid``), beside the run's grid that Scan and Snap's checks use."""
    report = odeflow.verify(checks=["CF-LIN1"])
    (row,) = report.rows
    assert report.passed and row.check == "CF-LIN1" and row.max_rel_error < 1e-8
    assert report.summary().endswith("; t in [0.01, 10] (60 log-spaced points); "
                                     f"{report.wall_time:.1f} s")
    both = odeflow.verify(checks=["CF-LIN1", "CF3"], t_max=1e3)
    assert both.settings["grids"] == {"scan_snap": "t in [0.001, 1000] (121 log-spaced points)",
                                      "linear2": "t in [0.01, 10] (60 log-spaced points)"}
    assert "; scan_snap: t in [0.001, 1000] (121 log-spaced points); linear2: t in [0.01, " \
        "10]" in both.summary()


def test_config_file_and_command_line(tmp_path, capsys):
    from odeflow.cli import main

    text = 'family = "linear2"\nteacher = [[2.0]]\n[init]\nscale = 0.2\n[run]\nt_end = 5.0\n'
    data, options = odeflow.data.parse_config(text)
    assert data == LinearData(((2.0,),), init_scale=0.2) and options == {"t_end": 5.0}
    (tmp_path / "linear.toml").write_text(text)
    out = tmp_path / "run.npz"
    assert main(["run", "--config", str(tmp_path / "linear.toml"), "--out", str(out),
                 "--no-progress"]) == 0
    saved = np.load(out)
    assert saved["t"][-1] == 5.0 and saved["loss"][-1] < saved["loss"][0]
    assert main(["verify", "--only", "CF-LIN1", "--no-progress"]) == 0
    assert "CF-LIN1" in capsys.readouterr().out


def test_the_family_run_option_is_a_run_key_and_a_flag(tmp_path, capsys):
    """The family's own option ``rate`` (its ``run_options``) is a ``[run]`` key and a flag
    of ``odeflow run`` (the flag overriding the key); another family's option is refused for
    it, and ``rate`` for another family, by name."""
    import json

    from tests.cli_helpers import cli, one_error_line

    text = 'family = "linear2"\nteacher = [[2.0]]\n[run]\nt_end = 2.0\nrate = 0.5\n'
    data, options = odeflow.data.parse_config(text)
    assert options == {"t_end": 2.0, "rate": 0.5}
    config = tmp_path / "linear.toml"
    config.write_text(text)
    for extra, rate in (((), 0.5), (("--rate", "2"), 2.0)):
        out = tmp_path / f"rate{rate}.npz"
        code, shown, err = cli(capsys, "run", "--config", config, "--out", out, "--rows", "0",
                               "--no-progress", *extra)
        assert code == 0, err
        assert f"flow=population, rate={rate:g}," in shown
        saved = np.load(out)
        assert json.loads(str(saved["metadata"]))["meta"]["rate"] == rate
        alone = odeflow.solve(data, rate=rate, t_span=(0.0, 2.0), rtol=1e-8, atol=1e-10,
                              progress=False)
        assert np.array_equal(saved["t"], alone.t) and np.array_equal(saved["loss"], alone.loss)
    assert "--rate RATE two-layer linear network y = W2 W1 x on Gaussian data: learning " \
        "rate eta" in " ".join(cli(capsys, "run", "--help")[1].split())
    code, _, err = cli(capsys, "run", "--preset", "syn-small", "--rate", "2")
    assert code == 2 and one_error_line(err) == (
        "odeflow: error: --rate: does not apply to flow exact of Scan and Snap (syn-small); "
        "that flow takes --eta-y, --eta-z")
    config.write_text(text.replace("rate = 0.5", "eta_z = 0.5"))
    code, _, err = cli(capsys, "run", "--config", config, "--out", tmp_path / "x.npz")
    assert code == 2 and one_error_line(err).startswith(
        "odeflow: error: run.eta_z: does not apply to flow population of two-layer linear")
    assert one_error_line(err).endswith("that flow takes --rate")
    with pytest.raises(ValidationError, match="^run.rate"):
        odeflow.data.parse_config(text.replace("0.5", "-1.0"))
