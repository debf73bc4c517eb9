"""Fields of the induction-head family (``docs/induction.md``), registered as a model family.

- :mod:`odeflow.fields.induction.base`: :class:`InductionField` (flat parameter
  layout ``(c, w, a)``, per-group rates, ``loss``/``gradient``/``rate_vector``),
  :class:`Stage` and :class:`Schedule`.
- :mod:`odeflow.fields.induction.population`: ``flow="population"`` (``L ->
  infinity``, soft copier, analytic gradient).
- :mod:`odeflow.fields.induction.copier`: ``flow="copier"`` (exact-copier
  reduction, state ``(c, a)``).
- :mod:`odeflow.fields.induction.finite_length`: the finite-``L`` model
  (:class:`EmpiricalInduction`, which real training descends) and
  ``flow="finite_l"``, its gradient flow on a fixed seeded sample of sequences.

Importing this package registers ``Family("induction", InductionData, ...)``
with :func:`odeflow.fields.families.register_family`. Nothing here imports a
Scan-and-Snap module.
"""

from odeflow.data.induction import PRESETS, InductionData
from odeflow.fields.families import Family, register_family
from odeflow.fields.induction.base import GROUPS, LOSSES, InductionField, Schedule, Stage
from odeflow.fields.induction.copier import CopierFlow
from odeflow.fields.induction.finite_length import EmpiricalInduction, FiniteLengthFlow
from odeflow.fields.induction.population import PopulationFlow

#: ``flow=`` name -> field class of the induction-head family.
INDUCTION_FLOWS = {PopulationFlow.name: PopulationFlow, CopierFlow.name: CopierFlow,
                   FiniteLengthFlow.name: FiniteLengthFlow}

#: The induction-head family (Chen, Sheen, Wang, Yang 2024).
INDUCTION = register_family(Family("induction", InductionData, INDUCTION_FLOWS,
                                   default_flow="population", presets=PRESETS))

__all__ = ["GROUPS", "INDUCTION", "INDUCTION_FLOWS", "LOSSES", "CopierFlow",
           "EmpiricalInduction", "FiniteLengthFlow", "InductionField", "PopulationFlow",
           "Schedule", "Stage"]
