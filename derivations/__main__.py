"""Run every derivation and its check: ``python -m derivations``.

Prints, for each result, its name, the paper's equation numbers, the derived
expressions (pretty-printed and as LaTeX) and the outcome of its checks.  The
exit status is 1 when any check fails, 0 otherwise.

Options: ``--quiet`` prints only one PASS/FAIL line per result;
``--no-latex`` omits the LaTeX strings.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

import sympy as sp

from . import MODULES


def main(argv: list[str] | None = None) -> int:
    """Derive and check every closed form; return the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m derivations", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quiet", action="store_true", help="one line per derivation")
    parser.add_argument("--no-latex", action="store_true", help="do not print LaTeX")
    args = parser.parse_args(argv)

    failures = []
    start = time.perf_counter()
    for module_name in MODULES:
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"{__package__}.{module_name}")
            result = module.derive()
        except Exception as exc:  # a derivation that cannot run is a failure
            failures.append(module_name)
            print(f"FAIL {module_name}: derivation raised {type(exc).__name__}: {exc}")
            continue
        passed, detail = result.check()
        elapsed = time.perf_counter() - t0
        status = "PASS" if passed else "FAIL"
        if not passed:
            failures.append(result.name)
        print(f"{status} {result.name}: {result.title} [{result.equation}] ({elapsed:.2f} s)")
        if args.quiet:
            continue
        print("=" * 78)
        print(result.summary)
        for key, value in result.exprs.items():
            print(f"--- {key}")
            print(sp.pretty(value, use_unicode=True))
            if not args.no_latex:
                print(f"LaTeX: {result.latex[key]}")
        print("--- checks")
        print(detail)
        print()
    total = time.perf_counter() - start
    if failures:
        print(f"FAILED: {', '.join(failures)} ({total:.1f} s)")
        return 1
    print(f"all {len(MODULES)} derivations passed ({total:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
