"""Real training of the induction-head model at finite ``L`` (``docs/induction.md``).

The authors' experiments (``RPE/train_simplified.py`` of
gszfwsb/Unveiling-Induction-Heads) train the simplified two-layer transformer
by *full-batch* gradient descent, learning rate 1, on 9000 sequences of
length ``L = 100``. This module is that model and that training in numpy,
vectorised over sequences, beside the population flow of
:func:`odeflow.solve` (``flow="population"``, ``L -> infinity``).

Data (:func:`sample_sequences`, :mod:`odeflow.data.induction.sequences`)
    Per sequence a fresh kernel ``pi`` (every context row
    ``~ Dirichlet(alpha 1_d)``) or one fixed kernel (point-mass prior); the
    first ``n - 1`` tokens uniform, then the chain; inputs ``x_1 .. x_L`` and
    target ``x_{L+1}``. Context row ``r = sum_k x_{i-k} d^(n-1-k)`` (the
    offset-1 parent most significant), as in the family's data layer.

Model (:class:`EmpiricalInduction`)
    The finite-``L`` model, its keys, both losses and the exact gradient by hand
    live with the level that follows it (:mod:`odeflow.fields.induction.finite_length`)
    and are re-exported here; training descends the same code.

Time map
    Full-batch gradient descent at learning rate ``eta`` for ``k`` steps is the
    explicit Euler scheme, step ``dt = 1``, of the gradient flow whose rate is
    ``eta``; in the limit of small steps it follows that flow at ``t = k``,
    i.e. the unit-rate gradient flow at ``t = k * eta``. The runs record
    ``t = k`` (the flow is solved with the same rates); with the authors'
    ``lr = 1`` both readings coincide.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import check_count, check_seed, validate_finite  # noqa: F401
from odeflow.data.induction.sequences import (  # noqa: F401  (re-exported: the public API)
    PAPER_LENGTH,
    PAPER_SEQUENCES,
    InductionSequences,
    sample_for,
    sample_sequences,
)
from odeflow.errors import SolveError, ValidationError
from odeflow.fields.induction.base import GROUPS, LOSSES, Schedule, Stage  # noqa: F401
from odeflow.fields.induction.finite_length import (  # noqa: F401  (re-exported)
    TABLE_LIMIT,
    EmpiricalInduction,
    MergedKeys,
    check_subsets,
    merge_keys,
)
from odeflow.training import Runs, api, check_optimizer, old_forms, record_marks, run_seeds

#: The authors' learning rate.
PAPER_RATE = 1.0


# --------------------------------------------------------------------------- training

def joint(steps: int, rate: float = PAPER_RATE) -> Schedule:
    """All groups together at ``rate`` for ``steps`` steps: the authors' joint run
    (:meth:`Schedule.joint <odeflow.fields.induction.base.Schedule.joint>`)."""
    return Schedule.joint(check_count(steps, "steps"), rate)


def checked_stages(schedule) -> list[Stage]:
    """The family's schedule (a :class:`~odeflow.fields.induction.base.Schedule`, a list
    of :class:`~odeflow.fields.induction.base.Stage` or one Stage), checked, with every
    stage's duration a whole number of steps (``t = k``)."""
    if isinstance(schedule, Stage):
        schedule = [schedule]
    if not isinstance(schedule, Schedule):
        try:
            schedule = Schedule(list(schedule))
        except TypeError:
            raise ValidationError("schedule", f"must be a Schedule or a list of Stage, got "
                                  f"{type(schedule).__name__}") from None
    stages = schedule.checked(GROUPS)
    for i, stage in enumerate(stages):
        if not float(stage.duration).is_integer():
            raise ValidationError(f"schedule[{i}].duration", f"must be a whole number of "
                                  f"steps (GD step k is t = k), got {stage.duration!r}")
    return stages


@dataclass(frozen=True)
class InductionRun:
    """Recorded states of a full-batch gradient-descent run.

    Attributes
    ----------
    steps : ndarray of int, shape (n,)
        Step counts of the records (0 = the start).
    t : ndarray, shape (n,)
        Flow time of each record (``t = k``; see the module's time map).
    theta : ndarray, shape (n, P)
        The flat parameter vectors.
    loss : ndarray, shape (n,)
        The empirical mean training loss at each record.
    subsets : list of tuples
    heads : int
    loss_name : str
    """

    steps: np.ndarray
    t: np.ndarray
    theta: np.ndarray
    loss: np.ndarray
    subsets: list
    heads: int
    loss_name: str

    @property
    def a(self) -> np.ndarray:
        """The classifier weight ``a`` at each record, ``(n,)``."""
        return self.theta[:, -1]

    @property
    def subset_weights(self) -> np.ndarray:
        """``p_S = c_S^2 / sum c^2``, ``(n, #S)``."""
        c = self.theta[:, :len(self.subsets)]
        return c * c / (c * c).sum(axis=1, keepdims=True)

    @property
    def copier_logits(self) -> np.ndarray:
        """``w``, ``(n, H, H)``."""
        nS, H = len(self.subsets), self.heads
        return self.theta[:, nS:nS + H * H].reshape(-1, H, H)


