"""Inputs of the Scan and Snap checks of ``odeflow verify`` (``checks_scan_snap``).

- :func:`integrate_margin`: the numeric side of CF1-CF3, Eqn 44 and
  ``Gamma = int gamma`` (Eqn 9) integrated with :func:`scipy.integrate.solve_ivp`
  independently of :mod:`odeflow.fields`;
- :func:`random_data_model`: the seeded data model of CF1, CF3 and CF4 with
  non-uniform weights, shared tokens and two query tokens;
- :func:`snap_data_model`: the data model of the CF6 run whose ``a`` comes
  from :func:`odeflow.fields.snap.snap_parameters`.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import expit

from odeflow.analysis.verification import DEFAULT_ATOL, DEFAULT_METHOD, DEFAULT_RTOL
from odeflow.data import DataModel, SequenceClass
from odeflow.errors import SolveError
from odeflow.solver import IMPLICIT
from odeflow.solver import options as solve_options

__all__ = ["integrate_margin", "random_data_model", "snap_data_model"]


def integrate_margin(M, eta_y, pi, t_eval, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL,
                     method=DEFAULT_METHOD) -> dict:
    """Integrate Eqn 44 and ``Gamma`` with solve_ivp, independently of :mod:`odeflow.fields`.

    State ``(h, Gamma)``: ``dh/dt = eta_Y pi M / (exp(h) + M - 1)`` (Eqn 44),
    ``dGamma/dt = gamma = h (M - 1) / (exp(h) + M - 1)`` (Eqn 9), from zero.
    Both rates are written with ``s = (M-1)/(exp(h)+M-1) = expit(ln(M-1) - h)``
    so nothing overflows. An event locates the crossing ``exp(h) = M - 1``
    (Lemma 9), which is ``t = 0`` for ``M = 2``.

    Parameters
    ----------
    M : float
        Vocabulary size, ``>= 2``.
    eta_y, pi : float
        Decoder learning rate and class weight.
    t_eval : ndarray
        Increasing output times ``> 0``.
    rtol, atol : float
        Integrator tolerances.
    method : str
        solve_ivp method; implicit methods get the analytic Jacobian.

    Returns
    -------
    dict
        ``h``, ``Gamma`` (at ``t_eval``), ``t0`` (crossing time, ``nan`` when
        ``M = 2``) and ``stats`` (``method, nfev, njev, nlu, wall_time``).
    """
    rate = eta_y * pi * M / (M - 1.0)
    log_m_minus_1 = math.log(M - 1.0)
    calls = [0]
    budget = solve_options.MAX_NFEV  # the budget of odeflow.solve, read at call time

    def rhs(t, y):
        calls[0] += 1
        if calls[0] > budget:
            raise SolveError(f"Eqn 44 (M={M:g}) with {method}: stopped at t = {t:.6g} after "
                             f"{budget} right-hand-side evaluations (tolerances too tight?)",
                             {"method": method, "status": -1})
        s = expit(log_m_minus_1 - y[0])
        return np.array([rate * s, s * y[0]])

    def jacobian(t, y):
        s = expit(log_m_minus_1 - y[0])
        ds = -s * expit(y[0] - log_m_minus_1)
        return np.array([[rate * ds, 0.0], [ds * y[0] + s, 0.0]])

    def crossing(t, y):
        return y[0] - log_m_minus_1

    crossing.direction = 1.0
    options = {"jac": jacobian} if method in IMPLICIT else {}
    events = [crossing] if M > 2 else None
    start = time.perf_counter()
    sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), [0.0, 0.0], method=method, t_eval=t_eval,
                    rtol=rtol, atol=atol, events=events, **options)
    stats = {"method": method, "nfev": int(sol.nfev), "njev": int(sol.njev),
             "nlu": int(sol.nlu), "wall_time": time.perf_counter() - start}
    if not sol.success:
        raise SolveError(f"Eqn 44 (M={M:g}) with {method}: {sol.message}", stats)
    t0 = float(sol.t_events[0][0]) if events and sol.t_events[0].size else float("nan")
    return {"h": sol.y[0], "Gamma": sol.y[1], "t0": t0, "stats": stats}


def random_data_model(seed: int = 0) -> tuple[DataModel, np.ndarray]:
    """A seeded random data model and initial logits for CF4.

    ``M = 40``; four classes (next tokens 30-33) on two query tokens (36 for
    classes 30, 31 and 37 for 32, 33), non-uniform class weights. Tokens 0
    and 1 are common to every class, token 2 to classes 30 and 32 (different
    queries), token 3 to 31 and 33; each class has six distinct tokens
    (``4 + 6k .. 9 + 6k``). Probabilities are uniform on ``[0.2, 1]`` before
    normalisation; ``Z(0)`` is normal with standard deviation 0.5, so
    ``f^(0)`` is not ``c / ||c||``.

    Parameters
    ----------
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    data : DataModel
    z0 : ndarray, shape (2, 40)
        Initial logits of query tokens 36 and 37.
    """
    rng = np.random.default_rng(seed)
    shared = {30: [0, 1, 2], 31: [0, 1, 3], 32: [0, 1, 2], 33: [0, 1, 3]}
    classes = []
    for k, n in enumerate(range(30, 34)):
        tokens = shared[n] + list(range(4 + 6 * k, 10 + 6 * k))
        weights = rng.uniform(0.2, 1.0, len(tokens))
        classes.append(SequenceClass(n, 36 + k // 2, dict(zip(tokens, weights, strict=True)),
                                     normalize=True))
    class_weights = rng.uniform(0.5, 1.5, 4)
    data = DataModel(40, classes, weights=class_weights / class_weights.sum(), normalize=True)
    z0 = rng.normal(0.0, 0.5, (2, 40))
    return data, z0


def snap_data_model() -> DataModel:
    """The data model of the CF6 run whose ``a`` comes from
    :func:`~odeflow.fields.snap.snap_parameters`.

    ``M = 50``; three classes (next tokens 40-42) with query token 49; token 0
    is common to all with ``c_{0|n} = 0.3``; each class has five distinct
    tokens with weights ``linspace(0.5, 1.5, 5)`` sharing the remaining 0.7.
    """
    ramp = np.linspace(0.5, 1.5, 5)
    ramp = 0.7 * ramp / ramp.sum()
    classes = []
    for k in range(3):
        probs = {0: 0.3} | {1 + 5 * k + j: float(p) for j, p in enumerate(ramp)}
        classes.append(SequenceClass(40 + k, 49, probs, normalize=True))
    return DataModel(50, classes)
