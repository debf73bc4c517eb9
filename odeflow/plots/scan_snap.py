"""``B_n(t)`` over learning rates: scanning, then snapping (CF6; paper Figs. 3 and 9).

Checks Theorem 4 (Eqns 13-14, 124, 129): the integrated rate ``B_n(t)`` of
Eqn 98, from Level R (or the Sec. 6 system) beside its closed form CF6.
"""

from __future__ import annotations

import numpy as np

from odeflow.analysis.closed_forms import snap_B, transition_time
from odeflow.data import DataModel, SequenceClass, validate_positive
from odeflow.errors import ValidationError
from odeflow.fields.snap import snap_parameters
from odeflow.plots.style import finish_axes, log_times, panel_axes, series_colour
from odeflow.solver import solve, solve_snap


def single_common_token_model(vocab_size: int = 30, common_prob: float = 0.1,
                              num_distinct: int = 10, num_classes: int = 2) -> DataModel:
    """A data model in the setting of Theorem 4: one query token, one shared common token.

    Query token 0 for every class; next tokens ``1 .. K``; contextual token 0
    is the common token with ``c_{0|n} = common_prob`` in every class; class
    ``k`` has ``num_distinct`` distinct tokens ``1 + k * num_distinct ..`` with
    weights ``linspace(0.5, 1.5, num_distinct)`` scaled to ``1 - common_prob``
    (the ramp of shared-query-small). A small ``common_prob`` keeps the feature norms
    near ``rho_0``, as Theorem 4 assumes.

    Parameters
    ----------
    vocab_size : int
        ``M``; must exceed ``K * num_distinct``.
    common_prob : float
        ``c_{c|n}`` in ``(0, 1)``.
    num_distinct : int
        Distinct tokens per class.
    num_classes : int
        ``K >= 2``.

    Returns
    -------
    DataModel
    """
    common_prob = validate_positive(common_prob, "common_prob")
    if common_prob >= 1:
        raise ValidationError("common_prob", f"must be < 1, got {common_prob!r}")
    if num_classes < 2:
        raise ValidationError("num_classes", f"must be >= 2, got {num_classes!r}")
    if num_distinct < 1:
        raise ValidationError("num_distinct", f"must be >= 1, got {num_distinct!r}")
    if vocab_size <= num_classes * num_distinct:
        raise ValidationError("vocab_size", f"must exceed num_classes * num_distinct = "
                              f"{num_classes * num_distinct}, got {vocab_size!r}")
    ramp = np.linspace(0.5, 1.5, num_distinct)
    ramp = ramp / ramp.sum() * (1.0 - common_prob)
    classes = []
    for k in range(num_classes):
        probs = {0: common_prob}
        probs.update({1 + k * num_distinct + i: float(p) for i, p in enumerate(ramp)})
        classes.append(SequenceClass(k + 1, 0, probs, normalize=True))
    return DataModel(vocab_size, classes)


