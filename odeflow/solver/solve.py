"""The one solve entry point: :func:`solve` wraps :func:`scipy.integrate.solve_ivp`.

It looks up the vector field for ``flow`` (one module per level under
:mod:`odeflow.fields`), picks the integrator, passes the analytic Jacobian to
implicit methods, shows progress on long solves, and returns a
:class:`~odeflow.results.trajectory.Trajectory` with the solver statistics. A failed
solve raises :class:`~odeflow.errors.SolveError` with scipy's message; it is
never swallowed.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp
from threadpoolctl import ThreadpoolController

from odeflow.data import as_real_array, as_real_number, validate_positive
from odeflow.errors import SolveError, ValidationError
from odeflow.fields import family_of
from odeflow.fields.base import Field
from odeflow.fields.optimizers import optimizer_flow
from odeflow.solver.events import bind_events

#: Methods of solve_ivp that odeflow accepts.
METHODS = ("Radau", "BDF", "LSODA", "RK45", "DOP853", "RK23")
#: Methods that use a Jacobian.
IMPLICIT = ("Radau", "BDF", "LSODA")
#: Memory limit, in bytes, for anything that grows like ``size^2``: a dense
#: Jacobian (analytic, finite-difference, or LSODA's internal one in its stiff
#: mode) takes ``8 size^2`` bytes and the implicit methods hold a few more
#: matrices of that size for their LU factors. 64 MiB.
DENSE_MEMORY_LIMIT = 64 * 2**20
#: Largest state whose dense Jacobian fits :data:`DENSE_MEMORY_LIMIT` (2896).
DENSE_JACOBIAN_LIMIT = int(math.isqrt(DENSE_MEMORY_LIMIT // 8))
#: BLAS threads while ``solve_ivp`` runs (threadpoolctl). One: the fields' products
#: are small or sparse, and on the shared 2-core machine the default OpenBLAS
#: threads made the Level R K = 1000 solve's integrator steps 2-4x slower
#: (``benchmarks/bench_scale.py``; figures in ``docs/benchmarks.md``).
SOLVE_BLAS_THREADS = 1
#: Method of ``method="auto"`` for states above :data:`DENSE_JACOBIAN_LIMIT`
#: (memory linear in the state; chosen by ``benchmarks/bench_scale.py``).
LARGE_STATE_METHOD = "RK45"
#: Default budget of right-hand-side evaluations of one solve (``max_nfev``); the
#: solves of docs/benchmarks.md need 500-3,000. A solve that exhausts it raises
#: SolveError saying where in t it stopped, instead of running for hours.
MAX_NFEV = 100_000
#: Smallest ``atol`` accepted: below it the solvers' squared error norms overflow
#: for states near zero and the step size collapses (measured: LSODA on a
#: 6-token model never finishes at atol = 1e-200, finishes in 766 evaluations at 1e-100).
MIN_ATOL = 1e-100
#: Smallest ``rtol`` accepted: ``solve_ivp`` silently raises a smaller one to
#: ``100 * eps`` (with a warning), so asking for less would be a false promise.
MIN_RTOL = 100 * float(np.finfo(float).eps)
#: Seconds between progress lines when stderr is not a terminal (CI logs, pipes):
#: a solve shorter than this prints nothing.
PROGRESS_LOG_SECONDS = 10.0


@functools.lru_cache(maxsize=1)
def blas_controller() -> ThreadpoolController:
    """The :class:`threadpoolctl.ThreadpoolController` of the BLAS libraries, found once.

    ``threadpool_limits`` finds the loaded libraries again on every call (it
    reads ``/proc/self/maps``: 0.3 ms in a bare process, about 0.9 ms a solve
    in a sweep, whose process maps more libraries: 400 near-empty points took
    0.89 s serially with it, 0.54 s with this); the controller finds them once
    (its handles stay valid in forked workers).
    A BLAS library loaded after the first solve is not limited.
    """
    return ThreadpoolController()


class _BudgetExhausted(Exception):
    """Raised inside the right-hand side when the evaluation budget is used up."""

    def __init__(self, t):
        self.t = t


#: Memory budget, in bytes, of the default output grid of a solve: ``8 x state size x
#: points``. A large state gets fewer default output times (at least
#: :data:`MIN_OUTPUT_POINTS`) instead of gigabytes of snapshots; pass ``t_eval`` for more.
#: Measured on Level E with K = 100 classes (state 502,020, t_end = 1e8): 401
#: default points took 13.3 s, 8 of them copying the 1.6 GB of snapshots
#: (``benchmarks/bench_scale.py --case E100``; docs/benchmarks.md).
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

    Measured by ``benchmarks/bench_methods.py`` (figures in ``docs/benchmarks.md``):
    on shared-query-small at ``rtol=1e-8`` LSODA needs the fewest right-hand sides and the
    least wall time of Radau, BDF, LSODA, RK45 and DOP853 at every learning-rate
    ratio tried, and it switches to its stiff (BDF) mode with our analytic
    Jacobian when the problem turns stiff. A field may name its own choice in
    ``preferred_method``. Any method that may form a dense Jacobian (LSODA
    included) is only chosen while it fits :data:`DENSE_MEMORY_LIMIT` bytes
    (``8 size^2``; states up to :data:`DENSE_JACOBIAN_LIMIT` entries); above
    that ``auto`` uses :data:`LARGE_STATE_METHOD`, an explicit method whose
    memory grows like the state, or the field's own ``large_state_method``.
    """
    if dense_jacobian_bytes(field.size) > DENSE_MEMORY_LIMIT:
        return getattr(field, "large_state_method", None) or LARGE_STATE_METHOD
    return getattr(field, "preferred_method", None) or "LSODA"


