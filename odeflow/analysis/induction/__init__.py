"""Analysis of the induction-head family (``docs/induction.md``): closed forms and their checks.

- :mod:`odeflow.analysis.induction.closed_forms`: ``I_S``, ``J_S``, CF-IH1 (the
  stage-1 replicator) and CF-IH2 (the stage-3 mixture and ``a(t)`` asymptote),
  the numeric twins of ``derivations/cf_ih1_replicator.py`` and
  ``derivations/cf_ih2_classifier.py``.
- :mod:`odeflow.analysis.induction.verify`: the family's checks of ``odeflow verify``
  (``I_S``, ``CF-IH1``, ``CF-IH2``), registered with
  :mod:`odeflow.analysis.check_registry`.

Nothing here imports a Scan-and-Snap module.
"""

from odeflow.analysis.induction import closed_forms, verify

__all__ = ["closed_forms", "verify"]
