"""Symbolic derivations of the closed forms used by :mod:`odeflow`.

Every closed form that :mod:`odeflow.analysis.closed_forms` evaluates numerically is
derived here with sympy from the ODE it solves and then checked by
substitution (docs/derivations.md shows every result). Equation numbers refer
to Tian, Wang, Chen and Du, "Scan and Snap: Understanding Training Dynamics and
Token Composition in 1-layer Transformer" (NeurIPS 2023, arXiv:2305.16380).

One module per result:

========================  ==========================================  ==================
module                    result                                      paper
========================  ==========================================  ==================
``cf1_decoder_margin``    decoder logit margin ``h(t)`` (Lambert W)   Lemma 6, Eqn 44-45
``cf2_speed_control``     two regimes of ``gamma(t)``, crossover      Lemma 9, Thm 1b
``cf3_gamma_integral``    ``Gamma(t) = int_0^t gamma``                Eqn 128
``cf4_relative_gain``     relative gain of distinct tokens            Thm 3, Eqn 11
``cf5_dominant_bounds``   bounds on the dominant token's growth       Eqn 12
``cf6_snap``              common-token logit and ``B(t)``             Thm 4, Eqn 13-14
``heavy_ball_modified_``  CF7: heavy-ball/Adam ODEs vs recursions     Sec. 8 optimisers
``equation``              (warm-up map, lag, modified equation)
``heavy_ball_slow_``      CF8: heavy ball's slow manifold u = h(th)   Sec. 8 optimisers
``manifold``              (first-order phase, its next term)
``cf_ih1_replicator``     induction heads, stage-1 replicator         CF-IH1, stage 1
``cf_ih2_classifier``     induction heads, stage-3 mixture and a(t)   CF-IH2, stage 3
``cf_ts1_inner_``         two-stage model, E[y ReLU(x^T v)]           CF-TS1
``expectation``           (label symmetry, skew-normal, Owen's T)
``cf_ts2_early_growth``   two-stage model, early growth, stage times  CF-TS2, stages 1-2
========================  ==========================================  ==================

CF-IH1 and CF-IH2 belong to the induction-head family (Chen, Sheen, Wang and
Yang, "Unveiling Induction Heads", 2024; docs/induction.md): their numeric twins
live in :mod:`odeflow.analysis.induction.closed_forms`. CF-TS1 and CF-TS2 belong
to the two-stage family, odeflow's own model built from the abstract of Gong et
al. 2025 (arXiv 2502.20681; docs/two_stage): their numeric twins live in
:mod:`odeflow.fields.two_stage.expectations` and
:mod:`odeflow.analysis.two_stage.closed_forms`.

Each module exposes ``derive()`` returning a :class:`Derivation`; ``odeflow
derive`` (installed with the package) or ``python -m derivations`` runs every
result's check (:mod:`derivations.report`).
"""

from __future__ import annotations

import importlib
import itertools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mpmath
import sympy as sp

__all__ = [
    "MODULES",
    "SYM",
    "Derivation",
    "Symbols",
    "all_derivations",
    "binary_window_law",
    "combine",
    "is_zero",
    "log_uniform",
    "make_latex",
    "mp_check_points",
]

#: Names of the derivation modules, in dependency order.
MODULES: tuple[str, ...] = (
    "cf1_decoder_margin",
    "cf2_speed_control",
    "cf3_gamma_integral",
    "cf4_relative_gain",
    "cf5_dominant_bounds",
    "cf6_snap",
    "heavy_ball_modified_equation",
    "heavy_ball_slow_manifold",
    "cf_ih1_replicator",
    "cf_ih2_classifier",
    "cf_ts1_inner_expectation",
    "cf_ts2_early_growth",
)


