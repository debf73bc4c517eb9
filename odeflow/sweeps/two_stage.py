"""The two-stage family's sweep task, ``two_stage_flow``, and its outputs (``docs/two_stage.md``).

One point is one :func:`odeflow.solve` of a
:class:`~odeflow.data.two_stage.TwoStageData` whose margins ``gamma_p``,
``gamma_q``, mix ``rho`` and start scale ``sigma0`` are the point's (the
task's parameters: a grid over them maps where the two stages separate), with
``flow`` ``population`` or ``finite_n`` (its sample's ``seq_len``,
``sample_size``, ``seed``), on the sweep's time grid up to ``t_end``.

=====================  ========  ==============================================
variable               dims      meaning
=====================  ========  ==============================================
``accuracy_p_only``    time      population accuracy on P-only queries
``accuracy_q_only``    time      ... on Q-only queries
``accuracy_both``      time      ... on queries with both features
``loss_p_only``        time      population loss on P-only queries
``loss_q_only``        time      ... on Q-only queries
``loss``               time      population loss over the query mix
``nfev`` ...           -         as every task: ``njev``, ``nlu``, ``status``,
                                 ``wall_time``, ``error``, ``computed``
=====================  ========  ==============================================
"""

from __future__ import annotations

import dataclasses

import numpy as np

from odeflow.solver import solve
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

#: The series of a :class:`~odeflow.results.two_stage.TwoStageTrajectory` a point stores.
SERIES = ("accuracy_p_only", "accuracy_q_only", "accuracy_both", "loss_p_only",
          "loss_q_only", "loss")

#: Per-point dims and dtype of each output of ``two_stage_flow``.
VARIABLES = {**{name: (("time",), "float64") for name in SERIES}, **BOOKKEEPING_VARIABLES}

#: Variable attributes of the outputs.
TWO_STAGE_ATTRS = {
    **{name: {"long_name": name.replace("_", " ") + " (population, over the query law)"}
       for name in SERIES},
    **{name: ATTRS[name] for name in BOOKKEEPING},
}

#: The data model's fields a point sets (defaults: ``ts-default``'s).
MODEL_PARAMETERS = (Parameter("gamma_p", 3.0), Parameter("gamma_q", 0.5),
                    Parameter("rho", 0.2, "fraction"), Parameter("sigma0", 0.01))


def two_stage_sizes(models, times) -> dict:
    """Sizes of the outputs: one per time."""
    return {"time": len(times)}


def two_stage_coords(models, sizes) -> dict:
    """No per-point dims but time."""
    return {}


def two_stage_outputs(result, times: np.ndarray, sizes: dict) -> dict:
    """The named outputs of one trajectory on the shared ``times``."""
    out = empty_outputs(sizes, VARIABLES)
    cols, rows = grid_columns(times, result.t)
    for name in SERIES:
        out[name][cols] = np.asarray(getattr(result, name))[rows]
    put_stats(out, result.stats)
    return out


#: The outputs of ``two_stage_flow``.
TWO_STAGE_OUTPUTS = OutputSet("two_stage", VARIABLES, TWO_STAGE_ATTRS, two_stage_sizes,
                              two_stage_coords, two_stage_outputs)


def run_two_stage_flow(data, values: dict, times: np.ndarray):
    """One point: the data model with the point's margins, mix and start scale, solved."""
    model = dataclasses.replace(data, **{p.name: values[p.name] for p in MODEL_PARAMETERS})
    sample = ({name: values[name] for name in ("seq_len", "sample_size", "seed")}
              if values["flow"] == "finite_n" else {})
    return solve(model, flow=values["flow"], t_span=(0.0, values["t_end"]), t_eval=times,
                 method=values["method"], rtol=values["rtol"], atol=values["atol"],
                 progress=False, **sample)


#: Parameters of ``two_stage_flow``.
TWO_STAGE_PARAMETERS = (
    Parameter("flow", "population", "text", ("population", "finite_n")),
    *MODEL_PARAMETERS,
    Parameter("seq_len", 64, "count"), Parameter("sample_size", 2000, "count"),
    Parameter("seed", 0, "seed"),
    *SOLVE_PARAMETERS)

#: The two-stage family's task kinds (its ``sweep_tasks``).
TASK_KINDS = (TaskKind("two_stage_flow", "flow", run_two_stage_flow, TWO_STAGE_PARAMETERS,
                       outputs=TWO_STAGE_OUTPUTS, model_family="two_stage",
                       default_preset="ts-default"),)
