"""The attention map ``f_n(t)`` as a tokens x time heat map (paper Fig. 4).

Shows Theorem 2 and Theorem 3 at work: attention leaves the common tokens and
moves to the distinct tokens of the class, the more so the larger ``c_{l|n}``.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import LogNorm

from odeflow.data import DataModel, validate_positive
from odeflow.errors import ValidationError
from odeflow.plots.style import HEATMAP_CMAP, log_times, panel_axes
from odeflow.solver import solve

#: Titles of the flows.
FLOW_TITLES = {"exact": "Level E (exact flow, Eqns 3-4)",
               "reduced": "Level R (reduced flow, Theorem 1)"}


def _edges(t: np.ndarray) -> np.ndarray:
    """Cell edges of log-spaced times (geometric midpoints)."""
    mid = np.sqrt(t[1:] * t[:-1])
    return np.concatenate([[t[0] ** 2 / mid[0]], mid, [t[-1] ** 2 / mid[-1]]])


def attention_rows(data: DataModel, next_token: int) -> tuple[np.ndarray, int]:
    """Tokens of the heat map, common tokens of the class first, then its distinct tokens.

    Returns
    -------
    tokens : numpy.ndarray
        Support of ``c_{.|n}`` ordered common-then-distinct (each sorted).
    n_common : int
        How many of them are common (``|G(l)| > 1``).
    """
    support = np.flatnonzero(data.probs(next_token) > 0)
    distinct = data.distinct_tokens(next_token)
    common = np.setdiff1d(support, distinct)
    return np.concatenate([common, distinct]), common.size


def plot_attention_map(data: DataModel | None = None, next_token: int | None = None,
                       flows=("exact", "reduced"), eta_y: float = 1.0, eta_z: float = 10.0,
                       t_end: float = 1e6, points: int = 160, axes=None):
    """Heat map of the attention ``f_n(t)`` (Eqn 5) over the tokens of class ``n`` and time.

    One panel per flow, on a shared logarithmic colour scale. Rows are the
    tokens in the support of ``c_{.|n}``, common tokens at the bottom and the
    distinct tokens of ``n`` above them (ordered by id, which for syn-small is
    by increasing ``c_{l|n}``); a white line separates the blocks. Time runs on a
    log axis. Theorem 2 predicts that the common tokens fade and the distinct
    tokens gain, and Theorem 3 (Eqn 11) that the gain is largest for the
    tokens with the largest ``c_{l|n}``: the map sharpens toward its top rows.

    Parameters
    ----------
    data : DataModel, optional
        ``syn-small`` by default.
    next_token : int, optional
        The class ``n``; the first class by default.
    flows : sequence of {"exact", "reduced"}
        One panel per flow.
    eta_y, eta_z : float
        Learning rates (a large ``eta_Z`` and a long horizon show the
        sharpening; at ``eta_Z = 0.1`` the map barely changes by ``t = 10^4``).
    t_end : float
        End time.
    points : int
        Log-spaced output times.
    axes : sequence of matplotlib Axes, optional
        One per flow.

    Returns
    -------
    matplotlib.figure.Figure
    """
    data = DataModel.preset("syn-small") if data is None else data
    n = int(data.next_tokens[0]) if next_token is None else int(next_token)
    data.class_index(n)
    flows = [flows] if isinstance(flows, str) else list(flows)
    for flow in flows:
        if flow not in FLOW_TITLES:
            raise ValidationError("flows", f"unknown flow {flow!r}; choose from "
                                  f"{sorted(FLOW_TITLES)}")
    t_end = validate_positive(t_end, "t_end")
    tokens, n_common = attention_rows(data, n)
    t = log_times(min(1e-2, 1e-4 * t_end), t_end, points)
    maps = []
    for flow in flows:
        traj = solve(data, flow=flow, eta_y=eta_y, eta_z=eta_z, t_span=(0.0, t_end),
                     t_eval=np.concatenate([[0.0], t]), progress=False)
        maps.append(traj.attention(n)[1:, tokens].T)
    low = min(float(m.min()) for m in maps)
    high = max(float(m.max()) for m in maps)
    norm = LogNorm(vmin=low, vmax=high)
    fig, axes = panel_axes(axes, len(flows), (4.8, 4.6))
    x_edges = _edges(t)
    mesh = None
    for ax, flow, image in zip(axes, flows, maps, strict=True):
        mesh = _map_panel(ax, x_edges, image, norm, tokens, n_common, n)
        ax.set_title(FLOW_TITLES[flow], fontsize="medium")
    cbar = fig.colorbar(mesh, ax=axes, shrink=0.9, pad=0.02)
    cbar.set_label(rf"attention $f_{{{n}l}}(t)$ (Eqn 5)")
    fig.suptitle(rf"Attention map of class $n = {n}$: $\eta_Y = {eta_y:g}$, "
                 rf"$\eta_Z = {eta_z:g}$", fontsize="medium")
    return fig


def _map_panel(ax, x_edges: np.ndarray, image: np.ndarray, norm, tokens: np.ndarray,
               n_common: int, next_token: int):
    """One flow's map: tokens (common rows first, then those distinct to ``next_token``,
    separated by a white line) over log time; returns the mesh for the colour bar."""
    y_edges = np.arange(tokens.size + 1) - 0.5
    mesh = ax.pcolormesh(x_edges, y_edges, image, norm=norm, cmap=HEATMAP_CMAP,
                         shading="flat", rasterized=True)
    ax.set_xscale("log")
    ax.set_xlim(x_edges[0], x_edges[-1])
    step = max(1, tokens.size // 10)
    ax.set_yticks(np.arange(0, tokens.size, step))
    ax.set_yticklabels([str(int(x)) for x in tokens[::step]])
    if 0 < n_common < tokens.size:
        ax.axhline(n_common - 0.5, color="white", linewidth=1.5)
    blocks = ((0, n_common, "common"), (n_common, tokens.size, f"distinct to {next_token}"))
    for lo, hi, name in blocks:
        if hi > lo:
            ax.text(1.0 - 0.02, (lo + hi) / 2 / tokens.size, name, transform=ax.transAxes,
                    rotation=90, ha="right", va="center", color="white",
                    fontsize="small", fontweight="bold")
    ax.set_xlabel("time $t$")
    ax.set_ylabel(r"token $l$ (support of $c_{\cdot|n}$)")
    return mesh
