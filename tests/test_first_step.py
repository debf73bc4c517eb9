"""The first step a field offers its integrator (``Field.initial_step``): one optimiser step
for an optimiser flow, passed to the one-step methods as ``first_step``; none for the
other fields, which keep the integrator's own estimate."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import RK45, solve_ivp

import odeflow
from odeflow import Adam, Momentum, ValidationError
from odeflow.fields import ExactFlow
from odeflow.fields.optimizers import optimizer_flow
from odeflow.fields.optimizers.flow import INITIAL_STEP
from odeflow.solver.options import METHODS, ONE_STEP, prepare


@pytest.fixture(scope="module")
def small():
    return odeflow.DataModel.preset("syn-small")


def test_a_plain_field_offers_no_first_step(small):
    field = ExactFlow(small, 1.0, 0.1)
    assert field.initial_step() is None
    for method in METHODS:
        assert "first_step" not in prepare(field, 0.0, 10.0, None, method)[2]


def test_an_optimiser_flow_offers_one_step_to_the_one_step_methods(small):
    flow = optimizer_flow(ExactFlow(small, 1.0, 0.1), Momentum(0.9))
    assert flow.initial_step() == INITIAL_STEP == 1.0
    for method in METHODS:
        options = prepare(flow, flow.start_step, 10.0, None, method)[2]
        assert options.get("first_step") == (1.0 if method in ONE_STEP else None), method


def _first_step_taken(flow, rtol, atol) -> float:
    solver = RK45(flow.rhs, flow.start_step, flow.initial_state(), 50.0,
                  first_step=flow.initial_step(), rtol=rtol, atol=atol)
    solver.step()
    return solver.t - flow.start_step


def test_a_first_step_too_large_is_shrunk_and_the_tolerance_still_met(small):
    rtol, atol, eta = 1e-6, 1e-9, 30.0
    flow = optimizer_flow(ExactFlow(small, eta, eta), Momentum(0.9))
    assert _first_step_taken(flow, rtol, atol) < 0.5 * INITIAL_STEP  # rejected, shrunk
    steps = np.array([0.0, 1.0, 5.0, 20.0, 50.0])
    traj = odeflow.solve(small, flow="exact", eta_y=eta, eta_z=eta, optimizer=Momentum(0.9),
                         t_span=(0, 50), t_eval=steps, method="RK45", rtol=rtol, atol=atol)
    ref = solve_ivp(flow.rhs, (flow.start_step, 50.0), flow.initial_state(),
                    method="DOP853", t_eval=steps, rtol=1e-12, atol=1e-14)
    got = traj.y
    scale = atol + rtol * np.abs(ref.y)
    # the global error of a tolerance-controlled solve: a few times its local tolerance
    assert np.max(np.abs(got - ref.y) / scale) < 100.0
    assert np.max(np.abs(got - ref.y)) > 0.0  # the solves are not the same computation


def test_one_step_saves_right_hand_sides_from_rest(small):
    """From rest the integrator's own estimate is far below one step; RK45 on the heavy ball
    at the paper's tolerances then takes fewer right-hand sides with the flow's first step."""
    flow = optimizer_flow(ExactFlow(small, 1.0, 0.1), Momentum(0.9))
    counts = {}
    for first in (None, flow.initial_step()):
        extra = {} if first is None else {"first_step": first}
        sol = solve_ivp(flow.rhs, (flow.start_step, 100.0), flow.initial_state(),
                        method="RK45", rtol=1e-5, atol=1e-7, **extra)
        counts[first] = sol.nfev
    assert counts[1.0] < counts[None], counts


@pytest.mark.parametrize("optimizer", [Momentum(0.9), Adam(exact_steps=2)])
def test_spans_shorter_than_one_step_are_solved(small, optimizer):
    """The first step is capped at the span (the heavy ball's half step before step 0,
    Adam's half step before its ODE starts)."""
    for end in (0.25, 2.3):
        traj = odeflow.solve(small, flow="exact", optimizer=optimizer, t_span=(0, end),
                             method="RK45", rtol=1e-6, atol=1e-9)
        assert traj.steps[-1] == end and np.all(np.isfinite(traj.y))


def test_first_step_is_not_a_solve_option(small):
    """``odeflow.solve`` takes no ``first_step``: it is the field's (a flow option of that
    name is refused by name, as any option the flow does not take)."""
    with pytest.raises(ValidationError) as err:
        odeflow.solve(small, flow="exact", optimizer=Momentum(0.9), t_span=(0, 10),
                      first_step=0.5)
    assert err.value.field == "first_step"
