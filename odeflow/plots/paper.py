"""Figures of the paper's experiments (Figs. 4-6, 11-12) with the levels beside the runs.

Every axis that puts runs beside first-order flows is the *flow time* of the
warm-up map ``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)`` (docs/levels.md,
:meth:`odeflow.training.Protocol.flow_time`); the step ``k`` is shown on a
secondary axis.
"""

from __future__ import annotations

import numpy as np

from odeflow.analysis.measures import distinct_attention
from odeflow.analysis.paper import RECALL_THRESHOLDS
from odeflow.plots.style import (
    LEGEND_FRAME,
    finish_axes,
    label_log_ticks,
    new_figure,
    panel_axes,
    series_colour,
)

LEVEL_STYLE = {"E": {"linestyle": "--", "color": "black", "label": "Level E (exact flow)"},
               "R": {"linestyle": ":", "color": "#666666", "label": "Level R (reduced flow)"},
               "T": {"linestyle": "-.", "color": "#b8860b", "label": "Level T (finite-T flow)"}}


#: Rows of :func:`plot_fig6` for the optimiser flows (docs/optimisers.md), when present.
OPTFLOW_TITLES = {"optflow_T_mean": "heavy-ball flow, Level T (runs' starts, step axis)",
                  "optflow_E_mean": "heavy-ball flow, Level E (runs' starts, step axis)"}
#: Line styles of the optimiser flows beside the runs.
OPTFLOW_STYLE = {"T": {"color": "#cc79a7", "linewidth": 1.8},
                 "E": {"color": "#009e73", "linewidth": 1.3, "linestyle": (0, (5, 2))}}


#: Axis label of the flow time of step ``k`` (the warm-up map, given in full in the caption).
TIME_LABEL = r"flow time $t_k$ of step $k$"

#: The warm-up map, for the figures' captions.
WARM_UP_MAP = r"$t_k = [k - \mu(1-\mu^k)/(1-\mu)]/(1-\mu)$"


def _step_axis(ax, protocol) -> None:
    if protocol.optimizer == "sgd" and protocol.momentum:
        # the warm-up map on a grid, extended linearly past its ends (matplotlib asks for
        # values off the data too, negative ones included)
        k = np.linspace(0.0, 4.0 * max(protocol.steps, 10), 4001)
        t = protocol.flow_time(k)

        def extend(x, xs, ys):
            x = np.asarray(x, dtype=float)
            lo = (ys[1] - ys[0]) / (xs[1] - xs[0])
            hi = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            return np.where(x < xs[0], ys[0] + (x - xs[0]) * lo,
                            np.where(x > xs[-1], ys[-1] + (x - xs[-1]) * hi,
                                     np.interp(x, xs, ys)))

        top = ax.secondary_xaxis("top", functions=(lambda x: extend(x, t, k),
                                                   lambda x: extend(x, k, t)))
        from matplotlib.ticker import MaxNLocator

        ticks = MaxNLocator(5, integer=True).tick_values(0, protocol.steps)
        top.set_xticks([x for x in ticks if 0 <= x <= protocol.steps])
        top.set_xlabel(r"SGD step $k$", fontsize="small")
        ax.title.set_position((0.5, 1.14))


def _band(ax, t, values, colour, label, std=None):
    """Mean and one sd over the seeds (axis 0 of ``values``), or ``values`` as the mean
    beside a given ``std``."""
    mean, std = (values.mean(axis=0), values.std(axis=0)) if std is None else (values, std)
    ax.plot(t, mean, color=colour, linewidth=2.0, label=label)
    ax.fill_between(t, mean - std, mean + std, color=colour, alpha=0.25, linewidth=0)


def _optflow_t(exp) -> np.ndarray:
    """Flow times of ``exp``'s optimiser-flow entropy (its ``optflow_steps`` if recorded
    at fewer steps than the runs)."""
    steps = getattr(exp, "optflow_steps", None)
    if steps is None:
        return exp.run.t
    return exp.run.t[np.searchsorted(exp.run.steps, steps)]


