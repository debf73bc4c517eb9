"""``odeflow reproduce induction``: the authors' induction-head training beside the population flow.

The authors' setting (docs/induction.md): ``ih-paper`` (d = 3, n = 3, H = 3, D = 2,
alpha = 0.1), per seed 9000 fresh sequences of length ``L = 100``, full-batch
gradient descent at learning rate 1 on all parameters jointly from the code's
init, the authors' training loss (``"code"``), ``--steps`` steps; beside it the
population flow (``L -> infinity``) from the same init at ``t = k``, and the
finite-``L`` level (``flow="finite_l"``, its own sample of 9000 sequences, seed
``max(seeds) + 1``) (:mod:`odeflow.experiments.induction`). Writes into
``--out``:

- ``induction.csv``: per recorded step (0, 1, then log-spaced, and t = 5, 10,
  100, 1e3, 1e4 when reached): ``a``, loss and every ``p_S`` of the run (mean
  and sd over ``--seeds``) and of the flow;
- ``induction_agreement.csv``: the goal table (``a`` within 15%, loss within
  0.01) at t = 5, 10, 100, 1e3, 1e4 (those reached);
- ``induction_worst.csv``: the goal over its interval, one row per level: the worst
  errors over every recorded step from t = 5 to 1e4 (those reached), where they occur
  and how many steps miss (:func:`~odeflow.training.induction.worst_agreement`);
- ``induction.png``: ``a(t)``, loss, ``p_S(t)`` and copier logits, run beside flow.

A run short of t = 5 writes no goal tables and removes an earlier run's from ``--out``
(they would describe that run).

A full-batch step on 9000 x 100 takes about 7 ms on one core
(``benchmarks/bench_induction_training.py``: 139 steps per second on a busy
2-core machine), so the goal table to ``t = 1e4`` is
``odeflow reproduce induction --seeds 10 --steps 10000`` (about 15 minutes; one
seed about 1.5 minutes).
"""

from __future__ import annotations

import time
from pathlib import Path

from odeflow.errors import ValidationError

#: Stems of the CSV files written into ``--out`` (and ``induction.png``).
OUTPUTS = ("induction", "induction_agreement", "induction_worst")


def check_out(out) -> Path:
    """An ``--out`` folder the files can be written into (checked before training)."""
    from odeflow.io import writable_folder, writable_target

    folder = writable_folder(out, "out", what="--out (the CSV and PNG files go into it)")
    for name in [f"{stem}.csv" for stem in OUTPUTS] + ["induction.png"]:
        writable_target(folder / name, "out")
    return folder


def run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from odeflow.cli.reproduce import (
        check_counts,
        csv_text,
        print_table,
        replaced_files,
        write_outputs,
        wrote_line,
    )
    from odeflow.cli.tables import width_of, wrap
    from odeflow.experiments import induction as experiment
    from odeflow.io import atomic_write_text
    from odeflow.plots.induction import comparison_title, plot_run_beside_flow

    if getattr(args, "same_start", False):
        raise ValidationError("same_start", "only for fig6 (induction runs start from the "
                              "code's init)")
    check_counts(args.seeds, args.steps)
    out = check_out(args.out)
    width = width_of(args)
    replaced = replaced_files(out, OUTPUTS)
    progress = False if args.no_progress else None
    start = time.perf_counter()
    rep = experiment.reproduce(seeds=args.seeds, steps=args.steps, progress=progress)
    comp, table, goal, worst = rep.comparison, rep.table, rep.goal, rep.worst
    others = ({} if comp.finite_l is None else
              {f"finite-L level (own sample, seed {comp.finite_l_seed})": comp.finite_l})
    fig = plot_run_beside_flow(comp.mean_run, comp.flow,
                               run_label=f"finite-L GD run ({len(comp.seeds)} seed"
                                         f"{'s' if len(comp.seeds) > 1 else ''})",
                               others=others, title=comparison_title(comp))
    written = write_outputs(out, "induction", table, fig)
    for stem, rows in (("induction_agreement", goal), ("induction_worst", worst)):
        path = out / f"{stem}.csv"
        if rows:
            written.append(atomic_write_text(path, csv_text(rows), field="out"))
        elif path.exists():  # an earlier run's goal table: it does not describe this run
            path.unlink()
            print(f"removed {path}: an earlier run's; this run (--steps {args.steps}) reaches "
                  f"no goal time (t >= {experiment.GOAL_TIMES[0]:g})")  # quotes a path
    print_table(table, ["step", "a_run", "a_flow", "loss_run", "loss_flow"],
                every=max(1, len(table) // 12), width=width)
    if goal:
        print_goal(goal, comp, width)
    if worst:
        print_worst(worst, width)
    seconds = time.perf_counter() - start
    for path in written:
        print(wrote_line(path, replaced))
    print(wrap(f"induction: {len(comp.seeds)} seeds x {comp.sample_size} sequences of L = "
               f"{comp.seq_len}, {args.steps} steps, loss {comp.loss!r}, {seconds:.1f} s", width))
    return 0


def print_goal(goal: list, comp, width: int) -> None:
    """The goal table of each level and how many of its times meet the goal."""
    from odeflow.cli.reproduce import print_table
    from odeflow.cli.tables import wrap
    from odeflow.experiments import induction as experiment

    print()
    print_table(goal, ["t", "a_run", "a_flow", "a_rel_err", "loss_run", "loss_flow",
                       "loss_abs_err"], width=width)
    print(wrap(f"goal (a within {experiment.A_TOLERANCE:.0%}, loss within "
               f"{experiment.LOSS_TOLERANCE}): population flow: a met at "
               f"{sum(r['a_ok'] for r in goal)}/{len(goal)} times, loss at "
               f"{sum(r['loss_ok'] for r in goal)}/{len(goal)}", width))
    if comp.flow_loss_at_length is not None:
        print_table(goal, ["t", "loss_run", "loss_flow_at_length", "loss_abs_err_at_length"],
                    width=width)
        print(wrap(f"population flow's parameters scored at L = {comp.seq_len} (the "
                   f"finite-L loss on seed {comp.finite_l_seed}'s sample): loss at "
                   f"{sum(r['loss_ok_at_length'] for r in goal)}/{len(goal)}", width))
    if comp.finite_l is not None:
        print_table(goal, ["t", "a_finite_l", "a_rel_err_finite_l", "loss_finite_l",
                           "loss_abs_err_finite_l"], width=width)
        print(wrap(f"finite-L level (seed {comp.finite_l_seed}): a met at "
                   f"{sum(r['a_ok_finite_l'] for r in goal)}/{len(goal)} times, loss at "
                   f"{sum(r['loss_ok_finite_l'] for r in goal)}/{len(goal)}", width))


def print_worst(worst: list, width: int) -> None:
    """The goal over its interval: the worst errors per level and how many steps miss."""
    from odeflow.cli.reproduce import print_table
    from odeflow.cli.tables import wrap

    print()
    print_table(worst, ["level", "times", "a_rel_err", "a_rel_err_t", "a_rel_err_to_run",
                        "a_misses", "loss_abs_err", "loss_abs_err_t", "loss_misses"],
                width=width)
    print(wrap(f"the goal over every recorded step from t = {worst[0]['t_from']:g} to "
               f"{worst[0]['t_to']:g} ({worst[0]['times']} step"
               f"{'' if worst[0]['times'] == 1 else 's'}): "
               + "; ".join(f"{r['level']}: a misses at {r['a_misses']}, loss at "
                           f"{r['loss_misses']}" for r in worst), width))
