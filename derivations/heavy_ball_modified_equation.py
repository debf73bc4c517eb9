"""CF7: the heavy-ball and Adam ODEs against their unit-step recursions (docs/optimisers.md).

The paper trains with SGD + momentum (``u_{k+1} = mu u_k + F(theta_k)``,
``theta_{k+1} = theta_k + u_{k+1}``, ``u = eta v``) and Adam; docs/optimisers.md models
them by ODEs in step time ``s``. This module derives, with sympy, what those ODEs
get right and wrong at unit steps, and so which start, reading and rates
:class:`odeflow.fields.optimizers.OptimizerFlow` offers:

1. the plain ODE ``theta' = u, u' = F - (1 - mu) u`` from rest under a constant
   ``F``: ``theta(s) = theta_0 + F [s - (1 - e^{-(1-mu) s})/(1 - mu)]/(1 - mu)``
   (``dsolve``, checked by substitution);
2. the recursion under a constant ``F``: ``theta_k = theta_0 + t_k F`` with the
   warm-up map ``t_k = [k - mu (1 - mu^k)/(1 - mu)]/(1 - mu)`` (``rsolve`` and a
   sum), the warm-up time map of docs/optimisers.md;
3. the lag: ``theta(k + delta) - theta_k -> 0`` as ``k -> oo`` for ``delta = 1``
   (plain rates: the ODE from rest lags the recursion one step) and for
   ``delta* = 1/b - mu/(1 - mu)`` with the matched rates ``b = -ln mu``,
   ``a = b/(1 - mu)`` (``delta* -> 1/2`` as ``mu -> 1``);
4. the modified equation of the recursion with step ``h`` (``u_{k+1} = u_k +
   h (f(theta_k) - gamma u_k)``, ``theta_{k+1} = theta_k + h u_{k+1}``, ``gamma =
   1 - mu`` at ``h = 1``) for a generic force ``f``: read forward (``theta_k``
   at ``s = k h``) its one-step defect in ``theta`` is ``-h^2 (f - gamma u)/2``
   (first order); read *staggered* (``theta_k`` at ``s = (k + 1/2) h``, ``u_k`` at
   ``s = k h``) the defect in ``theta`` is ``O(h^3)`` (the midpoint rule) and the
   one in ``u`` is ``gamma h^2 (f - gamma u)/2``: first order only through the
   damping, which is small (``gamma = 0.1``); the matched rates make the
   recursion exact for a constant force. Hence the default reading offset
   ``1/2`` of :class:`odeflow.Momentum`;
5. Adam's moments: ``m' = k (g - m)``, ``m(0) = 0`` with a constant ``g`` gives
   ``m_hat = m/(1 - b^s) = g`` at every ``s`` iff ``k = -ln b`` (the matched rate),
   whereas the plain ``k = 1 - b`` gives ``m_hat -> (1 - b)/(-ln b) g`` at
   ``s -> 0`` (0.949 g at ``b = 0.9``);
6. Adam's modified equation, with step ``h`` and the matched rates (``m_{k+1} =
   e^{-k_1 h} m_k + (1 - e^{-k_1 h}) g(theta_k)``, ``v`` likewise with ``G = g^2``,
   ``theta_{k+1} = theta_k + h U(m_{k+1}, v_{k+1}, (k+1) h)``, ``U`` the bias-corrected
   update ``eta m_hat / (sqrt(v_hat) + eps)`` as a generic function): the update takes
   the *new* moments, as the heavy ball takes the new velocity. Read forward
   (``theta_k``, ``m_k``, ``v_k`` all at ``s = k h``) the one-step defects in ``theta``
   and ``m`` are ``O(h^2)`` (first order: ``-(h^2/2) dU/ds`` along the ODE and
   ``(h^2/2) k_1 g'(theta) U``); read *staggered* (``theta_k`` at ``s = (k + 1/2) h``, the moments
   at ``s = k h``) all three defects are ``O(h^3)``: the recursion is the ODE's
   midpoint rule, second order. Hence ``Adam(offset=1/2)`` of
   :class:`odeflow.Adam`. (The bias corrections make ``U`` vary on the scale of
   *steps* near ``s = 0``, so a start after a fixed number of exact steps keeps a
   first-order term from the first steps, with a small constant; the tests measure
   order 2 when the exact steps cover a fixed time.)

The measured consequences are in ``docs/optimisers.md``.
"""

