"""Vector-field layer: one module per level of the dynamics, for both model families.

- :mod:`odeflow.fields.classes`: :class:`ClassTable`, the table of (sub)classes
  a field is built from, and :class:`Supports`, its per-entry supports.
- :mod:`odeflow.fields.exact`: Level E, the exact population gradient flow
  (Lemma 1, Eqns 3-4, 7), ``flow="exact"``.
- :mod:`odeflow.fields.finite_t`: Level T, the gradient flow of the
  sample-average finite-``T`` objective (``docs/fidelity.md``), ``flow="finite_t"``.
- :mod:`odeflow.fields.reduced`: Level R, the reduced flow of Theorem 1
  (Eqns 8-10, 44, 98), ``flow="reduced"``.
- :mod:`odeflow.fields.induction`: the induction-head family (Chen, Sheen, Wang,
  Yang 2024; ``docs/induction.md``): ``flow="population"``, ``flow="copier"`` and
  ``flow="finite_l"`` of an :class:`~odeflow.data.induction.InductionData`.
- :mod:`odeflow.fields.optimizers`: optimiser flows (heavy-ball momentum, Adam)
  in step time around a parameter-level field (``docs/optimisers.md``).
- :mod:`odeflow.fields.snap`: the scalar system of Sec. 6 (Theorem 4, Eqns
  13-14), ``flow="snap"``; its result is a :class:`~odeflow.results.SnapResult`,
  not a :class:`~odeflow.results.Trajectory`.

Each model family declares its flows (``flow=`` name -> field class) in
:mod:`odeflow.families`; :func:`odeflow.solve` looks the flow up from the data
model's family.
"""

from odeflow.fields.base import Field, VectorField
from odeflow.fields.classes import ClassTable, Supports
from odeflow.fields.exact import ExactFlow
from odeflow.fields.finite_t import FiniteTFlow
from odeflow.fields.reduced import ReducedFlow
from odeflow.fields.snap import SnapFlow
from odeflow.fields.stacked import StackedField

__all__ = ["ClassTable", "ExactFlow", "Field", "FiniteTFlow", "ReducedFlow", "SnapFlow",
           "StackedField", "Supports", "VectorField"]


def __getattr__(name: str):
    # subpackages of the families' fields (``odeflow.fields.induction``, ...) on first use,
    # so that a documented dotted path resolves after ``import odeflow`` alone
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
