"""CF6: the common-token logit and the attention sparsity ``B(t)`` (Sec. 6).

Setting of Theorem 4: one query token, one common token ``c`` shared by all
classes with equal weight, ``||c~_n|| ~ rho_0`` and ``beta_{nn'} = beta``
constant, ``a = beta (K - 1) c_{c|n}^2 / rho_0^2``.  Then

* ``dz_c/dt = -a eta_Z gamma(t) exp(2 z_c)``          (Eqn 13 / 124),
* ``dB/dt = eta_Z pi gamma(t) xi(t)``, ``xi = a exp(2 z_c)``   (Eqn 14 / 129).

The substitution ``u = exp(-2 z_c)`` makes the first equation linear; the
second one is then an exact derivative in ``Gamma = int gamma`` (CF3).
"""

from __future__ import annotations

from functools import cache

import mpmath
import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from . import (
    SYM,
    Derivation,
    cf1_decoder_margin,
    cf2_speed_control,
    cf3_gamma_integral,
    combine,
    is_zero,
    make_latex,
)

NAME = "CF6"
TITLE = "Common-token logit z_c(t) and sparsity B(t): scan and snap"
EQUATION = "Theorem 4, Eqns 13-14, 124, 129"


@cache
def derive() -> Derivation:
    """Derive ``z_c(t)`` and ``B(t)`` (Eqns 13-14, 124, 129).

    Steps: substitute ``u = exp(-2 z_c)`` (``u' = 2 a eta_Z Gamma'``), solve with
    ``dsolve`` and ``u(0) = exp(-2 z_c(0))``, ``Gamma(0) = 0``; integrate
    ``dB = eta_Z pi a dGamma / u`` in ``Gamma``; replace ``Gamma`` by the CF3
    form ``(M - 1) h^2 / (2 M eta_Y pi)``; evaluate at ``h(t_0) = ln(M - 1)``.

    Returns
    -------
    Derivation
        Main target: ``B(t)`` with symbols
        ``(t, M, eta_Y, eta_Z, pi, a, z_c0)`` (``h`` from CF1); other targets:
        ``z_c`` (same symbols), ``B_Gamma`` / ``z_c_Gamma`` (symbols
        ``(Gamma, eta_Z, pi, a, z_c0)``), ``B_h`` (symbols
        ``(h, M, eta_Y, eta_Z, pi, a, z_c0)``).
    """
    t, M, eta_Y, eta_Z, pi = SYM.t, SYM.M, SYM.eta_Y, SYM.eta_Z, SYM.pi
    a, zc0, h, Gs = SYM.a, SYM.z_c0, SYM.h, SYM.Gamma
    cf1 = cf1_decoder_margin.derive()
    cf3 = cf3_gamma_integral.derive()
    Gamma_h = cf3.targets["Gamma_h"][0]

    Gf, zf, uf, Bf = sp.Function("Gamma"), sp.Function("z_c"), sp.Function("u"), sp.Function("B")
    ode_z = sp.Eq(zf(t).diff(t), -a * eta_Z * Gf(t).diff(t) * sp.exp(2 * zf(t)))
    ode_B = sp.Eq(Bf(t).diff(t), eta_Z * pi * Gf(t).diff(t) * a * sp.exp(2 * zf(t)))

    # u = exp(-2 z_c): u' = -2 u z_c'.
    du = sp.simplify(sp.diff(sp.exp(-2 * zf(t)), t).subs(zf(t).diff(t), ode_z.rhs))
    if du.has(zf(t)):
        raise RuntimeError(f"u' = {du} still depends on z_c")
    ode_u = sp.Eq(uf(t).diff(t), du)
    u_sol = sp.dsolve(ode_u, uf(t), ics={uf(0): sp.exp(-2 * zc0)}).rhs.subs(Gf(0), 0)
    u_sol = sp.expand(u_sol)
    zc_G = -sp.log(u_sol) / 2  # in terms of Gamma(t)

    # dB = eta_Z pi a exp(2 z_c) dGamma = eta_Z pi a / u dGamma.
    g = sp.Dummy("g", nonnegative=True)
    dB_dG = sp.simplify((ode_B.rhs / Gf(t).diff(t)).subs(zf(t), zc_G).subs(Gf(t), g))
    B_G = sp.simplify(sp.integrate(dB_dG, (g, 0, Gs)))
    zc_Gs = zc_G.subs(Gf(t), Gs)

    B_h = B_G.subs(Gs, Gamma_h)
    zc_h = zc_Gs.subs(Gs, Gamma_h)
    B_t = B_h.subs(h, cf1.expr)
    zc_t = zc_h.subs(h, cf1.expr)

    # Value at the crossover h(t_0) = ln(M - 1), with eta_Z = rho eta_Y.
    rho = sp.Symbol("rho", positive=True)
    B_t0 = B_h.subs(h, sp.log(M - 1))
    B_t0_rho = B_t0.subs(eta_Z, rho * eta_Y)

    # Scanning (h ~ eta_Y pi t) and snapping (h ~ ln(eta_Y pi M t)) regimes.
    B_scan = B_h.subs(h, eta_Y * pi * t)
    B_snap = B_h.subs(h, sp.log(eta_Y * pi * M * t))

    # Effect of eta_Y on B at fixed t and eta_Z: h depends on eta_Y through
    # the implicit form of CF1; dh/d eta_Y by implicit differentiation, then
    # t eliminated with t(h).  dB/d eta_Y = (positive factor) * S(h).
    implicit = cf1.exprs["implicit"]
    F_imp = implicit.lhs - implicit.rhs
    dh_deta_Y = -sp.diff(F_imp, eta_Y) / sp.diff(F_imp, h)
    t_of_h = sp.solve(implicit, t)[0]
    dB_deta_Y = (sp.diff(B_h, eta_Y) + sp.diff(B_h, h) * dh_deta_Y).subs(t, t_of_h)
    S_sign = sp.exp(h) * (2 - h) + (M - 1) * h - 2

    Bs, zcs = sp.Symbol("B"), sp.Symbol("z_c")
    exprs = {
        "ode_z": ode_z,
        "ode_B": ode_B,
        "ode_u": ode_u,
        "z_c": sp.Eq(zcs, zc_Gs),
        "B": sp.Eq(Bs, B_G),
        "B_h": sp.Eq(Bs, B_h),
        "B_t0": sp.Eq(sp.Symbol("B(t_0)"), B_t0_rho),
        "B_scan": sp.Eq(sp.Symbol("B_scan"), B_scan),
        "B_snap": sp.Eq(sp.Symbol("B_snap"), B_snap),
        "dB_deta_Y_sign": sp.Eq(sp.Symbol("S(h)"), S_sign),
    }
    syms = (t, M, eta_Y, eta_Z, pi, a, zc0)
    gsyms = (Gs, eta_Z, pi, a, zc0)

    def checker() -> tuple[bool, str]:
        results = []
        results.append(
            (f"u = exp(-2 z_c) obeys u' = {du}", is_zero(du - 2 * a * eta_Z * Gf(t).diff(t)))
        )
        res_z = sp.diff(zc_G, t) - ode_z.rhs.subs(zf(t), zc_G)
        results.append(("z_c(Gamma(t)) solves Eqn 13 (substitution)", is_zero(res_z)))
        results.append(("z_c(0) = z_c0", is_zero(zc_G.subs(Gf(t), 0) - zc0)))
        res_B = sp.diff(B_G.subs(Gs, Gf(t)), t) - ode_B.rhs.subs(zf(t), zc_G)
        results.append(("B(Gamma(t)) solves Eqn 14 (substitution)", is_zero(res_B)))
        results.append(("B(0) = 0", is_zero(B_G.subs(Gs, 0))))
        zc_expected = -sp.log(sp.exp(-2 * zc0) + 2 * a * eta_Z * Gs) / 2
        B_expected = pi / 2 * sp.log(1 + 2 * a * eta_Z * sp.exp(2 * zc0) * Gs)
        results.append(
            ("z_c = -1/2 ln(exp(-2 z_c0) + 2 a eta_Z Gamma)", is_zero(zc_Gs - zc_expected))
        )
        results.append(
            ("B = (pi/2) ln(1 + 2 a eta_Z exp(2 z_c0) Gamma)", is_zero(B_G - B_expected))
        )
        Bh_expected = (
            pi / 2 * sp.log(1 + a * sp.exp(2 * zc0) * (M - 1) * eta_Z * h**2 / (M * eta_Y * pi))
        )
        results.append(
            (
                "with CF3: B = (pi/2) ln(1 + a e^{2 z_c0} (M-1) eta_Z h^2 / (M eta_Y pi))",
                is_zero(B_h - Bh_expected),
            )
        )
        results.append(
            (
                f"B(t_0) = {B_t0_rho} is free of eta_Y at fixed rho = eta_Z/eta_Y",
                eta_Y not in B_t0_rho.free_symbols,
            )
        )
        # Sign of dB/d eta_Z for M > 1, h > 0 (write M = 1 + m, m > 0).
        m_pos, h_pos = sp.symbols("m h_+", positive=True)
        dB_deta_Z = sp.simplify(sp.diff(B_h, eta_Z).subs(M, 1 + m_pos).subs(h, h_pos))
        results.append(
            (f"dB/d eta_Z = {dB_deta_Z} > 0 at fixed h > 0, M > 1", dB_deta_Z.is_positive is True)
        )
        tt = sp.Symbol("T", positive=True)
        snap_limit = sp.limit(B_snap.subs(t, tt) / sp.log(sp.log(tt)), tt, sp.oo)
        results.append((f"snapping: B / ln ln t -> {snap_limit}", is_zero(snap_limit - pi)))
        # dB/d eta_Y (fixed t, eta_Z) has the sign of S(h): > 0 while scanning,
        # still > 0 at t_0 (S(ln(M-1)) = 2M - 4), < 0 once h is large.
        factor = sp.simplify((dB_deta_Y / S_sign).subs(M, 1 + m_pos).subs(h, h_pos))
        results.append(
            ("dB/d eta_Y at fixed t = (positive factor) * S(h)", factor.is_positive is True)
        )
        s_t0 = sp.simplify(S_sign.subs(h, sp.log(M - 1)))
        s_inf = sp.limit(S_sign.subs(M, 1 + m_pos), h, sp.oo)
        s_0 = sp.limit(S_sign / h, h, 0)
        results.append(
            (
                f"S(h)/h -> {s_0} as h -> 0, S(ln(M-1)) = {s_t0}, S -> {s_inf} as h -> oo",
                is_zero(s_0 - M) and is_zero(s_t0 - (2 * M - 4)) and s_inf == -sp.oo,
            )
        )

        # scipy Radau on the joint system (h, z_c, B) against the closed form.
        par = {M: 10, eta_Y: 1.0, eta_Z: 0.5, pi: 0.5, a: 0.3, zc0: 0.2}
        f_B = sp.lambdify(syms, B_t, modules="mpmath")
        f_z = sp.lambdify(syms, zc_t, modules="mpmath")
        m_, ey, ez, p_, a_, z0 = (float(par[k]) for k in (M, eta_Y, eta_Z, pi, a, zc0))

        def rhs(_, y):
            hh, zc, _B = y
            gam = hh * (m_ - 1) / (np.exp(hh) + m_ - 1)
            return [
                ey * p_ * m_ / (np.exp(hh) + m_ - 1),
                -a_ * ez * gam * np.exp(2 * zc),
                ez * p_ * gam * a_ * np.exp(2 * zc),
            ]

        t0 = float(cf2_speed_control.derive().lambdify("t0")(m_, ey, p_))
        times = t0 * np.array([0.01, 0.1, 1.0, 10.0, 100.0])
        sol = solve_ivp(
            rhs,
            (0, times[-1]),
            [0.0, z0, 0.0],
            method="Radau",
            t_eval=times,
            rtol=1e-11,
            atol=1e-14,
        )
        with mpmath.workdps(30):
            args = [mpmath.mpf(x) for x in (m_, ey, ez, p_, a_, z0)]
            B_cf = np.array([float(f_B(mpmath.mpf(x), *args)) for x in times])
            z_cf = np.array([float(f_z(mpmath.mpf(x), *args)) for x in times])
        err_B = float(np.max(np.abs(sol.y[2] / B_cf - 1)))
        err_z = float(np.max(np.abs(sol.y[1] / z_cf - 1)))
        results.append(
            (
                f"scipy Radau vs closed form on [0, 100 t_0]: "
                f"rel err B {err_B:.1e}, z_c {err_z:.1e}",
                sol.success and max(err_B, err_z) < 1e-8,
            )
        )
        # At large t a larger eta_Y (fixed eta_Z) gives a smaller B.
        with mpmath.workdps(30):
            big = 1e6 * t0
            b1 = f_B(mpmath.mpf(big), *args)
            args2 = list(args)
            args2[1] = 2 * args2[1]
            b2 = f_B(mpmath.mpf(big), *args2)
        results.append(
            (
                f"larger eta_Y gives smaller B at t = 1e6 t_0 "
                f"({mpmath.nstr(b2, 6)} < {mpmath.nstr(b1, 6)})",
                b2 < b1,
            )
        )
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "u = exp(-2 z_c) obeys u' = 2 a eta_Z gamma, so "
            "z_c = -1/2 ln(exp(-2 z_c0) + 2 a eta_Z Gamma) and "
            "B = (pi/2) ln(1 + 2 a eta_Z exp(2 z_c0) Gamma); "
            "with CF3 Gamma = (M-1) h^2/(2 M eta_Y pi)."
        ),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=B_t,
        symbols=syms,
        targets={
            "main": (B_t, syms),
            "B": (B_t, syms),
            "z_c": (zc_t, syms),
            "B_Gamma": (B_G, gsyms),
            "z_c_Gamma": (zc_Gs, gsyms),
            "B_h": (B_h, (h, M, eta_Y, eta_Z, pi, a, zc0)),
        },
        checker=checker,
    )
