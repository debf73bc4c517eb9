"""``odeflow reproduce fig4|fig5|fig6``: the Scan and Snap paper's experiments beside the levels.

Runs the paper's protocol (Sec. 8; docs/reproduce.md) over ``--seeds`` seeds,
writes a CSV table and a PNG figure into ``--out`` (atomically), then prints
the table (results first). Beside every run: Level E, Level R and Level T
(at the protocol's ``T``) at the mapped flow time of the warm-up map
``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)`` (the warm-up map of
docs/levels.md; see :mod:`odeflow.experiments.paper`).

Beside every run also the optimiser flows (docs/optimisers.md; on the step axis,
no time map): the heavy ball (SGD) or Adam ODE over Level E and Level T.

- ``fig4``: syn-small, zero start, SGD (momentum 0.9), batch 128, ``T = 128``,
  ``eta_Z = eta_Y = 1``, 100 steps: ``fig4.csv`` (loss and entropy per step,
  mean and sd over seeds, the levels, and the heavy-ball flows' population
  loss ``optflow_E_loss``, ``optflow_T_loss``) and ``fig4.png``.
- ``fig5``: the same with Adam at ``eta_Z`` in 0.1 and 1: ``fig5.csv`` (with
  the Adam flow's entropy ``optflow_T_entropy``), ``fig5.png``.
- ``fig6``: syn-medium-1/3/5/10 x ``eta_Z`` in {0.5, 1, 2, 3} x
  ``eta_Y/eta_Z`` in {1, 2, 5, 10}, uniform start, 100 steps: ``fig6.csv``
  (64 cells; the heavy-ball flow ensemble from the seeds' own starts at the last
  step: ``optflow_T_mean``, ``optflow_T_std``, ``optflow_E_mean``,
  ``optflow_E_std``), ``fig6.png``, and the recall curves of Appendix G
  (``fig6_recall.csv``, ``fig6_recall.png``).
"""

from __future__ import annotations

import time
from pathlib import Path

from odeflow.errors import ValidationError

#: The files each figure writes into ``--out`` (stems of ``.csv`` and ``.png``).
OUTPUTS = {"fig4": ("fig4",), "fig5": ("fig5",), "fig6": ("fig6", "fig6_recall")}



def check_sizes(sizes) -> tuple:
    """``--sizes``: syn-medium sizes among the presets' (all of them when not given)."""
    from odeflow.data.presets import SYN_MEDIUM_SIZES

    if sizes is None:
        return tuple(SYN_MEDIUM_SIZES)
    unknown = [n for n in sizes if n not in SYN_MEDIUM_SIZES]
    if unknown or not sizes:
        raise ValidationError("sizes", f"must be among {list(SYN_MEDIUM_SIZES)}, got {sizes}")
    return tuple(dict.fromkeys(sizes))


def check_out(out, figure: str) -> Path:
    """Refuse an ``--out`` folder the figure's files cannot be written into, before training
    (:func:`odeflow.io.writable_folder`, then each file's :func:`~odeflow.io.writable_target`)."""
    from odeflow.io import writable_folder, writable_target

    folder = writable_folder(out, "out", what="--out (the CSV and PNG files go into it)")
    for stem in OUTPUTS[figure]:
        for suffix in (".csv", ".png"):
            writable_target(folder / f"{stem}{suffix}", "out")
    return folder


def curve_rows(exp, label: dict) -> list[dict]:
    """One row per recorded step: loss and entropy (mean, sd over seeds), the levels at
    ``flow_time`` (column ``time_map`` says which map) and the optimiser flows at the step
    (``optflow_<level>_loss``, ``optflow_<level>_entropy``; docs/optimisers.md)."""
    run = exp.run
    losses = {name: -tr.objective for name, tr in exp.levels.items()}  # once, not per step
    rows = []
    for j, k in enumerate(run.steps):
        row = {**label, "step": int(k), "flow_time": float(run.t[j]),
               "loss_mean": float(run.loss[:, k].mean()), "loss_std": float(run.loss[:, k].std()),
               "entropy_mean": float(exp.entropy[:, j].mean()),
               "entropy_std": float(exp.entropy[:, j].std())}
        for name in exp.levels:
            row[f"level_{name}_loss"] = float(losses[name][j])
            row[f"level_{name}_entropy"] = float(exp.level_entropy[name][j])
        for name, loss in exp.optflow_loss.items():      # optimiser flows: step axis
            row[f"optflow_{name}_loss"] = float(loss[j])
        for name, H in exp.optflow_entropy.items():
            row[f"optflow_{name}_entropy"] = float(H[j])
        for name, loss in exp.discrete_loss.items():       # deterministic discrete twins
            row[f"discrete_{name}_loss"] = float(loss[j])
            row[f"discrete_{name}_entropy"] = float(exp.discrete_entropy[name][j])
        row["time_map"] = run.protocol.time_map            # of flow_time and the levels
        rows.append(row)
    return rows


