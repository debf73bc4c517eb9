"""The Sec. 6 scalar system (spec CF6, Theorem 4): closed forms, parameters from a
data model, the analytic Jacobian, and agreement with Level R when the common
token is weak."""

import math

import numpy as np
import pytest

import odeflow
from odeflow.analysis.diagnostics import transition_time
from odeflow.fields.snap import SnapFlow, snap_parameters
from odeflow.results import SnapResult
from odeflow.solver import solve_snap


def cf6(gamma_integral, a, eta_z, zc0, pi):
    """Spec CF6: z_c and B as functions of Gamma(t) = int_0^t gamma ds."""
    zc = -0.5 * np.log(np.exp(-2 * zc0) + 2 * a * eta_z * gamma_integral)
    B = 0.5 * pi * np.log1p(2 * a * eta_z * np.exp(2 * zc0) * gamma_integral)
    return zc, B


def one_common_model(common_weight=0.05, K=3, n_distinct=20, M=100):
    classes = []
    for k in range(K):
        toks = [0] + list(range(10 + n_distinct * k, 10 + n_distinct * (k + 1)))
        p = [common_weight] + [(1 - common_weight) / n_distinct] * n_distinct
        classes.append(odeflow.SequenceClass(k + 1, 0, dict(zip(toks, p, strict=True))))
    return odeflow.DataModel(M, classes)


@pytest.mark.parametrize(("a", "zc0", "eta_y", "eta_z", "pi", "M"), [
    (0.05, 0.0, 1.0, 1.0, 0.5, 30),
    (0.3, 0.7, 2.0, 0.1, 0.25, 200),
    (0.01, -1.0, 0.5, 5.0, 1.0, 2),
])
def test_agrees_with_cf6_closed_form(a, zc0, eta_y, eta_z, pi, M):
    res = solve_snap(a=a, zc0=zc0, pi=pi, vocab_size=M, eta_y=eta_y, eta_z=eta_z,
                     t_span=(0, 1e4), rtol=1e-11, atol=1e-14)
    assert isinstance(res, SnapResult)
    zc, B = cf6(res.gamma_integral, a, eta_z, zc0, pi)
    assert np.allclose(res.common_logit, zc, rtol=1e-9, atol=1e-11)
    assert np.allclose(res.B, B, rtol=1e-9, atol=1e-12)
    # CF3 closes the loop: Gamma = (M-1) h^2 / (2 M eta_Y pi)
    assert np.allclose(res.gamma_integral, (M - 1) * res.margin ** 2 / (2 * M * eta_y * pi),
                       rtol=1e-8, atol=1e-13)
    assert np.all(np.diff(res.common_logit) < 0) and np.all(np.diff(res.B) > 0)
    assert np.allclose(res.xi, a * np.exp(2 * res.common_logit))


def test_B_at_transition_depends_on_ratio_only():
    """Scaling both learning rates by c is a change of time t -> c t (Eqns 44, 13-14)."""
    base = {"a": 0.1, "pi": 0.5, "vocab_size": 50, "rtol": 1e-11, "atol": 1e-14}
    t = np.geomspace(1e-2, 1e4, 200)
    slow = solve_snap(eta_y=1.0, eta_z=0.2, t_span=(0, 1e4), t_eval=t, **base)
    fast = solve_snap(eta_y=10.0, eta_z=2.0, t_span=(0, 1e3), t_eval=t / 10, **base)
    assert np.allclose(slow.B, fast.B, rtol=1e-7)
    assert transition_time(fast) == pytest.approx(transition_time(slow) / 10, rel=1e-6)
    M = 50
    assert transition_time(slow) == pytest.approx(
        (M - 2 + (M - 1) * math.log(M - 1)) / (0.5 * M), rel=1e-3)


def test_jacobian_matches_finite_differences():
    field = SnapFlow(None, 1.3, 0.4, a=0.2, pi=0.3, vocab_size=17, zc0=0.2)
    for y in (np.array([0.0, 0.2, 0.0, 0.0]), np.array([3.1, -0.4, 0.2, 5.0])):
        J = field.jacobian(0.0, y)
        step = 1e-6
        fd = np.stack([(field.rhs(0, y + step * e) - field.rhs(0, y - step * e)) / (2 * step)
                       for e in np.eye(4)], axis=1)
        assert np.abs(J - fd).max() <= 1e-8 * max(1.0, np.abs(J).max())


