"""The solve entry point :func:`solve`, over one integrator.

:func:`solve` builds a family's field (optionally wrapped by an optimiser flow,
:mod:`odeflow.solver.single`) and hands it to
:func:`odeflow.solver.integrate.integrate_field`, or solves a schedule's stages one
after the other (:func:`~odeflow.solver.schedule.solve_schedule`). The stacks of many
learning-rate points (:func:`~odeflow.solver.stacks.solve_batch`) and of many starts
(:func:`~odeflow.solver.stacks.solve_ensemble`) are in :mod:`odeflow.solver.stacks`.
"""

from __future__ import annotations

import inspect

from odeflow.errors import ValidationError
from odeflow.solver.options import DEFAULT_SPAN, FAMILY_DEFAULT, check_span, take_positional
from odeflow.solver.schedule import solve_schedule
from odeflow.solver.single import flow_of, new_option_names, solve_one

#: :func:`solve`'s old positional arguments after ``flow`` and the field's learning rates
#: (Scan and Snap's ``eta_y, eta_z``), in their old order: keywords now.
SOLVE_POSITIONS = ("t_span", "t_eval", "method", "rtol", "atol", "progress", "max_nfev",
                   "dense_output", "events", "optimizer")


def solve(data, flow: str = FAMILY_DEFAULT, *positional, t_span=DEFAULT_SPAN, t_eval=None,
          method: str = "auto", rtol: float = 1e-8, atol: float = 1e-10,
          progress: bool | None = None, max_nfev: int | None = None,
          dense_output: bool = False, events=None, optimizer=None, **flow_options):
    """Integrate the training dynamics of a data model with scipy.

    Parameters
    ----------
    data : a data model of any family
        Its type picks the family (:func:`odeflow.families.family_of`) and so the flows.
    flow : str, optional
        One of the family's flows (its declaration, :mod:`odeflow.families`), its
        default when omitted; Scan and Snap's: ``"exact"`` (Level E, Lemma 1),
        ``"finite_t"`` (Level T), ``"reduced"`` (Level R, Theorem 1), ``"snap"`` (Sec. 6).
    *positional
        The old form ``solve(data, flow, eta_y, eta_z, t_span, ...)``: one release,
        with a :class:`~odeflow.errors.RenamedWarning` (keywords now).
    t_span, t_eval : (float, float), array_like
        ``(t0, t_end)``; the output times (optional), by default log-spaced
        (:func:`default_t_eval`: 40 a decade, fewer for a state whose snapshots would
        exceed :data:`OUTPUT_BYTES_LIMIT`).
    method, rtol, atol : str, float, float
        ``"auto"`` (:func:`choose_method`) or a method of ``solve_ivp`` in :data:`METHODS`;
        the tolerances passed to ``solve_ivp``.
    progress : bool, optional
        A bar showing ``t`` (True), nothing (False); by default a bar on a terminal,
        else a line on stderr every :data:`PROGRESS_LOG_SECONDS` s of a long solve.
    max_nfev : int, optional
        Budget of right-hand sides (:data:`MAX_NFEV`); a SolveError names the t reached.
    dense_output : bool, default False
        Keep ``solve_ivp``'s continuous solution: ``traj.sol(t)``, the raw state.
    events : callable, FieldEvent or list of them, optional
        ``event(t, y)`` of the raw state (``terminal``, ``direction`` as in ``solve_ivp``)
        or ready events of :mod:`odeflow.solver.events` (e.g. the maximum of ``gamma``,
        Theorem 1b): ``traj.t_events``, ``traj.y_events``; a terminal one ends the solve.
    optimizer : odeflow.Momentum or odeflow.Adam, optional
        The optimiser's ODE in *step time* around the flow's parameter level
        (``Field.parameter_level``, docs/optimisers.md): ``t_span`` (from 0), ``t_eval``
        and ``traj.steps`` in optimiser steps (by default every step to 2,001, then 100
        a decade); ``traj.velocity``, ``traj.moments`` its state. None: the gradient flow.
    schedule : Schedule, optional
        (Among ``flow_options``.) Stages solved one after the other (:func:`solve_schedule`);
        their durations set the span: leave ``t_span`` out or give ``(0, end)``.
    **flow_options
        Passed to the vector field, over the family's defaults (``Family.solve_defaults``):
        its learning rates (Scan and Snap: ``eta_y``, ``eta_z`` of the decoder and the
        attention logits, 1 and 0.1 by default; the induction heads: ``rates``); ``start``
        of every flow (Scan and Snap: the pair ``(y0, z0)``, the initial decoder and
        logits, either None: zero; the old keywords ``y0=``, ``z0=`` warn; the induction
        heads: the parameters), ``iota``,
        ``beta`` of ``"reduced"``; ``seq_len``, ``sample_size``, ``seed`` of
        ``"finite_t"`` and ``"finite_l"``. An old keyword (``docs/api.md``) is
        translated with a :class:`~odeflow.errors.RenamedWarning`.

    Returns
    -------
    Trajectory
        With ``stats`` (``method, nfev, njev, nlu, status, message, wall_time, rhs_calls,
        jac_calls``) and the fields of ``solve_ivp``'s result, ``y`` the raw state
        (:class:`~odeflow.results.solution.SolverOutput`).

    Raises
    ------
    ValidationError
        For invalid input, naming the field.
    SolveError
        When ``solve_ivp`` fails or the solution is not finite.
    """
    run = {"t_span": t_span, "t_eval": t_eval, "method": method, "rtol": rtol, "atol": atol,
           "progress": progress, "max_nfev": max_nfev, "dense_output": dense_output,
           "events": events, "optimizer": optimizer}
    _old_positional(data, flow, positional, flow_options, run)
    flow_options = new_option_names(data, flow, flow_options)
    if flow_options.get("schedule") is not None:
        schedule = flow_options.pop("schedule")
        return _solve_scheduled(data, flow, run.pop("t_span"), schedule, **run,
                                **flow_options)
    return solve_one(data, flow, run["t_span"], run["t_eval"], run["method"], run["rtol"],
                     run["atol"], run["progress"], run["max_nfev"], run["dense_output"],
                     run["events"], run["optimizer"], flow_options)


def _old_positional(data, flow, positional: tuple, flow_options: dict, run: dict) -> None:
    """:func:`solve`'s old positional arguments after ``flow`` moved into ``flow_options``
    (the field's rates) and ``run`` (:data:`SOLVE_POSITIONS`), warning (in place)."""
    if positional:
        take_positional("solve(data, flow", flow_of(data, flow)[2], SOLVE_POSITIONS, positional,
                        flow_options, run, inspect.signature(solve).parameters, stacklevel=4)


def _solve_scheduled(data, flow, t_span, schedule, **options):
    """``solve(..., schedule=...)``: :func:`solve_schedule`, with
    ``t_span`` left at its default or equal to ``(0, the schedule's end)``."""
    end = getattr(schedule, "end", None)
    if t_span != DEFAULT_SPAN and end is not None \
            and tuple(check_span(t_span)) != (0.0, float(end)):
        raise ValidationError("t_span", f"is set by the schedule's stages, (0, {end:g}); "
                              f"leave it out or give that, got {t_span!r:.80}")
    return solve_schedule(data, schedule, flow=flow, **options)
