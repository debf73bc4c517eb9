"""Vector-field layer: one module per level of the dynamics.

- :mod:`odeflow.fields.classes`: :class:`ClassTable`, the table of (sub)classes
  a field is built from, and :class:`Supports`, its per-entry supports.
- :mod:`odeflow.fields.exact`: Level E, the exact population gradient flow
  (Lemma 1, Eqns 3-4, 7), ``flow="exact"``.
- :mod:`odeflow.fields.finite_t`: Level T, the gradient flow of the
  sample-average finite-``T`` objective (spec section 8), ``flow="finite_t"``.
- :mod:`odeflow.fields.reduced`: Level R, the reduced flow of Theorem 1
  (Eqns 8-10, 44, 98), ``flow="reduced"``.
- :mod:`odeflow.fields.snap`: the scalar system of Sec. 6 (Theorem 4, Eqns
  13-14), ``flow="snap"``; its result is a :class:`~odeflow.results.SnapResult`,
  not a :class:`~odeflow.results.Trajectory`.

:data:`FLOWS` maps the ``flow=`` names of :func:`odeflow.solve` to the classes.
"""

from odeflow.fields.base import VectorField
from odeflow.fields.classes import ClassTable, Supports
from odeflow.fields.exact import ExactFlow
from odeflow.fields.finite_t import FiniteTFlow
from odeflow.fields.reduced import ReducedFlow
from odeflow.fields.snap import SnapFlow
from odeflow.fields.stacked import StackedField

FLOWS: dict[str, type[VectorField]] = {ExactFlow.name: ExactFlow,
                                       FiniteTFlow.name: FiniteTFlow,
                                       ReducedFlow.name: ReducedFlow,
                                       SnapFlow.name: SnapFlow}

__all__ = ["FLOWS", "ClassTable", "ExactFlow", "FiniteTFlow", "ReducedFlow", "SnapFlow",
           "StackedField", "Supports", "VectorField"]
