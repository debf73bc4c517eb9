"""Attention entropy over the distinct tokens against the learning rates (paper Fig. 6).

Checks the learning-rate predictions of Sec. 6 (Theorem 4, CF6): at a fixed
horizon a larger ``eta_Z`` gives a larger ``B_n`` and a sparser attention on the
distinct tokens (lower entropy), a larger ``eta_Y`` at fixed ``eta_Z`` a denser
one (higher entropy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.data import DataModel, validate_positive
from odeflow.errors import ValidationError
from odeflow.plots.attention import FLOW_TITLES
from odeflow.plots.style import (
    LEGEND_BELOW,
    REFERENCE_COLOUR,
    finish_axes,
    label_log_ticks,
    panel_axes,
    series_colour,
)
from odeflow.solver import solve


def distinct_entropy(traj, next_token: int | None = None) -> np.ndarray:
    """Entropy of the attention restricted to the distinct tokens, over time.

    For class ``n``: ``p_l = f_nl / sum_{l' in G_DT(n)} f_nl'`` over
    ``l in G_DT(n)`` and ``H_n = -sum_l p_l ln p_l`` (nats; at most
    ``ln |G_DT(n)|``). Without ``next_token``, the mean of ``H_n`` over the
    classes that have distinct tokens.

    Parameters
    ----------
    traj : Trajectory
    next_token : int, optional

    Returns
    -------
    numpy.ndarray, shape (n_times,)
    """
    data = traj.data
    classes = data.next_tokens if next_token is None else [next_token]
    values = []
    for n in classes:
        distinct = data.distinct_tokens(int(n))
        if distinct.size == 0:
            continue
        f = traj.attention(int(n))[:, distinct]
        p = f / f.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            values.append(-np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=1))
    if not values:
        raise ValidationError("data", "no class has distinct tokens")
    return np.mean(values, axis=0)


@dataclass
class EntropyGrid:
    """Attention entropy at ``t_end`` over a grid of learning rates.

    Attributes
    ----------
    eta_y : numpy.ndarray, shape (a,)
    eta_z : numpy.ndarray, shape (b,)
    entropy : numpy.ndarray, shape (a, b)
        ``entropy[i, j]``: mean over classes of the distinct-token entropy
        (:func:`distinct_entropy`) at ``t_end`` for ``eta_y[i]``, ``eta_z[j]``.
    initial_entropy : float
        The same at ``t = 0`` (it does not depend on the rates).
    max_entropy : float
        ``ln |G_DT(n)|`` averaged over the classes (uniform attention).
    t_end : float
    flow : str
    """

    eta_y: np.ndarray
    eta_z: np.ndarray
    entropy: np.ndarray
    initial_entropy: float
    max_entropy: float
    t_end: float
    flow: str


def entropy_grid(data: DataModel | None = None, eta_ys=(0.3, 1.0, 3.0),
                 eta_zs=(0.1, 0.3, 1.0, 3.0, 10.0), t_end: float = 1e4,
                 flow: str = "reduced") -> EntropyGrid:
    """Distinct-token attention entropy at ``t_end`` for every ``(eta_Y, eta_Z)``.

    The data of :func:`plot_entropy` (paper Fig. 6).

    Parameters
    ----------
    data : DataModel, optional
        ``syn-small`` by default.
    eta_ys, eta_zs : sequence of float
        The grid.
    t_end : float
        The end of training.
    flow : {"reduced", "exact"}
        Level R (default) or Level E.

    Returns
    -------
    EntropyGrid
    """
    data = DataModel.preset("syn-small") if data is None else data
    if flow not in FLOW_TITLES:
        raise ValidationError("flow", f"unknown flow {flow!r}; choose from {sorted(FLOW_TITLES)}")
    t_end = validate_positive(t_end, "t_end")
    ys = np.array([validate_positive(x, "eta_ys") for x in eta_ys])
    zs = np.array([validate_positive(x, "eta_zs") for x in eta_zs])
    if ys.size == 0 or zs.size == 0:
        raise ValidationError("eta_ys" if ys.size == 0 else "eta_zs", "is empty")
    entropy = np.empty((ys.size, zs.size))
    initial = np.nan
    for i, ey in enumerate(ys):
        for j, ez in enumerate(zs):
            traj = solve(data, flow=flow, eta_y=ey, eta_z=ez, t_span=(0.0, t_end),
                         t_eval=[0.0, t_end], progress=False)
            values = distinct_entropy(traj)
            entropy[i, j] = values[-1]
            initial = values[0]
    sizes = [data.distinct_tokens(int(n)).size for n in data.next_tokens]
    max_entropy = float(np.mean([np.log(k) for k in sizes if k > 0]))
    return EntropyGrid(ys, zs, entropy, float(initial), max_entropy, t_end, flow)


def plot_entropy(grid: EntropyGrid | None = None, axes=None, **grid_options):
    """Distinct-token attention entropy at the end of training against ``eta_Z`` and ``eta_Y``.

    Left panel: entropy against ``eta_Z``, one line per ``eta_Y``; right panel:
    against ``eta_Y``, one line per ``eta_Z`` (paper Fig. 6). Dotted lines: the
    entropy at ``t = 0`` and ``ln |G_DT(n)|`` (uniform attention). Theorem 4
    (CF6, Eqns 14, 129) predicts that a larger ``eta_Z`` lowers the entropy
    (larger ``B_n``, sparser attention) and a larger ``eta_Y`` at fixed
    ``eta_Z`` raises it.

    Parameters
    ----------
    grid : EntropyGrid, optional
        Precomputed data; :func:`entropy_grid` with ``grid_options`` by default.
    axes : sequence of two matplotlib Axes, optional
    **grid_options
        Passed to :func:`entropy_grid` (``data``, ``eta_ys``, ``eta_zs``, ``t_end``,
        ``flow``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if grid is None:
        grid = entropy_grid(**grid_options)
    elif grid_options:
        raise ValidationError(sorted(grid_options)[0], "give either a grid or grid options")
    fig, (ax_z, ax_y) = panel_axes(axes, 2, (4.8, 4.6))
    for i, ey in enumerate(grid.eta_y):
        ax_z.plot(grid.eta_z, grid.entropy[i], color=series_colour(i), marker="o",
                  label=rf"$\eta_Y = {ey:g}$")
    for j, ez in enumerate(grid.eta_z):
        ax_y.plot(grid.eta_y, grid.entropy[:, j], color=series_colour(j), marker="s",
                  label=rf"$\eta_Z = {ez:g}$")
    for ax, xlabel, title, ticks in (
            (ax_z, r"attention learning rate $\eta_Z$", r"against $\eta_Z$, one line per $\eta_Y$",
             grid.eta_z),
            (ax_y, r"decoder learning rate $\eta_Y$", r"against $\eta_Y$, one line per $\eta_Z$",
             grid.eta_y)):
        ax.axhline(grid.initial_entropy, color=REFERENCE_COLOUR, linestyle=":",
                   label=r"$t = 0$")
        ax.axhline(grid.max_entropy, color=REFERENCE_COLOUR, linestyle="--", linewidth=0.8,
                   label=r"uniform: $\ln |G_{DT}(n)|$")
        ax.set_xscale("log")
        label_log_ticks(ax, ticks)
        finish_axes(ax, xlabel, r"entropy of $f_n$ on $G_{DT}(n)$ (nats)", title, ncol=2,
                    **LEGEND_BELOW)
    fig.suptitle(f"Attention entropy on the distinct tokens at $t = {grid.t_end:g}$: "
                 f"{FLOW_TITLES[grid.flow]}", fontsize="medium")
    return fig
