"""``odeflow reproduce fig4|fig5|fig6``: the paper's experiments beside the levels.

Runs the paper's protocol (Sec. 8; docs/reproduce.md) over ``--seeds`` seeds,
writes a CSV table and a PNG figure into ``--out`` (atomically), then prints
the table (results first). Beside every run: Level E, Level R and Level T
(at the protocol's ``T``) at the mapped flow time of the warm-up map
``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)`` (the warm-up map of
docs/levels.md; see :mod:`odeflow.experiments.paper`).
``--seeds`` and ``--steps`` are bounded by :data:`LIMITS` (exit 2 past them).

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
- ``induction``: the induction heads of Chen, Sheen, Wang, Yang (2024), finite-``L``
  training beside the population flow (:mod:`odeflow.cli.reproduce_induction`; :data:`EXPERIMENTS`).
"""

from __future__ import annotations

import argparse
import csv
import io
import time
from pathlib import Path

from odeflow.cli.common import add_mkdir_argument, typed_path_folder
from odeflow.cli.tables import WIDTH, add_wide_argument, blocks, number, width_of, wrap
from odeflow.errors import ValidationError

FIGURES = ("fig4", "fig5", "fig6")

#: Experiments of other model families, each in its own module: name -> ``"module:function"``
#: under :mod:`odeflow.cli`; the function takes the parsed arguments and returns the exit code.
EXPERIMENTS = {"induction": "reproduce_induction:run"}

#: Upper limits of the count flags, so that a typo cannot start a run of days or ask
#: for more memory than the machine has: every step of every seed is recorded (the
#: logits of syn-medium-10 take 17 kB per seed and step, so the product is bounded).
LIMITS = {"seeds": 1000, "steps": 100_000, "seed_steps": 200_000}

#: The files each figure writes into ``--out`` (stems of ``.csv`` and ``.png``).
OUTPUTS = {"fig4": ("fig4",), "fig5": ("fig5",), "fig6": ("fig6", "fig6_recall")}


#: What each experiment runs and writes, for ``odeflow reproduce --help``.
EXPERIMENT_HELP = {
    "fig4": "Scan and Snap Fig. 4: SGD (momentum 0.9, batch 128, T = 128) on syn-small "
            "from the zero start, eta_Z = eta_Y = 1: loss and attention entropy per step "
            "beside Levels E, R, T and the heavy-ball flows (fig4.csv, fig4.png)",
    "fig5": "Fig. 5: the same with Adam at eta_Z = 0.1 and 1 (fig5.csv, fig5.png)",
    "fig6": "Fig. 6: the final attention entropy of SGD over syn-medium-1/3/5/10 x eta_Z "
            "in {0.5, 1, 2, 3} x eta_Y/eta_Z in {1, 2, 5, 10} (64 cells, uniform start) "
            "beside the levels; recall curves of Appendix G (fig6*.csv, fig6*.png)",
    "induction": "induction heads (Chen, Sheen, Wang, Yang 2024), preset ih-paper: "
                 "full-batch gradient descent on 9000 sequences of length 100 per seed "
                 "beside the population flow and the finite-L level (induction*.csv, "
                 "induction.png)",
}

#: Flags that only some experiments take (the others take --seeds, --steps, --out,
#: --mkdir and --no-progress).
EXPERIMENT_FLAGS = {"sizes": ("fig6",), "same_start": ("fig6",)}


