"""The induction-head sweep task, ``induction_flow``, and its outputs (``docs/sweeps.md``).

One point is one :func:`odeflow.solve` of an
:class:`~odeflow.data.induction.InductionData` (``flow`` population, copier or
finite_l with its sample's ``seq_len``, ``sample_size``, ``seed``; ``loss``;
the groups' rates ``rate_c``, ``rate_w``, ``rate_a`` of the joint run), on the
sweep's time grid up to ``t_end``. The grid may also set numbers
of the data model by dotted name (``prior.alpha``, ``init.w_plus``, ...:
:mod:`odeflow.sweeps.models`).

==================  ========================  ==========================================
variable            dims (per point)          meaning
==================  ========================  ==========================================
``a``               time                      classifier weight ``a(t)``
``population_loss`` time                      the level's loss (setting ``loss``:
                                              nll or code; the sample's finite-``L``
                                              loss for ``flow = finite_l``; a name
                                              of its own, as ``loss`` may be swept)
``subset_weights``  subset, time              ``p_S(t) = c_S^2 / sum c^2``; ``subset``
                                              labels such as ``"{1,2}"`` (``"{}"``: empty)
``copier_logits``   head, offset, time        ``w(t)``; head ``h`` (1..H) on offset
                                              ``h + offset``; NaN for ``flow = copier``
``nfev`` ...        -                         as every task: ``njev``, ``nlu``,
                                              ``status``, ``wall_time``, ``error``,
                                              ``computed``
==================  ========================  ==========================================
"""

from __future__ import annotations

import numpy as np

from odeflow.data.induction import subset_label
from odeflow.errors import ValidationError
from odeflow.families import family_named
from odeflow.fields.induction import LOSSES
from odeflow.fields.induction.finite_length import FRONT_END_RENAMED, SAMPLE_OPTIONS
from odeflow.solver import solve
from odeflow.sweeps.models import edited_model
from odeflow.sweeps.outputs import (
    ATTRS,
    BOOKKEEPING,
    BOOKKEEPING_VARIABLES,
    OutputSet,
    empty_outputs,
    grid_columns,
    put_stats,
)
from odeflow.sweeps.tasks import SOLVE_PARAMETERS, Parameter, TaskKind

#: Per-point dims and dtype of each output of ``induction_flow``.
VARIABLES = {
    "a": (("time",), "float64"),
    "population_loss": (("time",), "float64"),
    "subset_weights": (("subset", "time"), "float64"),
    "copier_logits": (("head", "offset", "time"), "float64"),
    **BOOKKEEPING_VARIABLES,
}

#: Variable attributes of the induction outputs.
INDUCTION_ATTRS = {
    "a": {"long_name": "classifier weight a(t)"},
    "population_loss": {"long_name": "loss of the induction-head level (population; the "
                                     "sample's finite-L loss for flow = finite_l)",
                        "description": "-log y_target (loss nll) or the code's "
                                       "cross-entropy of y (loss code)"},
    "subset_weights": {"long_name": "selector subset weights p_S(t) = c_S^2 / sum c^2"},
    "copier_logits": {"long_name": "copier logits w(t): head h on offset h + offset",
                      "description": "NaN for flow = copier (w+ -> infinity, no w)"},
    **{name: ATTRS[name] for name in BOOKKEEPING},
}


def induction_sizes(models, times) -> dict:
    """Sizes of the induction outputs; the models must share their heads and subsets."""
    first = models[0]
    for model in models[1:]:
        if model.subsets != first.subsets:
            raise ValidationError("grid.preset", "the presets have different heads or "
                                  "selector subsets (their outputs cannot share a store); "
                                  "sweep them separately")
    return {"subset": len(first.subsets), "head": first.heads, "offset": first.heads,
            "time": len(times)}


def induction_coords(models, sizes) -> dict:
    """``subset`` labels (:func:`~odeflow.data.induction.subset_label`), ``head`` 1..H,
    ``offset`` 0..H-1."""
    return {"subset": np.array([subset_label(s) for s in models[0].subsets], dtype=str),
            "head": np.arange(1, sizes["head"] + 1), "offset": np.arange(sizes["offset"])}


