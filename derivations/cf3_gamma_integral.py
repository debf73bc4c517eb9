"""CF3: the integral of the speed-control coefficient (Eqn 128).

Eliminating ``exp(h)`` between ``gamma = h (M - 1) / (exp(h) + M - 1)`` and
Eqn 44 gives ``gamma = h (M - 1) h' / (eta_Y pi M)``; so ``gamma dt`` is an
exact differential in ``h`` and, with ``h(0) = 0``,
``Gamma(t) = int_0^t gamma ds = (M - 1) h(t)^2 / (2 M eta_Y pi)``.
"""

from __future__ import annotations

from functools import cache

import mpmath
import sympy as sp

from . import SYM, Derivation, cf1_decoder_margin, cf2_speed_control, combine, is_zero, make_latex

NAME = "CF3"
TITLE = "Integrated speed control Gamma(t)"
EQUATION = "Eqn 128"


@cache
def derive() -> Derivation:
    """Derive ``Gamma(t) = int_0^t gamma(s) ds`` in terms of ``h(t)`` (Eqn 128).

    Steps: solve Eqn 44 for ``exp(h)`` in terms of ``h'``; substitute into
    ``gamma`` to obtain ``gamma = h (M-1) h' / (eta_Y pi M)``; change the
    integration variable from ``s`` to ``h`` (``h`` is increasing and
    ``h(0) = 0``) and integrate with sympy.

    Returns
    -------
    Derivation
        ``exprs["Gamma_h"]`` is the integral-free form in ``h``; the main
        target is ``Gamma(t)`` (``h`` replaced by CF1) with symbols
        ``(t, M, eta_Y, pi)``; ``targets["Gamma_h"]`` has symbols ``(h, M, eta_Y, pi)``.
    """
    t, M, eta_Y, pi, h = SYM.t, SYM.M, SYM.eta_Y, SYM.pi, SYM.h
    A = eta_Y * pi * M
    cf1 = cf1_decoder_margin.derive()
    cf2 = cf2_speed_control.derive()
    h_t = cf1.expr
    gamma_h = cf2.targets["gamma_h"][0]
    rhs44 = A / (sp.exp(h) + M - 1)

    # Eliminate exp(h) using Eqn 44: h' = A / (E + M - 1).
    hp, E = sp.symbols("hdot E", positive=True)
    E_sol = sp.solve(sp.Eq(hp, A / (E + M - 1)), E)
    if len(E_sol) != 1:
        raise RuntimeError(f"could not solve Eqn 44 for exp(h): {E_sol}")
    gamma_hp = sp.simplify(gamma_h.subs(sp.exp(h), E).subs(E, E_sol[0]))

    # gamma ds = (gamma / h') dh, integrate from h(0) = 0 to h(t).
    integrand = sp.simplify(gamma_hp / hp)
    if integrand.has(hp) or integrand.has(t):
        raise RuntimeError(f"gamma / h' = {integrand} is not a function of h alone")
    H = sp.Dummy("H")
    Gamma_h = sp.factor(sp.integrate(integrand.subs(h, H), (H, 0, h)))
    Gamma_t = Gamma_h.subs(h, h_t)

    G = sp.Symbol("Gamma")
    exprs = {
        "gamma_hdot": sp.Eq(sp.Symbol("gamma"), gamma_hp),
        "Gamma_definition": sp.Eq(G, sp.Integral(sp.Function("gamma")(SYM.s), (SYM.s, 0, t))),
        "Gamma_h": sp.Eq(G, Gamma_h),
    }
    syms = (t, M, eta_Y, pi)

    def checker() -> tuple[bool, str]:
        results = []
        expected_hp = h * (M - 1) * hp / (eta_Y * pi * M)
        results.append(("gamma = h (M-1) h' / (eta_Y pi M)", is_zero(gamma_hp - expected_hp)))
        results.append(("derived Gamma contains no Integral", not Gamma_h.has(sp.Integral)))
        expected = (M - 1) * h**2 / (2 * M * eta_Y * pi)
        results.append(("Gamma = (M-1) h^2 / (2 M eta_Y pi)", is_zero(Gamma_h - expected)))
        # dGamma/dt = dGamma/dh * h' with h' from Eqn 44 must equal gamma.
        dG = sp.diff(Gamma_h, h) * rhs44
        results.append(("dGamma/dt (chain rule + Eqn 44) == gamma", is_zero(dG - gamma_h)))
        results.append(("Gamma(0) = 0", Gamma_h.subs(h, 0) == 0))
        # Quadrature of gamma(s) with the explicit h(s) of CF1.
        f_gamma = sp.lambdify((SYM.s, M, eta_Y, pi), cf2.expr.subs(t, SYM.s), modules="mpmath")
        f_G = sp.lambdify(syms, Gamma_t, modules="mpmath")
        worst = mpmath.mpf(0)
        with mpmath.workdps(30):
            mpf = mpmath.mpf
            for tt, m, eta, p in (
                ("0.5", "2", "1", "1"),
                ("30", "50", "0.3", "0.5"),
                ("2e3", "1e4", "2", "0.1"),
            ):
                args = (mpf(m), mpf(eta), mpf(p))
                tt = mpf(tt)
                t0 = cf2.lambdify("t0")(*args)
                nodes = [mpf(0)] + [x for x in (t0 / 10, t0, 10 * t0) if x < tt] + [tt]
                quad = mpmath.quad(lambda s, a=args: f_gamma(s, *a), nodes)
                worst = max(worst, abs(quad / f_G(tt, *args) - 1))
        results.append(
            (
                f"Gamma_h(t) == quadrature of gamma (max rel diff {mpmath.nstr(worst, 3)})",
                worst < 1e-20,
            )
        )
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "Eqn 44 gives gamma = h (M-1) h'/(eta_Y pi M), an exact derivative in h; "
            "so Gamma(t) = (M-1) h(t)^2 / (2 M eta_Y pi) for any t."
        ),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=Gamma_t,
        symbols=syms,
        targets={"main": (Gamma_t, syms), "Gamma_h": (Gamma_h, (h, M, eta_Y, pi))},
        checker=checker,
    )
