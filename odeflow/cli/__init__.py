"""Command-line front end: ``odeflow <command>``.

Each command lives in its own module under ``odeflow.cli`` with a
``register(subparsers)`` function that adds its parser and sets ``func``
(returning the exit code); every such module is picked up, ``run`` first. A
command module imports at its top only what its parser needs (the tables of
:mod:`odeflow.cli.catalog`), and the rest inside ``func``, so that
``odeflow --help`` and every ``odeflow COMMAND --help`` start quickly. Errors in
the user's input print ``odeflow: error: <field>: <why>`` and exit 2 (a mistyped
flag or choice names the nearest valid one, :mod:`odeflow.cli.parser`); a failed
solve exits 3. One rule for every command: user input ends in exit 0, 2 or 3
with one line on stderr, never a traceback.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import pkgutil
import sys

from odeflow.cli.catalog import families_text
from odeflow.cli.parser import Parser
from odeflow.errors import SolveError, SweepStopped, ValidationError
from odeflow.version import __version__


def command_modules() -> list[str]:
    """Names of the modules under odeflow.cli that register a command (``run`` first).

    A command module is one whose source defines ``register`` at its top level;
    the source is read, not imported.
    """
    names = []
    for module in pkgutil.iter_modules(__path__):
        origin = importlib.util.find_spec(f"{__name__}.{module.name}").origin
        with open(origin, encoding="utf-8") as fh:
            if "\ndef register(" in fh.read():
                names.append(module.name)
    return sorted(names, key=lambda n: (n != "run", n))


def build_parser() -> Parser:
    """The ``odeflow`` parser with every command's sub-parser."""
    import argparse

    parser = Parser(
        prog="odeflow", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Training dynamics of transformers as ODEs: solve the flows of a model\n"
                    "family, check them against closed forms and real training, draw and\n"
                    f"sweep them.\n\nModel families:\n{families_text()}\n\n"
                    "Each command's --help describes it; docs/cli.md has them all.")
    parser.add_argument("--version", action="version", version=f"odeflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules():
        importlib.import_module(f"{__name__}.{name}").register(sub)
    parser.commands = dict(sub.choices)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and a mistake on the command line (2)
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if getattr(args, "out", None) == "":  # not "the default path": say so, like any flag
            raise ValidationError("out", "is empty; give a path, or leave --out out for the "
                                  "default")
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk or an I/O error on stdout shows here, not at exit
        return code
    except ValidationError as exc:
        print(f"odeflow: error: {one_line(exc, cli_field(exc.field, argv))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"odeflow: {args.command} interrupted", file=sys.stderr)
        return 130
    except SweepStopped as exc:  # a backend or store failure; the stored points are kept
        print(f"odeflow: {one_line(exc)}", file=sys.stderr)
        return 3
    except SolveError as exc:
        print(f"odeflow: solve failed: {one_line(exc)}", file=sys.stderr)
        return 3
    except MemoryError:
        print(f"odeflow: error: {args.command}: the input asks for more memory than this "
              "machine has", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `odeflow run | head`: the reader left, nothing to report
        _drop_stdout()
        return 0
    except OSError as exc:
        if exc.errno not in STDOUT_ERRORS or exc.filename is not None:
            raise
        _drop_stdout()  # what is still buffered cannot be written either
        print(f"odeflow: error: stdout: cannot write the output of {args.command} "
              f"({exc.strerror or exc})", file=sys.stderr)
        return 2


#: errno values of a write to stdout that cannot succeed (``> /dev/full``, a failing disk).
STDOUT_ERRORS = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG}


def _drop_stdout() -> None:
    """Point stdout at the null device (its buffer is dropped at exit without an error)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


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
