"""Optimiser flows at long horizons: the default output's memory, the optimiser state kept
only when asked, and the slow-manifold phase of the heavy ball (``docs/optimisers.md``)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp
from scipy.special import expit

import odeflow
from odeflow import Adam, Momentum, ValidationError
from odeflow.errors import SolveError
from odeflow.fields import ExactFlow
from odeflow.fields.base import Field
from odeflow.fields.optimizers import OptimizerFlow, optimizer_flow
from odeflow.fields.optimizers.base import KEEP_STATE_BYTES
from odeflow.fields.optimizers.flow import DEFAULT_OUTPUT_BYTES, MIN_OUTPUT_STEPS
from odeflow.fields.optimizers.slow_manifold import SlowManifold, solve_slow_manifold
from odeflow.results.solution import SolverOutput
from odeflow.solver.integrate import integrate_field
from odeflow.training import training_start
from tests.properties import examples


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
    flow = OptimizerFlow(ExactFlow(medium, 1.0, 1.0, start=(y0, z0)), Momentum(0.9))
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
        traj = odeflow.solve(medium, start=(y0, z0), eta_y=1.0, eta_z=1.0, t_span=(0, end),
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


# ------------------------------------------------------------------ slow manifold
class Logistic(Field):
    """Separable logistic regression, ``J = -sum_i pi_i log(1 + exp(-y_i x_i . theta))``
    (ascent on ``J``): a parameter level whose loss decays to 0 as Level E's does."""

    name = "logistic"
    has_jacobian = True

    def __init__(self, seed, n=5, points=12, rate=1.0):
        super().__init__()
        rng = np.random.default_rng(seed)
        w = rng.normal(size=n)
        self.x = rng.normal(size=(points, n))
        self.sy = np.sign(self.x @ w)[:, None] * self.x  # y_i x_i
        self.pi = rng.dirichlet(np.ones(points))
        self.rate_vector = np.full(n, float(rate))

    @property
    def size(self):
        return self.sy.shape[1]

    def initial_state(self):
        return np.zeros(self.size)

    def objective(self, y):
        return -float(self.pi @ np.logaddexp(0.0, -(self.sy @ y)))

    def gradient(self, y):
        return (self.pi * expit(-(self.sy @ y))) @ self.sy

    def rhs(self, t, y):
        self.nfev += 1
        return self.rate_vector * self.gradient(y)

    def jacobian(self, t, y):
        m = self.sy @ y
        w = self.pi * expit(m) * expit(-m)
        return -self.rate_vector[:, None] * ((self.sy * w[:, None]).T @ self.sy)

    def trajectory(self, t, states, stats):
        out = SolverOutput()
        out.t, out.series, out.stats, out.meta = t, {"theta": states.copy()}, stats, {}
        return out

    def parameters(self):
        return {"flow": self.name}


def _reference(flow, steps):
    """The heavy-ball ODE at ``steps``, tight (the reference of the slow-manifold phase)."""
    sol = solve_ivp(flow.rhs, (flow.start_step, steps[-1]), flow.initial_state(),
                    method="LSODA", jac=flow.jacobian, t_eval=steps, rtol=1e-11, atol=1e-13)
    assert sol.success
    return sol.y[:flow.n].T


def _losses(field, thetas):
    return np.array([-field.objective(th) for th in thetas])


@pytest.mark.parametrize("seed", range(4))
def test_slow_manifold_phase_agrees_with_the_heavy_ball_within_its_estimate(seed):
    rng = np.random.default_rng(100 + seed)
    field = Logistic(seed, rate=rng.uniform(0.3, 3.0))
    flow = OptimizerFlow(field, Momentum(rng.uniform(0.8, 0.95)))
    steps = np.unique(np.round(np.geomspace(1, 1e6, 61)))
    tol = 10.0 ** rng.uniform(-6, -4)
    traj = solve_slow_manifold(flow, steps[-1], t_eval=steps, rtol=1e-11, atol=1e-13, tol=tol)
    s0 = traj.stats["switch_step"]
    assert s0 is not None and s0 < 1e5  # it switched, well before the end
    assert traj.stats["switch"]["E"] <= tol * (1 + 1e-6)
    want = _losses(field, _reference(flow, steps))
    got = _losses(field, traj.series["theta"])
    late = steps > s0
    assert np.max(np.abs(got[late] / want[late] - 1.0)) <= tol
    np.testing.assert_allclose(got[~late], want[~late], rtol=1e-7)


@settings(max_examples=examples(8))
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 6), rate=st.floats(0.2, 5.0),
       mu=st.floats(0.5, 0.97), tol=st.sampled_from([1e-6, 1e-5, 1e-4]))
def test_switch_never_before_the_velocity_has_relaxed(seed, n, rate, mu, tol):
    field = Logistic(seed, n=n, rate=rate)
    optimizer = Momentum(mu)
    flow = OptimizerFlow(field, optimizer)
    traj = solve_slow_manifold(flow, 1e6, t_eval=[1e6], tol=tol, rtol=1e-10, atol=1e-12)
    s0 = traj.stats["switch_step"]
    if s0 is None:  # no switch (a velocity not resolved to tol): the ODE throughout
        assert "manifold" not in traj.stats
        return
    # on the reference ODE at the switch: the velocity is the slaved one (to first order)
    y = solve_ivp(flow.rhs, (flow.start_step, s0), flow.initial_state(), method="LSODA",
                  jac=flow.jacobian, rtol=1e-11, atol=1e-13).y[:, -1]
    manifold = SlowManifold(field, optimizer)
    h1 = manifold.first_order(y[:flow.n])
    assert np.linalg.norm(y[flow.n:] - h1) <= 3 * tol * np.linalg.norm(h1)
    # ... and many damping times after the start: the oscillation has decayed
    assert s0 * manifold.b > 5.0


