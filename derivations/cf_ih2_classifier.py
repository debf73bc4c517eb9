"""CF-IH2: stage 3 of the induction-head model (``p = delta_S*``, only ``a`` moves).

With the exact copier and all selector weight on one subset ``S*``, the
kernel is ``K(z, z_q) = 1[z_S* = z_{q,S*}]``. Steps derived and checked here
(docs/induction.md; Chen, Sheen, Wang and Yang, "Unveiling Induction Heads",
2024):

1. The prediction is exactly the mixture
   ``y(z_q) = (1 - u) pi_S*(.|z_q) + u nu(z_q)``,
   ``u = (1 - rho) / (rho e^a + 1 - rho)``, ``rho = mu(z_{q,S*})`` the
   stationary probability that a key window matches the query on ``S*`` and
   ``nu`` the next-token law over the non-matching windows (checked on a
   generic symbolic joint law of a two-offset window over a binary
   vocabulary, ``S* = {1}``).
2. The nll loss is a function of ``a`` alone; ``du/da = -u (1 - u)``; the
   flow is the 1-D ODE ``a' = -eta_a loss'(a)``.
3. Expanding ``-sum_e pi_e log((1 - u) pi_e + u nu_e)`` in ``u``: the first
   order term ``-u (sum nu - sum pi)`` vanishes, the second is
   ``(u^2 / 2) chi^2(nu || pi)``; with ``u = ((1 - rho)/rho) e^{-a} + O(e^{-2a})``
   this gives ``loss - loss_inf = C e^{-2a} + O(e^{-3a})``,
   ``C = (1/2) E_pi sum_s mu(s) ((1 - mu(s)) / mu(s))^2 chi^2(nu(s) || pi_S*(.|s))``.
4. The asymptotic ODE ``a' = 2 eta_a C e^{-2a}`` is solved by
   ``a(t) = (1/2) ln(e^{2 a_0} + 4 eta_a C t)`` (substitution), whose slope in
   ``ln t`` tends to ``1/2``.

The form of ``a(t)`` that odeflow uses is confirmed, and ``C`` is derived
(item 3). Needs every ``pi_S*(e|s) > 0`` (the expansion in ``u``
holds for ``u << min pi``).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from . import Derivation, binary_window_law, combine, is_zero, make_latex

NAME = "CF-IH2"
TITLE = "Stage-3 classifier: exact mixture and a(t) asymptote"
EQUATION = "Unveiling Induction Heads, stage 3 (docs/induction.md)"

#: Vocabulary of the symbolic expansion in u (the result holds for any size).
VOCAB = 3


def _mixture_residuals():
    """``y`` computed from the windows minus the CF-IH2 mixture, for a generic binary law."""
    windows, P, mu_z, mu_e = binary_window_law()
    a = sp.Symbol("a", real=True)
    residuals = []
    for zq in windows:
        match = [z for z in windows if z[0] == zq[0]]  # S* = {1}
        den = sum(mu_z[z] * sp.exp(a * int(z in match)) for z in windows)
        rho = sum(mu_z[z] for z in match)
        u = (1 - rho) / (rho * sp.exp(a) + 1 - rho)
        for e in (0, 1):
            y = sum(P[z, e] * sp.exp(a * int(z in match)) for z in windows) / den
            pi_s = sum(P[z, e] for z in match) / rho
            nu = (mu_e[e] - sum(P[z, e] for z in match)) / (1 - rho)
            residuals.append(sp.cancel(sp.together(y - ((1 - u) * pi_s + u * nu))))
    return residuals


@cache
def derive() -> Derivation:
    """Derive the stage-3 mixture, the constant ``C`` and the asymptote of ``a(t)``.

    Returns
    -------
    Derivation
        Main target: ``a(t) = ln(e^{2 a_0} + 4 eta_a C t) / 2`` with symbols
        ``(t, a_0, eta_a, C)``.
    """
    t = sp.Symbol("t", nonnegative=True)
    a = sp.Symbol("a", real=True)
    a0 = sp.Symbol("a_0", real=True)
    eta, C, rho, uu, x = sp.symbols("eta_a C rho u x", positive=True)
    pis = sp.symbols(f"pi_1:{VOCAB + 1}", positive=True)
    nus = sp.symbols(f"nu_1:{VOCAB + 1}", positive=True)
    # simplex constraints on the last entries
    pi_c = list(pis[:-1]) + [1 - sum(pis[:-1])]
    nu_c = list(nus[:-1]) + [1 - sum(nus[:-1])]

    u_of_a = (1 - rho) / (rho * sp.exp(a) + 1 - rho)
    loss_u = -sum(p * sp.log((1 - uu) * p + uu * n) for p, n in zip(pi_c, nu_c, strict=True))
    series_u = sp.series(loss_u, uu, 0, 3).removeO()
    first = sp.simplify(series_u.coeff(uu, 1))
    second = sp.simplify(series_u.coeff(uu, 2))
    chi2 = sum((n - p) ** 2 / p for p, n in zip(pi_c, nu_c, strict=True))
    # u as a series in x = e^{-a}
    u_x = u_of_a.subs(a, -sp.log(x))
    u_series = sp.series(u_x, x, 0, 3).removeO()
    excess_x = sp.expand(sp.series(second * u_x**2, x, 0, 3).removeO())
    C_claim = (1 - rho) ** 2 / rho**2 * chi2 / 2  # per query value, times mu(s) = rho

    a_t = sp.log(sp.exp(2 * a0) + 4 * eta * C * t) / 2
    ode_residual = sp.diff(a_t, t) - 2 * eta * C * sp.exp(-2 * a_t)
    slope = sp.limit(sp.diff(a_t, t) * t, t, sp.oo)

    exprs = {
        "u": sp.Eq(sp.Symbol("u"), u_of_a),
        "mixture": sp.Eq(sp.Symbol("y"), (1 - sp.Symbol("u")) * sp.Symbol("pi_S*")
                         + sp.Symbol("u") * sp.Symbol("nu")),
        "du_da": sp.Eq(sp.Symbol("du/da"), -sp.Symbol("u") * (1 - sp.Symbol("u"))),
        "chi2": sp.Eq(sp.Symbol("chi^2_s"), sp.Sum((sp.Symbol("nu_e") - sp.Symbol("pi_e")) ** 2
                                                   / sp.Symbol("pi_e"),
                                                   (sp.Symbol("e"), 1, sp.Symbol("d")))),
        "C": sp.Eq(C, sp.Sum(sp.Symbol("mu_s") * (1 - sp.Symbol("mu_s")) ** 2
                             / sp.Symbol("mu_s") ** 2 * sp.Symbol("chi^2_s") / 2,
                             (sp.Symbol("s"), 1, sp.Symbol("N_s")))),
        "a_t": sp.Eq(sp.Function("a")(t), a_t),
    }
    syms = (t, a0, eta, C)

    def checker() -> tuple[bool, str]:
        results = []
        results.append(("y from the windows equals (1-u) pi_S* + u nu exactly "
                        "(generic binary law, S* = {1})",
                        all(is_zero(r) for r in _mixture_residuals())))
        results.append(("du/da = -u (1 - u)",
                        is_zero(sp.diff(u_of_a, a) + u_of_a * (1 - u_of_a))))
        results.append((f"first order in u vanishes on the simplex (coefficient {first})",
                        is_zero(first)))
        results.append(("second order in u is chi^2(nu || pi) / 2", is_zero(second - chi2 / 2)))
        results.append(("u = ((1 - rho)/rho) e^{-a} + O(e^{-2a})",
                        is_zero(u_series.coeff(x, 1) - (1 - rho) / rho)
                        and is_zero(u_series.coeff(x, 0))))
        results.append(("loss - loss_inf = C_s e^{-2a} + O(e^{-3a}), "
                        "C_s = ((1-rho)/rho)^2 chi^2/2",
                        is_zero(excess_x.coeff(x, 2) - C_claim)
                        and is_zero(excess_x.coeff(x, 1)) and is_zero(excess_x.coeff(x, 0))))
        results.append(("a(t) = ln(e^{2 a0} + 4 eta_a C t)/2 solves a' = 2 eta_a C e^{-2a}",
                        is_zero(ode_residual)))
        results.append(("a(0) = a0", is_zero(a_t.subs(t, 0) - a0)))
        results.append((f"slope of a in ln t tends to {slope}", slope == sp.Rational(1, 2)))

        # scipy: the exact 1-D ODE of one query value approaches the asymptote
        pi_n = np.array([0.5, 0.3, 0.2])
        nu_n = np.array([0.2, 0.2, 0.6])
        r, eta_n, a_start = 0.3, 1.0, 0.01
        c_n = r * ((1 - r) / r) ** 2 * np.sum((nu_n - pi_n) ** 2 / pi_n) / 2

        def loss_slope(av):
            u = (1 - r) / (r * np.exp(av) + 1 - r)
            y = (1 - u) * pi_n + u * nu_n
            return r * np.sum(pi_n * u * (1 - u) * (nu_n - pi_n) / y)

        t_end = 1e10
        times = np.geomspace(1e6, t_end, 9)
        sol = solve_ivp(lambda s, y: [-eta_n * loss_slope(y[0])], (0, t_end), [a_start],
                        method="LSODA", t_eval=times, rtol=1e-11, atol=1e-12)
        a_num = sol.y[0]
        rate = -2 * eta_n * np.array([loss_slope(v) for v in a_num]) * np.exp(2 * a_num)
        rate_err = float(np.max(np.abs(rate / (4 * eta_n * c_n) - 1)[-3:]))
        slopes = np.diff(a_num) / np.diff(np.log(times))
        results.append((f"scipy: 2 a' e^(2a) / (4 eta C) -> 1 (|err| {rate_err:.1e} at "
                        f"t >= 1e9, a = {a_num[-1]:.2f})", sol.success and rate_err < 1e-3))
        results.append((f"scipy: slope of a in ln t {slopes[-1]:.4f} -> 1/2",
                        abs(slopes[-1] - 0.5) < 1e-3))
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "At p = delta_S* the kernel is the match indicator on S*, so y(z_q) = (1-u) "
            "pi_S*(.|z_q) + u nu(z_q) with u = (1-rho)/(rho e^a + 1 - rho) exactly, and the "
            "flow of a is the 1-D ODE a' = -eta_a loss'(a), du/da = -u(1-u). The first order "
            "in u cancels (sum nu = sum pi = 1), so loss - loss_inf ~ C e^{-2a} with C = (1/2) "
            "E sum_s mu(s) ((1-mu(s))/mu(s))^2 chi^2(nu||pi_S*), and a(t) ~ (1/2) ln(e^{2a_0} "
            "+ 4 eta_a C t): slope 1/2 in ln t once u << min pi, the form odeflow uses."
        ),
        exprs=exprs,
        latex=make_latex(exprs, {eta: r"\eta_a", a0: "a_0"}),
        expr=a_t,
        symbols=syms,
        targets={"main": (a_t, syms)},
        checker=checker,
    )
