"""One solve of one field: build the family's field, wrap it, integrate it once.

:func:`solve_one` is :func:`odeflow.solve` without a schedule; the schedule's
stages (:mod:`odeflow.solver.schedule`) call it for each stage, so both go through
the same integrator loop (:func:`odeflow.solver.integrate.run_from`).
"""

from __future__ import annotations

import functools

from odeflow.errors import ValidationError, renamed
from odeflow.families import family_of
from odeflow.fields.optimizers import optimizer_flow
from odeflow.solver.events import bind_events
from odeflow.solver.integrate import (
    SOLVE_BLAS_THREADS,
    blas_controller,
    evaluating,
    integrate_field,
    run_from,
)
from odeflow.solver.options import FAMILY_DEFAULT, check_flow_options, check_run, prepare


def solve_one(data, flow, t_span, t_eval, method, rtol, atol, progress, max_nfev,
              dense_output, events, optimizer, flow_options: dict):
    """The result of :func:`odeflow.solve` without a schedule (its arguments; the family's
    learning rates among ``flow_options``)."""
    flow, field, t0, t_end, t_eval, rtol, atol, max_nfev = _build_field(
        data, flow, flow_options, optimizer, t_span, t_eval, rtol, atol, max_nfev)
    return _solve_field(field, flow, t0, t_end, t_eval, method, rtol, atol, max_nfev,
                        progress, dense_output, events)


def flow_of(data, flow) -> tuple:
    """``(family, flow, field class)`` of ``data``'s family (``flow`` its default when
    :data:`FAMILY_DEFAULT`); a ValidationError names ``data`` or ``flow``."""
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    return family, flow, family.field_class(flow)


def new_option_names(data, flow, options: dict) -> dict:
    """``options`` with the old names the flow's field takes (its constructor's
    ``renamed``: :func:`odeflow.errors.renamed_keywords`) replaced by the new ones,
    warning :class:`~odeflow.errors.RenamedWarning` at the caller of the entry point."""
    field_class = flow_of(data, flow)[2]
    return renamed(options, getattr(field_class.__init__, "renamed", {}), stacklevel=4)


def _build_field(data, flow, flow_options: dict, optimizer, t_span, t_eval, rtol, atol,
                 max_nfev) -> tuple:
    """``(flow, field, t0, t_end, t_eval, rtol, atol, max_nfev)`` of :func:`solve`: the
    family's field for ``flow`` (its ``solve_defaults``, then the flow options, each
    checked by name), wrapped by ``optimizer``'s flow in step time, and the checked span,
    output times, tolerances and budget."""
    family, flow, field_class = flow_of(data, flow)
    t0, t_end, t_eval, rtol, atol, max_nfev = check_run(t_span, t_eval, rtol, atol, max_nfev)
    options = {**family.solve_defaults, **flow_options}
    check_flow_options(flow, field_class, options)
    field = field_class(data, **options)
    if optimizer is not None:
        field = optimizer_flow(field.parameter_level(), optimizer, t0)
        if t_eval is None:
            t_eval = field.default_steps(t0, t_end)
        t0 = field.start_step  # at rest half a step early for the heavy ball's offset
    return flow, field, t0, t_end, t_eval, rtol, atol, max_nfev


def _solve_field(field, flow, t0, t_end, t_eval, method, rtol, atol, max_nfev, progress,
                 dense_output, events):
    """The trajectory of :func:`solve` on a built ``field``: the method and its Jacobian,
    the events bound to the field, one integration (:func:`run_from`) and the result with
    its statistics, meta and ``solve_ivp`` fields."""
    t_eval, method, kwargs = prepare(field, t0, t_end, t_eval, method)
    if not isinstance(dense_output, bool):
        raise ValidationError("dense_output", f"must be True or False, got {dense_output!r}")
    if dense_output and getattr(field, "phased", False):
        raise ValidationError("dense_output", "is not taken with a phased optimiser flow "
                              "(Momentum(slow_manifold=tol): its two phases are two "
                              "integrations); give t_eval instead")
    event_functions, event_names = bind_events(events, field)
    if event_functions:
        kwargs["events"] = event_functions
    what = f"{flow} flow ({method})"
    run = functools.partial(integrate_field, field, method=method, rtol=rtol, atol=atol,
                            kwargs=kwargs, max_nfev=max_nfev, what=what, progress=progress,
                            blas_threads=SOLVE_BLAS_THREADS, dense_output=dense_output)
    sol, stats = run_from(field, t0, t_end, t_eval, run)
    stats["n_state"] = field.size
    with evaluating(what, len(sol.t), progress), \
            blas_controller().limit(limits=SOLVE_BLAS_THREADS, user_api="blas"):
        traj = field.trajectory(sol.t, sol.y.T, stats)
    traj.meta.update({"t_span": [t0, t_end], "method": method, "rtol": rtol, "atol": atol})
    traj.attach_solution(sol.y, sol.sol, sol.t_events if event_functions else None,
                         sol.y_events if event_functions else None, event_names)
    return traj
