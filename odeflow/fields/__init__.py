"""Vector-field layer: one module per level of the dynamics.

- :mod:`odeflow.fields.exact`: Level E, the exact population gradient flow
  (Lemma 1, Eqns 3-4, 7), ``flow="exact"``.
- :mod:`odeflow.fields.reduced`: Level R, the reduced flow of Theorem 1
  (Eqns 8-10, 44, 98), ``flow="reduced"``.
- :mod:`odeflow.fields.snap`: the scalar system of Sec. 6 (Theorem 4, Eqns
  13-14), ``flow="snap"``; its result is a :class:`~odeflow.fields.snap.SnapResult`,
  not a :class:`~odeflow.trajectory.Trajectory`.

:data:`FLOWS` maps the ``flow=`` names of :func:`odeflow.solve` to the classes.
"""

from .base import VectorField
from .exact import ExactFlow
from .reduced import ReducedFlow
from .snap import SnapFlow, SnapResult, solve_snap

FLOWS: dict[str, type[VectorField]] = {ExactFlow.name: ExactFlow,
                                       ReducedFlow.name: ReducedFlow,
                                       SnapFlow.name: SnapFlow}

__all__ = ["FLOWS", "ExactFlow", "ReducedFlow", "SnapFlow", "SnapResult", "VectorField",
           "solve_snap"]
