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
beneath them all. The names below are the flat public API; each loads its
module on first use (PEP 562), so ``import odeflow`` and the command line's
``--help`` stay light.
"""

from __future__ import annotations

import importlib

from odeflow.errors import SolveError, ValidationError  # noqa: F401 (in __all__)
from odeflow.version import __version__  # noqa: F401 (in __all__)

#: Public name -> module that defines it (``None``: the name is a submodule of odeflow).
_EXPORTS = {
    "sweep": None,  # a callable package: odeflow.sweep(task, grid, ...)
    "closed_forms": "odeflow.analysis",
    "diagnostics": "odeflow.analysis",
    "compare_runs": "odeflow.analysis.compare",
    "compare_to_flow": "odeflow.analysis.compare",
    "compare_levels": "odeflow.analysis.levels",
    "verify": "odeflow.analysis.verify",
    **dict.fromkeys(("PRESETS", "DataModel", "InductionData", "SequenceClass",
                     "load_config", "sequence_classes"), "odeflow.data"),
    "Adam": "odeflow.fields.optimizers",
    "Momentum": "odeflow.fields.optimizers",
    "SnapResult": "odeflow.results",
    "Trajectory": "odeflow.results",
    **dict.fromkeys(("events", "margin_crossover", "snap_transition", "solve", "solve_batch",
                     "solve_ensemble", "solve_snap"), "odeflow.solver"),
    **dict.fromkeys(("Protocol", "gradient_ascent", "sgd_ensemble", "train", "train_sgd",
                     "optimizer_steps", "training_start"), "odeflow.training"),
}

__all__ = sorted({*_EXPORTS, "SolveError", "ValidationError", "__version__"})


def __getattr__(name: str):
    module = _EXPORTS.get(name, "")
    if module == "":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module is None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
