"""Model families: which data models a family describes and which flows it offers.

A *family* is one paper's model: its data model type, its levels (one
:class:`~odeflow.fields.base.Field` subclass per ``flow=`` name) and the
defaults of the arguments its fields take from :func:`odeflow.solve`. The
shared layers (the solve entry point, sweeps, the command line) look a family
up from the data model they are handed (:func:`family_of`), as
``scipy.stats`` distributions share one ``rv_continuous`` interface, instead of
branching on the family. Each family registers itself
(:func:`register_family`) from its fields package.

Families
--------
``scan_snap``
    Tian et al. 2023 (sequence classes, :class:`~odeflow.data.DataModel`):
    flows ``exact``, ``finite_t``, ``reduced``, ``snap``.
``induction``
    Chen, Sheen, Wang, Yang 2024 (n-gram Markov data,
    :class:`~odeflow.data.induction.InductionData`): flows ``population``,
    ``copier``, ``finite_l`` (``docs/induction.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odeflow.errors import ValidationError


@dataclass(frozen=True)
class Family:
    """One model family: its data model type, flows and solve defaults.

    Parameters
    ----------
    name : str
        Short identifier (``"scan_snap"``, ``"induction"``).
    data_type : type
        The family's data model class.
    flows : mapping of str to Field subclass
        ``flow=`` name -> vector field class; each class is built as
        ``cls(data, **options)``.
    default_flow : str
        The flow of ``odeflow.solve(data)`` without ``flow=``.
    defaults : mapping, optional
        Defaults of keyword arguments of :func:`odeflow.solve` that the
        family's fields take (e.g. ``eta_y = 1``, ``eta_z = 0.1``).
    accepts_none : bool, default False
        Whether ``data=None`` belongs to this family (a flow whose parameters
        are given directly, like the Sec. 6 system).
    presets : mapping of str to callable, optional
        The family's built-in data models, name -> factory (``odeflow run
        --preset NAME`` finds a name in every family, :func:`find_preset`).
    """

    name: str
    data_type: type
    flows: Mapping = field(default_factory=dict)
    default_flow: str = ""
    defaults: Mapping = field(default_factory=dict)
    accepts_none: bool = False
    presets: Mapping = field(default_factory=dict)

    def field_class(self, flow):
        """The field class of ``flow``, or a ValidationError naming ``flow``."""
        if not isinstance(flow, str) or flow not in self.flows:
            raise ValidationError("flow", f"unknown flow {flow!r} for a "
                                  f"{self.data_type.__name__}; choose one of "
                                  f"{sorted(self.flows)}")
        return self.flows[flow]


#: The registered families, in registration order.
FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` (a second family of the same name replaces it)."""
    FAMILIES[family.name] = family
    return family


def family_of(data) -> Family:
    """The family whose data model ``data`` is (``None``: the family that accepts it).

    Raises
    ------
    ValidationError
        Naming ``data`` when no registered family describes it.
    """
    for family in FAMILIES.values():
        if (data is None and family.accepts_none) or isinstance(data, family.data_type):
            return family
    kinds = ", ".join(f.data_type.__name__ for f in FAMILIES.values())
    raise ValidationError("data", f"must be a data model of one of odeflow's families "
                          f"({kinds}), got {type(data).__name__}")


def preset_names() -> list[str]:
    """Names of the built-in data models of every registered family, sorted."""
    return sorted(name for family in FAMILIES.values() for name in family.presets)


def find_preset(name):
    """The built-in data model called ``name``, from whichever family has it.

    Raises
    ------
    ValidationError
        Naming ``preset`` when no registered family has a preset of that name.
    """
    for family in FAMILIES.values():
        if isinstance(name, str) and name in family.presets:
            return family.presets[name]()
    raise ValidationError("preset", f"unknown preset {name!r}; choose one of {preset_names()}")
