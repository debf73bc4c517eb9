"""odeflow: the training dynamics of a 1-layer transformer as ODEs.

Implements "Scan and Snap: Understanding Training Dynamics and Token
Composition in 1-layer Transformer" (Tian, Wang, Chen, Du; NeurIPS 2023).

The package is layered, each layer importing only the ones below it:

1. :mod:`odeflow.data`: sequence classes, data models, presets, configs;
2. :mod:`odeflow.results`: :class:`Trajectory` and :class:`SnapResult`;
3. :mod:`odeflow.fields`: one vector field per level (exact, reduced, snap);
4. :mod:`odeflow.solver`: the one entry point :func:`solve` around ``solve_ivp``;
5. :mod:`odeflow.analysis` (closed forms, diagnostics, level comparisons,
   verification) and :mod:`odeflow.training` (gradient ascent, SGD);
6. :mod:`odeflow.sweep`: parameter sweeps (``odeflow.sweep(task, grid, ...)``);
7. front ends: :mod:`odeflow.cli` and :mod:`odeflow.plots`.

:mod:`odeflow.errors`, :mod:`odeflow.numerics` and :mod:`odeflow.io` sit
beneath them all. The names below are the flat public API.
"""

from odeflow import sweep  # a callable package: odeflow.sweep(task, grid, ...)
from odeflow.analysis import closed_forms, diagnostics
from odeflow.analysis.compare import compare_runs, compare_to_flow
from odeflow.analysis.levels import compare_levels
from odeflow.analysis.verify import verify
from odeflow.data import (
    PRESETS,
    DataModel,
    InductionData,
    SequenceClass,
    load_config,
    sequence_classes,
)
from odeflow.errors import SolveError, ValidationError
from odeflow.fields.optimizers import Adam, Momentum
from odeflow.results import SnapResult, Trajectory
from odeflow.solver import (
    events,
    margin_crossover,
    snap_transition,
    solve,
    solve_batch,
    solve_ensemble,
    solve_snap,
)
from odeflow.training import Protocol, gradient_ascent, sgd_ensemble, train, train_sgd
from odeflow.version import __version__

__all__ = ["DataModel", "PRESETS", "Protocol", "SequenceClass", "SnapResult", "SolveError",
           "Trajectory", "ValidationError", "__version__", "closed_forms", "compare_levels",
           "compare_runs", "compare_to_flow", "diagnostics", "events", "gradient_ascent",
           "load_config", "margin_crossover", "sequence_classes", "sgd_ensemble",
           "snap_transition", "solve", "solve_batch", "solve_ensemble", "solve_snap", "sweep",
           "train", "train_sgd", "verify"]
from odeflow.training import optimizer_steps, training_start  # noqa: E402

__all__ += ["Adam", "Momentum", "optimizer_steps", "training_start"]  # spec section 9
__all__ += ["InductionData"]  # the induction-head family (spec section 10)
