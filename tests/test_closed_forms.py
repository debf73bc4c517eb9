"""Tests of :mod:`odeflow.analysis.closed_forms`.

Every numeric closed form is compared with the sympy expression produced by
``derivations`` (lambdified with mpmath, 50 significant digits) at
hypothesis-drawn parameters, and ``h(t)`` / ``z_c(t)`` / ``B(t)`` are also
compared with scipy's Radau integration of the ODEs they solve.
"""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from derivations import (
    cf1_decoder_margin,
    cf2_speed_control,
    cf3_gamma_integral,
    cf4_relative_gain,
    cf5_dominant_bounds,
    cf6_snap,
)
from odeflow import ValidationError
from odeflow.analysis import closed_forms as cf

RTOL = 1e-10
DPS = 50
EXAMPLES = 300

# ---------------------------------------------------------------------------
# sympy references, lambdified once with mpmath
# ---------------------------------------------------------------------------
CF1 = cf1_decoder_margin.derive()
CF2 = cf2_speed_control.derive()
CF3 = cf3_gamma_integral.derive()
CF4 = cf4_relative_gain.derive()
CF5 = cf5_dominant_bounds.derive()
CF6 = cf6_snap.derive()

REF_H = CF1.lambdify()
REF_GAMMA = CF2.lambdify()
REF_EARLY = CF2.lambdify("gamma_early")
REF_LATE = CF2.lambdify("gamma_late")
REF_T0 = CF2.lambdify("t0")
REF_GAMMA_INT = CF3.lambdify()
REF_GAIN = CF4.lambdify()
REF_LOWER = CF5.lambdify("lower")
REF_UPPER = CF5.lambdify("upper")
REF_B = CF6.lambdify("B")
REF_ZC = CF6.lambdify("z_c")


def ref(fn, *args):
    """Evaluate a lambdified sympy expression at 50 digits on exact float inputs."""
    with mpmath.workdps(DPS):
        return fn(*(mpmath.mpf(float(x)) for x in args))


def assert_close(value, reference, rtol=RTOL, atol=0.0, what=""):
    value = float(value)
    assert math.isfinite(value), f"{what}: non-finite value {value}"
    err = abs(mpmath.mpf(value) - reference)
    assert err <= rtol * abs(reference) + atol, (
        f"{what}: got {value!r}, reference {mpmath.nstr(reference, 20)}, "
        f"rel err {mpmath.nstr(err / abs(reference), 3) if reference else err}"
    )


# ---------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------
def log_uniform(lo, hi):
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0**e)


times = log_uniform(1e-6, 1e12)
vocab = st.one_of(st.just(2.0), st.integers(2, 10**6).map(float), log_uniform(2.0, 1e6))
rates = log_uniform(1e-4, 1e4)
weights = st.one_of(st.just(1.0), log_uniform(1e-6, 1.0))
features = st.floats(1e-3, 1.0)


# ---------------------------------------------------------------------------
# agreement with the sympy expressions
# ---------------------------------------------------------------------------
@settings(deadline=None, max_examples=EXAMPLES)
@given(t=times, M=vocab, eta=rates, pi=weights)
def test_decoder_margin_matches_sympy(t, M, eta, pi):
    assert_close(cf.decoder_margin(t, M, eta, pi), ref(REF_H, t, M, eta, pi), what="h")


@settings(deadline=None, max_examples=EXAMPLES)
@given(t=times, M=vocab, eta=rates, pi=weights)
def test_speed_control_matches_sympy(t, M, eta, pi):
    assert_close(cf.speed_control(t, M, eta, pi), ref(REF_GAMMA, t, M, eta, pi), what="gamma")


@settings(deadline=None, max_examples=EXAMPLES)
@given(t=times, M=vocab, eta=rates, pi=weights)
def test_gamma_integral_matches_sympy(t, M, eta, pi):
    assert_close(cf.gamma_integral(t, M, eta, pi), ref(REF_GAMMA_INT, t, M, eta, pi), what="Gamma")


@settings(deadline=None, max_examples=EXAMPLES)
@given(t=times, M=vocab, eta=rates, pi=weights)
def test_speed_control_asymptotes_match_sympy(t, M, eta, pi):
    assert_close(cf.speed_control_early(t, M, eta, pi), ref(REF_EARLY, t, M, eta, pi), what="early")
    # ln(eta pi M t) vanishes at eta pi M t = 1, where its relative error is
    # unbounded; allow the absolute error of a rounded logarithm.
    scale = (M - 1) / M / (eta * pi * t)
    logs = abs(math.log(eta)) + abs(math.log(pi)) + abs(math.log(M)) + abs(math.log(t))
    assert_close(
        cf.speed_control_late(t, M, eta, pi),
        ref(REF_LATE, t, M, eta, pi),
        atol=4e-16 * logs * scale,
        what="late",
    )


