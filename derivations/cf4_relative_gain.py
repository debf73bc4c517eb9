"""CF4: relative gain of distinct tokens (Theorem 3, Eqn 11).

For a distinct token ``l`` of class ``n`` the reduced flow gives (Eqn 98)
``dz_l/dt = B'(t) fhat_l^2`` with
``fhat_l^2 = c_l^2 exp(2 z_l) / S(t)``, ``S(t) = sum_k c_k^2 exp(2 z_k)``
(the sum runs over *all* tokens of the class, common ones included).  With
``Sigma(t) = int_0^t B'(s) / S(s) ds``, common to every ``l``, the equation
separates: ``exp(-2 z_l) dz_l = c_l^2 dSigma``.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from . import SYM, Derivation, combine, is_zero, make_latex

NAME = "CF4"
TITLE = "Relative gain of distinct tokens"
EQUATION = "Theorem 3, Eqn 11"


def simulate_class(
    c_distinct, c_common, z0_distinct, z0_common, t_end=3.0, common_rate=0.4, rtol=1e-12, atol=1e-14
):
    """Integrate the logits of one class with scipy (verification helper).

    Distinct tokens follow ``dz_l/dt = B'(t) fhat_l^2`` with the arbitrary
    positive rate ``B'(t) = 0.8 + 0.5 sin(3 t)``; common tokens follow an
    unrelated decreasing law ``dz_c/dt = -common_rate (1 + cos t) fhat_c^2``.

    Parameters
    ----------
    c_distinct, c_common : array_like
        ``c_{l|n}`` of the distinct and of the common tokens.
    z0_distinct, z0_common : array_like
        Initial logits ``z_l(0)``.
    t_end : float, optional
        End of the time span.
    common_rate : float, optional
        Rate of decrease of the common tokens' logits.
    rtol, atol : float, optional
        Tolerances of :func:`scipy.integrate.solve_ivp` (DOP853).

    Returns
    -------
    times : ndarray
    z_distinct : ndarray, shape (len(times), n_distinct)
    fhat_sq : ndarray, shape (len(times), n_distinct)
        ``fhat_l^2`` of the distinct tokens.
    B : ndarray
        ``B(t) = int_0^t B'``.
    """
    c = np.concatenate([c_distinct, c_common])
    nd = len(c_distinct)

    def rhs(t, y):
        z = y[:-1]
        logw = 2 * np.log(c) + 2 * z
        fsq = np.exp(logw - np.logaddexp.reduce(logw))
        dz = np.empty_like(z)
        bp = 0.8 + 0.5 * np.sin(3 * t)
        dz[:nd] = bp * fsq[:nd]
        dz[nd:] = -common_rate * (1 + np.cos(t)) * fsq[nd:]
        return np.concatenate([dz, [bp]])

    y0 = np.concatenate([z0_distinct, z0_common, [0.0]])
    times = np.linspace(0, t_end, 31)
    sol = solve_ivp(rhs, (0, t_end), y0, method="DOP853", t_eval=times, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(sol.message)
    z = sol.y[:-1].T
    logw = 2 * np.log(c) + 2 * z
    fsq = np.exp(logw - np.logaddexp.reduce(logw, axis=1, keepdims=True))
    return sol.t, z[:, :nd], fsq[:, :nd], sol.y[-1]


@cache
def derive() -> Derivation:
    """Derive the invariant and the relative gain of Eqn 11.

    Steps: separate ``exp(-2 z_l) dz_l = c_l^2 dSigma`` and integrate from
    ``z_l(0)``; solve for ``z_l(t)``; form ``chi_l = exp(2 (z_l - z_l(0))) - 1``
    and simplify ``chi_l / ((1 + chi_l) fhat_l(0)^2)`` to ``2 S(0) Sigma(t)``,
    which does not depend on ``l``; then simplify the relative gain
    ``fhat_l^2/fhat_l'^2 - fhat_l(0)^2/fhat_l'(0)^2`` to
    ``(fhat_l(0)^2/fhat_l'(0)^2 - 1) chi_l``.

    Returns
    -------
    Derivation
        Main target: ``r_{l/l'} = (f0_l^2 / f0_l'^2 - 1) chi_l`` with symbols
        ``(chi_l, f0_l, f0_l')`` (``f0`` = ``fhat(0)``, not squared).
    """
    t = SYM.t
    c_l, c_m = sp.symbols("c_l c_lp", positive=True)
    z_l0, z_m0 = sp.symbols("z_l0 z_lp0", real=True)
    S0 = sp.Symbol("S_0", positive=True)  # ||c~(0)||^2 = S(0)
    Sigma = sp.Function("Sigma")  # int_0^t B'/S, Sigma(0) = 0
    zf = sp.Function("z")
    Z, zz = sp.Dummy("Z"), sp.Symbol("z_l", real=True)

    def solve_logit(c, z0):
        """z(t) solving z' = c^2 exp(2 z) Sigma'(t), z(0) = z0."""
        lhs = sp.integrate(sp.exp(-2 * Z), (Z, z0, zz))
        # The separated relation is linear in u = exp(-2 z) > 0.
        sols = sp.solve(sp.Eq(lhs, c**2 * Sigma(t)), sp.exp(-2 * zz))
        if len(sols) != 1:
            raise RuntimeError(f"separated equation has solutions {sols}")
        return -sp.log(sols[0]) / 2

    ode = sp.Eq(zf(t).diff(t), c_l**2 * sp.exp(2 * zf(t)) * Sigma(t).diff(t))
    z_l = solve_logit(c_l, z_l0)
    z_m = solve_logit(c_m, z_m0)
    chi_l = sp.exp(2 * (z_l - z_l0)) - 1
    chi_m = sp.exp(2 * (z_m - z_m0)) - 1
    f0sq_l = c_l**2 * sp.exp(2 * z_l0) / S0
    f0sq_m = c_m**2 * sp.exp(2 * z_m0) / S0
    invariant = sp.simplify(chi_l / ((1 + chi_l) * f0sq_l))

    # Relative gain; S(t) cancels in the ratio fhat_l^2 / fhat_l'^2.
    ratio_t = c_l**2 * sp.exp(2 * z_l) / (c_m**2 * sp.exp(2 * z_m))
    ratio_0 = f0sq_l / f0sq_m
    r = ratio_t - ratio_0

    chi, f0l, f0m = sp.symbols("chi_l fhat_l0 fhat_lp0", positive=True)
    r_closed = (f0l**2 / f0m**2 - 1) * chi
    r_sym = sp.Symbol("r_{l/l'}")
    exprs = {
        "ode": ode,
        "z_l": sp.Eq(zf(t), z_l),
        "invariant": sp.Eq(chi / ((1 + chi) * f0l**2), invariant),
        "relative_gain": sp.Eq(r_sym, r_closed),
    }
    syms = (chi, f0l, f0m)

    def checker() -> tuple[bool, str]:
        results = []
        res = sp.diff(z_l, t) - ode.rhs.subs(zf(t), z_l)
        results.append(("z_l(t) solves dz_l/dt = c_l^2 exp(2 z_l) Sigma'(t)", is_zero(res)))
        results.append(
            ("initial condition z_l(t = 0) = z_l0", is_zero(z_l.subs(Sigma(t), 0) - z_l0))
        )
        results.append(
            (
                f"chi_l/((1+chi_l) fhat_l(0)^2) = {invariant}, free of c_l and z_l(0)",
                not invariant.has(c_l)
                and not invariant.has(z_l0)
                and is_zero(invariant - 2 * S0 * Sigma(t)),
            )
        )
        inv_m = sp.simplify(chi_m / ((1 + chi_m) * f0sq_m))
        results.append(("invariant equal for l and l'", is_zero(invariant - inv_m)))
        diff = r - (ratio_0 - 1) * chi_l
        results.append(
            ("r_{l/l'} = (fhat_l(0)^2/fhat_l'(0)^2 - 1) chi_l (symbolic)", is_zero(diff))
        )

        # Numerical: full class with common tokens following another law.
        rng = np.random.default_rng(11)
        c_d = np.array([0.05, 0.12, 0.2, 0.08])
        c_c = np.array([0.3, 0.25])
        z0_d = rng.normal(scale=0.3, size=4)
        z0_c = rng.normal(scale=0.3, size=2)
        _, z, fsq, _ = simulate_class(c_d, c_c, z0_d, z0_c)
        chi_num = np.expm1(2 * (z - z[0]))
        inv_num = chi_num[1:] / ((1 + chi_num[1:]) * fsq[0])
        spread = np.max(np.abs(inv_num / inv_num[:, :1] - 1))
        r_num = fsq[:, 0] / fsq[:, 1] - fsq[0, 0] / fsq[0, 1]
        r_cf = (fsq[0, 0] / fsq[0, 1] - 1) * chi_num[:, 0]
        r_err = np.max(np.abs(r_num - r_cf)) / np.max(np.abs(r_num))
        results.append(
            (
                f"scipy: invariant equal across distinct tokens (max rel spread {spread:.2e})",
                spread < 1e-8,
            )
        )
        results.append(
            (f"scipy: relative gain matches Eqn 11 (max rel err {r_err:.2e})", r_err < 1e-8)
        )
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "exp(-2 z_l) dz_l = c_l^2 dSigma with Sigma = int B'/||c~||^2 common to all "
            "distinct tokens gives chi_l/((1+chi_l) fhat_l(0)^2) = 2 ||c~(0)||^2 Sigma(t) and "
            "r_{l/l'} = (fhat_l(0)^2/fhat_l'(0)^2 - 1) chi_l."
        ),
        exprs=exprs,
        latex=make_latex(
            exprs, {f0l: r"\hat{f}_{l}(0)", f0m: r"\hat{f}_{l'}(0)", S0: r"\|\tilde{c}(0)\|^2"}
        ),
        expr=r_closed,
        symbols=syms,
        targets={"main": (r_closed, syms)},
        checker=checker,
    )