def log_spaced_steps(total: int, count: int = 60) -> np.ndarray:
    """About ``count`` step marks from 0 to ``total``: 0, 1, then log-spaced (ints, distinct;
    :func:`odeflow.training.api.log_spaced_steps`)."""
    return api.log_spaced_steps(total, count)


def train_sample(model: EmpiricalInduction, theta0, schedule, *, record=None,
                 progress: bool | None = None, optimizer=None) -> InductionRun:
    """Full-batch gradient descent on the empirical loss of one sample, ``model``.

    :func:`train` draws the sample of each seed and calls this.

    Parameters
    ----------
    model : EmpiricalInduction
    theta0 : array_like
        Start, in the family's flat layout ``(c, w.ravel(), a)``
        (:mod:`odeflow.fields.induction.base`).
    schedule : Schedule, list of Stage or Stage
        The family's schedule (:mod:`odeflow.fields.induction.base`): each stage's
        rates (an omitted group is frozen) and its duration, here a number of steps
        (:func:`joint` for the joint run at lr 1). Stages run one after the other.
    record : None, int or sequence of int
        Global step counts to record: about 60 log-spaced (None,
        :func:`log_spaced_steps`), every ``n`` steps (an integer ``n``), or those steps
        (:func:`~odeflow.training.record_marks`); the start and the end always.
    progress : bool, optional
        A progress bar (default: when stderr is a terminal).
    optimizer : Optimizer, optional
        Plain gradient steps (None) or ``odeflow.Momentum``/``odeflow.Adam``: step
        ``k`` (counted over all stages) is ``theta <- theta - rate * update(grad)``
        with each group's rate of its stage; the optimiser's state is kept across
        stages (a frozen group's moments go on accumulating its gradient).

    Returns
    -------
    InductionRun
        ``t = k``: at learning rate ``eta`` step ``k`` is the gradient flow with rate
        ``eta`` at time ``k`` as the steps shrink (module docstring).
    """
    if not isinstance(model, EmpiricalInduction):
        raise ValidationError("model", f"must be an EmpiricalInduction, got "
                              f"{type(model).__name__}")
    theta = model.pack(*model.unpack(theta0))
    rule = check_optimizer(optimizer)
    state = rule.init_state(theta.shape)
    stages = checked_stages(schedule)
    total = sum(int(s.duration) for s in stages)
    wanted = set(int(m) for m in record_marks(record, total, log_spaced_steps))
    rows, losses, done = [], [], []
    bar = None
    if progress or (progress is None and sys.stderr.isatty()):
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="induction GD", unit="step", leave=False)
    step = 0
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for stage in stages:
                rate = np.zeros(model.size)
                for g, eta in stage.rates.items():
                    rate[model.group_mask((g,))] = eta
                for _ in range(int(stage.duration)):
                    value, grad = model.loss_and_gradient(theta)
                    if step in wanted:
                        done.append(step)
                        rows.append(theta.copy())
                        losses.append(value)
                    step += 1
                    rule.step(theta, grad, state, step, -rate)
                    if bar is not None:
                        bar.update()
            if step in wanted:
                done.append(step)
                rows.append(theta.copy())
                losses.append(model.loss(theta))
    except FloatingPointError as exc:
        raise SolveError(f"induction GD: floating-point error at step {step}: {exc} "
                         "(learning rate too large?)", {"failed_step": step}) from None
    finally:
        if bar is not None:
            bar.close()
    steps = np.asarray(done, dtype=np.int64)
    return InductionRun(steps, steps.astype(float), np.asarray(rows), np.asarray(losses),
                        list(model.subsets), model.heads, model.loss_name)


def _is_sample(args, options) -> bool:
    """Whether a call of :func:`train` is the old ``train(model, theta0, schedule)``."""
    return bool(args) and isinstance(args[0], EmpiricalInduction)


