"""``odeflow verify`` checks of the two-stage family: CF-TS1, CF-TS2 (``docs/two_stage.md``).

odeflow's own model after Gong et al. 2025 (arXiv 2502.20681). Each check
compares a closed form of ``derivations/cf_ts1_inner_expectation.py`` or
``derivations/cf_ts2_early_growth.py`` with scipy on the ODE or integral it solves:

======  ==============================================================  ==================
check   numeric side                                                    closed form
======  ==============================================================  ==================
CF-TS1  ``scipy.integrate.quad`` of ``E[ReLU(m + u h + s Z)]`` over the  ``E[ReLU]`` of a
        half-normal ``h`` (its Gaussian part exact)                     skew normal (Owen's T)
CF-TS1  the same, of ``P(m + u|c| + s Z > 0)``                          ``dR/dm``
CF-TS2  ``solve_ivp`` of ``u' = K_P sigmoid(-u)``                       ``u = tau - W(e^tau)``
CF-TS2  ``solve_ivp`` of ``alpha_Q' = (M_Q^2 kappa_Q/4)(rho/2 +         ``alpha_Q(t)``
        (1 - 2 rho) sigmoid(-u))`` beside ``u``
======  ==============================================================  ==================

The CF-TS2 rows run on the presets' data models and three variations of the
margins and the mix, over ``t`` from ``1e-3`` to ``1e3`` (flow time).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from scipy.integrate import quad, solve_ivp
from scipy.special import expit, ndtr

from odeflow.analysis.check_registry import CheckFamily, CheckResult, relative_error
from odeflow.analysis.two_stage import closed_forms as cf
from odeflow.data.two_stage import TwoStageData
from odeflow.fields.two_stage.expectations import relu_gauss, relu_skew

#: ``(m, u, s)`` of the CF-TS1 rows: signs of the mean, skew both ways, narrow and wide.
SKEW_GRID = tuple(itertools.product((-2.0, -0.5, 0.0, 0.7, 2.5), (-1.5, 0.3, 2.0),
                                    (0.2, 1.0, 3.0)))
#: The data models of the CF-TS2 rows: ``ts-default`` and variations of it.
VARIATIONS = ({}, {"gamma_p": 5.0}, {"gamma_q": 0.25}, {"rho": 0.4})
#: Output times of the CF-TS2 rows (flow time).
TIMES = np.geomspace(1e-3, 1e3, 61)

TITLES = {"CF-TS1": ("E[ReLU] of a skew normal", "docs/derivations.md, CF-TS1"),
          "CF-TS2": ("stage-1 margin u(t), alpha_Q(t)", "docs/derivations.md, CF-TS2")}


def _half_normal_integral(f) -> float:
    """``int_0^inf f(h) 2 phi(h) dh`` by adaptive quadrature (relative error ~ 1e-12)."""
    density = math.sqrt(2.0 / math.pi)
    value, _ = quad(lambda h: f(h) * density * math.exp(-0.5 * h * h), 0.0, math.inf,
                    epsabs=0.0, epsrel=1e-12, limit=200)
    return value


def check_skew_normal(settings) -> list[CheckResult]:
    """CF-TS1: ``R(m, u, s)`` and ``dR/dm`` of :func:`relu_skew` against quadrature."""
    closed = np.array([relu_skew(m, u, s)[:2] for m, u, s in SKEW_GRID])
    numeric = np.array([(_half_normal_integral(lambda h, m=m, u=u, s=s:
                                               float(relu_gauss(m + u * h, s)[0])),
                         _half_normal_integral(lambda h, m=m, u=u, s=s:
                                               float(ndtr((m + u * h) / s))))
                        for m, u, s in SKEW_GRID])
    where = f"{len(SKEW_GRID)} points (m, u, s): m in [-2, 2.5], u in [-1.5, 2], s in [0.2, 3]"
    return [CheckResult("CF-TS1", "E[ReLU(m + u|c| + s Z)]", TITLES["CF-TS1"][1], where,
                        relative_error(numeric[:, 0], closed[:, 0], floor=1e-3),
                        settings.tolerance, floor="1e-3",
                        note="quad over the half-normal |c|, the Gaussian part exact"),
            CheckResult("CF-TS1", "P(m + u|c| + s Z > 0) = dR/dm", TITLES["CF-TS1"][1], where,
                        relative_error(numeric[:, 1], closed[:, 1], floor=1e-3),
                        settings.tolerance, floor="1e-3",
                        note="Phi(m/tau) + 2 T(m/tau, u/s) against quad")]


def _stage_odes(data, settings):
    """``(u, alpha_Q)`` at :data:`TIMES` from ``solve_ivp`` of the model's stage ODEs."""
    k = cf.block_constants(data)
    u0, K = cf.stage_one_rate(data)
    rate_q = k["M_q"] ** 2 * k["kappa_q"] / 4

    def rhs(t, y):
        return [K * expit(-y[0]), rate_q * (data.rho / 2 + (1 - 2 * data.rho) * expit(-y[0]))]

    sol = solve_ivp(rhs, (0.0, TIMES[-1]), [u0, data.sigma0 * k["M_q"] / 2], t_eval=TIMES,
                    method=settings.method, rtol=settings.rtol, atol=1e-14)
    if not sol.success:
        raise RuntimeError(f"stage ODEs: {sol.message}")
    return sol.y


def check_stage_forms(settings) -> list[CheckResult]:
    """CF-TS2: the stage-1 margin and stage-2 ``alpha_Q`` against their ODEs."""
    rows = []
    base = TwoStageData.preset("ts-default")
    for change in VARIATIONS:
        data = dataclasses.replace(base, **change)
        u, alpha_q = _stage_odes(data, settings)
        label = ", ".join(f"{k}={v:g}" for k, v in change.items()) or "ts-default"
        rows.append(CheckResult(
            "CF-TS2", "u(t) = tau - W(e^tau)", TITLES["CF-TS2"][1], label,
            relative_error(u, cf.stage_one_margin(data, TIMES)), settings.tolerance,
            note=f"t in [1e-3, 1e3]; u from {u[0]:.3g} to {u[-1]:.3g}"))
        rows.append(CheckResult(
            "CF-TS2", "alpha_Q(t)", TITLES["CF-TS2"][1], label,
            relative_error(alpha_q, cf.stage_two_alpha_q(data, TIMES)), settings.tolerance,
            note=f"t in [1e-3, 1e3]; alpha_Q from {alpha_q[0]:.3g} to {alpha_q[-1]:.3g}"))
    return rows


_CHECKS = {"CF-TS1": check_skew_normal, "CF-TS2": check_stage_forms}

#: The two-stage family's checks in the registry of ``odeflow verify``.
TWO_STAGE_CHECKS = CheckFamily("two_stage", TITLES, lambda settings: settings,
                               lambda settings, name: _CHECKS[name](settings), position=2,
                               grid=f"t in [{TIMES[0]:g}, {TIMES[-1]:g}] ({TIMES.size} "
                                    "log-spaced points)")
