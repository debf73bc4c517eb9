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
import threading
import time
import warnings
from contextlib import contextmanager
from types import SimpleNamespace

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
#: are small or sparse, and more threads cost more than they give
#: (``benchmarks/bench_scale.py`` measures both; docs/benchmarks.md).
SOLVE_BLAS_THREADS = 1
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
#: Seconds between progress lines when stderr is not a terminal (CI logs, pipes):
#: a solve shorter than this prints nothing.
PROGRESS_LOG_SECONDS = 10.0
#: Right-hand sides between two checks that a solve still gets on (:func:`_integrate`);
#: its pace (``t`` per right-hand side) is measured over each such window.
STALL_CALLS = 500
#: A solve whose ``t`` advanced by less than this times ``t`` over :data:`STALL_CALLS`
#: right-hand sides has stalled (its step size is near the spacing of floats at ``t``).
STALL_RELATIVE = 1e-12
#: A field is rounding noise when one-ulp changes of the state change the right-hand
#: side by more than this times ``rtol`` of its size (:func:`roundoff_level`): the error
#: estimates are then noise and the step size cannot settle.
ROUNDOFF_FACTOR = 100.0
#: A solve crawls when its pace fell since the window before, its field is rounding
#: noise, and at that pace the rest of the span needs more than this many times the
#: right-hand sides taken so far (or more than ``max_nfev`` allows); it then stops.
CRAWL_RATIO = 4.0
#: Smallest time span LSODA can integrate: below about ``sqrt(tiny) = 1.5e-154`` its
#: step-size arithmetic, which squares the step, underflows and it never leaves ``t0``.
#: Radau, BDF and RK45 solve spans down to 1e-307.
LSODA_MIN_SPAN = 1e-150


@functools.lru_cache(maxsize=1)
def blas_controller() -> ThreadpoolController:
    """The :class:`threadpoolctl.ThreadpoolController` of the BLAS libraries, found once.

    ``threadpool_limits`` finds the loaded libraries again on every call (it
    reads ``/proc/self/maps``, which costs about a millisecond in a sweep's
    process); the controller finds them once (its handles stay valid in forked
    workers).
    A BLAS library loaded after the first solve is not limited.
    """
    return ThreadpoolController()


class _BudgetExhausted(Exception):
    """Raised inside the right-hand side when the evaluation budget is used up."""

    def __init__(self, t):
        self.t = t


class _Stopped(Exception):
    """Raised inside the right-hand side when the solve cannot get on; ``why`` says why."""

    def __init__(self, t, why: str):
        self.t, self.why = t, why


