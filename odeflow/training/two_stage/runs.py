"""Real training of the two-stage family: gradient steps on sampled prompts (``docs/two_stage.md``).

odeflow's own model of the two-stage setting (Gong et al. 2025 describe theirs only
in an abstract): the finite-``N`` attention of
:mod:`odeflow.fields.two_stage.finite_n`, trained by an odeflow optimiser
(:class:`~odeflow.fields.optimizers.GradientDescent` by default, or
:class:`~odeflow.fields.optimizers.Momentum`, :class:`~odeflow.fields.optimizers.Adam`)
on the mean loss of a batch of prompts,

.. math::

    \\theta_{k+1} = \\theta_k - \\eta \\, \\mathrm{update}(\\nabla \\hat L_k(\\theta_k)),
    \\qquad \\theta = (W_P, W_Q),

each step on ``batch_size`` prompts of ``seq_len`` examples, either freshly drawn
(``sample="fresh"``: online SGD on the population loss of ``N``-example prompts) or
taken from a fixed training set (``sample="fixed"``: ``batch_size >= sample_size``
is full-batch gradient descent, the Euler scheme of the ``finite_n`` level with the
same sample). Time map: step ``k`` is flow time ``t = eta * k`` for gradient steps,
``eta`` times the warm-up map for momentum (:meth:`Optimizer.flow_time`), ``eta * k``
for Adam (whose steps have no flow time; recorded as such in ``meta``).

Accuracy and loss per query kind are measured on held-out prompts with the real
finite-``N`` attention (:func:`held_out_scores`): ``count`` queries of each kind,
each with its own prompt of ``seq_len`` examples, drawn from their own seed.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from odeflow.data.checks import check_count, check_seed, validate_positive
from odeflow.data.two_stage import TwoStageData
from odeflow.errors import SolveError, ValidationError
from odeflow.fields.optimizers import Optimizer
from odeflow.fields.two_stage.finite_n import (
    KINDS,
    Prompts,
    flat_start,
    loss_and_gradient,
    margin_loss,
    sample_prompts,
)
from odeflow.training import Runs, api, check_optimizer, old_forms, record_marks, run_seeds

#: Ways a run draws its prompts.
SAMPLES = ("fresh", "fixed")
#: Held-out queries of each kind by default.
HELD_OUT = 10_000
#: Seed of the held-out prompts by default (apart from any run's small seeds).
HELD_OUT_SEED = 2**31 - 1
#: Largest ``records * prompts * seq_len`` entries :func:`held_out_scores` holds at once.
CHUNK_ENTRIES = 2**22


@dataclass(frozen=True)
class TwoStageRun:
    """One training run, recorded at chosen steps.

    Attributes
    ----------
    steps : ndarray of int
    t : ndarray
        Flow time of each recorded step (module docstring).
    W_P, W_Q : ndarray, shapes (n, d_P, d_P), (n, d_Q, d_Q)
    scores : dict
        Held-out ``accuracy_<kind>`` and ``loss_<kind>`` arrays over the records
        (:func:`held_out_scores`), empty when not measured.
    train_loss : ndarray
        The batch loss at each recorded step (before the step).
    meta : dict
        Settings, seed, optimiser, held-out size and seed.
    stats : dict
        Wall time and steps per second.
    """

    steps: np.ndarray
    t: np.ndarray
    W_P: np.ndarray
    W_Q: np.ndarray
    train_loss: np.ndarray
    scores: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def __getattr__(self, name):
        scores = self.__dict__.get("scores", {})
        if name in scores:
            return scores[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (held-out "
                             f"scores: {sorted(scores)})")

    @property
    def singular_values_p(self) -> np.ndarray:
        """Singular values of ``W_P`` at each record, descending, shape (n, d_P)."""
        return np.linalg.svd(self.W_P, compute_uv=False)

    @property
    def singular_values_q(self) -> np.ndarray:
        """Singular values of ``W_Q`` at each record, descending, shape (n, d_Q)."""
        return np.linalg.svd(self.W_Q, compute_uv=False)


def log_spaced_steps(steps: int, count: int = 40) -> np.ndarray:
    """``0`` and about ``count`` distinct log-spaced steps from 1 to ``steps`` (both kept;
    :func:`odeflow.training.api.log_spaced_steps`, ``steps >= 1``)."""
    return api.log_spaced_steps(check_count(steps, "steps"), count)


def flow_times(optimizer: Optimizer, steps: np.ndarray, eta: float) -> np.ndarray:
    """Flow time of each step: ``eta`` times the optimiser's map, or ``eta * k`` without one."""
    mapped = optimizer.flow_time(steps)
    return eta * np.asarray(steps if mapped is None else mapped, dtype=float)


