"""CF-IH1: stage 1 of the induction-head model is a replicator in the subset weights.

Model (docs/induction.md; Chen, Sheen, Wang and Yang, "Unveiling Induction
Heads", 2024, as their training code defines it): the classifier output for a
query window ``z_q`` is
``y_e(z_q) = sum_z mu(z) e^{a K(z, z_q)} pi(e|z) / sum_z mu(z) e^{a K(z, z_q)}``
with ``K = sum_S p_S K_S``, ``p_S = c_S^2 / sum_S' c_S'^2`` and, for the exact
copier, ``K_S(z, z_q) = 1[z_S = z_{q,S}]``; the loss is
``-sum_{z_q} mu(z_q) sum_e pi(e|z_q) log y_e(z_q)`` (``"nll"``) or the
cross-entropy of the vector ``y`` (``"code"``), averaged over kernels.

Steps derived and checked here:

1. First order in ``a``: ``d loss/da |_{a=0} = -sum_S p_S I_S`` with the
   stated ``I_S = sum_{z_S} mu(z_S)^2 (sum_e pi_S(e|z_S)^2 / mu(e) - 1)``, and
   ``-sum_S p_S J_S`` for the code loss, on a generic symbolic joint law of a
   two-token window over a binary vocabulary (every subset of its offsets).
2. Gradient flow ``c' = -eta_c grad_c loss_1`` of ``loss_1 = loss_0 - a sum p_S I_S``:
   ``c_S' = (2 eta_c a c_S / U)(I_S - sum p I)``; ``U = sum c^2`` is conserved
   (``c . grad_c F(p(c)) = 0`` for *any* ``F``: ``p`` is scale-free, so ``U``
   is conserved by the full flow of ``c``, not only to first order); hence
   ``p_S' = kappa'(t) p_S (I_S - sum_S' p_S' I_S')`` with
   ``kappa' = 4 eta_c a / U_0``.
3. The closed form ``p_S(t) = p_S(0) e^{kappa I_S} / sum_S' p_S'(0) e^{kappa I_S'}``
   solves the replicator for any ``kappa(t)`` with ``kappa(0) = 0``
   (substitution), and agrees with scipy's integration of the ``c`` flow.

The constants that :mod:`odeflow.analysis.induction.closed_forms` uses (the
factor 4 in ``kappa``, ``I_S``, ``J_S``) are confirmed by this derivation.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from . import Derivation, binary_window_law, combine, is_zero, make_latex

NAME = "CF-IH1"
TITLE = "Stage-1 replicator of the subset weights"
EQUATION = "Unveiling Induction Heads, stage 1 (docs/induction.md)"

#: Number of subsets in the symbolic gradient-flow step (the result holds for any number).
N_SUBSETS = 4


def _first_order_identity(loss: str):
    """``(d loss/da at a = 0) + sum_S p_S I_S`` for a generic two-offset, two-token law.

    Windows ``z = (x_{-1}, x_{-2})``; ``P(z, e)`` eight symbols with the last
    fixed by ``sum P = 1``. Returns the list ``[(S, residual)]`` (each should
    simplify to zero) and the symbolic ``I_S`` of the largest subset.
    """
    windows, P, mu_z, mu_e = binary_window_law()
    a = sp.Symbol("a", real=True)
    softmax_mu = {e: sp.exp(mu_e[e]) / (sp.exp(mu_e[0]) + sp.exp(mu_e[1])) for e in (0, 1)}
    residuals = []
    info = None
    for size in range(3):
        for subset in itertools.combinations((1, 2), size):
            def k(z, zq, subset=subset):
                return sp.Integer(int(all(z[h - 1] == zq[h - 1] for h in subset)))

            loss_a = 0
            for zq in windows:
                den = sum(mu_z[z] * sp.exp(a * k(z, zq)) for z in windows)
                y = {e: sum(P[z, e] * sp.exp(a * k(z, zq)) for z in windows) / den
                     for e in (0, 1)}
                if loss == "nll":
                    loss_a += -sum(P[zq, e] * sp.log(y[e]) for e in (0, 1))
                else:
                    lse = sp.log(sp.exp(y[0]) + sp.exp(y[1]))
                    loss_a += -sum(P[zq, e] * y[e] for e in (0, 1)) + mu_z[zq] * lse
            slope = sp.diff(loss_a, a).subs(a, 0)
            # the stated formula, from P_S(z_S, e) = sum over the other offsets
            values = sorted({tuple(z[h - 1] for h in subset) for z in windows})
            P_S = {(s, e): sum(P[z, e] for z in windows if tuple(z[h - 1] for h in subset) == s)
                   for s in values for e in (0, 1)}
            mu_s = {s: P_S[s, 0] + P_S[s, 1] for s in values}
            if loss == "nll":
                formula = sum(mu_s[s] ** 2 * (sum((P_S[s, e] / mu_s[s]) ** 2 / mu_e[e]
                                                  for e in (0, 1)) - 1) for s in values)
            else:
                formula = sum(mu_s[s] ** 2 * sum((P_S[s, e] / mu_s[s] - softmax_mu[e])
                                                 * (P_S[s, e] / mu_s[s] - mu_e[e])
                                                 for e in (0, 1)) for s in values)
            residuals.append((subset, sp.cancel(sp.together(slope + formula))))
            info = formula
    return residuals, info


@cache
def derive() -> Derivation:
    """Derive the replicator of stage 1 and its closed form.

    Returns
    -------
    Derivation
        Main target: ``p_1(t) = p_1(0) e^{kappa I_1} / sum_S p_S(0) e^{kappa I_S}``
        with symbols ``(kappa, p_1(0)..p_4(0), I_1..I_4)``.
    """
    t = sp.Symbol("t", nonnegative=True)
    a, eta, U0 = sp.symbols("a eta_c U_0", positive=True)
    c = sp.symbols(f"c_1:{N_SUBSETS + 1}", positive=True)
    info = sp.symbols(f"I_1:{N_SUBSETS + 1}", real=True)
    p0 = sp.symbols(f"p0_1:{N_SUBSETS + 1}", positive=True)
    kappa = sp.Function("kappa")(t)
    ks = sp.Symbol("kappa", real=True)

    U = sum(ci**2 for ci in c)
    p = [ci**2 / U for ci in c]
    mean_info = sum(pi * ii for pi, ii in zip(p, info, strict=True))
    loss_1 = -a * mean_info  # + loss_0, independent of c
    c_dot = [-eta * sp.diff(loss_1, ci) for ci in c]
    c_dot_claim = [2 * eta * a * ci / U * (ii - mean_info) for ci, ii in zip(c, info, strict=True)]
    U_dot = sum(2 * ci * cd for ci, cd in zip(c, c_dot, strict=True))
    p_dot = [sum(sp.diff(pi, cj) * cd for cj, cd in zip(c, c_dot, strict=True)) for pi in p]
    p_dot_claim = [4 * eta * a / U * pi * (ii - mean_info) for pi, ii in zip(p, info, strict=True)]

    # general scale invariance: c . grad_c F(p(c)) = 0 for an arbitrary F
    F = sp.Function("F")(*p)
    euler = sum(ci * sp.diff(F, ci) for ci in c)

    # closed form
    weights = [p0i * sp.exp(kappa * ii) for p0i, ii in zip(p0, info, strict=True)]
    Z = sum(weights)
    p_t = [w / Z for w in weights]
    mean_t = sum(pi * ii for pi, ii in zip(p_t, info, strict=True))
    replicator_residual = [sp.diff(pi, t) - sp.diff(kappa, t) * pi * (ii - mean_t)
                           for pi, ii in zip(p_t, info, strict=True)]
    main = p_t[0].subs(kappa, ks)
    syms = (ks, *p0, *info)

    kappa_rate = sp.Symbol("kappa'", positive=True)
    exprs = {
        "first_order_loss": sp.Eq(sp.Symbol("loss"), sp.Symbol("loss_0")
                                  - a * sp.Sum(sp.Symbol("p_S") * sp.Symbol("I_S"),
                                               (sp.Symbol("S"), 1, sp.Symbol("N_S")))),
        "c_dot": sp.Eq(sp.Symbol("c_1'"), 2 * eta * a * c[0] / sp.Symbol("U")
                       * (info[0] - sp.Symbol("Ibar"))),
        "kappa_rate": sp.Eq(kappa_rate, 4 * eta * a / U0),
        "replicator": sp.Eq(sp.Symbol("p_1'"), kappa_rate * sp.Symbol("p_1")
                            * (info[0] - sp.Symbol("Ibar"))),
        "p_t": sp.Eq(sp.Symbol("p_1(t)"), main),
    }

    def checker() -> tuple[bool, str]:
        results = []
        nll, info_sym = _first_order_identity("nll")
        results.append(("d loss/da at a=0 = -I_S for every S of a generic 2-offset binary "
                        "law (nll; I_S the stated formula)",
                        all(is_zero(r) for _, r in nll)))
        code, _ = _first_order_identity("code")
        results.append(("d loss/da at a=0 = -J_S for every S (code loss)",
                        all(is_zero(r) for _, r in code)))
        results.append(("c_S' = 2 eta_c a c_S (I_S - sum p I) / U",
                        all(is_zero(x - y) for x, y in zip(c_dot, c_dot_claim, strict=True))))
        results.append(("U = sum c^2 conserved: sum c_S c_S' = 0", is_zero(U_dot)))
        results.append(("c . grad_c F(p(c)) = 0 for any F (U conserved by the full c flow)",
                        is_zero(sp.simplify(euler.doit()))))
        results.append(("p_S' = (4 eta_c a / U) p_S (I_S - sum p I)",
                        all(is_zero(x - y) for x, y in zip(p_dot, p_dot_claim, strict=True))))
        results.append(("closed form solves the replicator for any kappa(t)",
                        all(is_zero(r) for r in replicator_residual)))
        results.append(("closed form at kappa = 0 is p(0)",
                        all(is_zero(pt.subs(kappa, 0) - p0i / sum(p0))
                            for pt, p0i in zip(p_t, p0, strict=True))))
        del info_sym

        # scipy: integrate the c flow with a time-varying a(t) and compare
        rng = np.random.default_rng(3)
        c0 = rng.uniform(0.2, 1.0, N_SUBSETS)
        ii = np.array([0.2, 0.8, -0.3, 0.3])
        eta_c = 1.7

        def a_of(s):
            return 0.5 + 0.3 * np.sin(2 * s)

        def rhs(s, y):
            cc, u = y[:-1], np.sum(y[:-1] ** 2)
            pp = cc**2 / u
            return np.concatenate([2 * eta_c * a_of(s) * cc / u * (ii - pp @ ii), [a_of(s)]])

        times = np.linspace(0.0, 8.0, 41)
        sol = solve_ivp(rhs, (0, 8.0), np.concatenate([c0, [0.0]]), method="DOP853",
                        t_eval=times, rtol=1e-12, atol=1e-14)
        cc = sol.y[:-1].T
        u_t = np.sum(cc**2, axis=1)
        p_num = cc**2 / u_t[:, None]
        u0 = float(np.sum(c0**2))
        k_t = 4 * eta_c / u0 * sol.y[-1]
        logits = np.log(c0**2 / u0) + k_t[:, None] * ii
        p_cf = np.exp(logits - logits.max(axis=1, keepdims=True))
        p_cf /= p_cf.sum(axis=1, keepdims=True)
        err = float(np.max(np.abs(p_num - p_cf)))
        drift = float(np.max(np.abs(u_t / u0 - 1)))
        results.append((f"scipy: c flow vs closed form, max |dp| = {err:.1e} "
                        f"(p_max from {p_num[0].max():.3f} to {p_num[-1].max():.3f})",
                        err < 1e-9 and p_num[-1].max() > 0.9))
        results.append((f"scipy: U drift {drift:.1e}", drift < 1e-9))
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "To first order in a, y_e(z_q) = mu(e) + a Cov_z(K(z, z_q), pi(e|z)), so the loss "
            "is loss_0 - a sum_S p_S I_S with the modified chi-square mutual information "
            "I_S = sum_{z_S} mu(z_S)^2 (sum_e pi_S(e|z_S)^2/mu(e) - 1) (J_S under the code "
            "loss). Gradient flow on c through p_S = c_S^2/U conserves U = sum c^2 (p is "
            "scale-free) and gives the replicator p_S' = (4 eta_c a/U_0) p_S (I_S - sum p I), "
            "solved by p_S(t) = p_S(0) exp(kappa I_S)/sum p(0) exp(kappa I), "
            "kappa = (4 eta_c/U_0) int a. The constants odeflow uses are confirmed."
        ),
        exprs=exprs,
        latex=make_latex(exprs, {ks: r"\kappa", U0: "U_0", eta: r"\eta_c"}),
        expr=main,
        symbols=syms,
        targets={"main": (main, syms)},
        checker=checker,
    )
