"""Names the command line's help shows, as plain data: no numpy, scipy or model imports.

``odeflow --help`` and every ``odeflow COMMAND --help`` are built from these
tables, so that they start in a fraction of a second; the modules that define
the real registries (model families, solver methods, verify's checks) load only
when a command runs. Each table mirrors one registry, named beside it;
``tests/test_cli_newcomer.py`` checks that they agree.
"""

from __future__ import annotations

from typing import NamedTuple


class FamilyEntry(NamedTuple):
    """A model family as the help describes it (mirrors :data:`odeflow.fields.FAMILIES`)."""

    title: str
    flows: tuple[str, ...]
    default_flow: str
    presets: tuple[str, ...]


#: The model families, by the name of :data:`odeflow.fields.FAMILIES`.
FAMILIES = {
    "scan_snap": FamilyEntry(
        "Scan and Snap (Tian et al. 2023): sequence classes, one attention layer",
        ("exact", "finite_t", "reduced", "snap"), "exact",
        ("syn-small", "snap-small", "shared-query-small", "shared-query-medium",
         "syn-medium-1", "syn-medium-3", "syn-medium-5", "syn-medium-10")),
    "induction": FamilyEntry(
        "induction heads (Chen, Sheen, Wang, Yang 2024): n-gram Markov data",
        ("population", "copier", "finite_l"), "population", ("ih-paper", "ih-point")),
}

#: The data model of a command run without ``--preset`` or ``--config``
#: (:data:`odeflow.data.DEFAULT_PRESET`).
DEFAULT_PRESET = "syn-small"

#: The integrators of ``solve_ivp`` that :func:`odeflow.solve` takes
#: (:data:`odeflow.solver.METHODS`).
METHODS = ("Radau", "BDF", "LSODA", "RK45", "DOP853", "RK23")

#: Right-hand-side budget of a solve (:data:`odeflow.solver.MAX_NFEV`).
MAX_NFEV = 100_000

#: The checks of ``odeflow verify``
#: (:func:`odeflow.analysis.check_registry.registered_checks`).
CHECKS = ("CF1", "CF2", "CF3", "CF4", "CF5", "CF6", "I_S", "CF-IH1", "CF-IH2")

#: Defaults of ``odeflow verify`` (the ``DEFAULT_*``, ``T_MIN`` and ``T_MAX`` of
#: :mod:`odeflow.analysis.verify`).
VERIFY_DEFAULTS = {"rtol": 1e-10, "atol": 1e-30, "method": "LSODA", "tolerance": 1e-7,
                   "t_min": 1e-3, "t_max": 1e9}

#: Processes ``odeflow compare --run`` trains (:data:`odeflow.analysis.compare.RUNS`).
RUNS = ("sgd", "gradient_ascent")


def scan_snap_presets() -> list[str]:
    """The sequence-class presets, sorted (:data:`odeflow.data.PRESETS`)."""
    return sorted(FAMILIES["scan_snap"].presets)


def preset_names() -> list[str]:
    """The presets of every family, sorted (:func:`odeflow.fields.preset_names`)."""
    return sorted(name for family in FAMILIES.values() for name in family.presets)


def families_text(width: int = 78) -> str:
    """The model families for ``odeflow --help``: title, flows (default first), presets."""
    import textwrap

    lines = []
    for family in FAMILIES.values():
        flows = [family.default_flow, *(f for f in family.flows if f != family.default_flow)]
        text = f"flows: {', '.join(flows)}; presets: {', '.join(family.presets)}"
        lines += [f"  {family.title}", *textwrap.wrap(text, width, initial_indent="    ",
                                                      subsequent_indent="      ",
                                                      break_on_hyphens=False)]
    return "\n".join(lines)
