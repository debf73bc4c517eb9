"""The checks of ``odeflow verify``, shared by the model families.

Each model family declares its checks (closed form vs scipy), a
:class:`CheckFamily`, in its declaration (:mod:`odeflow.families`, the
``checks`` target); :func:`odeflow.analysis.verification.verify` runs the selected
ones. The rows (:class:`CheckResult`), the report
(:class:`VerificationReport`) and :func:`relative_error` live here so that a
family's checks need no other family's module: the Scan-and-Snap checks
(CF1-CF6) are :data:`odeflow.analysis.checks_scan_snap.SCAN_SNAP_CHECKS`, the
induction-head checks (I_S, CF-IH1, CF-IH2)
:data:`odeflow.analysis.induction.verify.INDUCTION_CHECKS`.
"""

from __future__ import annotations

import math
import textwrap
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CheckFamily",
    "CheckResult",
    "CheckSettings",
    "VerificationReport",
    "check_titles",
    "grids",
    "registered_checks",
    "relative_error",
    "run_checks",
]


@dataclass
class CheckResult:
    """One row of the verification table.

    Attributes
    ----------
    check : str
        ``"CF1"`` .. ``"CF6"``, ``"I_S"``, ``"CF-IH1"``, ... (``docs/derivations.md``).
    quantity : str
        What is compared, e.g. ``"h(t)"``.
    equation : str
        The paper's equation(s) of the closed form.
    parameters : str
        The setting (vocabulary, learning rates, data model).
    max_rel_error : float
        ``max_t |numeric - closed| / max(|closed|, floor)``; ``nan`` if the
        check could not be carried out.
    tolerance : float
        The row passes when ``max_rel_error <= tolerance``.
    floor : str
        The floor of the denominator (``"-"`` when none is needed).
    note : str
        What else was measured (ranges covered, conditions, slack).
    details : dict
        Machine-readable figures (solver statistics, ranges, conditions).
    conditions_met : bool
        False when the hypotheses of the closed form do not hold in the run
        (Eqn 12 needs a dominant token and non-growing common logits) or the
        check could not be carried out; the row then fails.
    """

    check: str
    quantity: str
    equation: str
    parameters: str
    max_rel_error: float
    tolerance: float
    floor: str = "-"
    note: str = ""
    details: dict = field(default_factory=dict)
    conditions_met: bool = True

    @property
    def passed(self) -> bool:
        """``max_rel_error <= tolerance`` (false for ``nan``) and the check's conditions hold."""
        return bool(self.conditions_met and self.max_rel_error <= self.tolerance)

    def to_dict(self) -> dict:
        """JSON-able form (non-finite numbers become the strings ``"nan"``, ``"inf"``)."""
        return jsonable({"check": self.check, "quantity": self.quantity,
                         "equation": self.equation, "parameters": self.parameters,
                         "max_rel_error": self.max_rel_error, "tolerance": self.tolerance,
                         "floor": self.floor, "passed": self.passed,
                         "conditions_met": self.conditions_met, "note": self.note,
                         "details": self.details})


