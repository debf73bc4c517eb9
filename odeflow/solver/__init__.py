"""The solve entry point: :func:`solve` wraps :func:`scipy.integrate.solve_ivp`.

One :func:`solve` serves every model family: it looks the flow up from the data
model's family (:mod:`odeflow.families`).

- :mod:`odeflow.solver.api`: :func:`solve`; :mod:`odeflow.solver.single`: one
  field built, wrapped and integrated; :mod:`odeflow.solver.schedule`:
  :func:`solve_schedule` (training stages one after the other);
  :mod:`odeflow.solver.stacks`: :func:`solve_batch` (many learning-rate points as
  one state), :func:`solve_ensemble` (many starts as one state).
- :mod:`odeflow.solver.options`: argument checking and defaults (method
  choice, output grid, tolerances, evaluation budget).
- :mod:`odeflow.solver.integrate`: the integrator loop (budget, stalls,
  progress, the integrators' warnings).
- :mod:`odeflow.solver.events`: ready events (:func:`snap_transition`,
  :func:`margin_crossover`) bound to the chosen level's field.
- :mod:`odeflow.solver.snap`: :func:`solve_snap`, keyword front door to the
  Sec. 6 system.
"""

from odeflow.solver import events
from odeflow.solver.api import solve
from odeflow.solver.events import FieldEvent, margin_crossover, snap_transition
from odeflow.solver.options import (
    DENSE_JACOBIAN_LIMIT,
    DENSE_MEMORY_LIMIT,
    IMPLICIT,
    LARGE_STATE_METHOD,
    MAX_NFEV,
    METHODS,
    choose_method,
    default_t_eval,
    jacobian_options,
)
from odeflow.solver.schedule import solve_schedule
from odeflow.solver.snap import solve_snap
from odeflow.solver.stacks import solve_batch, solve_ensemble

__all__ = ["DENSE_JACOBIAN_LIMIT", "DENSE_MEMORY_LIMIT", "FieldEvent", "IMPLICIT",
           "LARGE_STATE_METHOD", "MAX_NFEV", "METHODS", "choose_method", "default_t_eval", "events",
           "jacobian_options", "margin_crossover", "snap_transition", "solve", "solve_batch",
           "solve_ensemble", "solve_schedule", "solve_snap"]
