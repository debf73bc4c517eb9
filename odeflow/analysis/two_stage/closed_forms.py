"""Closed forms of the two-stage family (CF-TS2) and the stage times measured on a flow.

Numeric twins of ``derivations/cf_ts2_early_growth.py`` (odeflow's own model of
Gong et al. 2025, arXiv 2502.20681; nothing here is the paper's). Margin Q,
start ``W = sigma0 I``: the flow keeps ``r = W^T mu / 2`` along ``w`` in each
block, so it is the 2-D flow of ``alpha_P = <w_P, r_P>``, ``alpha_Q``:
``alpha' = -(M^2/4) dL/dalpha`` with ``M = (1 - rho)(gamma + sqrt(2/pi))``, and
the top singular value of a block is ``s = sigma0 + (2 alpha - sigma0 M)/M``
(``W = sigma0 I + k w w^T``, ``alpha = M (sigma0 + k)/2``).

* Early growth (``W -> 0``): ``s(t) = sigma0 + |l'(0)| M^2 t / 2`` in each block
  (:func:`early_singular_values`): linear, not exponential, because ``g`` is
  linear in ``W`` and ``l'(0) != 0``.
* Stage 1 (logistic loss; the P-carrying examples with ``|c|`` at its mean
  ``kappa_P = gamma_P + sqrt(2/pi)``; ``alpha_Q`` and the Q-only examples' pull
  neglected): ``u = kappa_P alpha_P`` solves ``u' = K_P sigmoid(-u)``,
  ``K_P = kappa_P M_P^3 / 4``, so ``u + e^u = u_0 + e^{u_0} + K_P t`` and
  ``u(t) = tau - W(e^tau)`` (Lambert ``W``; :func:`stage_one_margin`).
* Stage 2: ``alpha_Q' = (M_Q^2 kappa_Q / 4)(rho/2 + (1 - 2 rho) sigmoid(-u))``
  at small ``alpha_Q`` (Q-only examples: ``E l'(alpha_P Z) = -1/2`` exactly), so
  ``alpha_Q(t) = alpha_Q(0) + (M_Q^2 kappa_Q / 4)(rho t / 2 + (1 - 2 rho)(u - u_0)/K_P)``
  (:func:`stage_two_alpha_q`).
* Stage 1 ends where the P-carrying examples' push meets the Q-only examples'
  pull: ``alpha_P*`` of :func:`alpha_p_plateau`, ``u* = kappa_P alpha_P*``.
* Stage times (:func:`stage_times`): ``t_P`` where the model's P loss
  ``log(1 + e^-u)`` has made 90% of its drop from ``u_0`` to ``u*``; ``t_Q`` the
  first time after ``t_P`` at which the model's Q-only loss
  ``E l(kappa_Q alpha_Q + alpha_P Z)`` is below its ``t = 0`` value. As
  ``sigma0 -> 0`` both have finite limits (the growth from ``W = 0`` is linear):
  ``sigma0`` enters through ``u_0`` and ``alpha_Q(0)`` only, shifting the times by
  ``O(sigma0)``.

Time is in units of the inverse learning rate (as the flow's).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_expit, roots_hermitenorm, roots_legendre, wrightomega

from odeflow.errors import ValidationError

#: ``E|c|`` of ``c ~ N(0, 1)``.
MEAN_ABS = math.sqrt(2.0 / math.pi)
#: Fraction of the P-only loss's drop that defines ``t_P``.
P_DROP_FRACTION = 0.9
#: Gauss-Hermite nodes of the model's Q-only loss.
GAUSS_NODES = 64


def block_constants(data) -> dict:
    """``kappa = gamma + sqrt(2/pi)`` and ``M = (1 - rho) kappa`` of each block."""
    kp, kq = data.gamma_p + MEAN_ABS, data.gamma_q + MEAN_ABS
    return {"kappa_p": kp, "kappa_q": kq, "M_p": (1 - data.rho) * kp,
            "M_q": (1 - data.rho) * kq}


def _slope(data) -> float:
    return 0.5 if data.loss == "logistic" else 1.0


def early_singular_values(data, t):
    """Top singular values ``(s_P(t), s_Q(t))`` to first order from ``W = sigma0 I``:
    ``s = sigma0 + |l'(0)| M^2 t / 2`` (``|l'(0)|`` = 1/2 logistic, 1 squared)."""
    t = np.asarray(t, dtype=float)
    k = block_constants(data)
    a = _slope(data)
    return (data.sigma0 + a * k["M_p"] ** 2 * t / 2, data.sigma0 + a * k["M_q"] ** 2 * t / 2)


def _logistic_only(data):
    if data.loss != "logistic" or data.q_kind != "margin":
        raise ValidationError("data", "the stage-time closed forms are derived for the logistic "
                              "loss and the margin Q")


def stage_one_rate(data) -> tuple[float, float]:
    """``(u_0, K_P)``: ``u_0 = kappa_P alpha_P(0) = sigma0 kappa_P M_P / 2``,
    ``K_P = kappa_P M_P^3 / 4``."""
    k = block_constants(data)
    return data.sigma0 * k["kappa_p"] * k["M_p"] / 2, k["kappa_p"] * k["M_p"] ** 3 / 4


def stage_one_margin(data, t):
    """``u(t) = kappa_P alpha_P(t) = tau - W(e^tau)``, ``tau = u_0 + e^{u_0} + K_P t``
    (``W(e^tau)`` is Wright's omega function of ``tau``)."""
    u0, K = stage_one_rate(data)
    tau = u0 + math.exp(u0) + K * np.asarray(t, dtype=float)
    return tau - np.real(wrightomega(tau))


def stage_two_alpha_q(data, t):
    """``alpha_Q(t) = alpha_Q(0) + (M_Q^2 kappa_Q/4)(rho t/2 + (1 - 2 rho)(u(t) - u_0)/K_P)``."""
    k = block_constants(data)
    u0, K = stage_one_rate(data)
    t = np.asarray(t, dtype=float)
    growth = data.rho * t / 2 + (1 - 2 * data.rho) * (stage_one_margin(data, t) - u0) / K
    return data.sigma0 * k["M_q"] / 2 + k["M_q"] ** 2 * k["kappa_q"] / 4 * growth


def _gauss():
    z, w = roots_hermitenorm(GAUSS_NODES)
    return z, w / w.sum()


def _q_only_loss(data, a_q, a_p):
    """``E_Z l(kappa_Q alpha_Q + alpha_P Z)`` (the Q-only queries' loss, ``|c|`` at its mean)."""
    k = block_constants(data)
    z, w = _gauss()
    m = k["kappa_q"] * np.asarray(a_q, float)[..., None] + np.asarray(a_p, float)[..., None] * z
    return -log_expit(m) @ w


def alpha_p_plateau(data) -> float:
    """``alpha_P*``: stage 1's end, where the P-carrying examples' push
    ``(1 - rho) kappa_P sigmoid(-kappa_P alpha)`` equals the Q-only examples' pull
    ``rho alpha E[l''(alpha Z)]`` (Stein's lemma on ``E[l'(alpha Z) Z]``)."""
    k = block_constants(data)
    z, w = _gauss()

    def balance(a):
        curvature = float(w @ (expit(a * z) * expit(-a * z)))
        return (1 - data.rho) * k["kappa_p"] * expit(-k["kappa_p"] * a) - data.rho * a * curvature

    if data.rho == 0.0:
        return math.inf
    hi = 1.0
    while balance(hi) > 0:
        hi *= 2.0
    return brentq(balance, 0.0, hi, xtol=1e-12)


def _stage_two_rate(data, a_q, u_star):
    """``alpha_Q'`` after stage 1: ``(M_Q^2 kappa_Q / 4)(rho E sigmoid(-(kappa_Q alpha_Q +
    alpha_P* Z)) + (1 - 2 rho) sigmoid(-(u* + kappa_Q alpha_Q)))``."""
    k = block_constants(data)
    z, w = _gauss()
    a_p = u_star / k["kappa_p"]
    a_q = np.asarray(a_q, float)
    q_only = expit(-(k["kappa_q"] * a_q[..., None] + a_p * z)) @ w
    both = expit(-(u_star + k["kappa_q"] * a_q))
    return k["M_q"] ** 2 * k["kappa_q"] / 4 * (data.rho * q_only + (1 - 2 * data.rho) * both)


def stage_times(data) -> tuple[float, float]:
    """Predicted ``(t_P, t_Q)`` from the closed forms (logistic loss, margin Q).

    Stage 1 ends at ``u* = kappa_P alpha_P*`` (:func:`alpha_p_plateau`). ``t_P``: the
    stage-1 margin's P loss ``l(u) = log(1 + e^-u)`` has made ``P_DROP_FRACTION`` of its
    drop from ``l(u_0)`` to ``l(u*)`` at ``u_90``, so ``t_P = (u_90 + e^{u_90} - u_0 -
    e^{u_0}) / K_P``. ``u*`` is reached at
    ``t* = (u* + e^{u*} - u_0 - e^{u_0}) / K_P``; until then ``alpha_Q`` follows
    :func:`stage_two_alpha_q`, after it ``alpha_Q' `` of :func:`_stage_two_rate` at
    ``alpha_P = alpha_P*``. ``t_Q``: the first time after ``t_P`` at which the Q-only loss
    ``E l(kappa_Q alpha_Q + alpha_P Z)`` is below its ``t = 0`` value; after ``t*`` it is
    ``t* + int dalpha / alpha_Q'`` up to the threshold ``alpha_Q``.
    """
    _logistic_only(data)
    k = block_constants(data)
    u0, K = stage_one_rate(data)
    a_star = alpha_p_plateau(data)
    u_star = k["kappa_p"] * a_star
    loss_0, loss_end = -float(log_expit(u0)), -float(log_expit(u_star))
    target = loss_0 - P_DROP_FRACTION * (loss_0 - loss_end)
    u90 = -math.log(math.expm1(target))
    t_p = (u90 + math.exp(u90) - u0 - math.exp(u0)) / K
    start = float(_q_only_loss(data, data.sigma0 * k["M_q"] / 2, u0 / k["kappa_p"]))
    t_star = (u_star + math.exp(min(u_star, 700.0)) - u0 - math.exp(u0)) / K
    if not math.isfinite(t_star):  # rho = 0: no Q-only examples, stage 1 never ends
        t_star = t_p * 1e9

    def excess_stage_one(t):
        u = stage_one_margin(data, t)
        return float(_q_only_loss(data, stage_two_alpha_q(data, t), u / k["kappa_p"])) - start

    grid = np.geomspace(t_p, max(t_star, t_p * (1 + 1e-9)), 200)
    below = [i for i, t in enumerate(grid) if excess_stage_one(t) < 0]
    if below:
        i = below[0]
        return t_p, t_p if i == 0 else brentq(excess_stage_one, grid[i - 1], grid[i])
    if not math.isfinite(a_star):
        return t_p, math.inf
    a_hi = 1.0
    while _q_only_loss(data, a_hi, a_star) >= start:
        a_hi *= 2.0
    a_th = brentq(lambda a: float(_q_only_loss(data, a, a_star)) - start, 0.0, a_hi)
    a_from = float(stage_two_alpha_q(data, t_star))
    if a_th <= a_from:
        return t_p, t_star
    x, w = roots_legendre(64)
    nodes = a_from + (a_th - a_from) * (x + 1) / 2
    return t_p, t_star + (a_th - a_from) / 2 * float(w @ (1.0 / _stage_two_rate(data, nodes,
                                                                                 u_star)))


def measured_stage_times(traj, T=None) -> tuple[float, float]:
    """``(t_P, t_Q)`` measured on a trajectory over ``[0, T]`` (default its last time).

    ``t_P``: the first recorded time at which the P-only loss has made
    :data:`P_DROP_FRACTION` of its drop, ``L_P(0) - min_[0,T] L_P``; ``t_Q``: the first
    recorded time after ``t_P`` with the Q-only loss below its ``t = 0`` value (inf if
    none). Linear interpolation between recorded times.
    """
    t = np.asarray(traj.t, dtype=float)
    keep = t <= (t[-1] if T is None else T)
    t, lp, lq = t[keep], np.asarray(traj.loss_p_only)[keep], np.asarray(traj.loss_q_only)[keep]
    level = lp[0] - P_DROP_FRACTION * (lp[0] - lp.min())
    t_p = _first_below(t, lp, level, 0)
    i0 = int(np.searchsorted(t, t_p))
    t_q = _first_below(t, lq, lq[0], i0)
    return t_p, t_q


def _first_below(t, series, level, start):
    idx = np.nonzero(series[start:] < level)[0]
    if idx.size == 0:
        return math.inf
    i = start + int(idx[0])
    if i == 0 or series[i - 1] < level:
        return float(t[i])
    t0, t1, y0, y1 = t[i - 1], t[i], series[i - 1], series[i]
    return float(t0 + (t1 - t0) * (y0 - level) / (y0 - y1)) if y0 != y1 else float(t1)


__all__ = ["P_DROP_FRACTION", "block_constants", "early_singular_values",
           "measured_stage_times", "stage_one_margin", "stage_one_rate",
           "stage_times", "stage_two_alpha_q"]
