"""Closed forms of the decoder side of Level R: CF1-CF3 (:mod:`odeflow.analysis.closed_forms`).

The logit margin ``h(t)`` of Eqn 44 (Lemma 6, Eqn 45), the speed-control
coefficient ``gamma(t)`` (Eqn 9, Theorem 1) with its early and late forms and
crossover ``t_0`` (Lemma 9), and ``Gamma(t) = int_0^t gamma`` (Eqn 128), of
Tian, Wang, Chen and Du, "Scan and Snap" (NeurIPS 2023, arXiv:2305.16380).
"""

from __future__ import annotations

import numpy as np
from scipy.special import wrightomega

from odeflow.analysis.closed_forms_args import (
    broadcast,
    guarded,
    margin_args,
    out,
    positive,
    vocab,
    weight,
)
from odeflow.errors import ValidationError

__all__ = ["decoder_margin", "gamma_integral", "gamma_integral_of_margin", "margin_values",
           "speed_control", "speed_control_early", "speed_control_late", "transition_time"]

# Below this value of u = eta_y * pi * t, h(t) = u (1 + O(u / M)) is used as
# the Newton starting point (an upper bound of h, F being convex).
_SERIES_SWITCH = 1e-4
_NEWTON_STEPS = 2


def margin_values(t, M, eta_y, pi) -> np.ndarray:
    """``h(t)`` of Eqn 45 for validated, broadcast float arrays (unchecked result).

    :func:`decoder_margin` with its arguments already checked by
    :func:`~odeflow.analysis.closed_forms_args.margin_args`: Wright omega
    starting point, then Newton steps on Eqn 45.
    """
    with np.errstate(over="ignore", divide="ignore"):
        u = eta_y * pi * t  # = eta_y pi M t / M, the slope-1 variable
        # an intermediate product that underflowed (eta_y pi < 1e-308): redo it in logs
        u = np.where((u == 0) & (t > 0), np.exp(np.log(eta_y) + np.log(pi) + np.log(t)), u)
        At = u * M  # eta_y pi M t
    if not np.all(np.isfinite(At)):
        bad = np.ravel(t[~np.isfinite(At)])[0].item()
        raise ValidationError(
            "t", f"t={bad!r} is too large: eta_y*pi*M*t overflows double precision"
        )
    Mm1 = M - 1.0
    log_Mm1 = np.log(Mm1)
    # x = (eta_y pi M t + 1)/(M - 1), W = LambertW(exp(x)/(M-1)) = omega(x - log(M-1)).
    x = u * (M / Mm1) + 1.0 / Mm1
    W = wrightomega(x - log_Mm1)
    with np.errstate(divide="ignore"):
        h_w = log_Mm1 + np.log(W)  # = x - W without the cancellation
    use_series = (u < _SERIES_SWITCH) | ~(W > 0) | ~np.isfinite(h_w)
    h = np.where(use_series, u, h_w)

    # Newton on F(h) = expm1(h) + (M-1) h - eta_y pi M t, F' = exp(h) + M - 1.
    # For h > 1 both are scaled by exp(-h) so that exp(h) never overflows.
    for _ in range(_NEWTON_STEPS):
        h_small = np.minimum(h, 1.0)
        h_large = np.maximum(h, 1.0)
        step_small = (np.expm1(h_small) + Mm1 * h_small - At) / (np.exp(h_small) + Mm1)
        e = np.exp(-h_large)
        step_large = (-np.expm1(-h_large) + (Mm1 * h_large - At) * e) / (1.0 + Mm1 * e)
        h = h - np.where(h > 1.0, step_large, step_small)
    return np.maximum(h, 0.0)


def _gamma_from_h(h: np.ndarray, M: np.ndarray) -> np.ndarray:
    e = np.exp(-h)
    return h * (M - 1.0) * e / (1.0 + (M - 1.0) * e)


# ---------------------------------------------------------------------------
# CF1
# ---------------------------------------------------------------------------
@guarded
def decoder_margin(t, M, eta_y, pi):
    """Decoder logit margin ``h(t)`` of the reduced flow (Lemma 6, Eqns 44-45).

    Solves ``dh/dt = eta_y pi M / (exp(h) + M - 1)``, ``h(0) = 0`` (Eqn 44),
    whose implicit solution is ``exp(h) - 1 + (M - 1) h = eta_y pi M t`` and
    explicit solution (Eqn 45), with ``x = (eta_y pi M t + 1) / (M - 1)``,
    ``h = x - W_0(exp(x) / (M - 1)) = log(M - 1) + log(omega(x - log(M - 1)))``
    (``omega`` = :func:`scipy.special.wrightomega`).  The Wright-omega value
    is polished by Newton steps on the implicit equation, which restores full
    relative accuracy for tiny ``t`` (where the log form cancels) and keeps
    ``exp(h)`` from overflowing for huge ``t``.

    Parameters
    ----------
    t : array_like
        Time, ``t >= 0``.
    M : array_like
        Vocabulary size, ``M >= 2`` (real values allowed).
    eta_y : array_like
        Decoder learning rate, finite and ``> 0``.
    pi : array_like
        Class weight ``pi_n``, ``0 < pi <= 1``.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        ``h(t)`` (broadcast shape of the arguments).

    Raises
    ------
    odeflow.ValidationError
        If an argument is out of range (the message names it and its value).

    Examples
    --------
    >>> float(decoder_margin(0.0, 10, 1.0, 0.5))
    0.0
    """
    t, M, eta_y, pi = margin_args(t, M, eta_y, pi)
    return out(margin_values(t, M, eta_y, pi))