class Batches:
    """The prompts of each step of a run, from one ``numpy.random.Generator``."""

    def __init__(self, data, sample: str, batch_size: int, seq_len: int, sample_size, rng):
        if sample not in SAMPLES:
            raise ValidationError("sample", f"must be one of {list(SAMPLES)}, got {sample!r:.80}")
        if sample == "fresh" and sample_size is not None:
            raise ValidationError("sample_size", "is the size of a fixed training set: only "
                                  "with sample='fixed' (sample='fresh' draws new prompts "
                                  "each step)")
        self.data, self.sample, self.rng = data, sample, rng
        self.batch_size, self.seq_len = batch_size, seq_len
        self.fixed = None
        if sample == "fixed":
            size = batch_size if sample_size is None else check_count(sample_size, "sample_size")
            self.fixed = sample_prompts(data, size, seq_len, rng)

    def next(self) -> Prompts:
        if self.fixed is None:
            return sample_prompts(self.data, self.batch_size, self.seq_len, self.rng)
        if self.batch_size >= self.fixed.count:
            return self.fixed
        pick = self.rng.choice(self.fixed.count, size=self.batch_size, replace=False)
        f = self.fixed
        return Prompts(f.x[pick], f.y[pick], f.query[pick], f.label[pick], f.kind[pick])


