"""Level R quantities measured on trajectories (odeflow.analysis.diagnostics): the empirical
margin, the speed-control fit of Eqn 9, the transition time of CF2, the Eqn 11
invariant."""

import math

import numpy as np
import pytest

import odeflow
from odeflow.analysis.diagnostics import (
    empirical_margin,
    empirical_speed_control,
    eqn11_invariant,
    eqn11_spread,
    transition_time,
)


def disjoint_model():
    """Classes with disjoint supports: orthogonal features, so Level E reduces to
    Level R exactly (Lemma 3 with F^T F = I) and the attention never moves."""
    classes = [odeflow.SequenceClass(1, 0, {3: 0.2, 4: 0.3, 5: 0.5}),
               odeflow.SequenceClass(2, 0, {6: 0.6, 7: 0.4}),
               odeflow.SequenceClass(5, 1, {8: 0.1, 9: 0.9})]
    return odeflow.DataModel(20, classes)


def cf2_t0(M, eta_y, pi):
    return (M - 2 + (M - 1) * math.log(M - 1)) / (eta_y * pi * M)


@pytest.fixture(scope="module")
def disjoint_runs():
    data = disjoint_model()
    kw = {"eta_y": 2.0, "eta_z": 0.5, "t_span": (0, 1e3), "rtol": 1e-10, "atol": 1e-12}
    return (data, odeflow.solve(data, flow="exact", **kw),
            odeflow.solve(data, flow="reduced", **kw))


@pytest.fixture(scope="module")
def syn_small_runs():
    data = odeflow.DataModel.preset("shared-query-small")
    kw = {"eta_y": 1.0, "eta_z": 0.01, "t_span": (0, 1e4)}
    return (data, odeflow.solve(data, flow="exact", **kw),
            odeflow.solve(data, flow="reduced", **kw))


def test_empirical_margin_equals_level_r_for_orthogonal_features(disjoint_runs):
    data, exact, reduced = disjoint_runs
    h_r = reduced.series["margin"]
    assert np.allclose(empirical_margin(exact), h_r, rtol=1e-7, atol=1e-10)
    assert np.allclose(empirical_margin(reduced), h_r, rtol=1e-12, atol=1e-14)
    assert np.abs(exact.z_active).max() < 1e-12  # round-off only


def test_speed_control_fit_for_orthogonal_features(disjoint_runs):
    """g_n = gamma_n (f^_n - sum_n' h_n'/(h_n (M-1)) f^_n') exactly (Eqn 9)."""
    data, exact, reduced = disjoint_runs
    fit = empirical_speed_control(exact)
    M = data.vocab_size
    h = reduced.series["margin"]
    s = (M - 1) / (np.exp(h) + M - 1)
    assert np.all(np.isfinite(fit.residual)) and fit.residual[0].tolist() == [0, 0, 0]
    assert fit.residual.max() < 1e-6
    assert np.allclose(fit.iota_gamma, s * h, rtol=1e-6, atol=1e-10)
    expected_beta = s[:, :, None] * h[:, None, :] / (M - 1)
    expected_beta[:, np.arange(3), np.arange(3)] = 0.0
    assert np.allclose(fit.beta_gamma, expected_beta, rtol=1e-6, atol=1e-10)
    assert np.allclose(fit.gamma_from_margin, s * h, rtol=1e-6, atol=1e-10)


def test_transition_time_level_r_and_e(syn_small_runs, disjoint_runs):
    data, exact, reduced = syn_small_runs
    t0 = cf2_t0(data.vocab_size, 1.0, 0.5)
    assert transition_time(reduced) == pytest.approx(np.full(2, t0), rel=0.05)
    assert transition_time(reduced, source="recorded") == pytest.approx(np.full(2, t0),
                                                                           rel=1e-3)
    # Level E on syn-small: overlapping features; the margin still crosses near t0
    assert transition_time(exact) == pytest.approx(np.full(2, t0), rel=0.05)
    ddata, dexact, _ = disjoint_runs
    expected = [cf2_t0(ddata.vocab_size, 2.0, pi) for pi in ddata.weights]
    assert transition_time(dexact) == pytest.approx(expected, rel=2e-3)


def test_level_e_margin_and_speed_control_on_syn_small(syn_small_runs):
    """Early on Level E's decoder follows Level R (beta ~ 1/(M-1)); the fit
    residual stays small."""
    data, exact, reduced = syn_small_runs
    h_e = empirical_margin(exact)
    h_r = reduced.series["margin"]
    late = exact.t > 1.0
    assert np.allclose(h_e[late], h_r[late], rtol=0.05)
    fit = empirical_speed_control(exact)
    assert fit.residual.max() < 0.05
    early = (exact.t > 0) & (exact.t < 0.1)
    ratio = fit.beta_gamma[early, 0, 1] / fit.iota_gamma[early, 0]
    assert np.allclose(ratio, 1 / (data.vocab_size - 1), rtol=0.1)


def test_eqn11_on_level_e_is_approximate(syn_small_runs):
    data, exact, reduced = syn_small_runs
    spread_e, spread_r = eqn11_spread(exact), eqn11_spread(reduced)
    assert spread_e.shape == exact.t.shape and spread_e[0] == 0
    assert spread_r.max() < 1e-8
    assert 1e-4 < spread_e.max() < 0.1
    inv = eqn11_invariant(exact, 1)
    assert inv.shape == (exact.t.size, 10) and np.all(np.isfinite(inv))


def test_errors():
    data = disjoint_model()
    short = odeflow.solve(data, flow="reduced", t_span=(0, 0.1))
    with pytest.raises(odeflow.ValidationError, match="t_end"):
        transition_time(short)
    with pytest.raises(odeflow.ValidationError, match="source"):
        transition_time(short, source="guess")
    with pytest.raises(odeflow.ValidationError, match="two distinct"):
        eqn11_spread(odeflow.solve(odeflow.DataModel(5, [
            odeflow.SequenceClass(1, 0, {0: 0.5, 2: 0.5}),
            odeflow.SequenceClass(2, 0, {0: 0.5, 3: 0.5})]), flow="reduced", t_span=(0, 1)))
    bare = odeflow.Trajectory(data, short.t, short.z_active, short.z_base, meta={"flow": "x"})
    with pytest.raises(odeflow.ValidationError, match="decoder"):
        empirical_margin(bare)
    with pytest.raises(odeflow.ValidationError, match="margin"):
        transition_time(bare, source="recorded")


def test_transition_time_on_snap_result():
    res = odeflow.solve(None, flow="snap", a=0.1, pi=0.5, vocab_size=30, t_span=(0, 100))
    assert transition_time(res) == pytest.approx(cf2_t0(30, 1.0, 0.5), rel=1e-3)
