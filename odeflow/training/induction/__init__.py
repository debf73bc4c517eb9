"""Real training of the induction-head family (``docs/induction.md``), beside its population flow.

- :mod:`~odeflow.training.induction.finite_length`: the finite-``L`` model of the
  family on seeded samples of sequences (:func:`sample_sequences`,
  :class:`EmpiricalInduction` with its exact empirical-loss gradient) and
  full-batch gradient descent, joint (:func:`joint`) or staged with the family's
  :class:`~odeflow.fields.induction.base.Schedule` of :class:`Stage`, on one sample
  (:func:`train_sample`) or on each seed's own (:func:`train`, the family's trainer).
- :mod:`~odeflow.training.induction.beside_flow`: the authors' protocol beside
  the population flow (:func:`compare`, :func:`agreement`, :func:`worst_agreement`), for
  ``odeflow reproduce induction``.
"""

from odeflow.training.induction.beside_flow import (
    Comparison,
    agreement,
    compare,
    rows,
    worst_agreement,
)
from odeflow.training.induction.finite_length import (
    GROUPS,
    LOSSES,
    PAPER_LENGTH,
    PAPER_RATE,
    PAPER_SEQUENCES,
    EmpiricalInduction,
    InductionRun,
    InductionSequences,
    Schedule,
    Stage,
    initial_parameters,
    joint,
    log_spaced_steps,
    sample_for,
    sample_sequences,
    train,
    train_sample,
)

__all__ = ["GROUPS", "LOSSES", "PAPER_LENGTH", "PAPER_RATE", "PAPER_SEQUENCES", "Comparison",
           "EmpiricalInduction", "InductionRun", "InductionSequences", "Schedule", "Stage",
           "agreement", "compare", "initial_parameters", "joint", "log_spaced_steps", "rows",
           "sample_for", "sample_sequences", "train", "train_sample", "worst_agreement"]
