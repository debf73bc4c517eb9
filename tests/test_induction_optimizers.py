"""Optimiser flows of the induction-head family (``docs/optimisers.md``, "Induction heads").

The levels ``population`` and ``finite_l`` (and the ``copier`` reduction) offer
:meth:`~odeflow.fields.induction.base.InductionField.parameter_level`, the same flow
with ``theta = (c, w, a)`` as its state, which :func:`odeflow.solve` wraps in the
heavy ball's or Adam's ODE in step time. Checked here: the solves run and keep the
optimiser's state; the flow follows the discrete optimiser (its one ``step``) with
the order the staggered reading predicts (second; first for the forward reading);
the parameter gradient is the loss's (central differences), zero on a frozen group;
the heavy ball with ``mu -> 0`` (matched rates) is the plain flow in step time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from threadpoolctl import threadpool_limits

import odeflow
from odeflow import Adam, InductionData, Momentum, ValidationError
from odeflow.fields.induction import CopierFlow, FiniteLengthFlow, PopulationFlow
from odeflow.fields.induction.parameters import InductionParameters
from odeflow.fields.optimizers import OptimizerFlow
from odeflow.training import optimizer_steps

#: A small finite-L sample (the code's loss is finite on any sample).
SMALL_SAMPLE = {"seq_len": 12, "sample_size": 40, "seed": 3, "loss": "code"}


@pytest.fixture(autouse=True)
def one_blas_thread():
    """One BLAS thread, as :func:`odeflow.solve` runs (the gradients and recursions here
    are called directly; their small products only lose to more threads)."""
    with threadpool_limits(1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def point():
    return InductionData.preset("ih-point")


@pytest.fixture(scope="module")
def paper():
    return InductionData.preset("ih-paper")


def _theta(field, states):
    """The parameter block of optimiser-flow states ``(size, n)``: ``(n, field.size)``."""
    return np.asarray(states)[: field.size].T


# ----------------------------------------------------------------------- solves
@pytest.mark.parametrize("optimizer", [Momentum(0.9), Adam()], ids=["momentum", "adam"])
@pytest.mark.parametrize("preset", ["ih-point", "ih-paper"])
def test_population_optimizer_flows_solve(preset, optimizer):
    data = InductionData.preset(preset)
    steps = 40 if preset == "ih-point" else 8
    traj = odeflow.solve(data, flow="population", optimizer=optimizer, rates=0.01,
                         t_span=(0, steps), rtol=1e-7, atol=1e-9, progress=False)
    np.testing.assert_array_equal(traj.t, np.arange(steps + 1.0))  # every whole step
    assert traj.meta["optimizer"] == optimizer.describe()
    assert traj.meta["time_axis"] == "step" and traj.meta["coordinates"] == "parameters"
    level = PopulationFlow(data, rates=0.01)
    names = {"momentum": ("velocity",), "adam": ("moment1", "moment2")}[optimizer.kind]
    for name in names:
        assert traj.series[name].shape == (steps + 1, level.size)
    # the result is the level's: p_S from c, log_c = ln|c|, the loss at the parameters
    np.testing.assert_allclose(traj.subset_weights.sum(axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(traj.log_c, np.log(np.abs(traj.c)), rtol=1e-14)
    theta = _theta(level, traj.y)
    np.testing.assert_allclose(theta[:, level.slices["c"]], traj.c, rtol=0, atol=0)
    assert traj.loss[-1] == pytest.approx(level.loss(theta[-1]), rel=1e-12)
    assert traj.loss[-1] < traj.loss[0]


@pytest.mark.parametrize("optimizer", [Momentum(0.9), Adam()], ids=["momentum", "adam"])
def test_finite_l_optimizer_flows_solve_on_a_small_sample(point, optimizer):
    traj = odeflow.solve(point, flow="finite_l", optimizer=optimizer, rates=0.01,
                         t_span=(0, 30), rtol=1e-7, atol=1e-9, progress=False, **SMALL_SAMPLE)
    level = FiniteLengthFlow(point, rates=0.01, **SMALL_SAMPLE)
    theta = _theta(level, traj.y)
    assert traj.meta["sample_size"] == 40 and traj.meta["optimizer"]["kind"] == optimizer.kind
    np.testing.assert_allclose(traj.loss, [level.model.loss(row) for row in theta], rtol=1e-12)
    assert traj.loss[-1] < traj.loss[0]


def test_copier_reduction_has_optimiser_flows_too(point):
    traj = odeflow.solve(point, flow="copier", optimizer=Momentum(0.9), rates=0.01,
                         t_span=(0, 20), progress=False)
    assert traj.copier_logits is None and traj.series["velocity"].shape == (21, 5)


def test_the_log_chart_level_itself_is_not_wrapped(point):
    """The solver state of a level holds ln|c| and its ``gradient`` is +grad L: an optimiser
    flow takes :meth:`parameter_level`, never the level."""
    level = PopulationFlow(point)
    with pytest.raises(ValidationError, match="^optimizer: "):
        OptimizerFlow(level, Momentum(0.9))
    assert isinstance(level.parameter_level(), InductionParameters)


# ---------------------------------------------------------- parameter coordinates
def _central_difference(loss, theta, h=1e-6):
    out = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h * max(1.0, abs(theta[i]))
        out[i] = (loss(theta + e) - loss(theta - e)) / (2 * e[i])
    return out


@pytest.mark.parametrize("make", [
    lambda d: PopulationFlow(d),
    lambda d: PopulationFlow(d, loss="code"),
    lambda d: CopierFlow(d),
    lambda d: FiniteLengthFlow(d, **SMALL_SAMPLE),
], ids=["population-nll", "population-code", "copier", "finite_l"])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_parameter_gradient_is_minus_the_loss_gradient(paper, make, scale):
    """``gradient(theta) == -dL/dtheta`` (central differences, relative step 1e-6), at a
    random point with coefficients of both signs and magnitude ``scale`` (the selector's
    gradient is 1/scale times that at scale 1); ``rhs == rate_vector * gradient``."""
    level = make(paper)
    par = level.parameter_level()
    rng = np.random.default_rng(7)
    theta = par.initial_state() + 0.3 * rng.standard_normal(par.size)
    c = par.slices["c"]
    theta[c] = scale * rng.uniform(0.2, 1.0, theta[c].size) * rng.choice([-1, 1], theta[c].size)
    numeric = -_central_difference(par.loss, theta)
    assert np.linalg.norm(par.gradient(theta) - numeric) <= 1e-6 * np.linalg.norm(numeric)
    np.testing.assert_array_equal(par.rhs(0.0, theta), par.rate_vector * par.gradient(theta))


def test_frozen_group_has_zero_gradient_and_rests_under_adam(point):
    rates = {"c": 0.01, "a": 0.01}                              # w frozen
    par = PopulationFlow(point, rates=rates).parameter_level()
    w = par.slices["w"]
    assert np.all(par.gradient(par.initial_state())[w] == 0.0)
    assert np.any(par.loss_gradient(par.initial_state())[w] != 0.0)
    traj = odeflow.solve(point, optimizer=Adam(), rates=rates, t_span=(0, 20), progress=False)
    start = par.initial_state()
    np.testing.assert_array_equal(_theta(par, traj.y)[:, w], np.tile(start[w], (21, 1)))
    assert np.all(traj.series["moment1"][:, w] == 0) and np.all(traj.series["moment2"][:, w] == 0)


def test_gradient_flow_in_parameters_is_the_levels_flow(point):
    """Without an optimiser, the parameter chart's flow ``theta' = -eta grad L`` is the
    level's own flow (solved in ln|c|): the same trajectory to the solver's tolerance, up
    to ``t = 15`` (on ih-point the losing coefficients then fall below ``atol``, and in
    ``c`` the error control times their recovery: module docstring of
    :mod:`odeflow.fields.induction.parameters`)."""
    level = PopulationFlow(point)
    par = level.parameter_level()
    grid = np.linspace(0.0, 15.0, 6)
    log_chart = odeflow.solve(point, t_span=(0, 15), t_eval=grid, rtol=1e-10, atol=1e-12,
                              progress=False)
    direct = solve_ivp(par.rhs, (0, 15), par.initial_state(), t_eval=grid, method="LSODA",
                       rtol=1e-10, atol=1e-12).y.T
    theta = np.array([log_chart.parameters(i) for i in range(grid.size)])
    np.testing.assert_allclose(direct, theta, rtol=1e-6, atol=1e-8)


def test_coefficients_below_the_range_of_doubles_start_at_zero(point):
    level = PopulationFlow(point)
    c = level.slices["c"]
    start, log_c = level.start, np.log(np.abs(level.start[c]))
    start[c.start] = 0.0
    log_c[0] = -900.0                                       # e^-900: 0 as a double
    par = PopulationFlow(point, start=start, start_log_c=log_c).parameter_level()
    assert par.initial_state()[c.start] == 0.0
    traj = odeflow.solve(point, start=start, start_log_c=log_c, optimizer=Momentum(0.9),
                         t_span=(0, 10), progress=False)
    assert np.all(traj.c[:, 0] == 0.0) and np.all(np.isneginf(traj.log_c[:, 0]))
    with pytest.raises(ValidationError, match="^c: "):
        par.gradient(np.zeros(par.size))


# ------------------------------------------------- against the discrete optimiser
def _step_h_errors(data, make_optimizer, rate_of, T, offset, hs=(0.5, 0.25, 0.125)):
    """Distance at step ``T / h`` between the flow and the discrete optimiser (its one
    ``step``, through :func:`optimizer_steps`) of the step-``h`` family, and the distance
    the recursion moved."""
    errors = []
    for h in hs:
        K = int(round(T / h))
        optimizer = make_optimizer(h, offset)
        level = PopulationFlow(data, rates=rate_of(h))
        recursion = optimizer_steps(level.parameter_level(), optimizer, K, record=K,
                                    progress=False)
        flow = odeflow.solve(data, rates=rate_of(h), optimizer=optimizer, t_span=(0, K),
                             t_eval=[K], rtol=1e-11, atol=1e-13, progress=False)
        errors.append(np.linalg.norm(flow.y[: level.size, -1] - recursion.y[: level.size, -1]))
        moved = np.linalg.norm(recursion.y[: level.size, -1] - recursion.y[: level.size, 0])
    return np.array(errors), moved


@pytest.mark.parametrize("kind", ["momentum", "adam"])
def test_flow_follows_the_discrete_optimiser_with_the_staggered_order(point, kind):
    """The step-``h`` family (heavy ball: ``mu_h = 1 - (1 - mu) h``, rates ``eta h^2``;
    Adam: betas ``b^h``, rates ``eta h``, ``1/h`` exact steps) tends to one ODE as ``h ->
    0``, up to 160 steps at rates down to 0.003 (momentum) and 2.5e-4 (Adam). Read staggered
    (``offset = 1/2``) the recursion is the ODE's midpoint rule: the distance falls as
    ``h^2``; read forward (``offset = 0``) as ``h``. The tolerance is that order (it fails
    for a flow that is not the recursion's ODE, e.g. the forward reading) and, at the
    smallest ``h``, a distance below 0.1% of the distance moved."""
    mu, betas = 0.9, (0.9, 0.999)
    if kind == "momentum":
        def make(h, offset):
            return Momentum(1.0 - (1.0 - mu) * h, offset=offset)

        def rate(h):
            return 0.2 * h * h
    else:
        def make(h, offset):
            return Adam((betas[0] ** h, betas[1] ** h), exact_steps=round(1 / h), offset=offset)

        def rate(h):
            return 0.002 * h
    staggered, moved = _step_h_errors(point, make, rate, 20.0, 0.5)
    forward, _ = _step_h_errors(point, make, rate, 20.0, 0.0)
    p_staggered = np.log2(staggered[:-1] / staggered[1:])
    p_forward = np.log2(forward[:-1] / forward[1:])
    print(kind, "staggered", staggered, p_staggered, "forward", forward, p_forward)
    assert np.all(p_staggered > 1.8), p_staggered
    assert np.all(np.abs(p_forward - 1.0) < 0.2), p_forward
    assert staggered[-1] < 1e-3 * moved


def _recursion_and_flow(data, flow, optimizer, rate, steps, **options):
    level = {"population": PopulationFlow, "finite_l": FiniteLengthFlow}[flow](
        data, rates=rate, **options)
    recursion = optimizer_steps(level.parameter_level(), optimizer, steps, progress=False)
    traj = odeflow.solve(data, flow=flow, rates=rate, optimizer=optimizer,
                         t_span=(0, steps), rtol=1e-9, atol=1e-11, progress=False, **options)
    gap = np.linalg.norm(_theta(level, traj.y) - _theta(level, recursion.y), axis=1)
    moved = np.linalg.norm(_theta(level, recursion.y) - level.parameter_level().initial_state(),
                           axis=1)
    return gap, moved, recursion, traj


@pytest.mark.parametrize("optimizer,rate", [(Momentum(0.9), 0.01), (Adam(), 0.002)],
                         ids=["momentum", "adam"])
def test_finite_l_flow_follows_its_recursion(point, optimizer, rate):
    """200 steps on a small finite-L sample at a small rate: at every step the flow is
    within 0.5% of the distance the recursion moved, 10 times closer than the forward
    reading (``offset = 0``) of the same optimiser."""
    gap, moved, recursion, traj = _recursion_and_flow(point, "finite_l", optimizer, rate, 200,
                                                      **SMALL_SAMPLE)
    forward = type(optimizer)(**{**_options(optimizer), "offset": 0.0})
    gap_forward = _recursion_and_flow(point, "finite_l", forward, rate, 200,
                                      **SMALL_SAMPLE)[0]
    print("gap", gap.max(), "forward", gap_forward.max(), "moved", moved.max())
    assert gap.max() < 5e-3 * moved.max()
    assert gap.max() < 0.1 * gap_forward.max()
    np.testing.assert_allclose(traj.loss, recursion.loss, atol=1e-3 * np.ptp(recursion.loss))


def _options(optimizer):
    out = optimizer.describe()
    out.pop("kind")
    if "betas" in out:
        out["betas"] = tuple(out["betas"])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("optimizer,rate", [(Momentum(0.9), 0.01), (Adam(), 0.002)],
                         ids=["momentum", "adam"])
def test_ih_paper_flow_follows_its_recursion_for_300_steps(paper, optimizer, rate):
    """ih-paper, 300 steps: the flow within 0.1% of the distance moved (measured 2e-4)."""
    gap, moved, recursion, traj = _recursion_and_flow(paper, "population", optimizer, rate, 300)
    print(f"{optimizer.kind}: gap {gap.max():.2g}, moved {moved.max():.3g}, loss gap "
          f"{np.max(np.abs(traj.loss - recursion.loss)):.2g}, nfev {traj.stats['nfev']}")
    assert gap.max() < 1e-3 * moved.max()


# ------------------------------------------------------------------- mu -> 0
def test_heavy_ball_with_vanishing_momentum_is_the_plain_flow_in_step_time(point):
    """With the matched rates ``b = -ln mu``, ``a = b / (1 - mu)`` the velocity relaxes to
    ``F`` in ``1/b`` steps, so the heavy ball's ``theta`` lags the plain flow (rate eta, step
    time = flow time) by about ``1/b`` steps: the distance is ``O(max|F| / b)``, halving
    each time ``ln(1/mu)`` doubles, and the recursion at ``mu = 0`` is gradient descent."""
    eta, steps = 0.01, 30
    grid = np.arange(steps + 1.0)
    plain = odeflow.solve(point, rates=eta, t_span=(0, steps), t_eval=grid, rtol=1e-11,
                          atol=1e-13, progress=False)
    theta_plain = np.array([plain.parameters(i) for i in range(grid.size)])
    par = PopulationFlow(point, rates=eta).parameter_level()
    force = max(np.max(np.abs(par.rhs(0, row))) for row in theta_plain)
    lag = []
    for mu in (1e-3, 1e-6, 1e-12):
        hb = odeflow.solve(point, rates=eta, optimizer=Momentum(mu, offset=0.0),
                           t_span=(0, steps), rtol=1e-11, atol=1e-13, progress=False)
        b = -math.log(mu)
        gap = np.max(np.abs(_theta(par, hb.y) - theta_plain))
        assert gap < 1.5 * force / b * math.sqrt(par.size)
        lag.append(gap)
    ratios = np.array(lag[:-1]) / lag[1:]                   # 2 up to O(1/b^2)
    assert np.all(ratios > 1.6) and ratios[-1] == pytest.approx(2.0, rel=0.05), ratios
    gd = optimizer_steps(par, Momentum(0.0), 5, progress=False)
    theta = par.initial_state()
    for k in range(1, 6):
        theta = theta + par.rhs(0, theta)
        np.testing.assert_allclose(gd.y[: par.size, k], theta, rtol=1e-15)


# ------------------------------------------------------------------- stages
def test_stages_of_fresh_optimiser_flows_follow_the_staged_discrete_optimiser(point):
    """The building blocks of ``schedule x optimizer`` with a fresh optimiser per stage (the
    authors' protocol builds ``optim.SGD`` anew for each phase, over the moving groups):
    the recursion with a fresh heavy ball per stage; from each stage's start, the optimiser
    flow from rest with the stage's rates keeps the frozen groups exactly and ends within
    1% of the stage's movement, nearer than the forward reading (``offset = 0``). (At a
    fixed ``mu`` the distance does not vanish with the rate: the velocity's 10-step
    warm-up from rest is discrete whatever the rate; the step-``h`` test above shrinks
    both.)"""
    stages = [({"c": 0.005}, 40), ({"w": 0.005}, 40), ({"a": 0.005}, 40)]
    theta = PopulationFlow(point).start
    for rates, steps in stages:
        level = PopulationFlow(point, rates=rates, start=theta)
        recursion = optimizer_steps(level.parameter_level(), Momentum(0.9), steps,
                                    record=steps, progress=False)
        end_rec = recursion.y[: level.size, -1]
        gaps = []
        for offset in (0.5, 0.0):
            traj = odeflow.solve(point, rates=rates, start=theta,
                                 optimizer=Momentum(0.9, offset=offset), t_span=(0, steps),
                                 t_eval=[steps], rtol=1e-10, atol=1e-12, progress=False)
            end = traj.parameters(-1)
            frozen = level.rate_vector == 0
            np.testing.assert_array_equal(end[frozen], theta[frozen])
            gaps.append(np.linalg.norm(end - end_rec))
        moved = np.linalg.norm(end_rec - theta)
        print(rates, "gap / moved", gaps[0] / moved, "forward", gaps[1] / moved)
        assert gaps[0] < 1e-2 * moved and gaps[0] < gaps[1], (rates, gaps, moved)
        theta = end_rec


def test_join_of_optimiser_flow_stages(point):
    """Stages solved as ``solve_schedule`` would with a fresh optimiser per stage (each from
    step 0, its ``t`` shifted to the schedule's steps) join into one result on the step
    axis: the optimiser's series per output, the heavy ball's flow time accumulated, the
    stages' spans in the schedule's steps."""
    from odeflow.fields.induction import Schedule

    schedule = Schedule.staged(20, 20, 20, rate_c=0.005, rate_w=0.005, rate_a=0.005)
    parts, start, log_c, t0 = [], None, None, 0.0
    for stage in schedule.checked(PopulationFlow.groups):
        traj = odeflow.solve(point, rates=stage.rates, start=start, start_log_c=log_c,
                             optimizer=Momentum(0.9), t_span=(0, stage.duration),
                             progress=False)
        traj.t = traj.t + t0
        start, log_c, t0 = traj.parameters(-1), traj.log_c[-1], t0 + stage.duration
        parts.append(traj)
    joined = PopulationFlow.join(parts)
    np.testing.assert_array_equal(joined.t, np.arange(61.0))
    assert [s["t_span"] for s in joined.meta["schedule"]] == [[0, 20], [20, 40], [40, 60]]
    assert joined.series["velocity"].shape == (61, 9) and joined.y.shape == (18, 61)
    np.testing.assert_array_equal(joined.series["velocity"][20], parts[0].series["velocity"][-1])
    flow_time = joined.series["flow_time"]
    assert np.all(np.diff(flow_time) > 0)
    end = parts[0].series["flow_time"][-1] + parts[1].series["flow_time"][-1]
    assert flow_time[40] == pytest.approx(end, rel=1e-15)
    np.testing.assert_array_equal(joined.parameters(-1), parts[-1].parameters(-1))
    plain = odeflow.solve(point, schedule=schedule, progress=False)   # the gradient flow
    with pytest.raises(ValidationError, match="^schedule: .*different series"):
        PopulationFlow.join([parts[0], plain])
