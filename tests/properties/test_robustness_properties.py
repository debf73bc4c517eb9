"""Numerical robustness and bad solve arguments.

Extreme but valid parameters (vocabularies up to 1e5, eta_Z / eta_Y from 1e-4
to 1e4, t_end up to 1e10) either solve with finite results everywhere or raise
a clear SolveError / ValidationError, and most of them (MIN_SOLVED) solve;
invalid arguments of odeflow.solve are
rejected with a ValidationError naming the argument, before any integration.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

import odeflow
from odeflow import DataModel, SequenceClass, SolveError, ValidationError
from odeflow.analysis import closed_forms as cf
from odeflow.testing import data_models, learning_rate_pairs, learning_rates
from tests.invalid_inputs import InvalidInput, invalid_solve_arguments
from tests.properties import assert_field, examples

SMALL = DataModel(6, [SequenceClass(4, 1, {0: 0.5, 2: 0.5}), SequenceClass(5, 1, {0: 0.25,
                                                                                   3: 0.75})])


@st.composite
def extreme_problems(draw):
    """A small model in a vocabulary of up to 1e5 tokens, rates with eta_Z / eta_Y
    in [1e-4, 1e4], t_end in [1, 1e10], and Z(0) = 0 or random logits."""
    data = draw(data_models(dense=False, max_vocab=12))
    M = draw(st.one_of(st.just(data.vocab_size), st.integers(data.vocab_size, 10**5),
                       st.just(10**5)))
    data = DataModel(M, list(data.classes), data.weights.tolist())
    eta_y, eta_z = draw(learning_rate_pairs(eta_y=(1e-3, 1e2), ratio=(1e-4, 1e4)))
    t_end = draw(st.one_of(learning_rates(1.0, 1e10), st.just(1e10)))
    z0 = None
    if draw(st.booleans()):
        z0 = {int(m): np.zeros(M) for m in data.query_tokens}
        for m in z0:
            z0[m][data.active_tokens] = draw(st.lists(
                st.floats(-5, 5), min_size=data.active_tokens.size,
                max_size=data.active_tokens.size))
    return data, eta_y, eta_z, t_end, z0


def check_finite_or_clear_error(flow, data, eta_y, eta_z, t_end, z0):
    """Solve; either everything the trajectory returns is finite (no NaN anywhere)
    or the failure is a SolveError / ValidationError with a message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # e.g. expm1 overflow to inf
            traj = odeflow.solve(data, flow=flow, eta_y=eta_y, eta_z=eta_z,
                                 t_span=(0.0, t_end), start=(None, z0), rtol=1e-6, atol=1e-9)
            checks = check_trajectory(traj)
    except (SolveError, ValidationError) as exc:
        event(f"{flow}: {type(exc).__name__}")
        assert str(exc)
        return None
    event(f"{flow}: solved")
    for name, value in checks.items():
        assert np.all(np.isfinite(value)), name
    return traj


def check_trajectory(traj) -> dict:
    data = traj.data
    out = {"t": traj.t, "z_active": traj.z_active, "decoder": traj.decoder_lumped,
           "objective": traj.objective}
    active = data.active_tokens
    for n in data.next_tokens:
        out[f"attention({n})"] = traj.attention(n, tokens=active)
        out[f"features({n})"] = traj.features(n, tokens=active)
        m = int(data.classes[data.class_index(n)].query_token)
        out[f"logits({m})"] = traj.logits(m, tokens=active)
        for token in data.distinct_tokens(n)[:2]:
            chi = traj.growth_factor(n, int(token))
            assert not np.any(np.isnan(chi)), "growth_factor is NaN"
    if traj.flow == "reduced":
        out.update({"margin": traj.margin, "gamma": traj.gamma,
                    "gamma_integral": traj.gamma_integral})
        for n in data.next_tokens:
            out[f"B({n})"] = traj.B(n)
            out[f"xi({n})"] = traj.xi(n)
    return out


#: Share of the examples of an extreme-parameter test that must solve (the rest may
#: fail clearly): a solver that refused every extreme problem would pass the
#: finite-or-clear-error check alone.
MIN_SOLVED = 0.8


def solved_share(solve_one, strategy, n: int) -> float:
    """Run ``solve_one`` (True if it solved, False if it failed clearly) on ``n`` examples
    of ``strategy`` (``examples(n)`` under the active profile); the share that solved."""
    outcomes = []

    @settings(max_examples=examples(n))
    @given(strategy)
    def run(example):
        outcomes.append(bool(solve_one(example)))

    run()
    assert outcomes
    return sum(outcomes) / len(outcomes)


