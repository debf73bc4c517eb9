"""Command-line front end: ``odeflow <command>``.

Each command lives in its own module under ``odeflow.cli`` with a
``register(subparsers)`` function that adds its parser and sets ``func``
(returning the exit code); every such module is picked up, ``run`` first. Errors in the
user's input print ``odeflow: error: <field>: <why>`` and exit 2; a failed solve
exits 3. One rule for every command: user input ends in exit 0, 2 or 3 with one
line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from odeflow.errors import SolveError, ValidationError
from odeflow.version import __version__

#: Modules under odeflow.cli that serve a command instead of registering one.
HELPER_MODULES = ("common", "reproduce_induction")


def command_modules() -> list[str]:
    """Names of the modules under odeflow.cli that register a command (``run`` first)."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if m.name not in HELPER_MODULES]
    return sorted(names, key=lambda n: (n != "run", n))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odeflow",
        description="Training dynamics of a 1-layer transformer (Scan and Snap) as ODEs.")
    parser.add_argument("--version", action="version", version=f"odeflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except ValidationError as exc:
        print(f"odeflow: error: {one_line(exc, cli_field(exc.field, argv))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"odeflow: {args.command} interrupted", file=sys.stderr)
        return 130
    except SolveError as exc:
        print(f"odeflow: solve failed: {one_line(exc)}", file=sys.stderr)
        return 3
    except MemoryError:
        print(f"odeflow: error: {args.command}: the input asks for more memory than this "
              "machine has", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `odeflow run | head`: the reader left, nothing to report
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


def cli_field(field: str, argv) -> str:
    """The flag a field came from when the user typed it (``eta_y`` -> ``--eta-y``).

    ``field`` itself when no such flag is on the command line (the value came
    from a config file or a default), or when it names part of a flag's value
    (``--flag (field)``).
    """
    name = field.split(".", 1)[0].split("[", 1)[0]
    flag = "--" + name.replace("_", "-")
    if not any(a == flag or a.startswith(flag + "=") for a in argv):
        return field
    return flag if name == field else f"{flag} ({field})"


def one_line(exc: BaseException, field: str | None = None) -> str:
    """The message of ``exc`` on one line (newlines of nested messages folded).

    With ``field``, a :class:`ValidationError` is shown under that name.
    """
    text = f"{field}: {exc.reason}" if field is not None and hasattr(exc, "reason") \
        else str(exc)
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
