"""Properties of the induction-head family on models drawn by :mod:`odeflow.testing`.

- the data model: TOML round trip; the window laws are stationary probability
  laws whose marginals agree across window lengths (Chen, Sheen, Wang, Yang 2024;
  ``docs/induction.md``, offsets ``z_m = x_{l-m}``);
- the population and exact-copier flows: the analytic gradient is the central
  finite difference of the loss; the loss depends on ``c`` only through
  ``p_S = c_S^2 / sum c^2``, so the gradient is orthogonal to ``c`` and the
  flow conserves ``U = sum c^2``; a group without a rate does not move.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from odeflow.data.induction import InductionData, markov
from odeflow.fields.induction import INDUCTION_FLOWS
from odeflow.testing import induction_models, induction_parameters, induction_rates
from tests.properties import examples

#: The levels whose loss is a closed expression of the window laws (``finite_l`` samples
#: sequences and is tested in tests/test_induction_finite_l.py).
FLOWS = ("population", "copier")


@settings(max_examples=examples(40))
@given(data=induction_models())
def test_toml_round_trip(data):
    """``from_toml_string(to_toml_string())`` gives the same model, kernel included."""
    back = InductionData.from_toml_string(data.to_toml_string())
    assert back == data
    np.testing.assert_array_equal(back.kernels, data.kernels)


@settings(max_examples=examples(40))
@given(data=induction_models())
def test_window_laws_are_stationary_and_consistent(data):
    """``mu(z, e)`` is a probability law; the next token has the law of the offset-1
    token (stationarity); dropping the oldest offset of a window of 2 gives the law of
    a window of 1."""
    d, N = data.vocab_size, data.kernels.shape[0]
    one, two = data.window_joint(1), data.window_joint(2)
    for joint in (one, two, data.window_laws()):
        assert np.all(joint >= 0)
        np.testing.assert_allclose(joint.sum(axis=(1, 2)), 1.0, atol=1e-12)
    np.testing.assert_allclose(markov.next_token_law(one), markov.window_law(one), atol=1e-12)
    # index(z) = z_1 d + z_2: summing over z_2 keeps the offset-1 token
    dropped = two.reshape(N, d, d, d).sum(axis=2)
    np.testing.assert_allclose(dropped, one, atol=1e-12)


@st.composite
def flow_points(draw):
    """A flow of the family on a small model, at drawn flat parameters."""
    flow = draw(st.sampled_from(FLOWS))
    data = draw(induction_models())
    theta = draw(induction_parameters(data, flow=flow))
    return INDUCTION_FLOWS[flow](data), theta


@settings(max_examples=examples(40), deadline=None)
@given(point=flow_points())
def test_gradient_is_the_finite_difference_of_the_loss(point):
    """Each partial derivative of the loss matches a central difference with a step
    relative to the coordinate's scale (that of ``c`` for the selector), within its
    truncation error (relative 1e-5) and rounding error (``1e-14 |L| / step``)."""
    field, theta = point
    grad = field.gradient(theta)
    loss = field.loss(theta)
    assert np.all(np.isfinite(grad)) and np.isfinite(loss)
    scale_c = np.sqrt(np.sum(theta[field.slices["c"]] ** 2))
    steps = np.where(field.group_mask("c"), 1e-4 * scale_c, 1e-4)
    numeric = np.empty_like(grad)
    for i, step in enumerate(steps):
        up, down = theta.copy(), theta.copy()
        up[i] += step
        down[i] -= step
        numeric[i] = (field.loss(up) - field.loss(down)) / (2 * step)
    bound = 1e-5 * np.abs(numeric) + 1e-14 * (1 + abs(loss)) / steps + 1e-7 * np.abs(grad).max()
    assert np.all(np.abs(grad - numeric) <= bound), (grad, numeric)


@settings(max_examples=examples(40), deadline=None)
@given(point=flow_points(), draw=st.data())
def test_selector_flow_conserves_its_scale_and_frozen_groups_stay(point, draw):
    """``c . dL/dc = 0`` (the loss is scale-free in ``c``); in the solver's
    coordinates ``l_S = ln|c_S|`` that is ``sum_S p_S l_S' = 0``; with ``rates``
    omitting a group, that group's entries of the right-hand side are 0 and the
    others are ``-rate * gradient`` (``w``, ``a``)."""
    base, theta = point
    c = theta[base.slices["c"]]
    grad = base.gradient(theta)
    g_c = grad[base.slices["c"]]
    # compared at unit scale (g_c can be far below 1e-150), unless g_c is near the
    # subnormal range (e.g. a subnormal a), where it has too few significant bits
    if np.abs(g_c).max() > 1e-290:
        cosine = np.dot(c / np.abs(c).max(), g_c / np.abs(g_c).max())
        assert abs(cosine) <= 1e-9 * c.size, cosine
    rates = draw.draw(induction_rates(base.groups))
    field = type(base)(base.data, rates=rates, start=theta)
    x = field.initial_state()
    rhs = field.rhs(0.0, x)
    p = field.selector_weights(x)
    l_dot = rhs[field.slices["c"]]
    assert abs(np.dot(p, l_dot)) <= 1e-9 * (np.abs(l_dot).max() + 1e-300)
    for group in field.groups:
        moved = rhs[field.slices[group]]
        if group not in rates:
            assert np.all(moved == 0.0), group
        elif group != "c":
            # the field evaluates the model at c rescaled to the same p (to rounding)
            np.testing.assert_allclose(moved, -rates[group] * grad[field.slices[group]],
                                       rtol=1e-9, atol=1e-12 * np.abs(rhs).max())