def jacobian_options(field: Field, method: str) -> dict:
    """The ``jac`` / ``jac_sparsity`` keyword for an implicit ``method``.

    A field whose ``jacobian`` is sparse (``sparse_jacobian``) gives it to Radau
    and BDF at any size. Otherwise the analytic dense Jacobian while it fits
    :data:`DENSE_MEMORY_LIMIT`;
    above it, Radau and BDF get the field's sparsity pattern (a sparse
    matrix, finite differences on its columns) when it has one, and anything
    else would build a dense ``size^2`` matrix, so it is refused.

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
    if need <= DENSE_MEMORY_LIMIT:
        return {"jac": field.jacobian} if field.has_jacobian else {}
    pattern = field.jac_sparsity() if method != "LSODA" else None
    if pattern is not None:
        return {"jac_sparsity": pattern}
    raise ValidationError("method", f"{method} would form a dense {field.size} x "
                          f"{field.size} Jacobian ({need} bytes, limit "
                          f"{DENSE_MEMORY_LIMIT}) and this flow has no sparsity pattern "
                          f"there; use method='auto' or an explicit method (RK45, DOP853)")


def _check_span(t_span) -> tuple[float, float]:
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


def progress_mode(progress) -> str | None:
    """``"bar"``, ``"log"`` or None from :func:`solve`'s ``progress`` argument."""
    if progress is None:
        return "bar" if sys.stderr.isatty() else "log"
    return "bar" if progress else None