def train_run(data: TwoStageData, steps: int, eta: float = 0.1, *, seq_len: int = 64,
              batch_size: int = 500, sample: str = "fresh", sample_size: int | None = None,
              optimizer=None, seed: int = 0, record=None, held_out: int = HELD_OUT,
              held_out_seed: int = HELD_OUT_SEED, start=None,
              progress: bool | None = None) -> TwoStageRun:
    """Train ``W = diag(W_P, W_Q)`` by an optimiser on sampled prompts: one run.

    :func:`train` runs this once per seed.

    Parameters
    ----------
    data : TwoStageData
    steps : int
        Optimiser steps.
    eta : float, default 0.1
        Step size (flow time ``t = eta * k`` for gradient steps).
    seq_len : int, default 64
        ``N``, labelled examples per prompt (training and held-out).
    batch_size : int, default 500
        Prompts per step.
    sample : {"fresh", "fixed"}
        Fresh prompts every step, or minibatches of a fixed training set of
        ``sample_size`` prompts (default ``batch_size``: full-batch descent);
        ``sample_size`` with fresh prompts is refused naming it.
    optimizer : Optimizer, optional
        ``GradientDescent()`` (default), ``Momentum(mu)`` or ``Adam(...)``.
    seed : int
        Seed of the generator of the training prompts and minibatches.
    record : None, int or sequence of int
        Steps to record: about 40 log-spaced (None, :func:`log_spaced_steps`), every
        ``n`` steps with the start and the end (an integer ``n``), or exactly those
        steps (:func:`~odeflow.training.record_marks` with ``exact=True``).
    held_out : int, default 10000
        Held-out queries of each kind (0: no held-out scores).
    held_out_seed : int
    start : optional
        ``W(0)`` as for the family's fields (``sigma0 I`` by default).
    progress : bool, optional
        A tqdm bar (default: when stderr is a terminal).

    Raises
    ------
    ValidationError
        Naming the bad argument.
    SolveError
        When a step leaves the finite numbers (``eta`` too large).
    """
    if not isinstance(data, TwoStageData):
        raise ValidationError("data", f"must be a TwoStageData, got {type(data).__name__}")
    steps = check_count(steps, "steps")
    eta = validate_positive(eta, "eta")
    seq_len = check_count(seq_len, "seq_len")
    batch_size = check_count(batch_size, "batch_size")
    seed = check_seed(seed)
    rule = check_optimizer(optimizer)
    marks = record_marks(record, steps, log_spaced_steps, exact=True)
    batches = Batches(data, sample, batch_size, seq_len, sample_size,
                      np.random.default_rng(seed))
    theta = flat_start(data, start)
    W_P, W_Q, train_loss, wall = descend(data, theta, rule, eta, batches, steps, marks, progress)
    meta = {"flow": "train", "steps": steps, "eta": eta, "seq_len": seq_len,
            "batch_size": batch_size, "sample": sample,
            "sample_size": None if batches.fixed is None else batches.fixed.count,
            "optimizer": rule.describe(), "seed": seed, "held_out": held_out,
            "held_out_seed": held_out_seed, "time_map": "eta * k" if rule.flow_time(marks)
            is None else "eta * optimizer.flow_time(k)"}
    run = TwoStageRun(marks, flow_times(rule, marks, eta), W_P, W_Q, train_loss, {}, meta,
                      {"wall_time": wall, "steps_per_second": steps / wall if wall else 0.0})
    if held_out:
        scores = held_out_scores(data, W_P, W_Q, seq_len, held_out, held_out_seed)
        run = TwoStageRun(run.steps, run.t, W_P, W_Q, train_loss, scores, meta, run.stats)
    return run


#: What a two-stage ``train(data, steps=...)`` without ``seeds`` says when its ``loss`` is
#: read: the old keyword form returned one run, whose ``loss`` was the held-out loss.
LOSS_NOTE = ("'runs.loss' is the training-batch loss of each seed, shape (seeds, records): "
             "train(data, steps=...) returns the runs over seeds. The one run it returned "
             "before had 'run.loss' = the held-out loss, shape (records,): now "
             "'runs[0].loss' (and 'runs[0].train_loss' the batch loss). Give seeds= to "
             "train for the new form without this warning")


def _note_without_seeds(function):
    """:func:`train` given no ``seeds`` (maybe the old ``train(data, steps=..., eta=...)``
    of one run): its :class:`Runs` warns :data:`LOSS_NOTE` when ``loss`` is read."""
    @functools.wraps(function)
    def wrapper(*args, **options):
        runs = function(*args, **options)
        if "seeds" in options:
            return runs
        return Runs(runs.runs, runs.seeds, loss="train_loss", note=LOSS_NOTE)
    return wrapper


def _positional(args, options) -> bool:
    """Whether a call of :func:`train` is the old ``train(data, steps, eta, ...)``."""
    return len(args) > 1


@old_forms(legacy=(_positional, train_run, "train(data, steps, eta, ...) is now "
                   "train(data, steps=..., eta=...), which returns the runs over seeds; "
                   "train_run(data, steps, eta, ...) is one run"))
