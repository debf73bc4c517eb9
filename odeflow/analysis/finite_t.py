"""Level T diagnostics: its error in ``N``, its distance to Level E as ``T`` grows,
and the distance of each level to an SGD ensemble on the flow-time axis
(``docs/fidelity.md``).

- :func:`sample_size_error`: solve Level T on ``N`` and on ``2 N`` sequences per
  class (nested samples: the first ``N`` of the ``2 N`` are the ``N``) and report
  the largest logit difference, an estimate of the sampling error of the
  ``2 N`` solve.
- :func:`distance_to_exact`: Level T against Level E for a list of ``T``; the
  difference shrinks like the sampling error ``~ 1/sqrt(T N)`` plus a finite-``T``
  bias ``O(1/T)``.
- :func:`distance_to_sgd`: an SGD ensemble (:func:`odeflow.training.sgd_ensemble`)
  and, at the same ``T``, Level T and Level E solved at the ensemble's recorded
  steps mapped to flow time ``t_k`` (the warm-up map); the
  logit gap of each level to the ensemble mean, beside the ensemble's own standard error.

The entropies are :func:`odeflow.analysis.measures.distinct_entropy` (the
paper's Fig. 6 measure).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from odeflow.analysis.measures import distinct_entropy
from odeflow.data import validate_positive
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS
from odeflow.fields.optimizers import Momentum
from odeflow.solver import default_t_eval, solve
from odeflow.training import sgd_ensemble
from odeflow.training.common import warmup_time

#: Flow time of ``k`` steps of momentum SGD: the warm-up map (:func:`.common.warmup_time`).
flow_time = warmup_time


def _max_gap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``max |a - b|`` over all axes but time, shape (n,)."""
    d = np.abs(a - b)
    return d.reshape(d.shape[0], -1).max(axis=1)


def _flow_options(eta_y, eta_z, t_eval, rtol, atol, start):
    return {"eta_y": eta_y, "eta_z": eta_z, "t_span": (0.0, float(t_eval[-1])),
            "t_eval": t_eval, "rtol": rtol, "atol": atol, "start": start, "progress": False}


@dataclass
class SampleSizeError:
    """Result of :func:`sample_size_error`.

    Attributes
    ----------
    t : ndarray
    z_difference : ndarray, shape (n,)
        ``max |z_N - z_2N|`` over query tokens in use and active tokens.
    z_range : float
        ``max - min`` of ``z_2N - z_2N(0)``.
    seq_len, sample_size : int
        ``T`` and ``N``, sequences per class (the second solve uses ``2 N``).
    """

    t: np.ndarray
    z_difference: np.ndarray
    z_range: float
    seq_len: int
    sample_size: int

    @property
    def max_difference(self) -> float:
        return float(np.max(self.z_difference))

    @property
    def relative(self) -> float:
        """:attr:`max_difference` over :attr:`z_range`."""
        return self.max_difference / self.z_range if self.z_range > 0 else float("inf")


@renamed_keywords({**START_PARTS, "samples_per_class": "sample_size"})
def sample_size_error(data, eta_y: float, eta_z: float, t_end: float, seq_len: int,
                      sample_size: int, seed: int = 0, t_eval=None, rtol: float = 1e-8,
                      atol: float = 1e-10, start=None) -> SampleSizeError:
    """Level T's error in ``N``: solve at ``N`` and ``2 N`` and compare.

    The samples are nested (:func:`odeflow.data.sample_counts`), so
    ``z_N - z_2N`` is half the difference of two independent ``N``-samples and
    its size estimates the sampling error of the ``2 N`` solve.
    """
    t_end = validate_positive(t_end, "t_end")
    t_eval = default_t_eval(0.0, t_end) if t_eval is None else t_eval
    opts = _flow_options(eta_y, eta_z, t_eval, rtol, atol, start)
    one = solve(data, flow="finite_t", seq_len=seq_len, sample_size=sample_size,
                seed=seed, **opts)
    two = solve(data, flow="finite_t", seq_len=seq_len,
                sample_size=2 * one.meta["sample_size"], seed=seed, **opts)
    return SampleSizeError(one.t, _max_gap(one.z_active, two.z_active),
                           float(np.ptp(two.z_active - two.z_active[0])),
                           int(one.meta["seq_len"]), int(one.meta["sample_size"]))


