"""CF-TS2: early growth of ``W_P``, ``W_Q`` from ``W = sigma0 I`` and the stage times.

Model (odeflow's own, from the abstract of Gong et al. 2025, arXiv 2502.20681;
docs/two_stage): margin Q, so ``f(x_q) = r_P^T p_q + r_Q^T q_q`` with
``r = W^T mu / 2`` (CF-TS1), and the block flow ``W_P' = -dL/dW_P``.

Steps derived and checked here:

1. Reduction: ``dL/dW_P = mu_P (dL/dr_P)^T / 2``, so ``r_P' = -(|mu_P|^2/4) dL/dr_P``;
   from ``W = sigma0 I`` the flow keeps ``r`` along ``w`` in each block (the
   perpendicular gradient is odd in the perpendicular noise), a 2-D flow of
   ``alpha_P = <w_P, r_P>``, ``alpha_Q``, with ``M = |mu| = (1 - rho)(gamma + sqrt(2/pi))``.
2. Early growth: at ``r = 0`` the margin is 0 and ``dL/dalpha = l'(0) M``, so
   ``alpha' = -l'(0) M^3 / 4`` and the top singular value ``s = 2 alpha / M`` grows as
   ``s(t) = sigma0 + |l'(0)| M^2 t / 2``: linear, at rates in the ratio
   ``(M_P / M_Q)^2``; ``sigma0`` only shifts time by ``2 sigma0 / (|l'(0)| M^2)``.
3. Stage 1 (logistic): ``u = kappa_P alpha_P`` with ``u' = K_P sigmoid(-u)``,
   ``K_P = kappa_P M_P^3 / 4 = M_P^4 / (4 (1 - rho))``; ``u + e^u = u_0 + e^{u_0} + K_P t``
   and ``u = tau - W(e^tau)`` (Lambert W) solves it (substitution). Hence
   ``t_P = (u_90 + e^{u_90} - u_0 - e^{u_0}) / K_P`` with ``K_P^{-1} = 4 (1 - rho)^{-3}
   kappa_P^{-4}`` (``u_90`` from the stage's end ``u*``, below), independent of
   ``gamma_Q``; with ``u*`` it scales about as ``kappa_P^{-3.8} (1 - rho)^{-2.3}``.
4. Stage 2: ``alpha_Q' = (M_Q^2 kappa_Q / 4)(rho/2 + (1 - 2 rho) sigmoid(-u))`` at small
   ``alpha_Q`` (``E l'(a Z) = -1/2`` exactly for the logistic ``l``, since
   ``l'(x) + l'(-x) = -1``), integrated through ``int sigmoid(-u) dt = (u - u_0)/K_P``.
   Stage 1 ends where the P-carrying push balances the Q-only pull
   ``rho alpha E[l''(alpha Z)]`` (Stein: ``E[l'(a Z) Z] = a E[l''(a Z)]``). After it
   ``alpha_Q`` grows at about ``M_Q^2 kappa_Q rho / 8``: ``t_Q`` scales as
   ``1 / (rho (1 - rho)^2 kappa_Q^3)`` times the threshold ``alpha_Q`` set by ``alpha_P*``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import sympy as sp

from . import Derivation, combine, is_zero, make_latex

NAME = "CF-TS2"
TITLE = "Two-stage model: early growth of W_P, W_Q and the stage times"
EQUATION = "odeflow two-stage model, stage 1 and stage 2 (docs/two_stage)"


def _checks(t, u0, K, rho, kappa, M, lp0, s_t, u_t) -> tuple[bool, str]:
    """Every check of :func:`derive` (``(passed, detail)``)."""
    results = []
    # 1. chain rule of r_P = W_P^T mu_P / 2 on a generic 2x2 block, with a concrete
    #    non-separable L(r) = exp(a r_1) + r_2^3 + r_1 r_2
    W = sp.Matrix(2, 2, sp.symbols("W11 W12 W21 W22", real=True))
    mu = sp.Matrix(sp.symbols("mu1 mu2", real=True))
    a = sp.Symbol("a", real=True)
    r = W.T * mu / 2
    concrete = sp.exp(a * r[0]) + r[1] ** 3 + r[0] * r[1]
    dL_dr = sp.Matrix([a * sp.exp(a * r[0]) + r[1], 3 * r[1] ** 2 + r[0]])
    grad_c = sp.Matrix(2, 2, lambda i, j: sp.diff(concrete, W[i, j]))
    stated_c = mu * dL_dr.T / 2
    results.append(("dL/dW_P = mu_P (dL/dr_P)^T / 2 (r_P = W_P^T mu_P / 2)",
                    all(is_zero(x) for x in (grad_c - stated_c))))
    # r' = W'^T mu / 2 = -(|mu|^2/4) dL/dr
    r_dot = (-stated_c).T * mu / 2
    claim = -(mu.T * mu)[0] / 4 * dL_dr
    results.append(("r_P' = -(|mu_P|^2 / 4) dL/dr_P",
                    all(is_zero(x) for x in (r_dot - claim))))
    # 2. early growth: alpha' = -l'(0) M^3/4 and s = 2 alpha / M
    alpha_rate = -M**2 / 4 * lp0 * M
    s_rate = 2 * alpha_rate / M
    results.append(("early growth ds/dt = |l'(0)| M^2 / 2 with alpha = M s / 2",
                    is_zero(s_rate - sp.diff(s_t, t))))
    results.append(("K_P = kappa_P M_P^3 / 4 = M_P^4 / (4 (1 - rho))",
                    is_zero(kappa * M**3 / 4 - M**4 / (4 * (1 - rho)))))
    # 3. Lambert-W solution of u' = K sigmoid(-u)
    residual = sp.diff(u_t, t) - K / (1 + sp.exp(u_t))
    f_res = sp.lambdify((t, u0, K), residual, "mpmath")
    f_u = sp.lambdify((t, u0, K), u_t, "mpmath")
    points = (("0.3", "0.05", "2.0"), ("4.0", "0.5", "26.0"), ("40.0", "0.01", "0.7"))
    with mpmath.workdps(40):
        worst = max(abs(f_res(*map(mpmath.mpf, p))) for p in points)
        start = max(abs(f_u(0, mpmath.mpf(p[1]), mpmath.mpf(p[2])) - mpmath.mpf(p[1]))
                    for p in points)
    results.append((f"u(t) = tau - W(e^tau) solves u' = K_P / (1 + e^u) (40 digits at 3 "
                    f"points: max residual {mpmath.nstr(worst, 3)}; e^u = W(e^tau) and "
                    f"W' = W / (x (1 + W)))", worst < 1e-30))
    results.append((f"u(0) = u_0 (max residual {mpmath.nstr(start, 3)})", start < 1e-30))
    # 4. logistic l'(x) + l'(-x) = -1, so E l'(a Z) = -1/2; Stein for the pull
    x = sp.Symbol("x", real=True)
    lprime = -1 / (1 + sp.exp(x))
    results.append(("l'(x) + l'(-x) = -1 (logistic): E l'(a Z) = -1/2",
                    is_zero(lprime + lprime.subs(x, -x) + 1)))
    results.append(_flow_check())
    return combine(results)


def derive() -> Derivation:
    """Derive the reduced flow, the early growth and the stage-1 Lambert-W margin.

    Returns
    -------
    Derivation
        Main target: ``u(t) = tau - W(e^tau)``, ``tau = u_0 + e^{u_0} + K_P t``, with
        symbols ``(t, u_0, K_P)``.
    """
    t = sp.Symbol("t", nonnegative=True)
    u0, K = sp.symbols("u_0 K_P", positive=True)
    gamma, rho, sigma0 = sp.symbols("gamma rho sigma_0", positive=True)
    lp0 = sp.Symbol("l'(0)", negative=True)
    kappa = gamma + sp.sqrt(2 / sp.pi)
    M = (1 - rho) * kappa
    tau = u0 + sp.exp(u0) + K * t
    u_t = tau - sp.LambertW(sp.exp(tau))
    s_t = sigma0 + (-lp0) * M**2 * t / 2
    exprs = {
        "reduced": sp.Eq(sp.Symbol("r_P'"), -sp.Symbol("|mu_P|")**2 / 4 * sp.Symbol("dL/dr_P")),
        "early": sp.Eq(sp.Symbol("s(t)"), s_t),
        "stage_one_ode": sp.Eq(sp.Symbol("u'"), K / (1 + sp.exp(sp.Symbol("u")))),
        "K_P": sp.Eq(K, M**4 / (4 * (1 - rho))),
        "u_t": sp.Eq(sp.Symbol("u(t)"), u_t),
        "alpha_q_rate": sp.Eq(sp.Symbol("alpha_Q'"), sp.Symbol("M_Q")**2 * sp.Symbol("kappa_Q")
                              / 4 * (rho / 2 + (1 - 2 * rho) / (1 + sp.exp(sp.Symbol("u"))))),
    }
    syms = (t, u0, K)

    def checker() -> tuple[bool, str]:
        return _checks(t, u0, K, rho, kappa, M, lp0, s_t, u_t)

    return Derivation(
        name=NAME, title=TITLE, equation=EQUATION,
        summary=(
            "With a margin Q, r = W^T mu/2 and r_P' = -(|mu_P|^2/4) dL/dr_P; from W = sigma0 I "
            "it is a 2-D flow of alpha_P, alpha_Q. At W -> 0, dL/dalpha = l'(0) M, so the top "
            "singular values grow linearly, s = sigma0 + |l'(0)| M^2 t/2 (sigma0 only shifts "
            "time; no exponential escape, since g is linear in W). Stage 1: u = kappa_P "
            "alpha_P obeys u' = K_P sigmoid(-u), K_P = M_P^4/(4(1-rho)), solved by u = tau - "
            "W(e^tau): t_P = (u_90 + e^u_90 - u_0 - e^u_0)/K_P. Stage 2: alpha_Q' = "
            "(M_Q^2 kappa_Q/4)(rho/2 + (1-2rho) sigmoid(-u)) while alpha_P settles where the "
            "P-carrying push meets the Q-only examples' pull rho alpha E l''(alpha Z)."),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=u_t,
        symbols=syms,
        targets={"main": (u_t, syms), "early": (s_t, (t, sigma0, gamma, rho, lp0))},
        checker=checker,
    )


def _flow_check() -> tuple[str, bool]:
    """The population flow of ``ts-default`` against the early growth at small ``t`` and the
    predicted stage times (logistic loss)."""
    from scipy.integrate import solve_ivp

    from odeflow.analysis.two_stage.closed_forms import (
        early_singular_values,
        measured_stage_times,
        stage_times,
    )
    from odeflow.data.two_stage import TwoStageData
    from odeflow.fields.two_stage.population import PopulationFlow

    data = TwoStageData()
    field = PopulationFlow(data)
    times = np.concatenate([[0.0], np.geomspace(1e-4, 100.0, 300)])
    sol = solve_ivp(field.rhs, (0.0, 100.0), field.initial_state(), method="LSODA",
                    t_eval=times, rtol=1e-8, atol=1e-11)
    traj = field.trajectory(sol.t, sol.y.T, {})
    early = times <= 1e-3
    s_p, s_q = early_singular_values(data, times[early])
    err = max(np.max(np.abs(traj.singular_values_p[early, 0] / s_p - 1)),
              np.max(np.abs(traj.singular_values_q[early, 0] / s_q - 1)))
    (tp, tq), (mp, mq) = stage_times(data), measured_stage_times(traj)
    ok = err < 0.02 and abs(tp / mp - 1) < 0.2 and abs(tq / mq - 1) < 0.2
    return (f"ts-default flow: early growth within {err:.1e} (t <= 1e-3); t_P {tp:.3f} "
            f"predicted vs {mp:.3f} flow, t_Q {tq:.2f} vs {mq:.2f}", ok)
