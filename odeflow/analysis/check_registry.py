"""The checks of ``odeflow verify``, shared by the model families.

Each family registers its checks (closed form vs scipy) here with
:func:`register_checks`; :func:`odeflow.analysis.verify.verify` runs the
selected ones. The rows (:class:`CheckResult`), the report
(:class:`VerificationReport`) and :func:`relative_error` live here so that a
family's checks need no other family's module: the Scan-and-Snap checks
(CF1-CF6) register from :mod:`odeflow.analysis.verify`, the induction-head
checks (CF-IH1, CF-IH2, I_S) from :mod:`odeflow.analysis.induction.verify`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CheckFamily",
    "CheckResult",
    "CheckSettings",
    "VerificationReport",
    "check_titles",
    "register_checks",
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
        ``"CF1"`` .. ``"CF6"`` (spec section 5), ``"CF-IH1"``, ... (section 10).
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
        ``rtol, atol, method, tolerance, t_min, t_max, points, seed``.
    wall_time : float
        Seconds taken by :func:`~odeflow.analysis.verify.verify`.
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

    def to_dict(self) -> dict:
        """JSON-able form: settings, ``passed``, ``wall_time`` and the rows."""
        return jsonable({"settings": self.settings, "passed": self.passed,
                         "max_rel_error": self.max_rel_error, "wall_time": self.wall_time,
                         "rows": [row.to_dict() for row in self.rows]})

    def format_table(self, notes: bool = True) -> str:
        """The table printed by ``odeflow verify`` (plain text, one row per check)."""
        header = ("#", "check", "quantity", "paper eqn", "parameters", "max rel err", "floor",
                  "tol", "result")
        body = [(str(i + 1), r.check, r.quantity, r.equation, r.parameters,
                 f"{r.max_rel_error:.2e}", r.floor, f"{r.tolerance:.0e}",
                 "PASS" if r.passed else "FAIL") for i, r in enumerate(self.rows)]
        widths = [max(len(line[j]) for line in (header, *body)) for j in range(len(header))]
        right = {0, 5, 7}

        def fmt(line):
            return "  ".join(cell.rjust(w) if j in right else cell.ljust(w)
                             for j, (cell, w) in enumerate(zip(line, widths, strict=True)))

        lines = [fmt(header), "  ".join("-" * w for w in widths)]
        lines += [fmt(line).rstrip() for line in body]
        if notes:
            lines.append("")
            lines.append("notes:")
            lines += [f"  {i + 1:>2}. {r.note}" for i, r in enumerate(self.rows) if r.note]
            lines.append("floors: R0 = max(f^_l(0)^2/f^_l'(0)^2, 1) (relative gain), "
                         "I0 = max_l 1/f^_l(0)^2 (Eqn 11 invariant); '-' = none needed "
                         "(quantity > 0 on the grid)")
        s = self.settings
        n_fail = sum(not r.passed for r in self.rows)
        verdict = "all PASS" if n_fail == 0 else f"{n_fail} FAIL"
        lines.append(f"{len(self.rows)} checks, {verdict}; max rel error "
                     f"{self.max_rel_error:.2e}; {s['method']} rtol={s['rtol']:g} "
                     f"atol={s['atol']:g}; t in [{s['t_min']:g}, {s['t_max']:g}] "
                     f"({s['points']} log-spaced points); {self.wall_time:.1f} s")
        return "\n".join(lines)


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

    ``t_min``, ``t_max``, ``points_per_decade`` and ``seed`` are those of the
    Scan-and-Snap grid; a family may use its own time ranges.
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
    """

    family: str
    titles: Mapping[str, tuple[str, str]]
    context: Callable[[CheckSettings], object]
    run: Callable[[object, str], list[CheckResult]]
    position: int = 0


#: Registered families of checks, in registration order.
CHECK_FAMILIES: dict[str, CheckFamily] = {}


def register_checks(family: CheckFamily) -> CheckFamily:
    """Add a family's checks (a second registration of the same family replaces it)."""
    CHECK_FAMILIES[family.family] = family
    return family


def _families() -> list[CheckFamily]:
    return sorted(CHECK_FAMILIES.values(), key=lambda fam: fam.position)


def registered_checks() -> tuple[str, ...]:
    """Every registered check name, family by family, in table order."""
    return tuple(name for fam in _families() for name in fam.titles)


def check_titles() -> dict[str, tuple[str, str]]:
    """``{check: (quantity, equation)}`` over every registered check."""
    return {name: title for fam in _families() for name, title in fam.titles.items()}


def run_checks(selected, settings: CheckSettings,
               caught: tuple[type[BaseException], ...]) -> list[CheckResult]:
    """The rows of the ``selected`` checks; an exception of a ``caught`` type is a failing row.

    Each family's context is built only when one of its checks is selected.
    """
    rows: list[CheckResult] = []
    for fam in _families():
        names = [name for name in fam.titles if name in selected]
        if not names:
            continue
        ctx = fam.context(settings)
        for name in names:
            try:
                rows += fam.run(ctx, name)
            except caught as exc:
                quantity, equation = fam.titles[name]
                rows.append(CheckResult(name, quantity, equation, "-", float("nan"),
                                        settings.tolerance,
                                        note=f"error: {type(exc).__name__}: {exc}",
                                        conditions_met=False))
    return rows
