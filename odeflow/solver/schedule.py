"""Stage schedules: :func:`solve_schedule` solves the stages of a schedule one after the other.

A stage moves some parameter groups at their own rates and freezes the
others (spec section 10, training schedules: the authors' staged ``c -> w ->
a`` and joint runs). Each stage is one :func:`odeflow.solve` call on
``[T_{k-1}, T_k]`` from the end state of the stage before (the field's
``rates`` and ``start`` options); the stage results are joined by the field
class's ``join`` into one result on ``[0, T_end]``. Family-neutral: any flow
whose field takes ``rates`` and ``start`` and offers ``join`` can be staged.
"""

from __future__ import annotations

import numpy as np

from odeflow.data import as_real_array
from odeflow.errors import ValidationError
from odeflow.fields import family_of
from odeflow.solver.solve import FAMILY_DEFAULT, default_t_eval, solve


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
                     start=start, **options)
        start = traj.y[:, -1]
        parts.append(traj)
        t0 = float(t1)
    return field_class.join(parts)
