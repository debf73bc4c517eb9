"""Closed forms of the attention side: CF4-CF6 (:mod:`odeflow.analysis.closed_forms`).

The relative gain of two distinct tokens (Theorem 3, Eqn 11), the bounds on
the dominant token's growth (Eqn 12) and the common-token logit and ``B`` of
the Sec. 6 system (Theorem 4, Eqns 13-14, 124, 129) of Tian, Wang, Chen and
Du, "Scan and Snap" (NeurIPS 2023, arXiv:2305.16380).
"""

from __future__ import annotations

import numpy as np

from odeflow.analysis.closed_forms_args import (
    BIG,
    broadcast,
    finite,
    guarded,
    margin_args,
    nonnegative,
    out,
    positive,
    require,
    unit_feature,
)
from odeflow.analysis.closed_forms_margin import gamma_integral_of_margin, margin_values

__all__ = ["dominant_bounds", "relative_gain", "snap_B", "snap_common_logit"]


# ---------------------------------------------------------------------------
# CF4, CF5
# ---------------------------------------------------------------------------
@guarded
def relative_gain(chi_l, f0_l, f0_lprime):
    """Relative gain ``r_{l/l'|n}(t) = (fhat_l(0)^2 / fhat_l'(0)^2 - 1) chi_l(t)`` (Eqn 11).

    Theorem 3: for two distinct tokens ``l, l'`` of class ``n``,
    ``fhat_l(t)^2/fhat_l'(t)^2 - fhat_l(0)^2/fhat_l'(0)^2`` equals this
    expression, with the growth factor
    ``chi_l(t) = exp(2 (z_l(t) - z_l(0))) - 1``.

    Parameters
    ----------
    chi_l : array_like
        Growth factor of token ``l``, finite and ``> -1``.
    f0_l, f0_lprime : array_like
        Initial features ``fhat_l(0)`` and ``fhat_l'(0)`` (not squared),
        ``0 < f <= 1``.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    chi_l = finite("chi_l", chi_l)
    require("chi_l", chi_l, chi_l > -1, "> -1")
    f0_l = unit_feature("f0_l", f0_l)
    f0_lprime = unit_feature("f0_lprime", f0_lprime)
    chi_l, f0_l, f0_lprime = broadcast(chi_l=chi_l, f0_l=f0_l, f0_lprime=f0_lprime)
    # (f^2/g^2 - 1) = ((f - g)/g) ((f + g)/g): no cancellation, no underflow of g^2
    with np.errstate(over="ignore", invalid="ignore"):
        value = ((f0_l - f0_lprime) / f0_lprime) * ((f0_l + f0_lprime) / f0_lprime) * chi_l
    return out(value, "chi_l", "r", args={"chi_l": chi_l, "f0_l": f0_l,
                                           "f0_lprime": f0_lprime})


@guarded
def dominant_bounds(B, f0_l0, log=False):
    """Bounds ``exp(2 fhat_l0(0)^2 B) <= 1 + chi_l0 <= exp(2 B)`` (Eqn 12).

    Valid for the dominant distinct token ``l0`` of a class when the common
    tokens' logits do not grow, ``B = B_n(t) >= 0`` being the integrated rate
    of Eqn 98.

    Parameters
    ----------
    B : array_like
        ``B_n(t)``, finite and ``>= 0``.
    f0_l0 : array_like
        ``fhat_l0(0)`` (not squared), ``0 < f <= 1``.
    log : bool, optional
        Return the bounds on ``ln(1 + chi_l0)`` instead (no overflow).

    Returns
    -------
    (lower, upper) : tuple
        Bounds on ``1 + chi_l0`` (or on its logarithm if ``log``).
    """
    B = nonnegative("B", B)
    f0_l0 = unit_feature("f0_l0", f0_l0)
    B, f0_l0 = broadcast(B=B, f0_l0=f0_l0)
    with np.errstate(over="ignore"):
        lo_log = 2.0 * f0_l0 * f0_l0 * B
        hi_log = 2.0 * B
    if log:
        return out(lo_log, "B", "2 B", args={"B": B}), out(hi_log, "B", "2 B", args={"B": B})
    hint = f"exp(2 B) needs B <= {np.log(BIG) / 2:.6g}; pass log=True for larger B"
    with np.errstate(over="ignore"):
        return (out(np.exp(lo_log), "B", "exp(2 f^2 B)", hint, {"B": B, "f0_l0": f0_l0}),
                out(np.exp(hi_log), "B", "exp(2 B)", hint, {"B": B}))


# ---------------------------------------------------------------------------
# CF6
# ---------------------------------------------------------------------------
def _snap_log1pq(t, M, eta_y, eta_z, pi, a, zc0):
    """ln(1 + q), q = 2 a eta_z exp(2 zc0) Gamma(t), and the broadcast zc0."""
    t, M, eta_y, pi = margin_args(t, M, eta_y, pi)
    eta_z = positive("eta_z", eta_z)
    a = nonnegative("a", a)
    zc0 = finite("zc0", zc0)
    t, M, eta_y, pi, eta_z, a, zc0 = broadcast(t=t, M=M, eta_y=eta_y, pi=pi, eta_z=eta_z,
                                                a=a, zc0=zc0)
    h = margin_values(t, M, eta_y, pi)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        Gamma = gamma_integral_of_margin(h, M, eta_y, pi)
        q_direct = 2.0 * a * eta_z * Gamma * np.exp(2.0 * zc0)
        # every factor in log space, so that no product overflows before the log
        log_Gamma = (np.log(0.5 * (M - 1.0) / M) + 2.0 * np.log(h) - np.log(eta_y)
                     - np.log(pi))
        log_q = np.log(2.0) + np.log(a) + np.log(eta_z) + log_Gamma + 2.0 * zc0
        representable = (q_direct > 1e-290) | (q_direct == 0.0)
        direct = np.isfinite(q_direct) & (np.abs(zc0) < 300.0) & representable
        log1p_direct = np.log1p(np.where(direct, q_direct, 0.0))
        L = np.where(direct, log1p_direct, np.logaddexp(0.0, log_q))
        L = np.where(a == 0.0, 0.0, L)  # q = 0 exactly, whatever Gamma is
    return L, zc0, pi


@guarded
def snap_common_logit(t, M, eta_y, eta_z, pi, a, zc0):
    """Common-token logit ``z_c(t)`` in the setting of Theorem 4 (Eqns 13, 124).

    Solves ``dz_c/dt = -a eta_z gamma(t) exp(2 z_c)``:
    ``z_c(t) = -1/2 ln(exp(-2 z_c(0)) + 2 a eta_z Gamma(t))``, with
    ``Gamma`` from Eqn 128 (:func:`gamma_integral`).  Evaluated as
    ``z_c(0) - 1/2 ln(1 + 2 a eta_z exp(2 z_c(0)) Gamma)`` with
    ``log1p`` / ``logaddexp``.

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.
    eta_z : array_like
        Attention learning rate, finite and ``> 0``.
    a : array_like
        ``a = beta (K - 1) c_{c|n}^2 / rho_0^2``, finite and ``>= 0``.
    zc0 : array_like
        Initial common-token logit ``z_c(0)``, finite.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    L, zc0, _ = _snap_log1pq(t, M, eta_y, eta_z, pi, a, zc0)
    return out(zc0 - 0.5 * L, "t", "z_c(t)")


@guarded
def snap_B(t, M, eta_y, eta_z, pi, a, zc0):
    """``B_n(t) = (pi/2) ln(1 + 2 a eta_z exp(2 z_c(0)) Gamma(t))`` (Thm 4, Eqns 14, 129).

    With Eqn 128 this is
    ``(pi/2) ln(1 + a exp(2 z_c(0)) (M - 1) eta_z h(t)^2 / (M eta_y pi))``:
    ``B`` grows like ``ln(1 + C eta_z eta_y t^2)`` while ``t << t_0``
    (scanning) and like ``pi ln ln t`` once ``t >> t_0`` (snapping).

    Parameters
    ----------
    t, M, eta_y, eta_z, pi, a, zc0 : array_like
        As in :func:`snap_common_logit`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    L, _, pi = _snap_log1pq(t, M, eta_y, eta_z, pi, a, zc0)
    return out(0.5 * pi * L, "t", "B(t)")
