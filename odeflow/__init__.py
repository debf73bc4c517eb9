"""odeflow: the training dynamics of transformers as ordinary differential equations.

Three model families (:mod:`odeflow.families`), each a paper's theory:

- Scan and Snap ("Scan and Snap: Understanding Training Dynamics and Token
  Composition in 1-layer Transformer", Tian, Wang, Chen, Du; NeurIPS 2023):
  :class:`DataModel`, flows ``exact`` (Level E), ``reduced`` (Level R), ``snap``
  (the Sec. 6 system) and ``finite_t`` (Level T), and the optimiser flows
  :class:`Momentum` and :class:`Adam` around Levels E and T;
- induction heads ("Unveiling Induction Heads", Chen, Sheen, Wang, Yang 2024):
  :class:`InductionData`, flows ``population``, ``copier`` and ``finite_l``;
- two-stage features (odeflow's model after "Disentangling Feature Structure",
  Gong et al. 2025): :class:`TwoStageData`, flows ``population`` and ``finite_n``.

Every family's parameter levels have the optimiser flows, and every family's
training and runs beside its flow take the same keywords through :func:`train` and
:func:`compare` (``docs/api.md``); a family of one's own registers with
:func:`odeflow.families.register_family` (``docs/families.md``).

The terms (levels, flows, time maps, CF1-CF8, CF-IH1/2, CF-TS1/2) are explained in
``docs/glossary.md``.

The package is layered, each layer importing only the ones below it:

1. :mod:`odeflow.data`: sequence classes, data models, presets, configs;
2. :mod:`odeflow.results`: what a solve returns (:class:`Trajectory`,
   :class:`SnapResult`, the finite-T and induction-head trajectories);
3. :mod:`odeflow.fields`: one vector field per level of each family, and the
   optimiser flows that wrap a parameter level;
4. :mod:`odeflow.solver`: :func:`solve` around ``solve_ivp`` (with
   ``solve_batch``, ``solve_ensemble``, ``solve_schedule``, ``solve_snap``);
5. :mod:`odeflow.analysis` (closed forms, diagnostics, level comparisons,
   verification, every family's closed forms) and :mod:`odeflow.training`
   (gradient ascent, SGD, the papers' protocols, the other families' training);
6. :mod:`odeflow.sweeps`: parameter sweeps (:func:`sweep`: ``odeflow.sweep(task, grid, ...)``);
7. front ends: :mod:`odeflow.cli` and :mod:`odeflow.plots`.

:mod:`odeflow.errors`, :mod:`odeflow.numerics` and :mod:`odeflow.io` sit
beneath them all. The names below, and those each model family declares
(:mod:`odeflow.families`: its data type, e.g. ``odeflow.InductionData``), are
the flat public API; each loads its module on first use (PEP 562), so ``import
odeflow`` and the command line's ``--help`` stay light.
"""

from __future__ import annotations

import importlib

from odeflow.errors import RenamedWarning, SolveError, ValidationError  # noqa: F401 (in __all__)
from odeflow.version import __version__  # noqa: F401 (in __all__)

#: Public name -> module that defines it (``None``: the name is a submodule of odeflow).
_EXPORTS = {
    "sweep": "odeflow.sweeps",
    "closed_forms": "odeflow.analysis",
    "diagnostics": "odeflow.analysis",
    "compare_runs": "odeflow.analysis.compare",
    "compare_to_flow": "odeflow.analysis.compare",
    "compare_levels": "odeflow.analysis.levels",
    "verify": "odeflow.analysis.verification",
    **dict.fromkeys(("load_config", "sequence_classes"), "odeflow.data"),
    "PRESETS": "odeflow.families",
    **dict.fromkeys(("Adam", "GradientDescent", "Momentum"), "odeflow.fields.optimizers"),
    "SnapResult": "odeflow.results",
    "Trajectory": "odeflow.results",
    **dict.fromkeys(("events", "margin_crossover", "snap_transition", "solve", "solve_batch",
                     "solve_ensemble", "solve_snap"), "odeflow.solver"),
    **dict.fromkeys(("Protocol", "gradient_ascent", "sgd_ensemble", "train_sgd",
                     "optimizer_steps", "training_start"), "odeflow.training"),
    **dict.fromkeys(("train", "compare"), "odeflow.training.api"),
}



def _family_exports() -> dict:
    """Flat-API names the model families declare (e.g. ``DataModel``, ``InductionData``)
    -> their targets (:mod:`odeflow.families`)."""
    from odeflow.families import families

    return {name: target for family in families().values()
            for name, target in family.exports.items()}


#: Subpackages reached as attributes after ``import odeflow`` alone (e.g. the docs'
#: ``odeflow.analysis.measures.distinct_entropy``); imported on first use, not in __all__.
_SUBPACKAGES = frozenset({"analysis", "cli", "data", "fields", "io", "numerics", "plots",
                          "results", "solver", "sweeps", "testing", "training"})


def __getattr__(name: str):
    if name == "__all__":          # the families' names too, so computed on first use
        return sorted({*_EXPORTS, *_family_exports(), "RenamedWarning", "SolveError",
                       "ValidationError", "__version__"})
    module = None if name in _SUBPACKAGES else _EXPORTS.get(name, "")
    target = _family_exports().get(name) if module == "" else None
    if target is not None:
        from odeflow.families import load

        value = globals()[name] = load(target)
        return value
    if module == "":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module is None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_family_exports()))
