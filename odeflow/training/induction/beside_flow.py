"""Finite-``L`` training of the induction-head model beside its population flow.

:func:`compare` runs the authors' protocol (``ih-paper`` by default: 9000
sequences of length ``L = 100`` per seed, full-batch gradient descent at
learning rate 1, all groups jointly, from the code's init ``w+ = 3,
w- = 0.1, c = a = 0.01``) with :mod:`odeflow.training.induction`, and solves
the population flow (``L -> infinity``, ``flow="population"``) from the same
init to the same end, evaluated at the run's recorded steps (``t = k``: the
time map of :mod:`odeflow.training.induction`), and beside it the finite-``L``
level (``flow="finite_l"``: the gradient flow of the same finite-``L`` loss on
its own sample of as many sequences, drawn with the first seed after the runs',
so independent of every run's training set).

The loss is the authors' training loss ``"code"`` (cross-entropy with the
classifier output ``y`` as logits) by default: under ``"nll"`` a few of the
9000 sampled sequences have a target token that occurs as the value of none of
their keys (``y_target = 0``, an infinite empirical loss; 4 of 9000 on seed 0),
so the finite-``L`` nll cannot be trained on the protocol's sample.

:func:`agreement` reads the comparison at chosen times (:data:`GOAL_TIMES` by
default) against an agreement criterion, by default that of ``docs/induction.md``:
``a(t)`` within 15% and the loss within 0.01 nats; :func:`worst_agreement` takes the
worst of the same errors over every recorded time from ``t = 5`` to ``1e4`` (the
criterion's interval, not only its table's times). The reproduction of the authors'
experiment that reads them is ``odeflow reproduce induction``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import check_count
from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError
from odeflow.fields.induction import FiniteLengthFlow
from odeflow.training import old_forms
from odeflow.training.induction.finite_length import (
    PAPER_LENGTH,
    PAPER_SEQUENCES,
    InductionRun,
    log_spaced_steps,
    train,
)

#: Default times of :func:`agreement` (``t = 5 .. 1e4``, steps).
GOAL_TIMES = (5, 10, 100, 1000, 10000)

#: Default criterion of :func:`agreement`: relative error of ``a`` and absolute error
#: of the loss (nats), those of ``docs/induction.md``.
A_TOLERANCE = 0.15
LOSS_TOLERANCE = 0.01


@dataclass(frozen=True)
class Comparison:
    """Runs (one per seed) and the population flow at the same times.

    Attributes
    ----------
    runs : list of InductionRun
        All recorded at the same steps.
    flow : trajectory
        :func:`odeflow.solve`'s population flow at ``t = runs[0].steps``.
    seeds : list of int
    loss : str
    sample_size, seq_len : int
        Sequences per seed and their length ``L``.
    finite_l : trajectory or None
        The finite-``L`` level (``flow="finite_l"``) at the same times, on its own
        sample (seed :attr:`finite_l_seed`); None when not solved.
    finite_l_seed : int or None
    flow_loss_at_length : ndarray or None
        The population flow's parameters scored by the finite-``L`` loss the runs
        report (``L = seq_len``), on the finite-``L`` level's sample (independent of
        every run's): the flow's prediction of the run's loss, apart from the
        ``L -> infinity`` loss it descends (``flow.loss``). None when not computed.
    """

    runs: list
    flow: object
    seeds: list
    loss: str
    sample_size: int
    seq_len: int
    finite_l: object = None
    finite_l_seed: int | None = None
    flow_loss_at_length: np.ndarray | None = None

    @property
    def steps(self) -> np.ndarray:
        """The recorded steps."""
        return self.runs[0].steps

    @property
    def t(self) -> np.ndarray:
        """The recorded flow times (``t = k``)."""
        return self.runs[0].t

    def rows(self) -> list[dict]:
        """One row per recorded step (:func:`rows`)."""
        return rows(self)

    @property
    def count(self) -> int:
        """Old name of :attr:`sample_size`."""
        return self.sample_size

    @property
    def length(self) -> int:
        """Old name of :attr:`seq_len`."""
        return self.seq_len

    def run_mean(self, name: str) -> np.ndarray:
        """Mean over seeds of a run accessor (``a``, ``loss``, ``subset_weights`` ...)."""
        return np.mean([np.asarray(getattr(r, name)) for r in self.runs], axis=0)

    def run_std(self, name: str) -> np.ndarray:
        return np.std([np.asarray(getattr(r, name)) for r in self.runs], axis=0)

    @property
    def mean_run(self) -> InductionRun:
        """The run averaged over seeds (parameters averaged), for figures."""
        r = self.runs[0]
        return InductionRun(r.steps, r.t, self.run_mean("theta"), self.run_mean("loss"),
                            r.subsets, r.heads, r.loss_name)


@old_forms(positional=("seeds",), renames={"count": "sample_size", "length": "seq_len"})
def compare(data=None, *, seeds=1, steps: int = 100, seq_len: int = PAPER_LENGTH,
            sample_size: int = PAPER_SEQUENCES, seed: int = 0, loss: str = "code",
            record=None, progress: bool | None = None, finite_l: bool = True) -> Comparison:
    """Joint full-batch GD (lr 1) on ``sample_size`` sequences per seed beside the
    population flow.

    The keywords are those of every family's ``compare`` (``docs/api.md``, "Training
    and runs beside the flow").

    Parameters
    ----------
    data : InductionData, optional
        ``ih-paper`` by default; its init (``w_plus, w_minus, c0, a0``) starts both.
    seeds : int or list of int
        A count (seeds ``seed .. seed + seeds - 1``) or the seeds; seed ``s`` samples
        the training set with :func:`~odeflow.training.induction.sample_for`.
    steps : int
        Gradient steps (flow time ``t = steps``).
    seq_len, sample_size : int
        ``L`` and the sequences per seed (the authors: 100, 9000).
    seed : int, default 0
        The first seed when ``seeds`` is a count.
    loss : {"code", "nll"}
    record : None, int or sequence of int
        Steps to record (every ``n`` steps, or those steps); by default about 60
        log-spaced ones plus :data:`GOAL_TIMES`.
    progress : bool, optional
        Progress bars of the runs and of the solve.
    finite_l : bool, default True
        Also solve the finite-``L`` level (``sample_size`` sequences of length ``seq_len``,
        sample seed ``max(seeds) + 1``: none of the runs' training sets), and score the
        population flow's parameters by the finite-``L`` loss on that sample
        (:attr:`Comparison.flow_loss_at_length`).

    Notes
    -----
    Old forms (one release, :class:`~odeflow.errors.RenamedWarning`): ``seeds``
    positionally, ``count=`` (``sample_size``), ``length=`` (``seq_len``).
    """
    from odeflow.solver import solve

    if data is None:
        data = InductionData.preset("ih-paper")
    elif not isinstance(data, InductionData):
        raise ValidationError("data", f"must be an InductionData, got {type(data).__name__}")
    steps = check_count(steps, "steps")
    if record is None:
        record = np.union1d(log_spaced_steps(steps),
                            [t for t in GOAL_TIMES if t <= steps]).astype(np.int64)
    result = train(data, steps=steps, seeds=seeds, seed=seed, seq_len=seq_len,
                   sample_size=sample_size, loss=loss, record=record, progress=progress)
    runs, seeds = result.runs, result.seeds
    t_eval = runs[0].t
    flow = solve(data, flow="population", loss=loss, t_span=(0.0, float(steps)),
                         t_eval=t_eval, progress=progress)
    level_l, level_l_seed, at_length = None, None, None
    if finite_l:
        level_l_seed = max(seeds) + 1
        level_l = solve(data, flow="finite_l", loss=loss, seq_len=seq_len,
                        sample_size=sample_size, seed=level_l_seed,
                        t_span=(0.0, float(steps)), t_eval=t_eval, progress=progress)
        scorer = FiniteLengthFlow(data, loss=loss, seq_len=seq_len, sample_size=sample_size,
                                  seed=level_l_seed)
        at_length = np.array([scorer.loss(flow.parameters(j)) for j in range(flow.t.size)])
    return Comparison(runs, flow, seeds, loss, sample_size, seq_len, level_l, level_l_seed,
                      at_length)


def rows(comp: Comparison) -> list[dict]:
    """One row per recorded step: ``a``, loss and every ``p_S`` of the runs and the flow
    (then ``a_finite_l``, ``loss_finite_l`` of the finite-``L`` level when solved)."""
    a_run, a_sd = comp.run_mean("a"), comp.run_std("a")
    loss_run, loss_sd = comp.run_mean("loss"), comp.run_std("loss")
    p_run = comp.run_mean("subset_weights")
    flow = comp.flow
    p_flow = np.asarray(flow.subset_weights)
    names = [subset_name(s) for s in comp.runs[0].subsets]
    out = []
    for j, k in enumerate(comp.steps):
        row = {"step": int(k), "t": float(comp.runs[0].t[j]),
               "a_run": float(a_run[j]), "a_run_sd": float(a_sd[j]),
               "a_flow": float(flow.a[j]),
               "loss_run": float(loss_run[j]), "loss_run_sd": float(loss_sd[j]),
               "loss_flow": float(flow.loss[j])}
        for i, name in enumerate(names):
            row[f"p_run_{name}"] = float(p_run[j, i])
            row[f"p_flow_{name}"] = float(p_flow[j, i])
        if comp.finite_l is not None:
            row["a_finite_l"] = float(comp.finite_l.a[j])
            row["loss_finite_l"] = float(comp.finite_l.loss[j])
        if comp.flow_loss_at_length is not None:
            row["loss_flow_at_length"] = float(comp.flow_loss_at_length[j])
        out.append(row)
    return out


def subset_name(subset) -> str:
    """Column-safe name of a subset: ``S_12`` for ``(1, 2)``, ``S_`` for the empty set."""
    return "S_" + "".join(str(h) for h in subset)


def a_error(a_run, a):
    """The error of ``a``: ``|a_run - a| / |a|``, relative to the level's value;
    elementwise."""
    return np.abs(a_run - a) / np.abs(a)


def loss_error(loss_run, loss):
    """The error of the loss: ``|loss_run - loss|`` (nats); elementwise."""
    return np.abs(loss_run - loss)


def _a_columns(name: str, value, a_run, suffix: str, tolerance: float) -> dict:
    """``{name: a, a_rel_err<suffix>: a_error, a_ok<suffix>: within tolerance}``."""
    value = float(value)
    rel = a_error(a_run, value)
    return {name: value, f"a_rel_err{suffix}": float(rel),
            f"a_ok{suffix}": bool(rel <= tolerance)}


def _loss_columns(name: str, value, loss_run, suffix: str, tolerance: float) -> dict:
    """``{name: loss, loss_abs_err<suffix>: loss_error, loss_ok<suffix>: within
    tolerance}``."""
    value = float(value)
    err = loss_error(loss_run, value)
    return {name: value, f"loss_abs_err{suffix}": float(err),
            f"loss_ok{suffix}": bool(err <= tolerance)}


def agreement(comp: Comparison, times=GOAL_TIMES, *, a_tolerance: float = A_TOLERANCE,
              loss_tolerance: float = LOSS_TOLERANCE) -> list[dict]:
    """The agreement table: ``a`` and loss of run and flow at ``times`` (those recorded).

    ``a_rel_err = |a_run - a_flow| / |a_flow|`` (``a_ok``: at most ``a_tolerance``,
    relative), ``loss_abs_err = |loss_run - loss_flow|`` (``loss_ok``: at most
    ``loss_tolerance``, nats); the same for the finite-``L`` level when solved (columns
    ending ``_finite_l``), and for the population flow's parameters scored at the runs'
    ``L`` (``loss_flow_at_length``, ``loss_abs_err_at_length``, ``loss_ok_at_length``).
    """
    table = []
    by_step = {int(k): j for j, k in enumerate(comp.steps)}
    a_run, loss_run = comp.run_mean("a"), comp.run_mean("loss")
    for t in times:
        j = by_step.get(int(t))
        if j is None:
            continue
        row = {"t": int(t), "a_run": float(a_run[j]),
               **_a_columns("a_flow", comp.flow.a[j], a_run[j], "", a_tolerance),
               "loss_run": float(loss_run[j]),
               **_loss_columns("loss_flow", comp.flow.loss[j], loss_run[j], "",
                               loss_tolerance)}
        if comp.finite_l is not None:
            row.update(_a_columns("a_finite_l", comp.finite_l.a[j], a_run[j], "_finite_l",
                                  a_tolerance))
            row.update(_loss_columns("loss_finite_l", comp.finite_l.loss[j], loss_run[j],
                                     "_finite_l", loss_tolerance))
        if comp.flow_loss_at_length is not None:
            row.update(_loss_columns("loss_flow_at_length", comp.flow_loss_at_length[j],
                                     loss_run[j], "_at_length", loss_tolerance))
        table.append(row)
    return table


def worst_agreement(comp: Comparison, t_from: float = GOAL_TIMES[0],
                    t_to: float = GOAL_TIMES[-1], *, a_tolerance: float = A_TOLERANCE,
                    loss_tolerance: float = LOSS_TOLERANCE) -> list[dict]:
    """The agreement over an interval: per level, the worst errors at every recorded time.

    The criterion of ``docs/induction.md`` holds "from ``t = 5`` to ``1e4``";
    :func:`agreement` reads five of those times, this every recorded step ``k`` with
    ``t_from <= k <= t_to``. One row
    per level (``population``: the flow's own ``L -> infinity`` loss; ``population at
    L``: its parameters scored by the runs' finite-``L`` loss, when computed;
    ``finite_l``, when solved), with

    - ``a_rel_err`` = max ``|a_run - a| / |a|`` (the table's convention, relative to the
      level) and the time it occurs, ``a_rel_err_t``; ``a_rel_err_to_run`` = max ``|a_run -
      a| / |a_run|`` (relative to the run) and ``a_rel_err_to_run_t``;
    - ``loss_abs_err`` = max ``|loss_run - loss|`` and ``loss_abs_err_t``;
    - ``a_misses``, ``loss_misses``: how many of the ``times`` recorded times exceed
      ``a_tolerance`` (the table's convention) and ``loss_tolerance``.

    Raises
    ------
    ValidationError
        (field ``t_from``) when no recorded step lies in ``[t_from, t_to]``.
    """
    steps = np.asarray(comp.steps, dtype=float)
    keep = (steps >= t_from) & (steps <= t_to)
    if not keep.any():
        raise ValidationError("t_from", f"no recorded step lies in [{t_from:g}, {t_to:g}]")
    t = steps[keep]
    a_run, loss_run = comp.run_mean("a")[keep], comp.run_mean("loss")[keep]
    levels = [("population", comp.flow.a, comp.flow.loss)]
    if comp.flow_loss_at_length is not None:
        levels.append(("population at L", comp.flow.a, comp.flow_loss_at_length))
    if comp.finite_l is not None:
        levels.append(("finite_l", comp.finite_l.a, comp.finite_l.loss))
    out = []
    for name, a, loss in levels:
        a, loss = np.asarray(a)[keep], np.asarray(loss)[keep]
        to_level = a_error(a_run, a)
        to_run = np.abs(a_run - a) / np.abs(a_run)
        loss_err = loss_error(loss_run, loss)
        out.append({"level": name, "t_from": float(t[0]), "t_to": float(t[-1]),
                    "times": int(t.size),
                    "a_rel_err": float(to_level.max()),
                    "a_rel_err_t": float(t[np.argmax(to_level)]),
                    "a_rel_err_to_run": float(to_run.max()),
                    "a_rel_err_to_run_t": float(t[np.argmax(to_run)]),
                    "a_misses": int(np.sum(to_level > a_tolerance)),
                    "loss_abs_err": float(loss_err.max()),
                    "loss_abs_err_t": float(t[np.argmax(loss_err)]),
                    "loss_misses": int(np.sum(loss_err > loss_tolerance))})
    return out
