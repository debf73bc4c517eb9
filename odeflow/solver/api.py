"""The solve entry point :func:`solve` and :func:`solve_schedule`, over one integrator.

:func:`solve` builds a family's field (optionally wrapped by an optimiser flow) and
hands it to :func:`odeflow.solver.integrate.integrate_field`; :func:`solve_schedule`
solves training stages one after the other. The stacks of many learning-rate points
(:func:`~odeflow.solver.stacks.solve_batch`) and of many starts
(:func:`~odeflow.solver.stacks.solve_ensemble`) are in :mod:`odeflow.solver.stacks`.
"""

from __future__ import annotations

import functools

import numpy as np

from odeflow.data import as_real_array
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
from odeflow.solver.options import (
    DEFAULT_SPAN,
    FAMILY_DEFAULT,
    check_flow_options,
    check_run,
    check_span,
    default_t_eval,
    prepare,
)


def solve(data, flow: str = FAMILY_DEFAULT, eta_y: float = FAMILY_DEFAULT,
          eta_z: float = FAMILY_DEFAULT, t_span=(0.0, 1e4), t_eval=None, method: str = "auto",
          rtol: float = 1e-8, atol: float = 1e-10, progress: bool | None = None,
          max_nfev: int | None = None, dense_output: bool = False, events=None,
          optimizer=None, **flow_options):
    """Integrate the training dynamics of a data model with scipy.

    Parameters
    ----------
    data : DataModel or another family's data model
        Its type picks the family (:func:`odeflow.fields.family_of`) and so the flows.
    flow : str, optional
        One of the family's flows; its default flow when omitted. Scan and Snap
        (:class:`~odeflow.data.DataModel`, default ``"exact"``): ``"exact"``, Level E,
        the population gradient flow of Lemma 1 (Eqns 3-4, 7); ``"finite_t"``, Level T,
        the gradient flow of the finite-``T`` objective on a seeded sample
        (docs/fidelity.md); ``"reduced"``, Level R, Theorem 1 (Eqns 8-10, 44);
        ``"snap"``, the scalar system of Sec. 6 (Eqns 13-14).
    eta_y, eta_z : optional
        Scan and Snap: learning rates of the decoder and of the attention logits
        (1 and 0.1 by default).
    t_span, t_eval : (float, float), array_like
        ``(t0, t_end)``; the output times (optional), by default log-spaced
        (:func:`default_t_eval`: 40 a decade, fewer for a state whose snapshots would
        exceed :data:`OUTPUT_BYTES_LIMIT`).
    method : str
        ``"auto"`` (:func:`choose_method`) or a method of ``solve_ivp`` in :data:`METHODS`.
    rtol, atol : float
        Tolerances passed to ``solve_ivp``.
    progress : bool, optional
        A bar showing ``t`` (True), nothing (False); by default a bar on a terminal,
        else a line on stderr every :data:`PROGRESS_LOG_SECONDS` s of a long solve.
    max_nfev : int, optional
        Budget of right-hand sides (:data:`MAX_NFEV`); a SolveError names the t reached.
    dense_output : bool, default False
        Keep ``solve_ivp``'s continuous solution: ``traj.sol(t)``, the raw state.
    events : callable, FieldEvent or list of them, optional
        Functions ``event(t, y)`` of the raw state (``terminal``, ``direction`` as in
        ``solve_ivp``) or ready events of :mod:`odeflow.solver.events` (e.g. the maximum
        of ``gamma``, Theorem 1b): results in ``traj.t_events``, ``traj.y_events``; a
        terminal event ends the solve early (``traj.status == 1``).
    optimizer : odeflow.Momentum or odeflow.Adam, optional
        Integrate the optimiser's ODE in *step time* around a level whose state is the
        parameters (``exact``, ``finite_t``; the induction-head flows refuse it;
        docs/optimisers.md): ``t_span`` (from 0) and ``t_eval`` are in optimiser steps
        (every whole step by default), ``traj.steps`` is the step axis and the state is
        kept (``traj.velocity``, ``traj.moments``). None: the plain gradient flow.
    schedule : Schedule, optional
        (Among ``flow_options``.) Stages solved one after the other (:func:`solve_schedule`);
        their durations set the span: leave ``t_span`` out or give ``(0, end)``.
    **flow_options
        Passed to the vector field: ``start`` of every flow (Scan and Snap: the pair
        ``(y0, z0)``, the initial decoder and logits, either None: zero; the old
        keywords ``y0=``, ``z0=`` warn; the induction heads: the parameters), ``iota``,
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
    flow_options = new_option_names(data, flow, flow_options)
    if flow_options.get("schedule") is not None:
        given = {k: v for k, v in (("eta_y", eta_y), ("eta_z", eta_z))
                 if v is not FAMILY_DEFAULT}
        return _solve_scheduled(data, flow, t_span, flow_options.pop("schedule"),
                                t_eval=t_eval, method=method, rtol=rtol, atol=atol,
                                progress=progress, max_nfev=max_nfev, optimizer=optimizer,
                                dense_output=dense_output, events=events, **given,
                                **flow_options)
    flow, field, t0, t_end, t_eval, rtol, atol, max_nfev = _build_field(
        data, flow, (eta_y, eta_z), flow_options, optimizer, t_span, t_eval, rtol, atol,
        max_nfev)
    return _solve_field(field, flow, t0, t_end, t_eval, method, rtol, atol, max_nfev,
                        progress, dense_output, events)


def new_option_names(data, flow, options: dict) -> dict:
    """``options`` with the old names the flow's field takes (its constructor's
    ``renamed``: :func:`odeflow.errors.renamed_keywords`) replaced by the new ones,
    warning :class:`~odeflow.errors.RenamedWarning` at the caller of the entry point."""
    family = family_of(data)
    field_class = family.field_class(family.default_flow if flow is FAMILY_DEFAULT else flow)
    return renamed(options, getattr(field_class.__init__, "renamed", {}), stacklevel=4)


def _build_field(data, flow, scan_snap: tuple, flow_options: dict, optimizer, t_span, t_eval,
                 rtol, atol, max_nfev) -> tuple:
    """``(flow, field, t0, t_end, t_eval, rtol, atol, max_nfev)`` of :func:`solve`: the
    family's field for ``flow`` (its defaults, then ``eta_y, eta_z`` where given, then
    the flow options, each checked by name), wrapped by ``optimizer``'s flow in step time,
    and the checked span, output times, tolerances and budget."""
    eta_y, eta_z = scan_snap
    given = {k: v for k, v in (("eta_y", eta_y), ("eta_z", eta_z)) if v is not FAMILY_DEFAULT}
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    field_class = family.field_class(flow)
    t0, t_end, t_eval, rtol, atol, max_nfev = check_run(t_span, t_eval, rtol, atol, max_nfev)
    options = {**family.solve_defaults, **given, **flow_options}
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


def _solve_scheduled(data, flow, t_span, schedule, **options):
    """``solve(..., schedule=...)``: :func:`solve_schedule`, with
    ``t_span`` left at its default or equal to ``(0, the schedule's end)``."""
    end = getattr(schedule, "end", None)
    if t_span != DEFAULT_SPAN and end is not None \
            and tuple(check_span(t_span)) != (0.0, float(end)):
        raise ValidationError("t_span", f"is set by the schedule's stages, (0, {end:g}); "
                              f"leave it out or give that, got {t_span!r:.80}")
    return solve_schedule(data, schedule, flow=flow, **options)



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
        ``[T_{k-1}, T_k]`` has :func:`odeflow.solver.options.default_t_eval`'s grid
        of ``[0, T_k - T_{k-1}]`` shifted by ``T_{k-1}`` (log-spaced from the
        stage's start).
    **options
        Passed to every :func:`odeflow.solve` call (``loss``, ``method``,
        ``rtol``, ``atol``, ``progress``, ``max_nfev``, ``dense_output``,
        ``events`` ...; ``start`` is the first stage's start). With
        ``optimizer`` each stage is that optimiser's flow in step time, started
        at rest: a stage's optimiser state (velocity, moments) is reset when the
        next stage begins, as training that builds a new optimiser over the
        moving groups for every stage does (the authors' staged runs); within a
        stage a frozen group has no gradient, so its state stays at rest. Stage
        durations are then whole steps.

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
    options = new_option_names(data, flow, options)
    family = family_of(data)
    flow = family.default_flow if flow is FAMILY_DEFAULT else flow
    field_class = family.field_class(flow)
    if not hasattr(field_class, "join") or not hasattr(schedule, "checked"):
        raise ValidationError("schedule", f"flow {flow!r} cannot be staged, or the schedule "
                              f"is not a Schedule (got {type(schedule).__name__})")
    for key in ("rates", "t_span"):
        if key in options:
            raise ValidationError(key, "is set by the schedule's stages; give it there")
    if options.get("events") is not None:
        raise ValidationError("events", "are not taken with a schedule (a terminal event "
                              "would end one stage, not the run); solve the stages one by "
                              "one with odeflow.solve to use events")
    if options.get("dense_output") and options.get("optimizer") is not None:
        raise ValidationError("dense_output", "is not taken with a schedule and an "
                              "optimiser (each stage's optimiser flow has its own step "
                              "clock); give t_eval instead")
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
    if options.get("optimizer") is not None:
        for i, stage in enumerate(stages):
            if not float(stage.duration).is_integer():
                raise ValidationError(f"schedule[{i}].duration", f"must be a whole number "
                                      f"of steps with an optimiser, got {stage.duration!r}")
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
        traj = _solve_stage(data, flow, (t0, float(t1)), grid, stage.rates, start, log_c,
                            options)
        # the next stage starts from this one's parameters, the selector's magnitudes
        # from ln|c| (a losing coefficient may lie below the range of doubles)
        start, log_c = traj.parameters(-1), traj.log_c[-1]
        parts.append(traj)
        t0 = float(t1)
    joined = field_class.join(parts)
    joined.stats["message"] = _stages_message([p.stats.get("message", "") for p in parts])
    if options.get("dense_output"):
        joined.sol = joined_solution([p.sol for p in parts])
    return joined


def joined_solution(solutions):
    """One :class:`scipy.integrate.OdeSolution` over consecutive stages' dense outputs
    (each stage's interpolants on its own interval; at a boundary, the later stage's)."""
    from scipy.integrate import OdeSolution

    ts = [solutions[0].ts[0]]
    interpolants = []
    for sol in solutions:
        ts.extend(sol.ts[1:])
        interpolants.extend(sol.interpolants)
    return OdeSolution(np.asarray(ts), interpolants)


def _solve_stage(data, flow, span, grid, rates, start, log_c, options):
    """One stage of :func:`solve_schedule` on ``span``; an optimiser flow, which starts at
    step 0, is solved on ``[0, duration]`` and its times shifted to the span."""
    t0, t1 = span
    if options.get("optimizer") is None:
        return solve(data, flow=flow, t_span=span, t_eval=grid, rates=rates, start=start,
                     start_log_c=log_c, **options)
    traj = solve(data, flow=flow, t_span=(0.0, t1 - t0), t_eval=grid - t0, rates=rates,
                 start=start, start_log_c=log_c, **options)
    traj.t = traj.t + t0
    return traj


def _stages_message(messages) -> str:
    """One readable termination message for the stages of a schedule."""
    if len(set(messages)) == 1:
        return f"{len(messages)} stages: {messages[0]}"
    return "; ".join(f"stage {i}: {m}" for i, m in enumerate(messages, start=1))
