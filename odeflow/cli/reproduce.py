"""``odeflow reproduce EXPERIMENT``: the papers' experiments, training beside the levels.

Each model family declares its reproductions (:mod:`odeflow.families`, the
``experiments`` of a declaration: ``fig4``, ``fig5``, ``fig6`` of Scan and
Snap in :mod:`odeflow.cli.reproduce_scan_snap`, ``induction`` in
:mod:`odeflow.cli.reproduce_induction`); this module holds the command's parser,
its shared checks (``--seeds`` and ``--steps`` are bounded by :data:`LIMITS`:
exit 2 past them) and the writers of the CSV and PNG files (atomically, into
``--out``; results first, then the table).
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

from odeflow.cli.common import add_mkdir_argument, typed_path_folder
from odeflow.cli.tables import WIDTH, add_wide_argument, blocks, number
from odeflow.errors import ValidationError

#: ``--seeds`` and ``--steps`` of an experiment that declares no defaults of its own.
COUNT_DEFAULTS = {"seeds": 10, "steps": 100}


def experiments() -> dict[str, tuple]:
    """Name -> (target of ``run(args)``, summary[, defaults of ``--seeds``/``--steps``]) of
    every model family's reproductions (:mod:`odeflow.families`, the ``experiments`` of
    each declaration)."""
    from odeflow.families import families

    return {name: entry for family in families().values()
            for name, entry in family.experiments.items()}


#: Upper limits of the count flags, so that a typo cannot start a run of days or ask
#: for more memory than the machine has: every step of every seed is recorded (the
#: logits of syn-medium-10 take 17 kB per seed and step, so the product is bounded).
LIMITS = {"seeds": 1000, "steps": 100_000, "seed_steps": 200_000}

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
    for name, (_, text, *_) in experiments().items():
        lines += wrap(text, f"  {name:<11s}", " " * 13)
    lines += [""] + wrap("--seeds, --steps, --out, --mkdir and --no-progress apply to every "
                         "experiment; --sizes and --same-start to fig6 only.")
    return "\n".join(lines)


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="the papers' experiments (Figs. 4-6, induction "
                       "heads): training beside the levels", description=_description(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    names = tuple(experiments())
    p.add_argument("figure", metavar="EXPERIMENT", choices=names,
                   help=f"which experiment: {', '.join(names)}")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help=f"seeds per run ({COUNT_DEFAULTS['seeds']} unless the experiment "
                        f"says otherwise; at most {LIMITS['seeds']:,})")
    p.add_argument("--steps", type=int, default=None, metavar="K",
                   help=f"training steps ({COUNT_DEFAULTS['steps']} unless the experiment "
                        f"says otherwise; at most {LIMITS['steps']:,}, and seeds x steps at "
                        f"most {LIMITS['seed_steps']:,})")
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


def print_table(rows: list[dict], columns: list[str], every: int = 1, keys: int = 1,
                width: int | None = WIDTH) -> None:
    """Print ``columns`` of every ``every``-th row; the columns past ``width`` continue in
    further blocks led by the first ``keys`` columns (None: one block)."""
    body = [[number(row[c]) for c in columns] for row in (rows[::every] if every > 1 else rows)]
    print("\n".join(blocks(columns, body, keys=keys, width=width)))


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
    """Run the experiment ``args.figure`` of whichever model family declares it."""
    from odeflow.families import load

    check_experiment_flags(args)
    entry = experiments()[args.figure]
    defaults = {**COUNT_DEFAULTS, **(entry[2] if len(entry) > 2 else {})}
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    return load(entry[0])(args)
