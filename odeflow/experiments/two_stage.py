"""The two-stage reproduction: training beside the flow, stages, spectra, rank truncation.

odeflow's own model of the setting of Gong et al. 2025 (arXiv 2502.20681; only its
abstract is readable, so nothing here reproduces a figure or number of the paper:
the rank-truncation table is the analogue, in this model, of the authors' GPT-2
rank-reduction plot). :func:`run` trains ``seeds`` runs
(:func:`odeflow.training.two_stage.compare`: full-batch gradient descent at step
``eta`` on a fixed sample of prompts of ``seq_len`` examples per seed by default)
beside the population flow to the horizon ``T = eta * steps``, and writes into
``out``:

- ``two_stage.csv``: per recorded time ``t`` (0 and about 40 log-spaced), the flow's
  population accuracy per query kind and the runs' held-out accuracy (finite-``N``
  attention; mean and standard deviation over seeds);
- ``stages.csv``: the stage times ``t_P``, ``t_Q``, their ratio and the time the
  largest singular value of ``W`` moves from ``W_P`` to ``W_Q`` (:func:`measured_stages`),
  of the flow and of the runs' mean held-out losses, and the derived ones where the
  family's closed forms give them;
- ``rank_truncation.csv``: the flow's population accuracy per query kind with the
  top ``r`` singular values of ``W`` kept, ``r = 1 .. d_P + d_Q``, at ``t_P``
  (``early``) and ``T`` (``late``), and beside it the runs' held-out accuracy with
  the same truncation at their nearest recorded time (:func:`truncation_rows`);
- ``two_stage.png``: accuracy over ``log t``, the singular values of ``W_P`` and ``W_Q``,
  and the rank-truncation curves (:func:`odeflow.plots.two_stage.plot_reproduction`).

``odeflow reproduce two-stage --out DIR`` runs it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from odeflow.data.checks import check_count
from odeflow.data.two_stage import TwoStageData
from odeflow.errors import ValidationError
from odeflow.fields.two_stage.finite_n import KINDS
from odeflow.training.api import old_forms
from odeflow.training.two_stage import beside_flow, held_out_scores, log_spaced_steps

#: Files :func:`run` writes into its folder.
OUTPUTS = ("two_stage.csv", "stages.csv", "rank_truncation.csv", "two_stage.png")
#: Columns of ``two_stage.csv`` (the issue's interface first).
TABLE_COLUMNS = ("t", "flow_acc_p_only", "flow_acc_q_only", "run_acc_p_only_mean",
                 "run_acc_q_only_mean", "run_acc_p_only_std", "run_acc_q_only_std",
                 "flow_acc_both", "run_acc_both_mean", "run_acc_both_std")
#: Columns of ``stages.csv`` and ``rank_truncation.csv``.
STAGE_COLUMNS = ("source", "t_P", "t_Q", "ratio", "t_cross")
TRUNCATION_COLUMNS = ("checkpoint", "t", "rank_kept", "fraction_kept", "acc_p_only",
                      "acc_q_only", "acc_both", "run_t", "run_acc_p_only_mean",
                      "run_acc_q_only_mean", "run_acc_both_mean")
#: Defaults of :func:`run`: a fixed sample of prompts per seed, full-batch descent.
SAMPLE_SIZE = 2000
#: Flow times (log-spaced, besides the runs') for the stage times and spectra.
FLOW_POINTS = 200


@dataclass(frozen=True)
class Reproduction:
    """What :func:`run` measured and wrote.

    Attributes
    ----------
    comparison : Comparison
        Runs and flow (:func:`odeflow.training.two_stage.compare`).
    table, stages, truncation : list of dict
        The rows of ``two_stage.csv``, ``stages.csv``, ``rank_truncation.csv``.
    gaps : dict
        :meth:`Comparison.gaps`: the largest accuracy gap per query kind.
    files : list of Path
    """

    comparison: object
    table: list
    stages: list
    truncation: list
    gaps: dict
    files: list


def measured_stages(t, loss_p_only, loss_q_only, sv_p=None, sv_q=None) -> dict:
    """The two stages read from the loss per query kind over ``[0, T]`` (``T = t[-1]``).

    ``t_P``, ``t_Q``: :func:`odeflow.analysis.two_stage.closed_forms.measured_stage_times`
    (the first time the P-only loss has made 90% of its largest drop ``L_P(0) - min L_P``;
    the first time after ``t_P`` at which the Q-only loss is below its value at ``t = 0``,
    inf if never; linear interpolation between recorded times); ``ratio = t_Q / t_P``;
    ``i_P``, the first recorded time at or after ``t_P``; ``t_cross`` (with the top
    singular values ``sv_p``, ``sv_q``): the first recorded time at which the largest
    singular value of ``W`` is ``W_Q``'s (NaN if never). ``t`` must start at 0.
    """
    from types import SimpleNamespace

    from odeflow.analysis.two_stage.closed_forms import measured_stage_times

    t = np.asarray(t, dtype=float)
    if t.size < 2 or t[0] != 0.0:
        raise ValidationError("t", "needs at least two times, the first t = 0")
    series = SimpleNamespace(t=t, loss_p_only=np.asarray(loss_p_only, dtype=float),
                             loss_q_only=np.asarray(loss_q_only, dtype=float))
    t_p, t_q = measured_stage_times(series)
    out = {"t_P": t_p, "t_Q": t_q, "ratio": t_q / t_p if t_p > 0 else float("nan"),
           "i_P": min(int(np.searchsorted(t, t_p)), t.size - 1), "t_cross": float("nan")}
    if sv_p is not None and sv_q is not None:
        crossed = np.nonzero(np.asarray(sv_q) > np.asarray(sv_p))[0]
        out["t_cross"] = float(t[crossed[0]]) if crossed.size else float("nan")
    return out


def predicted_stages(data) -> dict | None:
    """``t_P``, ``t_Q`` derived by the family's closed forms
    (:func:`odeflow.analysis.two_stage.closed_forms.stage_times`), or None where they do
    not apply (the squared loss, the cluster Q)."""
    from odeflow.analysis.two_stage.closed_forms import stage_times

    try:
        t_p, t_q = stage_times(data)
    except ValidationError:
        return None
    return {"t_P": float(t_p), "t_Q": float(t_q),
            "ratio": float(t_q) / float(t_p) if t_p > 0 else float("nan"),
            "t_cross": float("nan")}


def stage_rows(comp) -> tuple[list[dict], dict]:
    """``stages.csv``'s rows (flow, runs, derived) and the flow's stages."""
    flow = comp.flow_all
    at_flow = measured_stages(flow.t, flow.loss_p_only, flow.loss_q_only,
                              flow.singular_values_p[:, 0], flow.singular_values_q[:, 0])
    sv_p = np.mean([r.singular_values_p[:, 0] for r in comp.runs], axis=0)
    sv_q = np.mean([r.singular_values_q[:, 0] for r in comp.runs], axis=0)
    at_runs = measured_stages(comp.t, comp.run_mean("loss_p_only"),
                              comp.run_mean("loss_q_only"), sv_p, sv_q)
    rows = [{"source": "flow", **at_flow}, {"source": "runs", **at_runs}]
    derived = predicted_stages(comp.flow_all.data)
    if derived is not None:
        rows.append({"source": "derived", **derived})
    return [{k: row[k] for k in STAGE_COLUMNS} for row in rows], at_flow


def truncation_rows(comp, early: int) -> list[dict]:
    """``rank_truncation.csv``'s rows at the flow's output ``early`` (``t_P``) and last (``T``).

    ``acc_<kind>``: the flow's population accuracy with the top ``r`` singular values of
    ``W`` kept; ``run_acc_<kind>_mean``: the runs' held-out accuracy (finite-``N``
    attention, mean over seeds) with the same truncation of their ``W`` at their recorded
    time nearest the checkpoint, ``run_t``.
    """
    flow = comp.flow_all
    rows = []
    d = flow.W_P.shape[1] + flow.W_Q.shape[1]
    for name, i in (("early", early), ("late", flow.t.size - 1)):
        cut = flow.rank_truncation(i)
        k = nearest_record(comp.t, float(flow.t[i]))
        runs = run_truncation(comp, k, d)
        for j, r in enumerate(cut["rank_kept"]):
            row = {"checkpoint": name, "t": float(flow.t[i]), "rank_kept": int(r),
                   "fraction_kept": int(r) / d, "run_t": float(comp.t[k])}
            for kind in KINDS:
                row[f"acc_{kind}"] = float(cut[f"accuracy_{kind}"][j])
                row[f"run_acc_{kind}_mean"] = float(runs[f"accuracy_{kind}"][j])
            rows.append(row)
    return rows


def nearest_record(t_run: np.ndarray, t: float) -> int:
    """Index of the recorded time nearest ``t`` on a log scale (``t = 0``: the first)."""
    if t <= 0:
        return 0
    positive = np.flatnonzero(t_run > 0)
    return int(positive[np.argmin(np.abs(np.log(t_run[positive] / t)))])


def run_truncation(comp, k: int, d: int) -> dict:
    """Held-out accuracy per kind (mean over seeds) of the runs' ``W`` at record ``k`` with
    the top ``r = 1 .. d`` singular values kept, arrays of length ``d``."""
    from odeflow.results.two_stage import truncate_blocks

    cut = [truncate_blocks(run.W_P[k], run.W_Q[k], r) for run in comp.runs
           for r in range(1, d + 1)]
    s = comp.settings
    scores = held_out_scores(comp.flow_all.data, np.array([c[0] for c in cut]),
                             np.array([c[1] for c in cut]), s["seq_len"], s["held_out"],
                             s["held_out_seed"])
    return {key: value.reshape(len(comp.runs), d).mean(axis=0)
            for key, value in scores.items()}


def csv_text(rows: list[dict], columns) -> str:
    """The rows as CSV text with the header ``columns`` (floats with 10 significant digits)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([f"{row[c]:.10g}" if isinstance(row[c], float) else row[c]
                         for c in columns])
    return buf.getvalue()


