"""odeflow: the training dynamics of a 1-layer transformer as ODEs.

Implements "Scan and Snap: Understanding Training Dynamics and Token
Composition in 1-layer Transformer" (Tian, Wang, Chen, Du; NeurIPS 2023).
The package is layered: data (:mod:`odeflow.data`, :mod:`odeflow.presets`),
vector fields (:mod:`odeflow.fields`), one solve entry point
(:func:`odeflow.solve`), analysis, and thin front ends (CLI, plots).
"""

from .data import DataModel, SequenceClass
from .errors import SolveError, ValidationError
from .presets import PRESETS
from .solve import solve
from .trajectory import Trajectory

__version__ = "0.1.0"

__all__ = ["DataModel", "PRESETS", "SequenceClass", "SolveError", "Trajectory",
           "ValidationError", "solve", "__version__"]