@settings(deadline=None, max_examples=EXAMPLES)
@given(M=vocab, eta=rates, pi=weights)
def test_transition_time_matches_sympy(M, eta, pi):
    expected = ref(REF_T0, M, eta, pi)
    value = cf.transition_time(M, eta, pi)
    if M == 2.0:
        assert value == 0.0 and expected == 0
    else:
        assert_close(value, expected, what="t0")
        # exp(h(t_0)) = M - 1
        assert_close(
            math.exp(cf.decoder_margin(value, M, eta, pi)),
            mpmath.mpf(M - 1),
            rtol=1e-12,
            what="e^h(t0)",
        )


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    chi=st.one_of(st.floats(-0.999, 10.0, allow_subnormal=False), log_uniform(1e-12, 1e12)),
    f0=features,
    f1=features,
)
def test_relative_gain_matches_sympy(chi, f0, f1):
    expected = ref(REF_GAIN, chi, f0, f1)
    value = cf.relative_gain(chi, f0, f1)
    if expected == 0:
        assert value == 0.0
    else:
        assert_close(value, expected, atol=1e-300, what="r")


@settings(deadline=None, max_examples=EXAMPLES)
@given(B=st.one_of(st.just(0.0), log_uniform(1e-12, 300.0)), f0=features)
def test_dominant_bounds_match_sympy(B, f0):
    lower, upper = cf.dominant_bounds(B, f0)
    assert_close(lower, ref(REF_LOWER, B, f0), what="lower")
    assert_close(upper, ref(REF_UPPER, B), what="upper")
    assert lower <= upper
    log_lower, log_upper = cf.dominant_bounds(B, f0, log=True)
    assert log_lower == pytest.approx(2 * f0 * f0 * B, rel=1e-15, abs=0)
    assert log_upper == pytest.approx(2 * B, rel=1e-15, abs=0)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    t=times,
    M=vocab,
    eta_y=rates,
    eta_z=rates,
    pi=weights,
    a=log_uniform(1e-3, 10.0),
    zc0=st.one_of(st.just(0.0), st.floats(-5.0, 5.0)),
)
def test_snap_matches_sympy(t, M, eta_y, eta_z, pi, a, zc0):
    args = (t, M, eta_y, eta_z, pi, a, zc0)
    assert_close(cf.snap_B(*args), ref(REF_B, *args), what="B")
    # z_c = z_c0 - ln(1 + q)/2 cancels when z_c ~ 0: allow eps * |z_c0|.
    assert_close(cf.snap_common_logit(*args), ref(REF_ZC, *args), atol=1e-14 * abs(zc0), what="z_c")


# ---------------------------------------------------------------------------
# special values, extremes, broadcasting
# ---------------------------------------------------------------------------
def test_values_at_t_zero():
    for M in (2, 3, 1e6):
        assert cf.decoder_margin(0.0, M, 1.0, 0.5) == 0.0
        assert cf.speed_control(0.0, M, 1.0, 0.5) == 0.0
        assert cf.gamma_integral(0.0, M, 1.0, 0.5) == 0.0
        assert cf.snap_B(0.0, M, 1.0, 2.0, 0.5, 0.3, 0.7) == 0.0
        assert cf.snap_common_logit(0.0, M, 1.0, 2.0, 0.5, 0.3, 0.7) == 0.7


def test_extremes_are_finite_and_accurate():
    t = np.array([1e-6, 1.0, 1e6, 1e12])
    for M in (2.0, 1e6):
        for eta, pi in ((1e4, 1.0), (1e-4, 1e-3)):
            h = cf.decoder_margin(t, M, eta, pi)
            g = cf.speed_control(t, M, eta, pi)
            G = cf.gamma_integral(t, M, eta, pi)
            B = cf.snap_B(t, M, eta, 1e4, pi, 10.0, 5.0)
            for arr in (h, g, G, B):
                assert np.all(np.isfinite(arr)) and np.all(arr > 0)
            for i, tt in enumerate(t):
                assert_close(h[i], ref(REF_H, tt, M, eta, pi), rtol=1e-12, what="h extreme")
                assert_close(g[i], ref(REF_GAMMA, tt, M, eta, pi), rtol=1e-12, what="gamma extreme")
    # far beyond the documented range: still finite (no exp(h) overflow)
    assert np.isfinite(cf.decoder_margin(1e250, 1e6, 1e4, 1.0))
    assert np.isfinite(cf.speed_control(1e250, 1e6, 1e4, 1.0))