def plot_fig4(exp, next_token: int | None = None, axes=None):
    """Fig. 4: loss and distinct-token entropy over flow time, and the attention map ``c_n``.

    Left: mean cross-entropy of each step's batch (mean and one standard
    deviation over the seeds) beside the population loss ``-J`` of Level E
    and Level R at the mapped flow time. Middle: the distinct-token entropy
    (the measure of the paper's Fig. 6). Right: the attention ``c_n`` over the
    distinct tokens of one class over training (mean over seeds). The runs
    and each flow have one label and style in both panels; one legend below
    them, whose title gives the warm-up map ``t_k`` and, with the heavy-ball
    flows, their start half a step before step 0 (the staggered reading,
    docs/optimisers.md): their loss at ``k = 0`` is below the runs' ``ln M``.
    """
    run, data = exp.run, exp.data
    fig, (ax_l, ax_h, ax_m) = panel_axes(axes, 3, (4.6, 5.4))
    t = run.t
    runs = f"{run.protocol.optimizer.upper()} runs, {_count(len(run.seeds), 'seed')} " \
           "(mean $\\pm$ sd)"
    optflow = {name: f"heavy-ball flow, Level {name} (step $k$ drawn at $t_k$)"
               for name in getattr(exp, "optflow_loss", {})}
    _band(ax_l, run.loss_t, run.loss, series_colour(0), runs)
    for name, tr in exp.levels.items():
        ax_l.plot(t, -tr.objective, **LEVEL_STYLE.get(name, {"label": f"Level {name}"}))
    for name, loss in getattr(exp, "optflow_loss", {}).items():
        ax_l.plot(t, loss, **OPTFLOW_STYLE.get(name, {}), label=optflow[name])
    ax_l.set_yscale("log")
    finish_axes(ax_l, TIME_LABEL, "cross-entropy loss",
                "loss (batch; levels: $-J$, Eqn 2)", legend=False)
    _step_axis(ax_l, run.protocol)
    _band(ax_h, t, exp.entropy, series_colour(0), runs)
    for name, H in exp.level_entropy.items():
        ax_h.plot(t, H, **LEVEL_STYLE.get(name, {"label": f"Level {name}"}))
    for name, H in getattr(exp, "optflow_entropy", {}).items():
        ax_h.plot(_optflow_t(exp), H, **OPTFLOW_STYLE.get(name, {}),
                  label=optflow.get(name, f"heavy-ball flow, Level {name}"))
    finish_axes(ax_h, TIME_LABEL, "entropy of $c_n$ on $G_{DT}(n)$ (nats)",
                "distinct-token entropy (Fig. 6 measure)", legend=False)
    _step_axis(ax_h, run.protocol)
    _shared_legend(fig, (ax_l, ax_h), _fig4_caption(exp))
    n = int(data.next_tokens[0]) if next_token is None else int(next_token)
    i = data.class_index(n)
    c = distinct_attention(data, run.z_active).mean(axis=0)[:, i, :]   # (n_t, L)
    distinct = data.distinct_tokens(n)
    cols = np.searchsorted(data.active_tokens, distinct)
    mid = (t[1:] + t[:-1]) / 2 if t.size > 1 else t
    x_edges = np.concatenate([[t[0]], mid, [t[-1]]]) if t.size > 1 else np.array([t[0], 1.0])
    image = ax_m.pcolormesh(x_edges, np.arange(distinct.size + 1) - 0.5, c[:, cols].T,
                            shading="flat", cmap="cividis")
    ax_m.set_yticks(np.arange(distinct.size))
    ax_m.set_yticklabels([str(int(x)) for x in distinct])
    fig.colorbar(image, ax=ax_m, label=f"$c_{{{n}}}(l)$ (mean over seeds)")
    ax_m.set_xlabel(TIME_LABEL)
    ax_m.set_ylabel(f"distinct token $l$ of class {n}")
    ax_m.set_title(f"attention map $c_{{{n}}}$ over training")
    p = run.protocol
    fig.suptitle(f"{p.optimizer.upper()} on M = {data.vocab_size}: $\\eta_Y = {p.eta_y:g}$, "
                 f"$\\eta_Z = {p.eta_z:g}$, batch {p.batch_size}, T = {p.seq_len}, "
                 f"{p.init} start", fontsize="medium")
    return fig


def _fig4_caption(exp) -> str:
    """The legend's title: the warm-up map and, with heavy-ball flows, their early start."""
    p = exp.run.protocol
    lines = [rf"{TIME_LABEL}: warm-up map {WARM_UP_MAP}, $\mu = {p.momentum:g}$"]
    first = {name: float(np.asarray(loss)[0])
             for name, loss in getattr(exp, "optflow_loss", {}).items()}
    if first:
        start = float(np.log(exp.data.vocab_size)) if p.init == "zero" else None
        values = ", ".join(f"{v:.3f} (Level {k})" for k, v in first.items())
        against = f", not $\\ln {exp.data.vocab_size}$ = {start:.3f}" if start else ""
        lines.append(f"heavy-ball flows start at rest half a step before $k = 0$ (staggered "
                     f"reading): loss at $k = 0$: {values}{against}")
    return "\n".join(lines)


