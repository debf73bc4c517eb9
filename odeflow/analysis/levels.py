"""Level E against Level R on the same data model (Theorem 1, Theorem 3 / Eqn 11).

:func:`compare_levels` solves the exact population gradient flow (Level E,
Lemma 1) and the reduced flow (Level R, Theorem 1) on the same output grid and
reports

- the largest deviation of the attention logits ``z(t)`` between the levels,
  absolute and relative to the range of Level E's logit displacement
  ``z(t) - z(0)`` (the range of ``z`` itself when ``Z(0) = 0``, the default);
- the Eqn 11 invariant error of each level: the largest relative spread of
  ``chi_l / ((1 + chi_l) f^_nl(0)^2)`` over the distinct tokens of a class
  (:func:`odeflow.analysis.diagnostics.eqn11_spread`). It is zero up to the solver's
  tolerance at Level R and grows with ``eta_Z / eta_Y`` at Level E.

With ``seq_len`` it also solves Level T (``docs/fidelity.md``) on the same grid and
reports ``max |z_T - z_E|``; with ``sgd_seeds`` it runs an SGD ensemble at that
``T`` (:func:`odeflow.analysis.finite_t.distance_to_sgd`, flow time
the warm-up map ``t_k``) and reports the logit gap of each level to the ensemble
mean beside the ensemble's standard error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from odeflow.analysis.diagnostics import eqn11_spread, transition_time
from odeflow.analysis.finite_t import distance_to_sgd
from odeflow.data import validate_positive
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.solver import default_t_eval, solve
from odeflow.training.common import warmup_steps


@dataclass
class LevelComparison:
    """Result of :func:`compare_levels` (one pair of learning rates).

    Attributes
    ----------
    eta_y, eta_z, t_end : float
    z_deviation : float
        ``max_{t, m, l} |z_ml^E(t) - z_ml^R(t)|`` over the query tokens in use
        and the active tokens.
    z_range : float
        ``max - min`` of ``z^E(t) - z^E(0)`` over time and entries.
    z_deviation_relative : float
        ``z_deviation / z_range`` (``inf`` if Level E's logits do not move).
    t_of_max_deviation : float
        Time at which ``z_deviation`` is reached.
    invariant_error_exact, invariant_error_reduced : float
        Largest relative spread of the Eqn 11 invariant over time and classes.
    transition_time_exact, transition_time_reduced : float
        ``t_0`` (``exp(h) = M - 1``) of the first class
        (:func:`odeflow.analysis.diagnostics.transition_time`; the margin of Level E is
        measured from its decoder). ``nan`` if not reached by ``t_end``.
    stats_exact, stats_reduced : dict
        Solver statistics of the two solves.
    exact, reduced : Trajectory
        The two trajectories (not part of :meth:`to_dict`).
    seq_len, samples_per_class : int or None
        Level T's ``T`` and ``N`` (``None`` when Level T was not solved).
    z_deviation_finite_t : float
        ``max_{t, m, l} |z_ml^T(t) - z_ml^E(t)|`` (``nan`` without Level T).
    sgd_gap : dict
        ``max_t`` logit gap of each level (``exact``, ``finite_t``,
        ``reduced``) to the SGD ensemble mean, and ``standard_error``,
        ``z_range``, ``steps``, ``seeds``, ``batch_size``, ``momentum`` (empty
        without SGD).
    finite_t : Trajectory or None
    """

    eta_y: float
    eta_z: float
    t_end: float
    z_deviation: float
    z_range: float
    z_deviation_relative: float
    t_of_max_deviation: float
    invariant_error_exact: float
    invariant_error_reduced: float
    transition_time_exact: float
    transition_time_reduced: float
    stats_exact: dict = field(repr=False)
    stats_reduced: dict = field(repr=False)
    exact: object = field(repr=False, default=None)
    reduced: object = field(repr=False, default=None)
    seq_len: int | None = None
    samples_per_class: int | None = None
    z_deviation_finite_t: float = float("nan")
    sgd_gap: dict = field(default_factory=dict)
    finite_t: object = field(repr=False, default=None)

    @property
    def ratio(self) -> float:
        """``eta_Z / eta_Y``."""
        return self.eta_z / self.eta_y

    def to_dict(self) -> dict:
        """JSON-able summary (without the trajectories); non-finite values become None."""
        keys = ("eta_y", "eta_z", "t_end", "z_deviation", "z_range", "z_deviation_relative",
                "t_of_max_deviation", "invariant_error_exact", "invariant_error_reduced",
                "transition_time_exact", "transition_time_reduced")
        out = {k: float(getattr(self, k)) for k in keys}
        for k, v in out.items():  # strict JSON: a transition not reached is null
            if not np.isfinite(v):
                out[k] = None
        out["ratio"] = self.ratio
        if self.seq_len is not None:
            out.update({"seq_len": self.seq_len, "samples_per_class": self.samples_per_class,
                        "z_deviation_finite_t": float(self.z_deviation_finite_t)})
        if self.sgd_gap:
            out["sgd"] = {k: (v if not isinstance(v, float) or np.isfinite(v) else None)
                          for k, v in self.sgd_gap.items()}
        for name, stats in (("exact", self.stats_exact), ("reduced", self.stats_reduced)):
            out[f"solver_{name}"] = {k: stats[k] for k in ("method", "nfev", "njev", "wall_time")
                                     if k in stats}
        return out


def _first_transition(traj) -> float:
    try:
        return float(transition_time(traj)[0])
    except ValidationError:
        return float("nan")


@renamed_keywords({"samples_per_class": "sample_size", "sample_seed": "seed"})
def compare_levels(data, eta_y: float, eta_z: float, t_end: float, *, t_eval=None,
                   method: str = "auto", rtol: float = 1e-8, atol: float = 1e-10, z0=None,
                   invariant_floor: float = 0.0, keep_trajectories: bool = True,
                   seq_len: int | None = None, sample_size: int = 64,
                   seed: int = 0, sgd_seeds=0, batch_size: int = 128,
                   momentum: float = 0.9, **reduced_options) -> LevelComparison:
    """Solve Level E and Level R and measure how far apart they are.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates (both levels).
    t_end : float
        End time; both levels are sampled on the same grid (log-spaced by
        default, :func:`odeflow.solver.default_t_eval`).
    t_eval : array_like, optional
    method, rtol, atol : passed to :func:`odeflow.solve` for both levels.
    z0 : optional
        Initial logits (both levels).
    invariant_floor : float, default 0
        ``floor`` of :func:`odeflow.analysis.diagnostics.eqn11_spread`.
    keep_trajectories : bool, default True
        Keep the trajectories on the result.
    seq_len : int, optional
        Also solve Level T (``flow="finite_t"``) with this ``T``.
    sample_size, seed : int
        Level T's ``N`` (sequences per class) and sample seed (old names
        ``samples_per_class``, ``sample_seed`` warn).
    sgd_seeds : int or sequence of int, default 0
        With ``seq_len``: also run an SGD ensemble over these seeds (or this
        many) for the steps whose warm-up flow time is
        ``t_end``, at batch ``batch_size``
        and compare every level with its mean on the flow-time axis.
    batch_size, momentum : SGD settings.
    **reduced_options
        ``iota``, ``beta`` of the reduced flow.

    Returns
    -------
    LevelComparison
    """
    eta_y = validate_positive(eta_y, "eta_y")
    eta_z = validate_positive(eta_z, "eta_z")
    t_end = validate_positive(t_end, "t_end")
    if t_eval is None:
        t_eval = default_t_eval(0.0, t_end)
    common = {"eta_y": eta_y, "eta_z": eta_z, "t_span": (0.0, t_end), "t_eval": t_eval,
              "method": method, "rtol": rtol, "atol": atol, "start": (None, z0),
              "progress": False}
    exact = solve(data, flow="exact", **common)
    reduced = solve(data, flow="reduced", **common, **reduced_options)
    extra = {}
    if seq_len is not None:
        extra = _level_t_gap(data, exact, common, seq_len, sample_size, seed,
                             keep_trajectories)
    if not isinstance(sgd_seeds, (int, np.integer)) or sgd_seeds:
        if seq_len is None:
            raise ValidationError("sgd_seeds", "an SGD comparison needs seq_len (the T of "
                                  "the sampled sequences)")
        extra["sgd_gap"] = _sgd_gap(data, eta_y, eta_z, t_end, seq_len, sgd_seeds, batch_size,
                                    momentum, sample_size, seed, rtol, atol)
    return LevelComparison(
        eta_y=eta_y, eta_z=eta_z, t_end=t_end, **_logit_deviation(exact, reduced),
        invariant_error_exact=float(eqn11_spread(exact, invariant_floor).max()),
        invariant_error_reduced=float(eqn11_spread(reduced, invariant_floor).max()),
        transition_time_exact=_first_transition(exact),
        transition_time_reduced=_first_transition(reduced),
        stats_exact=dict(exact.stats), stats_reduced=dict(reduced.stats),
        exact=exact if keep_trajectories else None,
        reduced=reduced if keep_trajectories else None, **extra)


def _logit_deviation(exact, reduced) -> dict:
    """Largest ``|z_E - z_R|`` over logits and times, its time, and relative to the range
    of Level E's displacement ``z(t) - z(0)`` (inf when Level E does not move)."""
    diff = np.abs(exact.z_active - reduced.z_active)
    per_time = diff.reshape(diff.shape[0], -1).max(axis=1)
    i_max = int(np.argmax(per_time))
    deviation = float(per_time[i_max])
    z_range = float(np.ptp(exact.z_active - exact.z_active[0]))
    return {"z_deviation": deviation, "z_range": z_range,
            "z_deviation_relative": deviation / z_range if z_range > 0 else float("inf"),
            "t_of_max_deviation": float(exact.t[i_max])}