class _Progress:
    """Progress of a solve over log-time, advanced from inside the right-hand side.

    ``mode="bar"``: a tqdm bar showing the current ``t`` (on a terminal).
    ``mode="log"``: a line on stderr every :data:`PROGRESS_LOG_SECONDS` (off a
    terminal, so that a long solve in a log is not silent). ``None``: nothing.
    """

    def __init__(self, t0, t_end, mode, desc):
        self.mode = mode
        self.t0, self.t_end, self.desc = t0, t_end, desc
        self.scale = math.log1p(t_end - t0) or 1.0
        self.done = 0
        self.bar = None
        if mode == "bar":
            from tqdm.auto import tqdm

            self.bar = tqdm(total=1000, desc=desc, unit="‰ log-t", leave=False,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| t={postfix}")
        self.start = self.next_line = time.monotonic()
        self.next_line += PROGRESS_LOG_SECONDS

    def update(self, t, calls: int):
        """Show progress at time ``t`` after ``calls`` right-hand sides."""
        if self.mode is None:
            return
        if self.bar is not None:
            pos = int(1000 * math.log1p(max(t - self.t0, 0.0)) / self.scale)
            if pos > self.done:
                self.bar.update(min(pos, 1000) - self.done)
                self.done = min(pos, 1000)
                self.bar.set_postfix_str(f"{t:.3g}", refresh=False)
            return
        now = time.monotonic()
        if now >= self.next_line:
            self.next_line = now + PROGRESS_LOG_SECONDS
            share = 100.0 * math.log1p(max(t - self.t0, 0.0)) / self.scale
            print(f"odeflow: {self.desc}: t = {t:.4g} of {self.t_end:.4g} ({share:.0f}% of "
                  f"log t), {calls:,} right-hand sides, {now - self.start:.0f} s",
                  file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _integrate(field, t0, t_end, t_eval, method, rtol, atol, kwargs, max_nfev, what,
               progress, blas_threads, dense_output=False):
    """Run ``solve_ivp`` on ``field`` within the evaluation budget; ``(sol, stats)``.

    The right-hand side is checked (floating-point errors raise, a non-finite
    value is an error), the budget ``max_nfev`` ends the solve with
    :class:`SolveError` naming the ``t`` reached, and ``solve_ivp``'s own
    ``ValueError``/``ArithmeticError`` become :class:`SolveError`; a failed or
    non-finite solution too. Never returns a failed solve.
    """
    bar = _Progress(t0, t_end, progress_mode(progress), desc=what)
    calls = {"n": 0, "t": t0}

    def rhs(t, y):
        calls["n"] += 1
        calls["t"] = t
        if calls["n"] > max_nfev:
            raise _BudgetExhausted(t)
        bar.update(t, calls["n"])
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            out = field.rhs(t, y)
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(f"non-finite right-hand side at t = {t:g}")
        return out

    start = time.perf_counter()
    njev_before = field.njev

    def common() -> dict:
        """Statistics of every solve, ended or stopped, at the time of the call."""
        return {"method": method, "wall_time": time.perf_counter() - start,
                "rhs_calls": field.nfev, "jac_calls": field.njev, "rtol": rtol, "atol": atol,
                "analytic_jacobian": "jac" in kwargs}

    def failed() -> dict:
        """Statistics of a solve stopped by an exception, as far as it got."""
        return {**common(), "nfev": min(calls["n"], max_nfev),
                "njev": field.njev - njev_before, "status": -1, "t_reached": calls["t"]}

    try:
        with blas_controller().limit(limits=blas_threads, user_api="blas"):
            sol = solve_ivp(rhs, (t0, t_end), field.initial_state(), method=method,
                            t_eval=t_eval, rtol=rtol, atol=atol, dense_output=dense_output,
                            **kwargs)
    except FloatingPointError as exc:
        raise SolveError(f"{what}: floating-point error in the right-hand side: {exc}",
                         failed()) from None
    except _BudgetExhausted as exc:
        advice = "method='Radau' or 'LSODA', " if method not in IMPLICIT else ""
        raise SolveError(
            f"{what}: stopped at t = {exc.t:.6g} of t_end = {t_end:g} after max_nfev = "
            f"{max_nfev} right-hand-side evaluations (stiff, or tolerances too tight; try "
            f"{advice}looser rtol/atol, smaller learning rates or a larger max_nfev, "
            "--max-nfev of odeflow run)",
            failed()) from None
    except (ValueError, ArithmeticError) as exc:  # scipy's own checks inside the integrator
        raise SolveError(f"{what} failed near t = {calls['t']:.6g}: "
                         f"{type(exc).__name__}: {exc}", failed()) from None
    finally:
        bar.close()
    stats = {**common(), "nfev": int(sol.nfev), "njev": int(sol.njev), "nlu": int(sol.nlu),
             "status": int(sol.status), "message": str(sol.message)}
    if not sol.success:
        reached = sol.t[-1] if len(sol.t) else t0
        raise SolveError(f"{what} failed at t = {reached:g}: {sol.message}", stats)
    if not np.all(np.isfinite(sol.y)):
        raise SolveError(f"{what}: the solution is not finite", stats)
    return sol, stats


class _FamilyDefault:
    """Marks an argument of :func:`solve` the caller did not give: the family's default
    applies (``None`` given explicitly is an invalid value, reported as such)."""

    def __repr__(self) -> str:
        return "<the family's default>"


#: Default of :func:`solve`'s ``flow`` and learning rates: the model family's own default.
FAMILY_DEFAULT = _FamilyDefault()


def solve(data, flow: str = FAMILY_DEFAULT, eta_y: float = FAMILY_DEFAULT,
          eta_z: float = FAMILY_DEFAULT, t_span=(0.0, 1e4), t_eval=None, method: str = "auto",
          rtol: float = 1e-8, atol: float = 1e-10, z0=None, progress: bool | None = None,
          max_nfev: int | None = None, dense_output: bool = False, events=None,
          optimizer=None, **flow_options):
    """Integrate the training dynamics of a data model with scipy.

    Parameters
    ----------
    data : DataModel or another family's data model
        The data distribution (sequence classes, weights, vocabulary size).
        Its type picks the model family (:func:`odeflow.fields.family_of`):
        the flows, and the arguments they take, are that family's.
    flow : str, optional
        One of the family's flows; its default flow when omitted. Scan and
        Snap (:class:`~odeflow.data.DataModel`, default ``"exact"``):
        ``"exact"``: Level E, the population gradient flow of Lemma 1 (Eqns
        3-4, 7). ``"finite_t"``: Level T, the gradient flow of the finite-``T``
        objective on a seeded sample of sequences (spec section 8; options
        ``seq_len``, ``samples_per_class``, ``seed``). ``"reduced"``: Level R,
        Theorem 1 (Eqns 8-10, 44). ``"snap"``: the scalar system of Sec. 6
        (Eqns 13-14).
    eta_y, eta_z : float, optional
        Learning rates of the decoder and of the attention logits (Scan and
        Snap; 1 and 0.1 by default).
    t_span : (float, float)
        ``(t0, t_end)``.
    t_eval : array_like, optional
        Output times; log-spaced by default (:func:`default_t_eval`: 40 a
        decade, fewer for a state so large that the snapshots would exceed
        :data:`OUTPUT_BYTES_LIMIT`).
    method : str
        ``"auto"`` (see :func:`choose_method`) or a method of ``solve_ivp``
        (``Radau``, ``BDF``, ``LSODA``, ``RK45``, ``DOP853``, ``RK23``).
    rtol, atol : float
        Tolerances passed to ``solve_ivp``.
    z0 : optional
        Initial logits (``Z(0)``; zero by default; Scan and Snap).
    progress : bool, optional
        ``True``: a progress bar showing ``t``; ``False``: nothing. By default
        a bar when stderr is a terminal, else a line on stderr every
        :data:`PROGRESS_LOG_SECONDS` seconds of a long solve.
    max_nfev : int, optional
        Budget of right-hand-side evaluations (:data:`MAX_NFEV` by default);
        exhausting it raises :class:`SolveError` naming the ``t`` reached.
    dense_output : bool, default False
        Keep ``solve_ivp``'s continuous solution as ``traj.sol`` (``sol(t)`` is
        the raw state at any ``t`` in the span), as in ``solve_ivp``.
    events : callable, FieldEvent or list of them, optional
        Passed to ``solve_ivp``: plain functions ``event(t, y)`` of the raw
        state (with ``terminal`` / ``direction`` attributes), or ready events of
        :mod:`odeflow.solver.events` such as :func:`~odeflow.solver.events.snap_transition`
        (the maximum of ``gamma``, Theorem 1b). Results in ``traj.t_events``
        and ``traj.y_events``; a terminal event ends the solve early
        (``traj.status == 1``).
    optimizer : odeflow.Momentum or odeflow.Adam, optional
        Integrate the optimiser's ODE in *step time* around the level (spec
        section 9, :class:`~odeflow.fields.optimizers.OptimizerFlow`):
        ``t_span`` (from 0) and ``t_eval`` are then in optimiser steps (every
        whole step by default), ``traj.steps`` is the step axis and the
        optimiser state is kept (``traj.velocity``, ``traj.moments``). Only for
        levels whose state is the parameters (``exact``, ``finite_t``, the
        induction-head levels). None (default): the plain gradient flow.
    **flow_options
        Passed to the vector field (e.g. ``iota``, ``beta`` for ``"reduced"``;
        ``seq_len``, ``samples_per_class``, ``seed`` for ``"finite_t"``).

    Returns
    -------
    Trajectory
        With ``stats`` = ``{method, nfev, njev, nlu, status, message,
        wall_time, rhs_calls, jac_calls}`` and ``solve_ivp``'s fields
        ``success``, ``status``, ``message``, ``y`` (raw state), ``sol``,
        ``t_events``, ``y_events`` (:class:`~odeflow.results.solution.SolverOutput`).

    Raises
    ------
    ValidationError
        For invalid input, naming the field.
    SolveError
        When ``solve_ivp`` fails or the solution is not finite.
    """
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    field_class = family.field_class(flow)
    t0, t_end = _check_span(t_span)
    rtol, atol = check_tolerances(rtol, atol)
    max_nfev = _check_budget(max_nfev)
    t_eval = None if t_eval is None else _check_t_eval(t_eval, t0, t_end)
    given = {k: v for k, v in (("eta_y", eta_y), ("eta_z", eta_z)) if v is not FAMILY_DEFAULT}
    if z0 is not None:
        given["z0"] = z0
    options = {**family.defaults, **given, **flow_options}
    _check_flow_options(flow, field_class, options)
    field = field_class(data, **options)
    if optimizer is not None:
        field = optimizer_flow(field, optimizer, t0)
        if t_eval is None:
            t_eval = field.default_steps(t0, t_end)
    t_eval, method, kwargs = _prepare(field, t0, t_end, t_eval, method)
    if not isinstance(dense_output, bool):
        raise ValidationError("dense_output", f"must be True or False, got {dense_output!r}")
    event_functions, event_names = bind_events(events, field)
    if event_functions:
        kwargs["events"] = event_functions
    sol, stats = _integrate(field, t0, t_end, t_eval, method, rtol, atol, kwargs, max_nfev,
                            f"{flow} flow ({method})", progress, SOLVE_BLAS_THREADS,
                            dense_output)
    stats["n_state"] = field.size
    traj = field.trajectory(sol.t, sol.y.T, stats)
    traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol, "atol": atol})
    traj.attach_solution(sol.y, sol.sol, sol.t_events if event_functions else None,
                         sol.y_events if event_functions else None, event_names)
    return traj