def test_exact_flow_at_extremes_is_finite_or_fails_clearly():
    """Level E at extreme valid parameters: finite logits, decoder, J, attention,
    features and growth factors at every output time, or a SolveError /
    ValidationError; attention still sums to one; at least MIN_SOLVED of the
    examples solve."""

    def solve_one(problem):
        traj = check_finite_or_clear_error("exact", *problem)
        if traj is not None:
            for n in traj.data.next_tokens:
                total = traj.attention(n, tokens=traj.data.active_tokens).sum(axis=1)
                assert np.allclose(total, 1.0, atol=1e-9)
        return traj is not None

    assert solved_share(solve_one, extreme_problems(), 20) >= MIN_SOLVED


def test_reduced_flow_at_extremes_is_finite_or_fails_clearly():
    """Level R at extreme valid parameters: finite h, gamma, Gamma, B, xi and logits,
    or a SolveError / ValidationError; h and B stay non-decreasing; at least
    MIN_SOLVED of the examples solve."""

    def solve_one(problem):
        traj = check_finite_or_clear_error("reduced", *problem)
        if traj is not None:
            h = traj.series["margin"]
            assert np.all(np.diff(h, axis=0) >= -1e-6 * (1 + np.abs(h).max()))
        return traj is not None

    assert solved_share(solve_one, extreme_problems(), 20) >= MIN_SOLVED


@st.composite
def extreme_snap_problems(draw):
    """Arguments of the Sec. 6 system: M up to 1e6, rates 1e-4..1e4, K up to 100
    classes (pi = 1/K), a in [1e-6, 1e3], z_c(0) in [-5, 5], t_end up to 1e10."""
    eta_y, eta_z = draw(learning_rate_pairs((1e-4, 1e4), (1e-4, 1e4)))
    return {"eta_y": eta_y, "eta_z": eta_z, "a": draw(learning_rates(1e-6, 1e3)),
            "pi": 1.0 / draw(st.integers(1, 100)), "vocab_size": draw(st.integers(2, 10**6)),
            "zc0": draw(st.floats(-5, 5)), "t_span": (0.0, draw(learning_rates(1.0, 1e10)))}


def test_snap_flow_at_extremes_is_finite_or_fails_clearly():
    """The Sec. 6 system at extreme parameters: finite h, z_c, B, Gamma, gamma, xi,
    or a SolveError / ValidationError; at least MIN_SOLVED of the examples solve.
    (Larger a exp(2 z_c(0)) can fail the very first step:
    test_violent_first_step_fails_clearly_or_solves.)"""

    def solve_one(kwargs):
        try:
            res = odeflow.solve(None, flow="snap", rtol=1e-6, atol=1e-9, **kwargs)
        except (SolveError, ValidationError) as exc:
            event(f"snap: {type(exc).__name__}")
            assert str(exc)
            return False
        event("snap: solved")
        for name in ("t", "margin", "common_logit", "B", "gamma_integral", "gamma", "xi"):
            assert np.all(np.isfinite(getattr(res, name))), name
        return True

    assert solved_share(solve_one, extreme_snap_problems(), 40) >= MIN_SOLVED


@settings(max_examples=examples(200))
@given(t=st.one_of(st.just(0.0), learning_rates(1e-12, 1e12)), M=learning_rates(2.0, 1e6),
       rates=learning_rate_pairs((1e-4, 1e4), (1e-4, 1e4)), pi=learning_rates(1e-4, 1.0),
       a=learning_rates(1e-8, 1e4), zc0=st.floats(-50, 50))
def test_closed_forms_are_finite_at_extremes(t, M, rates, pi, a, zc0):
    """Every closed form is finite (never NaN) for t in [0, 1e12], M up to 1e6,
    learning rates 1e-4..1e4 and any z_c(0) in [-50, 50]; h, gamma, Gamma, B >= 0."""
    eta_y, eta_z = rates
    values = {
        "h": cf.decoder_margin(t, M, eta_y, pi),
        "gamma": cf.speed_control(t, M, eta_y, pi),
        "Gamma": cf.gamma_integral(t, M, eta_y, pi),
        "t0": cf.transition_time(M, eta_y, pi),
        "B": cf.snap_B(t, M, eta_y, eta_z, pi, a, zc0),
        "z_c": cf.snap_common_logit(t, M, eta_y, eta_z, pi, a, zc0),
    }
    for name, value in values.items():
        assert np.isfinite(value), name
    assert min(values["h"], values["gamma"], values["Gamma"], values["B"]) >= 0


