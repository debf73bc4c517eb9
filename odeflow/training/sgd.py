"""Real training: minibatch SGD on sampled finite-``T`` sequences (``docs/validation.md``).

Each step draws ``batch_size`` sequences (:mod:`odeflow.training.batch`) and
takes a step on the lumped ``Y`` and ``Z`` against the gradient of the mean
cross-entropy, i.e. ascent on the mean log-likelihood with rates ``eta_Y``,
``eta_Z``, optionally with heavy-ball momentum

.. math::

    v_{k+1} = \\mu v_k + \\nabla \\ell_k, \\qquad \\theta_{k+1} = \\theta_k - \\eta v_{k+1}.

Time convention: step ``k`` is flow time
``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)``, the warm-up map
(:func:`odeflow.training.common.warmup_time`; ``t = k`` without momentum): from
a zero velocity in a constant gradient the heavy-ball velocity after ``j`` steps
is ``g (1 - mu^j) / (1 - mu)``. The expected batch
gradient tends to the population gradient of Eqn 2 as ``T -> inf``, so as
``T`` and the batch grow and the steps shrink, SGD approaches Level E
(Eqns 3-4). The cost of a step is ``O(B T + B K L)``, independent of ``M``.
"""

from __future__ import annotations

import time

import numpy as np

from odeflow.data import DataModel, validate_positive
from odeflow.errors import ValidationError
from odeflow.fields.base import START_PARTS, initial_logits, split_start
from odeflow.fields.optimizers import GradientDescent, Momentum
from odeflow.results import Trajectory
from odeflow.training.api import SGD_OLD_FORMS, old_forms, record_marks
from odeflow.training.batch import Batch, LumpedLayout, stacked_loss_and_gradient
from odeflow.training.common import (
    StepProgress,
    check_count,
    check_fraction,
    check_seed,
    default_record,
    diverged,
    warmup_time,
)


def check_sgd_arguments(data, eta_y, eta_z, steps, batch_size, seq_len, optimizer) -> dict:
    """Validated SGD settings; a :class:`ValidationError` names any bad field.

    ``settings["momentum"]`` is the heavy-ball ``mu`` of ``optimizer`` (0: plain steps).
    """
    if not isinstance(data, DataModel):
        raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
    return {"eta_y": validate_positive(eta_y, "eta_y"),
            "eta_z": validate_positive(eta_z, "eta_z"),
            "steps": check_count(steps, "steps"),
            "batch_size": check_count(batch_size, "batch_size"),
            "seq_len": check_count(seq_len, "seq_len", minimum=2),
            "momentum": check_fraction(_heavy_ball(optimizer), "optimizer")}


def _heavy_ball(optimizer) -> float:
    """``mu`` of ``optimizer``: ``odeflow.Momentum(mu)``; 0 for ``GradientDescent()`` or
    None (plain steps)."""
    if optimizer is None or isinstance(optimizer, GradientDescent):
        return 0.0
    if isinstance(optimizer, Momentum):
        return optimizer.mu
    raise ValidationError("optimizer", f"SGD takes plain steps (None, GradientDescent()) or "
                          f"the heavy ball (odeflow.Momentum(mu)), got "
                          f"{type(optimizer).__name__} (Adam trains with odeflow.train(data, "
                          "optimizer=odeflow.Adam()))")


def sgd_start_logits(data, start) -> np.ndarray:
    """``Z(0)`` of an SGD run from ``start = (None, z0)`` (:func:`initial_logits`); the
    lumped decoder starts at zero, so a ``y0`` is refused naming ``start``."""
    y0, z0 = split_start(start)
    if y0 is not None:
        raise ValidationError("start", "SGD starts from Y(0) = 0 (its lumped decoder); give "
                              "start=(None, z0), or train with odeflow.train for a random "
                              "decoder start")
    return initial_logits(data, z0)


