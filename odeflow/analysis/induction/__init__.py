"""Analysis of the induction-head family (spec section 10): closed forms and their checks.

- :mod:`odeflow.analysis.induction.closed_forms`: ``I_S``, ``J_S``, CF-IH1 (the
  stage-1 replicator) and CF-IH2 (the stage-3 mixture and ``a(t)`` asymptote),
  the numeric twins of ``derivations/cf_ih1_replicator.py`` and
  ``derivations/cf_ih2_classifier.py``.

Nothing here imports a Scan-and-Snap module.
"""

from odeflow.analysis.induction import closed_forms

__all__ = ["closed_forms"]
