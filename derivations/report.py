"""Run derivations and report each as a PASS/FAIL line.

The one runner behind both front ends, ``python -m derivations`` and
``odeflow derive``: :func:`catalogue` lists the derivations without running
them, :func:`find` resolves a name the user typed, :func:`run_derivations`
derives and checks the chosen ones and prints what it found.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable
from types import ModuleType

import sympy as sp

from . import MODULES


def catalogue() -> list[ModuleType]:
    """The derivation modules in :data:`~derivations.MODULES` order (nothing derived).

    Each has ``NAME`` (e.g. ``"CF1"``), ``TITLE``, ``EQUATION`` and ``derive()``.
    """
    return [importlib.import_module(f"{__package__}.{name}") for name in MODULES]


def _key(text: str) -> str:
    return text.lower().replace("-", "_")


def find(name: str) -> str:
    """The module name of the derivation ``name``: its result name (``CF1``,
    ``cf-ih1``, any case) or its module name (``cf1_decoder_margin``).

    Raises
    ------
    LookupError
        When no derivation has that name; the message lists the names.
    """
    for module in catalogue():
        short = module.__name__.rsplit(".", 1)[1]
        if _key(name) in (_key(module.NAME), short):
            return short
    names = ", ".join(module.NAME for module in catalogue())
    raise LookupError(f"no derivation named {name!r}; choose one of {names}")


def run_derivations(names: Iterable[str] = MODULES, detail: bool = False, latex: bool = True,
                    out: Callable[[str], None] = print) -> list[str]:
    """Derive and check the derivation modules ``names``; return the names that failed.

    Prints ``PASS|FAIL <name>: <title> (<seconds> s)`` for each (within 100
    columns), and a last line with the total. With ``detail``, also the paper's
    equations, the summary,
    each derived expression (pretty-printed; with ``latex`` its LaTeX too) and
    the outcome of every individual check. A derivation that raises counts as
    a failure.
    """
    names = list(names)
    failures = []
    start = time.perf_counter()
    for module_name in names:
        t0 = time.perf_counter()
        try:
            result = importlib.import_module(f"{__package__}.{module_name}").derive()
        except Exception as exc:  # a derivation that cannot run is a failure
            failures.append(module_name)
            out(f"FAIL {module_name}: derivation raised {type(exc).__name__}: {exc}")
            continue
        passed, checks = result.check()
        if not passed:
            failures.append(result.name)
        out(f"{'PASS' if passed else 'FAIL'} {result.name}: {result.title} "
            f"({time.perf_counter() - t0:.1f} s)")
        if detail or not passed:
            _details(result, checks, detail, latex, out)
    total = time.perf_counter() - start
    if failures:
        out(f"FAILED: {', '.join(failures)} ({total:.1f} s)")
    else:
        out(f"{'all ' if len(names) > 1 else ''}{len(names)} derivation"
            f"{'s' if len(names) > 1 else ''} passed ({total:.1f} s)")
    return failures


def _details(result, checks: str, expressions: bool, latex: bool, out) -> None:
    """Print a result's summary and expressions (with ``expressions``) and its checks."""
    if expressions:
        out("=" * 78)
        out(f"Paper: {result.equation}")
        out(result.summary)
        for key, value in result.exprs.items():
            out(f"--- {key}")
            out(sp.pretty(value, use_unicode=True))
            if latex:
                out(f"LaTeX: {result.latex[key]}")
    out("--- checks")
    out(checks)
    out("")
