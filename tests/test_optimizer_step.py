"""One optimiser step for every trainer, the deterministic recursion and the flows.

Each optimiser is one class (``odeflow.fields.optimizers``) whose ``step`` every
trainer and the recursion call; these tests spy on that method to see who calls it,
check it against the textbook (PyTorch) updates on random arrays, and check that
the flows' right-hand side and Jacobian are the optimiser's own.
"""

from __future__ import annotations

import numpy as np
import pytest

import odeflow
from odeflow.fields.exact import ExactFlow
from odeflow.fields.optimizers import (
    Adam,
    GradientDescent,
    Momentum,
    Optimizer,
    OptimizerFlow,
)
from odeflow.training.discrete import gradient_ascent, optimizer_steps
from odeflow.training.protocol import Protocol, train
from odeflow.training.sgd import train_sgd

RULES = [GradientDescent(), Momentum(0.9), Adam()]


@pytest.fixture(scope="module")
def data():
    return odeflow.DataModel.preset("syn-small")


def spy(monkeypatch, cls) -> list:
    """Record ``(cls, k)`` of every call of ``cls.step``, then take the step."""
    calls, real = [], cls.step

    def step(self, theta, g, state, k, rate):
        calls.append((type(self).__name__, k))
        return real(self, theta, g, state, k, rate)

    monkeypatch.setattr(cls, "step", step)
    return calls


def torch_reference(kind, theta, grads, eta, mu=0.9, betas=(0.9, 0.999), eps=1e-8):
    """PyTorch's SGD(momentum) / Adam descending a loss with gradients ``grads``."""
    theta, first, second = theta.copy(), np.zeros_like(theta), np.zeros_like(theta)
    for k, g in enumerate(grads, start=1):
        if kind == "gradient":
            theta = theta - eta * g
        elif kind == "momentum":
            first = mu * first + g
            theta = theta - eta * first
        else:
            b1, b2 = betas
            first = b1 * first + (1 - b1) * g
            second = b2 * second + (1 - b2) * g * g
            m_hat, v_hat = first / (1 - b1 ** k), second / (1 - b2 ** k)
            theta = theta - eta * m_hat / (np.sqrt(v_hat) + eps)
    return theta


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.kind)
def test_step_is_the_textbook_update_on_a_random_case(rule):
    rng = np.random.default_rng(3)
    theta0 = rng.normal(size=(2, 3, 4))
    grads = rng.normal(size=(6, 2, 3, 4))
    theta, state = theta0.copy(), rule.init_state(theta0.shape)
    assert len(state) == rule.state_blocks and all(s.shape == theta0.shape for s in state)
    for k, g in enumerate(grads, start=1):
        rule.step(theta, g, state, k, -0.3)
    np.testing.assert_allclose(theta, torch_reference(rule.kind, theta0, grads, 0.3),
                               rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.kind)
def test_step_is_odd_ascent_with_g_is_descent_with_minus_g(rule):
    rng = np.random.default_rng(4)
    theta0, grads = rng.normal(size=5), rng.normal(size=(4, 5))
    up, down = theta0.copy(), theta0.copy()
    s_up, s_down = rule.init_state(5), rule.init_state(5)
    for k, g in enumerate(grads, start=1):
        rule.step(up, g, s_up, k, 0.7)
        rule.step(down, -g, s_down, k, -0.7)
    np.testing.assert_array_equal(up, down)


def test_momentum_flow_layout_is_the_velocity_in_parameter_units():
    rng = np.random.default_rng(5)
    rate, theta0, grads = rng.uniform(0.5, 2, 6), rng.normal(size=6), rng.normal(size=(5, 6))
    rule = Momentum(0.8)
    a, b = theta0.copy(), theta0.copy()
    sa, sb = rule.init_state(6), rule.init_state(6)
    for k, g in enumerate(grads, start=1):
        rule.step(a, g, sa, k, rate)
        rule.flow_step(b, g, sb, k, rate)
    np.testing.assert_allclose(b, a, rtol=1e-14)
    np.testing.assert_allclose(sb[0], rate * sa[0], rtol=1e-14)


