"""``odeflow compare-levels``: Level E against Level R (Theorem 1, Eqn 11), and with
``--seq-len`` Level T (the finite-``T`` flow, docs/levels.md) and with ``--sgd-seeds`` an SGD
ensemble, as a table."""

from __future__ import annotations

import argparse
import json

from odeflow.cli.common import add_data_arguments, renamed_flags, resolve
from odeflow.cli.tables import add_wide_argument, width_of, wrap
from odeflow.errors import ValidationError


def _parse_ratios(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValidationError("ratios", f"must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValidationError("ratios", f"is empty: {text!r}")
    return values


def register(sub) -> None:
    p = sub.add_parser(
        "compare-levels", help="compare the exact flow (Level E) with the reduced flow (Level R)",
        description="Solve Level E (exact gradient flow) and Level R (reduced flow of "
                    "Theorem 1) on the same data model and print, per learning-rate pair, "
                    "the largest deviation of the attention logits between the levels and "
                    "the Eqn 11 invariant error of each level.")
    add_data_arguments(p)
    p.add_argument("--ratios", metavar="R1,R2,...",
                   help="compare at eta_z = ratio * eta_y for each ratio (overrides --eta-z), "
                        "e.g. 0.01,0.1,1")
    p.add_argument("--seq-len", type=int, metavar="T",
                   help="also solve Level T, the finite-T flow, at this sequence length")
    p.add_argument("--sample-size", type=int, metavar="N",
                   help="with --seq-len: sampled sequences per class (64)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="with --seq-len: seed of the sample (0)")
    for old in FLAG_RENAMED:   # the old flags, taken with a warning (not in --help)
        p.add_argument(f"--{old.replace('_', '-')}", type=int, help=argparse.SUPPRESS)
    p.add_argument("--sgd-seeds", type=int, metavar="S",
                   help="with --seq-len: also run S >= 1 seeds of SGD for the steps whose "
                        "warm-up flow time is t_end and give each level's logit gap to their "
                        "mean (default: no SGD)")
    p.add_argument("--batch-size", type=int, metavar="B",
                   help="with --sgd-seeds: SGD batch size (128)")
    p.add_argument("--momentum", type=float, metavar="MU",
                   help="with --sgd-seeds: SGD momentum; step k is flow time "
                        "t_k = [k - MU (1 - MU^k)/(1 - MU)]/(1 - MU), the warm-up map (0.9)")
    p.add_argument("--rtol", type=float, default=1e-8, help="relative tolerance (1e-8)")
    p.add_argument("--atol", type=float, default=1e-10, help="absolute tolerance (1e-10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_wide_argument(p)
    p.set_defaults(func=run)


#: Old flags of ``compare-levels`` -> the new ones (``docs/api.md``, "One name per concept").
FLAG_RENAMED = {"samples_per_class": "sample_size", "sample_seed": "seed"}

#: Flags that need another: flag -> (the flag it needs, its default without it).
DEPENDENT = {"sample_size": ("seq_len", 64), "seed": ("seq_len", 0),
             "sgd_seeds": ("seq_len", None), "batch_size": ("sgd_seeds", 128),
             "momentum": ("sgd_seeds", 0.9)}


def check_dependent_flags(args) -> None:
    """Refuse a flag of :data:`DEPENDENT` given without the flag it needs (it would be
    ignored), then fill in the defaults."""
    for key, (needs, default) in DEPENDENT.items():
        if getattr(args, key) is not None and getattr(args, needs) is None:
            raise ValidationError(key, f"only with --{needs.replace('_', '-')} (alone it "
                                  "would be ignored)")
        if getattr(args, key) is None and default is not None:
            setattr(args, key, default)


def run(args) -> int:
    from odeflow.analysis.levels import compare_levels_over_ratios, format_table
    from odeflow.data import validate_positive

    renamed_flags(args, FLAG_RENAMED)
    data, options, label = resolve(args)
    eta_y = validate_positive(options["eta_y"], "eta_y")
    if args.ratios is None:
        validate_positive(options["eta_z"], "eta_z")
    ratios = _parse_ratios(args.ratios) if args.ratios is not None \
        else [options["eta_z"] / eta_y]
    check_dependent_flags(args)
    if args.sgd_seeds is not None and args.sgd_seeds < 1:
        raise ValidationError("sgd_seeds", f"must be >= 1 (leave it out for no SGD), got "
                              f"{args.sgd_seeds}")
    results = compare_levels_over_ratios(data, eta_y, ratios, options["t_end"],
                                         rtol=args.rtol, atol=args.atol,
                                         keep_trajectories=False, seq_len=args.seq_len,
                                         sample_size=args.sample_size,
                                         seed=args.seed,
                                         sgd_seeds=args.sgd_seeds or 0, batch_size=args.batch_size,
                                         momentum=args.momentum)
    if args.json:
        print(json.dumps({"data": label, "results": [r.to_dict() for r in results]}, indent=2))
        return 0
    width = width_of(args)
    print(wrap(f"odeflow compare-levels: {label}, t in [0, {options['t_end']:g}], "
               f"rtol={args.rtol:g}, atol={args.atol:g}", width))
    print(format_table(results, width=width))
    return 0
