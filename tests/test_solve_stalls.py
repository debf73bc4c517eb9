"""Solves that cannot get on stop early and say why (issue: process faults, crawling solves).

A horizon LSODA cannot resolve is refused before the solve; a solve whose ``t``
stops moving, or whose field is rounding noise beyond ``rtol`` and whose pace
falls while far from done (or would exhaust the budget), stops with a
:class:`SolveError` naming the cause; a stiff solve that speeds up is left alone;
progress lines off a terminal show ``t``, the step size and the rate.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import odeflow
from odeflow.errors import SolveError
from odeflow.solver import integrate as solve_loop
from tests.cli_helpers import cli, one_error_line


@pytest.fixture(scope="module")
def data():
    return odeflow.DataModel.preset("syn-small")


def test_lsoda_refuses_a_span_below_what_it_resolves(data, capsys):
    with pytest.raises(SolveError, match="below what LSODA resolves") as info:
        odeflow.solve(data, t_span=(0.0, 1e-300), method="LSODA", progress=False)
    assert info.value.stats["nfev"] == 0  # refused before any step
    code, _, err = cli(capsys, "run", "--t-end", "1e-300", "--rows", "0", "--no-progress")
    assert code == 3 and "method='Radau', 'BDF' or 'RK45'" in one_error_line(err)
    # the methods that resolve it still do
    traj = odeflow.solve(data, t_span=(0.0, 1e-300), method="BDF", progress=False)
    assert traj.success and traj.t[-1] == 1e-300


def test_a_solve_whose_t_stops_moving_stops_early(data, monkeypatch):
    monkeypatch.setattr(solve_loop, "LSODA_MIN_SPAN", 0.0)  # let LSODA try: it stalls at 0
    with pytest.raises(SolveError, match=r"stopped at t = 0 .*t advanced by less than") as info:
        odeflow.solve(data, t_span=(0.0, 1e-300), method="LSODA", progress=False)
    assert info.value.stats["nfev"] <= solve_loop.STALL_CALLS  # not the 100,000 of max_nfev


def test_a_field_of_rounding_noise_stops_within_2000_right_hand_sides(capsys):
    """eta_z = 1e12: the field's rounding error is far above rtol and the step size
    cannot settle (the solve slows down as it goes); it is named at the check after
    2,000 right-hand sides, not after the 12,000 it took before."""
    code, _, err = cli(capsys, "run", "--eta-z", "1e12", "--t-end", "10", "--rows", "0",
                       "--no-progress")
    line = one_error_line(err)
    assert code == 3 and "after 2,000 right-hand sides" in line
    assert re.search(r"needs about [\d,]+ more, over \d+ times the 2,000 so far, because the "
                     r"right-hand side is rounding noise here.*use rtol = 1e-\d+ or more", line)


def test_a_stiff_but_resolved_solve_is_not_stopped(data):
    traj = odeflow.solve(data, eta_z=1e10, t_span=(0.0, 10.0), progress=False)
    assert traj.success and traj.stats["nfev"] > 4 * solve_loop.STALL_CALLS  # checked


def test_a_solve_that_speeds_up_on_a_noisy_field_is_not_stopped():
    """syn-medium-1 at eta_z = 1e9 to t = 1e4: its field is rounding noise beyond 100 rtol
    at times and at t = 300 its pace would need 16 times the right-hand sides taken so
    far, but its steps keep growing; it finishes in about 4,200."""
    traj = odeflow.solve(odeflow.DataModel.preset("syn-medium-1"), eta_z=1e9,
                         t_span=(0.0, 1e4), progress=False)
    assert traj.success and traj.stats["nfev"] > 8 * solve_loop.STALL_CALLS


def test_roundoff_level_of_a_well_conditioned_field_is_about_eps():
    def rhs(t, y):
        return -y

    level = solve_loop.roundoff_level(rhs, 0.0, np.linspace(1.0, 2.0, 5))
    assert 0 < level < 10 * np.finfo(float).eps
    assert solve_loop.roundoff_level(rhs, 0.0, np.zeros(3)) == 0.0


def test_progress_lines_show_t_the_step_and_the_rate(data, monkeypatch, capsys):
    monkeypatch.setattr(solve_loop, "PROGRESS_LOG_SECONDS", 0.0)
    odeflow.solve(data, t_span=(0.0, 10.0), progress=None)  # stderr is no terminal here
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(" step " in line and "/s)" in line for line in lines)
    assert "t = " in lines[-1]


@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_a_finite_difference_jacobian_of_a_large_state_is_not_a_stall(method, monkeypatch):
    """A field without an analytic Jacobian: each Jacobian is over a thousand right-hand
    sides at one time (syn-small's random start: 1,060 numbers). That is work, not a
    stall: the solve ends as with the analytic Jacobian."""
    from odeflow.fields.exact import ExactFlow

    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = odeflow.training_start(data, seed=0)
    options = dict(flow="exact", method=method, start=(y0, z0), t_span=(0.0, 10.0),
                   t_eval=[10.0], progress=False)
    analytic = odeflow.solve(data, **options)
    monkeypatch.setattr(ExactFlow, "has_jacobian", False, raising=False)
    real_init = ExactFlow.__init__

    def without_jacobian(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.has_jacobian = False

    monkeypatch.setattr(ExactFlow, "__init__", functools.wraps(real_init)(without_jacobian))
    numeric = odeflow.solve(data, **options)
    assert not numeric.stats["analytic_jacobian"]
    np.testing.assert_allclose(numeric.y[:, -1], analytic.y[:, -1], rtol=1e-4, atol=1e-8)