def _description() -> str:
    import textwrap

    def wrap(text, first="", rest=""):
        return textwrap.wrap(text, 78, initial_indent=first, subsequent_indent=rest,
                             break_on_hyphens=False)

    lines = wrap("Run one of the papers' experiments, write its CSV tables and PNG figure "
                 "into --out (files of the same names there are replaced, atomically), "
                 "then print the table.") + ["", "experiments:"]
    for name, text in EXPERIMENT_HELP.items():
        lines += wrap(text, f"  {name:<11s}", " " * 13)
    lines += [""] + wrap("--seeds, --steps, --out, --mkdir and --no-progress apply to every "
                         "experiment; --sizes and --same-start to fig6 only.")
    return "\n".join(lines)


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="the papers' experiments (Figs. 4-6, induction "
                       "heads): training beside the levels", description=_description(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("figure", metavar="EXPERIMENT", choices=(*FIGURES, *EXPERIMENTS),
                   help=f"which experiment: {', '.join((*FIGURES, *EXPERIMENTS))}")
    p.add_argument("--seeds", type=int, default=10, metavar="N",
                   help=f"seeds per run (10; at most {LIMITS['seeds']:,})")
    p.add_argument("--steps", type=int, default=100, metavar="K",
                   help=f"training steps (100; at most {LIMITS['steps']:,}, and seeds x "
                        f"steps at most {LIMITS['seed_steps']:,})")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for the CSV and PNG files (results/reproduce)")
    add_mkdir_argument(p)
    p.add_argument("--sizes", type=int, nargs="+", default=None, metavar="N",
                   help="fig6: the syn-medium-N vocabulary sizes (1 3 5 10: the paper's 64 "
                        "cells; fewer for a quick look)")
    p.add_argument("--same-start", action="store_true",
                   help="fig6: solve the levels from each seed's random start (slow) "
                        "instead of the zero start")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_wide_argument(p)
    p.set_defaults(func=run)


def csv_text(rows: list[dict]) -> str:
    """``rows`` (dicts with the same keys) as CSV text; floats with full precision."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def csv_rows(path) -> list[dict]:
    """The rows of a CSV file written by :func:`csv_text`: numbers as floats (an empty
    cell as NaN), other cells as text (for the docs scripts that read the figures' files)."""
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for row in rows:
        parsed = {}
        for k, v in row.items():
            try:
                parsed[k] = float(v) if v != "" else float("nan")
            except ValueError:
                parsed[k] = v
        out.append(parsed)
    return out


def write_outputs(out: Path, stem: str, rows: list[dict], fig) -> list[Path]:
    """``stem.csv`` and ``stem.png`` in ``out``, each written atomically (errors name ``out``)."""
    from odeflow.io import atomic_write, atomic_write_text

    paths = [atomic_write_text(out / f"{stem}.csv", csv_text(rows), field="out"),
             atomic_write(out / f"{stem}.png", lambda fh: fig.savefig(fh, format="png",
                                                                      dpi=110), field="out")]
    return paths


def check_counts(seeds: int, steps: int) -> None:
    """``--seeds`` and ``--steps`` within ``1 ..`` :data:`LIMITS` (their product too)."""
    for name, value in (("seeds", seeds), ("steps", steps)):
        if value < 1:
            raise ValidationError(name, f"must be >= 1, got {value}")
        if value > LIMITS[name]:
            raise ValidationError(name, f"must be <= {LIMITS[name]:,}, got {value:,}")
    if seeds * steps > LIMITS["seed_steps"]:
        raise ValidationError("steps", f"seeds x steps = {seeds * steps:,}; at most "
                              f"{LIMITS['seed_steps']:,} (every step of every seed is "
                              "recorded): lower --steps or --seeds")


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


def print_table(rows: list[dict], columns: list[str], every: int = 1, keys: int = 1,
                width: int | None = WIDTH) -> None:
    """Print ``columns`` of every ``every``-th row; the columns past ``width`` continue in
    further blocks led by the first ``keys`` columns (None: one block)."""
    body = [[number(row[c]) for c in columns] for row in (rows[::every] if every > 1 else rows)]
    print("\n".join(blocks(columns, body, keys=keys, width=width)))


def run_experiment(args) -> int:
    """Run a family's experiment of :data:`EXPERIMENTS`."""
    import importlib

    module, function = EXPERIMENTS[args.figure].split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)(args)


def check_experiment_flags(args) -> None:
    """Refuse a flag of :data:`EXPERIMENT_FLAGS` given to an experiment that does not take
    it, and a typed ``--out`` whose parent folder is missing (unless ``--mkdir``); the
    default ``--out`` is ``results/reproduce``."""
    for key, experiments in EXPERIMENT_FLAGS.items():
        if getattr(args, key, None) not in (None, False) and args.figure not in experiments:
            raise ValidationError(key, f"only for {', '.join(experiments)}, not "
                                  f"{args.figure}")
    if args.out is None:
        args.out = "results/reproduce"
    else:
        typed_path_folder(args.out, "out", args.mkdir)


def replaced_files(out: Path, stems) -> set:
    """The files among ``out/STEM.csv`` and ``out/STEM.png`` that exist (to be replaced)."""
    return {p for stem in stems for p in (out / f"{stem}.csv", out / f"{stem}.png")
            if p.is_file()}


def wrote_line(path, replaced: set) -> str:
    """``wrote PATH``, saying when it replaced an earlier file."""
    return f"wrote {path}" + (" (replaced the earlier file)" if Path(path) in replaced else "")


def run(args) -> int:
    check_experiment_flags(args)
    if args.figure in EXPERIMENTS:
        return run_experiment(args)
    import matplotlib

    matplotlib.use("Agg")
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