def run(args) -> int:
    """``odeflow reproduce fig4|fig5|fig6`` with the parsed arguments; the exit code."""
    import matplotlib

    matplotlib.use("Agg")
    from odeflow.cli.reproduce import (
        check_counts,
        print_table,
        replaced_files,
        write_outputs,
        wrote_line,
    )
    from odeflow.cli.tables import width_of, wrap
    from odeflow.experiments import paper
    from odeflow.plots.paper import plot_fig4, plot_fig5, plot_fig6, plot_recall

    check_counts(args.seeds, args.steps)
    out = check_out(args.out, args.figure)
    width = width_of(args)
    replaced = replaced_files(out, OUTPUTS[args.figure])
    progress = False if args.no_progress else None
    start = time.perf_counter()
    # results first: every file is written before anything derived is printed
    if args.figure == "fig4":
        exp = paper.fig4(args.seeds, args.steps, progress=progress)
        rows = curve_rows(exp, {})
        written = write_outputs(out, "fig4", rows, plot_fig4(exp))
        print_table(rows, ["step", "flow_time", "loss_mean", "loss_std",
                           *(f"level_{k}_loss" for k in paper.LEVELS),
                           *(f"optflow_{k}_loss" for k in paper.OPTFLOWS), "entropy_mean",
                           *(f"level_{k}_entropy" for k in paper.LEVELS)],
                    every=max(1, args.steps // 10), width=width)
    elif args.figure == "fig5":
        exps = paper.fig5(args.seeds, args.steps, progress=progress)
        rows = [r for exp in exps for r in curve_rows(exp, {"eta_z": exp.run.protocol.eta_z})]
        written = write_outputs(out, "fig5", rows, plot_fig5(exps))
        print_table(rows, ["eta_z", "step", "loss_mean", "entropy_mean", "entropy_std",
                           "level_E_entropy", "optflow_T_entropy"],
                    every=max(1, args.steps // 5), keys=2, width=width)
    else:
        sizes = check_sizes(args.sizes)
        rows = paper.fig6_rows(args.seeds, args.steps, sizes=sizes, progress=progress,
                               same_start=args.same_start)
        table = [{k: v for k, v in r.items() if k != "recall"} for r in rows]
        recall = [{"preset": r["preset"], "eta_z": r["eta_z"], "ratio": r["ratio"],
                   "threshold": th, "recall_mean": v}
                  for r in rows for th, v in zip(paper.RECALL_THRESHOLDS, r["recall"],
                                                 strict=True)]
        written = write_outputs(out, "fig6", table, plot_fig6(rows))
        written += write_outputs(out, "fig6_recall", recall, plot_recall(rows))
        levels = [f"level_{k}" for k in paper.LEVELS]
        print_table(table, ["preset", "eta_z", "ratio", "sgd_mean", "sgd_std", *levels,
                            *(f"optflow_{k}_mean" for k in paper.OPTFLOWS)], keys=3, width=width)
        for summary in (paper.trend_summary(table, c) for c in ("sgd_mean", *levels)):
            for s in summary:
                print(wrap(f"{s['preset']:>14} {s['column']:>9}: falls with eta_Z in "
                           f"{s['falls_with_eta_z']:.0%} of pairs, rises with eta_Y/eta_Z in "
                           f"{s['rises_with_ratio']:.0%}", width))
    seconds = time.perf_counter() - start
    for path in written:
        print(wrote_line(path, replaced))
    print(f"{args.figure}: {args.seeds} seeds, {args.steps} steps, {seconds:.1f} s")
    return 0