def _level_t_gap(data, exact, common: dict, seq_len, sample_size, seed,
                 keep_trajectories: bool) -> dict:
    """Level T (``flow="finite_t"``) on the same grid and its largest logit gap to Level E."""
    finite_t = solve(data, flow="finite_t", seq_len=seq_len, sample_size=sample_size,
                     seed=seed, **common)
    return {"seq_len": int(finite_t.meta["seq_len"]),
            "samples_per_class": int(finite_t.meta["sample_size"]),
            "z_deviation_finite_t": float(np.max(np.abs(finite_t.z_active - exact.z_active))),
            "finite_t": finite_t if keep_trajectories else None}


def _sgd_gap(data, eta_y, eta_z, t_end, seq_len, seeds, batch_size, momentum,
             sample_size, seed, rtol, atol) -> dict:
    """Each level's logit gap to the mean of an SGD ensemble on the flow-time axis, for
    the steps whose warm-up flow time is ``t_end`` (:func:`distance_to_sgd`)."""
    steps = max(1, round(float(warmup_steps(t_end, momentum))))
    far = distance_to_sgd(data, eta_y, eta_z, steps, seq_len, batch_size=batch_size,
                          seeds=seeds, momentum=momentum, sample_size=sample_size,
                          seed=seed, levels=("exact", "finite_t", "reduced"),
                          rtol=rtol, atol=atol)
    summary = far.summary()
    return {**{k: summary[f"z_gap_{k}"] for k in far.z_gap},
            "standard_error": summary["standard_error"], "z_range": summary["z_range"],
            "steps": steps, "seeds": summary["seeds"], "batch_size": int(batch_size),
            "momentum": float(momentum)}

