"""The solve entry point: statistics, output grid, failures, save/load, progress."""

import time

import numpy as np
import pytest

import odeflow
from odeflow import SolveError, Trajectory
from odeflow.fields.exact import ExactFlow
from odeflow.fields.induction import Schedule
from odeflow.solver import integrate as solve_loop
from odeflow.solver import schedule as solve_schedule_module


@pytest.fixture(scope="module")
def small():
    return odeflow.DataModel.preset("shared-query-small")


def test_stats_and_default_grid(small):
    traj = odeflow.solve(small, t_span=(0, 1e4))
    s = traj.stats
    for key in ("method", "nfev", "njev", "nlu", "status", "message", "wall_time"):
        assert key in s
    assert s["status"] == 0 and s["nfev"] > 0
    t = traj.t
    assert t[0] == 0 and t[-1] == pytest.approx(1e4)
    ratios = t[2:] / t[1:-1]
    assert np.allclose(ratios, ratios[0])  # log-spaced after t0
    assert t.size >= 6 * 40 - 1


def test_accessor_shapes(small):
    traj = odeflow.solve(small, t_span=(0, 100), t_eval=[0, 1, 10, 100])
    assert traj.logits(0).shape == (4, 30)
    f = traj.attention(1)
    assert f.shape == (4, 30) and np.allclose(f.sum(axis=1), 1.0)
    fh = traj.features(2)
    assert np.allclose(np.linalg.norm(fh, axis=1), 1.0)
    assert traj.decoder.shape == (4, 30, 30)
    assert traj.objective.shape == (4,)


def test_methods_agree(small):
    """Every method solves the same ODE: solutions agree to tolerance."""
    ref = odeflow.solve(small, eta_z=1.0, t_span=(0, 1e3), method="Radau", rtol=1e-11,
                        atol=1e-13)
    for method in ("BDF", "LSODA", "RK45", "DOP853"):
        traj = odeflow.solve(small, eta_z=1.0, t_span=(0, 1e3), method=method, t_eval=ref.t)
        assert np.abs(traj.z_active - ref.z_active).max() < 1e-6, method


def test_failed_solve_raises_with_scipy_message(small, monkeypatch):
    def blow_up(self, t, y):
        return np.full_like(y, np.inf) if t > 1 else np.ones_like(y)

    monkeypatch.setattr(ExactFlow, "rhs", blow_up)
    with pytest.raises(SolveError) as info:
        odeflow.solve(small, t_span=(0, 10), method="RK45")
    assert "exact flow (RK45)" in str(info.value)
    assert info.value.stats["method"] == "RK45"


def test_a_solve_stopped_by_its_budget_reports_how_far_it_got(small):
    """The SolveError's statistics are those of the stopped solve (evaluations, Jacobians,
    time, where it stopped), not a snapshot taken before it started."""
    with pytest.raises(SolveError) as info:
        odeflow.solve(small, eta_z=1e12, t_span=(0.0, 10.0), method="Radau", max_nfev=300,
                      progress=False)
    stats = info.value.stats
    assert stats["nfev"] == 300 and stats["status"] == -1 and stats["njev"] >= 1
    assert 0.0 < stats["t_reached"] < 10.0 and f"t = {stats['t_reached']:.6g}" in str(info.value)
    assert stats["wall_time"] > 0 and stats["rhs_calls"] >= 300


def test_overflow_in_rhs_is_reported_not_nan(small, monkeypatch):
    def overflow(self, t, y):
        return np.exp(np.full_like(y, 1e4))

    monkeypatch.setattr(ExactFlow, "rhs", overflow)
    with pytest.raises(SolveError, match="floating-point"):
        odeflow.solve(small, t_span=(0, 10), method="RK45")


def test_save_load_round_trip(small, tmp_path):
    traj = odeflow.solve(small, eta_z=0.5, t_span=(0, 100))
    path = traj.save(tmp_path / "out" / "run.npz")
    assert path.exists() and path.stat().st_size > 0
    assert not list(path.parent.glob(".*.tmp"))
    back = Trajectory.load(path)
    assert back.data == small
    assert np.array_equal(back.t, traj.t)
    assert np.array_equal(back.decoder, traj.decoder)
    assert np.array_equal(back.logits(0), traj.logits(0))
    assert back.stats["nfev"] == traj.stats["nfev"]
    assert back.meta["flow"] == "exact"


def test_eqn11_accessors_read_the_lumped_columns(small):
    traj = odeflow.solve(small, eta_z=1.0, t_span=(0, 100))
    z = traj.logits(0)
    assert np.array_equal(traj.growth_factor(1, 19), np.expm1(2 * (z[:, 19] - z[0, 19])))
    ratio2 = (small.probs(1)[19] / small.probs(1)[12]) ** 2 * np.exp(2 * (z[:, 19] - z[:, 12]))
    # the reference differences two O(4) numbers, so it is good to ~1e-15 * 4 absolute
    assert np.allclose(traj.relative_gain(1, 19, 12), ratio2 - ratio2[0], rtol=1e-10,
                       atol=1e-13 * ratio2.max())
    with pytest.raises(odeflow.ValidationError, match="^token"):
        traj.growth_factor(1, 30)
    with pytest.raises(odeflow.ValidationError, match="^other"):
        traj.relative_gain(1, 19, 25)


