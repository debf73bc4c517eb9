"""Real training beside the flow: how far discrete runs are from Level E.

:func:`compare_runs` runs gradient ascent or SGD (:mod:`odeflow.training`) on a
data model, solves the Level E flow (Eqns 3-4) at the run's recorded times
(step ``k`` is time ``t = k``; ``k dt`` for gradient ascent) and measures, at
every recorded time,

- the logit gap ``max |z_flow - z_run| / (max z_flow - min z_flow)``, maximum
  over query tokens in use and active tokens, divided by the range of the flow's
  logits over the whole run;
- the attention gap ``max_n TV(f_n^flow, f_n^run)``, the total-variation
  distance ``(1/2) sum_l |.|`` between the attention maps of Eqn 5.

For an ensemble over seeds the mean logits and the mean attention maps are
compared. :func:`gap_table` tabulates the gaps over sequence lengths and batch
sizes (as ``T`` and the batch grow, SGD approaches Level E);
``docs/validation.md`` holds the measured table.
"""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field

import numpy as np

from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS
from odeflow.numerics import normalised_features
from odeflow.results import Trajectory
from odeflow.solver import solve
from odeflow.training import SGDEnsemble, gradient_ascent, sgd_ensemble
from odeflow.training.api import SGD_OLD_FORMS, momentum_optimizer, old_forms, run_seeds

#: ``run=`` values of :func:`compare_runs`.
RUNS = ("sgd", "gradient_ascent")


@dataclass
class Comparison:
    """Gaps between the Level E flow and a discrete run over time.

    Attributes
    ----------
    t : ndarray, shape (n,)
        Recorded times.
    z_gap : ndarray, shape (n,)
        ``max |z_flow - z_run|`` over queries and active tokens, divided by
        :attr:`z_range`.
    attention_tv : ndarray, shape (n,)
        Largest total-variation distance between ``f_n`` of the flow and of the
        run, over classes ``n``.
    z_range : float
        ``max - min`` of the flow's logits over all recorded times.
    member_z_gap : ndarray, shape (S,)
        For an ensemble, ``max_t z_gap`` of each run on its own (SGD noise
        included); one entry for a single run.
    flow : Trajectory
    run : Trajectory or SGDEnsemble
    settings : dict
    """

    t: np.ndarray
    z_gap: np.ndarray
    attention_tv: np.ndarray
    z_range: float
    member_z_gap: np.ndarray
    flow: Trajectory
    run: object
    settings: dict = field(default_factory=dict)

    @property
    def max_z_gap(self) -> float:
        """``max_t`` of :attr:`z_gap`."""
        return float(np.max(self.z_gap))

    @property
    def max_attention_tv(self) -> float:
        """``max_t`` of :attr:`attention_tv`."""
        return float(np.max(self.attention_tv))

    @property
    def seeds(self) -> list:
        """The runs' seeds (none for gradient ascent)."""
        return list(self.settings.get("seeds", []))

    def rows(self) -> list[dict]:
        """One row per recorded time: ``t``, ``z_gap`` and ``attention_tv``."""
        return [{"t": float(t), "z_gap": float(z), "attention_tv": float(a)}
                for t, z, a in zip(self.t, self.z_gap, self.attention_tv, strict=True)]

    def summary(self) -> dict:
        """JSON-able figures: settings, maxima and the per-time gaps."""
        return {**self.settings, "z_range": self.z_range, "max_z_gap": self.max_z_gap,
                "max_attention_tv": self.max_attention_tv,
                "mean_member_z_gap": float(np.mean(self.member_z_gap)),
                "t": self.t.tolist(), "z_gap": self.z_gap.tolist(),
                "attention_tv": self.attention_tv.tolist()}


def _active_attention(data, z_active: np.ndarray) -> np.ndarray:
    """``f_n`` over the active tokens for logits (..., q, L): shape (..., K, L)."""
    f, _ = normalised_features(data.active_log_probs, z_active[..., data.class_query_index, :])
    return f


