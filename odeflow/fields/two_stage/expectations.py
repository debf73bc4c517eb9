"""The inner expectation of the two-stage family in closed form (CF-TS1).

For a key vector ``v = W x_q = (a, b)`` (``a = W_P p_q``, ``b = W_Q q_q``) the
attention's population output is ``g(v) = E_x[y ReLU(x^T v)]`` over the example
law of :class:`~odeflow.data.two_stage.TwoStageData` (odeflow's own model; see
``derivations/cf_ts1_inner_expectation.py`` for the derivation).

* A label-symmetric law (``x | y = -1`` distributed as ``-x | y = +1``: every
  margin block, every label-blind block) gives ``g(v) = E[y x]^T v / 2`` exactly,
  since ``ReLU(s) - ReLU(-s) = s``. With a margin Q every kind is symmetric, so
  ``g(v) = mu^T v / 2`` with ``mu = E[y x]``
  (:func:`mean_vector`: ``(1 - rho)(gamma + sqrt(2/pi)) w`` per block).
* The cluster Q breaks the symmetry in the Q-only and both kinds; there each
  label's projection ``x^T v`` is Gaussian (Q only) or a shifted skew-normal
  ``m + u |c| + s Z`` (both: the half-space Gaussian's projection), whose
  ``E[ReLU]`` is :func:`relu_gauss` and :func:`relu_skew` (``Phi``, ``phi`` and
  Owen's ``T``).

Units: all quantities are dimensionless (features in units of the noise's
standard deviation).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, owens_t

#: ``phi(0) = 1 / sqrt(2 pi)``.
PHI0 = 1.0 / math.sqrt(2.0 * math.pi)
#: ``E|c|`` of ``c ~ N(0, 1)``: ``sqrt(2 / pi)``.
MEAN_ABS = math.sqrt(2.0 / math.pi)
#: Relative floor on a standard deviation (a degenerate Gaussian part is taken as this
#: small instead of 0; the closed forms are continuous there).
SCALE_FLOOR = 1e-12


def _phi(x):
    return PHI0 * np.exp(-0.5 * np.square(x))


def mean_vector(data) -> np.ndarray:
    """``mu = E[y x]`` of the example law, shape (d,).

    P block ``(1 - rho)(gamma_P + sqrt(2/pi)) w_P`` (the half-space Gaussian's mean
    along ``w_P`` is ``gamma_P + E|c|``; the P block is present with probability
    ``1 - rho``); the same for a margin Q; 0 for the cluster Q (its ``E[y q]`` is 0).
    """
    scale = 1.0 - data.rho
    mu_p = scale * (data.gamma_p + MEAN_ABS) * data.direction_p
    if data.q_kind == "margin":
        mu_q = scale * (data.gamma_q + MEAN_ABS) * data.direction_q
    else:
        mu_q = np.zeros(data.d_q)
    return np.concatenate([mu_p, mu_q])


def _floor(s, *others):
    scale = sum(np.abs(o) for o in others)
    return np.maximum(s, SCALE_FLOOR * scale + 1e-300)


def relu_gauss(m, s):
    """``E[ReLU(m + s Z)] = s phi(m/s) + m Phi(m/s)`` (``Z ~ N(0, 1)``, ``s >= 0``).

    Returns the value and the partial derivatives ``(d/dm, d/ds) = (Phi(m/s), phi(m/s))``.
    """
    m = np.asarray(m, dtype=float)
    s = _floor(np.asarray(s, dtype=float), m)
    h = m / s
    return s * _phi(h) + m * ndtr(h), ndtr(h), _phi(h)


def relu_skew(m, u, s):
    """``E[ReLU(m + u |c| + s Z)]`` for independent ``c, Z ~ N(0, 1)``, ``s >= 0``.

    With ``tau = sqrt(u^2 + s^2)``::

        R = 2 tau phi(m/tau) Phi(-m u/(s tau)) + m Phi(m/tau) + 2 m T(m/tau, u/s)
            + 2 u phi(0) Phi(m/s)

    (``T`` Owen's function; ``derivations/cf_ts1_inner_expectation.py``). Returns
    ``R`` and its partial derivatives ``(dR/dm, dR/du, dR/ds)``::

        dR/dm = Phi(m/tau) + 2 T(m/tau, u/s)          (= P(m + u|c| + s Z > 0))
        dR/du = 2 phi(0) Phi(m/s) + (2u/tau) phi(m/tau) Phi(-m u/(s tau))
        dR/ds = (2s/tau) phi(m/tau) Phi(-m u/(s tau))

    ``R`` is positively homogeneous of degree 1 in ``(m, u, s)``.
    """
    m = np.asarray(m, dtype=float)
    u = np.asarray(u, dtype=float)
    s = _floor(np.asarray(s, dtype=float), m, u)
    tau = np.hypot(u, s)
    h = m / tau
    lam = u / s
    density = _phi(h) * ndtr(-h * lam)
    tee = owens_t(h, lam)
    value = 2.0 * tau * density + m * ndtr(h) + 2.0 * m * tee + 2.0 * u * PHI0 * ndtr(m / s)
    d_m = ndtr(h) + 2.0 * tee
    d_u = 2.0 * PHI0 * ndtr(m / s) + 2.0 * (u / tau) * density
    d_s = 2.0 * (s / tau) * density
    return value, d_m, d_u, d_s


def _split(data, v):
    v = np.asarray(v, dtype=float)
    return v[..., :data.d_p], v[..., data.d_p:]


def kind_terms(data, v):
    """``g_k(v) = E[y ReLU(x^T v) | kind k]`` for k = 0, 1, 2 and their gradients.

    Parameters
    ----------
    data : TwoStageData
    v : array_like, shape (..., d)

    Returns
    -------
    values : ndarray, shape (3, ...)
    grads : ndarray, shape (3, ..., d)
        ``dg_k/dv = E[y 1{x^T v > 0} x | kind k]``.
    """
    a, b = _split(data, v)
    wp, wq = data.direction_p, data.direction_q
    shift_p = data.gamma_p + MEAN_ABS
    alpha = a @ wp
    lin_p = 0.5 * shift_p * alpha
    grad_p = np.broadcast_to(0.5 * shift_p * wp, a.shape)
    zeros_a, zeros_b = np.zeros_like(a), np.zeros_like(b)
    if data.q_kind == "margin":
        shift_q = data.gamma_q + MEAN_ABS
        lin_q = 0.5 * shift_q * (b @ wq)
        grad_q = np.broadcast_to(0.5 * shift_q * wq, b.shape)
        values = np.stack([lin_p, lin_q, lin_p + lin_q])
        grads = np.stack([np.concatenate([grad_p, zeros_b], -1),
                          np.concatenate([zeros_a, grad_q], -1),
                          np.concatenate([grad_p, grad_q], -1)])
        return values, grads
    g1, g1_a, g1_b = _cluster_q_only(data, a, b)
    g2, g2_a, g2_b = _cluster_both(data, a, b, alpha)
    values = np.stack([lin_p, g1, g2])
    grads = np.stack([np.concatenate([grad_p, zeros_b], -1), np.concatenate([g1_a, g1_b], -1),
                      np.concatenate([g2_a, g2_b], -1)])
    return values, grads


def _cluster_q_only(data, a, b):
    """Q-only kind, cluster Q: ``x^T v ~ N(0, |a|^2 + |b|^2)`` for ``y = +1``,
    ``N(s zeta beta, |a|^2 + |b|^2)`` for ``y = -1`` (``beta = <w_Q, b>``)."""
    beta = b @ data.direction_q
    sig = np.sqrt(np.sum(a * a, -1) + np.sum(b * b, -1))
    value, _, ds0 = relu_gauss(np.zeros_like(sig), sig)
    value, d_sig = 0.5 * value, 0.5 * ds0
    d_beta = np.zeros_like(sig)
    for s in (-1.0, 1.0):
        r, dm, ds = relu_gauss(s * data.zeta * beta, sig)
        value = value - 0.25 * r
        d_sig = d_sig - 0.25 * ds
        d_beta = d_beta - 0.25 * s * data.zeta * dm
    inv = 1.0 / _floor(sig)
    grad_a = (d_sig * inv)[..., None] * a
    grad_b = (d_sig * inv)[..., None] * b + d_beta[..., None] * data.direction_q
    return value, grad_a, grad_b


def _cluster_both(data, a, b, alpha):
    """Both kind, cluster Q: ``x^T v = y alpha (gamma_P + |c|) + N(0, sigma^2)`` plus the
    cluster offset for ``y = -1``; ``sigma^2 = |a|^2 - alpha^2 + |b|^2``."""
    wp, wq = data.direction_p, data.direction_q
    beta = b @ wq
    a_perp = a - alpha[..., None] * wp
    sig = np.sqrt(np.maximum(np.sum(a_perp * a_perp, -1) + np.sum(b * b, -1), 0.0))
    g = data.gamma_p
    r, dm, du, ds = relu_skew(alpha * g, alpha, sig)
    value, d_alpha, d_sig = 0.5 * r, 0.5 * (g * dm + du), 0.5 * ds
    d_beta = np.zeros_like(sig)
    for s in (-1.0, 1.0):
        r, dm, du, ds = relu_skew(-alpha * g + s * data.zeta * beta, -alpha, sig)
        value = value - 0.25 * r
        d_alpha = d_alpha - 0.25 * (-g * dm - du)
        d_sig = d_sig - 0.25 * ds
        d_beta = d_beta - 0.25 * s * data.zeta * dm
    inv = 1.0 / _floor(sig)
    grad_a = d_alpha[..., None] * wp + (d_sig * inv)[..., None] * a_perp
    grad_b = (d_sig * inv)[..., None] * b + d_beta[..., None] * wq
    return value, grad_a, grad_b


def inner_expectation(data, v):
    """``g(v) = E_x[y ReLU(x^T v)]`` over the example law, shape ``v.shape[:-1]``."""
    values, _ = kind_terms(data, v)
    return np.tensordot(data.kind_probabilities, values, axes=1)


def inner_gradient(data, v):
    """``dg/dv = E_x[y 1{x^T v > 0} x]``, shape ``v.shape``."""
    _, grads = kind_terms(data, v)
    return np.tensordot(data.kind_probabilities, grads, axes=1)


__all__ = ["MEAN_ABS", "inner_expectation", "inner_gradient", "kind_terms", "mean_vector",
           "relu_gauss", "relu_skew"]