def _check_budget(max_nfev) -> int:
    if max_nfev is None:
        return MAX_NFEV
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) \
            or max_nfev < 1:
        raise ValidationError("max_nfev", f"must be an integer >= 1, got {max_nfev!r:.80}")
    return int(max_nfev)


def _prepare(field, t0, t_end, t_eval, method) -> tuple:
    """``(t_eval, method, solve_ivp options)`` for ``field``: the default output times
    (sized to the state), the method ``"auto"`` resolves to (or a check of the one
    given) and its Jacobian options."""
    if t_eval is None:
        t_eval = default_t_eval(t0, t_end, state_size=field.size)
    if method == "auto":
        method = choose_method(field)
    elif method not in METHODS:
        raise ValidationError("method", f"unknown method {method!r}; choose 'auto' or one of "
                              f"{list(METHODS)}")
    return t_eval, method, jacobian_options(field, method)


#: Arguments of :func:`solve` itself that reach the Scan and Snap fields.
_SOLVE_ARGUMENTS = ("eta_y", "eta_z", "z0")


def _check_flow_options(flow: str, field_class, options: dict) -> None:
    """Reject keyword options the flow's vector field does not take, naming them."""
    params = inspect.signature(field_class.__init__).parameters
    allowed = [p for p in params if p not in ("self", "data")]
    for key in options:
        if key not in allowed:
            shown = [p for p in allowed if p not in _SOLVE_ARGUMENTS]
            raise ValidationError(key, f"unknown option for flow {flow!r}; it takes "
                                  f"{shown if shown else 'no options'}")


