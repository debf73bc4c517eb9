"""The argument parser of every command: mistakes in one line, with the nearest valid spelling.

argparse prints its whole usage block before an error; :class:`Parser` prints
one line, ``odeflow: error: <flag or argument>: <why>``, and exits 2, like
every other error of the command line. An unknown flag or choice names the
closest valid one (:func:`difflib.get_close_matches`).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys

#: argparse's wording of a value its ``type`` refused -> the command line's.
_TYPE_WORDS = {"float": "a number", "int": "a whole number"}


def nearest(word: str, choices) -> str | None:
    """The choice closest to ``word`` (case-insensitive), or None when none is close."""
    choices = [str(c) for c in choices]
    folded = {c.lower(): c for c in choices}
    found = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.6)
    return folded[found[0]] if found else None


def any_case(choices, name: str = "choice"):
    """An argparse ``type`` taking ``choices`` in any letter case (``rk45`` -> ``RK45``).

    A word that matches no choice is returned as typed, so that the parser
    refuses it naming the nearest choice.
    """
    folded = {str(c).lower(): c for c in choices}

    def convert(text: str):
        return folded.get(text.lower(), text)

    convert.__name__ = name
    return convert


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors are one line with a suggestion.

    Sub-parsers made with ``add_subparsers().add_parser`` are of this class too.
    The top-level parser's :attr:`commands` (set by :func:`odeflow.cli.build_parser`)
    names each command's parser, so that an unknown flag is matched against the
    flags of the command it was typed for.
    """

    commands: dict = {}

    def error(self, message: str):
        text = re.sub(r"^argument ([^:]+): ", r"\1: ", str(message))
        match = re.search(r"invalid (\w+) value: (.*)$", text)
        if match and match.group(1) in _TYPE_WORDS:
            text = text[:match.start()] + f"must be {_TYPE_WORDS[match.group(1)]}, " \
                f"got {match.group(2)}"
        self.exit(2, f"odeflow: error: {' '.join(text.split())}\n")

    def _check_value(self, action, value):
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        guess = nearest(str(value), choices)
        hint = f"; did you mean {guess}?" if guess else ""
        listed = f" (choose from {', '.join(choices)})" if len(choices) <= 12 else ""
        raise argparse.ArgumentError(action, f"invalid choice {value!r}{hint}{listed}")

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(self.unknown_argument(extras, getattr(parsed, "command", None)))
        return parsed

    def unknown_argument(self, extras: list, command: str | None) -> str:
        """The message for arguments no parser took: the first unknown flag, with the
        nearest flag of ``command`` (or of the top level), else the first stray value."""
        parser = self.commands.get(command, self)
        where = f"odeflow {command}" if command else "odeflow"
        flags = [o for a in parser._actions for o in a.option_strings]
        for extra in extras:
            if extra.startswith("-") and len(extra) > 1:
                flag = extra.split("=", 1)[0]
                guess = nearest(flag, flags)
                hint = f"did you mean {guess}?" if guess else f"{where} --help lists them"
                return f"{flag}: unknown flag of {where}; {hint}"
        return f"unexpected argument {extras[0]!r} for {where} ({where} --help)"
