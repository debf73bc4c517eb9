"""CF8: the heavy ball's slow manifold, the first-order phase of its optimiser flow.

The heavy-ball ODE ``theta' = u``, ``u' = a F(theta) - b u`` (docs/optimisers.md; ``a = 1``,
``b = 1 - mu`` or the matched ``b = -ln mu``, ``a = b/(1 - mu)``) relaxes its velocity at
the rate ``b`` onto an invariant manifold ``u = h(theta)``, the graph on which the flow is
first order. With ``c = a/b`` and ``epsilon = a/b^2`` (the inertia in flow time,
``eta/(1 - mu)^2`` with the plain rates, docs/optimisers.md) this module derives, with sympy:

1. the invariance equation ``h'(theta) h = a F - b h`` solved order by order in
   ``epsilon`` for a generic scalar force ``F``: ``h = c [F - epsilon F' F + epsilon^2 (2
   F'^2 F + F'' F^2) + O(epsilon^3)]``, checked by substitution;
2. the same for a linear vector force ``F = M theta + f`` (``M`` a generic 2 x 2
   matrix): ``h = c [F - epsilon M F + 2 epsilon^2 M^2 F]``, so the vector
   reading of item 1 is ``F'F`` (the Jacobian times ``F``) and ``F''[F, F]``
   (residuals ``O(epsilon^2)`` with ``b = c/epsilon``: ``h`` to ``O(epsilon^3)``);
3. for ``F = lambda theta``: the manifold's rate ``c lambda (1 - epsilon lambda + 2
   epsilon^2 lambda^2 + ...)`` is the series of the slow root ``(-b + sqrt(b^2 + 4 a
   lambda))/2`` of ``r^2 + b r = a lambda``, which converges for ``4 epsilon |lambda| <
   1``: the first-order phase exists while the inertia times the field's rates is small,
   and the next term ``h_2`` measures the truncation
   (:mod:`odeflow.fields.optimizers.slow_manifold` switches on it).
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from . import Derivation, combine, is_zero, make_latex

NAME = "CF8"
TITLE = "Heavy ball: slow manifold u = h(theta) and its first-order phase"
EQUATION = "Sec. 8 optimisers (docs/optimisers.md)"


def _scalar_manifold(order: int = 2):
    """``(h, residual, eps, c, F, x)``: the manifold to ``order`` in ``eps`` for a scalar
    ``F(x)`` and the invariance residual ``h' h - a F + b h`` with ``a = c b``, ``eps = c/b``."""
    x = sp.Symbol("theta")
    c, b = sp.symbols("c b", positive=True)
    eps = sp.Symbol("epsilon", positive=True)
    F = sp.Function("F")(x)
    terms = [F]
    coeffs = sp.symbols(f"A1:{order + 1}", cls=sp.Function)
    h = c * (F + sum(eps**k * coeffs[k - 1](x) for k in range(1, order + 1)))
    for k in range(1, order + 1):
        res = sp.expand((sp.diff(h, x) * h - c * b * F + b * h).subs(b, c / eps))
        part = sp.expand(res * eps).coeff(eps, k)  # the eps^(k-1) part, times eps
        known = part.subs({coeffs[j](x): terms[j + 1] for j in range(k - 1)}).doit()
        sol = sp.solve(known, coeffs[k - 1](x))[0]
        terms.append(sp.simplify(sol))
        h = h.subs(coeffs[k - 1](x), sol).doit()
    residual = sp.expand((sp.diff(h, x) * h - c * b * F + b * h).subs(b, c / eps))
    return sp.expand(h), residual, eps, c, F, x


def _vector_residual():
    """The invariance residual of ``h = c (F - eps M F + 2 eps^2 M^2 F)`` for ``F = M x + f``
    (2 x 2), in powers of ``eps``."""
    M = sp.Matrix(2, 2, sp.symbols("m11 m12 m21 m22"))
    x = sp.Matrix(sp.symbols("x1 x2"))
    f = sp.Matrix(sp.symbols("f1 f2"))
    c, eps = sp.symbols("c epsilon", positive=True)
    F = M * x + f
    h = c * (F - eps * M * F + 2 * eps**2 * M * M * F)
    b = c / eps
    residual = h.jacobian(x) * h - c * b * F + b * h
    return residual.applyfunc(lambda e: sp.expand(e * eps)), eps


@cache
def _derived():
    h, residual, eps, c, F, x = _scalar_manifold()
    want = c * (F - eps * sp.diff(F, x) * F
                + eps**2 * (2 * sp.diff(F, x)**2 * F + sp.diff(F, x, 2) * F**2))
    lam, a, b = sp.symbols("lambda a b", positive=True)
    root = (-b + sp.sqrt(b**2 + 4 * a * lam)) / 2
    e = sp.Symbol("epsilon", positive=True)
    series = sp.series(root.subs(a, e * b**2), e, 0, 3).removeO()
    linear = sp.expand(b * e * lam * (1 - e * lam + 2 * e**2 * lam**2))
    return {"h": h, "want": want, "residual": residual, "eps": eps, "series": series,
            "linear": linear, "e": e}


def derive() -> Derivation:
    """The slow manifold of the heavy ball (module docstring)."""
    d = _derived()
    eps = d["eps"]
    exprs = {"h": sp.Eq(sp.Symbol("h"), d["h"]),
             "slow_root": sp.Eq(sp.Symbol("r_slow"), d["series"])}

    def checker():
        res = [("scalar: h = c [F - eps F'F + eps^2 (2 F'^2 F + F'' F^2)] + O(eps^3)",
                is_zero(sp.expand(d["h"] - d["want"]))),
               ("scalar: residual h'h - aF + bh (b = c/eps) is O(eps^2)",
                all(is_zero(d["residual"].coeff(eps, k)) for k in range(0, 2)))]
        vec, veps = _vector_residual()
        res.append(("linear vector F = M x + f: residual of c (F - eps MF + 2 eps^2 M^2 F) "
                    "is O(eps^2)",
                    all(is_zero(entry.coeff(veps, k)) for entry in vec for k in range(0, 3))))
        e = d["e"]
        res.append(("F = lambda theta: the manifold's rate is the series of the slow root "
                    "(-b + sqrt(b^2 + 4 a lambda))/2 (a = eps b^2) to O(eps^3)",
                    is_zero(sp.expand(d["series"] - d["linear"]).coeff(e, 1))
                    and is_zero(sp.expand(d["series"] - d["linear"]).coeff(e, 2))))
        return combine(res)

    expr = d["linear"]
    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "The heavy-ball ODE theta' = u, u' = a F - b u relaxes onto the invariant manifold "
            "u = c [F - eps F'F + eps^2 (2 F'F'F + F''[F, F]) + O(eps^3)], c = a/b, eps = "
            "a/b^2, derived from the invariance equation order by order and checked by "
            "substitution (scalar F, linear vector F); for F = lambda theta it is the series "
            "of the slow root, convergent for 4 eps |lambda| < 1."
        ),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=expr,
        symbols=tuple(sorted(expr.free_symbols, key=str)),
        targets={"main": (expr, tuple(sorted(expr.free_symbols, key=str)))},
        checker=checker,
    )