from __future__ import annotations

from functools import cache

import mpmath
import sympy as sp

from . import Derivation, combine, is_zero, make_latex

NAME = "CF7"
TITLE = "Heavy-ball and Adam ODEs vs their recursions (time map, lag, modified equation)"
EQUATION = "Sec. 8 optimisers in step time (docs/optimisers.md)"

s = sp.Symbol("s", nonnegative=True)
mu = sp.Symbol("mu", positive=True)
k = sp.Symbol("k", integer=True, nonnegative=True)
h = sp.Symbol("h", positive=True)
gamma = sp.Symbol("gamma", positive=True)
F = sp.Symbol("F", real=True)
beta = sp.Symbol("b", positive=True)


def _momentum_branch(expr):
    """The branch of a sympy Piecewise that holds for ``0 < mu < 1`` (tested at mu = 1/2)."""
    expr = sp.piecewise_fold(expr)
    if isinstance(expr, sp.Piecewise):
        for value, cond in expr.args:
            if bool(cond.subs(mu, sp.Rational(1, 2))):
                return value
    return expr


def _lie_derivative(field):
    """``expr -> d expr / ds`` along the autonomous ODE ``var' = field[var]``."""
    def d(expr):
        return sum(sp.diff(expr, var) * rate for var, rate in field.items())

    return d


def _taylor_coefficients(field, point, variables, order):
    """``{var: [c_0 .. c_order]}``: Taylor coefficients in ``s`` of the solution of ``var' =
    field[var]`` through ``point`` (``var(s) = sum_n c_n s^n``), for each of ``variables``."""
    d = _lie_derivative(field)
    out = {}
    for var in variables:
        terms, expr = [], var
        for n in range(order + 1):
            terms.append((expr / sp.factorial(n)).subs(point))
            expr = d(expr)
        out[var] = terms
    return out


def _taylor(theta0, u0, f, gam, order):
    """Taylor coefficients in ``s`` of ``theta(s), u(s)``: ``theta' = u, u' = f(theta) - gam u``."""
    th, uu = sp.symbols("theta_, u_")
    coeffs = _taylor_coefficients({th: uu, uu: f(th) - gam * uu}, {th: theta0, uu: u0},
                                  (th, uu), order)
    return [coeffs[th], coeffs[uu]]


def _series(coeffs, x):
    return sum(c * x**n for n, c in enumerate(coeffs))


def _adam_defects(order: int = 2) -> dict:
    """Item 6: one-step defects of Adam's step-``h`` recursion against its ODE, read
    forward and staggered, as polynomials in ``h`` up to ``h^order``.

    The ODE ``theta' = U(m, v, s)``, ``m' = k_1 (g(theta) - m)``, ``v' = k_2 (G(theta) - v)``
    (generic ``U``, ``g``, ``G``; ``s`` the clock) is expanded in Taylor series about a
    point ``(theta_0, m_0, v_0)`` at clock ``sigma``; each reading places the recursion's
    ``theta_k, m_k, v_k`` on that solution and compares one recursion step with it.
    """
    k_1, k_2, sigma = sp.symbols("k_1 k_2 sigma", positive=True)
    theta0, m0, v0 = sp.symbols("theta_0 m_0 v_0", real=True)
    g, G, U = sp.Function("g"), sp.Function("G"), sp.Function("U")
    th, m, v, c = sp.symbols("theta_ m_ v_ c_")
    field = {th: U(m, v, c), m: k_1 * (g(th) - m), v: k_2 * (G(th) - v), c: sp.Integer(1)}
    point = {th: theta0, m: m0, v: v0, c: sigma}
    coeffs = _taylor_coefficients(field, point, (th, m, v), order)

    def at(var, x):
        return _series(coeffs[var], x)

    def trunc(expr):
        return sp.expand(sp.series(expr, h, 0, order + 1).removeO())

    b_1, b_2 = sp.exp(-k_1 * h), sp.exp(-k_2 * h)
    out = {}
    # staggered: theta_k at tau = 0 (clock sigma), m_k, v_k at tau = -h/2, the new
    # moments at tau = h/2 (clock sigma + h/2), theta_{k+1} at tau = h
    m_new, v_new = at(m, h / 2), at(v, h / 2)
    out["stag_m"] = trunc(m_new - (b_1 * at(m, -h / 2) + (1 - b_1) * g(theta0)))
    out["stag_v"] = trunc(v_new - (b_2 * at(v, -h / 2) + (1 - b_2) * G(theta0)))
    out["stag_theta"] = trunc(at(th, h) - (theta0 + h * U(m_new, v_new, sigma + h / 2)))
    # forward: theta_k, m_k, v_k at tau = 0, everything new at tau = h
    m_new, v_new = at(m, h), at(v, h)
    out["fwd_m"] = trunc(m_new - (b_1 * m0 + (1 - b_1) * g(theta0)))
    out["fwd_theta"] = trunc(at(th, h) - (theta0 + h * U(m_new, v_new, sigma + h)))
    # d/ds U along the ODE at the point, for the forward defect's coefficient
    out["dU"] = _lie_derivative(field)(U(m, v, c)).subs(point)
    out["k_1"] = k_1
    out["dg"] = sp.diff(g(th), th).subs(point) * U(m, v, c).subs(point)
    return out


