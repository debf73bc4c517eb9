"""Optimiser flows (spec section 9): heavy ball and Adam in step time around Levels E and T.

Checks the closed form under a constant force, the convergence of the discrete
optimisers to their ODEs as the step shrinks (with the order the derivation
``derivations/heavy_ball_modified_equation.py`` predicts), the first-order limit
of the heavy ball, lumping under Adam, refusals, the analytic Jacobian, files,
and the seeded random start.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import odeflow
from odeflow import Adam, Momentum, ValidationError
from odeflow.fields import ExactFlow, FiniteTFlow
from odeflow.fields.base import Field
from odeflow.fields.optimizers import OptimizerFlow, warmup_flow_time
from odeflow.results.solution import SolverOutput
from odeflow.training import Protocol, optimizer_steps, train, training_start


@pytest.fixture(scope="module")
def data():
    return odeflow.DataModel.preset("syn-small")


class ConstantField(Field):
    """``F = rate * g`` with a constant ``g``: the closed-form case of spec section 9."""

    name = "constant"
    has_jacobian = True

    def __init__(self, g, rate):
        super().__init__()
        self.g, self.rate_vector = np.asarray(g, float), np.asarray(rate, float)

    @property
    def size(self):
        return self.g.size

    def initial_state(self):
        return np.zeros(self.size)

    def gradient(self, y):
        return self.g.copy()

    def rhs(self, t, y):
        return self.rate_vector * self.g

    def jacobian(self, t, y):
        return np.zeros((self.size, self.size))

    def trajectory(self, t, states, stats):
        out = SolverOutput()
        out.t, out.series, out.stats, out.meta = t, {}, stats, {}
        return out

    def parameters(self):
        return {"flow": self.name}


def integrate(flow, s_end, t_eval=None, rtol=1e-11, atol=1e-13):
    sol = solve_ivp(flow.rhs, (flow.start_step, s_end), flow.initial_state(), t_eval=t_eval,
                    rtol=rtol, atol=atol, method="DOP853")
    assert sol.success
    return sol.y


def test_heavy_ball_constant_force_closed_form_and_warmup_slope():
    mu, F = 0.9, np.array([0.3, -1.2])
    flow = OptimizerFlow(ConstantField(F, 1.0), Momentum(mu, offset=0.0, modified=False))
    s = np.linspace(0.0, 200.0, 41)
    theta = integrate(flow, 200.0, s)[:2].T
    gam = 1.0 - mu
    closed = np.outer((s - (1.0 - np.exp(-gam * s)) / gam) / gam, F)
    np.testing.assert_allclose(theta, closed, rtol=1e-8, atol=1e-9)
    # the discrete heavy ball under a constant force follows the warm-up map exactly ...
    disc = optimizer_steps(ConstantField(F, 1.0), Momentum(mu), 200)
    k = np.arange(201)
    np.testing.assert_allclose(disc.y[:2].T, np.outer(warmup_flow_time(k, mu), F),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(disc.series["flow_time"], warmup_flow_time(k, mu))
    # ... whose slope the ODE's approaches, while the ODE from rest lags one step (CF7)
    ode = closed[:, 0] / F[0]
    slope_ode = (ode[-1] - ode[-2]) / (s[-1] - s[-2])
    assert abs(slope_ode - 1.0 / gam) < 1e-6
    lag = [(closed[i, 0] / F[0]) - warmup_flow_time(s[i] - 1.0, mu) for i in (5, 20, 40)]
    assert abs(lag[-1]) < 1e-6 < abs(lag[0])
    assert warmup_flow_time(1, mu) == pytest.approx(1.0)
    assert warmup_flow_time(10, mu) == pytest.approx(41.38, abs=0.01)


def test_matched_rates_exact_for_constant_force():
    mu, F = 0.9, np.array([0.7])
    flow = OptimizerFlow(ConstantField(F, 1.0), Momentum(mu, offset=0.0, modified=True))
    k = np.arange(0, 31, dtype=float)
    u = integrate(flow, 30.0, k)[1]
    disc = optimizer_steps(ConstantField(F, 1.0), Momentum(mu), 30)
    np.testing.assert_allclose(u, disc.series["velocity"][:, 0], rtol=1e-8, atol=1e-10)


def _scaled_heavy_ball(data, h, T, mu, eta):
    """The step-h recursion: unit steps of the heavy ball with mu_h = 1 - (1 - mu) h and
    rates eta h^2 (spec ODE invariant), for T / h steps; its final state."""
    field = ExactFlow(data, eta * h * h, eta * h * h)
    K = int(round(T / h))
    muh = 1.0 - (1.0 - mu) * h
    disc = optimizer_steps(field, Momentum(muh), K, record=K).y[: field.size, -1]
    return field, K, muh, disc


def test_discrete_heavy_ball_converges_to_the_ode_with_the_derived_order(data):
    mu, eta, T = 0.9, 0.5, 20.0
    spec = OptimizerFlow(ExactFlow(data, eta, eta), Momentum(mu, offset=0.0, modified=False))
    ref = integrate(spec, T)[: spec.n, -1]
    forward, staggered = [], []
    hs = (0.5, 0.25, 0.125)
    for h in hs:
        field, K, muh, disc = _scaled_heavy_ball(data, h, T, mu, eta)
        forward.append(np.linalg.norm(disc - ref))
        matched = OptimizerFlow(field, Momentum(muh, offset=0.5, modified=True))
        staggered.append(np.linalg.norm(disc - integrate(matched, K)[: matched.n, -1]))
    p_forward = np.log2(np.array(forward[:-1]) / forward[1:])
    p_staggered = np.log2(np.array(staggered[:-1]) / staggered[1:])
    print("orders: forward", np.round(p_forward, 3), "staggered, matched", np.round(p_staggered, 3))
    # CF7: forward reading first order; staggered reading with matched rates second order
    assert np.all(np.abs(p_forward - 1.0) < 0.15), p_forward
    assert np.all(np.abs(p_staggered - 2.0) < 0.2), p_staggered
    assert staggered[-1] < 0.05 * forward[-1]


def test_heavy_ball_tends_to_the_first_order_flow_as_eta_shrinks(data):
    mu, horizon = 0.9, 20.0  # eta * flow time
    errors = []
    # relative inertia eta / (1 - mu)^2 (spec section 9): 3, 1, 0.3, 0.1
    for eta in (0.03, 0.01, 0.003, 0.001):
        t_flow = horizon / eta
        grid = np.linspace(0.0, t_flow, 21)
        first = odeflow.solve(data, flow="exact", eta_y=eta, eta_z=eta, t_span=(0, t_flow),
                              t_eval=grid, progress=False)
        hb = odeflow.solve(data, flow="exact", eta_y=eta, eta_z=eta,
                           optimizer=Momentum(mu, offset=0.0), t_span=(0, t_flow * (1 - mu)),
                           t_eval=grid * (1 - mu), progress=False)
        np.testing.assert_allclose(hb.flow_time, warmup_flow_time(hb.steps, mu))
        scale = np.abs(first.z_carried - first.z_carried[0]).max()
        errors.append(np.abs(hb.z_carried - first.z_carried).max() / scale)
    print("relative distance to the first-order flow:", np.round(errors, 4))
    assert all(a > b for a, b in zip(errors, errors[1:], strict=False)), errors
    assert errors[-1] < 0.2 * errors[0], errors


def test_adam_ode_against_discrete_adam_at_small_steps(data):
    """Adam with betas b^h and rates eta h, T / h steps, tends to the matched-rate ODE."""
    betas, eta, T = (0.9, 0.999), 0.05, 10.0
    ode_flow = OptimizerFlow(ExactFlow(data, eta, eta), Adam(betas, start="limit",
                                                               modified=True))
    ref = integrate(ode_flow, T, rtol=1e-10, atol=1e-12)[: ode_flow.n, -1]
    errors = []
    for h in (0.5, 0.25, 0.125):
        field = ExactFlow(data, eta * h, eta * h)
        K = int(round(T / h))
        disc = optimizer_steps(field, Adam((betas[0] ** h, betas[1] ** h)), K, record=K)
        errors.append(np.linalg.norm(disc.y[: field.size, -1] - ref))
    assert errors[0] > errors[1] > errors[2]
    p = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(p > 0.7), (errors, p)
    assert errors[-1] / np.linalg.norm(ref - ode_flow.initial_state()[: ode_flow.n]) < 0.02


def test_adam_first_step_start_is_the_exact_first_step(data):
    field = ExactFlow(data, 1.0, 0.1)
    one = Adam(exact_steps=1, offset=0.0)
    traj = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=0.1, optimizer=one,
                         t_span=(0, 5), progress=False)
    disc = optimizer_steps(field, one, 1)
    np.testing.assert_allclose(traj.y[:, 1], disc.y[:, 1], rtol=1e-7, atol=1e-9)
    assert traj.flow_time is None and traj.optimizer["kind"] == "adam"
    assert traj.stats["nfev"] > 0  # steps 2-5 are the ODE's


def test_adam_events_watch_the_trajectory_after_the_exact_steps(data):
    """With the staggered reading the ODE starts half a step before the last exact step;
    events watch only the trajectory past it (the recursion's own states before)."""
    y0, z0 = training_start(data, 0)  # "auto": 2 exact steps, the ODE from step 1.5
    kw = {"flow": "exact", "eta_y": 1.0, "eta_z": 0.1, "start": (y0, z0), "progress": False,
          "optimizer": Adam(), "t_span": (0, 8), "t_eval": np.arange(9.0)}

    def early(t, y):
        return t - 1.75

    def late(t, y):
        return t - 4.25

    plain = odeflow.solve(data, **kw)
    both = odeflow.solve(data, events=[early, late], **kw)
    assert both.stats["exact_until"] == 2.0
    assert both.t_events[0].size == 0  # t = 1.75 is inside the exact steps
    np.testing.assert_allclose(both.t_events[1], [4.25])
    np.testing.assert_allclose(both.y, plain.y, rtol=1e-6, atol=1e-8)

    def stop(t, y):
        return t - 2.5

    stop.terminal = True  # before the first output time after the exact steps (3)
    short = odeflow.solve(data, events=[stop], **kw)
    np.testing.assert_array_equal(short.steps, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(short.t_events[0], [2.5])


def test_ensemble_refuses_auto_exact_steps_that_differ_between_starts():
    from odeflow.fields.ensemble import StartEnsemble
    from odeflow.solver.options import check_common_exact_steps

    class Toy(ConstantField):
        """``g = (1 - a, a (2 - b))``: entry 1's gradient is 0 while ``a = 0``."""

        def __init__(self, start):
            super().__init__(np.zeros(2), np.full(2, 0.1))
            self.start, self.data = np.asarray(start, float), None

        def initial_state(self):
            return self.start.copy()

        def gradients(self, Y):
            return np.stack([1.0 - Y[:, 0], Y[:, 0] * (2.0 - Y[:, 1])], axis=1)

        def gradient(self, y):
            return self.gradients(y[None])[0]

    late, early = Toy([0.0, 0.0]), Toy([0.5, 0.0])
    flows = [OptimizerFlow(m, Adam()) for m in (late, early)]
    assert [f.exact_steps for f in flows] == [3, 2]
    with pytest.raises(ValidationError) as err:
        check_common_exact_steps(Adam(), flows)
    assert err.value.field == "exact_steps" and "[2, 3]" in str(err.value)
    check_common_exact_steps(Adam(exact_steps=3), flows)  # a number: one for all
    same = [OptimizerFlow(m, Adam()) for m in (early, Toy([0.2, 1.0]))]
    check_common_exact_steps(Adam(), same)
    assert OptimizerFlow(StartEnsemble([late, early]), Adam()).exact_steps == 3


def test_adam_exact_steps_follow_the_recursion_then_the_ode(data):
    field = ExactFlow(data, 1.0, 0.1)
    k = 4
    traj = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=0.1, progress=False,
                         optimizer=Adam(exact_steps=k), t_span=(0, 8), t_eval=np.arange(9.0))
    disc = optimizer_steps(field, Adam(), 8)
    # steps 0..k are the recursion's own states, copied (to rounding), then the ODE from k
    np.testing.assert_allclose(traj.y[:, :k + 1], disc.y[:, :k + 1], rtol=1e-13, atol=1e-15)
    assert not np.allclose(traj.y[:, -1], disc.y[:, -1], rtol=1e-7, atol=1e-9)  # then the ODE
    # both take their steps in OptimizerFlow.recursion_step: check step 1 by hand
    # (m_hat = g, v_hat = g^2: a sign-like step eta g / (|g| + eps))
    theta0 = field.initial_state()
    g0 = field.gradient(theta0)
    n = field.size
    np.testing.assert_allclose(traj.y[:n, 1], theta0 + field.rate_vector * g0 / (np.abs(g0) + 1e-8),
                               rtol=1e-12, atol=1e-15)
    auto = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=0.1, progress=False,
                         optimizer=Adam(exact_steps="auto", offset=0.5), t_span=(0, 8),
                         t_eval=np.arange(9.0))
    default = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=0.1, progress=False,
                            optimizer=Adam(), t_span=(0, 8), t_eval=np.arange(9.0))
    np.testing.assert_array_equal(auto.y, default.y)
    assert traj.optimizer["exact_steps"] == k and default.optimizer["exact_steps"] == "auto"
    assert default.optimizer["offset"] == 0.5 and traj.optimizer["offset"] == 0.5
    assert traj.stats["exact_until"] == k and traj.stats["nfev"] > 0
    assert default.stats["exact_until"] == 3  # zero start: Y's first step 1, Z's 2, then one