def run_sgd(data, settings: dict, seeds, record=None, start=None,
            progress: bool | None = None) -> list[Trajectory]:
    """Advance one SGD run per seed together; one :class:`Trajectory` per seed.

    Runs share no randomness: run ``i`` draws every batch from
    ``numpy.random.default_rng(seeds[i])``, so it is identical to a run on its
    own with that seed. Only the array operations are shared. ``record`` and
    ``start``: as for :func:`train_sgd`.
    """
    seeds = [check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]
    if not seeds:
        raise ValidationError("seeds", "needs at least one seed")
    layout = LumpedLayout(data)
    steps, B, T = settings["steps"], settings["batch_size"], settings["seq_len"]
    eta_y, eta_z, mu = settings["eta_y"], settings["eta_z"], settings["momentum"]
    marks = record_marks(record, steps, default=default_record)
    S = len(seeds)
    z_base = sgd_start_logits(data, start)
    Y = np.zeros((S, layout.R, layout.L))
    Z = np.repeat(z_base[None][:, :, data.active_tokens], S, axis=0)
    rule = Momentum(mu) if mu else GradientDescent()  # descent on the loss: rate -eta
    state_Y, state_Z = rule.init_state(Y.shape), rule.init_state(Z.shape)
    rec_Y = np.empty((marks.size, *Y.shape))
    rec_Z = np.empty((marks.size, *Z.shape))
    rec_Y[0], rec_Z[0] = Y, Z
    rngs = [np.random.default_rng(s) for s in seeds]
    bar = StepProgress(steps, progress, "sgd" if S == 1 else f"sgd x{S}")
    began = time.perf_counter()
    r = 1
    k = 0
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for k in range(steps):
                drawn = [layout.sample(rng, B, T) for rng in rngs]
                batch = Batch(np.stack([b.classes for b in drawn]),
                              np.stack([b.tokens for b in drawn]))
                _, grad_Y, grad_Z = stacked_loss_and_gradient(layout, Y, Z, batch)
                rule.step(Y, grad_Y, state_Y, k + 1, -eta_y)
                rule.step(Z, grad_Z, state_Z, k + 1, -eta_z)
                if k + 1 == marks[r]:
                    rec_Y[r], rec_Z[r] = Y, Z
                    r += 1
                bar.update()
    except FloatingPointError as exc:
        raise diverged("sgd", k, exc) from None
    finally:
        bar.close()
    wall = time.perf_counter() - began
    rate = steps / wall if wall > 0 else float("inf")
    stats = {"method": "sgd", "steps": steps, "wall_time": wall, "runs_together": S,
             "steps_per_second": rate, "run_steps_per_second": rate * S}
    return [Trajectory(data, warmup_time(marks, mu), rec_Z[:, i], z_base,
                       decoder_lumped=rec_Y[:, i], stats=dict(stats),
                       meta={"flow": "sgd", **settings, "seed": seed,
                             "record_every": _every(record, marks),
                             "recorded_steps": marks.tolist()})
            for i, seed in enumerate(seeds)]


def _every(record, marks: np.ndarray):
    """The interval of ``record`` for ``meta["record_every"]`` (None for listed steps)."""
    return None if record is not None and np.ndim(record) else int(marks[1] - marks[0])


@old_forms(**{**SGD_OLD_FORMS, "renames": {**SGD_OLD_FORMS["renames"], **START_PARTS}})
def train_sgd(data, eta_y: float, eta_z: float, steps: int, batch_size: int, seq_len: int,
              optimizer=None, seed: int = 0, record=None, progress: bool | None = None,
              start=None) -> Trajectory:
    """Train the 1-layer model by minibatch SGD on sampled sequences.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Step sizes of the decoder ``Y`` and of the attention logits ``Z``.
    steps : int
        Number of SGD steps; step ``k`` is recorded at flow time ``t_k`` (the warm-up map).
    batch_size : int
        Sequences per step, ``>= 1``.
    seq_len : int
        ``T >= 2``: ``T - 1`` contextual tokens and the query token.
    optimizer : odeflow.Momentum or GradientDescent, optional
        Plain steps (None, ``GradientDescent()``) or the heavy ball
        ``odeflow.Momentum(mu)``, ``mu`` in ``[0, 1)`` (only its ``mu`` enters the steps).
    seed : int, default 0
        Seed of the ``numpy.random.Generator`` drawing the batches.
    record : int or sequence of int, optional
        Keep the state every this many steps, or at those steps (and always the
        start and the last); by default about 100 records.
    progress : bool, optional
        Show a tqdm bar; by default only when stderr is a terminal.
    start : (None, z0), optional
        Initial logits ``Z(0)`` (zero by default), as for :func:`odeflow.solve`; the
        decoder starts at zero (the part ``y0`` is None).

    Returns
    -------
    Trajectory
        ``meta`` holds ``flow="sgd"``, the learning rates, ``seed``,
        ``batch_size``, ``seq_len``, ``momentum`` and ``steps``; ``stats`` the
        wall time and steps per second.

    Raises
    ------
    ValidationError
        For invalid input, naming the field.
    SolveError
        When a step leaves the finite numbers (learning rates too large).

    Notes
    -----
    Old keywords (one release, warning :class:`~odeflow.errors.RenamedWarning`):
    ``momentum=mu`` (``optimizer=odeflow.Momentum(mu)``; a number in the place of
    ``optimizer`` too), ``record_every=`` (``record``), ``z0=`` (``start=(None, z0)``).
    """
    settings = check_sgd_arguments(data, eta_y, eta_z, steps, batch_size, seq_len, optimizer)
    return run_sgd(data, settings, [check_seed(seed)], record=record, start=start,
                   progress=progress)[0]