@renamed_keywords({**START_PARTS, "samples_per_class": "sample_size"})
def distance_to_exact(data, eta_y: float, eta_z: float, t_end: float, seq_lens,
                      sample_size: int, seed: int = 0, t_eval=None, rtol: float = 1e-10,
                      atol: float = 1e-12, start=None) -> list[dict]:
    """Level T against Level E as ``T`` grows.

    Returns
    -------
    list of dict
        One row per ``T``: ``seq_len``, ``samples_per_class`` (``N``, sequences per
        class: the tables' column name), ``z_gap``
        (``max_t max |z_T - z_E|``), ``z_gap_relative`` (over the range of
        Level E's logit displacement), ``scaled_gap`` (``z_gap * sqrt(T N)``,
        about constant when the sampling error dominates) and ``nfev``.
    """
    t_end = validate_positive(t_end, "t_end")
    t_eval = default_t_eval(0.0, t_end) if t_eval is None else t_eval
    opts = _flow_options(eta_y, eta_z, t_eval, rtol, atol, start)
    exact = solve(data, flow="exact", **opts)
    z_range = float(np.ptp(exact.z_active - exact.z_active[0]))
    rows = []
    for T in seq_lens:
        traj = solve(data, flow="finite_t", seq_len=T, sample_size=sample_size,
                     seed=seed, **opts)
        T, N = int(traj.meta["seq_len"]), int(traj.meta["sample_size"])
        gap = float(np.max(_max_gap(traj.z_active, exact.z_active)))
        rows.append({"seq_len": T, "samples_per_class": N, "z_gap": gap,
                     "z_gap_relative": gap / z_range if z_range > 0 else float("inf"),
                     "scaled_gap": gap * float(np.sqrt(T * N)), "nfev": traj.stats["nfev"]})
    return rows


#: Flows :func:`distance_to_sgd` can put beside SGD (Level E, Level T, Level R).
SGD_LEVELS = ("exact", "finite_t", "reduced")


@dataclass
class SGDDistance:
    """Result of :func:`distance_to_sgd`.

    Attributes
    ----------
    t : ndarray, shape (n,)
        Flow times ``t_k`` (warm-up map, :func:`flow_time`) of the recorded SGD steps ``k``.
    z_gap : dict of str -> ndarray, shape (n,)
        Per level (``exact``, ``finite_t``, ``reduced``):
        ``max |z_level - mean_seeds z_sgd|`` over query tokens and active tokens.
    standard_error : ndarray, shape (n,)
        ``max`` over entries of the standard error of the ensemble mean
        (std over seeds ``/ sqrt(S)``): a gap near it is within SGD noise.
    z_range : float
        ``max - min`` of the ensemble mean's logit displacement; the relative
        gaps divide by it.
    entropy : dict of str -> ndarray, shape (n,)
        :func:`~odeflow.analysis.measures.distinct_entropy` per level, and under
        ``sgd`` the mean over seeds of each run's entropy.
    settings : dict
    trajectories : dict
        The flows and the ensemble when asked to keep them.
    """

    t: np.ndarray
    z_gap: dict
    standard_error: np.ndarray
    z_range: float
    entropy: dict
    settings: dict = field(default_factory=dict)
    trajectories: dict = field(default_factory=dict, repr=False)

    def summary(self) -> dict:
        """JSON-able figures: per level the largest and the final gap (absolute and
        relative to :attr:`z_range`) and the final entropies."""
        out = dict(self.settings)
        for name, gap in self.z_gap.items():
            out[f"z_gap_{name}"] = float(np.max(gap))
            out[f"z_gap_{name}_relative"] = (float(np.max(gap)) / self.z_range
                                             if self.z_range > 0 else None)
            out[f"z_gap_{name}_final"] = float(gap[-1])
        for name, h in self.entropy.items():
            out[f"entropy_{name}_final"] = float(h[-1])
        out["standard_error"] = float(np.max(self.standard_error))
        out["z_range"] = self.z_range
        return out


