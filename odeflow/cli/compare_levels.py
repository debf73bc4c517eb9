"""``odeflow compare-levels``: Level E against Level R (Theorem 1, Eqn 11), as a table."""

from __future__ import annotations

import json

from odeflow.analysis.levels import compare_levels_over_ratios, format_table
from odeflow.cli.common import add_data_arguments, resolve
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
    p.add_argument("--rtol", type=float, default=1e-8, help="relative tolerance (1e-8)")
    p.add_argument("--atol", type=float, default=1e-10, help="absolute tolerance (1e-10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args) -> int:
    data, options, label = resolve(args)
    eta_y = options["eta_y"]
    ratios = _parse_ratios(args.ratios) if args.ratios else [options["eta_z"] / eta_y]
    results = compare_levels_over_ratios(data, eta_y, ratios, options["t_end"],
                                         rtol=args.rtol, atol=args.atol,
                                         keep_trajectories=False)
    if args.json:
        print(json.dumps({"data": label, "results": [r.to_dict() for r in results]}, indent=2))
        return 0
    print(f"odeflow compare-levels: {label}, t in [0, {options['t_end']:g}], "
          f"rtol={args.rtol:g}, atol={args.atol:g}")
    print(format_table(results))
    return 0