def _shared_legend(fig, axes, title: str | None = None, ncol: int = 3):
    """One legend of the labelled artists of ``axes`` (each label once), below the panels."""
    handles, labels = {}, []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in handles:
                handles[label] = handle
                labels.append(label)
    if not labels:
        return None
    legend = fig.legend([handles[k] for k in labels], labels, loc="outside lower center",
                        ncol=ncol, title=title, **LEGEND_FRAME)
    if title:
        legend.get_title().set_fontsize("small")
    return legend


def plot_fig5(experiments, next_token: int | None = None, axes=None):
    """Fig. 5: Adam at several attention rates: entropy over time, final ``c_n`` per token."""
    fig, (ax_h, ax_c) = panel_axes(axes, 2, (5.0, 4.2))
    data = experiments[0].data
    n = int(data.next_tokens[0]) if next_token is None else int(next_token)
    i = data.class_index(n)
    distinct = data.distinct_tokens(n)
    cols = np.searchsorted(data.active_tokens, distinct)
    for j, exp in enumerate(experiments):
        colour = series_colour(j)
        label = rf"$\eta_Z = {exp.run.protocol.eta_z:g}$"
        _band(ax_h, exp.t, exp.entropy, colour, label + " (Adam)")
        if "E" in exp.level_entropy:
            ax_h.plot(exp.t, exp.level_entropy["E"], color=colour, linestyle="--", linewidth=1)
        if "T" in getattr(exp, "optflow_entropy", {}):
            ax_h.plot(_optflow_t(exp), exp.optflow_entropy["T"], color=colour, linestyle="-",
                      linewidth=1.0, marker=".", markersize=2)
        final = distinct_attention(data, exp.run.z_active[:, -1])[:, i, cols]   # (S, D)
        ax_c.errorbar(distinct + 0.15 * (j - 0.5), final.mean(axis=0), yerr=final.std(axis=0),
                      color=colour, marker="o", linestyle="-", capsize=2, label=label)
    ax_h.plot([], [], color="black", linestyle="--", linewidth=1,
              label="Level E at $t = k$ (same rates)")
    if any("T" in getattr(exp, "optflow_entropy", {}) for exp in experiments):
        ax_h.plot([], [], color="black", linestyle="-", linewidth=1.0, marker=".",
                  markersize=2, label="Adam flow, Level T (step axis)")
    finish_axes(ax_h, "step $k$ (Adam: $t = k$)", "entropy of $c_n$ on $G_{DT}(n)$ (nats)",
                "distinct-token entropy", loc="upper center", bbox_to_anchor=(0.5, -0.16),
                ncol=2)  # below the axes: the curves fill every corner of the panel
    p = data.probs(n)[distinct]
    ax_c.plot(distinct, p / p.sum(), color="black", linestyle=":", label=r"$t = 0$")
    finish_axes(ax_c, f"distinct token $l$ of class {n}", f"$c_{{{n}}}(l)$ after the last step",
                "which distinct tokens Adam picks", loc="upper left")
    fig.suptitle(f"Adam on M = {data.vocab_size}, $\\eta_Y = "
                 f"{experiments[0].run.protocol.eta_y:g}$, {len(experiments[0].run.seeds)} "
                 "seeds (mean $\\pm$ sd)", fontsize="medium")
    return fig


