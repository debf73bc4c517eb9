"""CF2: the two regimes of the speed-control coefficient (Lemma 9, Theorem 1b).

``gamma(t) = h(t) (M - 1) / (exp(h(t)) + M - 1)`` with ``h`` from CF1.  The
implicit relation of CF1 gives ``t`` as an explicit function of ``h``,
``t(h) = (exp(h) - 1 + (M - 1) h) / (eta_Y pi M)``, so both regimes are limits
in the parameter ``h`` (``h -> 0`` for small ``t``, ``h -> oo`` for large ``t``,
``h`` being increasing in ``t``).  The crossover ``exp(h) = M - 1`` is solved
for ``h`` and substituted into ``t(h)``.
"""

from __future__ import annotations

from functools import cache

import mpmath
import sympy as sp

from . import SYM, Derivation, cf1_decoder_margin, combine, is_zero, make_latex

NAME = "CF2"
TITLE = "Speed-control coefficient gamma(t): regimes and crossover"
EQUATION = "Lemma 9, Theorem 1(b)"


@cache
def derive() -> Derivation:
    """Derive the early/late asymptotes of ``gamma`` and the crossover ``t_0``.

    * early (``h << ln M``): ``gamma ~ eta_Y pi t (M - 1) / M``, the slope being
      ``lim_{h->0} gamma(h) / t(h)``; the first Taylor coefficient of sympy's
      series of ``h(t)`` at ``t = 0`` confirms ``h ~ eta_Y pi t``;
    * late (``h >> ln M``): ``gamma ~ (M - 1) ln(eta_Y pi M t) / (eta_Y pi M t)``,
      shown by ``lim_{h->oo} gamma(h) / gamma_late(t(h)) = 1``;
    * crossover: ``exp(h) = M - 1`` at
      ``t_0 = (M - 2 + (M - 1) ln(M - 1)) / (eta_Y pi M)``.

    Returns
    -------
    Derivation
        Main target: ``gamma(t)`` with symbols ``(t, M, eta_Y, pi)``; other
        targets: ``gamma_early``, ``gamma_late``, ``t0`` (symbols
        ``(M, eta_Y, pi)``) and ``gamma_h`` (symbols ``(h, M)``).
    """
    t, M, eta_Y, pi, h = SYM.t, SYM.M, SYM.eta_Y, SYM.pi, SYM.h
    A = eta_Y * pi * M
    cf1 = cf1_decoder_margin.derive()
    h_t = cf1.expr
    implicit = cf1.exprs["implicit"]

    gamma_h = h * (M - 1) / (sp.exp(h) + M - 1)
    gamma_t = gamma_h.subs(h, h_t)

    # t as a function of h from the implicit form of CF1.
    t_of_h = sp.solve(implicit, t)[0]

    # Early regime: gamma / t -> slope as h -> 0.
    slope = sp.simplify(sp.limit(gamma_h / t_of_h, h, 0))
    gamma_early = slope * t
    # Late regime: h ~ ln(e^h) and e^h ~ eta_Y pi M t, hence the candidate
    # (M - 1) ln(A t) / (A t); its ratio to gamma tends to 1 (checked below).
    gamma_late = (M - 1) * sp.log(A * t) / (A * t)

    # Crossover exp(h) = M - 1.
    h_cross = sp.solve(sp.Eq(sp.exp(h), M - 1), h)
    if len(h_cross) != 1:
        raise RuntimeError(f"crossover equation has solutions {h_cross}")
    t0_num, t0_den = sp.fraction(sp.together(t_of_h.subs(h, h_cross[0])))
    t0 = sp.collect(sp.expand(t0_num), sp.log(M - 1), func=sp.factor) / t0_den

    T0 = sp.Symbol("t_0")
    exprs = {
        "gamma_h": sp.Eq(sp.Symbol("gamma"), gamma_h),
        "t_of_h": sp.Eq(t, t_of_h),
        "gamma_early": sp.Eq(sp.Symbol("gamma_early"), gamma_early),
        "gamma_late": sp.Eq(sp.Symbol("gamma_late"), gamma_late),
        "h_cross": sp.Eq(h, h_cross[0]),
        "t0": sp.Eq(T0, t0),
    }
    syms = (t, M, eta_Y, pi)

    def checker() -> tuple[bool, str]:
        results = []
        expected_slope = eta_Y * pi * (M - 1) / M
        results.append(
            (f"early slope lim_(h->0) gamma/t = {slope}", is_zero(slope - expected_slope))
        )

        # Taylor coefficient of h(t) at t = 0 from Eqn 44: h'(0) = eta_Y pi.
        hp0 = cf1.exprs["ode"].rhs.subs(sp.Function("h")(t), 0)
        results.append(
            (f"h'(0) from Eqn 44 = {sp.simplify(hp0)} (h ~ eta_Y pi t)", is_zero(hp0 - eta_Y * pi))
        )

        ratio_early = sp.limit(gamma_h / gamma_early.subs(t, t_of_h), h, 0)
        results.append((f"lim_(h->0) gamma/gamma_early = {ratio_early}", ratio_early == 1))
        ratio_late = sp.limit(gamma_h / gamma_late.subs(t, t_of_h), h, sp.oo)
        results.append((f"lim_(h->oo) gamma/gamma_late = {ratio_late}", ratio_late == 1))

        expected_t0 = (M - 2 + (M - 1) * sp.log(M - 1)) / (eta_Y * pi * M)
        results.append(("t_0 = (M - 2 + (M-1) ln(M-1)) / (eta_Y pi M)", is_zero(t0 - expected_t0)))
        # exp(h(t_0)) = M - 1 with the explicit h(t) of CF1, numerically.
        f_h = sp.lambdify(syms, h_t, modules="mpmath")
        f_t0 = sp.lambdify((M, eta_Y, pi), t0, modules="mpmath")
        f_g = sp.lambdify(syms, gamma_t, modules="mpmath")
        f_e = sp.lambdify(syms, gamma_early, modules="mpmath")
        f_l = sp.lambdify(syms, gamma_late, modules="mpmath")
        worst = mpmath.mpf(0)
        early_ok = late_ok = True
        with mpmath.workdps(50):
            for m in ("3", "10", "1000", "1e6"):
                for eta, p in (("0.01", "0.5"), ("3", "0.1"), ("100", "1")):
                    m_, eta_, p_ = mpmath.mpf(m), mpmath.mpf(eta), mpmath.mpf(p)
                    tt0 = f_t0(m_, eta_, p_)
                    worst = max(worst, abs(mpmath.exp(f_h(tt0, m_, eta_, p_)) / (m_ - 1) - 1))
                    # ratios move towards 1 away from t_0
                    te = [tt0 * mpmath.mpf(10) ** -k for k in (4, 6, 8)]
                    re = [abs(f_g(x, m_, eta_, p_) / f_e(x, m_, eta_, p_) - 1) for x in te]
                    early_ok &= re[0] > re[1] > re[2] and re[2] < 1e-6
                    tl = [tt0 * mpmath.mpf(10) ** k for k in (4, 8, 12)]
                    rl = [abs(f_g(x, m_, eta_, p_) / f_l(x, m_, eta_, p_) - 1) for x in tl]
                    late_ok &= rl[0] > rl[1] > rl[2] and rl[2] < 1e-3
        results.append(
            (f"exp(h(t_0)) = M - 1 (max rel err {mpmath.nstr(worst, 3)})", worst < 1e-40)
        )
        results.append(("gamma/gamma_early -> 1 as t/t_0 -> 0 (numeric, 50 digits)", early_ok))
        results.append(("gamma/gamma_late -> 1 as t/t_0 -> oo (numeric, 50 digits)", late_ok))
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "With t(h) from the implicit form of CF1, gamma ~ eta_Y pi t (M-1)/M as h -> 0 and "
            "gamma ~ (M-1) ln(eta_Y pi M t)/(eta_Y pi M t) as h -> oo; exp(h) = M - 1 at t_0."
        ),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=gamma_t,
        symbols=syms,
        targets={
            "main": (gamma_t, syms),
            "gamma_h": (gamma_h, (h, M)),
            "gamma_early": (gamma_early, syms),
            "gamma_late": (gamma_late, syms),
            "t0": (t0, (M, eta_Y, pi)),
        },
        checker=checker,
    )
