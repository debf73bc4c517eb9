"""Real training of the two-stage family beside its population flow (``docs/two_stage.md``).

odeflow's own model of the two-stage setting of Gong et al. 2025 (only the paper's
abstract is readable; nothing here is the paper's protocol).

- :mod:`~odeflow.training.two_stage.runs`: gradient descent, SGD, momentum or Adam
  (odeflow's optimiser classes) on sampled prompts of the finite-``N`` attention
  (:func:`train`, one run per seed; :func:`train_run`, one run), and accuracy and
  loss per query kind on held-out prompts (:func:`held_out_scores`).
- :mod:`~odeflow.training.two_stage.beside_flow`: runs over seeds beside the
  population flow at log-spaced times, the largest accuracy gap and how it shrinks
  with ``N`` (:func:`compare`, :func:`gap_by_length`).
"""

from odeflow.training.two_stage.beside_flow import (
    Comparison,
    compare,
    gap_by_length,
    population_flow,
)
from odeflow.training.two_stage.runs import (
    HELD_OUT,
    HELD_OUT_SEED,
    SAMPLES,
    TwoStageRun,
    held_out_scores,
    log_spaced_steps,
    train,
    train_run,
)

__all__ = ["HELD_OUT", "HELD_OUT_SEED", "SAMPLES", "Comparison", "TwoStageRun", "compare",
           "gap_by_length", "held_out_scores", "log_spaced_steps", "population_flow", "train",
           "train_run"]