@dataclass
class VerificationReport:
    """All rows of a verification run, with the settings that produced them.

    Attributes
    ----------
    rows : list of CheckResult
    settings : dict
        ``rtol, atol, method, tolerance, t_min, t_max, points, seed``, ``checks`` and
        ``grids``: each family's times, ``{family: text}`` (:meth:`CheckFamily.grid_text`;
        without it the summary shows the ``t_min`` to ``t_max`` grid).
    wall_time : float
        Seconds taken by :func:`~odeflow.analysis.verification.verify`.
    """

    rows: list[CheckResult]
    settings: dict
    wall_time: float = 0.0

    @property
    def passed(self) -> bool:
        """True when every row passes."""
        return all(row.passed for row in self.rows)

    @property
    def max_rel_error(self) -> float:
        """The largest relative error over all rows (``nan`` if any row has none)."""
        errors = [row.max_rel_error for row in self.rows]
        return float(np.max(errors)) if errors else 0.0

    @property
    def worst(self) -> tuple[int, float] | None:
        """``(index, error / tolerance)`` of the row closest to (or furthest past) its tolerance.

        Each row has its own tolerance, so rows are ranked by their error as a
        fraction of it; a row without an error (``nan``) ranks first, as ``inf``.
        None for an empty report.
        """
        if not self.rows:
            return None
        ratios = [row.max_rel_error / row.tolerance if row.max_rel_error == row.max_rel_error
                  else math.inf for row in self.rows]
        index = int(np.argmax(ratios))
        return index, float(ratios[index])

    def to_dict(self) -> dict:
        """JSON-able form: settings, ``passed``, ``wall_time``, the worst row and the rows."""
        worst = self.worst
        return jsonable({"settings": self.settings, "passed": self.passed,
                         "max_rel_error": self.max_rel_error,
                         "worst_error_to_tolerance": None if worst is None else worst[1],
                         "worst_row": None if worst is None else worst[0] + 1,
                         "wall_time": self.wall_time,
                         "rows": [row.to_dict() for row in self.rows]})

    def format_table(self, notes: bool = True, width: int | None = 100) -> str:
        """The table printed by ``odeflow verify`` (plain text).

        ``width``: largest line length; rows are grouped under a line naming the
        check, quantity and equation, long parameters and notes wrap. None: one
        row per check with every column on it (``odeflow verify --wide``).
        """
        lines = self._rows_wide() if width is None else self._rows_grouped(width)
        if notes:
            lines += ["", "notes:"]
            lines += [_wrapped(f"  {i + 1:>2}. {r.note}", width, "      ")
                      for i, r in enumerate(self.rows) if r.note]
            lines.append(_wrapped("floors: R0 = max(f^_l(0)^2/f^_l'(0)^2, 1) (relative gain), "
                                  "I0 = max_l 1/f^_l(0)^2 (Eqn 11 invariant); '-' = none "
                                  "needed (quantity > 0 on the grid)", width, "  "))
        lines.append(_wrapped(self.summary(), width, "  "))
        return "\n".join(lines)

    def summary(self) -> str:
        """The closing line: verdict, the worst row against its own tolerance, settings."""
        s = self.settings
        failed = [i + 1 for i, r in enumerate(self.rows) if not r.passed]
        verdict = "all PASS" if not failed else \
            f"{len(failed)} FAIL (row{'s' if len(failed) > 1 else ''} " \
            f"{', '.join(map(str, failed))})"
        text = f"{len(self.rows)} checks, {verdict}; "
        worst = self.worst
        if worst is not None:
            index, ratio = worst
            r = self.rows[index]
            what = f"row {index + 1}, {r.check} {r.quantity}"
            if math.isinf(ratio):
                text += f"worst: {what} (no error measured); "
            else:
                share = f"{ratio:.2g} of" if ratio <= 1 else f"{ratio:.3g} x"
                text += (f"worst error {share} its tolerance: {what} "
                         f"({r.max_rel_error:.2e}, tol {r.tolerance:.0e}); ")
        grid = s.get("grids") or {"": f"t in [{s['t_min']:g}, {s['t_max']:g}] "
                                      f"({s['points']} log-spaced points)"}
        shared: dict[str, list] = {}   # families of one grid named together
        for family, span in grid.items():
            shared.setdefault(span, []).append(family)
        times = "; ".join(span if len(shared) == 1 else f"{', '.join(names)}: {span}"
                          for span, names in shared.items())
        text += f"{s['method']} rtol={s['rtol']:g} atol={s['atol']:g}; {times}; " \
            f"{self.wall_time:.1f} s"
        return text

    def _cells(self, r: CheckResult) -> tuple[str, str, str, str]:
        return (f"{r.max_rel_error:.2e}", r.floor, f"{r.tolerance:.0e}",
                "PASS" if r.passed else "FAIL")

    def _rows_wide(self) -> list[str]:
        header = ("#", "check", "quantity", "paper eqn", "parameters", "max rel err", "floor",
                  "tol", "result")
        body = [(str(i + 1), r.check, r.quantity, r.equation, r.parameters, *self._cells(r))
                for i, r in enumerate(self.rows)]
        widths = [max(len(line[j]) for line in (header, *body)) for j in range(len(header))]
        right = {0, 5, 7}

        def fmt(line):
            return "  ".join(cell.rjust(w) if j in right else cell.ljust(w)
                             for j, (cell, w) in enumerate(zip(line, widths, strict=True)))

        return [fmt(header), "  ".join("-" * w for w in widths)] + \
            [fmt(line).rstrip() for line in body]

    def _rows_grouped(self, width: int) -> list[str]:
        header = ("#", "quantity: parameters", "max rel err", "floor", "tol", "result")
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(self.rows):
            groups.setdefault(r.check, []).append(i)
        body = {}
        for members in groups.values():
            rows = [self.rows[i] for i in members]
            single = len({r.quantity for r in rows}) == 1  # named on the group's line
            for i, r in zip(members, rows, strict=True):
                what = r.parameters if single else f"{r.quantity}: {r.parameters}"
                body[i] = (str(i + 1), what, *self._cells(r))
        widths = [max(len(line[j]) for line in (header, *body.values()))
                  for j in range(len(header))]
        fixed = sum(w for j, w in enumerate(widths) if j != 1) + 2 * (len(header) - 1)
        widths[1] = max(20, min(widths[1], width - fixed))
        right = {0, 2, 4}

        def fmt(line):
            return "  ".join(cell.rjust(w) if j in right else cell.ljust(w)
                             for j, (cell, w) in enumerate(zip(line, widths, strict=True)))

        lines = [fmt(header).rstrip(), "  ".join("-" * w for w in widths)]
        titles = check_titles()
        for check, members in groups.items():
            rows = [self.rows[i] for i in members]
            quantities = list(dict.fromkeys(r.quantity for r in rows))
            equations = list(dict.fromkeys(r.equation for r in rows))
            title_q, title_eq = titles.get(check, (", ".join(quantities), equations[0]))
            quantity = quantities[0] if len(quantities) == 1 else title_q
            equation = equations[0] if len(equations) == 1 else title_eq
            lines.append(_wrapped(f"{check}: {quantity} ({equation})", width, "  "))
            for i in members:
                line = body[i]
                parts = textwrap.wrap(line[1], widths[1], subsequent_indent="  ") or [""]
                lines.append(fmt((line[0], parts[0], *line[2:])).rstrip())
                lines += [" " * (widths[0] + 2) + part for part in parts[1:]]
        return lines


