"""CF1: the decoder logit margin ``h(t)`` (Lemma 6, Eqns 44-45).

The reduced flow of Theorem 1 gives, for uniform class weights,

.. math:: \\dot h = \\frac{\\eta_Y \\pi M}{e^{h} + M - 1}, \\qquad h(0) = 0
   \\qquad \\text{(Eqn 44)}.

Separating variables yields the implicit solution
``exp(h) - 1 + (M - 1) h = eta_Y pi M t`` and sympy's ``solve`` turns it into
the Lambert-W form of Eqn 45.
"""

from __future__ import annotations

from functools import cache

import mpmath
import sympy as sp

from . import SYM, Derivation, combine, is_zero, log_uniform, make_latex, mp_check_points

NAME = "CF1"
TITLE = "Decoder logit margin h(t)"
EQUATION = "Lemma 6, Eqns 44-45"


@cache
def derive() -> Derivation:
    """Derive the explicit decoder margin ``h(t)`` (Eqns 44-45).

    Steps: (i) state Eqn 44 as a sympy ODE; (ii) separate variables,
    ``(exp(h) + M - 1) dh = eta_Y pi M dt``, and integrate both sides from 0
    (``h(0) = 0``); (iii) let ``sympy.solve`` invert the implicit relation,
    which produces a Lambert-W expression.

    Returns
    -------
    Derivation
        ``exprs`` holds ``ode``, ``implicit``, ``h`` (sympy's own output),
        ``h_log`` (the form ``log(M-1) + log W`` used numerically) and ``h0``
        (the value at ``t = 0``); the main target is ``h(t)`` with symbols
        ``(t, M, eta_Y, pi)``.
    """
    t, s, M, eta_Y, pi, h = SYM.t, SYM.s, SYM.M, SYM.eta_Y, SYM.pi, SYM.h
    A = eta_Y * pi * M
    hf = sp.Function("h")
    H = sp.Dummy("H")

    # Eqn 44.
    rhs_of = sp.Lambda(H, A / (sp.exp(H) + M - 1))
    ode = sp.Eq(hf(t).diff(t), rhs_of(hf(t)))

    # Separation of variables: dh / rhs(h) = dt, integrated from (0, 0).
    lhs = sp.integrate(1 / rhs_of(H) * A, (H, 0, h))  # int_0^h (e^H + M - 1) dH
    rhs = sp.integrate(A, (s, 0, t))
    implicit = sp.Eq(sp.expand(lhs), rhs)

    # Invert with sympy: the output is sympy's, not typed in by hand.
    solutions = sp.solve(implicit, h)
    if len(solutions) != 1:
        raise RuntimeError(f"expected one solution of {implicit}, got {solutions}")
    h_t = solutions[0]
    if not h_t.has(sp.LambertW):
        raise RuntimeError(f"sympy's solution {h_t} does not contain LambertW")

    # Form used numerically: with x = (eta_Y pi M t + 1)/(M - 1) and
    # W = LambertW(exp(x)/(M - 1)) (= wrightomega(x - log(M - 1))), the
    # relation W exp(W) = exp(x)/(M - 1) turns h = x - W into
    # h = log(M - 1) + log(W), which has no cancellation for large t.
    x = (A * t + 1) / (M - 1)
    h_log = sp.log(M - 1) + sp.log(sp.LambertW(sp.exp(x) / (M - 1)))

    exprs = {
        "ode": ode,
        "implicit": implicit,
        "h": h_t,
        "h_log": sp.Eq(sp.Symbol("h"), h_log),
        "h0": sp.Eq(hf(0), 0),
    }
    syms = (t, M, eta_Y, pi)

    def checker() -> tuple[bool, str]:
        results = []
        # (a) sympy produced a LambertW expression.
        results.append(("sympy.solve output contains LambertW", h_t.has(sp.LambertW)))

        # (b) implicit differentiation of the implicit form gives Eqn 44 back.
        hp = sp.Symbol("hp")
        d_implicit = sp.diff(implicit.lhs.subs(h, hf(t)) - implicit.rhs, t)
        d_implicit = d_implicit.subs(hf(t).diff(t), hp).subs(hf(t), h)
        hp_sol = sp.solve(d_implicit, hp)
        ok = len(hp_sol) == 1 and is_zero(hp_sol[0] - rhs_of(h))
        results.append(("d/dt of the implicit form reproduces Eqn 44", ok))

        # (c) substitution of h(t) into Eqn 44: residual simplifies to 0 once
        #     W = LambertW(z) is eliminated through its defining relation
        #     W exp(W) = z, i.e. x = W + log W + log(M - 1).
        residual = sp.diff(h_t, t) - rhs_of(h_t)
        w = sp.Symbol("w", positive=True)
        lambert_args = [f.args[0] for f in residual.atoms(sp.LambertW)]
        res_w = residual
        for arg in lambert_args:
            res_w = res_w.subs(sp.LambertW(arg), w)
        t_of_w = sp.solve(sp.Eq(x, w + sp.log(w) + sp.log(M - 1)), t)[0]
        res_w = res_w.subs(t, t_of_w)
        res_w = res_w.replace(sp.exp, lambda arg: sp.exp(sp.expand(sp.cancel(arg))))
        sym_ok = not res_w.has(sp.LambertW) and is_zero(res_w)
        results.append(("residual of Eqn 44 simplifies to 0 (symbolic, via W e^W = z)", sym_ok))

        # (d) the same residual at random points with mpmath.  h = x - W
        #     cancels about log10(eta_Y pi M t) digits, so the first set keeps
        #     eta_Y pi M t <= 1e6 at 50 digits and the second spans the full
        #     parameter range with 30 guard digits.
        f_res = sp.lambdify(syms, residual / rhs_of(h_t), modules="mpmath")

        def sampler_moderate(rng):
            return (
                log_uniform(rng, 1e-6, 1e3),
                log_uniform(rng, 2, 1e3),
                log_uniform(rng, 1e-4, 1),
                log_uniform(rng, 1e-3, 1),
            )

        def sampler_full(rng):
            return (
                log_uniform(rng, 1e-6, 1e12),
                log_uniform(rng, 2, 1e6),
                log_uniform(rng, 1e-4, 1e4),
                log_uniform(rng, 1e-3, 1),
            )

        ok, detail = mp_check_points(f_res, sampler_moderate, n=50, dps=50, tol=1e-40)
        results.append(("relative residual of Eqn 44 (mpmath): " + detail, ok))
        ok, detail = mp_check_points(f_res, sampler_full, n=50, dps=80, tol=1e-40, seed=7)
        results.append(("relative residual of Eqn 44, full range (mpmath): " + detail, ok))

        # (e) initial condition and equivalence with the log form.
        f_h = sp.lambdify(syms, h_t, modules="mpmath")
        f_om = sp.lambdify(syms, h_log, modules="mpmath")
        with mpmath.workdps(50):
            mpf = mpmath.mpf
            worst0 = max(abs(f_h(mpf(0), mpf(m), mpf(1), mpf(1))) for m in (2, 3, 10, 1000, 10**6))
            worst_om = max(
                abs(f_h(*p) - f_om(*p)) / abs(f_h(*p))
                for p in (
                    (mpf(tt), mpf(m), mpf(1), mpf("0.5"))
                    for tt in ("1e-3", 1, 1000)
                    for m in (2, 7, 1000)
                )
            )
        results.append((f"h(0) = 0 (max |h(0)| = {mpmath.nstr(worst0, 3)})", worst0 < 1e-45))
        results.append(
            (
                f"x - W form == log(M-1) + log(W) form (max rel diff {mpmath.nstr(worst_om, 3)})",
                worst_om < 1e-40,
            )
        )
        return combine(results)

    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "Separation of variables in Eqn 44 gives exp(h) - 1 + (M-1) h = eta_Y pi M t; "
            "sympy.solve inverts it with the Lambert W function (Eqn 45)."
        ),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=h_t,
        symbols=syms,
        targets={"main": (h_t, syms), "h_log": (h_log, syms)},
        checker=checker,
    )