# ---------------------------------------------------------------------------
# CF2
# ---------------------------------------------------------------------------
@guarded
def speed_control(t, M, eta_y, pi):
    """Speed-control coefficient ``gamma(t) = h (M - 1) / (exp(h) + M - 1)``.

    The coefficient of the back-propagated gradient (Eqn 9, Theorem 1) for
    uniform class weights, with ``h(t)`` from :func:`decoder_margin`.  Written
    as ``h (M - 1) exp(-h) / (1 + (M - 1) exp(-h))`` to avoid overflow.  Its
    two regimes are :func:`speed_control_early` and
    :func:`speed_control_late` (Lemma 9, Theorem 1(b)).

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        ``gamma(t)``.

    Raises
    ------
    odeflow.ValidationError
        If an argument is out of range.
    """
    t, M, eta_y, pi = margin_args(t, M, eta_y, pi)
    return out(_gamma_from_h(margin_values(t, M, eta_y, pi), M))


@guarded
def speed_control_early(t, M, eta_y, pi):
    """Early-time asymptote ``gamma ~ eta_y pi t (M - 1) / M`` (Lemma 9, Theorem 1(b)).

    Valid while ``h << ln M``, i.e. ``t << t_0`` (:func:`transition_time`).

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    t, M, eta_y, pi = margin_args(t, M, eta_y, pi)
    with np.errstate(over="ignore"):
        value = eta_y * pi * t * ((M - 1.0) / M)
    return out(value, "t", "gamma_early", args={"t": t, "eta_y": eta_y, "pi": pi})


@guarded
def speed_control_late(t, M, eta_y, pi):
    """Late-time asymptote ``gamma ~ (M - 1) ln(eta_y pi M t) / (eta_y pi M t)``.

    Lemma 9, Theorem 1(b): valid once ``h >> ln M``, i.e. ``t >> t_0``
    (:func:`transition_time`); the ratio to :func:`speed_control` tends to 1.
    Evaluated as ``((M - 1)/M) ln(eta_y pi M t) / (eta_y pi t)`` with the
    logarithm taken as a sum of logarithms, so it does not overflow.

    Parameters
    ----------
    t : array_like
        Time, ``t > 0`` (the asymptote is undefined at ``t = 0``).
    M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Negative where ``eta_y pi M t < 1``, far outside its range of validity.

    Raises
    ------
    odeflow.ValidationError
        If an argument is out of range or ``t == 0``.
    """
    t = positive("t", t)
    t, M, eta_y, pi = margin_args(t, M, eta_y, pi)
    log_At = np.log(eta_y) + np.log(pi) + np.log(M) + np.log(t)
    # ln(A t) / (eta_y pi t) with the denominator as exp(-sum of logs): no underflow to 0
    with np.errstate(over="ignore"):
        value = ((M - 1.0) / M) * log_At * np.exp(-(np.log(eta_y) + np.log(pi) + np.log(t)))
    return out(value, "t", "gamma_late", hint="the late-time asymptote is for t >> t_0",
                args={"t": t, "M": M, "eta_y": eta_y, "pi": pi})


@guarded
def transition_time(M, eta_y, pi):
    """Crossover time ``t_0`` at which ``exp(h) = M - 1`` (Lemma 9, Theorem 1(b)).

    From the implicit form of Eqn 45:
    ``t_0 = (M - 2 + (M - 1) ln(M - 1)) / (eta_y pi M)``, i.e.
    ``O(K ln M / eta_y)`` for ``pi = 1/K``.  ``t_0 = 0`` for ``M = 2``.

    Parameters
    ----------
    M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    M = vocab(M)
    eta_y = positive("eta_y", eta_y)
    pi = weight(pi)
    M, eta_y, pi = broadcast(M=M, eta_y=eta_y, pi=pi)
    # (M - 2 + (M - 1) ln(M - 1)) / M first (always finite), then the rates one at a time
    per_token = (M - 2.0) / M + ((M - 1.0) / M) * np.log1p(M - 2.0)
    with np.errstate(over="ignore"):
        value = per_token / eta_y / pi
    return out(value, "eta_y", "t_0", hint="eta_y * pi is too small",
                args={"M": M, "eta_y": eta_y, "pi": pi})


# ---------------------------------------------------------------------------
# CF3
# ---------------------------------------------------------------------------
@guarded
def gamma_integral(t, M, eta_y, pi):
    """``Gamma(t) = int_0^t gamma(s) ds = (M - 1) h(t)^2 / (2 M eta_y pi)`` (Eqn 128).

    Follows from ``gamma = h (M - 1) h' / (eta_y pi M)`` (Eqn 44).

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    t, M, eta_y, pi = margin_args(t, M, eta_y, pi)
    h = margin_values(t, M, eta_y, pi)
    with np.errstate(over="ignore"):
        value = gamma_integral_of_margin(h, M, eta_y, pi)
    return out(value, "t", "Gamma(t)", args={"t": t, "M": M, "eta_y": eta_y, "pi": pi})


def gamma_integral_of_margin(h, M, eta_y, pi):
    """``Gamma = (M - 1) h^2 / (2 M eta_y pi)`` (Eqn 128) from the margin ``h``, written as
    ``(h / eta_y)(h / pi)`` so that no 0/0 arises when ``h^2`` underflows."""
    return (0.5 * (M - 1.0) / M) * (h / eta_y) * (h / pi)


