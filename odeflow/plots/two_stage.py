"""Figures of the two-stage family (``docs/two_stage.md``), odeflow's model of Gong et al. 2025.

==============================  =====================================================
function                        what it shows
==============================  =====================================================
:func:`plot_accuracy`           accuracy per query kind over log ``t``: flow, runs
:func:`plot_spectra`            singular values of ``W_P`` and ``W_Q`` over log ``t``
:func:`plot_rank_truncation`    accuracy per kind against the singular values kept
:func:`plot_reproduction`       the four panels of ``odeflow reproduce two-stage``
==============================  =====================================================

The flow is a :class:`~odeflow.results.two_stage.TwoStageTrajectory` (population
accuracy); runs come in a :class:`~odeflow.training.two_stage.Comparison` (held-out
accuracy of the finite-``N`` attention, mean and standard deviation over seeds).
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError
from odeflow.plots.style import (
    finish_axes,
    mark_time,
    new_figure,
    panel_axes,
    series_colour,
    single_axes,
)

#: Query kinds, their labels and colours.
KINDS = ("p_only", "q_only", "both")
KIND_LABELS = {"p_only": "P-only queries", "q_only": "Q-only queries",
               "both": "both-feature queries"}
KIND_COLOURS = {kind: series_colour(i) for i, kind in enumerate(KINDS)}
#: Colours of the two blocks' singular values.
BLOCK_COLOURS = {"P": series_colour(0), "Q": series_colour(1)}


def _positive(t) -> np.ndarray:
    """Indices of the times ``t > 0`` (a log axis cannot show ``t = 0``)."""
    keep = np.flatnonzero(np.asarray(t, dtype=float) > 0)
    if keep.size == 0:
        raise ValidationError("t", "has no time t > 0 to put on a log time axis")
    return keep


def _mark_stages(ax, stages) -> None:
    """Dotted lines at ``t_P`` and ``t_Q`` of a stage row (if finite)."""
    if not stages:
        return
    for key, label in (("t_P", "$t_P$"), ("t_Q", "$t_Q$")):
        t = stages.get(key)
        if t is not None and np.isfinite(t) and t > 0:
            mark_time(ax, t)
            ax.annotate(label, (t, 0.02), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", fontsize="small")


def plot_accuracy(flow, comparison=None, ax=None, stages=None, kinds=KINDS):
    """Accuracy per query kind over log time: the flow's lines, the runs' mean +- std.

    Parameters
    ----------
    flow : TwoStageTrajectory
        Population accuracy (lines).
    comparison : Comparison, optional
        Runs at their recorded times (markers with error bars: mean +- std over seeds).
    ax : matplotlib Axes, optional
    stages : dict, optional
        ``t_P``, ``t_Q`` to mark.
    kinds : sequence of str
        Among ``p_only``, ``q_only``, ``both``.
    """
    fig, ax = single_axes(ax)
    keep = _positive(flow.t)
    for kind in kinds:
        colour = KIND_COLOURS[kind]
        suffix = ", flow" if comparison is not None else ""
        ax.plot(flow.t[keep], getattr(flow, f"accuracy_{kind}")[keep], color=colour,
                label=KIND_LABELS[kind] + suffix)
        if comparison is not None:
            t = comparison.t
            k = _positive(t)
            mean = comparison.run_mean(f"accuracy_{kind}")
            std = comparison.run_std(f"accuracy_{kind}")
            ax.errorbar(t[k], mean[k], yerr=std[k], color=colour, linestyle="none",
                        marker="o", markersize=3, markerfacecolor="white", elinewidth=0.8,
                        label=f"{KIND_LABELS[kind]}, runs")
    ax.set_xscale("log")
    _mark_stages(ax, stages)
    finish_axes(ax, "flow time t", "accuracy", "Accuracy per query kind",
                fontsize="x-small", loc="center left")
    return fig, ax


def plot_spectra(flow, ax=None, stages=None, comparison=None):
    """Singular values of ``W_P`` (solid) and ``W_Q`` (dashed) over log time, log scale.

    The background is shaded where ``W_Q`` holds the flow's largest singular value of
    ``W``. With a ``comparison``, the runs' largest singular value of each block (mean
    over seeds) as markers.
    """
    fig, ax = single_axes(ax)
    keep = _positive(flow.t)
    t = flow.t[keep]
    for block, sv, style in (("P", flow.singular_values_p, "-"),
                             ("Q", flow.singular_values_q, "--")):
        for j in range(sv.shape[1]):
            ax.plot(t, sv[keep, j], color=BLOCK_COLOURS[block], linestyle=style,
                    alpha=1.0 if j == 0 else 0.55,
                    label=f"$W_{block}$: " + ("largest" if j == 0 else f"#{j + 1}"))
    q_top = flow.singular_values_q[keep, 0] > flow.singular_values_p[keep, 0]
    if np.any(q_top):
        ax.fill_between(t, 0, 1, where=q_top, transform=ax.get_xaxis_transform(),
                        color=BLOCK_COLOURS["Q"], alpha=0.08, linewidth=0,
                        label="largest is $W_Q$'s")
    if comparison is not None:
        k = _positive(comparison.t)
        for block, name in (("P", "singular_values_p"), ("Q", "singular_values_q")):
            top = np.mean([getattr(r, name)[:, 0] for r in comparison.runs], axis=0)
            ax.plot(comparison.t[k], top[k], color=BLOCK_COLOURS[block], linestyle="none",
                    marker="o", markersize=3, markerfacecolor="white",
                    label=f"$W_{block}$: largest, runs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _mark_stages(ax, stages)
    title = "Singular values of $W_P$, $W_Q$" + ("" if comparison is not None else " (flow)")
    finish_axes(ax, "flow time t", "singular value", title, fontsize="x-small",
                loc="upper left", ncols=2)
    return fig, ax


def plot_rank_truncation(rows, axes=None, kinds=KINDS):
    """Accuracy per query kind against the number of singular values of ``W`` kept.

    Parameters
    ----------
    rows : list of dict
        Rows of ``rank_truncation.csv`` (``checkpoint``, ``t``, ``rank_kept``,
        ``acc_<kind>``, and the runs' ``run_acc_<kind>_mean`` where present); one panel
        per checkpoint, in order of appearance.
    axes : sequence of Axes, optional
        One per checkpoint.
    """
    names = list(dict.fromkeys(r["checkpoint"] for r in rows))
    if not names:
        raise ValidationError("rows", "needs at least one rank-truncation row")
    fig, axes = panel_axes(axes, len(names))
    for ax, name in zip(axes, names, strict=True):
        mine = [r for r in rows if r["checkpoint"] == name]
        ranks = [r["rank_kept"] for r in mine]
        for kind in kinds:
            ax.plot(ranks, [r[f"acc_{kind}"] for r in mine], color=KIND_COLOURS[kind],
                    marker="o", markersize=4, label=f"{KIND_LABELS[kind]}, flow")
            if f"run_acc_{kind}_mean" in mine[0]:
                ax.plot(ranks, [r[f"run_acc_{kind}_mean"] for r in mine],
                        color=KIND_COLOURS[kind], linestyle="--", marker="s", markersize=6,
                        markerfacecolor="none", label=f"{KIND_LABELS[kind]}, runs")
        ax.axhline(0.5, color="#999999", linewidth=0.8, linestyle=":")
        ax.set_xticks(ranks)
        ax.set_ylim(0.0, 1.03)
        finish_axes(ax, "singular values of W kept", "accuracy",
                    f"Rank truncation, {name} (t = {mine[0]['t']:.3g})", fontsize="x-small",
                    loc="lower right")
    return fig, axes


def plot_reproduction(comparison, stages=None, truncation=None):
    """The figure of ``odeflow reproduce two-stage``: accuracy (flow and runs), spectra,
    rank truncation at ``t_P`` and ``T``; a new 2 x 2 figure."""
    fig, axes = new_figure(2, 2)
    flow = comparison.flow_all if comparison.flow_all is not None else comparison.flow
    plot_accuracy(flow, comparison, axes[0], stages)
    plot_spectra(flow, axes[1], stages, comparison)
    if truncation:
        plot_rank_truncation(truncation, axes[2:])
    else:
        for ax in axes[2:]:
            ax.set_visible(False)
    s = comparison.settings
    fig.suptitle(f"Two-stage model (odeflow's), {len(comparison.runs)} runs: N = {s['seq_len']}, "
                 f"eta = {s['eta']:g}, {s['sample']} prompts", fontsize="medium")
    return fig


__all__ = ["plot_accuracy", "plot_rank_truncation", "plot_reproduction",
           "plot_spectra"]