def compare_to_flow(flow: Trajectory, run, settings: dict | None = None) -> Comparison:
    """Gaps between a flow trajectory and a run recorded at the same times.

    Parameters
    ----------
    flow : Trajectory
        Level E (:func:`odeflow.solve`) at the run's times.
    run : Trajectory or SGDEnsemble
        A run of :mod:`odeflow.training`; an ensemble is compared through its
        mean logits and mean attention.
    settings : dict, optional
        Recorded in :attr:`Comparison.settings`.
    """
    if flow.t.shape != run.t.shape or not np.allclose(flow.t, run.t, rtol=1e-12, atol=1e-12):
        raise ValidationError("run", "must be recorded at the flow's times")
    data = flow.data
    z_flow = flow.z_active
    z_range = float(np.ptp(z_flow))
    if not z_range > 0:
        raise ValidationError("steps", "the flow's logits do not move; nothing to compare "
                              "(raise steps or eta_z)")
    f_flow = _active_attention(data, z_flow)
    if isinstance(run, SGDEnsemble):
        z_run, f_run = run.mean_logits_active, run.mean_attention_active
        members = np.stack([tr.z_active for tr in run.trajectories])
    else:
        z_run, f_run = run.z_active, _active_attention(data, run.z_active)
        members = run.z_active[None]
    axes = tuple(range(1, z_flow.ndim))
    z_gap = np.max(np.abs(z_run - z_flow), axis=axes) / z_range
    tv = np.max(0.5 * np.sum(np.abs(f_run - f_flow), axis=-1), axis=-1)
    member = np.max(np.abs(members - z_flow), axis=(1, *(a + 1 for a in axes))) / z_range
    return Comparison(flow.t, z_gap, tv, z_range, member, flow, run, dict(settings or {}))


@renamed_keywords(START_PARTS)
def flow_at(data, eta_y, eta_z, t, rtol=1e-10, atol=1e-12, start=None) -> Trajectory:
    """Level E solved at the times ``t`` (tight tolerances: it is the reference), from
    ``start = (y0, z0)`` (zero by default; old keywords ``y0=``, ``z0=`` warn)."""
    return solve(data, flow="exact", eta_y=eta_y, eta_z=eta_z, t_span=(0.0, float(t[-1])),
                 t_eval=t, rtol=rtol, atol=atol, start=start, progress=False)


def _run_settings(run, optimizer, batch_size, seq_len, seeds, seed, dt) -> dict:
    """The settings of ``run``: SGD's batches and seeds (defaults: plain steps, 32
    sequences of length 64, one seed) or gradient ascent's ``dt`` (default 1). Each
    process refuses, by name, a setting of the other that is not its default."""
    if run == "sgd":
        if dt is not None:
            raise ValidationError("dt", "is gradient ascent's time step; SGD's step k is at "
                                  "flow time t = k (give run='gradient_ascent' for dt)")
        return {"optimizer": optimizer,
                "batch_size": 32 if batch_size is None else batch_size,
                "seq_len": 64 if seq_len is None else seq_len,
                "seeds": run_seeds(seeds, seed)}
    if optimizer is not None:
        raise ValidationError("optimizer", "gradient ascent takes plain steps of size dt; "
                              "its optimiser flows are odeflow.solve(optimizer=...)")
    sgd_only = [name for name, given in (("seeds", not _is_number(seeds, 1)),
                                         ("seed", not _is_number(seed, 0)),
                                         ("batch_size", batch_size is not None),
                                         ("seq_len", seq_len is not None)) if given]
    if sgd_only:
        raise ValidationError(sgd_only[0], f"is SGD's; gradient ascent is one deterministic "
                              f"run on the population objective (give no "
                              f"{', '.join(sgd_only)}, or run='sgd')")
    return {"dt": 1.0 if dt is None else dt}