def _wrapped(text: str, width: int | None, indent: str) -> str:
    """``text`` wrapped at ``width`` with continuation lines indented (as is for None)."""
    if width is None or len(text) <= width:
        return text
    return textwrap.fill(text, width=width, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def jsonable(value):
    """``value`` with numpy arrays and scalars as lists and numbers, non-finite as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def relative_error(numeric, closed, floor=0.0) -> float:
    """``max |numeric - closed| / max(|closed|, floor)`` over all entries.

    Parameters
    ----------
    numeric, closed : array_like
        Integrated and closed-form values (broadcast).
    floor : array_like, default 0
        Lower bound of the denominator, for quantities that pass through zero.

    Returns
    -------
    float
        ``nan`` if any entry is not finite; ``inf`` if a denominator is zero.
    """
    numeric, closed = np.broadcast_arrays(np.asarray(numeric, float), np.asarray(closed, float))
    if numeric.size == 0:
        return float("nan")
    if not (np.all(np.isfinite(numeric)) and np.all(np.isfinite(closed))):
        return float("nan")
    denominator = np.maximum(np.abs(closed), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(numeric - closed) / denominator
    ratio = np.where(denominator > 0, ratio, np.where(numeric == closed, 0.0, np.inf))
    return float(np.max(ratio))


@dataclass(frozen=True)
class CheckSettings:
    """The settings of one ``odeflow verify`` run, handed to every family's checks.

    ``t_min``, ``t_max`` and ``points_per_decade`` are the run's log-spaced grid
    (``--t-max``) and ``seed`` the seed of a random data model; a family whose
    checks compare on other times says which with :attr:`CheckFamily.grid`.
    """

    rtol: float
    atol: float
    method: str
    tolerance: float
    t_min: float
    t_max: float
    points_per_decade: int
    seed: int


@dataclass(frozen=True)
class CheckFamily:
    """The checks of one model family.

    Parameters
    ----------
    family : str
        Family name (``"scan_snap"``, ``"induction"``).
    titles : mapping of str to (str, str)
        Check name -> ``(quantity, equation)``, in table order (the row of a
        check that raised).
    context : callable
        ``context(settings)``: state shared by the family's checks in one run
        (cached solves), built once per run.
    run : callable
        ``run(context, name)``: the rows of check ``name``.
    position : int, default 0
        Place of the family in the table (lower first; ties in registration
        order), so the table does not depend on which module was imported first.
    grid : str or callable, optional
        The times the family's checks compare on, one phrase for the closing
        line of ``odeflow verify`` (e.g. ``"t in [0.01, 10] (60 log-spaced
        points)"``), or ``grid(settings)`` returning it. None: the checks use the
        run's grid, ``t_min`` to ``t_max`` at ``points_per_decade``
        (:func:`~odeflow.analysis.verification.time_grid`).
    """

    family: str
    titles: Mapping[str, tuple[str, str]]
    context: Callable[[CheckSettings], object]
    run: Callable[[object, str], list[CheckResult]]
    position: int = 0
    grid: str | Callable[[CheckSettings], str] | None = None

    def grid_text(self, settings: CheckSettings, default: str) -> str:
        """:attr:`grid` as text for ``settings`` (``default``, the run's grid, when None)."""
        if self.grid is None:
            return default
        return self.grid(settings) if callable(self.grid) else str(self.grid)


def _families() -> list[CheckFamily]:
    """The checks of every registered model family (:mod:`odeflow.families`), in table order."""
    from odeflow.families import families

    found = [family.check_family() for family in families().values()]
    return sorted((f for f in found if f is not None), key=lambda fam: fam.position)


def grids(selected, settings: CheckSettings, default: str) -> dict[str, str]:
    """``{family: its grid text}`` (:meth:`CheckFamily.grid_text`) of each family with a
    check in ``selected``, in table order."""
    return {fam.family: fam.grid_text(settings, default) for fam in _families()
            if any(name in selected for name in fam.titles)}


def registered_checks() -> tuple[str, ...]:
    """Every registered check name, family by family, in table order."""
    return tuple(name for fam in _families() for name in fam.titles)


def check_titles() -> dict[str, tuple[str, str]]:
    """``{check: (quantity, equation)}`` over every registered check."""
    return {name: title for fam in _families() for name, title in fam.titles.items()}


def run_checks(selected, settings: CheckSettings,
               caught: tuple[type[BaseException], ...],
               progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """The rows of the ``selected`` checks; an exception of a ``caught`` type is a failing row.

    Each family's context is built only when one of its checks is selected.
    ``progress``, when given, receives a short line as each check starts
    (``"verify 3/9: CF3 Gamma(t) ..."``) and as it ends (``"verify 3/9: CF3: 6 rows
    PASS, 1.2 s"``).
    """
    rows: list[CheckResult] = []
    total = sum(name in selected for fam in _families() for name in fam.titles)
    done = 0
    for fam in _families():
        names = [name for name in fam.titles if name in selected]
        if not names:
            continue
        start = time.perf_counter()
        ctx = fam.context(settings)
        for name in names:
            before = len(rows)
            if progress is not None:
                progress(f"verify {done + 1}/{total}: {name} {fam.titles[name][0]} ...")
            try:
                rows += fam.run(ctx, name)
            except caught as exc:
                quantity, equation = fam.titles[name]
                rows.append(CheckResult(name, quantity, equation, "-", float("nan"),
                                        settings.tolerance,
                                        note=f"error: {type(exc).__name__}: {exc}",
                                        conditions_met=False))
            done += 1
            if progress is not None:
                new = rows[before:]
                failed = sum(not r.passed for r in new)
                progress(f"verify {done}/{total}: {name}: {len(new)} "
                         f"row{'s' if len(new) != 1 else ''} "
                         f"{'PASS' if not failed else f'{failed} FAIL'}, "
                         f"{time.perf_counter() - start:.1f} s")
            start = time.perf_counter()
    return rows
