"""Stacked solves over the integrator of :func:`odeflow.solve`: many points as one state.

:func:`solve_batch` stacks Scan and Snap's learning-rate points
(:class:`~odeflow.fields.stacked.StackedField`), :func:`solve_ensemble` the starts of
any parameter-level flow (:class:`~odeflow.fields.ensemble.StartEnsemble`), with an
optimiser flow around the stack where asked. One ``solve_ivp`` call integrates the
stack; each member's result is the one :func:`odeflow.solve` returns, within the
tolerance.
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np

from odeflow.errors import ValidationError
from odeflow.families import family_of
from odeflow.fields.optimizers import optimizer_flow
from odeflow.solver.integrate import SOLVE_BLAS_THREADS, integrate_field, run_from
from odeflow.solver.options import (
    FAMILY_DEFAULT,
    IMPLICIT,
    METHODS,
    check_common_exact_steps,
    check_flow_options,
    check_run,
    default_t_eval,
    prepare,
)
from odeflow.solver.single import new_option_names

#: What ``method="auto"`` is for :func:`solve_ensemble`'s stack (it has no Jacobian, so
#: an explicit method).
ENSEMBLE_AUTO_METHOD = "RK45"


def solve_batch(data, params, flow: str = "exact", t_span=(0.0, 1e4), t_eval=None,
                method: str = "auto", rtol: float = 1e-8, atol: float = 1e-10,
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
    flow, t_span, t_eval, method, progress, **flow_options
        As for :func:`solve` (``start=(y0, z0)`` among the options); ``method="auto"``
        sees the stacked state (so large batches get an explicit method,
        :func:`choose_method`).
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
    from odeflow.fields.stacked import StackedField

    flow_options = new_option_names(data, flow, flow_options)
    _refuse_single_solve_options("solve_batch", flow_options)
    field_class = family_of(data).field_class(flow)
    points = _rate_points(field_class, flow, params)
    t0, t_end, t_eval, rtol, atol, max_nfev = check_run(t_span, t_eval, rtol, atol, max_nfev)
    check_flow_options(flow, field_class, flow_options)
    field = StackedField([field_class(data, ey, ez, **flow_options) for ey, ez in points])
    t_eval, method, kwargs = prepare(field, t0, t_end, t_eval, method)
    scale = math.sqrt(field.P)
    sol, stats = integrate_field(field, t0, t_end, t_eval, method, rtol / scale, atol / scale,
                            kwargs, max_nfev, f"{flow} flow x {field.P} ({method})", progress,
                            blas_threads)
    stats.update({"rtol": rtol, "atol": atol, "batch_size": field.P, "n_state": field.n})
    out = field.trajectory(sol.t, sol.y.T, stats)
    for traj in out:
        traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol,
                          "atol": atol})
    return out


def solve_ensemble(data, starts, flow: str = FAMILY_DEFAULT, eta_y: float = FAMILY_DEFAULT,
                   eta_z: float = FAMILY_DEFAULT,
                   t_span=(0.0, 1e4), t_eval=None, method: str = "auto", rtol: float = 1e-8,
                   atol: float = 1e-10, optimizer=None, progress: bool | None = None,
                   blas_threads: int | None = SOLVE_BLAS_THREADS, max_nfev: int | None = None,
                   **flow_options) -> list:
    """Integrate one flow from many starts as one state: one result per start.

    The ``P`` members (one field per start, the same rates and options; for Level T the
    same sample) are stacked (:class:`~odeflow.fields.ensemble.StartEnsemble`) and
    integrated by one ``solve_ivp`` call whose right-hand side evaluates every member in
    one vectorised call (per class block for Level T,
    :meth:`~odeflow.fields.finite_t.FiniteTFlow.gradients`); ``optimizer`` wraps the
    stack in step time, as in :func:`solve`. Each result is the one :func:`solve` returns
    for that start (same layout, series and meta), up to the solver's tolerance.

    Parameters
    ----------
    data : a data model of any family
    starts : sequence
        Each member's start, as the flow's field takes it
        (:meth:`~odeflow.fields.base.Field.start_options`): for Scan and Snap a
        ``(y0, z0)`` pair (initial decoder and logits; either may be None:
        zero), for the other families the value of ``solve(..., start=...)``.
    flow, eta_y, eta_z, t_span, t_eval, optimizer, progress, max_nfev, **flow_options
        As for :func:`solve` (any flow whose state is its parameters: a field with
        ``gradient`` and ``rate_vector``; a batched ``gradients``, as Levels E and T
        have, evaluates every member in one call).
    method : str, default "auto"
        ``"auto"`` (as :func:`solve`'s default; for a stack, which has no Jacobian, it
        is RK45) or an explicit method of ``solve_ivp``.
    rtol, atol : float
        Tolerances *per member*: the stacked solve runs at ``rtol / sqrt(P)``, ``atol /
        sqrt(P)`` (as :func:`solve_batch`), since ``solve_ivp`` controls the RMS error of
        the whole stack. The members share the step sizes, so each result differs from
        its own :func:`solve` within the tolerance, not bit for bit.
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
    from odeflow.fields.ensemble import StartEnsemble

    flow_options = new_option_names(data, flow, flow_options)
    _refuse_single_solve_options("solve_ensemble", flow_options)
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    method = _explicit_method(method)
    t0, t_end, t_eval, rtol, atol, max_nfev = check_run(t_span, t_eval, rtol, atol, max_nfev)
    given = {k: v for k, v in (("eta_y", eta_y), ("eta_z", eta_z)) if v is not FAMILY_DEFAULT}
    members = _members(data, family.field_class(flow), flow, starts,
                       {**family.solve_defaults, **given, **flow_options}, optimizer)
    stack = StartEnsemble(members)
    field, wrapped, t0, t_eval = _wrap_ensemble(stack, members, optimizer, t0, t_end, t_eval)
    scale = math.sqrt(stack.P)
    run = functools.partial(integrate_field, field, method=method, rtol=rtol / scale,
                            atol=atol / scale, kwargs={}, max_nfev=max_nfev,
                            what=f"{flow} flow from {stack.P} starts ({method})",
                            progress=progress, blas_threads=blas_threads)
    sol, stats = run_from(field, t0, t_end, t_eval, run)
    stats.update({"rtol": rtol, "atol": atol, "ensemble_size": stack.P, "n_state": stack.n})
    out = _ensemble_results(stack, field, wrapped, sol, stats)
    for traj in out:
        traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol,
                          "atol": atol})
    return out