def test_load_rejects_foreign_files(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros(3))
    with pytest.raises(odeflow.ValidationError, match="^path"):
        Trajectory.load(path)
    with pytest.raises(odeflow.ValidationError, match="^path"):
        Trajectory.load(tmp_path / "missing.npz")


def test_lumped_cost_is_independent_of_vocabulary():
    """Same active set, M from 1e3 to 1e5: the lumped state has the same size."""
    sizes = set()
    for M in (1_000, 100_000):
        classes = [odeflow.SequenceClass(M - 1 - k, 0, {k: 0.5, 10 + k: 0.5}) for k in range(3)]
        sizes.add(ExactFlow(odeflow.DataModel(M, classes), 1.0, 0.1).size)
    assert len(sizes) == 1


def test_default_output_grid_is_bounded_in_memory():
    """The default t_eval of a huge state keeps its snapshots under OUTPUT_BYTES_LIMIT."""
    from odeflow.solver.options import MIN_OUTPUT_POINTS, OUTPUT_BYTES_LIMIT, default_t_eval

    assert default_t_eval(0.0, 1e8).size == 401  # small states: 40 points a decade
    assert default_t_eval(0.0, 1e8, state_size=130).size == 401
    big = 502_020
    grid = default_t_eval(0.0, 1e8, state_size=big)
    assert 8 * big * grid.size <= OUTPUT_BYTES_LIMIT + 8 * big  # t0 beside the capped grid
    assert grid[0] == 0.0 and grid[-1] == 1e8 and np.all(np.diff(grid) > 0)
    assert default_t_eval(0.0, 1e4, state_size=10**9).size == MIN_OUTPUT_POINTS + 1


# ------------------------------------------------------------- progress, messages
def test_a_staged_solve_has_a_readable_message():
    traj = odeflow.solve(odeflow.InductionData.preset("ih-point"),
                         schedule=Schedule.staged(2.0, 2.0, 2.0), progress=False)
    assert traj.message == ("3 stages: The solver successfully reached the end of the "
                            "integration interval.")
    assert [s["message"] for s in traj.stats["stages"]] == [traj.message[10:]] * 3
    assert solve_schedule_module._stages_message(["done", "stopped"]) == \
        "stage 1: done; stage 2: stopped"


def test_induction_solves_report_progress_as_scan_and_snap_do(monkeypatch, capsys):
    monkeypatch.setattr(solve_loop, "PROGRESS_LOG_SECONDS", 0.0)
    data = odeflow.InductionData.preset("ih-point")
    odeflow.solve(data, t_span=(0.0, 10.0))  # stderr is no terminal here: lines
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines and all(line.startswith("odeflow: population flow (LSODA): t = ")
                         for line in lines if "evaluating" not in line)
    assert captured.out == ""
    odeflow.solve(data, t_span=(0.0, 10.0), progress=False)
    assert capsys.readouterr().err == ""


def test_a_long_result_evaluation_says_so(small, monkeypatch, capsys):
    """The results of some flows (the induction heads' loss at every output time) take
    longer to evaluate than the integration: a line says so while it lasts."""
    monkeypatch.setattr(solve_loop, "PROGRESS_LOG_SECONDS", 0.02)
    monkeypatch.setattr(solve_loop, "RESULT_QUIET_SECONDS", 0.02)
    slow = ExactFlow.trajectory

    def trajectory(self, *args):
        time.sleep(0.2)
        return slow(self, *args)

    monkeypatch.setattr(ExactFlow, "trajectory", trajectory)
    traj = odeflow.solve(small, t_span=(0, 10), t_eval=[0, 1, 10], progress=None)
    err = capsys.readouterr().err
    assert "exact flow (LSODA): integrated; evaluating the result at 3 output times" in err
    assert traj.t.size == 3
    odeflow.solve(small, t_span=(0, 10), t_eval=[0, 1, 10], progress=False)
    assert capsys.readouterr().err == ""


def test_integrator_warnings_go_to_the_stats_and_others_are_issued():
    """scipy's integrator warnings (LSODA's convergence complaints) are collected once
    each for the solve's statistics; a warning of any other origin is still issued."""
    import warnings

    from odeflow.solver.integrate import _integrator_warnings

    lsoda = "/site-packages/scipy/integrate/_ivp/lsoda.py"
    with pytest.warns(RuntimeWarning, match="from the field"):
        said = []
        with _integrator_warnings(said):
            for _ in range(2):
                warnings.warn_explicit("lsoda: Repeated convergence failures", UserWarning,
                                       lsoda, 161)
            warnings.warn("from the field", RuntimeWarning, stacklevel=1)
    assert said == ["lsoda: Repeated convergence failures"]


def test_a_solve_reports_its_integrator_warnings():
    traj = odeflow.solve(odeflow.DataModel.preset("syn-small"), flow="reduced",
                         t_span=(0.0, 10.0), progress=False)
    assert traj.stats["integrator_warnings"] == []