# ------------------------------------------------------------ bad solve arguments
@settings(max_examples=examples(200))
@given(data=data_models(max_classes=2, max_vocab=6), draw=st.data())
def test_invalid_solve_arguments_name_the_field(data, draw):
    """Every invalid argument of odeflow.solve (learning rates, t_span, t_eval,
    method, tolerances, flow, z0, data, beta, iota) is a ValidationError naming it."""
    bad = draw.draw(invalid_solve_arguments(data))
    kwargs = dict(bad.value)
    with pytest.raises(Exception) as info:
        odeflow.solve(kwargs.pop("data"), **kwargs)
    assert_field(info.value, bad.field)


def _solve_rejects(bad):
    kwargs = dict(bad.value)
    with pytest.raises(Exception) as info:
        odeflow.solve(kwargs.pop("data"), **kwargs)
    assert_field(info.value, bad.field)


@example(bad=InvalidInput({"data": SMALL, "start": (None, "abc"), "t_span": (0, 1)}, "z0",
                          "z0:text"))
@example(bad=InvalidInput({"data": SMALL, "t_eval": "abc", "t_span": (0, 1)}, "t_eval",
                          "t_eval:text"))
@given(bad=invalid_solve_arguments(SMALL, kinds=["z0:text", "t_eval:text"]))
def test_non_numeric_arrays_name_the_field(bad):
    """z0 or t_eval that are not numbers give a ValidationError naming them."""
    _solve_rejects(bad)


@example(flow=[])
@given(flow=st.sampled_from([[], ["exact"], {}]))
def test_unhashable_flow_names_the_field(flow):
    """An unhashable flow= gives a ValidationError naming flow."""
    with pytest.raises(ValidationError) as info:
        odeflow.solve(SMALL, flow=flow, t_span=(0, 1))
    assert_field(info.value, "flow")


@example(token=7)
@given(token=st.integers(-5, 20).filter(lambda m: m != 1))
def test_z0_with_unknown_query_names_z0(token):
    """z0={m: row} with m not a query token gives a ValidationError naming z0."""
    with pytest.raises(ValidationError) as info:
        odeflow.solve(SMALL, start=(None, {token: np.zeros(6)}), t_span=(0, 1))
    assert_field(info.value, "z0")


@example(slot="eta_y", big=10**400)
@given(slot=st.sampled_from(["eta_y", "eta_z", "rtol", "atol", "t_end"]),
       big=st.integers(2**1024, 10**400))
def test_huge_integers_name_the_field(slot, big):
    """An integer too large for a float in a numeric argument of solve is a
    ValidationError naming the argument."""
    kwargs = {"t_span": (0, big)} if slot == "t_end" else {slot: big, "t_span": (0, 1)}
    with pytest.raises(Exception) as info:
        odeflow.solve(SMALL, **kwargs)
    assert_field(info.value, "t_" if slot == "t_end" else slot)


@example(M=2**62)
@given(M=st.integers(2**60, 2**64))
def test_huge_vocabulary_fails_clearly(M):
    """A vocabulary too large for the dense Z(0) row is rejected with a
    ValidationError naming vocab_size, when the data model is built."""
    with pytest.raises(Exception) as info:  # the type is what is being tested
        odeflow.solve(DataModel(M, list(SMALL.classes)), t_span=(0, 1), t_eval=[0, 1])
    assert_field(info.value, "vocab_size")


@example(a=1e4, zc0=19.0)
@settings(max_examples=examples(5))
@given(a=learning_rates(1e3, 1e4), zc0=st.floats(18.0, 20.0))
def test_violent_first_step_fails_clearly_or_solves(a, zc0):
    """The snap system with a exp(2 z_c(0)) ~ 1e18-1e21 (dz_c/dt enormous at t = 0):
    depending on the draw scipy fails before its first output time or gets
    through the transient. Either a SolveError/ValidationError or finite results;
    never another exception (an empty sol.t once raised AttributeError)."""
    try:
        result = odeflow.solve(None, flow="snap", eta_y=1.0, eta_z=1.0, a=a, pi=1.0,
                               vocab_size=2, zc0=zc0, t_span=(0.0, 1.0), rtol=1e-6, atol=1e-9)
    except (SolveError, ValidationError) as exc:
        assert str(exc)
    else:
        for series in (result.margin, result.common_logit, result.B, result.gamma_integral):
            assert np.all(np.isfinite(series))


@example(beta=-1.0)
@given(beta=st.floats(-10.0, -1e-6))
def test_negative_beta_single_class(beta):
    """beta < 0 is rejected with a ValidationError naming beta, whatever K."""
    one = DataModel(3, [SequenceClass(1, 0, {0: 0.5, 2: 0.5})])
    try:
        odeflow.solve(one, flow="reduced", beta=beta, t_span=(0, 1))
    except Exception as exc:  # the type is what is being tested
        assert_field(exc, "beta")
    else:
        raise AssertionError(f"beta = {beta} accepted")