def test_broadcasting_and_scalar_output():
    t = np.logspace(-3, 3, 7)[:, None]
    M = np.array([2.0, 10.0, 1000.0])
    out = cf.decoder_margin(t, M, 1.0, 0.5)
    assert out.shape == (7, 3)
    assert np.ndim(cf.decoder_margin(1.0, 10, 1.0, 0.5)) == 0
    assert out[3, 1] == cf.decoder_margin(1.0, 10.0, 1.0, 0.5)
    lo, hi = cf.dominant_bounds(np.array([0.0, 1.0]), 0.5)
    assert lo.shape == hi.shape == (2,)


def test_asymptotes_bracket_the_regimes():
    M, eta, pi = 1000.0, 0.5, 0.25
    t0 = cf.transition_time(M, eta, pi)
    early = t0 * 1e-7
    late = t0 * 1e9
    assert cf.speed_control(early, M, eta, pi) / cf.speed_control_early(
        early, M, eta, pi
    ) == pytest.approx(1, rel=1e-6)
    assert cf.speed_control(late, M, eta, pi) / cf.speed_control_late(
        late, M, eta, pi
    ) == pytest.approx(1, rel=1e-4)


# ---------------------------------------------------------------------------
# verification against scipy's integration of the ODEs
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("M", "eta", "pi"), [(10.0, 1.0, 0.5), (1000.0, 0.1, 0.25), (2.0, 3.0, 1.0)]
)
def test_decoder_margin_matches_radau(M, eta, pi):
    A = eta * pi * M

    def rhs(_, y):
        h, _G = y
        e = math.exp(h)
        return [A / (e + M - 1), h * (M - 1) / (e + M - 1)]

    def jac(_, y):
        h = y[0]
        e = math.exp(h)
        return [
            [-A * e / (e + M - 1) ** 2, 0.0],
            [(M - 1) * (e + M - 1 - h * e) / (e + M - 1) ** 2, 0.0],
        ]

    t_end = max(cf.transition_time(M, eta, pi), 1.0 / A) * 1e3
    t_eval = t_end * np.logspace(-6, 0, 13)
    # atol 1e-14 on h as specified; Gamma ~ h^2 is tiny early on, so its
    # absolute tolerance is set lower.
    sol = solve_ivp(
        rhs,
        (0.0, t_end),
        [0.0, 0.0],
        method="Radau",
        jac=jac,
        t_eval=t_eval,
        rtol=1e-11,
        atol=[1e-14, 1e-24],
    )
    assert sol.success
    h = cf.decoder_margin(t_eval, M, eta, pi)
    G = cf.gamma_integral(t_eval, M, eta, pi)
    assert np.max(np.abs(sol.y[0] / h - 1)) < 1e-8
    assert np.max(np.abs(sol.y[1] / G - 1)) < 1e-8


def test_snap_matches_radau():
    M, eta_y, eta_z, pi, a, zc0 = 50.0, 0.7, 0.2, 0.5, 0.4, -0.3

    def rhs(_, y):
        h, zc, _B = y
        e = math.exp(h)
        gamma = h * (M - 1) / (e + M - 1)
        return [
            eta_y * pi * M / (e + M - 1),
            -a * eta_z * gamma * math.exp(2 * zc),
            eta_z * pi * gamma * a * math.exp(2 * zc),
        ]

    t_end = 1e3 * cf.transition_time(M, eta_y, pi)
    t_eval = t_end * np.logspace(-5, 0, 11)
    sol = solve_ivp(
        rhs, (0.0, t_end), [0.0, zc0, 0.0], method="Radau", t_eval=t_eval, rtol=1e-11, atol=1e-14
    )
    assert sol.success
    zc = cf.snap_common_logit(t_eval, M, eta_y, eta_z, pi, a, zc0)
    B = cf.snap_B(t_eval, M, eta_y, eta_z, pi, a, zc0)
    assert np.max(np.abs(sol.y[1] - zc)) < 1e-8 * np.max(np.abs(zc))
    assert np.max(np.abs(sol.y[2] / B - 1)) < 1e-8