def test_adam_auto_exact_steps_take_every_first_step_and_one_more(data):
    """``exact_steps="auto"``: the recursion until a step is no entry's first, ODE after."""
    zero = OptimizerFlow(ExactFlow(data, 1.0, 0.1), Adam(exact_steps="auto"))
    states = zero.exact_states()
    n = zero.n
    moment2 = states[:, 2 * n:]
    on = moment2 > 0  # entries whose gradient has been nonzero by each step
    # from zero the attention gradient is exactly 0 at step 0 (Y = 0): its entries start
    # at step 2, so steps 1 and 2 are first steps and step 3 is the first regular one
    assert zero.exact_steps == 3 and states.shape[0] == 4
    assert on[1].any() and (on[2] & ~on[1]).any() and not (on[3] & ~on[2]).any()
    assert not on[1, zero.inner.size - zero.inner.n_logits:].any()
    y0, z0 = training_start(data, 0)  # a random start: every gradient is on at step 0
    rand = OptimizerFlow(ExactFlow(data, 1.0, 0.1, start=(y0, z0)), Adam(exact_steps="auto"))
    assert rand.exact_steps == 2
    # the ODE starts half a step before step k, at the midpoint of the last exact step
    start = rand.ode_start_state()
    ex, n = rand.exact_states(), rand.n
    np.testing.assert_allclose(start[:n], 0.5 * (ex[1, :n] + ex[2, :n]), rtol=1e-15)
    np.testing.assert_allclose(start[n:], ex[2, n:], rtol=1e-14, atol=1e-300)
    assert rand.ode_start == 1.5