@pytest.mark.parametrize("optimizer", [Momentum(0.9), Adam()], ids=["momentum", "adam"])
def test_recursion_twin_and_flow_exact_steps_take_the_optimizers_step(monkeypatch, data,
                                                                     optimizer):
    cls = type(optimizer)
    calls = spy(monkeypatch, cls)
    twin = optimizer_steps(ExactFlow(data, 1.0, 1.0), optimizer, 4)
    assert calls == [(cls.__name__, k) for k in (1, 2, 3, 4)]
    calls.clear()
    flow = OptimizerFlow(ExactFlow(data, 1.0, 1.0), optimizer)
    exact = flow.exact_states()
    assert [k for _, k in calls] == list(range(1, len(exact)))
    np.testing.assert_array_equal(exact[1:], twin.y.T[1:len(exact)])


@pytest.mark.parametrize("protocol, cls", [
    (Protocol(optimizer="sgd", momentum=0.9, steps=3, batch_size=4, seq_len=8), Momentum),
    (Protocol(optimizer="sgd", momentum=0.0, steps=3, batch_size=4, seq_len=8),
     GradientDescent),
    (Protocol(optimizer="adam", steps=3, batch_size=4, seq_len=8), Adam),
], ids=["sgd-momentum", "sgd-plain", "adam"])
def test_protocol_trainer_takes_the_optimizers_step(monkeypatch, data, protocol, cls):
    calls = spy(monkeypatch, cls)
    assert type(protocol.update_rule()) is cls
    train(data, **protocol.options(), seeds=2, progress=False)
    assert calls == [(cls.__name__, k) for k in (1, 2, 3) for _ in ("Y", "Z")]


@pytest.mark.parametrize("mu, cls", [(0.5, Momentum), (0.0, GradientDescent)])
def test_train_sgd_and_gradient_ascent_take_the_optimizers_step(monkeypatch, data, mu, cls):
    calls = spy(monkeypatch, cls)
    train_sgd(data, 1.0, 1.0, steps=3, batch_size=4, seq_len=8,
              optimizer=Momentum(mu) if mu else None, progress=False)
    assert calls == [(cls.__name__, k) for k in (1, 2, 3) for _ in ("Y", "Z")]
    if cls is GradientDescent:
        calls.clear()
        gradient_ascent(data, 1.0, 1.0, steps=3, progress=False)
        assert calls == [("GradientDescent", k) for k in (1, 2, 3)]


def test_protocol_run_equals_the_steps_taken_by_hand(data):
    """The trainer's numbers are the optimiser's: a run replayed by hand with
    ``Adam.step`` on the same batches gives the same parameters, bit for bit."""
    from odeflow.training.batch import LumpedLayout
    from odeflow.training.counts import counts_loss_and_gradient, sample_counts

    p = Protocol(optimizer="adam", eta_y=0.5, eta_z=0.2, steps=4, batch_size=8, seq_len=16)
    run = train(data, **p.options(), seeds=[7], progress=False)
    layout, rngs = LumpedLayout(data), [np.random.default_rng(7)]
    Y, Z = np.zeros((1, layout.R, layout.L)), np.zeros((1, layout.q, layout.L))
    rule = Adam(p.betas, p.eps)
    sy, sz = rule.init_state(Y.shape), rule.init_state(Z.shape)
    for k in range(1, p.steps + 1):
        batch = sample_counts(layout, rngs, p.batch_size, p.seq_len)
        _, gy, gz = counts_loss_and_gradient(layout, Y, Z, batch)
        rule.step(Y, gy, sy, k, -p.eta_y)
        rule.step(Z, gz, sz, k, -p.eta_z)
    np.testing.assert_array_equal(run.decoder_final, Y)
    np.testing.assert_array_equal(run.z_active[:, -1], Z)


@pytest.mark.parametrize("optimizer", [Momentum(0.9), Adam(start="limit"), Adam()],
                         ids=["momentum", "adam-limit", "adam"])