# ---------------------------------------------------------------------------
# invalid input
# ---------------------------------------------------------------------------
GOOD = {"t": 1.0, "M": 10.0, "eta_y": 1.0, "eta_z": 1.0, "pi": 0.5, "a": 0.3, "zc0": 0.0}

BAD_MARGIN_ARGS = [
    ("M", 1.5),
    ("M", 1.0),
    ("M", -3.0),
    ("M", float("nan")),
    ("t", -1.0),
    ("t", float("inf")),
    ("t", float("nan")),
    ("eta_y", 0.0),
    ("eta_y", -1.0),
    ("eta_y", float("inf")),
    ("eta_y", float("nan")),
    ("pi", 0.0),
    ("pi", -0.1),
    ("pi", 1.5),
    ("pi", float("nan")),
]


def _message_pattern(name, value):
    shown = re.escape(repr(float(value)))
    return rf"\b{name}\b.*{name}={shown}"


@pytest.mark.parametrize(
    "func",
    [
        cf.decoder_margin,
        cf.speed_control,
        cf.gamma_integral,
        cf.speed_control_early,
        cf.speed_control_late,
    ],
)
@pytest.mark.parametrize(("name", "value"), BAD_MARGIN_ARGS)
def test_bad_inputs_margin_family(func, name, value):
    kwargs = {k: GOOD[k] for k in ("t", "M", "eta_y", "pi")}
    kwargs[name] = value
    with pytest.raises(ValueError, match=_message_pattern(name, value)):
        func(**kwargs)


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, v in BAD_MARGIN_ARGS if n != "t"])
def test_bad_inputs_transition_time(name, value):
    kwargs = {k: GOOD[k] for k in ("M", "eta_y", "pi")}
    kwargs[name] = value
    with pytest.raises(ValueError, match=_message_pattern(name, value)):
        cf.transition_time(**kwargs)


@pytest.mark.parametrize("func", [cf.snap_B, cf.snap_common_logit])
@pytest.mark.parametrize(
    ("name", "value"),
    BAD_MARGIN_ARGS
    + [
        ("eta_z", 0.0),
        ("eta_z", float("nan")),
        ("a", -1.0),
        ("a", float("inf")),
        ("zc0", float("nan")),
    ],
)
def test_bad_inputs_snap(func, name, value):
    kwargs = dict(GOOD)
    kwargs[name] = value
    with pytest.raises(ValueError, match=_message_pattern(name, value)):
        func(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name", "value"),
    [
        ({"chi_l": -1.0, "f0_l": 0.5, "f0_lprime": 0.3}, "chi_l", -1.0),
        ({"chi_l": float("nan"), "f0_l": 0.5, "f0_lprime": 0.3}, "chi_l", float("nan")),
        ({"chi_l": 1.0, "f0_l": 0.0, "f0_lprime": 0.3}, "f0_l", 0.0),
        ({"chi_l": 1.0, "f0_l": 0.5, "f0_lprime": 1.2}, "f0_lprime", 1.2),
    ],
)
def test_bad_inputs_relative_gain(kwargs, name, value):
    with pytest.raises(ValueError, match=_message_pattern(name, value)):
        cf.relative_gain(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name", "value"),
    [
        ({"B": -0.1, "f0_l0": 0.5}, "B", -0.1),
        ({"B": 1.0, "f0_l0": 1.5}, "f0_l0", 1.5),
        ({"B": 1.0, "f0_l0": -0.5}, "f0_l0", -0.5),
    ],
)
def test_bad_inputs_dominant_bounds(kwargs, name, value):
    with pytest.raises(ValueError, match=_message_pattern(name, value)):
        cf.dominant_bounds(**kwargs)


def test_bad_input_in_array_names_element():
    pattern = r"t=-2\.0 \(first offending element at index \(1,\)\)"
    with pytest.raises(ValidationError, match=pattern):
        cf.decoder_margin(np.array([1.0, -2.0, 3.0]), 10, 1.0, 0.5)


def test_late_asymptote_rejects_t_zero():
    with pytest.raises(ValidationError, match=r"^t: must be > 0, got t=0\.0$"):
        cf.speed_control_late(0.0, 10, 1.0, 0.5)


def test_overflowing_time_is_reported():
    with pytest.raises(ValueError, match=r"t=1e\+300"):
        cf.decoder_margin(1e300, 1e6, 1e4, 1.0)
