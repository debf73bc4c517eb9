"""Training of the two-stage family beside its population flow (``docs/two_stage.md``).

:func:`compare` trains one run per seed (:func:`~odeflow.training.two_stage.runs.train`:
gradient steps of size ``eta`` on prompts of ``seq_len`` examples), scores every
run's recorded weights on the same held-out prompts with the finite-``N``
attention, and solves the population flow (``N -> infinity``, ``flow="population"``)
from the same start at the runs' flow times ``t = eta * k``. Its
:meth:`Comparison.gaps` is the largest distance, over the recorded times, between the
runs' mean accuracy on each query kind and the flow's population accuracy;
:func:`gap_by_length` repeats it for several ``N`` (the finite-``N`` attention's
noise, of order ``1/sqrt(N)`` in ``f``, is what keeps a run's accuracy from the flow's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import check_count
from odeflow.data.two_stage import TwoStageData
from odeflow.errors import ValidationError
from odeflow.fields.two_stage.finite_n import KINDS
from odeflow.fields.two_stage.population import PopulationFlow
from odeflow.training import old_forms, record_marks
from odeflow.training.two_stage.runs import (
    HELD_OUT,
    HELD_OUT_SEED,
    log_spaced_steps,
    train,
)

#: Defaults of :func:`compare`: step size, steps (flow time ``eta * steps``), ``N``,
#: prompts per step and recorded times.
ETA = 0.2
STEPS = 1000
SEQ_LEN = 64
BATCH_SIZE = 200
RECORDS = 40


@dataclass(frozen=True)
class Comparison:
    """Runs (one per seed, recorded at the same steps) and the population flow.

    Attributes
    ----------
    runs : list of TwoStageRun
        With held-out scores (``accuracy_p_only`` ...).
    flow : TwoStageTrajectory
        The population flow at ``runs[0].t``.
    seeds : list of int
    settings : dict
        The training settings (``eta``, ``seq_len``, ``batch_size``, ``sample``, ...).
    flow_all : TwoStageTrajectory or None
        The same flow at the runs' times and at every time of ``flow_times`` given to
        :func:`compare` (sorted), e.g. a finer grid for stage times and spectra.
    """

    runs: list
    flow: object
    seeds: list
    settings: dict
    flow_all: object = None

    @property
    def t(self) -> np.ndarray:
        """The recorded flow times."""
        return self.runs[0].t

    def run_mean(self, name: str) -> np.ndarray:
        """Mean over seeds of a run's series (``accuracy_q_only``, ``loss_p_only`` ...)."""
        return np.mean([np.asarray(getattr(r, name)) for r in self.runs], axis=0)

    def run_std(self, name: str) -> np.ndarray:
        """Standard deviation over seeds (``ddof = 0``) of a run's series."""
        return np.std([np.asarray(getattr(r, name)) for r in self.runs], axis=0)

    def gaps(self) -> dict:
        """Per query kind, the largest ``|run mean - flow|`` accuracy over the recorded
        times and the time where it is: ``{kind: {"gap": ..., "t": ...}}``."""
        out = {}
        for kind in KINDS:
            name = f"accuracy_{kind}"
            diff = np.abs(self.run_mean(name) - np.asarray(getattr(self.flow, name)))
            j = int(np.argmax(diff))
            out[kind] = {"gap": float(diff[j]), "t": float(self.t[j])}
        return out

    def rows(self) -> list[dict]:
        """One row per recorded time: the flow's and the runs' accuracy per kind (mean, std)."""
        out = []
        for j, t in enumerate(self.t):
            row = {"t": float(t)}
            for kind in KINDS:
                row[f"flow_acc_{kind}"] = float(getattr(self.flow, f"accuracy_{kind}")[j])
            for kind in KINDS:
                row[f"run_acc_{kind}_mean"] = float(self.run_mean(f"accuracy_{kind}")[j])
            for kind in KINDS:
                row[f"run_acc_{kind}_std"] = float(self.run_std(f"accuracy_{kind}")[j])
            out.append(row)
        return out


def population_flow(data: TwoStageData, t_eval: np.ndarray, progress: bool | None = None,
                    start=None):
    """The population flow of ``data`` from ``start`` (``sigma0 I`` by default) at the
    times ``t_eval``:
    :func:`odeflow.solve` with ``flow="population"`` and the field's explicit method
    (RK45; the flow is not stiff over the stages)."""
    from odeflow.solver import solve

    t_eval = np.asarray(t_eval, dtype=float)
    return solve(data, flow="population", t_span=(0.0, float(t_eval[-1])), t_eval=t_eval,
                 method=getattr(PopulationFlow, "preferred_method", "RK45"), progress=progress,
                 start=start)


def _records(value, options: dict) -> dict:
    """'record': records=n is record=log_spaced_steps(steps, n)"""
    return {"record": log_spaced_steps(check_count(options.get("steps", STEPS), "steps"),
                                       value)}


