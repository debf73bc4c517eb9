"""scipy conventions on solve results: success, y, dense output, events (snap transition)."""

import math

import numpy as np
import pytest
from scipy.special import lambertw

import odeflow
from odeflow import closed_forms as cf

SMALL = odeflow.DataModel.preset("syn-small")


def gamma_peak_time(M, eta_y, pi):
    """argmax_t gamma(t) from CF1's implicit form: (h-1) e^h = M - 1, h = 1 + W((M-1)/e)."""
    h = 1.0 + lambertw((M - 1) / math.e).real
    return (math.exp(h) - 1.0 + (M - 1) * h) / (eta_y * pi * M)


@pytest.mark.parametrize("flow", ["exact", "reduced", "finite_t"])
def test_result_has_solve_ivp_fields(flow):
    traj = odeflow.solve(SMALL, flow=flow, t_span=(0.0, 100.0), dense_output=True)
    assert traj.success is True and traj.status == 0
    assert "successfully" in traj.message
    assert traj.y.shape[1] == traj.t.size and traj.y.shape[0] == traj.stats["n_state"]
    # the raw state and the dense output agree at the output times (to solver tolerance)
    for i in (5, traj.t.size // 2, -1):
        assert np.allclose(traj.sol(traj.t[i]), traj.y[:, i], rtol=1e-6, atol=1e-8)
    assert traj.t_events is None and traj.y_events is None


def test_no_dense_output_by_default():
    traj = odeflow.solve(SMALL, t_span=(0.0, 10.0))
    assert traj.sol is None


def test_snap_transition_is_the_peak_of_gamma_at_level_r():
    traj = odeflow.solve(SMALL, flow="reduced", t_span=(0.0, 1e3), rtol=1e-10, atol=1e-12,
                         events=[odeflow.snap_transition(), odeflow.margin_crossover()])
    assert traj.event_names == ("snap_transition", "margin_crossover")
    (t_peak,), (t_cross,) = traj.t_events
    pi = SMALL.weights[0]
    assert t_peak == pytest.approx(gamma_peak_time(34, 1.0, pi), rel=1e-7)
    assert t_cross == pytest.approx(cf.transition_time(34, 1.0, pi), rel=1e-7)
    assert t_peak < t_cross
    # gamma sampled on the output grid peaks within one grid step of the event
    i = int(np.argmax(traj.gamma))
    assert traj.t[i - 1] <= t_peak <= traj.t[i + 1]
    # y_events hold the raw state at the event: the margin there solves (h-1) e^h = M-1
    h = traj.y_events[0][0][0]
    assert (h - 1.0) * math.exp(h) == pytest.approx(33.0, rel=1e-6)


@pytest.mark.parametrize("flow", ["exact", "finite_t"])
def test_snap_transition_on_levels_with_a_decoder(flow):
    traj = odeflow.solve(SMALL, flow=flow, t_span=(0.0, 1e3),
                         events=odeflow.snap_transition(next_token=33))
    (t0,) = traj.event_times("snap_transition")
    # the margin read off the decoder meets the event's condition there
    from odeflow.families import family_named

    field = family_named("scan_snap").field_class(flow)(SMALL, 1.0, 0.1)
    h = field.margins(traj.sol(t0) if traj.sol is not None else traj.y_events[0][0])[1]
    assert (h - 1.0) * math.exp(h) == pytest.approx(33.0, rel=1e-5)
    # and it lies near the Level R value (the levels differ by modelling error only)
    assert 0.5 < t0 / gamma_peak_time(34, 1.0, 0.5) < 2.0


def test_terminal_event_stops_the_solve():
    traj = odeflow.solve(odeflow.DataModel.preset("snap-small"), flow="snap",
                         events=odeflow.snap_transition(terminal=True))
    (t0,) = traj.t_events[0]
    assert traj.status == 1 and traj.success
    assert traj.t[-1] <= t0 < 1e4


def test_plain_event_functions_pass_through():
    def margin_two(t, y):  # Level R: h of the first class is y[0]
        return y[0] - 2.0

    margin_two.direction = 1.0
    traj = odeflow.solve(SMALL, flow="reduced", t_span=(0.0, 100.0), events=margin_two)
    assert traj.event_names == ("margin_two",)
    (t2,) = traj.t_events[0]
    assert traj.y_events[0][0][0] == pytest.approx(2.0, abs=1e-7)
    # CF1's implicit form at h = 2
    assert t2 == pytest.approx((math.exp(2.0) - 1 + 33 * 2.0) / (0.5 * 34), rel=1e-5)


@pytest.mark.parametrize("events, field", [
    (3, "events"), ([odeflow.snap_transition(), "x"], "events[1]"),
    (odeflow.snap_transition(next_token=5), "next_token"),
])
def test_bad_events_name_the_field(events, field):
    with pytest.raises(odeflow.ValidationError) as info:
        odeflow.solve(SMALL, t_span=(0.0, 10.0), events=events)
    assert info.value.field == field


def test_bad_dense_output_and_terminal():
    with pytest.raises(odeflow.ValidationError, match="dense_output"):
        odeflow.solve(SMALL, t_span=(0.0, 10.0), dense_output="yes")
    with pytest.raises(odeflow.ValidationError, match="terminal"):
        odeflow.snap_transition(terminal=1)


def test_loaded_result_keeps_status_not_the_raw_state(tmp_path):
    traj = odeflow.solve(SMALL, t_span=(0.0, 10.0), events=odeflow.snap_transition())
    back = odeflow.Trajectory.load(traj.save(tmp_path / "r.npz"))
    assert back.success and back.status == 0 and back.y is None and back.sol is None
    with pytest.raises(odeflow.ValidationError, match="no event"):
        back.event_times()


def test_blas_is_single_threaded_during_each_solve_and_restored_after():
    """solve limits BLAS to SOLVE_BLAS_THREADS while solve_ivp runs (one controller per
    process, found once), every time, and gives the threads back afterwards."""
    from threadpoolctl import threadpool_info

    from odeflow.solver.integrate import SOLVE_BLAS_THREADS

    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    seen = []

    def probe(t, y):
        seen.append(blas_threads())
        return 1.0

    data = odeflow.DataModel.preset("syn-small")
    for _ in range(2):
        odeflow.solve(data, flow="reduced", t_span=(0.0, 1.0), events=probe, progress=False)
    assert seen and all(threads == [SOLVE_BLAS_THREADS] * len(threads) for threads in seen)
    assert blas_threads() == before