@renamed_keywords({"samples_per_class": "sample_size", "sample_seed": "seed",
                   "record_every": "record"})
def distance_to_sgd(data, eta_y: float, eta_z: float, steps: int, seq_len: int,
                    batch_size: int = 128, seeds=10, momentum: float = 0.9,
                    sample_size: int = 64, seed: int = 0,
                    levels=("exact", "finite_t"), record=None,
                    rtol: float = 1e-8, atol: float = 1e-10, keep_trajectories: bool = False,
                    progress: bool | None = None) -> SGDDistance:
    """Distance of each level to an SGD ensemble mean at the same ``T``.

    SGD (zero initialisation, :func:`odeflow.training.sgd_ensemble`) runs
    ``steps`` steps on batches of sequences of length ``seq_len``; the flows in
    ``levels`` are solved at the recorded steps mapped to flow time
    ``t_k`` (the warm-up map), with the same learning rates; Level T
    on ``sample_size`` sequences of length ``seq_len`` per class, drawn with
    ``seed`` (old names ``samples_per_class``, ``sample_seed``: warn). ``seeds``
    are the SGD runs'; ``momentum`` their heavy-ball coefficient (a number, as the
    settings recorded in the result and the fidelity tables; 0: plain steps);
    ``record`` the recorded steps as for :func:`odeflow.training.sgd_ensemble` (old
    name ``record_every``: warns).

    Returns
    -------
    SGDDistance
    """
    levels = tuple(levels)
    for name in levels:
        if name not in SGD_LEVELS:
            raise ValidationError("levels", f"unknown level {name!r}; choose from {SGD_LEVELS}")
    ens = sgd_ensemble(data, eta_y, eta_z, steps, batch_size, seq_len, seeds=seeds,
                       optimizer=Momentum(momentum) if momentum else None, record=record,
                       progress=progress)
    t = ens.t  # the trainer records step k at flow time t_k (warm-up map)
    opts = _flow_options(eta_y, eta_z, t, rtol, atol, None)
    flows = {}
    for name in levels:
        extra = ({"seq_len": seq_len, "sample_size": sample_size,
                  "seed": seed} if name == "finite_t" else {})
        flows[name] = solve(data, flow=name, **opts, **extra)
    members = np.stack([tr.z_active for tr in ens.trajectories])   # (S, n, q, L)
    mean = ens.mean_logits_active
    S = members.shape[0]
    if S > 1:
        se = members.std(axis=0, ddof=1) / np.sqrt(S)
        standard_error = se.reshape(se.shape[0], -1).max(axis=1)
    else:
        standard_error = np.full(t.size, np.nan)
    settings = {"eta_y": float(eta_y), "eta_z": float(eta_z), "steps": int(steps),
                "seq_len": int(seq_len), "batch_size": int(batch_size), "seeds": ens.seeds,
                "momentum": float(momentum), "samples_per_class": int(sample_size),
                "t_end": float(t[-1])}
    entropy = {"sgd": distinct_entropy(data, members).mean(axis=0)}
    entropy.update({name: distinct_entropy(data, tr.z_active) for name, tr in flows.items()})
    return SGDDistance(
        t, {name: _max_gap(tr.z_active, mean) for name, tr in flows.items()}, standard_error,
        float(np.ptp(mean - mean[0])), entropy, settings,
        {**flows, "sgd": ens} if keep_trajectories else {})