def roundoff_level(rhs, t: float, y: np.ndarray, samples: int = 4) -> float:
    """How much of the right-hand side ``rhs(t, y)`` is rounding error at ``y``.

    The largest change of any component when every entry of the state moves by
    about one unit in the last place (seeded, ``samples`` draws), over the
    largest component: about ``eps`` for a well-conditioned field, about
    ``eta_z eps`` (2e-4 at ``eta_z = 1e12``) for the exact flow at a large
    attention learning rate, whose fast logits sit where the projection
    ``P_n g_n = g_n - f_n (f_n . g_n)`` of Eqn 7 nearly cancels.
    """
    base = np.asarray(rhs(t, y), dtype=float)
    scale = float(np.max(np.abs(base)))
    if not scale > 0:
        return 0.0
    rng = np.random.default_rng(0)
    eps = float(np.finfo(float).eps)
    spread = 0.0
    for _ in range(samples):
        moved = y * (1.0 + eps * rng.standard_normal(y.shape))
        spread = max(spread, float(np.max(np.abs(np.asarray(rhs(t, moved)) - base))))
    return spread / scale


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

    def update(self, t, calls: int, step: float = math.nan):
        """Show progress at time ``t`` after ``calls`` right-hand sides (last step ``step``)."""
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
            elapsed = now - self.start
            print(f"odeflow: {self.desc}: t = {t:.4g} of {self.t_end:.4g} ({share:.0f}% of "
                  f"log t), step {step:.3g}, {calls:,} right-hand sides "
                  f"({calls / max(elapsed, 1e-9):,.0f}/s), {elapsed:.0f} s",
                  file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


#: Fewest seconds of evaluating a solve's result before a line says so, and between two
#: such lines (:func:`_evaluating`).
RESULT_QUIET_SECONDS = 2.0


@contextmanager
def _evaluating(what: str, times: int, progress):
    """Say on stderr that a solve is evaluating its result at ``times`` output times,
    while that lasts: a line every :data:`PROGRESS_LOG_SECONDS` (after
    :data:`RESULT_QUIET_SECONDS` where a bar showed the integration, and never more
    often than that); nothing when ``progress`` is False or the result takes less."""
    mode = progress_mode(progress)
    if mode is None:
        yield
        return
    done, start = threading.Event(), time.monotonic()
    every = max(PROGRESS_LOG_SECONDS, RESULT_QUIET_SECONDS)

    def beat():
        wait = RESULT_QUIET_SECONDS if mode == "bar" else every
        while not done.wait(wait):
            print(f"odeflow: {what}: integrated; evaluating the result at {times:,} output "
                  f"times, {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
            wait = every

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _coarser(level: float) -> str:
    """A tolerance at least ten times a rounding ``level``, as ``1e-k``."""
    return f"1e{min(-1, math.ceil(math.log10(10.0 * level))):d}"


def _integrate(field, t0, t_end, t_eval, method, rtol, atol, kwargs, max_nfev, what,
               progress, blas_threads, dense_output=False, y0=None):
    """Run ``solve_ivp`` on ``field`` within the evaluation budget; ``(sol, stats)``.

    The right-hand side is checked (floating-point errors raise, a non-finite
    value is an error), the budget ``max_nfev`` ends the solve with
    :class:`SolveError` naming the ``t`` reached, so does a solve whose ``t`` stops
    moving or that crawls on a field of rounding noise (checked every
    :data:`STALL_CALLS` right-hand sides, :data:`CRAWL_RATIO`), and ``solve_ivp``'s own
    ``ValueError``/``ArithmeticError`` become :class:`SolveError`; a failed or
    non-finite solution too. Never returns a failed solve.
    """
    if method == "LSODA" and t_end - t0 < LSODA_MIN_SPAN:
        raise SolveError(f"{what}: the time span {t_end - t0:.3g} is below what LSODA "
                         f"resolves ({LSODA_MIN_SPAN:g}: its step-size arithmetic underflows "
                         "and it never leaves t0); use method='Radau', 'BDF' or 'RK45', or "
                         "a longer t_end", {"method": method, "status": -1, "nfev": 0})
    bar = _Progress(t0, t_end, progress_mode(progress), desc=what)
    calls = {"n": 0, "t": t0, "far": t0, "step": math.nan, "mark": t0,
             "pace": 0.0}  # t per right-hand side in the last check's window (0: none yet)

    def rhs(t, y):
        calls["n"] += 1
        calls["t"] = t
        if t > calls["far"]:  # the furthest time evaluated; the last step taken towards it
            calls["step"], calls["far"] = t - calls["far"], t
        if calls["n"] > max_nfev:
            raise _BudgetExhausted(t)
        if calls["n"] % STALL_CALLS == 0:
            check_progress(t, y)
        bar.update(t, calls["n"], calls["step"])
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            out = field.rhs(t, y)
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(f"non-finite right-hand side at t = {t:g}")
        return out

    def check_progress(t, y):
        """Stop a solve whose t no longer moves, or that crawls on a field of rounding
        noise: slower than in the window before and far from done."""
        far = calls["far"]
        if far - calls["mark"] <= STALL_RELATIVE * max(abs(far), float(np.finfo(float).tiny)):
            raise _Stopped(far, f"t advanced by less than {STALL_RELATIVE:g} t over the last "
                                f"{STALL_CALLS:,} right-hand sides (the step size collapsed "
                                "to the spacing of floating-point numbers at t)")
        pace = (far - calls["mark"]) / STALL_CALLS  # t per right-hand side, lately
        slowing = pace <= calls["pace"]
        calls["mark"], calls["pace"] = far, pace
        needed = (t_end - far) / pace
        over_budget = calls["n"] + needed > max_nfev
        if not slowing or (not over_budget and needed <= CRAWL_RATIO * calls["n"]):
            return
        with np.errstate(all="ignore"):
            level = roundoff_level(field.rhs, t, np.asarray(y, dtype=float))
        if level > ROUNDOFF_FACTOR * rtol:
            beyond = (f"beyond max_nfev = {max_nfev}" if over_budget else
                      f"over {needed / calls['n']:.0f} times the {calls['n']:,} so far")
            raise _Stopped(far, f"at this pace it needs about {needed:,.0f} more, {beyond}, "
                                f"because the right-hand side is rounding noise here: one-ulp "
                                f"changes of the state change it by {level:.2g} of its size, "
                                f"far more than rtol = {rtol:g}, so the step size cannot "
                                "settle (a learning rate this large amplifies rounding error "
                                f"by its size); use rtol = {_coarser(level)} or more, or a "
                                "smaller learning rate")

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
        with blas_controller().limit(limits=blas_threads, user_api="blas"), \
                _integrator_warnings() as said:
            sol = solve_ivp(rhs, (t0, t_end), field.initial_state() if y0 is None else y0,
                            method=method,
                            t_eval=t_eval, rtol=rtol, atol=atol, dense_output=dense_output,
                            **kwargs)
    except FloatingPointError as exc:
        raise SolveError(f"{what}: floating-point error in the right-hand side: {exc}",
                         failed()) from None
    except _Stopped as exc:
        raise SolveError(f"{what}: stopped at t = {exc.t:.6g} of t_end = {t_end:g} after "
                         f"{calls['n']:,} right-hand sides: {exc.why}", failed()) from None
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
             "status": int(sol.status), "message": str(sol.message),
             "integrator_warnings": said}
    if not sol.success:
        reached = sol.t[-1] if len(sol.t) else t0
        raise SolveError(f"{what} failed at t = {reached:g}: {sol.message}", stats)
    if not np.all(np.isfinite(sol.y)):
        raise SolveError(f"{what}: the solution is not finite", stats)
    return sol, stats


@contextmanager
def _integrator_warnings():
    """Collect the warnings of scipy's integrators (LSODA's "repeated convergence
    failures", ...) into the yielded list, each message once, for the solve's statistics;
    any other warning is issued as usual."""
    said: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield said
    finally:
        for w in caught:
            if "scipy" in (w.filename or "") and "integrate" in w.filename:
                text = " ".join(str(w.message).split())
                if text not in said:
                    said.append(text)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                                       source=w.source)


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
        objective on a seeded sample of sequences (docs/fidelity.md; options
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
        Integrate the optimiser's ODE in *step time* around the level
        (docs/optimisers.md, :class:`~odeflow.fields.optimizers.OptimizerFlow`):
        ``t_span`` (from 0) and ``t_eval`` are then in optimiser steps (every
        whole step by default), ``traj.steps`` is the step axis and the
        optimiser state is kept (``traj.velocity``, ``traj.moments``). Only for
        levels whose state is the parameters (``exact``, ``finite_t``; the
        induction-head levels refuse it). None (default): the plain gradient flow.
    schedule : Schedule, optional
        (Passed among ``flow_options``.) Training stages solved one after the
        other (:func:`solve_schedule`; induction heads:
        ``Schedule.staged(t_c, t_w, t_a)``); the stages' durations set the span,
        so ``t_span`` must be left at its default or equal ``(0, end)``.
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
    if flow_options.get("schedule") is not None:
        given = {k: v for k, v in (("eta_y", eta_y), ("eta_z", eta_z), ("z0", z0))
                 if v is not FAMILY_DEFAULT and v is not None}
        return _solve_scheduled(data, flow, t_span, flow_options.pop("schedule"),
                                t_eval=t_eval, method=method, rtol=rtol, atol=atol,
                                progress=progress, max_nfev=max_nfev, **given,
                                **flow_options)
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    field_class = family.field_class(flow)
    t0, t_end, t_eval, rtol, atol, max_nfev = _check_run(t_span, t_eval, rtol, atol, max_nfev)
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
        t0 = field.start_step  # at rest half a step early for the heavy ball's offset
    t_eval, method, kwargs = _prepare(field, t0, t_end, t_eval, method)
    if not isinstance(dense_output, bool):
        raise ValidationError("dense_output", f"must be True or False, got {dense_output!r}")
    event_functions, event_names = bind_events(events, field)
    if event_functions:
        kwargs["events"] = event_functions
    what = f"{flow} flow ({method})"
    run = functools.partial(_integrate, field, method=method, rtol=rtol, atol=atol,
                            kwargs=kwargs, max_nfev=max_nfev, what=what, progress=progress,
                            blas_threads=SOLVE_BLAS_THREADS, dense_output=dense_output)
    sol, stats = _run_from(field, t0, t_end, t_eval, run)
    stats["n_state"] = field.size
    with _evaluating(what, len(sol.t), progress):
        traj = field.trajectory(sol.t, sol.y.T, stats)
    traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol, "atol": atol})
    traj.attach_solution(sol.y, sol.sol, sol.t_events if event_functions else None,
                         sol.y_events if event_functions else None, event_names)
    return traj