def _refuse_single_solve_options(entry: str, options: dict) -> None:
    """Refuse, naming the option and ``entry``, what only :func:`odeflow.solve` takes
    (dense output, events, a schedule: each belongs to one integration of one field)."""
    for key in ("dense_output", "events", "schedule"):
        if options.pop(key, None) not in (None, False):
            raise ValidationError(key, f"is not taken by {entry} (its members share one "
                                  "integration); solve each member with odeflow.solve")


def _rate_points(field_class, flow, params) -> list:
    """``params`` as ``(eta_y, eta_z)`` pairs of a flow that takes those rates."""
    if not {"eta_y", "eta_z"} <= set(inspect.signature(field_class.__init__).parameters):
        raise ValidationError("flow", f"solve_batch stacks (eta_y, eta_z) points of Scan and "
                              f"Snap's levels; flow {flow!r} has no such learning rates: "
                              "solve each point with odeflow.solve (or its starts with "
                              "solve_ensemble)")
    try:
        points = [(p[0], p[1]) for p in params] if len(params[0]) == 2 else None
    except (TypeError, IndexError, KeyError):
        points = None
    if not points:
        raise ValidationError("params", f"must be a non-empty sequence of (eta_y, eta_z) "
                              f"pairs, got {params!r:.80}")
    return points


def _explicit_method(method: str) -> str:
    """The stack's method: ``"auto"`` is :data:`ENSEMBLE_AUTO_METHOD`; implicit ones and
    LSODA are refused by name (the stack has no Jacobian)."""
    method = ENSEMBLE_AUTO_METHOD if method == "auto" else method
    if method not in METHODS or method in IMPLICIT or method == "LSODA":
        raise ValidationError("method", f"must be 'auto' or an explicit method of solve_ivp "
                              f"(RK45, DOP853, RK23), got {method!r:.80}")
    return method


def _members(data, field_class, flow, starts, options: dict, optimizer) -> list:
    """One field per start (:meth:`~odeflow.fields.base.Field.start_options`), in
    parameter coordinates when an optimiser steps them."""
    try:
        starts = [field_class.start_options(s) for s in starts]
    except TypeError:
        starts = None
    if not starts:
        raise ValidationError("starts", "must be a non-empty sequence of starts")
    check_flow_options(flow, field_class, {**options, **starts[0]})
    members = [field_class(data, **options, **start) for start in starts]
    return [m.parameter_level() for m in members] if optimizer is not None else members


def _wrap_ensemble(stack, members, optimizer, t0: float, t_end: float, t_eval) -> tuple:
    """``(field, wrapped, t0, t_eval)`` of :func:`solve_ensemble`: the stack, or with
    ``optimizer`` its optimiser flow in step time and each member's own (``wrapped``, to
    read the results), and the output times (by default the flow's whole steps, or
    :func:`default_t_eval` sized to the stack)."""
    field, wrapped = stack, None
    if optimizer is not None:
        field = optimizer_flow(stack, optimizer, t0)
        wrapped = [optimizer_flow(m, optimizer, t0) for m in members]
        check_common_exact_steps(optimizer, wrapped)
        if t_eval is None:
            t_eval = field.default_steps(t0, t_end)
        t0 = field.start_step
    if t_eval is None:
        t_eval = default_t_eval(t0, t_end, state_size=stack.n)
    return field, wrapped, t0, t_eval


def _ensemble_results(stack, field, wrapped, sol, stats) -> list:
    """One trajectory per member of a stacked solve ``sol``: the stack's own split, or with
    an optimiser each member's blocks (theta, then the optimiser's state) of the stacked
    layout read by its own flow."""
    if wrapped is None:
        return stack.trajectory(sol.t, sol.y.T, stats)
    out = []
    for i, flow_i in enumerate(wrapped):
        rows = np.concatenate([b * stack.size + stack.member_slice(i)
                               for b in range(field.blocks)])
        out.append(flow_i.trajectory(sol.t, sol.y[rows].T, dict(stats)))
    return out
