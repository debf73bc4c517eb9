"""The integrator loop of a solve: ``solve_ivp`` within a budget, watched as it runs.

:func:`integrate_field` runs :func:`scipy.integrate.solve_ivp` on a field with its
right-hand side checked and counted: the evaluation budget ``max_nfev``, stall and
crawl detection (:data:`STALL_CALLS`, :data:`CRAWL_RATIO`), progress on stderr
(:func:`progress_mode`), the integrators' own warnings collected into the statistics,
and every failure raised as :class:`~odeflow.errors.SolveError`. :func:`run_from`
adds the exact first steps of an optimiser flow.
"""

from __future__ import annotations

import functools
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

from odeflow.errors import SolveError
from odeflow.solver.options import IMPLICIT

#: BLAS threads while ``solve_ivp`` runs (threadpoolctl). One: the fields' products
#: are small or sparse, and more threads cost more than they give
#: (``benchmarks/bench_scale.py`` measures both; docs/benchmarks.md).
SOLVE_BLAS_THREADS = 1
#: Seconds between progress lines when stderr is not a terminal (CI logs, pipes):
#: a solve shorter than this prints nothing.
PROGRESS_LOG_SECONDS = 10.0
#: Right-hand sides between two checks that a solve still gets on (:func:`integrate_field`);
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
#: such lines (:func:`evaluating`).
RESULT_QUIET_SECONDS = 2.0


@contextmanager
def evaluating(what: str, times: int, progress):
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


class _WatchedRhs:
    """The right-hand side of ``field`` as ``solve_ivp`` calls it, counted and watched.

    Floating-point errors raise, a non-finite value is an error, the call after
    ``max_nfev`` raises :class:`_BudgetExhausted`, and every :data:`STALL_CALLS`
    calls :meth:`check_pace` stops a solve that stalls or crawls; progress is shown
    on ``bar``.
    """

    def __init__(self, field, t0, t_end, rtol, max_nfev, bar, window=STALL_CALLS):
        self.field, self.t_end, self.rtol, self.max_nfev, self.bar = (field, t_end, rtol,
                                                                      max_nfev, bar)
        self.window = window  # right-hand sides between two pace checks
        self.n, self.t, self.far, self.step, self.mark = 0, t0, t0, math.nan, t0
        self.pace = 0.0  # t per right-hand side in the last check's window (0: none yet)

    def __call__(self, t, y):
        self.n += 1
        self.t = t
        if t > self.far:  # the furthest time evaluated; the last step taken towards it
            self.step, self.far = t - self.far, t
        if self.n > self.max_nfev:
            raise _BudgetExhausted(t)
        if self.n % self.window == 0:
            self.check_pace(t, y)
        self.bar.update(t, self.n, self.step)
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            out = self.field.rhs(t, y)
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(f"non-finite right-hand side at t = {t:g}")
        return out

    def check_pace(self, t, y):
        """Stop a solve whose t no longer moves, or that crawls on a field of rounding
        noise: slower than in the window before and far from done."""
        far = self.far
        if far - self.mark <= STALL_RELATIVE * max(abs(far), float(np.finfo(float).tiny)):
            raise _Stopped(far, f"t advanced by less than {STALL_RELATIVE:g} t over the last "
                                f"{self.window:,} right-hand sides (the step size collapsed "
                                "to the spacing of floating-point numbers at t)")
        pace = (far - self.mark) / self.window  # t per right-hand side, lately
        slowing = pace <= self.pace
        self.mark, self.pace = far, pace
        needed = (self.t_end - far) / pace
        over_budget = self.n + needed > self.max_nfev
        if not slowing or (not over_budget and needed <= CRAWL_RATIO * self.n):
            return
        with np.errstate(all="ignore"):
            level = roundoff_level(self.field.rhs, t, np.asarray(y, dtype=float))
        if level > ROUNDOFF_FACTOR * self.rtol:
            beyond = (f"beyond max_nfev = {self.max_nfev}" if over_budget else
                      f"over {needed / self.n:.0f} times the {self.n:,} so far")
            raise _Stopped(far, f"at this pace it needs about {needed:,.0f} more, {beyond}, "
                                f"because the right-hand side is rounding noise here: one-ulp "
                                f"changes of the state change it by {level:.2g} of its size, "
                                f"far more than rtol = {self.rtol:g}, so the step size cannot "
                                "settle (a learning rate this large amplifies rounding error "
                                f"by its size); use rtol = {_coarser(level)} or more, or a "
                                "smaller learning rate")


def _failure(exc, what: str, method: str, t_end: float, rhs: _WatchedRhs) -> str:
    """The message of the :class:`SolveError` that ``exc`` (raised inside ``solve_ivp``:
    by the watched right-hand side, or scipy's own ``ValueError``/``ArithmeticError``)
    becomes."""
    if isinstance(exc, FloatingPointError):
        return f"{what}: floating-point error in the right-hand side: {exc}"
    if isinstance(exc, _Stopped):
        return (f"{what}: stopped at t = {exc.t:.6g} of t_end = {t_end:g} after "
                f"{rhs.n:,} right-hand sides: {exc.why}")
    if isinstance(exc, _BudgetExhausted):
        advice = "method='Radau' or 'LSODA', " if method not in IMPLICIT else ""
        return (f"{what}: stopped at t = {exc.t:.6g} of t_end = {t_end:g} after max_nfev = "
                f"{rhs.max_nfev} right-hand-side evaluations (stiff, or tolerances too tight; "
                f"try {advice}looser rtol/atol, smaller learning rates or a larger max_nfev, "
                "--max-nfev of odeflow run)")
    return f"{what} failed near t = {rhs.t:.6g}: {type(exc).__name__}: {exc}"