@_note_without_seeds
def train(data: TwoStageData, *, steps: int = 100, seeds=1, start=None, optimizer=None,
          batch_size: int = 500, seq_len: int = 64, sample_size: int | None = None,
          seed: int = 0, record=None, progress: bool | None = None, eta: float = 0.1,
          sample: str = "fresh", held_out: int = HELD_OUT,
          held_out_seed: int = HELD_OUT_SEED) -> Runs:
    """Train ``W = diag(W_P, W_Q)`` by an optimiser on sampled prompts, one run per seed.

    The keywords are those of every family's ``train`` (``docs/api.md``, "Training
    and runs beside the flow"); :func:`train_run` is one run.

    Parameters
    ----------
    data : TwoStageData
    steps : int, default 100
    seeds : int or sequence of int, default 1
        The seeds, or how many (``seed .. seed + seeds - 1``): each run's prompts and
        minibatches come from its seed.
    start : optional
        ``W(0)`` as for the family's fields (``sigma0 I`` by default).
    optimizer : Optimizer, optional
        ``GradientDescent()`` (default), ``Momentum(mu)`` or ``Adam(...)``.
    batch_size, seq_len : int
        Prompts per step (500) and ``N``, labelled examples per prompt (64).
    sample_size : int, optional
        With ``sample="fixed"``, the training set's prompts (default ``batch_size``);
        refused with ``sample="fresh"``.
    seed : int, default 0
        The first seed when ``seeds`` is a count.
    record : None, int or sequence of int
        Recorded steps: about 40 log-spaced (None), every ``n`` steps, or those steps;
        the start and the end always.
    progress : bool, optional
    eta : float, default 0.1
        Step size (flow time ``t = eta * k`` for gradient steps).
    sample : {"fresh", "fixed"}
    held_out, held_out_seed : int
        Held-out queries of each kind (0: none) and their seed, shared by the runs.

    Old form (one release, :class:`~odeflow.errors.RenamedWarning`):
    ``train(data, steps, eta, ...)``, one run, now :func:`train_run`. The old keyword
    form ``train(data, steps=..., eta=...)`` is this call with one seed: its ``loss``
    is now the training loss (the old run's was the held-out loss), so without
    ``seeds`` reading ``loss`` warns first (:data:`LOSS_NOTE`); ``steps``, ``t`` and
    the run's own attributes (``runs.W_P``, with a warning) read as before.

    Returns
    -------
    Runs
        One :class:`TwoStageRun` per seed (``loss``: their ``train_loss``).
    """
    steps = check_count(steps, "steps")
    marks = record_marks(record, steps, log_spaced_steps)
    seeds = run_seeds(seeds, seed)
    runs = [train_run(data, steps, eta, seq_len=seq_len, batch_size=batch_size, sample=sample,
                      sample_size=sample_size, optimizer=optimizer, seed=s, record=marks,
                      held_out=0, start=start, progress=progress) for s in seeds]
    if held_out:
        runs = scored(data, runs, seq_len, held_out, held_out_seed)
    return Runs(runs, seeds, loss="train_loss")


def scored(data, runs: list, seq_len: int, count: int, seed: int) -> list:
    """``runs`` with held-out scores, every run's records scored in one pass."""
    W_P = np.concatenate([r.W_P for r in runs])
    W_Q = np.concatenate([r.W_Q for r in runs])
    scores = held_out_scores(data, W_P, W_Q, seq_len, count, seed)
    out, at = [], 0
    for r in runs:
        n = r.t.size
        mine = {k: v[at:at + n] for k, v in scores.items()}
        meta = {**r.meta, "held_out": count, "held_out_seed": seed}
        out.append(TwoStageRun(r.steps, r.t, r.W_P, r.W_Q, r.train_loss, mine, meta, r.stats))
        at += n
    return out


