"""``odeflow verify``: every registered family's closed forms against scipy.

Prints one row per check (quantity, paper equation, parameters, largest
relative error over the family's times, floor, tolerance,
PASS/FAIL; grouped by check within 100 columns, or one wide row each with
``--wide``), progress lines on stderr (as each check starts and ends), and exits 1
if any row fails. See :mod:`odeflow.analysis.verification`.
"""

from __future__ import annotations

import json

from odeflow.cli.catalog import METHODS, VERIFY_DEFAULTS, check_names
from odeflow.cli.parser import any_case
from odeflow.cli.tables import add_wide_argument, width_of

# the defaults of odeflow.analysis.verification, as the help shows them (odeflow.cli.catalog)
DEFAULT_RTOL, DEFAULT_ATOL = VERIFY_DEFAULTS["rtol"], VERIFY_DEFAULTS["atol"]
DEFAULT_METHOD, DEFAULT_TOLERANCE = VERIFY_DEFAULTS["method"], VERIFY_DEFAULTS["tolerance"]
T_MIN, T_MAX = VERIFY_DEFAULTS["t_min"], VERIFY_DEFAULTS["t_max"]

#: Exit code when at least one check fails.
EXIT_FAIL = 1


def register(sub) -> None:
    checks = check_names()
    p = sub.add_parser(
        "verify", help="check every model family's closed forms against scipy",
        description=f"Integrate the ODE behind each closed form of every model family "
                    f"({', '.join(checks)}; docs/verification.md) with scipy's solve_ivp "
                    "and print the largest relative error numeric vs closed form over the "
                    f"run's log-spaced t in [{T_MIN:g}, --t-max], or over the family's own "
                    "times where it has them; the closing line names each family's. Exit "
                    "status 1 if any check fails.")
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                   help=f"solve_ivp relative tolerance ({DEFAULT_RTOL:g})")
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL,
                   help=f"solve_ivp absolute tolerance ({DEFAULT_ATOL:g}; the checked "
                        "quantities reach 1e-15 at t = 1e-3, so it must stay far below "
                        "rtol times that)")
    p.add_argument("--method", default=DEFAULT_METHOD, choices=METHODS,
                   type=any_case(METHODS, "method"),
                   help=f"solve_ivp method, any letter case ({DEFAULT_METHOD})")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help=f"largest relative error that passes ({DEFAULT_TOLERANCE:g})")
    p.add_argument("--only", nargs="+", metavar="CF", type=str.upper, choices=checks,
                   help=f"run only these checks ({' '.join(checks)})")
    p.add_argument("--t-max", type=float, default=T_MAX,
                   help=f"end of the run's log-spaced grid ({T_MAX:g}; a family with times "
                        "of its own keeps them)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random data model of CF4 (0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-notes", action="store_true", help="print the table without notes")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress lines (on stderr, as each check starts and ends)")
    add_wide_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from odeflow.analysis.verification import verify

    report = verify(rtol=args.rtol, atol=args.atol, method=args.method,
                    tolerance=args.tolerance, checks=args.only, t_max=args.t_max,
                    seed=args.seed, progress=not args.no_progress)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False))
    else:
        print(report.format_table(notes=not args.no_notes, width=width_of(args)))
    return 0 if report.passed else EXIT_FAIL