@old_forms(positional=("seeds",), translate={"records": _records})
def compare(data: TwoStageData | None = None, *, seeds=5, steps: int = STEPS,
            eta: float = ETA, seq_len: int = SEQ_LEN, batch_size: int = BATCH_SIZE,
            sample: str = "fresh", sample_size: int | None = None, optimizer=None,
            seed: int = 0, start=None, record=None, held_out: int = HELD_OUT,
            held_out_seed: int = HELD_OUT_SEED, flow_times=None, flow=None,
            progress: bool | None = None) -> Comparison:
    """Runs over ``seeds`` beside the population flow, at the same recorded times.

    The keywords are those of every family's ``compare`` (``docs/api.md``, "Training
    and runs beside the flow").

    Parameters
    ----------
    data : TwoStageData, optional
        ``ts-default`` by default.
    seeds : int or list of int
        A count (seeds ``seed .. seed + seeds - 1``) or the seeds of the runs' prompts.
    steps, eta : int, float
        Steps and step size: the runs end at flow time ``eta * steps``.
    seq_len, batch_size, sample, sample_size, optimizer, seed, start
        As for :func:`~odeflow.training.two_stage.runs.train`; the flow starts from
        ``start`` too.
    record : None, int or sequence of int
        Recorded steps: about 40 log-spaced ones from 1 to ``steps`` and step 0 (None),
        every ``n`` steps, or those steps (the start and the end always).
    held_out, held_out_seed : int
        Held-out queries of each kind, shared by every run, and their seed.
    flow_times : sequence of float, optional
        More times in ``[0, eta * steps]`` at which to solve the flow
        (:attr:`Comparison.flow_all`).
    flow : TwoStageTrajectory, optional
        The population flow already solved at (at least) the runs' times, e.g. another
        comparison's :attr:`~Comparison.flow_all` (it does not depend on ``N``); used
        instead of solving it again.
    progress : bool, optional

    Old forms (one release, :class:`~odeflow.errors.RenamedWarning`): ``seeds``
    positionally, ``records=n`` (``record=log_spaced_steps(steps, n)``).

    Returns
    -------
    Comparison
    """
    if data is None:
        data = TwoStageData.preset("ts-default")
    elif not isinstance(data, TwoStageData):
        raise ValidationError("data", f"must be a TwoStageData, got {type(data).__name__}")
    steps = check_count(steps, "steps")
    record = record_marks(record, steps, lambda n: log_spaced_steps(n, RECORDS))
    settings = {"steps": steps, "eta": eta, "seq_len": seq_len, "batch_size": batch_size,
                "sample": sample, "sample_size": sample_size, "held_out": held_out,
                "held_out_seed": held_out_seed}
    result = train(data, steps=steps, seeds=seeds, seed=seed, eta=eta, seq_len=seq_len,
                   batch_size=batch_size, sample=sample, sample_size=sample_size,
                   optimizer=optimizer, start=start, record=record, held_out=held_out,
                   held_out_seed=held_out_seed, progress=progress)
    runs, seeds = result.runs, result.seeds
    t_run = runs[0].t
    if flow is None:
        t_all = t_run if flow_times is None else np.union1d(t_run,
                                                            check_times(flow_times, t_run))
        flow_all = population_flow(data, t_all, progress=progress, start=start)
    else:
        flow_all = flow
    at = np.searchsorted(flow_all.t, t_run)
    if np.any(at >= flow_all.t.size) or not np.allclose(flow_all.t[np.minimum(
            at, flow_all.t.size - 1)], t_run, rtol=1e-12, atol=0.0):
        raise ValidationError("flow", "must hold every recorded time of the runs")
    return Comparison(runs, subset(flow_all, at), seeds, settings, flow_all)


def check_times(times, t_run: np.ndarray) -> np.ndarray:
    """``times`` as finite floats in ``[0, t_run[-1]]``, else a ValidationError naming
    ``flow_times``."""
    arr = np.asarray(times, dtype=float).ravel()
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > t_run[-1]):
        raise ValidationError("flow_times", f"must be finite times in [0, {t_run[-1]:g}] "
                              "(the runs' span)")
    return arr


def subset(traj, index):
    """The two-stage trajectory ``traj`` at the output indices ``index``."""
    from odeflow.results.two_stage import SERIES

    index = np.asarray(index)
    return type(traj)(traj.t[index], traj.W_P[index], traj.W_Q[index],
                      {k: getattr(traj, k)[index] for k in SERIES}, stats=traj.stats,
                      meta=traj.meta, data=traj.data, scorer=traj.scorer)


def gap_by_length(data: TwoStageData | None = None, lengths=(16, 64, 256), seeds=5,
                  **options) -> list[dict]:
    """:meth:`Comparison.gaps` of :func:`compare` at each ``seq_len`` in ``lengths``.

    The flow is solved once (it does not depend on ``N``). Returns one row per length:
    ``seq_len``, ``gap_<kind>`` and ``t_<kind>`` (where the largest gap is) for each
    query kind, and ``gap``, the largest of the three.
    """
    rows, flow = [], None
    for n in lengths:
        comp = compare(data, seeds=seeds, seq_len=n, flow=flow, **options)
        flow, gaps = comp.flow_all, comp.gaps()
        row = {"seq_len": int(n)}
        for kind in KINDS:
            row[f"gap_{kind}"], row[f"t_{kind}"] = gaps[kind]["gap"], gaps[kind]["t"]
        row["gap"] = max(gaps[k]["gap"] for k in KINDS)
        rows.append(row)
    return rows