def _run_from(field, t0: float, t_end: float, t_eval, run) -> tuple:
    """``(sol, stats)`` of ``run`` (a partial :func:`_integrate` on ``field``) over ``[t0,
    t_end]``, the first steps copied from the recursion when the field takes some exactly
    (:func:`_after_exact_steps`)."""
    head = getattr(field, "exact_until", None)
    if head is not None and head > t0:
        return _after_exact_steps(field, head, t_end, np.asarray(t_eval, float), run)
    return run(t0=t0, t_end=t_end, t_eval=t_eval)


class _ExactThenDense:
    """Dense output of a solve whose first steps are the recursion's own states: those
    (straight lines between them) up to ``head``, the integrator's after."""

    def __init__(self, field, head: float, dense):
        self.field, self.head, self.dense = field, head, dense

    def __call__(self, t):
        t = np.asarray(t, dtype=float)
        flat = t.reshape(-1)
        out = np.empty((self.field.size, flat.size))
        early = flat <= self.head
        if early.any():
            out[:, early] = self.field.exact_state_at(flat[early]).T
        if (~early).any():
            out[:, ~early] = np.asarray(self.dense(flat[~early])).reshape(self.field.size, -1)
        return out[:, 0] if t.ndim == 0 else out


def _after_exact_steps(field, head: float, t_end: float, t_eval: np.ndarray, run) -> tuple:
    """``(sol, stats)`` of a field whose first ``head`` steps are exact (an Adam flow's
    ``exact_steps``): their states copied at the output times up to ``head``, the ODE
    integrated by ``run`` from the field's ODE start (:attr:`OptimizerFlow.ode_start`: the
    exact state at ``head``, or half a step before it for a staggered reading). Events watch
    the trajectory after ``head`` only: with a staggered reading the half step before it is
    integrated first without them (its right-hand sides and statistics added)."""
    pre = t_eval[t_eval <= head]
    if t_end > head:
        t0, y0, lead = field.ode_start, field.ode_start_state(), None
        if t0 < head and run.keywords["kwargs"].get("events"):
            quiet = {**run.keywords, "dense_output": False,
                     "kwargs": {k: v for k, v in run.keywords["kwargs"].items()
                                if k != "events"}}
            lead, lead_stats = run.func(*run.args, **quiet, t0=t0, t_end=head, t_eval=None,
                                        y0=y0)
            t0, y0 = head, lead.y[:, -1]
        sol, stats = run(t0=t0, t_end=t_end, t_eval=t_eval[t_eval > head], y0=y0)
        if lead is not None:
            for key in ("nfev", "njev", "nlu", "wall_time"):
                stats[key] += lead_stats[key]
        # no output time reached (a terminal event before the first one): no columns
        t_ode, dense = sol.t, sol.sol
        y_ode = np.asarray(sol.y, dtype=float).reshape(field.size, -1)
        events = (getattr(sol, "t_events", None), getattr(sol, "y_events", None))
    else:  # the exact steps reach t_end: nothing to integrate
        t_ode, y_ode, dense, events = np.empty(0), np.empty((field.size, 0)), None, (None, None)
        stats = {"method": run.keywords["method"], "wall_time": 0.0, "rhs_calls": field.nfev,
                 "jac_calls": field.njev, "rtol": run.keywords["rtol"],
                 "atol": run.keywords["atol"], "analytic_jacobian": False, "nfev": 0,
                 "njev": 0, "nlu": 0, "status": 0,
                 "message": "the exact steps reach the end of the span"}
    stats["exact_until"] = head
    y = np.hstack([field.exact_state_at(pre).T, y_ode])
    out = SimpleNamespace(t=np.concatenate([pre, t_ode]), y=y, t_events=events[0],
                          y_events=events[1],
                          sol=None if dense is None else _ExactThenDense(field, head, dense))
    return out, stats


