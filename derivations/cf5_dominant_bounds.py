"""CF5: growth bounds of the dominant distinct token (Eqn 12).

Let ``l0`` be the distinct token of class ``n`` with the largest
``fhat_l(0)`` and assume the common tokens' logits do not grow.  Then
``fhat_l0(0)^2 <= fhat_l0(t)^2 <= 1`` and, integrating
``dz_l0/dt = B'(t) fhat_l0^2`` with ``B' >= 0`` and ``B(0) = 0``,

``exp(2 fhat_l0(0)^2 B(t)) <= 1 + chi_l0(t) <= exp(2 B(t))``.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from . import SYM, Derivation, combine, make_latex
from .cf4_relative_gain import simulate_class

NAME = "CF5"
TITLE = "Bounds on the growth of the dominant distinct token"
EQUATION = "Eqn 12"


@cache
def derive() -> Derivation:
    """Derive the two-sided bound of Eqn 12.

    With ``w(t) = ln(1 + chi_l0(t)) = 2 (z_l0(t) - z_l0(0))`` one has
    ``w' = 2 B' fhat_l0^2``.  Writing ``fhat_l0(t)^2 = fhat_l0(0)^2 + d`` with
    ``0 <= d <= 1 - fhat_l0(0)^2``,
    ``(w - 2 fhat_l0(0)^2 B)' = 2 B' d >= 0`` and
    ``(2 B - w)' = 2 B' (1 - fhat_l0(0)^2 - d) >= 0``; both vanish at ``t = 0``.
    Monotonicity of ``fhat_l0`` follows from CF4: with ``C = 2 S(0) Sigma(t)``
    (non-decreasing), ``1 + chi_l = 1 / (1 - fhat_l(0)^2 C)`` and the ratio
    ``(1 + chi_l) / (1 + chi_l0)`` is non-increasing in ``C`` when
    ``fhat_l(0) <= fhat_l0(0)``.

    Returns
    -------
    Derivation
        Main target: the lower bound ``exp(2 fhat_l0(0)^2 B)`` with symbols
        ``(B, fhat_l0(0))``; ``targets["upper"]`` is ``exp(2 B)``.
    """
    B = SYM.B
    f0 = sp.Symbol("fhat_l00", positive=True)  # fhat_l0(0)
    Bp = sp.Symbol("Bdot", nonnegative=True)
    d = sp.Symbol("d", nonnegative=True)
    q, r, delta, C, fk = sp.symbols("q r delta C fhat_k0", nonnegative=True)

    Bf, wf = sp.Function("B"), sp.Function("w")
    t = SYM.t
    fsq = sp.Function("F")  # F(t) = fhat_l0(t)^2
    ode_w = sp.Eq(wf(t).diff(t), 2 * Bf(t).diff(t) * fsq(t))

    lower = sp.exp(2 * f0**2 * B)
    upper = sp.exp(2 * B)
    # Derivatives of the two gaps, with w' from ode_w and fhat^2 = f0^2 + d.
    gap_lo = sp.expand(
        (ode_w.rhs - 2 * f0**2 * Bf(t).diff(t)).subs(fsq(t), f0**2 + d).subs(Bf(t).diff(t), Bp)
    )
    gap_hi = sp.expand(
        (2 * Bf(t).diff(t) - ode_w.rhs).subs(fsq(t), f0**2 + d).subs(Bf(t).diff(t), Bp)
    )

    X = sp.Symbol("X")  # 1 + chi_l0
    exprs = {
        "w": sp.Eq(wf(t), sp.log(X)),
        "F": sp.Eq(fsq(t), sp.Symbol("fhat_l0") ** 2),
        "ode": ode_w,
        "d_gap_lower": sp.Eq(sp.Derivative(wf(t) - 2 * f0**2 * Bf(t), t), sp.factor(gap_lo)),
        "d_gap_upper": sp.Eq(sp.Derivative(2 * Bf(t) - wf(t), t), sp.factor(gap_hi)),
        "lower_bound": sp.Le(lower, X, evaluate=False),
        "upper_bound": sp.Le(X, upper, evaluate=False),
    }
    names = {
        f0: r"\hat{f}_{l_0}(0)",
        X: r"1 + \chi_{l_0}",
        Bp: r"\dot{B}",
        sp.Symbol("fhat_l0"): r"\hat{f}_{l_0}(t)",
    }
    syms = (B, f0)

    def checker() -> tuple[bool, str]:
        results = []
        results.append(
            (
                f"(w - 2 f0^2 B)' = {sp.factor(gap_lo)} >= 0",
                sp.simplify(gap_lo - 2 * Bp * d) == 0 and gap_lo.is_nonnegative is True,
            )
        )
        # d <= 1 - f0^2: parametrise f0^2 = 1/(1+q), d = (1 - f0^2)/(1+r), q, r >= 0.
        hi_param = sp.simplify(gap_hi.subs(d, (1 - f0**2) / (1 + r)).subs(f0, 1 / sp.sqrt(1 + q)))
        results.append(
            (
                f"(2B - w)' = {sp.factor(gap_hi)} >= 0 for d <= 1 - f0^2",
                hi_param.is_nonnegative is True,
            )
        )
        # Monotone ratio: (1 - f0^2 C)/(1 - fk^2 C) with f0^2 = fk^2 + delta.
        ratio = (1 - f0**2 * C) / (1 - fk**2 * C)
        dratio = sp.factor(sp.diff(ratio, C).subs(f0, sp.sqrt(fk**2 + delta)))
        num, den = sp.fraction(dratio)
        results.append(
            (
                f"d/dC (1+chi_l)/(1+chi_l0) = {dratio} <= 0",
                num.is_nonpositive is True and den.is_nonnegative is True,
            )
        )
        results.append(("bounds equal 1 at B = 0", lower.subs(B, 0) == 1 and upper.subs(B, 0) == 1))

        # Numerical: dominant token l0 = index 2, common tokens decreasing.
        c_d = np.array([0.05, 0.1, 0.2, 0.08])
        c_c = np.array([0.3, 0.27])
        z0_d = np.array([0.1, -0.2, 0.05, 0.0])
        z0_c = np.array([0.0, 0.1])
        _, z, fsq_num, Bn = simulate_class(c_d, c_c, z0_d, z0_c, t_end=6.0, common_rate=0.6)
        l0 = int(np.argmax(fsq_num[0]))
        one_chi = np.exp(2 * (z[:, l0] - z[0, l0]))
        lo = np.exp(2 * fsq_num[0, l0] * Bn)
        hi = np.exp(2 * Bn)
        slack = 1e-10
        ok_b = bool(np.all(lo <= one_chi * (1 + slack)) and np.all(one_chi <= hi * (1 + slack)))
        ok_f = bool(np.all(np.diff(fsq_num[:, l0]) >= -1e-12))
        others = [k for k in range(len(c_d)) if k != l0]
        gain = fsq_num[:, [l0]] / fsq_num[:, others] - fsq_num[0, l0] / fsq_num[0, others]
        ok_r = bool(np.all(np.diff(gain, axis=0) >= -1e-12)) and bool(
            np.all(np.diff(one_chi) >= -1e-12)
        )
        results.append(
            (
                f"scipy: exp(2 f0^2 B) <= 1+chi_l0 <= exp(2B) on [0, 6] "
                f"(at t=6: {lo[-1]:.4g} <= {one_chi[-1]:.4g} <= {hi[-1]:.4g})",
                ok_b,
            )
        )
        results.append(("scipy: fhat_l0^2 non-decreasing", ok_f))
        results.append(("scipy: chi_l0 and r_{l0/l} non-decreasing", ok_r))
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "ln(1 + chi_l0) = 2 int B' fhat_l0^2 with fhat_l0(0)^2 <= fhat_l0^2 <= 1 and "
            "B' >= 0 gives exp(2 fhat_l0(0)^2 B) <= 1 + chi_l0 <= exp(2 B)."
        ),
        exprs=exprs,
        latex=make_latex(exprs, names),
        expr=lower,
        symbols=syms,
        targets={"main": (lower, syms), "lower": (lower, syms), "upper": (upper, (B,))},
        checker=checker,
    )
