"""``odeflow verify``: run the registered closed-form checks of every family.

:func:`verify` validates its settings, runs the selected checks of
:func:`odeflow.analysis.check_registry.registered_checks` (each family
registers its own: CF1-CF6 of Scan and Snap in
:mod:`odeflow.analysis.checks_scan_snap`, I_S, CF-IH1, CF-IH2 of the
induction-head family in :mod:`odeflow.analysis.induction.verify`) and returns
their rows as a :class:`~odeflow.analysis.check_registry.VerificationReport`.
Every check integrates an ODE with :func:`scipy.integrate.solve_ivp` and
measures its largest relative difference from a closed form over a grid of
times: the run's log-spaced grid (:func:`time_grid`, ``t_min`` to ``t_max``), or
the family's own, which its :class:`~odeflow.analysis.check_registry.CheckFamily`
names (``grid``); the report's closing line says each family's. The defaults
here are those of ``odeflow verify``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable

import numpy as np

from odeflow.analysis.check_registry import (
    CheckSettings,
    VerificationReport,
    grids,
    registered_checks,
    run_checks,
)
from odeflow.data import validate_positive
from odeflow.errors import SolveError, ValidationError
from odeflow.solver import METHODS
from odeflow.solver.options import check_tolerances

__all__ = ["DEFAULT_ATOL", "DEFAULT_METHOD", "DEFAULT_RTOL", "DEFAULT_TOLERANCE",
           "POINTS_PER_DECADE", "T_MAX", "T_MIN", "time_grid", "verify"]

#: Relative tolerance of the integrator.
DEFAULT_RTOL = 1e-10
#: Absolute tolerance of the integrator (see :mod:`odeflow.analysis.checks_scan_snap`).
DEFAULT_ATOL = 1e-30
#: Largest relative error a check may show to pass.
DEFAULT_TOLERANCE = 1e-7
#: solve_ivp method: the fastest with every check passing (``docs/benchmarks.md``,
#: ``benchmarks/bench_verify.py``), and it switches to its stiff mode (with the
#: analytic Jacobian) should a check turn stiff.
DEFAULT_METHOD = "LSODA"
#: Time grid: log-spaced from T_MIN to T_MAX with POINTS_PER_DECADE points a decade.
T_MIN, T_MAX, POINTS_PER_DECADE = 1e-3, 1e9, 20


def time_grid(t_min: float, t_max: float, per_decade: int) -> np.ndarray:
    """``per_decade`` log-spaced times from ``t_min`` to ``t_max`` (at least two); the
    decades are counted as a difference of logarithms, so a ``t_max`` near the largest
    double does not overflow."""
    n = int(round(per_decade * (math.log10(t_max) - math.log10(t_min)))) + 1
    return np.geomspace(t_min, t_max, max(n, 2))


def verify(rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
           method: str = DEFAULT_METHOD, tolerance: float = DEFAULT_TOLERANCE,
           checks: Iterable[str] | None = None, t_min: float = T_MIN, t_max: float = T_MAX,
           points_per_decade: int = POINTS_PER_DECADE, seed: int = 0,
           progress: bool | Callable[[str], None] = False) -> VerificationReport:
    """Integrate the ODE behind each closed form (CF1-CF6 and every registered family) and compare.

    Parameters
    ----------
    rtol, atol : float
        Tolerances of :func:`scipy.integrate.solve_ivp` (defaults ``1e-10``,
        ``1e-30``; :mod:`odeflow.analysis.checks_scan_snap` says why ``atol`` is tiny).
    method : str
        solve_ivp method, ``"LSODA"`` by default (measured fastest with every
        check passing; it gets the analytic Jacobian of each system for its
        stiff mode).
    tolerance : float
        Largest relative error a row may show to pass.
    checks : iterable of str, optional
        Checks to run, from :func:`~odeflow.analysis.check_registry.registered_checks`
        (CF1-CF6 of Scan and Snap, CF-IH1, CF-IH2, I_S of the induction family); all by default.
    t_min, t_max : float
        Range of the run's log-spaced comparison grid (the checks of a family that
        declares its own times, ``CheckFamily.grid``, keep those).
    points_per_decade : int
        Grid density.
    seed : int
        Seed of the random data model of CF4
        (:func:`~odeflow.analysis.checks_scan_snap_inputs.random_data_model`).
    progress : bool or callable, default False
        A short line as each check starts and ends: True prints them to stderr,
        a callable receives them (``odeflow verify`` shows them unless
        ``--no-progress``).

    Returns
    -------
    VerificationReport
        One :class:`CheckResult` per row. A check that raises (a failed solve,
        a closed form rejecting its arguments) becomes a failing row naming
        the error.

    Raises
    ------
    ValidationError
        For invalid settings, naming the argument.
    """
    settings = check_settings(rtol, atol, method, tolerance, t_min, t_max, points_per_decade,
                              seed)
    available = registered_checks()
    selected = list(available) if checks is None else [str(c).upper() for c in checks]
    unknown = [c for c in selected if c not in available]
    if unknown or not selected:
        raise ValidationError("checks", f"unknown or empty selection {unknown or selected!r}; "
                              f"choose from {list(available)}")
    start = time.perf_counter()
    report = _stderr_line if progress is True else (progress or None)
    rows = run_checks(selected, settings, (SolveError, ValueError, ArithmeticError), report)
    grid = time_grid(settings.t_min, settings.t_max, points_per_decade)
    run_grid = f"t in [{settings.t_min:g}, {settings.t_max:g}] ({grid.size} log-spaced points)"
    report_settings = {"rtol": settings.rtol, "atol": settings.atol, "method": method,
                       "tolerance": settings.tolerance, "t_min": settings.t_min,
                       "t_max": settings.t_max, "points": int(grid.size),
                       "seed": settings.seed, "checks": [c for c in available if c in selected],
                       "grids": grids(selected, settings, run_grid)}
    return VerificationReport(rows, report_settings, time.perf_counter() - start)


def check_settings(rtol, atol, method, tolerance, t_min, t_max, points_per_decade,
                   seed) -> CheckSettings:
    """The settings of :func:`verify`, validated, as the checks receive them.

    Raises
    ------
    ValidationError
        Naming the first invalid argument: tolerances outside the limits of
        :func:`odeflow.solve`, a non-positive ``tolerance``, ``t_min`` or
        ``t_max``, ``t_max <= t_min``, a ``points_per_decade`` that is not a
        positive integer, an unknown ``method``, a negative or non-integer ``seed``.
    """
    rtol, atol = check_tolerances(rtol, atol)  # the limits of odeflow.solve
    tolerance = validate_positive(tolerance, "tolerance")
    t_min = validate_positive(t_min, "t_min")
    t_max = validate_positive(t_max, "t_max")
    if t_max <= t_min:
        raise ValidationError("t_max", f"must exceed t_min = {t_min!r}, got {t_max!r}")
    if isinstance(points_per_decade, bool) or not isinstance(points_per_decade, int) \
            or points_per_decade < 1:
        raise ValidationError("points_per_decade",
                              f"must be a positive integer, got {points_per_decade!r}")
    if method not in METHODS:
        raise ValidationError("method", f"unknown method {method!r}; choose one of "
                              f"{list(METHODS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValidationError("seed", f"must be an integer >= 0, got {seed!r}")
    return CheckSettings(rtol, atol, method, tolerance, t_min, t_max, points_per_decade,
                         int(seed))


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