def _check_common_exact_steps(optimizer, wrapped) -> None:
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


def _solve_scheduled(data, flow, t_span, schedule, **options):
    """``solve(..., schedule=...)``: :func:`solve_schedule`, with
    ``t_span`` left at its default or equal to ``(0, the schedule's end)``."""
    end = getattr(schedule, "end", None)
    if t_span != _DEFAULT_SPAN and end is not None \
            and tuple(_check_span(t_span)) != (0.0, float(end)):
        raise ValidationError("t_span", f"is set by the schedule's stages, (0, {end:g}); "
                              f"leave it out or give that, got {t_span!r:.80}")
    return solve_schedule(data, schedule, flow=flow, **options)


#: ``t_span`` of :func:`solve` when not given.
_DEFAULT_SPAN = (0.0, 1e4)


def _check_run(t_span, t_eval, rtol, atol, max_nfev) -> tuple:
    """The checked ``(t0, t_end, t_eval, rtol, atol, max_nfev)`` of a solve
    (:func:`solve`, :func:`solve_batch`, :func:`solve_ensemble`); a ValidationError
    names the argument."""
    t0, t_end = _check_span(t_span)
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
    t0, t_end, t_eval, rtol, atol, max_nfev = _check_run(t_span, t_eval, rtol, atol, max_nfev)
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


