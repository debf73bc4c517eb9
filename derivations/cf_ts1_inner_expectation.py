"""CF-TS1: the inner expectation ``g(v) = E_x[y ReLU(x^T v)]`` of the two-stage model.

Model (odeflow's own, built from the abstract of Gong et al. 2025, arXiv
2502.20681; docs/two_stage): an example ``x = (p, q)`` with label ``y = +-1``;
a present margin block is ``y (gamma + |c|) w + z_perp`` (the half-space
Gaussian ``y gamma w + z``, ``z ~ N(0, I)`` conditioned on ``y <z, w> >= 0``,
with ``c ~ N(0, 1)``); an absent block is ``N(0, I)``; the cluster Q is ``z``
for ``y = +1`` and ``z + s zeta w_Q`` for ``y = -1``.

Steps derived and checked here:

1. Label symmetry: ``ReLU(s) - ReLU(-s) = s``, so for any law with
   ``x | y=-1 ~ -x | y=+1`` (every margin block and every label-blind block),
   ``E[y ReLU(x^T v)] = E[y x]^T v / 2`` exactly; ``E|c| = sqrt(2/pi)`` gives
   ``E[y x] = (1 - rho)(gamma + sqrt(2/pi)) w`` per block.
2. Each label's projection of a half-space Gaussian block plus Gaussian noise is
   ``m + u |c| + s Z`` (a shifted skew-normal). Its ``E[ReLU]`` is
   ``R(m, u, s) = 2 tau phi(m/tau) Phi(-m u/(s tau)) + m Phi(m/tau)
   + 2 m T(m/tau, u/s) + 2 u phi(0) Phi(m/s)``, ``tau^2 = u^2 + s^2``,
   ``T`` Owen's function. Checked by substitution: ``d^2R/dm^2`` is the
   skew-normal density ``(2/tau) phi(m/tau) Phi(-m u/(s tau))`` at ``-m``
   (through ``T``'s partial derivatives, themselves checked by quadrature),
   ``R`` is positively homogeneous of degree one, and ``R`` equals the
   expectation by 40-digit quadrature.
"""

from __future__ import annotations

import mpmath
import numpy as np
import sympy as sp

from . import Derivation, combine, is_zero, make_latex, mp_check_points

NAME = "CF-TS1"
TITLE = "Two-stage model: inner expectation E[y ReLU(x^T v)], skew-normal"
EQUATION = "odeflow two-stage model, inner expectation (docs/two_stage)"


def _phi(x):
    return sp.exp(-x**2 / 2) / sp.sqrt(2 * sp.pi)


def _Phi(x):
    return (1 + sp.erf(x / sp.sqrt(2))) / 2


class OwenT(sp.Function):
    """Owen's ``T(h, a) = (1/2pi) int_0^a exp(-h^2 (1 + x^2)/2) / (1 + x^2) dx``.

    Its partial derivatives (differentiation under the integral sign, checked
    against quadrature in :func:`derive`): ``dT/dh = -phi(h) (Phi(a h) - 1/2)``,
    ``dT/da = exp(-h^2 (1 + a^2)/2) / (2 pi (1 + a^2))``.
    """

    nargs = 2
    #: Numeric value for :func:`sympy.lambdify` (mpmath quadrature of the integral).
    _imp_ = staticmethod(lambda h, a: _mp_owens_t(h, a))

    def fdiff(self, argindex=1):
        h, a = self.args
        if argindex == 1:
            return -_phi(h) * (_Phi(a * h) - sp.Rational(1, 2))
        return sp.exp(-h**2 * (1 + a**2) / 2) / (2 * sp.pi * (1 + a**2))


def _symbols():
    m = sp.Symbol("m", real=True)
    u = sp.Symbol("u", real=True)
    s = sp.Symbol("s", positive=True)
    return m, u, s


def relu_skew_expr(T=OwenT):
    """The stated ``R(m, u, s)`` and ``tau`` as sympy expressions (``T`` a callable)."""
    m, u, s = _symbols()
    tau = sp.sqrt(u**2 + s**2)
    R = (2 * tau * _phi(m / tau) * _Phi(-m * u / (s * tau)) + m * _Phi(m / tau)
         + 2 * m * T(m / tau, u / s) + 2 * u * _phi(0) * _Phi(m / s))
    density = 2 / tau * _phi(m / tau) * _Phi(-m * u / (s * tau))
    return R, density, (m, u, s)