def stall_window(size: int, method: str, kwargs: dict) -> int:
    """Right-hand sides between two checks of a solve's pace: :data:`STALL_CALLS`, or
    the calls of three finite-difference Jacobians (``size + 1`` calls each, all at one
    ``t``) when an implicit ``method`` has no analytic Jacobian (``"jac"`` not in
    ``kwargs``), so that forming a Jacobian is never taken for a stall."""
    if method in IMPLICIT and "jac" not in kwargs:
        return max(STALL_CALLS, 3 * (size + 1))
    return STALL_CALLS


def integrate_field(field, t0, t_end, t_eval, method, rtol, atol, kwargs, max_nfev, what,
                    progress, blas_threads, dense_output=False, y0=None):
    """Run ``solve_ivp`` on ``field`` within the evaluation budget; ``(sol, stats)``.

    The right-hand side is checked (:class:`_WatchedRhs`: floating-point errors
    raise, a non-finite value is an error), the budget ``max_nfev`` ends the solve
    with :class:`SolveError` naming the ``t`` reached, so does a solve whose ``t``
    stops moving or that crawls on a field of rounding noise (checked every
    :data:`STALL_CALLS` right-hand sides, :data:`CRAWL_RATIO`), and ``solve_ivp``'s
    own ``ValueError``/``ArithmeticError`` become :class:`SolveError`; a failed or
    non-finite solution too. Never returns a failed solve. A ``first_step`` in ``kwargs``
    (the field's own, :func:`odeflow.solver.options.prepare`) is capped at the span
    ``t_end - t0`` (a solve shorter than the field's first step).
    """
    if method == "LSODA" and t_end - t0 < LSODA_MIN_SPAN:
        raise SolveError(f"{what}: the time span {t_end - t0:.3g} is below what LSODA "
                         f"resolves ({LSODA_MIN_SPAN:g}: its step-size arithmetic underflows "
                         "and it never leaves t0); use method='Radau', 'BDF' or 'RK45', or "
                         "a longer t_end", {"method": method, "status": -1, "nfev": 0})
    bar = _Progress(t0, t_end, progress_mode(progress), desc=what)
    rhs = _WatchedRhs(field, t0, t_end, rtol, max_nfev, bar,
                      stall_window(field.size, method, kwargs))
    start, njev_before = time.perf_counter(), field.njev
    said: list[str] = []  # the integrator's warnings, each once

    def common() -> dict:
        """Statistics of every solve, ended or stopped, at the time of the call."""
        return {"method": method, "wall_time": time.perf_counter() - start,
                "rhs_calls": field.nfev, "jac_calls": field.njev, "rtol": rtol, "atol": atol,
                "analytic_jacobian": "jac" in kwargs, "integrator_warnings": said}

    if "first_step" in kwargs:
        kwargs = {**kwargs, "first_step": min(kwargs["first_step"], t_end - t0)}
    try:
        with blas_controller().limit(limits=blas_threads, user_api="blas"), \
                _integrator_warnings(said):
            sol = solve_ivp(rhs, (t0, t_end), field.initial_state() if y0 is None else y0,
                            method=method, t_eval=t_eval, rtol=rtol, atol=atol,
                            dense_output=dense_output, **kwargs)
    except (FloatingPointError, _Stopped, _BudgetExhausted, ValueError,
            ArithmeticError) as exc:
        failed = {**common(), "nfev": min(rhs.n, max_nfev), "njev": field.njev - njev_before,
                  "status": -1, "t_reached": rhs.t}  # as far as it got
        raise SolveError(_failure(exc, what, method, t_end, rhs), failed) from None
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


@contextmanager
def _integrator_warnings(said: list[str]):
    """Collect the warnings of scipy's integrators (LSODA's "repeated convergence
    failures", ...) into ``said``, each message once, for the solve's statistics (of a
    failed solve too); any other warning is issued as usual."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for w in caught:
            if "scipy" in (w.filename or "") and "integrate" in w.filename:
                text = " ".join(str(w.message).split())
                if text not in said:
                    said.append(text)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                                       source=w.source)


def run_from(field, t0: float, t_end: float, t_eval, run) -> tuple:
    """``(sol, stats)`` of ``run`` (a partial :func:`integrate_field` on ``field``) over ``[t0,
    t_end]``, the first steps copied from the recursion when the field takes some exactly
    (:func:`_after_exact_steps`), or the phases of a phased field (its ``run_phases``: a
    heavy-ball flow that continues on its slow manifold, ``docs/optimisers.md``)."""
    if getattr(field, "phased", False):
        return field.run_phases(t0, t_end, t_eval, run)
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
                 "njev": 0, "nlu": 0, "status": 0, "integrator_warnings": [],
                 "message": "the exact steps reach the end of the span"}
    stats["exact_until"] = head
    y = np.hstack([field.exact_state_at(pre).T, y_ode])
    out = SimpleNamespace(t=np.concatenate([pre, t_ode]), y=y, t_events=events[0],
                          y_events=events[1],
                          sol=None if dense is None else _ExactThenDense(field, head, dense))
    return out, stats


