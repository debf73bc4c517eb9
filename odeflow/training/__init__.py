"""Discrete-time training beside the flow (Lemma 5, Fig. 8, Sec. 8; ``docs/validation.md``).

- :func:`gradient_ascent`: Euler steps of the Level E field (population
  gradient ascent; ``dt = 1`` is plain gradient ascent with rates ``eta_Y, eta_Z``).
- :func:`train_sgd`: minibatch SGD on sampled finite-``T`` sequences.
- :func:`sgd_ensemble`: SGD over several seeds and the mean over seeds.
- :func:`train` (settings of a :class:`Protocol`): the paper's protocol (Sec. 8): SGD
  with momentum or Adam, separate rates for ``Y`` and ``Z``, zero or uniform
  start (un-lumped decoder), every seed in one array operation per step, and
  the warm-up time map ``t_k = [k - mu (1 - mu^k)/(1 - mu)]/(1 - mu)``.
- :func:`sample_batch`, :func:`batch_loss`, :func:`batch_loss_gradient`: the
  finite-``T`` model, exposed so the sampled gradient can be checked.
- :func:`optimizer_steps`, :func:`training_start`: the deterministic heavy ball
  or Adam on a level's exact gradient, and a run's random start
  (``docs/optimisers.md``).

:func:`odeflow.train` and :func:`odeflow.compare` (:mod:`odeflow.training.api`) call
the trainer and the comparison that a data model's family declares; :class:`Runs`,
:func:`run_seeds`, :func:`record_marks` and :func:`old_forms` are what the families'
trainers share. ``odeflow.training.train`` stays the Scan and Snap family's trainer
(:func:`odeflow.training.protocol.train`).

The rest are the Scan and Snap family's: they work on the lumped state of
:class:`odeflow.fields.ExactFlow` and return :class:`odeflow.Trajectory`
objects (un-lumped by its accessors). The induction-head family's full-batch
training is :mod:`odeflow.training.induction` (``docs/induction.md``).
"""

from odeflow.training.api import (
    Runs,
    check_optimizer,
    old_forms,
    record_marks,
    run_seeds,
)
from odeflow.training.batch import Batch, batch_loss, batch_loss_gradient, sample_batch
from odeflow.training.discrete import gradient_ascent, optimizer_steps, training_start
from odeflow.training.ensemble import SGDEnsemble, sgd_ensemble
from odeflow.training.protocol import Protocol, TrainingRun, train
from odeflow.training.sgd import train_sgd

__all__ = ["Batch", "Protocol", "Runs", "SGDEnsemble", "TrainingRun", "batch_loss",
           "batch_loss_gradient", "check_optimizer", "gradient_ascent",
           "old_forms", "optimizer_steps", "record_marks", "run_seeds", "sample_batch",
           "sgd_ensemble", "train", "train_sgd", "training_start"]