def _mp_owens_t(h, a):
    return mpmath.quad(lambda x: mpmath.exp(-h**2 * (1 + x**2) / 2) / (1 + x**2), [0, a]) \
        / (2 * mpmath.pi)


def _mp_relu_skew(m, u, s):
    tau = mpmath.sqrt(u**2 + s**2)
    phi = lambda x: mpmath.npdf(x)  # noqa: E731
    Phi = lambda x: mpmath.ncdf(x)  # noqa: E731
    return (2 * tau * phi(m / tau) * Phi(-m * u / (s * tau)) + m * Phi(m / tau)
            + 2 * m * _mp_owens_t(m / tau, u / s) + 2 * u * phi(0) * Phi(m / s))


def _mp_expectation(m, u, s):
    """``E[ReLU(m + u|c| + s Z)]`` by quadrature over ``c >= 0`` of the Gaussian ``E[ReLU]``."""
    def inner(c):
        mean = m + u * c
        return (s * mpmath.npdf(mean / s) + mean * mpmath.ncdf(mean / s)) * 2 * mpmath.npdf(c)
    return mpmath.quad(inner, [0, 1, 4, mpmath.inf])


def _checks(R, density, m, u, s, relu, x, half_normal_mean) -> tuple[bool, str]:
    """Every check of :func:`derive` (``(passed, detail)``)."""
    results = []
    sym_x = sp.Symbol("x", real=True)
    diff_pos = (relu - relu.subs(x, -x)).subs(x, sym_x).rewrite(sp.Piecewise)
    ok_sym = all(sp.simplify(diff_pos.subs(sym_x, val) - val) == 0
                 for val in (sp.Rational(-3, 2), 0, sp.Rational(5, 7)))
    xp, xn = sp.Symbol("xp", positive=True), sp.Symbol("xn", negative=True)
    ok_sym = ok_sym and sp.simplify(sp.Max(0, xp) - sp.Max(0, -xp) - xp) == 0 \
        and sp.simplify(sp.Max(0, xn) - sp.Max(0, -xn) - xn) == 0
    results.append(("ReLU(x) - ReLU(-x) = x (so g(v) = E[y x]^T v / 2 for a "
                    "label-symmetric law)", ok_sym))
    results.append(("E|c| = sqrt(2/pi): mu per block = (1 - rho)(gamma + sqrt(2/pi))",
                    is_zero(half_normal_mean - sp.sqrt(2 / sp.pi))))
    second = sp.diff(R, m, 2)
    results.append(("d^2 R/dm^2 = skew-normal density (2/tau) phi(m/tau) Phi(-m u/(s tau)) "
                    "(symbolic, through T's partial derivatives)",
                    is_zero(second - density)))
    h, a = sp.symbols("h a", real=True)
    worst = mpmath.mpf(0)
    with mpmath.workdps(40):
        for hh, aa in ((0.3, 1.7), (-1.2, 0.4), (2.1, -0.8)):
            hh, aa = mpmath.mpf(hh), mpmath.mpf(aa)
            for k, var in enumerate((h, a)):
                stated = OwenT(h, a).diff(var).subs({h: hh, a: aa}).evalf(40)
                numeric = mpmath.diff(lambda v, k=k, hh=hh, aa=aa: _mp_owens_t(v, aa) if k == 0
                                      else _mp_owens_t(hh, v), hh if k == 0 else aa)
                worst = max(worst, abs(mpmath.mpf(str(stated)) - numeric))
    results.append((f"T's stated partial derivatives vs quadrature (40 digits): max "
                    f"residual {mpmath.nstr(worst, 3)}", worst < 1e-30))
    with mpmath.workdps(40):
        hom = max(abs(_mp_relu_skew(lam * mm, lam * uu, lam * ss)
                      - lam * _mp_relu_skew(mm, uu, ss))
                  for lam, mm, uu, ss in ((mpmath.mpf(2.5), mpmath.mpf(0.3), mpmath.mpf(-1.1),
                                           mpmath.mpf(0.7)),
                                          (mpmath.mpf(0.2), mpmath.mpf(-1.3), mpmath.mpf(0.4),
                                           mpmath.mpf(1.9))))
    results.append((f"R positively homogeneous of degree 1 (40 digits: max residual "
                    f"{float(hom):.1e})", hom < 1e-30))

    def residual(mm, uu, ss):
        return (_mp_relu_skew(mm, uu, ss) - _mp_expectation(mm, uu, ss)) \
            / (abs(_mp_expectation(mm, uu, ss)) + mpmath.mpf(10)**-30)

    def sampler(rng):
        return (mpmath.mpf(rng.uniform(-2.5, 2.5)), mpmath.mpf(rng.uniform(-2.5, 2.5)),
                mpmath.mpf(rng.uniform(0.15, 2.0)))

    ok, text = mp_check_points(residual, sampler, n=12, dps=40, tol=1e-25)
    results.append((f"R = E[ReLU(m + u|c| + s Z)] by quadrature: {text}", ok))
    results.append(_numpy_twin_check())
    return combine(results)


