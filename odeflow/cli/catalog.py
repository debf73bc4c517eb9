"""Names the command line's help shows, as plain data: no numpy, scipy or model imports.

``odeflow --help`` and every ``odeflow COMMAND --help`` are built from these
tables and from the model families' declarations (:mod:`odeflow.families`:
titles, flows, presets and checks as text), so that they start in a fraction
of a second; the modules that define the real registries (solver methods,
verify's checks, the families' classes) load only when a command runs. Each
table mirrors one registry, named beside it; ``tests/test_cli_newcomer.py``
checks that they agree.
"""

from __future__ import annotations

from odeflow.families import families

#: The data model of a command run without ``--preset`` or ``--config``
#: (:data:`odeflow.data.DEFAULT_PRESET`).
DEFAULT_PRESET = "syn-small"

#: The integrators of ``solve_ivp`` that :func:`odeflow.solve` takes
#: (:data:`odeflow.solver.METHODS`).
METHODS = ("Radau", "BDF", "LSODA", "RK45", "DOP853", "RK23")

#: Right-hand-side budget of a solve (:data:`odeflow.solver.MAX_NFEV`).
MAX_NFEV = 100_000


def check_names() -> tuple[str, ...]:
    """The checks of ``odeflow verify``, family by family
    (:func:`odeflow.analysis.check_registry.registered_checks`)."""
    return tuple(name for family in families().values() for name in family.check_names)


#: Defaults of ``odeflow verify`` (the ``DEFAULT_*``, ``T_MIN`` and ``T_MAX`` of
#: :mod:`odeflow.analysis.verification`).
VERIFY_DEFAULTS = {"rtol": 1e-10, "atol": 1e-30, "method": "LSODA", "tolerance": 1e-7,
                   "t_min": 1e-3, "t_max": 1e9}

#: Processes ``odeflow compare --run`` trains (:data:`odeflow.analysis.compare.RUNS`).
RUNS = ("sgd", "gradient_ascent")


def scan_snap_presets() -> list[str]:
    """The sequence-class presets, sorted (:data:`odeflow.data.PRESETS`)."""
    return sorted(families()["scan_snap"].preset_list())


def preset_names() -> list[str]:
    """The presets of every family, sorted (:func:`odeflow.families.preset_names`)."""
    return sorted(name for family in families().values() for name in family.preset_list())


def families_text(width: int = 78) -> str:
    """The model families for ``odeflow --help``: title, flows (default first), presets and
    the family's docs page."""
    import textwrap

    lines = []
    for family in families().values():
        flows = [family.default_flow, *(f for f in family.flows if f != family.default_flow)]
        text = f"flows: {', '.join(flows)}; presets: {', '.join(family.preset_list())}"
        text += f"; docs: docs/{family.docs}" if family.docs else ""
        lines += [f"  {family.title}", *textwrap.wrap(text, width, initial_indent="    ",
                                                      subsequent_indent="      ",
                                                      break_on_hyphens=False)]
    return "\n".join(lines)