def solve_batch(data, params, flow: str = "exact", t_span=(0.0, 1e4), t_eval=None,
                method: str = "auto", rtol: float = 1e-8, atol: float = 1e-10, z0=None,
                progress: bool | None = None, blas_threads: int | None = 1,
                max_nfev: int | None = None, **flow_options) -> list:
    """Integrate one flow of one data model at many learning-rate points as one state.

    The ``P`` points are stacked into one state
    (:class:`~odeflow.fields.stacked.StackedField`) and integrated by one
    ``solve_ivp`` call whose right-hand side evaluates every point in one
    vectorised call: a sweep over ``(eta_Y, eta_Z)`` pays numpy's and scipy's
    per-call overhead once per step, not once per point.

    Parameters
    ----------
    data : DataModel
    params : sequence of (eta_y, eta_z)
        The learning-rate points, finite and positive.
    flow, t_span, t_eval, method, z0, progress, **flow_options
        As for :func:`solve`; ``method="auto"`` sees the stacked state (so
        large batches get an explicit method, :func:`choose_method`).
        Implicit methods get the block-diagonal analytic Jacobian as a sparse
        matrix.
    rtol, atol : float
        Tolerances *per point*. ``solve_ivp`` controls the RMS norm of the
        error over the whole stacked state, in which one point's error would
        count ``1/sqrt(P)``; the stacked solve therefore runs at ``rtol /
        sqrt(P)`` and ``atol / sqrt(P)`` so that each point's own RMS error
        stays within ``rtol, atol``.
    max_nfev : int, optional
        Budget of right-hand-side evaluations of the stacked solve, as for
        :func:`solve`.
    blas_threads : int or None, default 1
        BLAS threads during the solve (:func:`blas_controller`);
        None keeps the library's default. The stacked products are many tiny
        matrices, for which threads cost more than they give
        (``benchmarks/bench_batch.py`` measures both).

    Returns
    -------
    list of Trajectory
        One per point, in order, each with the batch's ``stats`` (plus
        ``batch_size``) and its own ``eta_y``, ``eta_z`` in ``meta``.

    Raises
    ------
    ValidationError
        For invalid input, naming the field (``params`` for the points).
    SolveError
        When the stacked solve fails.
    """
    from odeflow.fields import SCAN_SNAP
    from odeflow.fields.stacked import StackedField

    field_class = SCAN_SNAP.field_class(flow)
    try:
        points = [(p[0], p[1]) for p in params] if len(params[0]) == 2 else None
    except (TypeError, IndexError, KeyError):
        points = None
    if not points:
        raise ValidationError("params", f"must be a non-empty sequence of (eta_y, eta_z) "
                              f"pairs, got {params!r:.80}")
    t0, t_end = _check_span(t_span)
    rtol, atol = check_tolerances(rtol, atol)
    max_nfev = _check_budget(max_nfev)
    t_eval = None if t_eval is None else _check_t_eval(t_eval, t0, t_end)
    _check_flow_options(flow, field_class, flow_options)
    field = StackedField([field_class(data, ey, ez, z0=z0, **flow_options)
                          for ey, ez in points])
    t_eval, method, kwargs = _prepare(field, t0, t_end, t_eval, method)
    scale = math.sqrt(field.P)
    sol, stats = _integrate(field, t0, t_end, t_eval, method, rtol / scale, atol / scale,
                            kwargs, max_nfev, f"{flow} flow x {field.P} ({method})", progress,
                            blas_threads)
    stats.update({"rtol": rtol, "atol": atol, "batch_size": field.P, "n_state": field.n})
    out = field.trajectory(sol.t, sol.y.T, stats)
    for traj in out:
        traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol,
                          "atol": atol})
    return out
