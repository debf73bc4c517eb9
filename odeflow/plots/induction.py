"""Figures of the induction-head family (docs/induction.md): the analogues of the authors' plots.

Every function takes *trajectory-like* objects: anything with ``t``, ``a``,
``subsets``, ``subset_weights``, ``copier_logits`` and ``loss`` (an
:class:`~odeflow.results.induction.InductionTrajectory` of
:func:`odeflow.solve`, or an :class:`~odeflow.training.induction.InductionRun`
of the finite-``L`` training). Without one, the population flow of ``data``
(``ih-point`` by default) is solved to ``t_end``.

==============================  ===============================================
function                        what it shows
==============================  ===============================================
:func:`plot_subset_weights`     ``p_S(t)`` stacked over log time (the selector)
:func:`plot_classifier_weight`  ``a(t)`` on log time, flow and runs
:func:`plot_copier_logits`      copier logits ``w`` (``H x H``) at start and end
:func:`plot_loss`               loss over log time, flow and runs
:func:`plot_run_beside_flow`    the six panels of ``odeflow reproduce induction``
==============================  ===============================================
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from odeflow.data.induction import subset_label
from odeflow.errors import ValidationError
from odeflow.plots.style import (
    HEATMAP_CMAP,
    LEGEND_BELOW,
    LEGEND_FRAME,
    REFERENCE_COLOUR,
    finish_axes,
    new_figure,
    panel_axes,
    series_colour,
    single_axes,
)

#: Attributes a trajectory-like object must have.
FIELDS = ("t", "a", "subsets", "subset_weights", "copier_logits", "loss")

#: Defaults of the figures drawn from a data model alone: ``ih-point`` (exact, and quick
#: to solve; ``docs/induction.md``).
DEFAULT_PRESET = "ih-point"
DEFAULT_T_END = 1e4


def check_trajectory(traj, field: str = "trajectory"):
    """``traj`` if it has the family's accessors, else a ValidationError naming ``field``."""
    missing = [name for name in FIELDS if not hasattr(traj, name)]
    if missing:
        raise ValidationError(field, f"must be an induction trajectory or run (with "
                              f"{', '.join(FIELDS)}), got {type(traj).__name__} without "
                              f"{', '.join(missing)}")
    return traj


def flow_trajectory(data=None, t_end: float = DEFAULT_T_END, flow: str = "population"):
    """The flow of ``data`` (:data:`DEFAULT_PRESET` if ``None``) solved on ``[0, t_end]``."""
    import odeflow
    from odeflow.data.checks import validate_positive

    if data is None:
        data = odeflow.InductionData.preset(DEFAULT_PRESET)
    elif not isinstance(data, odeflow.InductionData):
        raise ValidationError("data", f"must be an InductionData (induction figures), got "
                              f"{type(data).__name__}")
    t_end = validate_positive(t_end, "t_end")
    return odeflow.solve(data, flow=flow, t_span=(0.0, t_end))


def _trajectories(trajectories, data, t_end, flow) -> dict:
    """``{label: trajectory}`` from one trajectory, a mapping, or the flow of ``data``."""
    if trajectories is None:
        return {f"{flow} flow": flow_trajectory(data, t_end, flow)}
    if not isinstance(trajectories, Mapping):
        trajectories = {"trajectory": trajectories}
    if not trajectories:
        raise ValidationError("trajectories", "needs at least one trajectory")
    return {str(k): check_trajectory(v, f"trajectories[{k!r}]")
            for k, v in trajectories.items()}


def settings_title(traj) -> str:
    """``"ih-point, population flow, loss 'nll'"`` for a solved flow (``""`` for a run)."""
    data, meta = getattr(traj, "data", None), getattr(traj, "meta", None)
    if data is None or not isinstance(meta, Mapping) or "flow" not in meta:
        return ""
    name = preset_name(data) or "custom data model"
    return f"{name}, {meta['flow']} flow, loss {meta.get('loss', 'nll')!r}"


def _with_settings(title: str, trajectories) -> str:
    """``title`` and, on a second line, the settings of the first solved flow drawn."""
    for traj in trajectories:
        settings = settings_title(traj)
        if settings:
            return f"{title}\n{settings}"
    return title


def _positive_times(traj):
    """Index of the records with ``t > 0`` (a log time axis cannot show ``t = 0``)."""
    t = np.asarray(traj.t, dtype=float)
    keep = np.flatnonzero(t > 0)
    if keep.size == 0:
        raise ValidationError("trajectory", "has no record at t > 0 to put on a log time axis")
    return t[keep], keep


def _style(i: int, label: str) -> dict:
    """Flows solid, runs (labels containing 'run' or 'GD') dashed with markers."""
    if "run" in label.lower() or "gd" in label.lower():
        return dict(color=series_colour(i), linestyle="--", marker="o", markersize=2.5,
                    linewidth=1.2)
    return dict(color=series_colour(i), linestyle="-", linewidth=2.0)


