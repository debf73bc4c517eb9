"""Stacked solves over the integrator of :func:`odeflow.solve`: many members as one state.

:func:`solve_batch` stacks one flow at many sets of options (learning rates, a
sample's seed, a sequence length, any option the flow's field takes),
:func:`solve_ensemble` one flow from many starts; both build one field per member
with the family's defaults, stack them
(:class:`~odeflow.fields.stacked.StackedField`,
:class:`~odeflow.fields.ensemble.StartEnsemble`), wrap the stack in an optimiser
flow where asked, and integrate it by one ``solve_ivp`` call. Each member's result
is the one :func:`odeflow.solve` returns, within the tolerance.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Mapping

import numpy as np

from odeflow.errors import ValidationError, renamed
from odeflow.fields.optimizers import optimizer_flow
from odeflow.solver.integrate import SOLVE_BLAS_THREADS, integrate_field, run_from
from odeflow.solver.options import (
    DEFAULT_SPAN,
    FAMILY_DEFAULT,
    IMPLICIT,
    METHODS,
    check_common_exact_steps,
    check_flow_options,
    check_run,
    prepare,
    same_value,
    take_positional,
)
from odeflow.solver.single import flow_of, new_option_names

#: What ``method="auto"`` is for :func:`solve_ensemble`'s stack and for a stack under
#: an optimiser flow: an explicit method (their stacks pass no Jacobian).
ENSEMBLE_AUTO_METHOD = "RK45"
#: :func:`solve_ensemble`'s positional arguments after ``flow``, after the flow's own
#: learning rates (its field's ``rate_options``: Scan and Snap's ``eta_y, eta_z``).
ENSEMBLE_POSITIONS = ("t_span", "t_eval", "method", "rtol", "atol", "optimizer", "progress",
                      "blas_threads", "max_nfev")


def solve_batch(data, params, flow: str = FAMILY_DEFAULT, t_span=DEFAULT_SPAN, t_eval=None,
                method: str = "auto", rtol: float = 1e-8, atol: float = 1e-10,
                progress: bool | None = None, blas_threads: int | None = 1,
                max_nfev: int | None = None, optimizer=None, **flow_options) -> list:
    """Integrate one flow of one data model at many sets of options as one state.

    Each member is the flow's field built with the family's defaults, then
    ``flow_options``, then the member's own options; the members are stacked
    (:class:`~odeflow.fields.stacked.StackedField`) and integrated by one
    ``solve_ivp`` call. Members that differ only in their learning rates (and start)
    are evaluated in one vectorised call where the field offers one (Scan and Snap's
    levels: a sweep over ``(eta_Y, eta_Z)`` pays numpy's and scipy's per-call
    overhead once per step, not once per point); any others one by one in the same
    state.

    Parameters
    ----------
    data : a data model of any family
    params : sequence of mappings
        One mapping per member of the flow's options that vary across the batch,
        e.g. ``{"eta_y": 1.0, "eta_z": 0.1}``, ``{"rates": {"c": 2.0}}``,
        ``{"seed": 3}`` or ``{"seq_len": 64}``. A member may also be a tuple of the
        field's learning rates in order (its ``rate_options``: Scan and Snap's
        ``(eta_y, eta_z)`` pairs).
    flow, t_span, t_eval, progress, max_nfev, **flow_options
        As for :func:`solve`; ``flow_options`` are shared by every member.
    method : str, default "auto"
        As for :func:`solve`, on the stacked state (so large batches get an explicit
        method, :func:`choose_method`); implicit methods get the block-diagonal
        analytic Jacobian as a sparse matrix where the field has one. With an
        ``optimizer``, an explicit method (``"auto"``: RK45), as :func:`solve_ensemble`.
    rtol, atol : float
        Tolerances *per member*. ``solve_ivp`` controls the RMS norm of the error
        over the whole stacked state (``n`` numbers in all), in which a member of
        ``n_i`` numbers has its own RMS error at most ``sqrt(n / n_i)`` times the
        whole's; the stacked solve therefore runs at ``rtol / sqrt(n / min n_i)`` and
        ``atol / sqrt(n / min n_i)`` (``sqrt(P)`` for members of one size) so that
        each member's own RMS error stays within them.
    blas_threads : int or None, default 1
        BLAS threads during the solve (:func:`blas_controller`); None keeps the
        library's default. The stacked products are many tiny matrices, for which
        threads cost more than they give (``benchmarks/bench_batch.py``).
    optimizer : odeflow.Momentum or odeflow.Adam, optional
        Every member's optimiser flow in step time, as :func:`solve` (and
        :func:`solve_ensemble`) do: the stack of the members' parameter levels wrapped
        in one optimiser flow.

    Returns
    -------
    list
        One result per member, in order, each as :func:`solve` returns it, with the
        batch's ``stats`` (plus ``batch_size``) and the member's options, as given in
        ``params`` (pairs as mappings), in ``meta["batch_options"]``.

    Raises
    ------
    ValidationError
        For invalid input, naming the field: ``params`` (not a non-empty sequence of
        mappings), ``params[i]`` (a member that is no mapping), ``params[i].NAME`` (an
        option the flow does not take, or an invalid value).
    SolveError
        When the stacked solve fails.
    """
    from odeflow.fields.stacked import StackedField

    flow_options = new_option_names(data, flow, flow_options)
    _refuse_single_solve_options("solve_batch", flow_options)
    family, flow, field_class = flow_of(data, flow)
    points = batch_points(field_class, params)
    run = check_run(t_span, t_eval, rtol, atol, max_nfev)
    if optimizer is not None:
        method = _explicit_method(method)
    members = _members(data, flow, field_class, {**family.solve_defaults, **flow_options},
                       points, "params", optimizer)
    stack = StackedField(members, varying=varying_options(points))
    out = _solve_stack(stack, members, optimizer, method, run, progress, blas_threads,
                       f"{flow} flow x {stack.P}", "batch_size")
    for traj, point in zip(out, points, strict=True):
        traj.meta["batch_options"] = dict(point)
    return out


def solve_ensemble(data, starts, flow: str = FAMILY_DEFAULT, *positional,
                   t_span=DEFAULT_SPAN, t_eval=None, method: str = "auto", rtol: float = 1e-8,
                   atol: float = 1e-10, optimizer=None, progress: bool | None = None,
                   blas_threads: int | None = SOLVE_BLAS_THREADS, max_nfev: int | None = None,
                   **flow_options) -> list:
    """Integrate one flow from many starts as one state: one result per start.

    The ``P`` members (one field per start, the same rates and options; for Level T the
    same sample) are stacked (:class:`~odeflow.fields.ensemble.StartEnsemble`) and
    integrated by one ``solve_ivp`` call whose right-hand side evaluates every member in
    one vectorised call where the field has a batched ``gradients`` (per class block for
    Level T, :meth:`~odeflow.fields.finite_t.FiniteTFlow.gradients`), else member by
    member; ``optimizer`` wraps the stack in step time, as in :func:`solve`. Each result
    is the one :func:`solve` returns for that start (same layout, series and meta), up
    to the solver's tolerance.

    Parameters
    ----------
    data : a data model of any family
    starts : sequence
        Each member's start, as the flow's field takes it
        (:meth:`~odeflow.fields.base.Field.start_options`): for Scan and Snap a
        ``(y0, z0)`` pair (initial decoder and logits; either may be None:
        zero), for the other families the value of ``solve(..., start=...)``.
    flow, t_span, t_eval, optimizer, progress, max_nfev, **flow_options
        As for :func:`solve` (any flow whose state is its parameters: a field with
        ``gradient`` and ``rate_vector``); the family's learning rates among
        ``flow_options`` (e.g. ``eta_y=``, ``eta_z=``; ``rates=``), its
        ``solve_defaults`` where not given.
    *positional
        The old positional form, taken for one release with a
        :class:`~odeflow.errors.RenamedWarning`: the flow's learning rates in the order
        of its field's ``rate_options`` (Scan and Snap: ``eta_y, eta_z``), then
        :data:`ENSEMBLE_POSITIONS` (``t_span, t_eval, method, ...``).
    method : str, default "auto"
        ``"auto"`` (for this stack, which passes no Jacobian, RK45) or an explicit
        method of ``solve_ivp``.
    rtol, atol : float
        Tolerances *per member*, as for :func:`solve_batch` (the stack's divided by
        ``sqrt(P)``). The members share the step sizes, so each result differs from its
        own :func:`solve` within the tolerance, not bit for bit.
    blas_threads : int or None, default :data:`SOLVE_BLAS_THREADS`
        BLAS threads during the solve (None: the library's default).

    Returns
    -------
    list
        One result per start, in order, each with the ensemble's ``stats`` (plus
        ``ensemble_size``).

    Raises
    ------
    ValidationError
        For invalid input, naming the field (``starts`` for the starts, ``starts[i].NAME``
        for an invalid start, ``method`` for an implicit method, ``members`` for a flow
        whose state is not its parameters).
    SolveError
        When the stacked solve fails.
    """
    from odeflow.fields.ensemble import StartEnsemble

    family, flow, field_class = flow_of(data, flow)
    run_options = {"t_span": t_span, "t_eval": t_eval, "method": method, "rtol": rtol,
                   "atol": atol, "optimizer": optimizer, "progress": progress,
                   "blas_threads": blas_threads, "max_nfev": max_nfev}
    take_positional("solve_ensemble(data, starts, flow", field_class, ENSEMBLE_POSITIONS,
                    positional, flow_options, run_options,
                    inspect.signature(solve_ensemble).parameters)
    flow_options = new_option_names(data, flow, flow_options)
    _refuse_single_solve_options("solve_ensemble", flow_options)
    method = _explicit_method(run_options["method"])
    run = check_run(*(run_options[k] for k in ("t_span", "t_eval", "rtol", "atol",
                                               "max_nfev")))
    optimizer = run_options["optimizer"]
    members = _members(data, flow, field_class, {**family.solve_defaults, **flow_options},
                       _start_points(field_class, starts), "starts", optimizer)
    stack = StartEnsemble(members)
    return _solve_stack(stack, members, optimizer, method, run, run_options["progress"],
                        run_options["blas_threads"], f"{flow} flow from {stack.P} starts",
                        "ensemble_size")


def _start_points(field_class, starts) -> list:
    """Each start of :func:`solve_ensemble` as the field's options
    (:meth:`~odeflow.fields.base.Field.start_options`); a ValidationError names
    ``starts``."""
    try:
        points = [field_class.start_options(s) for s in starts]
    except TypeError:
        points = None
    if not points:
        raise ValidationError("starts", "must be a non-empty sequence of starts")
    return points


def batch_points(field_class, params) -> list:
    """``params`` of :func:`solve_batch` as one dict of options per member (old option
    names translated, warning :class:`~odeflow.errors.RenamedWarning`); a tuple member
    names the field's ``rate_options`` in order. A ValidationError names ``params`` or
    ``params[i]``."""
    keys = tuple(field_class.rate_options)
    pair = (f", or a tuple {'(' + ', '.join(keys) + ')'} of its learning rates"
            if keys else "")
    if isinstance(params, (Mapping, str, bytes)):
        raise ValidationError("params", f"must be a sequence of mappings of the flow's "
                              f"options{pair}, one per member, got {params!r:.80}")
    try:
        params = list(params)
    except TypeError:
        raise ValidationError("params", f"must be a sequence of mappings of the flow's "
                              f"options{pair}, got {params!r:.80}") from None
    if not params:
        raise ValidationError("params", "must be a non-empty sequence (one member each), "
                              "got an empty one")
    renames = getattr(field_class.__init__, "renamed", {})
    points = []
    for i, p in enumerate(params):
        if isinstance(p, Mapping) and all(isinstance(k, str) for k in p):
            point = dict(p)
        elif keys and not isinstance(p, (str, bytes, Mapping)) and _length(p) == len(keys):
            point = dict(zip(keys, p, strict=True))
        else:
            raise ValidationError(f"params[{i}]", f"must be a mapping of the flow's option "
                                  f"names to values{pair}, got {p!r:.80}")
        points.append(renamed(point, renames, stacklevel=4))
    return points


def varying_options(points: list) -> set:
    """The option names whose values are not the same for every member of ``points``
    (given for some members only, or not equal; values that cannot be compared count
    as different)."""
    keys = set().union(*points)
    first = points[0]
    return {k for k in keys
            if any(k not in p or k not in first or not same_value(p[k], first[k]) for p in points)}


def _length(value) -> int | None:
    try:
        return len(value)
    except TypeError:
        return None


def _refuse_single_solve_options(entry: str, options: dict) -> None:
    """Refuse, naming the option and ``entry``, what only :func:`odeflow.solve` takes
    (dense output, events, a schedule: each belongs to one integration of one field)."""
    for key in ("dense_output", "events", "schedule"):
        if options.pop(key, None) not in (None, False):
            raise ValidationError(key, f"is not taken by {entry} (its members share one "
                                  "integration); solve each member with odeflow.solve")


def _explicit_method(method: str) -> str:
    """The stack's method: ``"auto"`` is :data:`ENSEMBLE_AUTO_METHOD`; implicit ones and
    LSODA are refused by name (the stack passes no Jacobian)."""
    method = ENSEMBLE_AUTO_METHOD if method == "auto" else method
    if method not in METHODS or method in IMPLICIT or method == "LSODA":
        raise ValidationError("method", f"must be 'auto' or an explicit method of solve_ivp "
                              f"(RK45, DOP853, RK23), got {method!r:.80}")
    return method


def _members(data, flow, field_class, shared: dict, points: list, name: str,
             optimizer) -> list:
    """One field per member: the ``shared`` options, then the member's ``points[i]``,
    each checked by name (``{name}[i].OPTION`` for the member's own); in parameter
    coordinates when an optimiser steps them."""
    members = []
    for i, point in enumerate(points):
        options = {**shared, **point}
        try:
            check_flow_options(flow, field_class, options)
            member = field_class(data, **options)
        except ValidationError as err:
            root = re.split(r"[.\[]", err.field, maxsplit=1)[0]
            if root not in point:
                raise
            raise ValidationError(f"{name}[{i}].{err.field}", err.reason) from None
        members.append(member.parameter_level() if optimizer is not None else member)
    return members


def tolerance_scale(stack) -> float:
    """``sqrt(n / min n_i)`` of a stack of members of ``n_i`` numbers (``n`` in all): the
    factor by which a member's RMS error can exceed the whole state's, so the stacked
    solve divides the per-member tolerances by it (``sqrt(P)`` for equal sizes)."""
    sizes = np.diff(stack.offsets)
    return math.sqrt(float(sizes.sum()) / float(sizes.min()))


def _solve_stack(stack, members: list, optimizer, method: str, run: tuple, progress,
                 blas_threads, what: str, size_key: str) -> list:
    """One result per member of ``stack`` (wrapped in ``optimizer``'s flow where given),
    integrated by one :func:`integrate_field` at the per-member tolerances of ``run``
    (:func:`check_run`'s tuple) divided by :func:`tolerance_scale`."""
    t0, t_end, t_eval, rtol, atol, max_nfev = run
    field, wrapped, t0, t_eval = _wrap(stack, members, optimizer, t0, t_end, t_eval)
    t_eval, method, kwargs = prepare(field, t0, t_end, t_eval, method)
    scale = tolerance_scale(stack)
    go = functools.partial(integrate_field, field, method=method, rtol=rtol / scale,
                           atol=atol / scale, kwargs=kwargs, max_nfev=max_nfev,
                           what=f"{what} ({method})", progress=progress,
                           blas_threads=blas_threads)
    sol, stats = run_from(field, t0, t_end, t_eval, go)
    stats.update({"rtol": rtol, "atol": atol, size_key: stack.P})
    out = _results(stack, field, wrapped, sol, stats)
    for i, traj in enumerate(out):
        traj.stats["n_state"] = int(stack.offsets[i + 1] - stack.offsets[i])
        traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol,
                          "atol": atol})
    return out


def _wrap(stack, members: list, optimizer, t0: float, t_end: float, t_eval) -> tuple:
    """``(field, wrapped, t0, t_eval)``: the stack, or with ``optimizer`` its optimiser
    flow in step time and each member's own (``wrapped``, to read the results; a member
    whose state is not its parameters is refused there, naming ``optimizer``), started
    at the flow's start step, with the flow's whole steps as default output times."""
    if optimizer is None:
        return stack, None, t0, t_eval
    wrapped = [optimizer_flow(m, optimizer, t0) for m in members]
    field = optimizer_flow(stack, optimizer, t0)
    check_common_exact_steps(optimizer, wrapped)
    if t_eval is None:
        t_eval = field.default_steps(t0, t_end)
    return field, wrapped, field.start_step, t_eval


def _results(stack, field, wrapped, sol, stats) -> list:
    """One result per member of a stacked solve ``sol``: the stack's own split, or with
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