def _is_number(value, number: int) -> bool:
    """Whether ``value`` is the plain number ``number`` (a default left as it is)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == number


@old_forms(positional=("eta_y", "eta_z", "steps", "run", "batch_size", "seq_len", "seeds",
                       "momentum", "dt", "record_every", "rtol", "atol", "progress"),
           renames={"record_every": "record"}, translate={"momentum": momentum_optimizer})
def compare_runs(data=None, *, steps: int, seeds=1, eta_y: float = 1.0, eta_z: float = 1.0,
                 run: str = "sgd", optimizer=None, batch_size: int | None = None,
                 seq_len: int | None = None, seed: int = 0, record=None,
                 dt: float | None = None, rtol: float = 1e-10, atol: float = 1e-12,
                 progress: bool | None = None) -> Comparison:
    """Run gradient ascent or SGD and the Level E flow on one data model; compare.

    The keywords are those of every family's ``compare`` (``docs/api.md``, "Training
    and runs beside the flow").

    Parameters
    ----------
    data : DataModel, optional
        ``syn-small`` by default.
    steps : int
        Steps of the run; the flow is solved to ``t = steps`` (``steps * dt``
        for gradient ascent).
    seeds : int or sequence of int, default 1
        SGD's seeds (or how many, ``seed .. seed + seeds - 1``); with several, the mean
        over seeds is compared.
    eta_y, eta_z : float, default 1
        Learning rates shared by the run and the flow (Eqns 3-4).
    run : {"sgd", "gradient_ascent"}
        SGD on sampled sequences (:func:`odeflow.training.sgd_ensemble`) or
        Euler steps of the population gradient
        (:func:`odeflow.training.gradient_ascent`).
    optimizer : Optimizer, optional
        SGD's: plain steps (None, ``GradientDescent()``) or ``odeflow.Momentum(mu)``
        (the run's steps then sit at the flow times of its warm-up map).
    batch_size, seq_len : int, optional
        SGD's batches (default 32 sequences of length 64).
    seed : int, default 0
        SGD's first seed when ``seeds`` is a count.
    record : int or sequence of int, optional
        Record every this many steps, or those steps (and always the start and the
        end); about 100 records by default.
    dt : float, optional
        Time step of gradient ascent (1 by default); SGD refuses it (its step ``k``
        is at ``t = k``).
    rtol, atol, progress : float, float, bool or None
        Tolerances of the reference flow solve; the run's progress bar.

    Returns
    -------
    Comparison

    Notes
    -----
    Each process refuses, naming it, what only the other takes: gradient ascent is one
    deterministic run and refuses an ``optimizer`` and SGD's ``seeds``, ``seed``,
    ``batch_size`` and ``seq_len`` other than their defaults (1, 0, None, None); SGD
    refuses ``dt``. Old forms (one release, :class:`~odeflow.errors.RenamedWarning`):
    ``compare_runs(data, eta_y, eta_z, steps, ...)`` positionally, ``momentum=``
    (``optimizer``) and ``record_every=`` (``record``).
    """
    if run not in RUNS:
        raise ValidationError("run", f"unknown run {run!r}; choose one of {list(RUNS)}")
    if data is None:
        from odeflow.data import DataModel

        data = DataModel.preset("syn-small")
    own = _run_settings(run, optimizer, batch_size, seq_len, seeds, seed, dt)
    start = time.perf_counter()
    if run == "gradient_ascent":
        result = gradient_ascent(data, eta_y, eta_z, steps, dt=own["dt"], record=record,
                                 progress=progress)
        settings = {"run": run, "dt": float(own["dt"])}
    else:
        result = sgd_ensemble(data, eta_y, eta_z, steps, own["batch_size"], own["seq_len"],
                              seeds=own["seeds"], optimizer=own["optimizer"],
                              record=record, progress=progress)
        settings = {"run": run, "batch_size": int(own["batch_size"]),
                    "seq_len": int(own["seq_len"]), "seeds": result.seeds,
                    "momentum": float(result.trajectories[0].meta["momentum"])}
    run_time = time.perf_counter() - start
    flow = flow_at(data, eta_y, eta_z, result.t, rtol=rtol, atol=atol)
    settings.update({"eta_y": float(eta_y), "eta_z": float(eta_z), "steps": int(steps),
                     "run_wall_time": run_time})
    return compare_to_flow(flow, result, settings)


@old_forms(**SGD_OLD_FORMS)
def gap_table(data, eta_y: float, eta_z: float, steps: int, seq_lens=(16, 64, 256),
              batch_sizes=(16, 128), seeds=8, optimizer=None, record=None,
              progress: bool | None = None) -> list[dict]:
    """Gap between SGD and Level E over sequence lengths and batch sizes.

    One SGD ensemble per ``(batch_size, seq_len)``, all compared with one flow
    solve; a last row gives plain gradient ascent (``dt = 1``), the limit
    ``T, B -> inf`` of SGD at the same step sizes, whose gap is the Euler
    discretisation error alone. SGD with momentum is compared with the flow at the
    flow times of its warm-up map (:func:`odeflow.training.train_sgd`).

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of SGD, gradient ascent and the flow (Eqns 3-4).
    steps : int
        Steps of every run.
    seq_lens, batch_sizes : sequence of int
        The table's sequence lengths ``T`` and batch sizes ``B``.
    seeds : int or sequence of int, default 8
        Seeds of each SGD ensemble (:func:`odeflow.training.sgd_ensemble`).
    optimizer : odeflow.Momentum or GradientDescent, optional
        SGD's optimiser: plain steps (None) or ``odeflow.Momentum(mu)``; gradient
        ascent takes plain steps.
    record : int or sequence of int, optional
        Recorded steps, as for :func:`odeflow.training.gradient_ascent` (about 100
        records by default).
    progress : bool, optional
        Progress bar of the SGD runs.

    Returns
    -------
    list of dict
        Rows with ``process``, ``batch_size``, ``seq_len``, ``z_gap`` (mean over
        seeds vs flow, max over time), ``member_z_gap`` (single runs, mean over
        seeds), ``attention_tv`` (mean attention vs flow, max over classes and
        time) and ``wall_time``.

    Notes
    -----
    Old keywords (one release, warning :class:`~odeflow.errors.RenamedWarning`):
    ``momentum=mu`` (``optimizer=odeflow.Momentum(mu)``; a number in the place of
    ``optimizer`` too) and ``record_every=`` (``record``).
    """
    ga = gradient_ascent(data, eta_y, eta_z, steps, record=record, progress=False)
    flow = flow_at(data, eta_y, eta_z, ga.t)
    at_sgd = None   # the flow at SGD's times: those of its warm-up map with momentum
    rows = []
    for B in batch_sizes:
        for T in seq_lens:
            start = time.perf_counter()
            ens = sgd_ensemble(data, eta_y, eta_z, steps, B, T, seeds=seeds,
                               optimizer=optimizer, record=record, progress=progress)
            if at_sgd is None:
                at_sgd = flow if np.array_equal(ens.t, ga.t) else flow_at(data, eta_y,
                                                                          eta_z, ens.t)
            cmp = compare_to_flow(at_sgd, ens)
            rows.append({"process": "sgd", "batch_size": int(B), "seq_len": int(T),
                         "seeds": len(ens.seeds), "z_gap": cmp.max_z_gap,
                         "member_z_gap": float(np.mean(cmp.member_z_gap)),
                         "attention_tv": cmp.max_attention_tv,
                         "wall_time": time.perf_counter() - start})
    cmp = compare_to_flow(flow, ga)
    rows.append({"process": "gradient_ascent", "batch_size": None, "seq_len": None,
                 "seeds": 0, "z_gap": cmp.max_z_gap, "member_z_gap": cmp.max_z_gap,
                 "attention_tv": cmp.max_attention_tv, "wall_time": ga.stats["wall_time"]})
    return rows


def format_gap_table(rows: list[dict]) -> str:
    """The rows of :func:`gap_table` as a Markdown table (within 100 columns).

    Columns: the process, batch size ``B``, sequence length ``T``, the logit
    gap of the seeds' mean and the mean gap of single runs, the mean attention
    total-variation distance and the wall time in seconds.
    """
    lines = ["| process | B | T | z gap (seed mean) | z gap (1 run, mean) | attention TV | "
             "wall s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        B = "-" if r["batch_size"] is None else str(r["batch_size"])
        T = "inf" if r["seq_len"] is None else str(r["seq_len"])
        lines.append(f"| {r['process']} | {B} | {T} | {r['z_gap']:.4f} | "
                     f"{r['member_z_gap']:.4f} | {r['attention_tv']:.4f} | "
                     f"{r['wall_time']:.2f} |")
    return "\n".join(lines)