def test_adam_staggered_reading_is_second_order(data):
    """CF7 item 6: read staggered (offset 1/2) the step-h Adam recursion is the ODE's
    midpoint rule (order 2); read forward it is first order. The exact steps cover a
    fixed time (1), where the bias corrections have settled on the step scale."""
    y0, z0 = training_start(data, 0)
    betas, eta, T = (0.9, 0.999), 0.05, 4.0
    orders = {}
    for offset in (0.0, 0.5):
        errors = []
        for h in (0.5, 0.25, 0.125):
            K = int(round(T / h))
            opt = Adam((betas[0] ** h, betas[1] ** h), exact_steps=int(round(1 / h)),
                       offset=offset)
            field = ExactFlow(data, eta * h, eta * h, start=(y0, z0))
            disc = optimizer_steps(field, opt, K, record=K)
            flow = odeflow.solve(data, flow="exact", eta_y=eta * h, eta_z=eta * h, start=(y0, z0),
                                 optimizer=opt, t_span=(0, K), t_eval=[K], rtol=1e-12,
                                 atol=1e-14, progress=False)
            errors.append(np.linalg.norm(flow.y[: field.size, -1] - disc.y[: field.size, -1]))
        orders[offset] = np.log2(np.array(errors[:-1]) / errors[1:])
        print(f"offset {offset}: errors {np.array(errors)}, orders {orders[offset]}")
    assert np.all(np.abs(orders[0.0] - 1.0) < 0.2), orders
    assert np.all(orders[0.5] > 1.8), orders