def compare_levels_over_ratios(data, eta_y: float, ratios, t_end: float,
                               **options) -> list[LevelComparison]:
    """:func:`compare_levels` at ``eta_z = ratio * eta_y`` for each ratio."""
    try:
        ratios = [float(r) for r in ratios]
    except (TypeError, ValueError):
        raise ValidationError("ratios", f"must be numbers, got {ratios!r}") from None
    if not ratios:
        raise ValidationError("ratios", "is empty")
    for r in ratios:
        validate_positive(r, "ratios")
    return [compare_levels(data, eta_y, r * eta_y, t_end, **options) for r in ratios]


def format_table(results: list[LevelComparison], width: int | None = None) -> str:
    """A plain-text table of comparisons, one row per learning-rate pair.

    Level T and SGD columns appear when the comparisons have them: ``max|zT-zE|``
    and, per level, ``gap X-SGD`` (largest logit gap to the SGD ensemble mean)
    beside ``SGD s.e.`` (largest standard error of that mean); ``dev/range`` is
    ``max|zE-zR|`` over ``range zE``. ``width``: the
    columns past it continue in further blocks, each led by ``eta_Z/eta_Y``
    (``odeflow compare-levels`` uses 100); None: one block.
    """
    from odeflow.tables import blocks

    header = ["eta_Z/eta_Y", "eta_Y", "eta_Z", "max|zE-zR|", "dev/range", "range zE",
              "Eqn11 err E", "Eqn11 err R", "t0 E", "t0 R"]
    with_t = any(r.seq_len is not None for r in results)
    with_sgd = any(r.sgd_gap for r in results)
    if with_t:
        header += ["T", "max|zT-zE|"]
    if with_sgd:
        header += ["gap E-SGD", "gap T-SGD", "gap R-SGD", "SGD s.e."]
    nan = float("nan")
    rows = []
    for r in results:
        vals = [r.ratio, r.eta_y, r.eta_z, r.z_deviation, r.z_deviation_relative, r.z_range,
                r.invariant_error_exact, r.invariant_error_reduced,
                r.transition_time_exact, r.transition_time_reduced]
        if with_t:
            vals += [nan if r.seq_len is None else r.seq_len, r.z_deviation_finite_t]
        if with_sgd:
            vals += [r.sgd_gap.get(k, nan) for k in ("exact", "finite_t", "reduced",
                                                      "standard_error")]
        cells = [f"{v:.4g}" for v in vals]
        for j in (8, 9):  # a transition time not reached by t_end (stored as nan)
            if vals[j] != vals[j]:
                cells[j] = "> t_end"
        rows.append(cells)
    return "\n".join(blocks(header, rows, keys=1, width=width))
