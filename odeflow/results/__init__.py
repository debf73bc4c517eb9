"""Results layer: what a solve returns and how it is saved.

- :mod:`odeflow.results.trajectory`: :class:`Trajectory`, the time series of a
  flow on the (lumped) state, with un-lumping accessors and save/load
  (:mod:`odeflow.results.decoder`: its decoder rows; :mod:`odeflow.results.trajectory_file`:
  its file layout), and :class:`ReducedTrajectory`, Level R's, with the series
  of :mod:`odeflow.results.reduced` (``h``, ``gamma``, ``Gamma``, ``B``).
- :mod:`odeflow.results.finite_t`: :class:`FiniteTTrajectory`, Level T's
  trajectory (accessors over the sampled sequences, ``docs/fidelity.md``).
- :mod:`odeflow.results.induction`: :class:`InductionTrajectory`, the series
  of the induction-head flows (``population``, ``copier``, ``finite_l``;
  ``docs/induction.md``).
- :mod:`odeflow.results.snap`: :class:`SnapResult`, the series of the Sec. 6
  scalar system.

Vector fields build these; the solver returns them; nothing here imports the
fields or the solver.
"""

from odeflow.results.files import jsonable
from odeflow.results.finite_t import FiniteTTrajectory, population_attention
from odeflow.results.induction import InductionTrajectory
from odeflow.results.snap import SnapResult
from odeflow.results.trajectory import ReducedTrajectory, Trajectory

__all__ = ["FiniteTTrajectory", "InductionTrajectory", "ReducedTrajectory", "SnapResult",
           "Trajectory", "jsonable", "population_attention"]