def _records(value, options: dict) -> dict:
    """'record': records=n is record=log_spaced_steps(steps, n)"""
    steps = check_count(options.get("steps", beside_flow.STEPS), "steps")
    return {"record": log_spaced_steps(steps, check_count(value, "records"))}


@old_forms(positional=None, translate={"records": _records})
def run(out, seeds=5, *, data: TwoStageData | None = None, steps: int = beside_flow.STEPS,
        eta: float = beside_flow.ETA, seq_len: int = beside_flow.SEQ_LEN,
        sample: str = "fixed", sample_size: int | None = None,
        batch_size: int | None = None, record=None,
        held_out: int = beside_flow.HELD_OUT, flow_points: int = FLOW_POINTS,
        progress: bool | None = None) -> Reproduction:
    """Train beside the flow and write :data:`OUTPUTS` into the folder ``out``, atomically.

    Parameters
    ----------
    out : str or Path
        Folder (created if missing); each file is written by temp file and rename.
    seeds : int or list of int
    data : TwoStageData, optional
        ``ts-default`` by default.
    steps, eta : int, float
        The horizon is ``T = eta * steps`` (flow time).
    seq_len, sample, sample_size, batch_size, record, held_out
        As for :func:`odeflow.training.two_stage.compare`; ``sample_size`` None is
        :data:`SAMPLE_SIZE` prompts for a fixed sample (none for fresh prompts: given, it
        is refused); ``batch_size`` None is ``sample_size`` for a fixed sample
        (full-batch descent), 200 for fresh prompts;
        ``record`` None is the start and :data:`~odeflow.training.two_stage.beside_flow.RECORDS`
        log-spaced steps (``log_spaced_steps(steps, n)`` gives ``n`` of them).
    flow_points : int
        Log-spaced flow times from ``eta / 10`` to ``T``, besides the runs'.
    progress : bool, optional

    Returns
    -------
    Reproduction

    Notes
    -----
    Old keyword (one release, warning :class:`~odeflow.errors.RenamedWarning`):
    ``records=n`` (``record=log_spaced_steps(steps, n)``).
    """
    from odeflow.io import atomic_write_text, writable_folder
    from odeflow.plots.style import save_figure
    from odeflow.plots.two_stage import plot_reproduction

    folder = writable_folder(out, "out", what="out (the CSV and PNG files go into it)")
    data = TwoStageData.preset("ts-default") if data is None else data
    steps = check_count(steps, "steps")
    if sample == "fixed" and sample_size is None:
        sample_size = SAMPLE_SIZE
    if batch_size is None:
        batch_size = sample_size if sample == "fixed" and sample_size else beside_flow.BATCH_SIZE
    horizon = float(eta) * steps
    extra = np.geomspace(horizon / steps / 10.0, horizon, check_count(flow_points,
                                                                      "flow_points"))
    comp = beside_flow.compare(data, seeds=seeds, steps=steps, eta=eta, seq_len=seq_len,
                               batch_size=batch_size, sample=sample, sample_size=sample_size,
                               record=(log_spaced_steps(steps, beside_flow.RECORDS)
                                       if record is None else record), held_out=held_out,
                               flow_times=extra, progress=progress)
    stages, at_flow = stage_rows(comp)
    truncation = truncation_rows(comp, at_flow["i_P"])
    table = comp.rows()
    files = [atomic_write_text(folder / "two_stage.csv", csv_text(table, TABLE_COLUMNS), "out"),
             atomic_write_text(folder / "stages.csv", csv_text(stages, STAGE_COLUMNS), "out"),
             atomic_write_text(folder / "rank_truncation.csv",
                               csv_text(truncation, TRUNCATION_COLUMNS), "out")]
    fig = plot_reproduction(comp, stages[0], truncation)
    files.append(save_figure(fig, folder / "two_stage.png"))
    return Reproduction(comp, table, stages, truncation, comp.gaps(), [Path(f) for f in files])