def derive() -> Derivation:
    """Derive the label-symmetry reduction and the skew-normal ``E[ReLU]``.

    Returns
    -------
    Derivation
        Main target: ``R(m, u, s)`` with Owen's ``T`` as its integral, symbols
        ``(m, u, s)``.
    """
    R, density, (m, u, s) = relu_skew_expr()
    x = sp.Symbol("x", real=True)
    c = sp.Symbol("c", nonnegative=True)
    gamma = sp.Symbol("gamma", positive=True)
    rho = sp.Symbol("rho", nonnegative=True)
    relu = sp.Max(0, x)
    half_normal_mean = sp.integrate(c * 2 * sp.exp(-c**2 / 2) / sp.sqrt(2 * sp.pi), (c, 0, sp.oo))
    mu_block = (1 - rho) * (gamma + half_normal_mean)
    exprs = {
        "symmetry": sp.Eq(sp.Symbol("ReLU(x) - ReLU(-x)"), x),
        "g_margin": sp.Eq(sp.Symbol("g(v)"), sp.Symbol("mu")**sp.Symbol("T") * sp.Symbol("v") / 2),
        "mu_block": sp.Eq(sp.Symbol("|mu_block|"), mu_block),
        "relu_skew": sp.Eq(sp.Symbol("R"), R),
        "density": sp.Eq(sp.Symbol("f_V(-m)"), density),
    }
    syms = (m, u, s)

    def checker() -> tuple[bool, str]:
        return _checks(R, density, m, u, s, relu, x, half_normal_mean)

    return Derivation(
        name=NAME, title=TITLE, equation=EQUATION,
        summary=(
            "Since ReLU(s) - ReLU(-s) = s, a label-symmetric example law (x | y=-1 ~ -x | y=+1, "
            "true of every margin block and every label-blind block) gives g(v) = E[y x]^T v/2 "
            "exactly: with a margin Q the attention's population output is linear in the key, "
            "f(x_q) = mu^T W x_q / 2 with mu = (1-rho)(gamma + sqrt(2/pi)) w per block. The "
            "cluster Q breaks the symmetry; there each label's projection is a shifted "
            "skew-normal m + u|c| + s Z, whose E[ReLU] is R(m, u, s) in Phi, phi and Owen's T "
            "(second m-derivative = the skew-normal density, homogeneous of degree one, equal "
            "to 40-digit quadrature)."),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=R,
        symbols=syms,
        targets={"main": (R, syms), "density": (density, syms)},
        checker=checker,
    )


def _numpy_twin_check() -> tuple[str, bool]:
    """odeflow's float implementation (:func:`odeflow.fields.two_stage.expectations.relu_skew`)
    against the 40-digit value."""
    from odeflow.fields.two_stage.expectations import relu_skew

    rng = np.random.default_rng(9)
    worst = 0.0
    with mpmath.workdps(30):
        for _ in range(8):
            mm, uu, ss = rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(0.2, 2)
            exact = float(_mp_expectation(mpmath.mpf(mm), mpmath.mpf(uu), mpmath.mpf(ss)))
            worst = max(worst, abs(float(relu_skew(mm, uu, ss)[0]) - exact) / max(exact, 1e-12))
    return f"odeflow's relu_skew vs quadrature: max relative error {worst:.1e}", worst < 1e-10
