"""Model families: one class per paper's model, one registry (:mod:`odeflow.families.base`).

:data:`BUILTIN` registers odeflow's own families, one line each; a family of
another distribution registers with :func:`register_family` or with an entry
point in the group ``odeflow.families`` (a family registered by a call wins over
an entry point of the same name, and either over a built-in one). Every shared
layer finds a family through :func:`families`, :func:`family_named` or
:func:`family_of`.
"""

from __future__ import annotations

from collections.abc import Mapping

from odeflow.errors import ValidationError
from odeflow.families import base
from odeflow.families.base import (
    ENTRY_POINT_GROUP,
    FAMILIES,
    SHARED_RUN_OPTIONS,
    Family,
    RunOption,
    as_family,
    load,
    register_family,
    unregister_family,
)

#: odeflow's own families (targets of their declarations), in the order help texts list them.
BUILTIN = ("odeflow.families.scan_snap:ScanSnap",
           "odeflow.families.induction:Induction",
           "odeflow.families.two_stage:TwoStage")

_loaded = {"builtin": False, "entry_points": False}


def families(entry_points: bool = True) -> dict[str, Family]:
    """The registered families by name: odeflow's own, then any of ``odeflow.families``
    entry points (read once, when ``entry_points``), then those registered by a call."""
    if not _loaded["builtin"]:
        _loaded["builtin"] = True
        own = {}
        for target in BUILTIN:
            family = as_family(load(target))
            own[family.name] = family
        merged = {**own, **FAMILIES}      # a family registered by a call replaces its namesake
        FAMILIES.clear()
        FAMILIES.update(merged)
    if entry_points and not _loaded["entry_points"]:
        _loaded["entry_points"] = True
        from importlib.metadata import entry_points as installed

        for point in installed(group=ENTRY_POINT_GROUP):
            family = as_family(point.load())
            if family.name not in base.BY_CALL:   # a family registered by a call wins
                base.check_run_option_kinds(family, FAMILIES.values())
                FAMILIES[family.name] = family
    return FAMILIES


def family_named(name, field: str = "family") -> Family:
    """The family called ``name``, or a ValidationError naming ``field``."""
    table = families()
    if not isinstance(name, str) or name not in table:
        raise ValidationError(field, f"unknown family {name!r:.40}; choose one of "
                              f"{list(table)}")
    return table[name]


def family_of(data) -> Family:
    """The family whose data model ``data`` is (``None``: the family that accepts it).

    Raises
    ------
    ValidationError
        Naming ``data`` when no registered family describes it.
    """
    table = families()
    for family in table.values():
        if family.describes(data):
            return family
    kinds = ", ".join(f.data_type.rpartition(":")[2] for f in table.values())
    raise ValidationError("data", f"must be a data model of one of odeflow's families "
                          f"({kinds}), got {type(data).__name__}")


def preset_names() -> list[str]:
    """Names of the built-in data models of every registered family, sorted."""
    return sorted(name for family in families().values() for name in family.preset_list())


def find_preset(name):
    """The built-in data model called ``name``, from whichever family has it.

    Raises
    ------
    ValidationError
        Naming ``preset`` when no registered family has a preset of that name.
    """
    for family in families().values():
        if isinstance(name, str) and name in family.preset_list():
            return family.preset(name)
    raise ValidationError("preset", f"unknown preset {name!r}; choose one of {preset_names()}")


def run_options() -> dict[str, list[tuple[Family, RunOption]]]:
    """Every registered family's own options of ``odeflow run`` (beyond
    :data:`SHARED_RUN_OPTIONS`): name -> the ``(family, option)`` pairs that declare it,
    in registration order (:meth:`Family.run_option_table`)."""
    table: dict[str, list] = {}
    for family in families().values():
        for name, option in family.run_option_table().items():
            table.setdefault(name, []).append((family, option))
    return table


def data_model_strategies(names=None) -> list:
    """Hypothesis strategies of the data models of the families ``names`` (default: every
    registered family whose ``strategies`` module has a hook, :meth:`Family.data_models`).

    Raises
    ------
    ValidationError
        Naming ``names`` when one of them is not registered or has no hook.
    """
    table = families()
    found = {name: table[name].data_models() if name in table else None
             for name in (table if names is None else names)}
    missing = [name for name, strategy in found.items() if strategy is None]
    if names is not None and missing:
        raise ValidationError("names", f"no data-model strategy for the families {missing}")
    return [strategy for strategy in found.values() if strategy is not None]


class Presets(Mapping):
    """Every registered family's built-in data models: name -> factory (read-only).

    ``odeflow.PRESETS["ih-paper"]()`` builds the induction family's preset as
    ``odeflow.PRESETS["syn-small"]()`` builds a Scan and Snap one; a family
    registered later is included.
    """

    def _table(self) -> dict:
        return {name: family for family in families().values()
                for name in family.preset_list()}

    def __getitem__(self, name):
        family = self._table().get(name)
        if family is None:
            raise KeyError(name)
        return family.presets()[name]

    def __iter__(self):
        return iter(sorted(self._table()))

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return f"<odeflow presets {list(self)}>"


#: The presets of every family (``odeflow.PRESETS``).
PRESETS = Presets()

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "FAMILIES", "PRESETS", "SHARED_RUN_OPTIONS",
           "Family", "Presets", "RunOption", "data_model_strategies", "families",
           "family_named", "family_of", "find_preset", "load", "preset_names",
           "register_family", "run_options", "unregister_family"]
