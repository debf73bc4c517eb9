"""``odeflow compare``: real training (SGD or gradient ascent) beside the Level E flow."""

from __future__ import annotations

import argparse
import json
import math

from odeflow.cli.catalog import RUNS
from odeflow.cli.common import (
    add_data_arguments,
    add_mkdir_argument,
    check_rows,
    renamed_flags,
    replaced_note,
    resolve,
    typed_path_folder,
)
from odeflow.cli.tables import add_wide_argument, width_of, wrap
from odeflow.errors import ValidationError
from odeflow.io import atomic_write_text, writable_target

#: Defaults of the command; ``eta_z = 5`` so that the logits move within a few hundred steps.
DEFAULTS = {"eta_y": 1.0, "eta_z": 5.0, "steps": 500, "batch_size": 32, "seq_len": 64,
            "seeds": 8}


def register(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare SGD or gradient ascent with the exact flow",
        description="Train by SGD on sampled sequences (or by gradient ascent on the "
                    "population objective), solve the exact flow (Level E) at the same times "
                    "(step k is t = k) and print the logit gap max|z_flow - z_run| / range(z_flow) "
                    "and the largest total-variation distance between attention maps. With "
                    "--table, tabulate the gap over sequence lengths and batch sizes.")
    add_data_arguments(p, {"eta_y": DEFAULTS["eta_y"], "eta_z": DEFAULTS["eta_z"], "t_end": None},
                       t_end_help="flow time to compare up to (steps = T / dt; default "
                                  f"{DEFAULTS['steps']} steps)")
    p.add_argument("--steps", type=int, metavar="N",
                   help=f"training steps ({DEFAULTS['steps']}); --t-end T means T/dt steps")
    p.add_argument("--run", choices=RUNS, help="process to compare (sgd)")
    p.add_argument("--dt", type=float, help="gradient-ascent time step (1); only with --run "
                   "gradient_ascent")
    p.add_argument("--batch-size", type=int, metavar="B",
                   help=f"sequences per SGD step ({DEFAULTS['batch_size']})")
    p.add_argument("--seq-len", type=int, metavar="T",
                   help=f"sequence length incl. the query token ({DEFAULTS['seq_len']})")
    p.add_argument("--seeds", type=int, metavar="K",
                   help=f"SGD runs (seeds 0..K-1); their mean is compared ({DEFAULTS['seeds']})")
    p.add_argument("--momentum", type=float, metavar="MU",
                   help="SGD's heavy-ball momentum: the optimiser odeflow.Momentum(MU); "
                        "0 plain steps (0)")
    p.add_argument("--record", type=int, metavar="N",
                   help="record every N steps (about 100 records)")
    for old in FLAG_RENAMED:   # the old flags, taken with a warning (not in --help)
        p.add_argument(f"--{old.replace('_', '-')}", type=int, help=argparse.SUPPRESS)
    p.add_argument("--table", action="store_true",
                   help="gap table over --seq-lens x --batch-sizes instead of one comparison")
    p.add_argument("--seq-lens", type=int, nargs="+", metavar="T",
                   help="with --table: sequence lengths of the table (16 64 256)")
    p.add_argument("--batch-sizes", type=int, nargs="+", metavar="B",
                   help="with --table: batch sizes of the table (16 128)")
    p.add_argument("--rows", type=int, default=8, help="rows of the printed time table "
                   "(8; 0: none)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_wide_argument(p)
    p.add_argument("--out", metavar="FILE.json", help="also write the figures as JSON to "
                   "FILE (written before anything is printed; an existing file is "
                   "replaced atomically)")
    add_mkdir_argument(p)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


#: Old flags of ``odeflow compare`` -> the new ones (``docs/api.md``, "One name per concept").
FLAG_RENAMED = {"record_every": "record"}

#: Upper limits of the counts, so that a typo cannot start a run of days or allocate
#: a batch larger than memory (sequences per batch times their length).
LIMITS = {"steps": 10**6, "seeds": 1000, "batch_size": 10**5, "seq_len": 10**5,
          "tokens_per_batch": 10**7}


def _bounded(value: int, name: str) -> int:
    if value > LIMITS[name]:
        raise ValidationError(name, f"must be <= {LIMITS[name]:,}, got {value:,}")
    return value


def _steps(args) -> int:
    from odeflow.training.common import check_count

    if args.steps is not None:
        return _bounded(check_count(args.steps, "steps"), "steps")
    if args.t_end is not None:
        if not args.t_end > 0 or not math.isfinite(args.t_end):
            raise ValidationError("t_end", f"must be finite and > 0, got {args.t_end!r}")
        dt = 1.0 if args.dt is None else args.dt
        if not (dt > 0 and math.isfinite(dt)):
            raise ValidationError("dt", f"must be finite and > 0, got {dt!r}")
        steps = args.t_end / dt
        if not steps <= LIMITS["steps"]:
            raise ValidationError("t_end", f"t_end / dt = {steps:.4g} steps; at most "
                                  f"{LIMITS['steps']:,}")
        return max(1, round(steps))
    return DEFAULTS["steps"]


#: Flags that only SGD takes, and those only gradient ascent takes (``--dt``).
SGD_FLAGS = ("seeds", "batch_size", "seq_len", "momentum")


def _check_process_flags(args) -> None:
    """Refuse, by flag, what the chosen process does not take (nothing is dropped):
    gradient ascent takes no SGD flag, SGD no ``--dt``; ``--table`` compares both
    processes at ``dt = 1`` over ``--seq-lens`` x ``--batch-sizes``."""
    if args.table:
        for name, why in (("run", "the table compares both processes"),
                          ("dt", "the table's gradient ascent takes dt = 1"),
                          ("batch_size", "the table takes --batch-sizes"),
                          ("seq_len", "the table takes --seq-lens")):
            if getattr(args, name) is not None:
                raise ValidationError(name, f"not with --table ({why})")
        return
    if args.run == "gradient_ascent":
        for name in SGD_FLAGS:
            if getattr(args, name) is not None:
                raise ValidationError(name, "is SGD's; --run gradient_ascent is one "
                                      "deterministic run on the population objective")
    elif args.dt is not None:
        raise ValidationError("dt", "only with --run gradient_ascent (SGD's step k is at "
                              "t = k)")


def _time_rows(cmp, rows: int) -> str:
    import numpy as np

    t = cmp.t
    idx = np.unique(np.linspace(0, t.size - 1, min(rows, t.size)).round().astype(int))
    lines = [f"{'t':>10s}  {'z gap':>10s}  {'attention TV':>12s}"]
    lines += [f"{t[i]:10.4g}  {cmp.z_gap[i]:10.4f}  {cmp.attention_tv[i]:12.5f}" for i in idx]
    return "\n".join(lines)


def _save(args, figures: dict) -> None:
    """Results first: ``--out`` is written before anything is printed."""
    if args.out:
        replaced = replaced_note(args.out)
        path = atomic_write_text(args.out, json.dumps(figures, indent=2) + "\n", field="out")
        print(f"saved {path}{replaced}")


def run(args) -> int:
    import numpy as np

    from odeflow.analysis.compare import compare_runs, format_gap_table, gap_table
    from odeflow.fields.optimizers import Momentum
    from odeflow.training.common import check_count, check_fraction

    renamed_flags(args, FLAG_RENAMED)
    _check_process_flags(args)
    args.run = args.run or "sgd"
    rows_shown = check_rows(args.rows)
    for key in ("seq_lens", "batch_sizes"):
        if getattr(args, key) is not None and not args.table:
            raise ValidationError(key, "only with --table (one comparison takes --seq-len "
                                  "and --batch-size)")
    args.seq_lens = args.seq_lens or [16, 64, 256]
    args.batch_sizes = args.batch_sizes or [16, 128]
    if args.out:
        typed_path_folder(args.out, "out", args.mkdir)
        writable_target(args.out, "out")  # refused before training, not after
    data, options, label = resolve(args, {k: DEFAULTS[k] for k in ("eta_y", "eta_z")})
    eta_y, eta_z = options["eta_y"], options["eta_z"]
    steps = _steps(args)
    batch_size = DEFAULTS["batch_size"] if args.batch_size is None else args.batch_size
    seq_len = DEFAULTS["seq_len"] if args.seq_len is None else args.seq_len
    seeds = DEFAULTS["seeds"] if args.seeds is None else args.seeds
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("seeds", seeds)):
        _bounded(check_count(value, name), name)
    if batch_size * seq_len > LIMITS["tokens_per_batch"]:
        raise ValidationError("batch_size", f"batch_size * seq_len = {batch_size * seq_len:,} "
                              f"tokens per batch; at most {LIMITS['tokens_per_batch']:,}")
    if args.table:
        for name, values in (("seq_lens", args.seq_lens), ("batch_sizes", args.batch_sizes)):
            for value in values:
                _bounded(check_count(value, name), name.rstrip("s"))
    progress = False if args.no_progress else None
    mu = check_fraction(0.0 if args.momentum is None else args.momentum, "momentum")
    optimizer = Momentum(mu) if mu else None
    if args.table:
        rows = gap_table(data, eta_y, eta_z, steps, seq_lens=args.seq_lens,
                         batch_sizes=args.batch_sizes, seeds=seeds, optimizer=optimizer,
                         record=args.record, progress=progress)
        figures = {"data": label, "eta_y": eta_y, "eta_z": eta_z, "steps": steps,
                   "rows": rows}
        _save(args, figures)
        if args.json:
            print(json.dumps(figures, indent=2))
            return 0
        print(wrap(f"odeflow compare --table: {label}, eta_y={eta_y:g}, eta_z={eta_z:g}, "
                   f"{steps} steps, {seeds} seeds per cell", width_of(args)))
        print(format_gap_table(rows))
        return 0
    if args.run == "sgd":
        own = {"batch_size": batch_size, "seq_len": seq_len, "seeds": seeds,
               "optimizer": optimizer}
    else:
        own = {"dt": args.dt}
    cmp = compare_runs(data, eta_y=eta_y, eta_z=eta_z, steps=steps, run=args.run,
                       record=args.record, progress=progress, **own)
    figures = {"data": label, **cmp.summary()}
    _save(args, figures)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    if args.run == "sgd":
        what = (f"sgd ({seeds} seed{'s' if seeds != 1 else ''}, batch {batch_size}, "
                f"T={seq_len}, momentum {mu:g})")
    else:
        what = f"gradient ascent (dt={cmp.settings['dt']:g})"
    width = width_of(args)
    print(wrap(f"odeflow compare: {label}, {what} vs exact flow, eta_y={eta_y:g}, "
               f"eta_z={eta_z:g}, {steps} steps", width))
    print(f"  range of the flow's logits: {cmp.z_range:.4g}")
    if rows_shown:
        print(_time_rows(cmp, rows_shown))
    print(f"  max z gap {cmp.max_z_gap:.4f} (single runs: mean {np.mean(cmp.member_z_gap):.4f}), "
          f"max attention TV {cmp.max_attention_tv:.5f}")
    return 0
