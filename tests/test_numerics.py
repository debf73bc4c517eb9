"""The log-space helpers of :mod:`odeflow.numerics`: ``logsumexp`` gives scipy's value."""

from __future__ import annotations

import numpy as np
import scipy.special

from odeflow.numerics import logsumexp


def _direct(a, log_weights, axis):
    """``log(sum(w exp(a)))`` summed term by term in long double, no shift."""
    terms = np.exp(np.longdouble(a) + np.longdouble(log_weights))
    with np.errstate(divide="ignore"):
        return np.log(np.sum(terms, axis=axis)).astype(float)


def test_logsumexp_with_log_weights_matches_scipy_and_a_direct_sum():
    rng = np.random.default_rng(7)
    a = rng.normal(scale=5.0, size=(4, 6, 9))
    a[rng.random(a.shape) < 0.3] = -np.inf
    a[1, 2] = -np.inf  # a slice with no finite entry: weight zero, -inf
    log_weights = np.log(rng.integers(1, 50, size=9).astype(float))
    for axis in (-1, 1):
        w = log_weights if axis == -1 else log_weights[:6, None]
        b = np.broadcast_to(np.exp(w), a.shape)
        with np.errstate(all="raise"):  # no warning on the -inf entries
            got = logsumexp(a, axis=axis, log_weights=w)
        for ref in (scipy.special.logsumexp(a + w, axis=axis),
                    scipy.special.logsumexp(a, axis=axis, b=b)):
            np.testing.assert_allclose(got, ref, rtol=1e-14)
            assert np.array_equal(np.isneginf(got), np.isneginf(ref))
        np.testing.assert_allclose(got, _direct(a, w, axis), rtol=1e-13)
    assert logsumexp(a)[1, 2] == -np.inf


def test_logsumexp_is_stable_where_exp_overflows():
    a = np.array([800.0, 800.0, -np.inf])
    assert logsumexp(a) == 800.0 + np.log(2.0)
    assert logsumexp(a, log_weights=np.log([1.0, 3.0, 5.0])) == 800.0 + np.log(4.0)