def solve_ensemble(data, starts, flow: str = "exact", eta_y: float = 1.0, eta_z: float = 0.1,
                   t_span=(0.0, 1e4), t_eval=None, method: str = "RK45", rtol: float = 1e-8,
                   atol: float = 1e-10, optimizer=None, progress: bool | None = None,
                   blas_threads: int | None = SOLVE_BLAS_THREADS, max_nfev: int | None = None,
                   **flow_options) -> list:
    """Integrate one flow from many starts as one state: one result per start.

    The ``P`` members (one field per start, the same rates and options; for
    Level T the same sample) are stacked
    (:class:`~odeflow.fields.ensemble.StartEnsemble`) and integrated by one
    ``solve_ivp`` call whose right-hand side evaluates every member in one
    vectorised call (per class block for Level T,
    :meth:`~odeflow.fields.finite_t.FiniteTFlow.gradients`); with ``optimizer``
    the optimiser flow (docs/optimisers.md) wraps the stack, in step time, as in
    :func:`solve`. Each result is the one :func:`solve` returns for that start
    (same layout, series and meta), up to the solver's tolerance.

    Parameters
    ----------
    data : DataModel
    starts : sequence of (y0, z0)
        Each member's initial decoder and logits (either may be None: zero).
    flow, eta_y, eta_z, t_span, t_eval, optimizer, progress, max_nfev, **flow_options
        As for :func:`solve` (flows with a batched ``gradients``: ``"exact"``,
        ``"finite_t"``).
    method : str, default "RK45"
        An explicit method of ``solve_ivp`` (the stack has no Jacobian).
    rtol, atol : float
        Tolerances *per member*. ``solve_ivp`` controls the RMS norm of the
        error over the stacked state, in which one member's error counts
        ``1/sqrt(P)``; the stacked solve runs at ``rtol / sqrt(P)``, ``atol /
        sqrt(P)`` so that each member's own RMS error stays within ``rtol``,
        ``atol`` (as :func:`solve_batch`). The members share the step sizes, so
        each result differs from its own :func:`solve` within the tolerance, not
        bit for bit.
    blas_threads : int or None, default :data:`SOLVE_BLAS_THREADS`
        BLAS threads during the solve (None: the library's default).

    Returns
    -------
    list of Trajectory
        One per start, in order, each with the ensemble's ``stats`` (plus
        ``ensemble_size``).

    Raises
    ------
    ValidationError
        For invalid input, naming the field (``starts`` for the starts,
        ``method`` for an implicit method).
    SolveError
        When the stacked solve fails.
    """
    from odeflow.fields import SCAN_SNAP
    from odeflow.fields.ensemble import StartEnsemble

    field_class = SCAN_SNAP.field_class(flow)
    try:
        starts = [(y0, z0) for y0, z0 in starts]
    except (TypeError, ValueError):
        starts = None
    if not starts:
        raise ValidationError("starts", "must be a non-empty sequence of (y0, z0) pairs")
    if method not in METHODS or method in IMPLICIT or method == "LSODA":
        raise ValidationError("method", f"must be an explicit method of solve_ivp (RK45, "
                              f"DOP853, RK23), got {method!r:.80}")
    t0, t_end, t_eval, rtol, atol, max_nfev = _check_run(t_span, t_eval, rtol, atol, max_nfev)
    options = {"eta_y": eta_y, "eta_z": eta_z, **flow_options}
    _check_flow_options(flow, field_class, options)
    members = [field_class(data, y0=y0, z0=z0, **options) for y0, z0 in starts]
    stack = StartEnsemble(members)
    field, wrapped = stack, None
    if optimizer is not None:
        field = optimizer_flow(stack, optimizer, t0)
        wrapped = [optimizer_flow(m, optimizer, t0) for m in members]
        _check_common_exact_steps(optimizer, wrapped)
        if t_eval is None:
            t_eval = field.default_steps(t0, t_end)
        t0 = field.start_step
    if t_eval is None:
        t_eval = default_t_eval(t0, t_end, state_size=stack.n)
    scale = math.sqrt(stack.P)
    run = functools.partial(_integrate, field, method=method, rtol=rtol / scale,
                            atol=atol / scale, kwargs={}, max_nfev=max_nfev,
                            what=f"{flow} flow from {stack.P} starts ({method})",
                            progress=progress, blas_threads=blas_threads)
    sol, stats = _run_from(field, t0, t_end, t_eval, run)
    stats.update({"rtol": rtol, "atol": atol, "ensemble_size": stack.P, "n_state": stack.n})
    if wrapped is None:
        out = stack.trajectory(sol.t, sol.y.T, stats)
    else:  # member i's blocks (theta, then the optimiser's state) of the stacked layout
        out = []
        for i, flow_i in enumerate(wrapped):
            rows = np.concatenate([b * stack.size + stack.member_slice(i)
                                   for b in range(field.blocks)])
            out.append(flow_i.trajectory(sol.t, sol.y[rows].T, dict(stats)))
    for traj in out:
        traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol,
                          "atol": atol})
    return out