def test_adam_exact_steps_dense_output_and_a_span_inside_them(data):
    field = ExactFlow(data, 1.0, 0.1)
    disc = optimizer_steps(field, Adam(), 3)
    traj = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=0.1, progress=False,
                         optimizer=Adam(exact_steps=3), t_span=(0, 6), dense_output=True)
    halfway = 0.5 * (disc.y[:, 1] + disc.y[:, 2])  # a straight line between exact states
    np.testing.assert_allclose(traj.sol(1.5), halfway, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(traj.sol(np.array([2.0, 3.0])), disc.y[:, 2:4], rtol=1e-13,
                               atol=1e-15)
    later = traj.sol(np.array([traj.t[-1]]))[:, 0]
    np.testing.assert_allclose(later, traj.y[:, -1], rtol=1e-8, atol=1e-10)
    inside = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=0.1, progress=False,
                           optimizer=Adam(exact_steps=3), t_span=(0, 2),
                           t_eval=[0.0, 1.0, 2.0])
    np.testing.assert_allclose(inside.y, disc.y[:, :3], rtol=1e-13, atol=1e-15)
    assert inside.stats["nfev"] == 0


def test_momentum_first_step_start_is_the_exact_first_step(data):
    field = ExactFlow(data, 1.0, 1.0)
    traj = odeflow.solve(data, flow="exact", eta_y=1.0, eta_z=1.0, progress=False,
                         optimizer=Momentum(0.9, start="first_step", offset=0.0),
                         t_span=(0, 3))
    disc = optimizer_steps(field, Momentum(0.9), 1)
    np.testing.assert_allclose(traj.y[:, 1], disc.y[:, 1], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(traj.y[:, 0], disc.y[:, 0])


def test_lumped_adam_flow_equals_unlumped(data):
    opts = {"flow": "exact", "eta_y": 1.0, "eta_z": 0.1, "optimizer": Adam(),
            "t_span": (0, 30), "progress": False, "rtol": 1e-9, "atol": 1e-11}
    lumped = odeflow.solve(data, **opts)
    full = odeflow.solve(data, unlumped=True, **opts)
    assert lumped.decoder_layout == "lumped" and full.decoder_layout == "full"
    np.testing.assert_allclose(lumped.z_carried, full.z_carried, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(lumped.objective, full.objective, rtol=1e-6, atol=1e-7)


def test_levels_whose_state_is_not_the_parameters_are_refused(data):
    with pytest.raises(ValidationError) as err:
        odeflow.solve(data, flow="reduced", optimizer=Momentum(0.9), t_span=(0, 2))
    assert err.value.field == "optimizer"
    snap = odeflow.DataModel.preset("snap-small")
    with pytest.raises(ValidationError) as err:
        odeflow.solve(snap, flow="snap", optimizer=Adam(), t_span=(0, 2))
    assert err.value.field == "optimizer"


@pytest.mark.parametrize("make, field", [
    (lambda: Momentum(1.0), "mu"), (lambda: Momentum(-0.1), "mu"),
    (lambda: Momentum(0.9, offset=2), "offset"), (lambda: Momentum(0.9, start="x"), "start"),
    (lambda: Momentum(0.0, modified=True), "modified"),
    (lambda: Adam(betas=(0.9, 1.0)), "betas[1]"), (lambda: Adam(betas=0.9), "betas"),
    (lambda: Adam(eps=0.0), "eps"), (lambda: Adam(modified="yes"), "modified"),
    (lambda: Adam(exact_steps=0), "exact_steps"), (lambda: Adam(exact_steps=2.5), "exact_steps"),
    (lambda: Adam(exact_steps=True), "exact_steps"),
    (lambda: Adam(start="limit", exact_steps=3), "exact_steps"),
    (lambda: Adam(exact_steps="all"), "exact_steps"), (lambda: Adam(offset=1.0), "offset"),
    (lambda: Adam(exact_steps=np.array([1, 2])), "exact_steps"),
    (lambda: Adam(start="limit", exact_steps="auto"), "exact_steps"),
    (lambda: Adam(offset=-0.5), "offset"), (lambda: Adam(start="limit", offset=0.5), "offset"),
])
def test_invalid_optimizers_name_the_field(make, field):
    with pytest.raises(ValidationError) as err:
        make()
    assert err.value.field == field


def test_solve_checks_optimizer_and_span(data):
    with pytest.raises(ValidationError) as err:
        odeflow.solve(data, optimizer="sgd", t_span=(0, 2))
    assert err.value.field == "optimizer"
    with pytest.raises(ValidationError) as err:
        odeflow.solve(data, optimizer=Momentum(0.9), t_span=(1, 2))
    assert err.value.field == "t_span"


@pytest.mark.parametrize("optimizer", [Momentum(0.9), Momentum(0.9, modified=False),
                                       Adam(), Adam(modified=False)])
def test_analytic_jacobian_matches_finite_differences(data, optimizer):
    rng = np.random.default_rng(1)
    flow = OptimizerFlow(ExactFlow(data, 1.0, 0.5), optimizer)
    y = flow.initial_state() + 0.3 * rng.standard_normal(flow.size)
    if optimizer.kind == "adam":
        y[2 * flow.n:] = np.abs(y[2 * flow.n:]) + 0.05  # second moments are >= 0
    t = 4.3  # past the exact steps of any start (Adam's default takes 3 from zero)
    J = flow.jacobian(t, y)
    assert np.count_nonzero(J) > flow.size  # the ODE's Jacobian, not the exact steps' zero
    fd = np.empty_like(J)
    for i in range(flow.size):
        e = np.zeros(flow.size)
        e[i] = 1e-6
        fd[:, i] = (flow.rhs(t, y + e) - flow.rhs(t, y - e)) / 2e-6
    np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-6)
    pattern = flow.jac_sparsity().toarray()
    assert not np.any((J != 0) & ~pattern)


def test_offset_reads_the_ode_half_a_step_later(data):
    kw = {"flow": "exact", "eta_y": 1.0, "eta_z": 1.0, "progress": False, "rtol": 1e-10,
          "atol": 1e-12}
    late = odeflow.solve(data, optimizer=Momentum(0.9, offset=0.0), t_span=(0, 6.5),
                         t_eval=np.arange(7) + 0.5, **kw)
    shifted = odeflow.solve(data, optimizer=Momentum(0.9), t_span=(0, 6), **kw)
    np.testing.assert_allclose(shifted.steps, np.arange(7))
    np.testing.assert_allclose(shifted.y, late.y, rtol=1e-7, atol=1e-9)


def test_optimizer_trajectory_round_trip(data, tmp_path):
    y0, z0 = training_start(data, 2)
    hb = odeflow.solve(data, flow="finite_t", sample_size=4, start=(y0, z0),
                       optimizer=Momentum(0.9), t_span=(0, 5), progress=False)
    adam = odeflow.solve(data, flow="exact", optimizer=Adam(), t_span=(0, 5), progress=False)
    for traj, name in ((hb, "hb.npz"), (adam, "adam.npz")):
        traj.save(tmp_path / name)
        back = type(traj).load(tmp_path / name)
        assert back.optimizer == traj.optimizer
        np.testing.assert_array_equal(back.steps, traj.steps)
        np.testing.assert_array_equal(back.z_carried, traj.z_carried)
    back = type(hb).load(tmp_path / "hb.npz")
    np.testing.assert_array_equal(back.velocity, hb.velocity)
    np.testing.assert_array_equal(back.flow_time, warmup_flow_time(hb.steps, 0.9))
    back = type(adam).load(tmp_path / "adam.npz")
    for a, b in zip(back.moments, adam.moments, strict=True):
        np.testing.assert_array_equal(a, b)
    assert back.flow_time is None
    with pytest.raises(ValidationError):
        back.velocity  # noqa: B018
    plain = odeflow.solve(data, t_span=(0, 1), progress=False)
    with pytest.raises(ValidationError) as err:
        plain.steps  # noqa: B018
    assert err.value.field == "steps"
    assert plain.optimizer is None and plain.flow_time is plain.t


def test_training_start_is_the_draw_of_the_training_seed(data):
    y0, z0 = training_start(data, 3)
    run = train(data, **Protocol(init="uniform", steps=1, batch_size=2, seq_len=4).options(),
                seeds=[3])
    np.testing.assert_array_equal(run.initial_decoder(0), y0[:, data.active_tokens])
    np.testing.assert_array_equal(run.initial_logits(0), z0)
    bound = 1.0 / math.sqrt(data.vocab_size)
    assert np.abs(y0).max() <= bound and np.abs(z0).max() <= bound
    field = FiniteTFlow(data, 1.0, 1.0, start=(y0, z0), sample_size=2)
    assert not field.lumped  # the random start breaks the symmetry of the rows
    zero_y, zero_z = training_start(data, 3, init="zero")
    assert not zero_y.any() and not zero_z.any()


def test_momentum_defaults_to_the_matched_rates_when_mu_is_positive():
    """``modified=None``: the matched rates ``-ln mu`` for ``mu > 0``, the spec's at 0."""
    assert Momentum(0.9).modified is True
    assert Momentum(0.9).coefficients() == pytest.approx((-np.log(0.9) / 0.1, -np.log(0.9)))
    assert Momentum(0.0).modified is False
    assert Momentum(0.0).coefficients() == (1.0, 1.0)
    assert Momentum(0.9, modified=False).coefficients() == pytest.approx((1.0, 0.1))
    assert Momentum(0.9) == Momentum(0.9, modified=True)
    assert Momentum(0.9).describe()["modified"] is True


def test_default_heavy_ball_reading_is_nearer_the_discrete_heavy_ball():
    """The reason for the default (docs/optimisers.md): on a Fig. 6 cell, from a uniform
    start, the matched rates read half a step later end nearer the deterministic discrete
    heavy ball's distinct-token entropy than the spec's rates (about 10x on the grid)."""
    from odeflow.analysis import paper
    from odeflow.analysis.measures import distinct_entropy
    from odeflow.fields import FiniteTFlow

    data = odeflow.DataModel.preset("syn-medium-3")
    y0, z0 = odeflow.training_start(data, 0)
    opts = {"seq_len": 128, "sample_size": 16, "seed": 0, "start": (y0, z0)}
    steps = 30
    twin = odeflow.optimizer_steps(FiniteTFlow(data, 2.0, 1.0, **opts), Momentum(0.9), steps,
                                   progress=False)
    target = distinct_entropy(data, twin.z_active)[-1]
    gap = {}
    for modified in (False, True):
        traj = odeflow.solve(data, flow="finite_t", eta_y=2.0, eta_z=1.0, t_span=(0, steps),
                             optimizer=Momentum(0.9, modified=modified),
                             method=paper.OPTFLOW_METHOD, rtol=1e-7, atol=1e-9,
                             progress=False, **opts)
        gap[modified] = abs(distinct_entropy(data, traj.z_active)[-1] - target)
    assert gap[True] < 0.5 * gap[False], gap