def plot_fig6(rows, axes=None):
    """Fig. 6: final distinct-token entropy against ``eta_Z``, one line per ``eta_Y/eta_Z``.

    One column per vocabulary size; rows: the runs (mean and sd over seeds),
    Level E and Level R at the mapped flow time.
    """
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    start = "zero start" if rows[0].get("levels_from", "zero") == "zero" else "runs' starts"
    sources = [("sgd_mean", "runs (SGD, uniform start)")] + [
        (k, f"Level {k[6:]} ({start}, warm-up map)") for k in rows[0] if k.startswith("level_")]
    sources += [(k, OPTFLOW_TITLES[k]) for k in OPTFLOW_TITLES if k in rows[0]]
    if axes is None:
        _, axes = new_figure(len(presets), len(sources), (3.6, 3.0))
    axes = np.asarray(axes).reshape(len(sources), len(presets))
    fig = axes[0, 0].figure
    ratios = sorted({r["ratio"] for r in rows})
    for col, preset in enumerate(presets):
        cells = [r for r in rows if r["preset"] == preset]
        for row, (key, title) in enumerate(sources):
            ax = axes[row, col]
            for j, q in enumerate(ratios):
                line = sorted((r for r in cells if r["ratio"] == q), key=lambda r: r["eta_z"])
                x = [r["eta_z"] for r in line]
                y = [r[key] for r in line]
                spread = {"sgd_mean": "sgd_std", "optflow_T_mean": "optflow_T_std",
                          "optflow_E_mean": "optflow_E_std"}.get(key)
                err = [r[spread] for r in line] if spread else None
                ax.errorbar(x, y, yerr=err, color=series_colour(j), marker="o", capsize=2,
                            label=rf"$\eta_Y/\eta_Z = {q:g}$")
            ax.set_xscale("log")
            label_log_ticks(ax, sorted({r["eta_z"] for r in cells}))
            ax.set_xlabel(r"$\eta_Z$")
            ax.set_ylabel("entropy (nats)")
            ax.set_title(f"{preset} (M = {int(cells[0]['M'])})\n{title}", fontsize="small")
            ax.grid(alpha=0.3)
    _shared_legend(fig, [axes[0, 0]], ncol=len(ratios))
    r0 = rows[0]
    fig.suptitle(f"Distinct-token entropy after {int(r0['steps'])} steps (flow time "
                 f"{float(r0['flow_time']):g}), {_count(int(r0['seeds']), 'seed')}",
                 fontsize="medium")
    return fig


def plot_optflow_overlays(rows4, rows5, rows6, axes=None):
    """The optimiser flows beside the runs of Figs. 4-6, drawn from the CSV rows.

    ``rows4``, ``rows5``, ``rows6``: the rows of ``fig4.csv``, ``fig5.csv`` and
    ``fig6.csv`` of ``odeflow reproduce`` (numbers as floats). Left: Fig. 4's
    batch loss per step (mean and sd over seeds) beside the heavy-ball flows'
    population loss (``optflow_T_loss``, ``optflow_E_loss``) and first-order
    Level T at the warm-up map (and, when present, the discrete heavy ball on Level T,
    ``discrete_T_loss``). Middle: Fig. 5's entropy per step beside the Adam
    flow (``optflow_T_entropy``) and the discrete Adam (``discrete_T_entropy``).
    Right: Fig. 6, each cell's runs' mean entropy (error bar: one sd) against
    the heavy-ball flow ensemble from the seeds' starts (``optflow_T_mean``,
    error bar ``optflow_T_std``), with the diagonal.
    """
    fig, (ax4, ax5, ax6) = panel_axes(axes, 3, (4.6, 4.2))
    k = np.array([r["step"] for r in rows4])
    mean, sd = np.array([r["loss_mean"] for r in rows4]), np.array([r["loss_std"] for r in rows4])
    _band(ax4, k, mean, series_colour(0), "runs (mean $\\pm$ sd)", sd)
    for name in ("T", "E"):
        if f"optflow_{name}_loss" in rows4[0]:
            ax4.plot(k, [r[f"optflow_{name}_loss"] for r in rows4], **OPTFLOW_STYLE[name],
                     label=f"heavy-ball flow, Level {name}")
    if "discrete_T_loss" in rows4[0]:
        ax4.plot(k, [r["discrete_T_loss"] for r in rows4], color="black", linestyle=":",
                 linewidth=1.2, label="discrete heavy ball, Level T (no noise)")
    if "level_T_loss" in rows4[0]:
        ax4.plot(k, [r["level_T_loss"] for r in rows4], **LEVEL_STYLE["T"] | {
            "label": "first-order Level T (warm-up map)"})
    ax4.set_yscale("log")
    finish_axes(ax4, "step $k$", "cross-entropy loss", "Fig. 4: loss (SGD + momentum 0.9)",
                loc="upper right")
    for j, ez in enumerate(dict.fromkeys(r["eta_z"] for r in rows5)):
        sub = [r for r in rows5 if r["eta_z"] == ez]
        ks = np.array([r["step"] for r in sub])
        m = np.array([r["entropy_mean"] for r in sub])
        s = np.array([r["entropy_std"] for r in sub])
        _band(ax5, ks, m, series_colour(j), rf"Adam runs, $\eta_Z = {ez:g}$", s)
        if "optflow_T_entropy" in sub[0]:
            ax5.plot(ks, [r["optflow_T_entropy"] for r in sub], color="black", linewidth=1.0,
                     linestyle="--", label="Adam flow, Level T" if j == 0 else None)
        if "discrete_T_entropy" in sub[0]:
            ax5.plot(ks, [r["discrete_T_entropy"] for r in sub], color="black", linewidth=1.2,
                     linestyle=":", label="discrete Adam, Level T (no noise)" if j == 0 else None)
    finish_axes(ax5, "step $k$", "distinct-token entropy (nats)", "Fig. 5: Adam",
                loc="center right")
    presets = list(dict.fromkeys(r["preset"] for r in rows6))
    lo = min(min(r["sgd_mean"] - r["sgd_std"] for r in rows6),
             min(r.get("optflow_T_mean", np.inf) for r in rows6))
    hi = max(max(r["sgd_mean"] + r["sgd_std"] for r in rows6),
             max(r.get("optflow_T_mean", -np.inf) for r in rows6))
    if "optflow_T_mean" in rows6[0]:
        for j, preset in enumerate(presets):
            cells = [r for r in rows6 if r["preset"] == preset]
            ax6.errorbar([r["sgd_mean"] for r in cells], [r["optflow_T_mean"] for r in cells],
                         xerr=[r["sgd_std"] for r in cells],
                         yerr=[r["optflow_T_std"] for r in cells], color=series_colour(j),
                         marker="o", markersize=3, linestyle="none", capsize=1.5,
                         elinewidth=0.7, label=f"{preset} (M = {int(cells[0]['M'])})")
    ax6.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    ax6.set_xlim(lo, hi)
    ax6.set_ylim(lo, hi)
    finish_axes(ax6, "runs: entropy after the last step (mean $\\pm$ sd)",
                "heavy-ball flow ensemble, Level T (mean $\\pm$ sd)",
                "Fig. 6: 64 cells, runs' own starts", loc="upper left")
    return fig