def test_parameters_from_data_model():
    data = one_common_model(0.05)
    params = snap_parameters(data)
    c, rho2 = 0.05, 0.05 ** 2 + 20 * (0.95 / 20) ** 2
    assert params["a"] == pytest.approx((1 / 99) * 2 * c ** 2 / rho2, rel=1e-12)
    assert params["common_token"] == 0 and params["zc0"] == 0.0
    assert params["pi"] == pytest.approx(1 / 3)
    assert params["vocab_size"] == 100
    # z0 enters rho_0 and z_c(0)
    z0 = np.zeros((1, 100))
    z0[0, 0] = 0.3
    p2 = snap_parameters(data, z0=z0, beta=0.1)
    rho2_z = c ** 2 * math.exp(0.6) + 20 * (0.95 / 20) ** 2
    assert p2["a"] == pytest.approx(0.1 * 2 * c ** 2 / rho2_z, rel=1e-12)
    assert p2["zc0"] == 0.3


def test_agrees_with_reduced_flow_for_a_weak_common_token():
    """Theorem 4's approximation (overlap term dropped, norms frozen) is close to
    Level R when the common token carries little weight."""
    data = one_common_model(0.05)
    snap = odeflow.solve(data, flow="snap", eta_y=1.0, eta_z=1.0, t_span=(0, 1e4))
    reduced = odeflow.solve(data, flow="reduced", eta_y=1.0, eta_z=1.0, t_span=(0, 1e4))
    assert snap.stats["method"] == SnapFlow.preferred_method
    assert np.allclose(snap.margin, reduced.margin[:, 0] if reduced.margin.ndim == 2
                       else reduced.margin, rtol=1e-6, atol=1e-9)
    zc_reduced = reduced.logits(0)[:, 0]
    assert np.abs(snap.common_logit - zc_reduced).max() <= 0.05 * np.abs(zc_reduced).max()
    assert snap.B[-1] == pytest.approx(reduced.B(1)[-1], rel=0.05)


def test_invalid_input():
    syn_small = odeflow.DataModel.preset("shared-query-small")
    with pytest.raises(odeflow.ValidationError, match="one common token"):
        odeflow.solve(syn_small, flow="snap")
    unequal = odeflow.DataModel(10, [odeflow.SequenceClass(1, 0, {0: 0.2, 3: 0.8}),
                                     odeflow.SequenceClass(2, 0, {0: 0.3, 4: 0.7})])
    with pytest.raises(odeflow.ValidationError, match="equal"):
        snap_parameters(unequal)
    two_queries = odeflow.DataModel(10, [odeflow.SequenceClass(1, 0, {0: 0.2, 3: 0.8}),
                                         odeflow.SequenceClass(2, 1, {0: 0.2, 4: 0.8})])
    with pytest.raises(odeflow.ValidationError, match="query"):
        snap_parameters(two_queries)
    weighted = odeflow.DataModel(10, [odeflow.SequenceClass(1, 0, {0: 0.2, 3: 0.8}),
                                      odeflow.SequenceClass(2, 0, {0: 0.2, 4: 0.8})],
                                 weights=[0.3, 0.7])
    with pytest.raises(odeflow.ValidationError, match="weights"):
        snap_parameters(weighted)
    data = one_common_model()
    with pytest.raises(odeflow.ValidationError, match="^a:"):
        solve_snap(data, a=0.1)
    with pytest.raises(odeflow.ValidationError, match="vocab_size"):
        solve_snap(a=0.1, pi=0.5)
    with pytest.raises(odeflow.ValidationError, match="vocab_size"):
        solve_snap(a=0.1, pi=0.5, vocab_size=1)
    with pytest.raises(odeflow.ValidationError, match="^a:"):
        solve_snap(a=-0.1, pi=0.5, vocab_size=10)
    with pytest.raises(odeflow.ValidationError, match="pi"):
        solve_snap(a=0.1, pi=1.5, vocab_size=10)
    with pytest.raises(odeflow.ValidationError, match="zc0"):
        solve_snap(a=0.1, pi=0.5, vocab_size=10, zc0=float("inf"))
