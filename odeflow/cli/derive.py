"""``odeflow derive``: re-derive the closed forms with sympy and check each (PASS/FAIL).

The installed front end of the ``derivations`` package (``python -m
derivations`` in a checkout): one line per derivation, exit status 1 when any
check fails. Sympy loads only when the command runs.
"""

from __future__ import annotations

#: Exit status when a derivation's check fails.
EXIT_FAIL = 1


def register(sub) -> None:
    p = sub.add_parser(
        "derive", help="re-derive the closed forms with sympy and check them (PASS/FAIL)",
        description="Derive every closed form that odeflow evaluates (Scan and Snap's Eqns "
                    "44-45, 128, 11, 12, 13-14; the optimisers' ODEs; the induction-head "
                    "stages) from the ODE it solves, with sympy, and check the result by "
                    "substitution and with mpmath. One PASS/FAIL line each; exit status 1 "
                    "if any check fails. docs/derivations.md shows the derived formulas.")
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="run only this derivation (e.g. CF1, CF-IH2, or a module name such "
                        "as cf1_decoder_margin; --list shows them); all by default")
    p.add_argument("--list", action="store_true",
                   help="list the derivations (name, title; module and paper equations "
                        "below) and exit")
    p.add_argument("--detail", action="store_true",
                   help="also print each derived expression and every individual check")
    p.set_defaults(func=run)


def run(args) -> int:
    from derivations import MODULES
    from derivations.report import catalogue, find, run_derivations
    from odeflow.errors import ValidationError

    if args.list:
        for module in catalogue():
            short = module.__name__.rsplit(".", 1)[1]
            print(f"{module.NAME:<7} {module.TITLE}")
            print(f"{'':<7} {short}: {module.EQUATION}")
        return 0
    try:
        names = [find(args.name)] if args.name is not None else list(MODULES)
    except LookupError as exc:
        raise ValidationError("NAME", str(exc)) from None
    failures = run_derivations(names, detail=args.detail, latex=False)
    return EXIT_FAIL if failures else 0