def plot_subset_weights(trajectory=None, *, data=None, t_end: float = DEFAULT_T_END,
                        flow: str = "population", ax=None, title: str | None = None):
    """``p_S(t) = c_S^2 / sum c^2`` stacked over log time: which parents the selector uses.

    The analogue of the authors' ``C_alpha`` panels: the band of ``S*`` (the
    subset of largest ``I_S``, CF-IH1) grows to fill the unit interval.
    """
    traj = check_trajectory(trajectory) if trajectory is not None \
        else flow_trajectory(data, t_end, flow)
    fig, ax = single_axes(ax)
    t, keep = _positive_times(traj)
    weights = np.asarray(traj.subset_weights, dtype=float)[keep]
    labels = [subset_label(s) for s in traj.subsets]
    colours = [series_colour(i) for i in range(len(labels))]
    ax.stackplot(t, weights.T, labels=labels, colors=colours, alpha=0.85, linewidth=0)
    ax.set_xscale("log")
    ax.set_xlim(t[0], t[-1])
    ax.set_ylim(0, 1)
    finish_axes(ax, "t (flow time; GD step k at t = k)", r"$p_S = c_S^2 / \sum c^2$",
                title or _with_settings("selector: subset weights", [traj]), loc="center left",
                bbox_to_anchor=(1.0, 0.5))
    return fig


def plot_classifier_weight(trajectories=None, *, data=None, t_end: float = DEFAULT_T_END,
                           flow: str = "population", ax=None):
    """``a(t)`` on log time; ``trajectories`` is one trajectory or ``{label: trajectory}``.

    CF-IH2: once the selector has converged ``a`` grows like
    ``(1/2) ln(e^{2 a_0} + 4 eta_a C t)``, a straight line on this axis.
    """
    return _time_series(_trajectories(trajectories, data, t_end, flow), "a", ax,
                        "classifier weight a", "classifier: a(t)")


def plot_loss(trajectories=None, *, data=None, t_end: float = DEFAULT_T_END,
              flow: str = "population", ax=None):
    """The loss over log time; ``trajectories`` as in :func:`plot_classifier_weight`."""
    return _time_series(_trajectories(trajectories, data, t_end, flow), "loss", ax, "loss",
                        "loss")


def _time_series(series: dict, name: str, ax, ylabel: str, title: str):
    """Accessor ``name`` of every trajectory over log time (flows solid, runs dashed)."""
    fig, ax = single_axes(ax)
    for i, (label, traj) in enumerate(series.items()):
        t, keep = _positive_times(traj)
        ax.plot(t, np.asarray(getattr(traj, name), dtype=float)[keep], label=label,
                **_style(i, label))
    ax.set_xscale("log")
    finish_axes(ax, "t (flow time; GD step k at t = k)", ylabel,
                _with_settings(title, series.values()))
    return fig


def plot_copier_logits(trajectory=None, *, data=None, t_end: float = DEFAULT_T_END,
                       flow: str = "population", axes=None, label: str = ""):
    """Copier logits ``w[h-1, j]`` (head ``h`` on offset ``h + j``) at the start and the end.

    Two heat maps on one colour scale, each cell annotated with its value: the
    analogue of the authors' ``W before / after`` panels. A head in ``S*``
    keeps (or sharpens) its peak at ``j = 0`` (offset ``h``).
    """
    traj = check_trajectory(trajectory) if trajectory is not None \
        else flow_trajectory(data, t_end, flow)
    if traj.copier_logits is None:
        raise ValidationError("trajectory", "has no copier logits (the exact-copier flow "
                              "fixes the copier); choose flow='population'")
    fig, (left, right) = panel_axes(axes, 2)
    w = np.asarray(traj.copier_logits, dtype=float)
    t = np.asarray(traj.t, dtype=float)
    lo, hi = float(w[[0, -1]].min()), float(w[[0, -1]].max())
    if hi == lo:
        hi = lo + 1.0
    for ax, idx, when in ((left, 0, "start"), (right, -1, "end")):
        image = _logit_map(ax, w[idx], lo, hi)
        ax.set_title(f"{label}{' ' if label else ''}copier logits, {when} (t = {t[idx]:g})",
                     fontsize="medium")
    settings = settings_title(traj)
    if settings:
        fig.suptitle(settings, fontsize="medium")
    fig.colorbar(image, ax=[left, right], shrink=0.85, label="logit w")
    return fig


def _logit_map(ax, w, lo, hi):
    H = w.shape[0]
    image = ax.imshow(w, cmap=HEATMAP_CMAP, vmin=lo, vmax=hi, aspect="equal")
    middle = 0.5 * (lo + hi)
    for h in range(H):
        for j in range(H):
            ax.text(j, h, f"{w[h, j]:.2f}", ha="center", va="center", fontsize="small",
                    color="black" if w[h, j] > middle else "white")
    ax.set_xticks(range(H), [f"j={j}" for j in range(H)])
    ax.set_yticks(range(H), [f"head {h + 1}" for h in range(H)])
    ax.set_xlabel("offset h + j")
    return image