def plot_scan_snap(data: DataModel | None = None, eta_ys=(0.1, 0.3, 1.0, 3.0),
                   eta_zs=(0.1, 0.3, 1.0, 3.0), fixed_eta_z: float = 1.0,
                   fixed_eta_y: float = 1.0, flow: str = "reduced", t_end: float = 1e6,
                   points: int = 160, axes=None):
    """``B_n(t)`` on log-log axes over a grid of learning rates, numerics beside CF6.

    Left panel: ``eta_Z`` fixed, ``eta_Y`` varied (paper Fig. 3); right panel:
    ``eta_Y`` fixed, ``eta_Z`` varied. Solid lines are the numerics (Level R's
    recorded ``B_n``, Eqn 98, or the Sec. 6 system), dashed lines the closed
    form of Theorem 4 (CF6, Eqns 14 and 129)
    ``B_n = (pi/2) ln(1 + a e^{2 z_c(0)} (M-1) eta_Z h(t)^2 / (M eta_Y pi))``
    with ``a`` and ``z_c(0)`` from :func:`~odeflow.fields.snap.snap_parameters`.
    A marker shows ``B_n(t_0)`` on each curve. Before ``t_0`` (scanning) ``B``
    grows like ``t^2``; after it (snapping) like ``ln ln t``. The third panel
    plots those ``B_n(t_0)`` against ``eta_Z / eta_Y`` beside CF6 at ``t_0``:
    ``B_n(t_0)`` depends on the ratio only (paper Fig. 9), so every run falls on
    one curve.

    Parameters
    ----------
    data : DataModel, optional
        One query token, one common token shared with equal weight by all
        classes, uniform weights; :func:`single_common_token_model` by default.
    eta_ys, eta_zs : sequence of float
        Learning rates varied in the left and right panel.
    fixed_eta_z, fixed_eta_y : float
        The rate held fixed in the left and right panel.
    flow : {"reduced", "snap"}
        Numerics: Level R (Theorem 1) or the scalar system of Sec. 6.
    t_end : float
        End of the time axis.
    points : int
        Output times per curve (log-spaced).
    axes : sequence of three matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    if flow not in ("reduced", "snap"):
        raise ValidationError("flow", f"must be 'reduced' or 'snap', got {flow!r}")
    data = single_common_token_model() if data is None else data
    params = snap_parameters(data)
    t_end = validate_positive(t_end, "t_end")
    rates = {"eta_y": [validate_positive(x, "eta_ys") for x in eta_ys],
             "eta_z": [validate_positive(x, "eta_zs") for x in eta_zs]}
    fixed_eta_z = validate_positive(fixed_eta_z, "fixed_eta_z")
    fixed_eta_y = validate_positive(fixed_eta_y, "fixed_eta_y")
    M, pi = params["vocab_size"], params["pi"]
    t0_min = min(float(transition_time(M, ey, pi)) for ey in [*rates["eta_y"], fixed_eta_y])
    grid = log_times(min(1e-2 * t0_min, 1e-3 * t_end), t_end, points)
    setting = {**params, "data": data, "flow": flow, "n": int(data.next_tokens[0]),
               "t_end": t_end, "grid": grid}
    fig, (ax_y, ax_z, ax_r) = panel_axes(axes, 3, (4.6, 4.4))
    ratios = _rate_panel(ax_y, ax_r, [(ey, fixed_eta_z) for ey in rates["eta_y"]], "eta_y",
                         "o", rf"$\eta_Z = {fixed_eta_z:g}$ fixed: vary $\eta_Y$ (Fig. 3)",
                         setting)
    ratios += _rate_panel(ax_z, ax_r, [(fixed_eta_y, ez) for ez in rates["eta_z"]], "eta_z",
                          "s", rf"$\eta_Y = {fixed_eta_y:g}$ fixed: vary $\eta_Z$", setting)
    _ratio_panel(ax_r, ratios, setting)
    source = "Level R (Theorem 1)" if flow == "reduced" else "Sec. 6 system"
    fig.suptitle(rf"Scan and snap: $B_n(t)$ from {source} (solid) and CF6 (dashed); "
                 rf"$M = {M}$, $a = {params['a']:.3g}$", fontsize="medium")
    return fig


def _numeric_B(setting: dict, eta_y: float, eta_z: float, t_eval: np.ndarray) -> np.ndarray:
    """``B_n`` at ``t_eval``: Level R's recorded series (Eqn 98) or the Sec. 6 system's."""
    span = (0.0, setting["t_end"])
    if setting["flow"] == "reduced":
        return solve(setting["data"], flow="reduced", eta_y=eta_y, eta_z=eta_z, t_span=span,
                     t_eval=t_eval, progress=False).B(setting["n"])
    return solve_snap(setting["data"], eta_y=eta_y, eta_z=eta_z, t_span=span, t_eval=t_eval,
                      progress=False).B


def _rate_panel(ax, ax_r, pairs, varied: str, marker: str, title: str,
                setting: dict) -> list[float]:
    """One panel of ``B_n(t)`` (numerics solid, CF6 dashed) over the ``(eta_y, eta_z)`` pairs.

    Marks ``B_n(t_0)`` on each curve and on the ratio panel ``ax_r``; returns the
    ratios ``eta_z / eta_y`` marked there.
    """
    M, pi, a, zc0, t_end = (setting[k] for k in ("vocab_size", "pi", "a", "zc0", "t_end"))
    ratios = []
    for i, (ey, ez) in enumerate(pairs):
        colour = series_colour(i)
        t0 = float(transition_time(M, ey, pi))
        t_eval = np.concatenate([[0.0], np.union1d(setting["grid"], [t0] if t0 < t_end else [])])
        numeric = _numeric_B(setting, ey, ez, t_eval)
        value = ey if varied == "eta_y" else ez
        symbol = r"\eta_Y" if varied == "eta_y" else r"\eta_Z"
        ax.plot(t_eval[1:], numeric[1:], color=colour, linewidth=2.2, alpha=0.85,
                label=rf"${symbol} = {value:g}$")
        ax.plot(t_eval[1:], snap_B(t_eval[1:], M, ey, ez, pi, a, zc0), color="black",
                linestyle=(0, (3, 2)), linewidth=0.9)
        if t0 < t_end:
            b0 = float(numeric[np.searchsorted(t_eval, t0)])
            ax.plot([t0], [b0], marker=marker, color=colour, markeredgecolor="black",
                    markersize=6, linestyle="none")
            ax_r.plot([ez / ey], [b0], marker=marker, color=colour, markeredgecolor="black",
                      markersize=7, linestyle="none")
            ratios.append(ez / ey)
    ax.plot([], [], color="black", linestyle=(0, (3, 2)), linewidth=0.9,
            label="CF6 (Eqns 14, 129)")
    ax.plot([], [], marker=marker, color="white", markeredgecolor="black",
            linestyle="none", label=r"$B_n(t_0)$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.text(0.03, 0.97, "scanning ($t < t_0$):\n" r"$B_n \propto t^2$", ha="left",
            va="top", transform=ax.transAxes, fontsize="small")
    ax.text(0.97, 0.55, "snapping ($t > t_0$):\n" r"$B_n \sim \ln \ln t$", ha="right",
            va="center", transform=ax.transAxes, fontsize="small")
    finish_axes(ax, "time $t$", rf"$B_n(t)$, class $n = {setting['n']}$", title,
                loc="lower right")
    return ratios


def _ratio_panel(ax_r, ratios: list[float], setting: dict) -> None:
    """``B_n(t_0)`` against ``eta_Z / eta_Y`` beside CF6 at ``t_0`` (paper Fig. 9)."""
    M, pi, a, zc0 = (setting[k] for k in ("vocab_size", "pi", "a", "zc0"))
    if ratios:
        r = np.geomspace(min(ratios) / 2, max(ratios) * 2, 100)
        t0_unit = float(transition_time(M, 1.0, pi))
        ax_r.plot(r, snap_B(t0_unit, M, 1.0, r, pi, a, zc0), color="black",
                  linestyle=(0, (3, 2)), linewidth=0.9,
                  label=r"CF6 at $t_0$: a function of $\eta_Z/\eta_Y$")
    ax_r.plot([], [], marker="o", color="white", markeredgecolor="black", linestyle="none",
              label=r"left panel (vary $\eta_Y$)")
    ax_r.plot([], [], marker="s", color="white", markeredgecolor="black", linestyle="none",
              label=r"middle panel (vary $\eta_Z$)")
    if ratios:
        ax_r.set_xscale("log")
        ax_r.set_yscale("log")
    else:  # nothing to place on log axes: say why instead of failing to draw
        ax_r.text(0.5, 0.5, f"no curve reaches its $t_0$ before $t = {setting['t_end']:g}$",
                  ha="center", va="center", transform=ax_r.transAxes, fontsize="small")
    finish_axes(ax_r, r"$\eta_Z / \eta_Y$", rf"$B_n(t_0)$, class $n = {setting['n']}$",
                r"$B_n(t_0)$ depends on $\eta_Z/\eta_Y$ only (Fig. 9)", loc="upper left")