def plot_recall(rows, axes=None):
    """Appendix G (Figs. 11-12): recall against threshold, per vocabulary size.

    Solid lines vary ``eta_Z`` at the smallest ratio; dashed lines vary the
    ratio at the largest ``eta_Z``. One legend below the panels; the title gives
    the steps and seeds.
    """
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    fig, axs = panel_axes(axes, len(presets), (3.8, 4.2))
    axs = np.atleast_1d(axs)
    th = np.asarray(RECALL_THRESHOLDS)
    for ax, preset in zip(axs, presets, strict=True):
        cells = [r for r in rows if r["preset"] == preset]
        q0 = min(r["ratio"] for r in cells)
        z1 = max(r["eta_z"] for r in cells)
        for j, r in enumerate(sorted((r for r in cells if r["ratio"] == q0),
                                     key=lambda r: r["eta_z"])):
            ax.plot(th, r["recall"], color=series_colour(j),
                    label=rf"$\eta_Z = {r['eta_z']:g}$, $\eta_Y/\eta_Z = {q0:g}$")
        for j, r in enumerate(sorted((r for r in cells if r["eta_z"] == z1 and r["ratio"] != q0),
                                     key=lambda r: r["ratio"])):
            ax.plot(th, r["recall"], color=series_colour(j + 4), linestyle="--",
                    label=rf"$\eta_Z = {z1:g}$, $\eta_Y/\eta_Z = {r['ratio']:g}$")
        ax.axvline(0.1, color="black", linewidth=0.8, linestyle=":",
                   label="threshold 0.1")
        finish_axes(ax, "threshold on $c_n(l)$", "recall of distinct tokens",
                    f"{preset} (M = {int(cells[0]['M'])})" if "M" in cells[0] else preset,
                    legend=False)
    _shared_legend(fig, list(axs[:1]), ncol=4)
    r0 = rows[0]
    if "steps" in r0 and "seeds" in r0:
        fig.suptitle(f"Recall of the distinct tokens after {int(r0['steps'])} steps, "
                     f"{_count(int(r0['seeds']), 'seed')} (Appendix G)", fontsize="medium")
    return fig


def _count(n: int, noun: str) -> str:
    """``"1 seed"``, ``"3 seeds"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
