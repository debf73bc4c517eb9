"""Derive and check the closed forms: ``python -m derivations [NAME ...]``.

Prints, for each result, its name, the paper's equation numbers, the derived
expressions (pretty-printed and as LaTeX) and the outcome of its checks. The
exit status is 1 when any check fails, 2 for an unknown name, 0 otherwise.
``odeflow derive`` is the same runner, installed with the package.

Options: ``--quiet`` prints only one PASS/FAIL line per result;
``--no-latex`` omits the LaTeX strings.
"""

from __future__ import annotations

import argparse
import sys

from . import MODULES
from .report import find, run_derivations


def main(argv: list[str] | None = None) -> int:
    """Derive and check the chosen closed forms (all by default); the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m derivations", description=__doc__.splitlines()[0]
    )
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="derivations to run (CF1 ... CF-IH2, or module names); all "
                             "by default")
    parser.add_argument("--quiet", action="store_true", help="one line per derivation")
    parser.add_argument("--no-latex", action="store_true", help="do not print LaTeX")
    args = parser.parse_args(argv)
    try:
        modules = [find(name) for name in args.names] or list(MODULES)
    except LookupError as exc:
        print(f"python -m derivations: error: {exc}", file=sys.stderr)
        return 2
    failures = run_derivations(modules, detail=not args.quiet, latex=not args.no_latex)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
