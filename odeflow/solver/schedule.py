"""Training schedules: stages solved one after the other, joined into one result.

A stage moves some parameter groups at their own rates and freezes the others (the
training schedules of ``docs/induction.md``: the authors' staged ``c -> w -> a`` and
joint runs). Each stage is one solve (:func:`~odeflow.solver.single.solve_one`, the
integrator loop of every solve) on ``[T_{k-1}, T_k]`` from the end state of the stage
before (the field's ``rates``, ``start`` and ``start_log_c`` options: the parameters and
the selector's ``ln|c|`` of the stage's result); the field class's ``join`` makes one
result on ``[0, T_end]``. Any flow whose field takes those options, whose result has
``parameters(i)`` and ``log_c``, and whose class offers ``join`` can be staged.
"""

from __future__ import annotations

import numpy as np

from odeflow.data import as_real_array
from odeflow.errors import ValidationError
from odeflow.solver.options import FAMILY_DEFAULT, default_t_eval
from odeflow.solver.single import flow_of, new_option_names, solve_one

#: The options of :func:`odeflow.solve` a stage takes beside the field's, and their defaults.
SOLVE_DEFAULTS = {"method": "auto", "rtol": 1e-8, "atol": 1e-10, "progress": None,
                  "max_nfev": None, "dense_output": False, "optimizer": None}


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
    _, flow, field_class = flow_of(data, flow)
    stages = _checked_stages(schedule, flow, field_class, options)
    ends = np.cumsum([s.duration for s in stages])
    t_eval = _checked_times(t_eval, ends[-1])
    start = options.pop("start", None)
    log_c = options.pop("start_log_c", None)
    parts = []
    t0 = 0.0
    for stage, t1 in zip(stages, ends, strict=True):
        grid = _stage_grid(t_eval, t0, float(t1), first=not parts)
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


def _checked_stages(schedule, flow, field_class, options: dict) -> list:
    """The schedule's checked stages, or a ValidationError naming what cannot be staged:
    a flow without ``join``, a value that is not a Schedule, the options a schedule sets
    or refuses, a fractional stage of an optimiser flow."""
    if not hasattr(field_class, "join"):
        raise ValidationError("schedule", f"flow {flow!r} cannot be staged (its field has no "
                              "join of stage results)")
    if not hasattr(schedule, "checked"):
        raise ValidationError("schedule", f"must be a Schedule, got {type(schedule).__name__}")
    for key in ("rates", "t_span"):
        if key in options:
            raise ValidationError(key, "is set by the schedule's stages; give it there")
    if options.get("events") is not None:
        raise ValidationError("events", "are not taken with a schedule (a terminal event "
                              "would end one stage, not the run); solve the stages one by "
                              "one with odeflow.solve to use events")
    optimizer = options.get("optimizer") is not None
    if options.get("dense_output") and optimizer:
        raise ValidationError("dense_output", "is not taken with a schedule and an "
                              "optimiser (each stage's optimiser flow has its own step "
                              "clock); give t_eval instead")
    stages = schedule.checked(field_class.groups)
    for i, stage in enumerate(stages):
        if optimizer and not float(stage.duration).is_integer():
            raise ValidationError(f"schedule[{i}].duration", f"must be a whole number "
                                  f"of steps with an optimiser, got {stage.duration!r}")
    return stages


def _checked_times(t_eval, end: float):
    """``t_eval`` as finite, strictly increasing times in ``[0, end]`` (or None)."""
    if t_eval is None:
        return None
    t_eval = as_real_array(t_eval, "t_eval").ravel()
    if t_eval.size == 0 or not np.all(np.isfinite(t_eval)) or np.any(np.diff(t_eval) <= 0) \
            or t_eval[0] < 0 or t_eval[-1] > end:
        raise ValidationError("t_eval", f"must be finite, strictly increasing times in "
                              f"[0, {end:g}]")
    return t_eval


def _stage_grid(t_eval, t0: float, t1: float, first: bool) -> np.ndarray:
    """A stage's output times: its share of ``t_eval`` (or the default log-spaced grid
    of its own span), with its start and end."""
    if t_eval is None:
        grid = np.union1d(t0 + default_t_eval(0.0, t1 - t0), [t0, t1])
        return grid[(grid >= t0) & (grid <= t1)]
    inside = t_eval[(t_eval >= t0) & (t_eval < t1)]
    grid = np.union1d(inside, [t0, t1]) if first else np.union1d(inside, [t1])
    return np.union1d(grid, [t0])


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
        return _solve(data, flow, span, grid, rates, start, log_c, options)
    traj = _solve(data, flow, (0.0, t1 - t0), grid - t0, rates, start, log_c, options)
    traj.t = traj.t + t0
    return traj


def _solve(data, flow, span, grid, rates, start, log_c, options: dict):
    """:func:`~odeflow.solver.single.solve_one` of one stage (the options of
    :func:`odeflow.solve` that a stage takes, their defaults as there)."""
    options = dict(options)
    options.pop("events", None)                 # refused by _checked_stages unless None
    settings = {key: options.pop(key, default) for key, default in SOLVE_DEFAULTS.items()}
    return solve_one(data, flow, span, grid, settings["method"], settings["rtol"],
                     settings["atol"], settings["progress"], settings["max_nfev"],
                     settings["dense_output"], None, settings["optimizer"],
                     {**options, "rates": rates, "start": start, "start_log_c": log_c})


def _stages_message(messages) -> str:
    """One readable termination message for the stages of a schedule."""
    if len(set(messages)) == 1:
        return f"{len(messages)} stages: {messages[0]}"
    return "; ".join(f"stage {i}: {m}" for i, m in enumerate(messages, start=1))
