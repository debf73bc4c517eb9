"""Relative gain of two distinct tokens: the integrated flow beside Eqn 11 (CF4).

Checks Theorem 3 (Eqn 11): ``r_{l/l'|n}(t) = (f^_nl(0)^2 / f^_nl'(0)^2 - 1) chi_l(t)``,
exact at Level R and approximate at Level E.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.analysis.closed_forms import relative_gain
from odeflow.data import DataModel, validate_positive
from odeflow.errors import ValidationError
from odeflow.plots.attention import FLOW_TITLES
from odeflow.plots.style import finish_axes, log_times, panel_axes, series_colour
from odeflow.solver import solve


def default_token_pairs(data: DataModel, next_token: int) -> list[tuple[int, int]]:
    """Three pairs ``(l, l')`` of distinct tokens of ``n`` with ``c_{l|n} > c_{l'|n}``.

    From the distinct tokens sorted by ``c_{l|n}``: the most against the least
    likely, and two pairs nearer the middle, so the prefactor
    ``f^_l(0)^2 / f^_l'(0)^2 - 1`` of Eqn 11 spans a range.
    """
    distinct = data.distinct_tokens(next_token)
    if distinct.size < 2:
        raise ValidationError("pairs", f"class {next_token} has fewer than two distinct tokens")
    probs = data.probs(next_token)[distinct]
    ranked = distinct[np.argsort(probs, kind="stable")]
    k = ranked.size
    candidates = [(k - 1, 0), ((2 * k) // 3, k // 3), (k // 2, k // 2 - 1)]
    pairs = []
    for hi, lo in candidates:
        pair = (int(ranked[hi]), int(ranked[lo]))
        if hi != lo and pair not in pairs:
            pairs.append(pair)
    return pairs


@dataclass
class RelativeGainCurves:
    """Both sides of Eqn 11 on one trajectory (the data of :func:`plot_relative_gain`).

    Attributes
    ----------
    flow : str
    next_token : int
    pairs : list of (int, int)
    t : numpy.ndarray, shape (n_times,)
        Output times, ``t > 0``.
    measured : numpy.ndarray, shape (n_pairs, n_times)
        ``r_{l/l'|n}(t)`` measured on the trajectory.
    predicted : numpy.ndarray, shape (n_pairs, n_times)
        ``(f^_nl(0)^2/f^_nl'(0)^2 - 1) chi_l(t)`` (Eqn 11).
    max_difference : float
        ``max |predicted - measured| / max |measured|`` over time, worst pair.
    """

    flow: str
    next_token: int
    pairs: list
    t: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    max_difference: float


def relative_gain_curves(data: DataModel | None = None, next_token: int | None = None,
                         pairs=None, flow: str = "reduced", eta_y: float = 1.0,
                         eta_z: float = 1.0, t_end: float = 1e4, points: int = 120,
                         rtol: float = 1e-10) -> RelativeGainCurves:
    """Solve ``flow`` and evaluate both sides of Eqn 11 for each token pair.

    The measured side is :meth:`odeflow.Trajectory.relative_gain`; the closed
    form is :func:`odeflow.analysis.closed_forms.relative_gain` with ``chi_l`` from
    :meth:`odeflow.Trajectory.growth_factor` of the same run. The difference is
    taken relative to the largest gain of the pair: a pointwise relative
    difference would be dominated by round-off at the earliest times, where
    ``r`` is ``~1e-8``. Arguments as in :func:`plot_relative_gain`.

    Returns
    -------
    RelativeGainCurves
    """
    data = DataModel.preset("syn-small") if data is None else data
    n = int(data.next_tokens[0]) if next_token is None else int(next_token)
    pairs = default_token_pairs(data, n) if pairs is None else [tuple(map(int, p)) for p in pairs]
    distinct = set(data.distinct_tokens(n).tolist())
    for pair in pairs:
        if len(pair) != 2 or not set(pair) <= distinct or pair[0] == pair[1]:
            raise ValidationError("pairs", f"{pair!r} is not a pair of two distinct tokens of "
                                  f"class {n}")
    if flow not in FLOW_TITLES:
        raise ValidationError("flow", f"unknown flow {flow!r}; choose from "
                              f"{sorted(FLOW_TITLES)}")
    t_end = validate_positive(t_end, "t_end")
    rtol = validate_positive(rtol, "rtol")
    t = np.concatenate([[0.0], log_times(min(1e-2, 1e-4 * t_end), t_end, points)])
    traj = solve(data, flow=flow, eta_y=eta_y, eta_z=eta_z, t_span=(0.0, t_end), t_eval=t,
                 rtol=rtol, atol=1e-3 * rtol, progress=False)
    f0 = traj.features(n)[0]
    measured = np.array([traj.relative_gain(n, l, lp)[1:] for l, lp in pairs])
    predicted = np.array([relative_gain(traj.growth_factor(n, l)[1:], f0[l], f0[lp])
                          for l, lp in pairs])
    worst = 0.0
    for meas, pred in zip(measured, predicted, strict=True):
        scale = float(np.max(np.abs(meas)))
        if scale > 0:
            worst = max(worst, float(np.max(np.abs(pred - meas))) / scale)
    return RelativeGainCurves(flow, n, list(pairs), t[1:], measured, predicted, worst)


def plot_relative_gain(data: DataModel | None = None, next_token: int | None = None,
                       pairs=None, flows=("reduced", "exact"), eta_y: float = 1.0,
                       eta_z: float = 1.0, t_end: float = 1e4, points: int = 120,
                       rtol: float = 1e-10, axes=None):
    """Eqn 11: ``r_{l/l'|n}(t)`` from the integrated flow beside the closed form.

    One panel per flow. For each token pair a solid line is the relative gain
    measured on the trajectory, ``f^_nl(t)^2/f^_nl'(t)^2 - f^_nl(0)^2/f^_nl'(0)^2``
    (:meth:`odeflow.Trajectory.relative_gain`), and markers are the right-hand
    side of Eqn 11, ``(f^_nl(0)^2 / f^_nl'(0)^2 - 1) chi_l(t)`` with the growth
    factor ``chi_l = exp(2 (z_ml(t) - z_ml(0))) - 1`` of the same trajectory
    (:func:`odeflow.analysis.closed_forms.relative_gain`). Theorem 3 makes them equal at
    Level R; at Level E the identity is approximate, its error growing with
    ``eta_Z / eta_Y``. Each panel states the largest difference relative to the
    largest gain of the pair (:func:`relative_gain_curves`, whose data it draws).

    Parameters
    ----------
    data, next_token, flows, eta_y, eta_z, t_end, points, axes
        As for :func:`~odeflow.plots.attention.plot_attention_map`.
    pairs : sequence of (int, int), optional
        Distinct tokens ``(l, l')`` of ``n``; :func:`default_token_pairs` by default.
    rtol : float
        Relative tolerance of the solves (``atol = 1e-3 rtol``); the Level R
        difference sits at about this level.

    Returns
    -------
    matplotlib.figure.Figure
    """
    flows = [flows] if isinstance(flows, str) else list(flows)
    curves = [relative_gain_curves(data, next_token, pairs, flow, eta_y, eta_z, t_end, points,
                                   rtol) for flow in flows]
    fig, axes = panel_axes(axes, len(flows), (4.8, 4.2))
    marker_every = max(1, points // 20)
    for ax, cur in zip(axes, curves, strict=True):
        for i, (l, lp) in enumerate(cur.pairs):
            colour = series_colour(i)
            ax.plot(cur.t, cur.measured[i], color=colour, linewidth=2,
                    label=rf"$l/l' = {l}/{lp}$")
            ax.plot(cur.t[::marker_every], cur.predicted[i, ::marker_every], linestyle="none",
                    marker="o", markersize=5, markerfacecolor="none", color=colour)
        ax.plot([], [], color="black", linewidth=2,
                label=r"flow: $(\hat f_l/\hat f_{l'})^2\,(t) - (\hat f_l/\hat f_{l'})^2\,(0)$")
        ax.plot([], [], linestyle="none", marker="o", markerfacecolor="none", color="black",
                label=r"Eqn 11: $[(\hat f_l/\hat f_{l'})^2(0) - 1]\,\chi_l(t)$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.text(0.03, 0.97, "max |Eqn 11 $-$ flow| / max |r|\n"
                f"over time and pairs: {cur.max_difference:.1e}", transform=ax.transAxes,
                ha="left", va="top", fontsize="small")
        finish_axes(ax, "time $t$", r"relative gain $r_{l/l'|n}(t)$", FLOW_TITLES[cur.flow],
                    loc="lower right")
    n = curves[0].next_token
    fig.suptitle(rf"Eqn 11 (Theorem 3), class $n = {n}$: lines from the flow, circles the "
                 rf"closed form; $\eta_Y = {eta_y:g}$, $\eta_Z = {eta_z:g}$", fontsize="medium")
    return fig
