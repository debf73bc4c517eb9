"""Optimiser flows at long horizons: the default output's memory, the optimiser state kept
only when asked, and the slow-manifold phase of the heavy ball (``docs/optimisers.md``)."""

from __future__ import annotations

import numpy as np
import pytest

import odeflow
from odeflow import Adam, Momentum, ValidationError
from odeflow.fields import ExactFlow
from odeflow.fields.optimizers import OptimizerFlow
from odeflow.fields.optimizers.base import KEEP_STATE_BYTES
from odeflow.fields.optimizers.flow import DEFAULT_OUTPUT_BYTES, MIN_OUTPUT_STEPS
from odeflow.training import training_start


@pytest.fixture(scope="module")
def medium():
    return odeflow.DataModel.preset("syn-medium-10")


def _array_bytes(traj) -> int:
    """Bytes of every array a result holds (its attributes, series and raw state)."""
    seen, total = set(), 0
    for value in [*vars(traj).values(), *traj.series.values()]:
        if isinstance(value, np.ndarray) and id(value) not in seen:
            seen.add(id(value))
            total += value.nbytes
    return total


def test_default_output_steps_are_bounded_whatever_the_horizon(medium):
    y0, z0 = training_start(medium, 0)
    flow = OptimizerFlow(ExactFlow(medium, 1.0, 1.0, y0=y0, z0=z0), Momentum(0.9))
    counts = {end: flow.default_steps(0.0, end).size for end in (1e3, 1e6, 1e12)}
    cap = max(MIN_OUTPUT_STEPS, DEFAULT_OUTPUT_BYTES // (8 * flow.size)) + 2  # + t0, t_end
    assert all(c <= cap for c in counts.values()), counts
    grid = flow.default_steps(0.0, 1e12)
    assert grid[0] == 0.0 and grid[-1] == 1e12 and np.all(np.diff(grid) > 0)
    # log-spaced: as many steps in the last decade as in a middle one, give or take
    per_decade = np.histogram(np.log10(grid[1:]), bins=np.arange(0, 13))[0]
    assert per_decade[-1] <= 2 * per_decade[6] + 1
    small = OptimizerFlow(ExactFlow(medium, 1.0, 1.0), Momentum(0.9))  # lumped, 2 x 130
    np.testing.assert_array_equal(small.default_steps(0.0, 50.0), np.arange(51.0))


def test_default_output_memory_does_not_grow_with_the_horizon(medium):
    y0, z0 = training_start(medium, 0)
    sizes = []
    for end in (60.0, 600.0):
        traj = odeflow.solve(medium, y0=y0, z0=z0, eta_y=1.0, eta_z=1.0, t_span=(0, end),
                             optimizer=Momentum(0.9), rtol=1e-5, atol=1e-8, progress=False)
        sizes.append(_array_bytes(traj))
        assert "velocity" not in traj.series  # the state is large: not kept by default
        assert traj.y.nbytes <= DEFAULT_OUTPUT_BYTES + 2 * traj.y.shape[0] * 8
    assert sizes[1] <= 1.05 * sizes[0], sizes


@pytest.mark.parametrize("kind", [Momentum, Adam])
def test_optimizer_state_is_kept_when_asked(kind):
    data = odeflow.DataModel.preset("syn-small")
    names = ("velocity",) if kind is Momentum else ("moment1", "moment2")
    for keep, expect in ((True, True), (False, False), (None, True)):
        traj = odeflow.solve(data, optimizer=kind(keep_state=keep), t_span=(0, 8),
                             progress=False)
        assert all((name in traj.series) is expect for name in names), keep
    assert kind(keep_state=False) == kind(keep_state=True)  # output only, same dynamics
    with pytest.raises(ValidationError) as err:
        kind(keep_state="yes")
    assert err.value.field == "keep_state"


def test_keep_state_default_is_a_byte_budget():
    opt = Momentum(0.9)
    n = KEEP_STATE_BYTES // 8 // 100
    assert opt.keeps_state(100, n) and not opt.keeps_state(101, n)
    assert Momentum(0.9, keep_state=True).keeps_state(10**6, 10**6)
    assert not Adam(keep_state=False).keeps_state(1, 1)
