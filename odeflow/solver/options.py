"""Argument checking and defaults of a solve: methods, tolerances, output times, budget.

Everything :mod:`odeflow.solver.api` checks before it integrates: the time span,
output times (:func:`default_t_eval`), tolerances, the evaluation budget
(:data:`MAX_NFEV`), the method ``"auto"`` resolves to (:func:`choose_method`) and
the Jacobian an implicit method gets (:func:`jacobian_options`). A ValidationError
names the argument.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np

from odeflow.data import as_real_array, as_real_number, validate_positive
from odeflow.errors import RenamedWarning, ValidationError
from odeflow.fields.base import Field

#: Methods of solve_ivp that odeflow accepts.
METHODS = ("Radau", "BDF", "LSODA", "RK45", "DOP853", "RK23")
#: Methods that use a Jacobian.
IMPLICIT = ("Radau", "BDF", "LSODA")
#: One-step methods: they take a field's own first step (:meth:`Field.initial_step`).
#: The multistep ones (BDF, LSODA) start at order one, where a step on the field's own
#: scale is far beyond their error at the tolerance: they keep their own first step.
ONE_STEP = ("Radau", "RK45", "DOP853", "RK23")
#: Memory limit, in bytes, for anything that grows like ``size^2``: a dense
#: Jacobian (analytic, finite-difference, or LSODA's internal one in its stiff
#: mode) takes ``8 size^2`` bytes and the implicit methods hold a few more
#: matrices of that size for their LU factors. 64 MiB.
DENSE_MEMORY_LIMIT = 64 * 2**20
#: Largest state whose dense Jacobian fits :data:`DENSE_MEMORY_LIMIT` (2896).
DENSE_JACOBIAN_LIMIT = int(math.isqrt(DENSE_MEMORY_LIMIT // 8))
#: Method of ``method="auto"`` for states above :data:`DENSE_JACOBIAN_LIMIT`: explicit,
#: its memory linear in the state (``benchmarks/bench_scale.py`` compares them).
LARGE_STATE_METHOD = "RK45"
#: Default budget of right-hand-side evaluations of one solve (``max_nfev``), far
#: above what a healthy solve takes. A solve that exhausts it raises SolveError saying
#: where in t it stopped.
MAX_NFEV = 100_000
#: Smallest ``atol`` accepted: below it the solvers' squared error norms overflow
#: for states near zero and the step size collapses.
MIN_ATOL = 1e-100
#: Smallest ``rtol`` accepted: ``solve_ivp`` silently raises a smaller one to
#: ``100 * eps`` (with a warning), so asking for less would be a false promise.
MIN_RTOL = 100 * float(np.finfo(float).eps)

#: Memory budget, in bytes, of the default output grid of a solve: ``8 x state size x
#: points``. A large state gets fewer default output times (at least
#: :data:`MIN_OUTPUT_POINTS`) instead of gigabytes of snapshots; pass ``t_eval`` for more.
#: 256 MiB (``benchmarks/bench_scale.py --case E100`` shows the cost of copying them).
OUTPUT_BYTES_LIMIT = 256 * 2**20
#: Fewest default output times however large the state.
MIN_OUTPUT_POINTS = 10


def default_t_eval(t0: float, t_end: float, per_decade: int = 40, max_points: int = 600,
                   state_size: int | None = None):
    """Log-spaced output times: ``t0``, then geometric spacing up to ``t_end``.

    The dynamics span decades (``h ~ t`` early, ``h ~ ln t`` late, CF2), so a
    linear grid would waste its points. ``per_decade`` points a decade, at
    least 50 and at most ``max_points``; with ``state_size``, also at most
    what fits :data:`OUTPUT_BYTES_LIMIT` (and at least :data:`MIN_OUTPUT_POINTS`).
    """
    if state_size:
        fits = OUTPUT_BYTES_LIMIT // (8 * int(state_size))
        max_points = int(max(MIN_OUTPUT_POINTS, min(max_points, fits)))
    lo = max(min(1e-2, (t_end - t0) / 100.0), t0 if t0 > 0 else 0.0)
    if lo <= 0:
        lo = (t_end - t0) / 100.0
    if not lo > t0:  # a span so short (e.g. t_end = 5e-324) that span / 100 underflows
        return np.array([t0, t_end])
    decades = max(math.log10(t_end / lo), 1.0)
    n = int(min(max_points, max(min(50, max_points), per_decade * decades)))
    grid = np.geomspace(lo, t_end, n)
    grid = grid[grid > t0]
    return np.concatenate([[t0], grid])


def dense_jacobian_bytes(size: int) -> int:
    """Bytes of one dense ``size x size`` Jacobian (float64)."""
    return 8 * int(size) ** 2


def choose_method(field: Field) -> str:
    """The default integrator for ``method="auto"``.

    LSODA: of Radau, BDF, LSODA, RK45 and DOP853 it needs the fewest right-hand
    sides and the least wall time on the Scan and Snap flows
    (``benchmarks/bench_methods.py``; docs/benchmarks.md), and it switches to its
    stiff (BDF) mode with the analytic Jacobian when the problem turns stiff. A
    field may name its own choice in ``preferred_method``. Any method that may
    form a dense Jacobian (LSODA included) is only chosen while it fits
    :data:`DENSE_MEMORY_LIMIT` bytes (``8 size^2``; states up to
    :data:`DENSE_JACOBIAN_LIMIT` entries); above that ``auto`` uses
    :data:`LARGE_STATE_METHOD`, an explicit method whose memory grows like the
    state, or the field's own ``large_state_method``.
    """
    if dense_jacobian_bytes(field.size) > DENSE_MEMORY_LIMIT:
        return getattr(field, "large_state_method", None) or LARGE_STATE_METHOD
    return getattr(field, "preferred_method", None) or "LSODA"


def jacobian_options(field: Field, method: str) -> dict:
    """The ``jac`` / ``jac_sparsity`` keyword for an implicit ``method``.

    A field whose ``jacobian`` is sparse (``sparse_jacobian``) gives it to Radau
    and BDF at any size, and to LSODA (which takes dense arrays only) as a dense
    array while that fits :data:`DENSE_MEMORY_LIMIT`. Otherwise the analytic dense
    Jacobian while it fits
    :data:`DENSE_MEMORY_LIMIT`. A field without an analytic Jacobian (at any
    size), or one above the limit, gives Radau and BDF its sparsity pattern
    (a sparse matrix: finite differences on groups of columns, e.g. one
    group per member's column for a stack) when it has one; a field without
    either is differenced column by column below the limit, and above it
    would build a dense ``size^2`` matrix, so it is refused.

    Raises
    ------
    ValidationError
        Naming ``method`` when the method would need a dense Jacobian above the limit.
    """
    if method not in IMPLICIT:
        return {}
    need = dense_jacobian_bytes(field.size)
    if getattr(field, "sparse_jacobian", False) and method != "LSODA":
        return {"jac": field.jacobian}
    if need <= DENSE_MEMORY_LIMIT and field.has_jacobian:
        if getattr(field, "sparse_jacobian", False):  # LSODA takes a dense array only
            return {"jac": lambda t, y: field.jacobian(t, y).toarray()}
        return {"jac": field.jacobian}
    pattern = field.jac_sparsity() if method != "LSODA" else None
    if pattern is not None:
        return {"jac_sparsity": pattern}
    if need <= DENSE_MEMORY_LIMIT:
        return {}
    raise ValidationError("method", f"{method} would form a dense {field.size} x "
                          f"{field.size} Jacobian ({need} bytes, limit "
                          f"{DENSE_MEMORY_LIMIT}) and this flow has no sparsity pattern "
                          f"there; use method='auto' or an explicit method (RK45, DOP853)")


def check_span(t_span) -> tuple[float, float]:
    try:
        first, last = t_span
    except (TypeError, ValueError):
        raise ValidationError("t_span", f"must be a pair (t0, t_end), got {t_span!r:.80}") from None
    t0 = as_real_number(first, "t_span", "finite and >= 0")
    t_end = as_real_number(last, "t_end", "finite and > 0")
    if not (math.isfinite(t0) and t0 >= 0):
        raise ValidationError("t_span", f"t0 must be finite and >= 0, got {t0!r}")
    if not (math.isfinite(t_end) and t_end > 0):
        raise ValidationError("t_end", f"must be finite and > 0, got {t_end!r}")
    if t_end <= t0:
        raise ValidationError("t_end", f"must exceed t0 = {t0!r}, got {t_end!r}")
    return t0, t_end


def _check_t_eval(t_eval, t0, t_end) -> np.ndarray:
    arr = as_real_array(t_eval, "t_eval")
    if arr.ndim != 1 or arr.size == 0:
        raise ValidationError("t_eval", "must be a non-empty one-dimensional array")
    if not np.all(np.isfinite(arr)):
        raise ValidationError("t_eval", "must be finite")
    if np.any(np.diff(arr) <= 0):
        raise ValidationError("t_eval", "must be strictly increasing")
    if arr[0] < t0 or arr[-1] > t_end:
        raise ValidationError("t_eval", f"must lie in t_span [{t0:g}, {t_end:g}]")
    return arr


def check_tolerances(rtol, atol) -> tuple[float, float]:
    """``(rtol, atol)`` as floats within the limits ``solve_ivp`` can honour.

    ``rtol`` in ``[MIN_RTOL, 1)``: below ``100 eps`` ``solve_ivp`` raises it
    silently, at 1 or more no digit is controlled. ``atol >= MIN_ATOL``.
    """
    rtol = validate_positive(rtol, "rtol")
    if not MIN_RTOL <= rtol < 1.0:
        raise ValidationError("rtol", f"must be in [{MIN_RTOL:.3g}, 1), got {rtol!r} (below "
                              "100 eps solve_ivp cannot honour it; at 1 or more no digit "
                              "is controlled)")
    atol = validate_positive(atol, "atol")
    if atol < MIN_ATOL:
        raise ValidationError("atol", f"must be >= {MIN_ATOL:g}, got {atol!r} (below it the "
                              "error norms of the integrators overflow and the step size "
                              "collapses)")
    return rtol, atol



class _FamilyDefault:
    """Marks an argument of :func:`solve` the caller did not give: the family's default
    applies (``None`` given explicitly is an invalid value, reported as such)."""

    def __repr__(self) -> str:
        return "<the family's default>"


#: Default of :func:`solve`'s ``flow`` and learning rates: the model family's own default.
FAMILY_DEFAULT = _FamilyDefault()

#: ``t_span`` of :func:`solve` when not given.
DEFAULT_SPAN = (0.0, 1e4)


def check_run(t_span, t_eval, rtol, atol, max_nfev) -> tuple:
    """The checked ``(t0, t_end, t_eval, rtol, atol, max_nfev)`` of a solve
    (:func:`solve`, :func:`solve_batch`, :func:`solve_ensemble`); a ValidationError
    names the argument."""
    t0, t_end = check_span(t_span)
    rtol, atol = check_tolerances(rtol, atol)
    max_nfev = _check_budget(max_nfev)
    t_eval = None if t_eval is None else _check_t_eval(t_eval, t0, t_end)
    return t0, t_end, t_eval, rtol, atol, max_nfev


def _check_budget(max_nfev) -> int:
    if max_nfev is None:
        return MAX_NFEV
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) \
            or max_nfev < 1:
        raise ValidationError("max_nfev", f"must be an integer >= 1, got {max_nfev!r:.80}")
    return int(max_nfev)


def prepare(field, t0, t_end, t_eval, method) -> tuple:
    """``(t_eval, method, solve_ivp options)`` for ``field``: the default output times
    (sized to the state), the method ``"auto"`` resolves to (or a check of the one
    given), its Jacobian options and, for a method of :data:`ONE_STEP`, the field's
    first step (:meth:`Field.initial_step` as ``first_step``; left out when the field
    has none, so that the integrator picks its own;
    :func:`odeflow.solver.integrate.integrate_field` caps it at the span)."""
    if t_eval is None:
        t_eval = default_t_eval(t0, t_end, state_size=field.size)
    if method == "auto":
        method = choose_method(field)
    elif method not in METHODS:
        raise ValidationError("method", f"unknown method {method!r}; choose 'auto' or one of "
                              f"{list(METHODS)}")
    options = jacobian_options(field, method)
    first = field.initial_step()
    if first is not None and method in ONE_STEP:
        options["first_step"] = float(first)
    return t_eval, method, options


def check_flow_options(flow: str, field_class, options: dict) -> None:
    """Reject keyword options the flow's vector field does not take, naming them."""
    params = inspect.signature(field_class.__init__).parameters
    allowed = [p for p in params if p not in ("self", "data")]
    for key in options:
        if key not in allowed:
            raise ValidationError(key, f"unknown option for flow {flow!r}; it takes "
                                  f"{allowed if allowed else 'no options'}")


def check_common_exact_steps(optimizer, wrapped) -> None:
    """Refuse ``Adam(exact_steps="auto")`` for an ensemble whose members it would resolve
    differently: the stacked solve takes one number of exact steps for all of them."""
    if getattr(optimizer, "exact_steps", None) != "auto":  # Adam refuses it with "limit"
        return
    steps = [flow.exact_steps for flow in wrapped]
    if len(set(steps)) > 1:
        raise ValidationError("exact_steps", f"'auto' takes {sorted(set(steps))} exact steps "
                              "for different starts of this ensemble, and one stacked solve "
                              "takes one number for all; give exact_steps as a number, or "
                              "solve the starts one by one")


def take_positional(entry: str, field_class, positions: tuple, positional: tuple,
                    flow_options: dict, run_options: dict, parameters,
                    stacklevel: int = 3) -> None:
    """Move an entry point's positional arguments after ``flow`` (its old form) into
    ``flow_options`` (the field's ``rate_options``, in order) and ``run_options`` (then
    ``positions``), in place, warning :class:`~odeflow.errors.RenamedWarning` at the
    entry point's caller (they are keywords now).

    ``entry``: the call as shown up to ``flow`` (e.g. ``"solve(data, flow"``);
    ``parameters``: the entry point's ``inspect.signature(...).parameters`` (their
    defaults tell a keyword left at its default from one given); ``stacklevel`` as for
    :func:`warnings.warn` (3: the caller of the entry point that calls this).

    Raises
    ------
    ValidationError
        Naming the entry point when there are too many, or an argument given both by
        position and by name.
    """
    rates = tuple(field_class.rate_options)
    names = rates + tuple(positions)
    lead = entry.count(",") + 1
    if len(positional) > len(names):
        raise ValidationError(entry.partition("(")[0], f"takes at most {lead + len(names)} "
                              f"positional arguments ({entry.partition('(')[2]}, "
                              f"{', '.join(names)}), got {lead + len(positional)}")
    for name, value in zip(names, positional, strict=False):
        given = flow_options if name in rates else run_options
        if name in flow_options if name in rates else \
                not same_value(run_options[name], parameters[name].default):
            raise ValidationError(name, "given by position and by name")
        given[name] = value
    if positional:
        shown = ", ".join(f"{n}=" for n in names[:len(positional)])
        warnings.warn(RenamedWarning(f"positional arguments after flow are keywords now: "
                                     f"{entry}, {shown}...)"), stacklevel=stacklevel)


def same_value(a, b) -> bool:
    """Whether two option values are equal (arrays by their entries; False when it
    cannot tell)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
