"""The induction-head family's own option of ``odeflow run``: ``--stages T_C,T_W``.

The family declares it (``run_options`` of :mod:`odeflow.families.induction`) with
:func:`staged_schedule` as its conversion to :func:`odeflow.solve`'s ``schedule``.
"""

from __future__ import annotations

from odeflow.errors import ValidationError


def staged_schedule(text: str, options) -> dict:
    """``--stages T_C,T_W`` (or ``[run] stages``): the authors' staged schedule ``c -> w -> a``
    (:meth:`odeflow.fields.induction.Schedule.staged`), the ``a`` stage ending at the run's
    ``t_end`` (flow time, as ``--t-end``).

    Returns
    -------
    dict
        ``{"schedule": Schedule}``, keyword arguments of :func:`odeflow.solve`.

    Raises
    ------
    ValidationError
        Naming ``stages`` when ``text`` is not two durations ``> 0`` that end before
        ``t_end``.
    """
    from odeflow.fields.induction import Schedule

    t_end = options["t_end"]
    try:
        t_c, t_w = (float(x) for x in text.split(","))
    except ValueError:
        raise ValidationError("stages", f"must be two durations T_C,T_W, got {text!r}") from None
    if not (t_c > 0 and t_w > 0 and t_c + t_w < t_end):
        raise ValidationError("stages", f"durations must be > 0 and end before --t-end = "
                              f"{t_end:g} (the a stage runs the rest), got {text!r}")
    return {"schedule": Schedule.staged(t_c, t_w, t_end - t_c - t_w)}