def descend(data, theta, rule, eta, batches, steps, marks, progress):
    """The optimiser's loop; the recorded ``W_P``, ``W_Q``, batch losses and wall time."""
    d_p, d_q = data.d_p, data.d_q
    cut = d_p * d_p
    state = rule.init_state(theta.shape)
    rec = np.empty((marks.size, theta.size))
    losses = np.empty(marks.size)
    bar = None
    if progress or (progress is None and sys.stderr.isatty()):
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc="two-stage training", unit="step", leave=False)
    r, k = 0, 0
    start = time.perf_counter()
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for k in range(steps + 1):
                recorded = r < marks.size and marks[r] == k
                if k == steps and not recorded:
                    break
                value, g_p, g_q = loss_and_gradient(batches.next(),
                                                    theta[:cut].reshape(d_p, d_p),
                                                    theta[cut:].reshape(d_q, d_q), data.loss)
                if recorded:
                    rec[r], losses[r] = theta, value
                    r += 1
                if k == steps:
                    break
                rule.step(theta, np.concatenate([g_p.ravel(), g_q.ravel()]), state, k + 1,
                          -eta)
                if bar is not None:
                    bar.update()
    except FloatingPointError as exc:
        raise SolveError(f"two-stage training: floating-point error at step {k}: {exc} "
                         "(eta too large?)", {"failed_step": k}) from None
    finally:
        if bar is not None:
            bar.close()
    if not np.all(np.isfinite(rec)):
        raise SolveError("two-stage training left the finite numbers (eta too large?)",
                         {"failed_step": k})
    wall = time.perf_counter() - start
    return (rec[:, :cut].reshape(-1, d_p, d_p), rec[:, cut:].reshape(-1, d_q, d_q), losses,
            wall)


def held_out_scores(data: TwoStageData, W_P: np.ndarray, W_Q: np.ndarray, seq_len: int,
                    count: int = HELD_OUT, seed: int = HELD_OUT_SEED) -> dict:
    """Accuracy and loss per query kind of many weights on the same held-out prompts.

    Parameters
    ----------
    data : TwoStageData
    W_P, W_Q : ndarray, shapes (M, d_P, d_P), (M, d_Q, d_Q)
        The weights to score (e.g. every record of every run).
    seq_len : int
        ``N``, examples per held-out prompt.
    count : int
        Queries of each kind, each in its own prompt.
    seed : int
        Seed of the held-out prompts (drawn in chunks, kind by kind, from one generator).

    Returns
    -------
    dict
        ``accuracy_p_only``, ``accuracy_q_only``, ``accuracy_both``, ``loss_p_only``,
        ``loss_q_only``, ``loss_both``, each of shape (M,); ``accuracy`` and ``loss``,
        the mixtures with weights ``rho, rho, 1 - 2 rho``. A tie ``f = 0`` counts 1/2.
    """
    count = check_count(count, "count")
    seq_len = check_count(seq_len, "seq_len")
    W_P, W_Q = np.asarray(W_P, dtype=float), np.asarray(W_Q, dtype=float)
    M, d_p = W_P.shape[0], data.d_p
    W = np.zeros((M, d_p + data.d_q, d_p + data.d_q))
    W[:, :d_p, :d_p], W[:, d_p:, d_p:] = W_P, W_Q
    rng = np.random.default_rng(check_seed(seed, "held_out_seed"))
    chunk = max(1, min(count, CHUNK_ENTRIES // max(1, M * seq_len)))
    out = {}
    for k, name in enumerate(KINDS):
        right, loss, done = np.zeros(M), np.zeros(M), 0
        while done < count:
            n = min(chunk, count - done)
            prompts = sample_prompts(data, n, seq_len, rng, kind=k)
            v = np.einsum("mde,se->sdm", W, prompts.query)
            u = np.matmul(prompts.x, v)
            f = np.mean(prompts.y[:, :, None] * np.maximum(u, 0.0), axis=1).T
            margin = prompts.label * f
            right += np.sum(np.where(f == 0.0, 0.5, margin > 0.0), axis=1)
            loss += np.sum(margin_loss(margin, data.loss)[0], axis=1)
            done += n
        out[f"accuracy_{name}"], out[f"loss_{name}"] = right / count, loss / count
    weights = (data.rho, data.rho, 1.0 - 2.0 * data.rho)
    for what in ("accuracy", "loss"):
        out[what] = sum(w * out[f"{what}_{name}"] for w, name in zip(weights, KINDS, strict=True))
    return out