def induction_outputs(result, times: np.ndarray, sizes: dict) -> dict:
    """The named outputs of one :class:`~odeflow.results.induction.InductionTrajectory`
    on the shared ``times`` (its times that are on the grid)."""
    out = empty_outputs(sizes, VARIABLES)
    cols, rows = grid_columns(times, result.t)
    out["a"][cols] = result.a[rows]
    out["population_loss"][cols] = result.loss[rows]
    out["subset_weights"][:, cols] = result.subset_weights[rows].T
    if result.copier_logits is not None:
        out["copier_logits"][..., cols] = np.moveaxis(result.copier_logits[rows], 0, -1)
    put_stats(out, result.stats)
    return out


#: The outputs of ``induction_flow``.
INDUCTION_OUTPUTS = OutputSet("induction", VARIABLES, INDUCTION_ATTRS, induction_sizes,
                              induction_coords, induction_outputs)


def run_induction_flow(data, values: dict, times: np.ndarray):
    """One point of ``induction_flow``: the model with the point's dotted fields set,
    solved with its ``flow``, ``loss`` and the rates of the flow's groups (and, for
    ``flow = "finite_l"``, its sample: ``seq_len``, ``sample_size``, ``seed``)."""
    model = edited_model(data, {k: v for k, v in values.items() if "." in k})
    groups = family_named("induction").field_class(values["flow"]).groups
    sample = ({name: values[name] for name in SAMPLE_OPTIONS}
              if values["flow"] == "finite_l" else {})
    return solve(model, flow=values["flow"], loss=values["loss"],
                 rates={g: values[f"rate_{g}"] for g in groups},
                 t_span=(0.0, values["t_end"]), t_eval=times, method=values["method"],
                 rtol=values["rtol"], atol=values["atol"], progress=False, **sample)


def check_parameters_used(grid: dict, settings: dict) -> None:
    """Refuse ``rate_w`` when every point's flow is ``copier`` (it has no ``w``), and the
    sample's parameters (``seq_len``, ``sample_size``, ``seed``) when no point's
    flow is ``finite_l``: swept (every value would repeat the same points) or fixed at
    anything but the default (it would be ignored)."""
    flows = grid.get("flow", [settings.get("flow", "population")])
    if "finite_l" not in flows:
        defaults = {p.name: p.default for p in INDUCTION_PARAMETERS}
        for name in SAMPLE_OPTIONS:
            if name in grid:
                raise ValidationError(f"grid.{name}", "only flow = 'finite_l' has a sample "
                                      f"of sequences; every {name} would repeat the same "
                                      "points")
            if name in settings and settings[name] != defaults[name]:
                raise ValidationError(f"settings.{name}", f"only flow = 'finite_l' has a "
                                      f"sample of sequences; {name} = {settings[name]!r} "
                                      "would be ignored")
    if not all(f == "copier" for f in flows):
        return
    if "rate_w" in grid:
        raise ValidationError("grid.rate_w", "the copier flow has no copier logits w; every "
                              "rate_w would repeat the same points")
    if settings.get("rate_w", 1.0) != 1.0:
        raise ValidationError("settings.rate_w", f"the copier flow has no copier logits w; "
                              f"rate_w = {settings['rate_w']!r} would be ignored")


#: Parameters of ``induction_flow``: the flow, the loss, the groups' rates (the joint run;
#: 0 freezes a group; the copier flow has no ``w``), the finite-``L`` level's sample
#: (``SAMPLE_OPTIONS``; the authors' ``L = 100``, 9000 sequences, seed 0) and
#: :data:`~odeflow.sweeps.tasks.SOLVE_PARAMETERS`.
INDUCTION_PARAMETERS = (
    Parameter("flow", "population", "text", tuple(family_named("induction").flows)),
    Parameter("loss", "nll", "text", LOSSES),
    Parameter("rate_c", 1.0, "rate"), Parameter("rate_w", 1.0, "rate"),
    Parameter("rate_a", 1.0, "rate"),
    Parameter("seq_len", 100, "count"), Parameter("sample_size", 9000, "count"),
    Parameter("seed", 0, "seed"),
    *SOLVE_PARAMETERS)

INDUCTION_FLOW = TaskKind("induction_flow", "flow", run_induction_flow, INDUCTION_PARAMETERS,
                          outputs=INDUCTION_OUTPUTS, model_family="induction",
                          default_preset="ih-point", model_fields=True,
                          check=check_parameters_used, renamed=FRONT_END_RENAMED)

#: The induction family's task kinds (its ``sweep_tasks``).
TASK_KINDS = (INDUCTION_FLOW,)