def schedule_of(steps, rates, schedule) -> tuple[int, Schedule]:
    """``(steps, schedule)`` of :func:`train`: ``schedule`` (``steps`` None or its total)
    or one stage of ``steps`` (default 100) at ``rates`` (None: every group at lr 1)."""
    if schedule is None:
        steps = check_count(100 if steps is None else steps, "steps")
        return steps, joint(steps) if rates is None else Schedule([Stage(rates, steps)])
    if rates is not None:
        raise ValidationError("rates", "the schedule's stages set the rates; give one of "
                              "rates and schedule")
    total = sum(int(s.duration) for s in checked_stages(schedule))
    if steps is not None and check_count(steps, "steps") != total:
        raise ValidationError("steps", f"the schedule runs {total} steps, got steps={steps}")
    return total, schedule


@old_forms(legacy=(_is_sample, train_sample, "train(model, theta0, schedule) is now "
                   "train_sample(model, theta0, schedule); train(data, steps=...) draws the "
                   "samples"))
def train(data, *, steps: int | None = None, seeds=1, start=None, optimizer=None,
          batch_size=None, seq_len: int = PAPER_LENGTH, sample_size: int = PAPER_SEQUENCES,
          seed: int = 0, record=None, progress: bool | None = None, rates=None,
          schedule=None, loss: str = "code") -> Runs:
    """Full-batch gradient descent on ``sample_size`` sequences per seed (the authors').

    The keywords are those of every family's ``train`` (``docs/api.md``, "Training
    and runs beside the flow").

    Parameters
    ----------
    data : InductionData
    steps : int, optional
        Gradient steps (flow time ``t = steps``); 100 by default, or the schedule's.
    seeds : int or sequence of int, default 1
        The seeds, or how many (``seed .. seed + seeds - 1``); seed ``s`` draws its
        run's training set with :func:`sample_for`.
    start : array_like, optional
        Flat parameters ``(c, w, a)``; the data model's init by default.
    optimizer : Optimizer, optional
        Plain gradient steps (default), ``odeflow.Momentum`` or ``odeflow.Adam``.
    batch_size : None
        Full batch: given, it is refused (the authors' runs are full-batch).
    seq_len, sample_size : int
        ``L`` and the sequences of each seed's training set (the authors: 100, 9000).
    seed : int, default 0
        The first seed when ``seeds`` is a count.
    record : None, int or sequence of int
        Recorded steps: about 60 log-spaced (None), every ``n`` steps, or those
        steps; the start and the end always.
    progress : bool, optional
    rates : float or mapping of group to rate, optional
        The groups' learning rates (an omitted group is frozen); every group at 1 by
        default (the authors' joint run).
    schedule : Schedule, optional
        Stages run one after the other, durations in steps, instead of ``rates``.
    loss : {"code", "nll"}

    Returns
    -------
    Runs
        One :class:`InductionRun` per seed.

    Notes
    -----
    Old form (one release, :class:`~odeflow.errors.RenamedWarning`):
    ``train(model, theta0, schedule)`` on one sample, now :func:`train_sample`.
    """
    from odeflow.data.induction import InductionData

    if not isinstance(data, InductionData):
        raise ValidationError("data", f"must be an InductionData, got {type(data).__name__}")
    if batch_size is not None:
        raise ValidationError("batch_size", "the induction runs are full-batch gradient "
                              "descent on the sample (give sample_size)")
    steps, schedule = schedule_of(steps, rates, schedule)
    marks = record_marks(record, steps, log_spaced_steps)
    seeds, runs = run_seeds(seeds, seed), []
    for s in seeds:
        model = EmpiricalInduction(sample_for(data, sample_size, seq_len, seed=s), data.heads,
                                   data.subsets, loss=loss)
        theta0 = start if start is not None else initial_parameters(
            model, w_plus=data.w_plus, w_minus=data.w_minus, c0=data.c0, a0=data.a0)
        runs.append(train_sample(model, theta0, schedule, record=marks, progress=progress,
                                 optimizer=optimizer))
    return Runs(runs, seeds)


def initial_parameters(model: EmpiricalInduction, *, w_plus: float = 3.0, w_minus: float = 0.1,
                       c0: float = 0.01, a0: float = 0.01) -> np.ndarray:
    """The code's init in the flat layout: ``w+`` on ``j = 0``, ``w-`` elsewhere, ``c = c0``
    on every subset, ``a = a0`` (the ``ih-paper`` defaults)."""
    values = {k: validate_finite(v, k) for k, v in
              (("w_plus", w_plus), ("w_minus", w_minus), ("c0", c0), ("a0", a0))}
    if values["c0"] == 0:
        raise ValidationError("c0", "must be non-zero (p_S = c_S^2 / sum c^2)")
    H = model.heads
    w = np.full((H, H), values["w_minus"])
    w[:, 0] = values["w_plus"]
    return model.pack(np.full(len(model.subsets), values["c0"]), w, values["a0"])

