"""``odeflow reproduce two-stage``: training beside the population flow of the two-stage family.

odeflow's own model of the setting of Gong et al. 2025 (``docs/two_stage.md``):
:func:`odeflow.experiments.two_stage.run` on ``ts-default`` with ``--seeds``
seeds and ``--steps`` steps of gradient descent (step 0.2, so ``T = 0.2 *
steps``), writing ``two_stage.csv``, ``stages.csv``, ``rank_truncation.csv`` and
``two_stage.png`` into ``--out``, then printing the stage table.
"""

from __future__ import annotations


def run(args) -> int:
    """Run the reproduction with the parsed arguments; the exit code."""
    import time
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    from odeflow.cli.reproduce import check_counts, print_table, wrote_line
    from odeflow.cli.tables import width_of
    from odeflow.experiments import two_stage as experiment

    check_counts(args.seeds, args.steps)
    out = Path(args.out)       # checked by the command (--mkdir) and by experiment.run
    replaced = {out / name for name in experiment.OUTPUTS if (out / name).is_file()}
    start = time.perf_counter()
    rep = experiment.run(out, seeds=args.seeds, steps=args.steps,
                         progress=False if args.no_progress else None)
    print_table(rep.stages, list(experiment.STAGE_COLUMNS), width=width_of(args))
    for path in rep.files:
        print(wrote_line(Path(path), replaced))
    print(f"two-stage: {args.seeds} seeds, {args.steps} steps, "
          f"{time.perf_counter() - start:.1f} s")
    return 0
