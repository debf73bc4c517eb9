"""Independent numeric sides of the induction-head checks of ``odeflow verify``.

Written from the model's formulas (``docs/induction.md``) without
:mod:`odeflow.fields`: window sums of the prediction and loss over every key
and query window (:func:`window_sum_prediction`, :func:`window_sum_loss`), the
stage-1 selector flow (:func:`integrate_selector`), the replicator ODE
(:func:`integrate_replicator`) and the 1-D stage-3 classifier ODE
(:func:`integrate_classifier`), each integrated with
:func:`scipy.integrate.solve_ivp`.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.integrate import solve_ivp

from odeflow.analysis.induction import closed_forms as cf
from odeflow.data.induction import markov
from odeflow.errors import SolveError

__all__ = ["integrate_classifier", "integrate_replicator", "integrate_selector",
           "subset_matches", "window_sum_loss", "window_sum_loss_of_kernel",
           "window_sum_prediction"]


def subset_matches(vocab_size: int, window: int, subsets) -> np.ndarray:
    """``K_S(z, z_q) = 1[z_S = z_{q,S}]`` over all windows of ``window`` tokens: ``(#S, W, W)``."""
    tokens = markov.window_tokens(vocab_size, window)
    out = []
    for subset in subsets:
        keys = tokens[:, [h - 1 for h in subset]]
        out.append(np.all(keys[:, None, :] == keys[None, :, :], axis=-1).astype(float))
    return np.array(out)


def window_sum_loss_of_kernel(laws: np.ndarray, kernel_matrix: np.ndarray, a) -> np.ndarray:
    """The nll loss ``-sum_{z_q, e} P(z_q, e) log y_e(z_q)`` of each kernel, by window sums.

    ``y_e(z_q) = sum_z P(z, e) e^{a K(z, z_q)} / sum_z mu(z) e^{a K(z, z_q)}``
    (the population flow, ``docs/induction.md``). Complex ``a`` or ``K`` give
    complex-step derivatives.

    Parameters
    ----------
    laws : ndarray, shape (N, W, d)
        ``P(z, e)`` of each kernel over the windows ``z``.
    kernel_matrix : ndarray, shape (..., W, W)
        ``K(z, z_q)``; leading axes (a batch of kernels matrices) come first
        in the result.
    a : float or complex

    Returns
    -------
    ndarray, shape (..., N)
    """
    weight = np.swapaxes(np.exp(a * kernel_matrix), -1, -2)[..., None, :, :]  # (..., 1, q, z)
    num = weight @ laws  # (..., N, q, e)
    den = weight @ laws.sum(axis=-1)[..., None]  # (..., N, q, 1)
    y = num / den
    safe = np.where(laws > 0, y, 1.0)
    return -np.sum(np.where(laws > 0, laws * np.log(safe), 0.0), axis=(-2, -1))


def window_sum_prediction(laws: np.ndarray, subset, a) -> np.ndarray:
    """``y_e(z_q) = sum_z P(z, e) e^{a K} / sum_z mu(z) e^{a K}``, ``K = 1[z_S = z_{q,S}]``.

    The stage-3 prediction summed over every key window (no mixture algebra).
    ``a`` may be complex (for complex-step derivatives).

    Parameters
    ----------
    laws : ndarray, shape (N, d**m, d)
        ``P(z, e)`` of each kernel (``data.window_joint(m)``, ``m >= max S``).
    subset : tuple of int
    a : float or complex

    Returns
    -------
    ndarray, shape (N, d**m, d)
        One row per query window ``z_q``.
    """
    matches = _matches_of(laws, subset)
    weight = np.swapaxes(np.exp(a * matches), -1, -2)
    return (weight @ laws) / (weight @ laws.sum(axis=-1)[..., None])


def window_sum_loss(laws: np.ndarray, subset, a) -> np.ndarray:
    """``-sum_{z_q} sum_e P(z_q, e) log y_e(z_q)`` of each kernel at ``p = delta_S``."""
    return window_sum_loss_of_kernel(laws, _matches_of(laws, subset), a)


def _matches_of(laws: np.ndarray, subset) -> np.ndarray:
    d = laws.shape[-1]
    window = int(round(np.log(laws.shape[-2]) / np.log(d)))
    return subset_matches(d, window, [subset])[0]


def integrate_selector(data, a: float, eta_c: float, c0, t_eval, rtol, atol, method):
    """Stage 1 of the exact-copier population flow: ``c' = -eta_c grad_c loss`` at fixed ``a``.

    Written from the model's formulas (window sums over every key and query
    window of every kernel, ``K = sum_S p_S 1[z_S = z_{q,S}]``), independently
    of :mod:`odeflow.fields`; the gradient is a complex-step derivative (exact
    to round-off). All orders in ``a`` are kept, so the run differs from the
    replicator (CF-IH1) by ``O(a)``.

    Returns
    -------
    p : ndarray, shape (len(t_eval), #S)
    u : ndarray
        ``U = sum c^2`` along the run (conserved).
    stats : dict
    """
    laws = data.window_joint(data.heads)
    matches = subset_matches(data.vocab_size, data.heads, data.subsets)
    step = 1e-30

    def rhs(t, c):
        shifted = c[None, :] + 1j * step * np.eye(c.size)  # one complex step per coefficient
        p = shifted**2 / np.sum(shifted**2, axis=1, keepdims=True)
        losses = window_sum_loss_of_kernel(laws, np.tensordot(p, matches, 1), a).mean(axis=-1)
        return -eta_c * losses.imag / step

    sol, stats = _solve(rhs, np.asarray(c0, float), t_eval, rtol, atol, method,
                        "stage-1 selector flow")
    c = sol.y.T
    u = np.sum(c**2, axis=1)
    return c**2 / u[:, None], u, stats


def integrate_replicator(p0, info, eta_c, u0, a_of_t, t_eval, rtol, atol, method):
    """Integrate ``p' = (4 eta_c a(t) / U_0) p (I - p.I)`` and ``int a`` with solve_ivp.

    Returns
    -------
    p : ndarray, shape (len(t_eval), #S)
    integral : ndarray
        ``int_0^t a``.
    stats : dict
    """
    info = np.asarray(info, float)

    def rhs(t, y):
        p = y[:-1]
        rate = 4.0 * eta_c * a_of_t(t) / u0
        return np.concatenate([rate * p * (info - p @ info), [a_of_t(t)]])

    sol, stats = _solve(rhs, np.concatenate([p0, [0.0]]), t_eval, rtol, atol, method,
                        "replicator ODE")
    return sol.y[:-1].T, sol.y[-1], stats


def integrate_classifier(data, subset, eta_a, a0, t_eval, rtol, atol, method="LSODA"):
    """Integrate the 1-D stage-3 flow ``a' = -eta_a loss'(a)`` (CF-IH2) with solve_ivp."""
    curve = cf.classifier_curve(data, subset)

    def rhs(t, y):
        return [-eta_a * float(curve(y[0])[1])]

    sol, stats = _solve(rhs, [a0], t_eval, rtol, atol, method, "stage-3 classifier ODE")
    return sol.y[0], stats


def _solve(rhs, y0, t_eval, rtol, atol, method, what: str):
    """``solve_ivp`` from ``t = 0`` to ``t_eval[-1]``; ``(solution, stats)``, or a
    :class:`~odeflow.errors.SolveError` naming ``what``."""
    start = time.perf_counter()
    sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), y0, method=method, t_eval=t_eval,
                    rtol=rtol, atol=atol)
    stats = {"method": method, "nfev": int(sol.nfev), "wall_time": time.perf_counter() - start}
    if not sol.success:
        raise SolveError(f"{what} with {method}: {sol.message}", stats)
    return sol, stats


