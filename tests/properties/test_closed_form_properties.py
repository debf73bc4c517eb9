"""Properties of the closed forms (spec section 5, CF1-CF6) and of the snap system.

The sympy derivations and their agreement with the numeric code are tested in
tests/test_closed_forms.py; here are the qualitative claims of the paper that
the closed forms make: h grows, gamma > 0, Gamma' = gamma, and the phase
transition of Sec. 6 (B_n(t_0) depends on eta_Z/eta_Y only; at large t a
larger eta_Z sparsifies and a larger eta_Y densifies the attention).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import odeflow
from odeflow.analysis import closed_forms as cf
from odeflow.testing import learning_rates
from tests.properties import examples, monotone_violation

TIMES = st.one_of(learning_rates(1e-6, 1e12), st.sampled_from([1e-3, 1.0, 1e4]))
VOCAB = st.one_of(st.integers(2, 50), learning_rates(2.0, 1e6))
ETA = learning_rates(1e-3, 1e3)
PI = st.one_of(st.just(1.0), learning_rates(1e-3, 1.0))
A = learning_rates(1e-6, 1e3)
ZC0 = st.floats(-5.0, 5.0)


@settings(max_examples=examples(200))
@given(t=TIMES, M=VOCAB, eta_y=ETA, pi=PI, factor=learning_rates(1e-3, 1e3))
def test_margin_increases_with_time_and_rate(t, M, eta_y, pi, factor):
    """CF1 (Eqn 44-45): h(0) = 0 and h(t) is strictly increasing in t (dh/dt =
    eta_Y pi M / (e^h + M - 1) > 0), hence also in eta_Y (h depends on eta_Y t)."""
    assert cf.decoder_margin(0.0, M, eta_y, pi) == 0.0
    h = cf.decoder_margin(t, M, eta_y, pi)
    assert h > 0
    assert cf.decoder_margin(t * (1 + factor), M, eta_y, pi) > h
    assert cf.decoder_margin(t, M, eta_y * (1 + factor), pi) > h


@settings(max_examples=examples(200))
@given(t=TIMES, M=VOCAB, eta_y=ETA, pi=PI)
def test_speed_control_is_positive(t, M, eta_y, pi):
    """Eqn 9 / Theorem 1: gamma(t) = h (M - 1) / (e^h + M - 1) > 0 for t > 0, and
    gamma <= h (the factor (M - 1)/(e^h + M - 1) is below one)."""
    gamma = cf.speed_control(t, M, eta_y, pi)
    h = cf.decoder_margin(t, M, eta_y, pi)
    assert 0 < gamma <= h


@settings(max_examples=examples(200))
@given(t=TIMES, M=VOCAB, eta_y=ETA, pi=PI)
def test_gamma_integral_derivative_is_gamma(t, M, eta_y, pi):
    """CF3 (Eqn 128): Gamma(t) = (M - 1) h^2 / (2 M eta_Y pi) has Gamma' = gamma
    (central difference with a relative step of 1e-5)."""
    delta = 1e-5
    lo, hi = cf.gamma_integral(t * (1 - delta), M, eta_y, pi), cf.gamma_integral(
        t * (1 + delta), M, eta_y, pi)
    derivative = (hi - lo) / (2 * t * delta)
    gamma = cf.speed_control(t, M, eta_y, pi)
    assert derivative == pytest.approx(gamma, rel=1e-6)


@settings(max_examples=examples(200))
@given(M=VOCAB, eta_y=ETA, eta_z=ETA, pi=PI, a=A, zc0=ZC0, s=learning_rates(1e-3, 1e3))
def test_B_at_transition_depends_on_rate_ratio_only(M, eta_y, eta_z, pi, a, zc0, s):
    """CF6 / Sec. 6: B_n(t_0), with t_0 = transition_time(M, eta_Y, pi), is
    unchanged when eta_Y and eta_Z are scaled together (it depends on eta_Z/eta_Y
    and M only)."""
    t0 = cf.transition_time(M, eta_y, pi)
    B = cf.snap_B(t0, M, eta_y, eta_z, pi, a, zc0)
    t0s = cf.transition_time(M, s * eta_y, pi)
    Bs = cf.snap_B(t0s, M, s * eta_y, s * eta_z, pi, a, zc0)
    assert Bs == pytest.approx(B, rel=1e-10, abs=1e-300)


@settings(max_examples=examples(200))
@given(t=TIMES, M=VOCAB, eta_y=ETA, eta_z=ETA, pi=PI, a=A, zc0=ZC0,
       factor=learning_rates(1e-2, 1e3))
def test_larger_eta_z_gives_larger_B(t, M, eta_y, eta_z, pi, a, zc0, factor):
    """CF6 / Sec. 6: at fixed eta_Y a larger eta_Z gives a larger B (sparser
    attention). The paper states it at large t; the closed form has it at every
    t > 0 (B = (pi/2) ln(1 + 2 a eta_Z e^{2 z_c(0)} Gamma(t)))."""
    B = cf.snap_B(t, M, eta_y, eta_z, pi, a, zc0)
    B_more = cf.snap_B(t, M, eta_y, eta_z * (1 + factor), pi, a, zc0)
    assert B_more > B > 0


def past_crossover(t, M, eta_y, pi) -> bool:
    """The 'large t' of Sec. 6 made exact: d/d eta_Y [h(t)^2 / eta_Y] < 0, i.e.
    2 A h'(A) < h with A = eta_Y pi M t, which reduces to
    e^h (h - 2) > (M - 1) h - 2 at h = h(t) (true for all t past it)."""
    h = float(cf.decoder_margin(t, M, eta_y, pi))
    return h > 2 and math.exp(min(h, 700.0)) * (h - 2) > (M - 1) * h - 2


# Outside the assumption (t = 1 < t_0 = 11.06, before the crossover) the order is
# reversed: B = 0.1000 at eta_Y = 1 and 0.1703 at eta_Y = 2 (scan phase,
# B ~ ln(1 + C eta_Z eta_Y t^2)); assume() rejects it, the last test checks it.
@example(t=1.0, M=100, eta_y=1.0, eta_z=1.0, pi=0.5, a=1.0, zc0=0.0, factor=1.0)
@settings(max_examples=examples(200))
@given(t=TIMES, M=VOCAB, eta_y=ETA, eta_z=ETA, pi=PI, a=A, zc0=ZC0,
       factor=learning_rates(1e-1, 1e2))
def test_larger_eta_y_gives_smaller_B_at_large_t(t, M, eta_y, eta_z, pi, a, zc0, factor):
    """CF6 / Sec. 6: at fixed eta_Z and large t, a larger eta_Y gives a smaller B
    (denser attention). Assumption: t is past the crossover for the smaller eta_Y
    (:func:`past_crossover`; roughly t a few times t_0)."""
    assume(past_crossover(t, M, eta_y, pi))
    B = cf.snap_B(t, M, eta_y, eta_z, pi, a, zc0)
    B_faster = cf.snap_B(t, M, eta_y * (1 + factor), eta_z, pi, a, zc0)
    assert B_faster < B


@settings(max_examples=examples(200))
@given(t=TIMES, M=VOCAB, eta_y=ETA, eta_z=ETA, pi=PI, a=A, zc0=ZC0,
       factor=learning_rates(1e-2, 1e3))
def test_snap_common_logit_falls_and_B_grows(t, M, eta_y, eta_z, pi, a, zc0, factor):
    """Theorem 4 (Eqns 13-14): the common-token logit z_c(t) decreases from z_c(0)
    and B(t) increases from 0 as t grows; a larger a pushes z_c lower. (z_c is
    compared strictly only where its change, 1/2 ln(1 + 2 a eta_Z e^{2 z_c(0)}
    Gamma), is above double-precision resolution of z_c.)"""
    later = t * (1 + factor)
    zc = cf.snap_common_logit(t, M, eta_y, eta_z, pi, a, zc0)
    zc_later = cf.snap_common_logit(later, M, eta_y, eta_z, pi, a, zc0)
    zc_more_a = cf.snap_common_logit(t, M, eta_y, eta_z, pi, a * (1 + factor), zc0)
    assert cf.snap_common_logit(0.0, M, eta_y, eta_z, pi, a, zc0) == pytest.approx(zc0)
    assert cf.snap_B(0.0, M, eta_y, eta_z, pi, a, zc0) == 0
    assert zc_later <= zc <= zc0 and zc_more_a <= zc
    resolution = 1e-12 * (1 + abs(zc0))

    def drop(time, a_):
        return 0.5 * math.log1p(2 * a_ * eta_z * math.exp(2 * zc0)
                                * cf.gamma_integral(time, M, eta_y, pi))

    if drop(t, a) > resolution:
        assert zc < zc0
    if drop(later, a) - drop(t, a) > resolution:
        assert zc_later < zc
    if drop(t, a * (1 + factor)) - drop(t, a) > resolution:
        assert zc_more_a < zc
    B = cf.snap_B(t, M, eta_y, eta_z, pi, a, zc0)
    assert cf.snap_B(later, M, eta_y, eta_z, pi, a, zc0) > B > 0


@settings(max_examples=examples(20))
@given(M=st.integers(2, 10**5), eta_y=learning_rates(1e-2, 1e2),
       eta_z=learning_rates(1e-2, 1e2), K=st.integers(1, 20), a=learning_rates(1e-3, 1e2),
       zc0=st.floats(-3.0, 3.0))
def test_snap_flow_matches_closed_forms(M, eta_y, eta_z, K, a, zc0):
    """CF1, CF3 and CF6 inside the snap system: integrated with scipy, h, Gamma, z_c
    and B agree with decoder_margin, gamma_integral, snap_common_logit and snap_B;
    z_c never rises and B never falls."""
    pi = 1.0 / K
    t = np.concatenate([[0.0], np.geomspace(1e-2, 1e6, 30)]) / eta_y
    res = odeflow.solve(None, flow="snap", eta_y=eta_y, eta_z=eta_z, a=a, pi=pi,
                        vocab_size=M, zc0=zc0, t_span=(0.0, t[-1]), t_eval=t,
                        rtol=1e-10, atol=1e-12)
    assert np.allclose(res.margin, cf.decoder_margin(t, M, eta_y, pi), rtol=1e-6, atol=1e-10)
    assert np.allclose(res.gamma_integral, cf.gamma_integral(t, M, eta_y, pi), rtol=1e-6,
                       atol=1e-10)
    assert np.allclose(res.common_logit, cf.snap_common_logit(t, M, eta_y, eta_z, pi, a, zc0),
                       rtol=1e-6, atol=1e-8)
    assert np.allclose(res.B, cf.snap_B(t, M, eta_y, eta_z, pi, a, zc0), rtol=1e-6, atol=1e-10)
    assert monotone_violation(res.common_logit, increasing=False) <= 1e-9
    assert monotone_violation(res.B) <= 1e-9


def test_recorded_counterexample_larger_eta_y_before_crossover():
    """The @example of test_larger_eta_y_gives_smaller_B_at_large_t: before the
    crossover a larger eta_Y gives a *larger* B."""
    assert not past_crossover(1.0, 100, 1.0, 0.5)
    assert cf.transition_time(100, 1.0, 0.5) > 1.0
    small = cf.snap_B(1.0, 100, 1.0, 1.0, 0.5, 1.0, 0.0)
    faster = cf.snap_B(1.0, 100, 2.0, 1.0, 0.5, 1.0, 0.0)
    assert faster > small + 0.05
