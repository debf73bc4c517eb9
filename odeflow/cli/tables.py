"""``--wide`` of the commands that print tables (see :mod:`odeflow.tables`)."""

from __future__ import annotations

from odeflow.tables import WIDTH, blocks, number, wrap

__all__ = ["WIDTH", "add_wide_argument", "blocks", "number", "width_of", "wrap"]


def width_of(args) -> int | None:
    """:data:`WIDTH`, or None (no limit) when the command was given ``--wide``."""
    return None if getattr(args, "wide", False) else WIDTH


def add_wide_argument(parser) -> None:
    """``--wide``: tables in one block and lines unwrapped (default: within 100 columns)."""
    parser.add_argument("--wide", action="store_true",
                        help=f"print each table in one block, lines unwrapped (default: "
                             f"within {WIDTH} columns, wide tables continue below)")
