"""Vector-field layer: one module per level of the dynamics.

- :mod:`odeflow.fields.exact`: Level E, the exact population gradient flow.

:data:`FLOWS` maps the ``flow=`` names of :func:`odeflow.solve` to the classes.
"""

from .base import VectorField
from .exact import ExactFlow

FLOWS: dict[str, type[VectorField]] = {ExactFlow.name: ExactFlow}

__all__ = ["FLOWS", "ExactFlow", "VectorField"]