@dataclass(frozen=True)
class Symbols:
    """Sympy symbols shared by all derivations.

    Sharing them lets one derivation substitute the result of another
    (e.g. CF3 and CF6 use ``h(t)`` from CF1).
    """

    t: sp.Symbol = sp.Symbol("t", nonnegative=True)
    s: sp.Symbol = sp.Symbol("s", nonnegative=True)
    M: sp.Symbol = sp.Symbol("M", positive=True)
    eta_Y: sp.Symbol = sp.Symbol("eta_Y", positive=True)
    eta_Z: sp.Symbol = sp.Symbol("eta_Z", positive=True)
    pi: sp.Symbol = sp.Symbol("pi_n", positive=True)
    h: sp.Symbol = sp.Symbol("h", nonnegative=True)
    a: sp.Symbol = sp.Symbol("a", positive=True)
    z_c0: sp.Symbol = sp.Symbol("z_c0", real=True)
    Gamma: sp.Symbol = sp.Symbol("Gamma", nonnegative=True)
    B: sp.Symbol = sp.Symbol("B", nonnegative=True)


#: The shared symbol table.
SYM = Symbols()


@dataclass(frozen=True)
class Derivation:
    """Result of one derivation.

    Attributes
    ----------
    name : str
        Short identifier, e.g. ``"CF1"``.
    title : str
        Human-readable title.
    equation : str
        The paper's equation / lemma / theorem numbers.
    summary : str
        One-paragraph description of how the result was obtained.
    exprs : Mapping[str, sympy.Basic]
        Named sympy expressions and equations produced by the derivation.
    latex : Mapping[str, str]
        LaTeX of the entries of ``exprs`` (same keys).
    expr : sympy.Expr
        The main result, ready for :func:`sympy.lambdify`.
    symbols : tuple of sympy.Symbol
        Argument order of ``expr`` for :func:`sympy.lambdify`.
    targets : Mapping[str, tuple[sympy.Expr, tuple[sympy.Symbol, ...]]]
        Every lambdify-able expression with its argument symbols; includes
        ``"main"`` = ``(expr, symbols)``.
    """

    name: str
    title: str
    equation: str
    summary: str
    exprs: Mapping[str, sp.Basic]
    latex: Mapping[str, str]
    expr: sp.Expr
    symbols: tuple[sp.Symbol, ...]
    targets: Mapping[str, tuple[sp.Expr, tuple[sp.Symbol, ...]]]
    checker: Callable[[], tuple[bool, str]] = field(repr=False, compare=False)

    def check(self) -> tuple[bool, str]:
        """Run the verification of this derivation.

        Returns
        -------
        passed : bool
            True when every check passed.
        detail : str
            One line per individual check.
        """
        try:
            return self.checker()
        except Exception as exc:  # a crashing check is a failing check
            return False, f"check raised {type(exc).__name__}: {exc}"

    def lambdify(self, key: str = "main", modules: Any = "mpmath") -> Callable:
        """Return ``sympy.lambdify(symbols, expr, modules)`` for a target.

        Parameters
        ----------
        key : str, optional
            Name of the entry of ``targets`` (default ``"main"``).
        modules : str or list, optional
            Passed to :func:`sympy.lambdify` (default ``"mpmath"``).
        """
        expr, syms = self.targets[key]
        return sp.lambdify(syms, expr, modules=modules)

    def __getitem__(self, key: str) -> Any:
        """Dict-style access to the attributes (``d["latex"]``)."""
        if key == "check":
            return self.check
        return getattr(self, key)

    def as_dict(self) -> dict[str, Any]:
        """Return the fields as a plain dictionary."""
        return {
            "name": self.name,
            "title": self.title,
            "equation": self.equation,
            "summary": self.summary,
            "exprs": dict(self.exprs),
            "latex": dict(self.latex),
            "expr": self.expr,
            "symbols": self.symbols,
            "targets": dict(self.targets),
            "check": self.check,
        }


def make_latex(
    exprs: Mapping[str, sp.Basic], symbol_names: Mapping[sp.Symbol, str] | None = None
) -> dict[str, str]:
    """Return ``{key: sympy.latex(value)}`` for a mapping of expressions.

    Parameters
    ----------
    exprs : Mapping[str, sympy.Basic]
        Expressions to print.
    symbol_names : Mapping[sympy.Symbol, str], optional
        LaTeX to use for particular symbols (passed to :func:`sympy.latex`).
    """
    return {
        key: sp.latex(value, symbol_names=dict(symbol_names or {})) for key, value in exprs.items()
    }