@cache
def derive() -> Derivation:
    """Derive items 1-5 of the module docstring.

    Returns
    -------
    Derivation
        Main target: ``theta(s) - theta_0`` per unit ``F`` of the plain ODE from
        rest, symbols ``(s, mu)``; others: the warm-up map ``t_k`` (``(k, mu)``)
        and the matched lag ``delta*`` (``(mu,)``).
    """
    gam = 1 - mu
    # 1. the plain ODE from rest, constant F
    th, uf = sp.Function("theta"), sp.Function("u")
    sol = sp.dsolve([sp.Eq(th(s).diff(s), uf(s)), sp.Eq(uf(s).diff(s), F - gam * uf(s))],
                    [th(s), uf(s)], ics={th(0): 0, uf(0): 0})
    theta_ode = _momentum_branch(next(e.rhs for e in sol if e.lhs == th(s)))
    closed = F * (s - (1 - sp.exp(-gam * s)) / gam) / gam

    # 2. the recursion, constant F: u_k (rsolve), theta_k = sum_{j=1..k} u_j
    uk = sp.Function("u_k")
    u_k = sp.rsolve(uk(k + 1) - mu * uk(k) - F, uk(k), {uk(0): 0})
    j = sp.Symbol("j", integer=True, positive=True)
    theta_k = _momentum_branch(sp.summation(_momentum_branch(u_k).subs(k, j), (j, 1, k)))
    t_k = (k - mu * (1 - mu**k) / (1 - mu)) / (1 - mu)

    # 3. lags: the steady parts (transients E = e^{-rate s}, P = mu^k -> 0) and the
    #    reading offset delta that makes theta(k + delta) - theta_k -> 0
    b = -sp.log(mu)
    a = b / (1 - mu)
    sol_m = sp.dsolve([sp.Eq(th(s).diff(s), uf(s)), sp.Eq(uf(s).diff(s), a * F - b * uf(s))],
                      [th(s), uf(s)], ics={th(0): 0, uf(0): 0})
    theta_matched = _momentum_branch(next(e.rhs for e in sol_m if e.lhs == th(s)))
    E, P, delta = sp.symbols("E P delta", real=True)
    closed_E = F * (s - (1 - E) / gam) / gam  # E = exp(-(1 - mu) s)
    matched_E = a * F / b * (s - (1 - E) / b)  # E = exp(-b s) = mu^s
    t_k_P = (k - mu * (1 - P) / (1 - mu)) / (1 - mu)  # P = mu^k
    steady_plain = sp.simplify((closed_E.subs(s, k + delta) - F * t_k_P).subs({E: 0, P: 0}))
    steady_matched = sp.simplify((matched_E.subs(s, k + delta) - F * t_k_P).subs({E: 0, P: 0}))
    lag_plain = sp.solve(steady_plain, delta)
    lag_matched = sp.solve(steady_matched, delta)
    delta_star = 1 / b - mu / (1 - mu)

    # 4. modified equation of the step-h recursion, generic force f
    f = sp.Function("f")
    theta0, u0 = sp.symbols("theta_0 u_0", real=True)
    order = 3
    Th, U = _taylor(theta0, u0, f, gamma, order)
    # forward reading: theta_k <-> theta(k h), u_{k+1} <-> u((k+1) h)
    u1 = u0 + h * (f(theta0) - gamma * u0)
    defect_forward = sp.expand(_series(Th, h) - (theta0 + h * u1))
    # staggered reading: theta_k <-> theta((k + 1/2) h), u_k <-> u(k h); expand at
    # s = h/2 where theta = theta0: u(-h/2) = u0 - ..., so take the exact solution
    # through (theta0, u0) at s = h/2 and compare one step of the recursion
    u_prev = _series(U, -h / 2)  # u at s = 0 (the recursion's u_k)
    u_next = _series(U, h / 2)  # u at s = h (the recursion's u_{k+1})
    theta_next = _series(Th, h)  # theta at s = 3h/2
    defect_u = sp.expand(u_next - (u_prev + h * (f(theta0) - gamma * u_prev)))
    defect_theta = sp.expand(theta_next - (theta0 + h * u_next))

    # 5. Adam's first moment with rate r, constant g
    r, g = sp.symbols("r g", positive=True)
    mf = sp.Function("m")
    m_sol = sp.dsolve(sp.Eq(mf(s).diff(s), r * (g - mf(s))), mf(s), ics={mf(0): 0}).rhs
    m_hat_matched = sp.simplify(m_sol.subs(r, -sp.log(beta)) / (1 - beta**s))
    m_hat_plain0 = sp.limit(m_sol.subs(r, 1 - beta) / (1 - beta**s), s, 0)

    # 6. Adam's modified equation (matched rates), forward and staggered
    adam = _adam_defects()

    exprs = {
        "theta_plain": sp.Eq(sp.Symbol("theta(s) - theta_0"), theta_ode),
        "warmup_map": sp.Eq(sp.Symbol("t_k"), t_k),
        "theta_recursion": sp.Eq(sp.Symbol("theta_k - theta_0"), theta_k),
        "delta_star": sp.Eq(sp.Symbol("delta^*"), delta_star),
        "defect_forward": sp.Eq(sp.Symbol("D_theta^fwd"), defect_forward.coeff(h, 2) * h**2),
        "defect_u_staggered": sp.Eq(sp.Symbol("D_u^stag"), defect_u.coeff(h, 2) * h**2),
        "m_hat_plain_at_0": sp.Eq(sp.Symbol("m_hat(0+)/g"), m_hat_plain0 / g),
        "adam_defect_forward": sp.Eq(sp.Symbol("D_theta^Adam,fwd"),
                                     sp.factor(adam["fwd_theta"].coeff(h, 2).doit()) * h**2),
    }

    def checker() -> tuple[bool, str]:
        res = []
        res.append(("plain ODE from rest, constant F: theta(s) = F [s - (1 - e^{-(1-mu)s})"
                    "/(1-mu)]/(1-mu) (dsolve)", is_zero(theta_ode - closed)))
        res.append(("closed form satisfies theta'' = F - (1-mu) theta', theta(0) = theta'(0) = 0",
                    is_zero(closed.diff(s, 2) - (F - gam * closed.diff(s)))
                    and is_zero(closed.subs(s, 0)) and is_zero(closed.diff(s).subs(s, 0))))
        res.append(("recursion, constant F: theta_k = t_k F (rsolve + sum)",
                    is_zero(theta_k - F * t_k)))
        slope = sp.simplify((t_k_P.subs(k, k + 1) - t_k_P).subs(P, 0))
        res.append((f"t_1 = 1, t_0 = 0 and the large-k slope of t_k is {slope}",
                    is_zero(t_k.subs(k, 1) - 1) and is_zero(t_k.subs(k, 0))
                    and is_zero(slope - 1 / (1 - mu))))
        res.append(("placeholders: closed form = closed_E at E = exp(-(1-mu)s), matched "
                    "dsolve = matched_E at E = mu^s, t_k = t_k_P at P = mu^k",
                    is_zero(closed_E.subs(E, sp.exp(-gam * s)) - closed)
                    and is_zero(matched_E.subs(E, sp.exp(-b * s)) - theta_matched)
                    and is_zero(t_k_P.subs(P, mu**k) - t_k)))
        res.append((f"plain rates: theta(k + delta) - theta_k -> 0 iff delta = {lag_plain} "
                    "(the ODE from rest lags one step)", lag_plain == [1]))
        res.append((f"matched rates b = -ln mu, a = b/(1-mu): delta = {lag_matched}",
                    len(lag_matched) == 1 and is_zero(lag_matched[0] - delta_star)))
        res.append(("matched rates: u(s) = F (1 - mu^s)/(1 - mu), so u(k) = u_k exactly",
                    is_zero(sp.diff(theta_matched, s) - F * (1 - mu**s) / (1 - mu))))
        lim_half = sp.limit(delta_star.subs(mu, 1 - gamma), gamma, 0)
        res.append((f"delta* -> {lim_half} as mu -> 1", lim_half == sp.Rational(1, 2)))
        with mpmath.workdps(30):
            d09 = sp.N(delta_star.subs(mu, sp.Rational(9, 10)), 10)
        res.append((f"delta*(mu = 0.9) = {d09}", abs(float(d09) - 0.4913) < 1e-4))
        # modified equation
        drive = f(theta0) - gamma * u0
        res.append(("forward reading: theta defect = -h^2 (f - gamma u)/2 + O(h^3)",
                     is_zero(defect_forward.coeff(h, 1))
                     and is_zero(defect_forward.coeff(h, 2) + drive / 2)))
        res.append(("staggered reading: theta defect = O(h^3) (midpoint rule)",
                    all(is_zero(defect_theta.coeff(h, n)) for n in (0, 1, 2))))
        res.append(("staggered reading: u defect = -gamma h^2 (f - gamma u)/2 + O(h^3)",
                    is_zero(defect_u.coeff(h, 1))
                    and is_zero(defect_u.coeff(h, 2) + gamma * drive / 2)))
        # Adam
        res.append(("Adam, matched rate -ln b, constant g: m_hat(s) = g for all s",
                    is_zero(m_hat_matched - g)))
        res.append((f"Adam, plain rate 1 - b: m_hat(0+) = {m_hat_plain0} (not g)",
                    is_zero(m_hat_plain0 - g * (1 - beta) / (-sp.log(beta)))))
        res.append(("Adam, staggered reading (theta_k at (k + 1/2) h, moments at k h): "
                    "defects in theta, m and v all O(h^3) (midpoint rule)",
                    all(is_zero(adam[key].coeff(h, n)) for key in ("stag_theta", "stag_m",
                                                                   "stag_v")
                        for n in range(3))))
        res.append(("Adam, forward reading: theta defect = -(h^2/2) dU/ds + O(h^3), "
                    "m defect = (h^2/2) k_1 g'(theta) U + O(h^3): first order",
                    is_zero(adam["fwd_theta"].coeff(h, 1))
                    and is_zero(adam["fwd_theta"].coeff(h, 2) + adam["dU"] / 2)
                    and is_zero(adam["fwd_m"].coeff(h, 1))
                    and is_zero(adam["fwd_m"].coeff(h, 2) - adam["k_1"] * adam["dg"] / 2)))
        return combine(res)

    expr = closed.subs(F, 1)
    return Derivation(
        name=NAME,
        title=TITLE,
        equation=EQUATION,
        summary=(
            "Under a constant force the plain heavy-ball ODE from rest lags the recursion by "
            "one step (t_k is the warm-up map); read on a staggered grid (theta half a step "
            "later) the recursion is the ODE's midpoint rule, first order only through the "
            "damping gamma = 1 - mu; matched rates -ln mu (heavy ball) and -ln b (Adam) are "
            "exact for a constant force. Adam's recursion, whose update takes the new "
            "moments, read staggered (theta half a step after the moments) is the ODE's "
            "midpoint rule too (one-step defects O(h^3)); read forward it is first order."
        ),
        exprs=exprs,
        latex=make_latex(exprs),
        expr=expr,
        symbols=(s, mu),
        targets={"main": (expr, (s, mu)), "warmup_map": (t_k, (k, mu)),
                 "delta_star": (delta_star, (mu,))},
        checker=checker,
    )