def test_switch_refuses_where_switching_would_miss():
    field = Logistic(3, rate=2.0)
    flow = OptimizerFlow(field, Momentum(0.9))
    steps = np.unique(np.round(np.geomspace(1, 1e6, 61)))
    tol = 1e-5
    traj = solve_slow_manifold(flow, 1e6, t_eval=steps, rtol=1e-11, atol=1e-13, tol=tol)
    s0 = traj.stats["switch_step"]
    want = _losses(field, _reference(flow, steps))
    # a switch a decade earlier, where the estimate is above tol, misses the loss by more
    early = s0 / 10.0
    ref = solve_ivp(flow.rhs, (flow.start_step, early), flow.initial_state(), method="LSODA",
                    jac=flow.jacobian, rtol=1e-11, atol=1e-13).y[:, -1]
    manifold = SlowManifold(field, flow.optimizer)
    assert manifold.estimate(early + flow.offset, ref[:flow.n], ref[flow.n:])["switch"] > tol
    later = steps[steps > early]
    forced = solve_ivp(manifold.rhs, (early, 1e6), ref[:flow.n], method="LSODA",
                       jac=manifold.jacobian, t_eval=later, rtol=1e-11, atol=1e-13).y.T
    miss = np.max(np.abs(_losses(field, forced) / want[steps > early] - 1.0))
    assert miss > tol
    # a span that ends before the estimate falls below tol: no switch, the ODE throughout
    short = solve_slow_manifold(flow, early, t_eval=steps[steps <= early], rtol=1e-11,
                                atol=1e-13, tol=tol)
    assert short.stats["switch_step"] is None and "manifold_nfev" not in short.stats


def test_slow_manifold_refuses_what_has_none():
    field = Logistic(0)
    with pytest.raises(ValidationError) as err:
        SlowManifold(field, Adam())
    assert err.value.field == "optimizer"
    with pytest.raises(ValidationError):
        SlowManifold(field, Momentum(0.0))


def _solver_run(flow):
    """The integrator odeflow.solve hands a field (a partial of integrate_field)."""
    return functools.partial(integrate_field, flow, method="DOP853", rtol=1e-8, atol=1e-10,
                             kwargs={}, max_nfev=10**6, what="heavy ball", progress=False,
                             blas_threads=1)


def test_phased_flow_runs_on_the_solvers_integrator():
    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = training_start(data, 0)
    level = ExactFlow(data, 1.0, 1.0, start=(y0, z0))
    flow = optimizer_flow(level, Momentum(0.9, slow_manifold=1e-5))
    assert flow.phased and flow.preferred_method == "DOP853"
    steps = flow.default_steps(0.0, 1e5)
    sol, stats = flow.run_phases(flow.start_step, 1e5, steps, _solver_run(flow))
    traj = flow.trajectory(sol.t, sol.y.T, stats)
    assert stats["switch_step"] is not None and stats["manifold"]["nfev"] > 0
    assert stats["nfev"] > stats["manifold"]["nfev"]  # the totals of both phases
    alone = solve_slow_manifold(OptimizerFlow(level, Momentum(0.9)), 1e5, t_eval=steps)
    np.testing.assert_array_equal(traj.t, alone.t)
    np.testing.assert_allclose(traj.objective, alone.objective, rtol=1e-6)
    assert "velocity" in traj.series  # syn-small's state is small: kept by default
    past = traj.t > stats["switch_step"]
    manifold = SlowManifold(level, Momentum(0.9))
    k = np.flatnonzero(past)[0]
    np.testing.assert_allclose(traj.series["velocity"][k],
                               manifold.first_order(sol.y[:flow.n, k]), rtol=1e-12)


def test_solve_runs_a_phased_flow_in_phases_or_refuses():
    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = training_start(data, 0)
    try:
        traj = odeflow.solve(data, start=(y0, z0), t_span=(0, 2e4), progress=False,
                             optimizer=Momentum(0.9, slow_manifold=1e-5))
    except (ValidationError, SolveError) as err:  # a solver without run_phases: never silent
        assert "solved in phases" in str(err)
        return
    assert traj.stats["switch_step"] is not None
    assert traj.meta["optimizer"]["slow_manifold"] == 1e-5


def test_slow_manifold_option_is_checked():
    assert Momentum(0.9, slow_manifold=1e-5) != Momentum(0.9)
    assert "slow_manifold" not in Momentum(0.9).describe()
    for bad in (0.0, 1.5, "x", float("nan")):
        with pytest.raises(ValidationError) as err:
            Momentum(0.9, slow_manifold=bad)
        assert err.value.field == "slow_manifold"
    with pytest.raises(ValidationError):
        Momentum(0.0, modified=False, slow_manifold=1e-5)
