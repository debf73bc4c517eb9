"""Plain-text tables and lines that fit a terminal.

The commands print their standard output within :data:`WIDTH` columns by
default: a table wider than that continues in further blocks of columns, each
repeating the key columns on the left, and long lines wrap. ``width=None``
(``--wide`` on the command line) prints each table in one block and lines
unwrapped.
"""

from __future__ import annotations

import textwrap

#: Columns of default standard output.
WIDTH = 100

#: Between two columns.
GAP = "  "


def blocks(header, rows, keys: int = 1, width: int | None = WIDTH,
           left=()) -> list[str]:
    """Lines of a table of text cells, split into blocks of columns of at most ``width``.

    Parameters
    ----------
    header : sequence of str
        Column titles.
    rows : sequence of sequences of str
        Cells, one sequence per row, as long as ``header``.
    keys : int, default 1
        Leading columns repeated at the left of every block (e.g. ``t``).
    width : int or None
        Largest line length; None: one block however wide.
    left : collection of int
        Columns aligned left (the others are aligned right).

    Returns
    -------
    list of str
        The blocks' lines, blocks separated by an empty line.
    """
    header = [str(h) for h in header]
    rows = [[str(c) for c in row] for row in rows]
    widths = [max(len(line[j]) for line in (header, *rows)) for j in range(len(header))]
    key_cols = list(range(min(keys, len(header))))
    groups, current = [], []
    used = sum(widths[j] + len(GAP) for j in key_cols)
    for j in range(len(key_cols), len(header)):
        extra = widths[j] + len(GAP)
        if width is not None and current and used + extra - len(GAP) > width:
            groups.append(current)
            current, used = [], sum(widths[k] + len(GAP) for k in key_cols)
        current.append(j)
        used += extra
    groups.append(current)
    lines: list[str] = []
    for group in groups:
        cols = key_cols + group
        if lines:
            lines.append("")

        def fmt(line, cols=cols):
            return GAP.join(line[j].ljust(widths[j]) if j in left else line[j].rjust(widths[j])
                            for j in cols).rstrip()

        lines.append(fmt(header))
        lines += [fmt(row) for row in rows]
    return lines


def number(value, spec: str = ".6g") -> str:
    """A table cell: a float in ``spec``, anything else as text."""
    return format(value, spec) if isinstance(value, float) else str(value)


def wrap(text: str, width: int | None = WIDTH, indent: str = "  ") -> str:
    """``text`` wrapped at ``width`` (continuation lines indented); as is for None.

    Words (paths, numbers) are never broken, so a single word longer than
    ``width`` stays whole on its own line.
    """
    if width is None or len(text) <= width:
        return text
    lead = text[:len(text) - len(text.lstrip())]
    return textwrap.fill(text, width=width, initial_indent="", subsequent_indent=lead + indent,
                         break_long_words=False, break_on_hyphens=False)


def log_spaced_rows(t, rows: int):
    """Indices of ``t = 0`` and of about ``rows - 1`` log-spaced times after it (the rows
    of a result's ``summary_table``).

    At most one row per stored time, however large ``rows`` is; none for
    ``rows = 0`` and only ``t = 0`` for ``rows = 1``.
    """
    import numpy as np

    if rows <= 1:
        return np.arange(min(max(int(rows), 0), t.size))
    count = min(int(rows), t.size + 1) - 1
    targets = np.geomspace(max(t[1], 1e-12), t[-1], count) if t.size > 1 else []
    return np.unique(np.concatenate([[0], np.searchsorted(t, targets).clip(0, t.size - 1)]))