# --------------------------------------------------------------------------- schedules
# A stage moves some parameter groups at their own rates and freezes the others (the
# training schedules of docs/induction.md: the authors' staged c -> w -> a and joint
# runs). Each
# stage is one solve() on [T_{k-1}, T_k] from the end state of the stage before (the
# field's ``rates``, ``start`` and ``start_log_c`` options: the parameters and the
# selector's ``ln|c|`` of the stage's result); the field class's ``join`` makes one result
# on [0, T_end]. Any flow whose field takes those options, whose result has
# ``parameters(i)`` and ``log_c``, and whose class offers ``join`` can be staged.

def solve_schedule(data, schedule, flow: str = FAMILY_DEFAULT, t_eval=None, **options):
    """Solve the stages of ``schedule`` one after the other and join their results.

    Parameters
    ----------
    data : data model
        E.g. an :class:`~odeflow.data.induction.InductionData`.
    schedule : Schedule
        Its stages (:class:`~odeflow.fields.induction.base.Stage`: rates of the
        moving groups, duration), e.g. ``Schedule.staged(t_c, t_w, t_a)``.
    flow : str, optional
        The family's default flow when omitted.
    t_eval : array_like, optional
        Output times in ``[0, T_end]``; each stage reports those in its span plus
        its end (so that the next stage starts from it). By default every stage
        ``[T_{k-1}, T_k]`` has :func:`odeflow.solver.solve.default_t_eval`'s grid
        of ``[0, T_k - T_{k-1}]`` shifted by ``T_{k-1}`` (log-spaced from the
        stage's start).
    **options
        Passed to every :func:`odeflow.solve` call (``loss``, ``method``,
        ``rtol``, ``atol``, ``progress``, ``max_nfev`` ...; ``start`` is the
        first stage's start).

    Returns
    -------
    The field class's joined result (e.g. an InductionTrajectory), with
    ``stats["stages"]`` (each stage's statistics) and ``meta["schedule"]``.

    Raises
    ------
    ValidationError
        For an invalid schedule (naming ``schedule[i]...``), ``rates`` or
        ``t_span`` among ``options`` (the schedule sets them) or a flow that
        cannot be staged.
    """
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    field_class = family.field_class(flow)
    if not hasattr(field_class, "join") or not hasattr(schedule, "checked"):
        raise ValidationError("schedule", f"flow {flow!r} cannot be staged, or the schedule "
                              f"is not a Schedule (got {type(schedule).__name__})")
    for key in ("rates", "t_span"):
        if key in options:
            raise ValidationError(key, "is set by the schedule's stages; give it there")
    stages = schedule.checked(field_class.groups)
    ends = np.cumsum([s.duration for s in stages])
    if t_eval is not None:
        t_eval = as_real_array(t_eval, "t_eval").ravel()
        if t_eval.size == 0 or not np.all(np.isfinite(t_eval)) or np.any(np.diff(t_eval) <= 0) \
                or t_eval[0] < 0 or t_eval[-1] > ends[-1]:
            raise ValidationError("t_eval", f"must be finite, strictly increasing times in "
                                  f"[0, {ends[-1]:g}]")
    start = options.pop("start", None)
    log_c = options.pop("start_log_c", None)
    parts = []
    t0 = 0.0
    for stage, t1 in zip(stages, ends, strict=True):
        if t_eval is None:
            grid = np.union1d(t0 + default_t_eval(0.0, float(t1) - t0), [t0, t1])
            grid = grid[(grid >= t0) & (grid <= t1)]
        else:
            inside = t_eval[(t_eval >= t0) & (t_eval < t1)]
            grid = np.union1d(inside, [t0, t1]) if not parts else np.union1d(inside, [t1])
            grid = np.union1d(grid, [t0])
        traj = solve(data, flow=flow, t_span=(t0, float(t1)), t_eval=grid, rates=stage.rates,
                     start=start, start_log_c=log_c, **options)
        # the next stage starts from this one's parameters, the selector's magnitudes
        # from ln|c| (a losing coefficient may lie below the range of doubles)
        start, log_c = traj.parameters(-1), traj.log_c[-1]
        parts.append(traj)
        t0 = float(t1)
    joined = field_class.join(parts)
    joined.stats["message"] = _stages_message([p.stats.get("message", "") for p in parts])
    return joined


def _stages_message(messages) -> str:
    """One readable termination message for the stages of a schedule."""
    if len(set(messages)) == 1:
        return f"{len(messages)} stages: {messages[0]}"
    return "; ".join(f"stage {i}: {m}" for i, m in enumerate(messages, start=1))