def preset_name(data) -> str | None:
    """The name of the induction preset ``data`` equals (``"ih-paper"``), or None."""
    import odeflow

    for name in odeflow.InductionData.preset_table():
        try:
            if odeflow.InductionData.preset(name).to_dict() == data.to_dict():
                return name
        except (AttributeError, TypeError, ValueError):
            return None
    return None


def comparison_title(comp) -> str:
    """Title of :func:`plot_run_beside_flow` for a run-beside-flow comparison ``comp``
    (:func:`odeflow.training.induction.beside_flow.compare`): preset, loss, seeds, sample."""
    data = getattr(comp.flow, "data", None)
    name = preset_name(data) if data is not None else None
    seeds = len(comp.seeds)
    return (f"induction heads{f' ({name})' if name else ''}: full-batch GD (lr 1, loss "
            f"{comp.loss!r}), {seeds} seed{'s' if seeds != 1 else ''} x {comp.sample_size} "
            f"sequences of L = {comp.seq_len}, beside the population flow")


def _goal_mark(ax, t_last: float) -> None:
    """The dotted line at the first time of the goal table, labelled (when reached)."""
    from odeflow.training.induction.beside_flow import A_TOLERANCE, GOAL_TIMES, LOSS_TOLERANCE

    if t_last >= GOAL_TIMES[0]:
        ax.axvline(GOAL_TIMES[0], color=REFERENCE_COLOUR, linestyle=":", linewidth=1.0,
                   label=f"t = {GOAL_TIMES[0]:g}: first time of the goal table (a within "
                         f"{A_TOLERANCE:.0%}, loss within {LOSS_TOLERANCE:g})")


def plot_run_beside_flow(run, flow, *, run_label: str = "finite-L GD run",
                         flow_label: str = "population flow", axes=None, others=None,
                         title: str | None = None):
    """Six panels: ``a(t)``, loss, ``p_S(t)`` (flow solid, run dashed), and the copier
    logits at the start, at the flow's end and at the run's end.

    ``others``: more ``{label: trajectory}`` drawn in the ``a(t)`` and loss panels
    (e.g. the finite-``L`` level). ``title``: the figure's title line (e.g.
    :func:`comparison_title`). The ``a(t)`` and loss panels share one legend
    at the foot of the figure, with the dotted line at the goal table's first
    time. The figure of ``odeflow reproduce induction``.
    """
    check_trajectory(run, "run")
    check_trajectory(flow, "flow")
    if flow.copier_logits is None or run.copier_logits is None:
        raise ValidationError("flow", "needs copier logits (flow='population')")
    if list(map(tuple, run.subsets)) != list(map(tuple, flow.subsets)):
        raise ValidationError("run", f"subsets {run.subsets} differ from the flow's "
                              f"{flow.subsets}")
    fig, axes = new_figure(3, 2) if axes is None else panel_axes(axes, 6)
    pair = {flow_label: flow, run_label: run}
    lines = {flow_label: flow, **{k: check_trajectory(v, k) for k, v in (others or {}).items()},
             run_label: run}
    plot_classifier_weight(lines, ax=axes[0])
    plot_loss(lines, ax=axes[1])
    for ax, name in zip(axes[:2], ("classifier: a(t)", "loss"), strict=True):
        ax.set_title(name, fontsize="medium")  # the settings go in the figure's title
    t_last = max(float(np.max(traj.t)) for traj in lines.values())
    for ax in axes[:2]:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        _goal_mark(ax, t_last)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 2),
               **LEGEND_FRAME)
    ax = axes[2]
    for i, subset in enumerate(flow.subsets):
        for label, traj in pair.items():
            t, keep = _positive_times(traj)
            style = _style(i, label)
            style.pop("marker", None)
            ax.plot(t, np.asarray(traj.subset_weights)[keep, i], **style,
                    label=subset_label(subset) if traj is flow else None)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    finish_axes(ax, "t (flow time; GD step k at t = k)", r"$p_S$ (flow solid, run dashed)",
                "selector: subset weights", ncol=4, **LEGEND_BELOW)
    w_run = np.asarray(run.copier_logits, dtype=float)
    w_flow = np.asarray(flow.copier_logits, dtype=float)
    maps = ((w_flow[0], f"start (t = {float(flow.t[0]):g})"),
            (w_flow[-1], f"{flow_label}, t = {float(flow.t[-1]):g}"),
            (w_run[-1], f"{run_label}, t = {float(run.t[-1]):g}"))
    lo = min(float(m.min()) for m, _ in maps)
    hi = max(float(m.max()) for m, _ in maps)
    for ax, (w, when) in zip(axes[3:], maps, strict=True):
        image = _logit_map(ax, w, lo, hi if hi > lo else lo + 1.0)
        ax.set_title(f"copier logits: {when}", fontsize="small")
    fig.colorbar(image, ax=list(axes[3:]), shrink=0.85, label="logit w")
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig
