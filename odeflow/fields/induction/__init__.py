"""Fields of the induction-head family (``docs/induction.md``).

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

The family's declaration is :class:`odeflow.families.induction.Induction`.
Nothing here imports a Scan-and-Snap module.
"""

from odeflow.fields.induction.base import GROUPS, LOSSES, InductionField, Schedule, Stage
from odeflow.fields.induction.copier import CopierFlow
from odeflow.fields.induction.finite_length import EmpiricalInduction, FiniteLengthFlow
from odeflow.fields.induction.population import PopulationFlow

#: ``flow=`` name -> field class of the induction-head family.
INDUCTION_FLOWS = {PopulationFlow.name: PopulationFlow, CopierFlow.name: CopierFlow,
                   FiniteLengthFlow.name: FiniteLengthFlow}

__all__ = ["GROUPS", "INDUCTION_FLOWS", "LOSSES", "CopierFlow",
           "EmpiricalInduction", "FiniteLengthFlow", "InductionField", "PopulationFlow",
           "Schedule", "Stage"]