def test_flow_rhs_and_jacobian_are_the_optimizers(data, optimizer):
    inner = ExactFlow(data, 1.0, 2.0)
    flow = OptimizerFlow(inner, optimizer)
    rng = np.random.default_rng(6)
    y = flow.rest_state() + 0.1 * rng.normal(size=flow.size)
    if optimizer.state_blocks == 2:
        y[2 * flow.n:] = np.abs(y[2 * flow.n:])  # a second moment is >= 0
    s = 5.25
    theta, *state = flow.split(y)
    np.testing.assert_array_equal(flow.rhs(s - flow.offset, y),
                                  optimizer.ode_rhs(s, theta, state, inner, flow.rate))
    dF = inner.jacobian(s, theta)
    np.testing.assert_array_equal(flow.jacobian(s - flow.offset, y),
                                  optimizer.ode_jacobian(s, theta, state, inner, flow.rate, dF))


def test_every_optimizer_is_one_class_behind_the_base():
    for rule in RULES:
        assert isinstance(rule, Optimizer)
        assert type(rule).step is not Optimizer.step
        assert type(rule).__module__.split(".")[-1] in ("gradient", "momentum", "adam")
    assert odeflow.Momentum is Momentum and odeflow.Adam is Adam
    assert Momentum(0.9) == Momentum(0.9) and Momentum(0.9) != Adam()
    assert Adam(eps=1e-6).describe()["eps"] == 1e-6


@pytest.mark.parametrize("rule, fields", [
    (Momentum(0.5), {"optimizer": "sgd", "momentum": 0.5}),
    (GradientDescent(), {"optimizer": "sgd", "momentum": 0.0}),
    (Adam((0.8, 0.99), 1e-6), {"optimizer": "adam", "betas": (0.8, 0.99), "eps": 1e-6}),
], ids=["momentum", "gradient", "adam"])
def test_protocol_takes_an_optimizer_object_and_keeps_the_string_form(rule, fields):
    p = Protocol(optimizer=rule)
    assert p == Protocol(**fields)
    assert p.to_dict()["optimizer"] == fields["optimizer"]
    assert Protocol(optimizer=rule, **{k: v for k, v in fields.items() if k != "optimizer"}) == p


@pytest.mark.parametrize("kwargs, field", [
    ({"optimizer": Momentum(0.5), "momentum": 0.8}, "momentum"),
    ({"optimizer": Adam(), "eps": 1e-3}, "eps"),
    ({"optimizer": Adam(), "betas": [0.5, 0.9]}, "betas"),
])
def test_protocol_refuses_an_optimizer_object_that_contradicts_a_field(kwargs, field):
    with pytest.raises(odeflow.ValidationError) as err:
        Protocol(**kwargs)
    assert err.value.field == field and "give one of them" in str(err.value)


def test_train_sgd_takes_a_momentum_object(data):
    kw = {"steps": 3, "batch_size": 4, "seq_len": 8, "progress": False}
    by_object = train_sgd(data, 1.0, 1.0, optimizer=Momentum(0.9), **kw)
    with pytest.warns(odeflow.RenamedWarning, match="'momentum' is now 'optimizer'"):
        by_number = train_sgd(data, 1.0, 1.0, momentum=0.9, **kw)
    assert np.ptp(by_number.decoder_lumped) > 0  # the run moved
    q = int(data.query_tokens[0])
    np.testing.assert_array_equal(by_object.logits(q), by_number.logits(q))
    np.testing.assert_array_equal(by_object.decoder_lumped, by_number.decoder_lumped)
    assert by_object.meta["momentum"] == 0.9
    plain = train_sgd(data, 1.0, 1.0, optimizer=GradientDescent(), **kw)
    assert plain.meta["momentum"] == 0.0
    with pytest.raises(odeflow.ValidationError) as err:
        train_sgd(data, 1.0, 1.0, optimizer=Adam(), **kw)
    assert err.value.field == "optimizer"