def is_zero(expr: sp.Expr) -> bool:
    """Return True when sympy can prove ``expr`` is identically zero."""
    simplified = sp.simplify(expr)
    return simplified == 0 or simplified.is_zero is True


def log_uniform(rng: random.Random, lo: float, hi: float) -> mpmath.mpf:
    """Draw an mpmath number log-uniformly from ``[lo, hi]``."""
    return mpmath.mpf(10) ** mpmath.mpf(rng.uniform(mpmath.log10(lo), mpmath.log10(hi)))


def mp_check_points(
    residual: Callable[..., Any],
    sampler: Callable[[random.Random], Sequence[Any]],
    n: int = 50,
    dps: int = 50,
    tol: float = 1e-40,
    seed: int = 20230516,
) -> tuple[bool, str]:
    """Evaluate a relative residual at random points with mpmath.

    Parameters
    ----------
    residual : callable
        ``residual(*point)`` returning the relative residual (an mpmath number).
    sampler : callable
        ``sampler(rng)`` returning one point (sequence of mpmath numbers).
    n : int, optional
        Number of points (default 50).
    dps : int, optional
        Decimal digits of working precision (default 50).
    tol : float, optional
        Largest accepted ``|residual|`` (default 1e-40).
    seed : int, optional
        Seed of the point generator (results are reproducible).

    Returns
    -------
    passed : bool
    detail : str
    """
    rng = random.Random(seed)
    worst = mpmath.mpf(0)
    worst_point: Sequence[Any] = ()
    with mpmath.workdps(dps):
        for _ in range(n):
            point = sampler(rng)
            value = abs(residual(*point))
            if not mpmath.isfinite(value):
                return False, f"non-finite residual at {[mpmath.nstr(p, 8) for p in point]}"
            if value > worst:
                worst, worst_point = value, point
    ok = worst < tol
    where = [mpmath.nstr(p, 6) for p in worst_point]
    return (
        ok,
        f"max |residual| over {n} points at {dps} digits = {mpmath.nstr(worst, 3)} "
        f"(tol {tol:g}; at {where})",
    )


def binary_window_law():
    """A generic joint law of a two-token window and the next token over ``{0, 1}``.

    For the induction-head derivations (CF-IH1, CF-IH2): windows
    ``z = (x_{-1}, x_{-2})``, ``P(z, e)`` eight positive symbols with the last
    fixed by ``sum P = 1``.

    Returns
    -------
    windows : list of tuple
    P : dict
        ``(z, e) -> P(z, e)``.
    mu_z, mu_e : dict
        ``mu(z) = sum_e P(z, e)`` and ``mu(e) = sum_z P(z, e)``.
    """
    windows = list(itertools.product((0, 1), repeat=2))
    P = {(z, e): sp.Symbol(f"P_{z[0]}{z[1]}{e}", positive=True) for z in windows for e in (0, 1)}
    last = (windows[-1], 1)
    P[last] = 1 - sum(v for k, v in P.items() if k != last)
    mu_z = {z: P[z, 0] + P[z, 1] for z in windows}
    mu_e = {e: sum(P[z, e] for z in windows) for e in (0, 1)}
    return windows, P, mu_z, mu_e


def combine(results: Sequence[tuple[str, bool]]) -> tuple[bool, str]:
    """Combine named sub-checks into ``(passed, detail)``."""
    passed = all(ok for _, ok in results)
    detail = "\n".join(f"[{'ok' if ok else 'FAILED'}] {text}" for text, ok in results)
    return passed, detail


def all_derivations() -> Iterator[Derivation]:
    """Yield the result of ``derive()`` of every module in :data:`MODULES`."""
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        yield module.derive()
