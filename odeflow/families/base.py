"""The model-family base class and its registry.

A *family* is one paper's model. As every ``scipy.stats`` distribution is one
class behind ``rv_continuous``, every family is one subclass of :class:`Family`
that declares what the shared layers need: its data model type and presets,
its flows (``flow=`` name -> field class) and their solve defaults, its
verification checks, figures, sweep tasks, reproductions, flat-API names, test
strategies and docs page. The shared layers (``odeflow.solve``, ``verify``,
``plot``, ``sweep``, ``run --config``, ``reproduce``, the flat API) look every
one of these up here and never name a family.

A declaration holds *targets*, ``"module:attribute"`` strings, not objects: it
imports nothing, so the registry sits beneath every layer, the command line's
help lists families, flows, presets and checks without loading numpy or a
model, and a target's module loads only when it is used (:func:`load`).

A family outside the package registers with one call,
``odeflow.families.register_family(MyFamily())``, or with an entry point in the
group ``odeflow.families`` whose object is the family instance (or class).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import NamedTuple

from odeflow.errors import ValidationError

#: Entry-point group of families installed by other distributions.
ENTRY_POINT_GROUP = "odeflow.families"


def load(target: str):
    """The object a ``"module:attribute"`` target names (importing its module)."""
    module, _, attribute = target.partition(":")
    value = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


#: Options of ``odeflow run`` shared by every family (``[run]`` keys and flags), with their
#: types; ``seq_len``, ``sample_size`` and ``seed`` go to a flow whose field takes them.
SHARED_RUN_OPTIONS = {"flow": str, "method": str, "t_end": float, "rtol": float,
                      "atol": float, "seq_len": int, "sample_size": int, "seed": int}
#: Names a family's own option may not take: ``odeflow run``'s own flags and the old names
#: that still mean shared options for one release (their flags would clash).
RESERVED_RUN_NAMES = ("preset", "config", "out", "mkdir", "rows", "wide", "no_progress",
                      "max_nfev", "help", "length", "sequences", "sample_seed")


class RunOption(NamedTuple):
    """One of a family's own options of ``odeflow run`` (:attr:`Family.run_options`).

    ``kind`` is ``float`` (a number > 0), ``int`` (a whole number >= 0), ``str``
    or a tuple of the allowed strings; ``flows`` the flows that take it (None:
    every flow of the family); ``convert`` the target of ``convert(value,
    options)`` returning :func:`odeflow.solve`'s keyword arguments, or ``""``
    (the option is passed under its own name).
    """

    name: str
    kind: object
    flows: tuple | None
    help: str
    convert: str = ""

    def applies_to(self, flow: str) -> bool:
        """Whether ``flow`` takes this option."""
        return self.flows is None or flow in self.flows

    def solve_options(self, value, options: Mapping) -> dict:
        """The keyword arguments of :func:`odeflow.solve` that ``value`` stands for."""
        return load(self.convert)(value, options) if self.convert else {self.name: value}


class Family:
    """Base class of a model family; subclasses set the class attributes below.

    Attributes
    ----------
    name : str
        Identifier, also the ``family`` key of a configuration file.
    title : str
        One line for help texts: the paper and the data.
    data_type : str
        Target of the data model class (it derives from
        :class:`~odeflow.data.forms.TomlForm` and has ``preset_table()``).
    flows : mapping of str to str
        ``flow=`` name -> target of its :class:`~odeflow.fields.base.Field`
        subclass, built as ``cls(data, **options)``.
    default_flow : str
        The flow of ``odeflow.solve(data)`` without ``flow=``.
    solve_defaults : mapping
        Defaults of the keyword arguments of :func:`odeflow.solve` that the
        family's fields take (e.g. the learning rates).
    accepts_none : bool
        Whether ``data=None`` belongs to this family.
    preset_names : tuple of str
        The names of the data type's presets, for help texts (a test checks
        them against ``preset_table()``).
    checks : str
        Target of the family's :class:`~odeflow.analysis.check_registry.CheckFamily`
        (``odeflow verify``), or ``""``.
    check_names : tuple of str
        The names of those checks, for help texts.
    figures : tuple of (name, target, summary, accepts)
        Figures of ``odeflow plot``: name, target of the plot function, one-line
        summary and the common options it takes.
    sweep_tasks : str
        Target of an iterable of :class:`~odeflow.sweeps.tasks.TaskKind`, or ``""``.
    experiments : mapping of str to (target, summary[, defaults])
        Reproductions of ``odeflow reproduce NAME``: target of ``run(args)``
        (the parsed arguments; returns the exit code), a summary, and optionally
        the experiment's own defaults of ``--seeds`` and ``--steps``.
    exports : mapping of str to str
        Names of the flat API (``odeflow.NAME``) -> target.
    train : str
        Target of the family's trainer, ``train(data, *, steps, seeds, ...)``
        (:func:`odeflow.train` calls it), or ``""``.
    compare : str
        Target of the family's runs beside its flow, ``compare(data, *, seeds,
        steps, ...)`` (:func:`odeflow.compare` calls it), or ``""``.
    run_options : mapping of str to (type, flows, help[, convert])
        Options of ``odeflow run`` (``[run]`` keys and ``--flags``) that the
        family's flows take beyond the shared ones (:data:`SHARED_RUN_OPTIONS`):
        name -> its type (``float``: a number > 0, ``int``: a whole number >= 0,
        ``str``, or a tuple of the strings allowed), the flows that take it
        (``None``: every flow), a one-line help text and optionally the target
        of ``convert(value, options)``, which returns the keyword arguments of
        :func:`odeflow.solve` the option stands for (``options``: the run's
        resolved options, e.g. ``t_end``); without it the option is passed to
        ``solve`` under its own name. See :meth:`Family.run_option_table`.
    strategies : str
        Module of the family's hypothesis strategies (valid inputs), or ``""``. Its
        hook ``DATA_MODELS`` maps the family's name to a function whose call (no
        arguments) returns a strategy of the family's valid data models
        (:meth:`data_models`; :func:`odeflow.testing.family_data_models` draws
        from every family's).
    docs : str
        The family's page under ``docs/`` (in the docs' table of contents;
        ``odeflow --help`` names it).

    Notes
    -----
    A flow's result (what its field's ``trajectory(t, states, stats)`` returns)
    derives from :class:`~odeflow.results.solution.SolverOutput` and has ``t``,
    ``stats`` and ``meta``; ``odeflow run`` also calls its ``save(path, field)``
    and, where it has one, ``summary_table(rows, width)`` (the printed table, its
    lines within ``width`` columns when it is not None).
    Check names are upper case (``odeflow verify --only`` upper-cases what it is
    given).
    """

    name: str = ""
    title: str = ""
    data_type: str = ""
    flows: Mapping[str, str] = {}
    default_flow: str = ""
    solve_defaults: Mapping = {}
    accepts_none: bool = False
    preset_names: tuple = ()
    checks: str = ""
    check_names: tuple = ()
    figures: tuple = ()
    sweep_tasks: str = ""
    experiments: Mapping[str, tuple] = {}
    exports: Mapping[str, str] = {}
    train: str = ""
    compare: str = ""
    run_options: Mapping[str, tuple] = {}
    strategies: str = ""
    docs: str = ""

    def __repr__(self) -> str:
        return f"<odeflow family {self.name!r}>"

    @property
    def data_class(self) -> type:
        """The family's data model class."""
        return load(self.data_type)

    def describes(self, data) -> bool:
        """Whether ``data`` is one of this family's data models."""
        if data is None:
            return self.accepts_none
        module = self.data_type.partition(":")[0]
        cls = load(self.data_type) if module in sys.modules else None
        return cls is not None and isinstance(data, cls)

    def field_class(self, flow) -> type:
        """The field class of ``flow``, or a ValidationError naming ``flow``."""
        if not isinstance(flow, str) or flow not in self.flows:
            raise ValidationError("flow", f"unknown flow {flow!r} for a "
                                  f"{self.data_type.rpartition(':')[2]}; choose one of "
                                  f"{sorted(self.flows)}")
        return load(self.flows[flow])

    def presets(self) -> Mapping:
        """Name -> factory of the family's built-in data models."""
        return self.data_class.preset_table()

    def preset_list(self) -> tuple:
        """The preset names: :attr:`preset_names`, or (when a family declares none) the
        keys of its data type's ``preset_table()``."""
        return tuple(self.preset_names) or tuple(self.presets())

    def preset(self, name: str):
        """The built-in data model ``name`` of this family."""
        return self.data_class.preset(name)

    def run_option_table(self) -> dict[str, RunOption]:
        """:attr:`run_options` as :class:`RunOption` rows, checked.

        Raises
        ------
        ValidationError
            Naming ``family.run_options`` (and the option) when an entry is not
            ``(type, flows, help[, convert])`` with a type of :class:`RunOption`,
            flows of this family (or None) and a text help, or when it names a
            shared option (:data:`SHARED_RUN_OPTIONS`) or one of ``odeflow run``'s own
            flags (:data:`RESERVED_RUN_NAMES`).
        """
        table = {}
        for name, entry in dict(self.run_options).items():
            field = f"family.run_options.{name}"
            if not (isinstance(name, str) and name.isidentifier()) or \
                    name in SHARED_RUN_OPTIONS or name in RESERVED_RUN_NAMES:
                raise ValidationError(field, f"must be an identifier that is not one of the "
                                      f"shared options {list(SHARED_RUN_OPTIONS)} or odeflow "
                                      f"run's own flags {list(RESERVED_RUN_NAMES)}")
            if not isinstance(entry, tuple) or len(entry) not in (3, 4):
                raise ValidationError(field, "must be (type, flows, help) or (type, flows, "
                                      f"help, convert), got {entry!r:.60}")
            kind, flows, text, *convert = entry
            choices = isinstance(kind, tuple) and kind and all(isinstance(c, str) for c in kind)
            if kind not in (float, int, str) and not choices:
                raise ValidationError(field, "type must be float, int, str or a tuple of the "
                                      f"allowed strings, got {kind!r:.60}")
            if flows is not None and (isinstance(flows, str) or
                                      not set(flows) <= set(self.flows) or not flows):
                raise ValidationError(field, f"flows must be None or some of "
                                      f"{sorted(self.flows)}, got {flows!r:.60}")
            if not isinstance(text, str) or not all(isinstance(c, str) for c in convert):
                raise ValidationError(field, "help and convert must be strings")
            table[name] = RunOption(name, kind, None if flows is None else tuple(flows),
                                    text, convert[0] if convert else "")
        return table

    def data_models(self):
        """A hypothesis strategy of the family's valid data models: ``DATA_MODELS[name]()``
        of its :attr:`strategies` module, or None when it declares no such module or the
        module has no entry for the family."""
        if not self.strategies:
            return None
        factory = getattr(load(self.strategies), "DATA_MODELS", {}).get(self.name)
        return None if factory is None else factory()

    def check_family(self):
        """The family's checks for ``odeflow verify``, or None."""
        return load(self.checks) if self.checks else None

    def task_kinds(self) -> tuple:
        """The family's sweep task kinds."""
        return tuple(load(self.sweep_tasks)) if self.sweep_tasks else ()


#: The registered families by name, in registration order.
FAMILIES: dict[str, Family] = {}
#: Names registered by a call of :func:`register_family` (an entry point of the same
#: name read later does not replace them).
BY_CALL: set[str] = set()


def as_family(family) -> Family:
    """``family`` (a :class:`Family` instance, or a subclass to instantiate), checked."""
    if isinstance(family, type) and issubclass(family, Family):
        family = family()
    if not isinstance(family, Family):
        raise ValidationError("family", f"must be an odeflow.families.Family, got "
                              f"{type(family).__name__}")
    if not (isinstance(family.name, str) and family.name.isidentifier()):
        raise ValidationError("family.name", f"must be an identifier, got {family.name!r}")
    family.run_option_table()
    if family.flows and family.default_flow not in family.flows:
        raise ValidationError("family.default_flow", f"must be one of {sorted(family.flows)}, "
                              f"got {family.default_flow!r}")
    return family


def register_family(family) -> Family:
    """Add ``family`` (a :class:`Family` instance or subclass) to the registry.

    A second family of the same name replaces the first. Returns the instance.
    """
    family = as_family(family)
    check_run_option_kinds(family, FAMILIES.values())
    FAMILIES[family.name] = family
    BY_CALL.add(family.name)
    return family


def check_run_option_kinds(family: Family, others) -> None:
    """Refuse an own option of ``family`` that another family of ``others`` (other names)
    declares with another type: ``odeflow run`` has one flag and one ``[run]`` key per
    name, so the families that share a name must share its type."""
    mine = family.run_option_table()
    for other in others:
        if other.name == family.name:
            continue
        for name, option in other.run_option_table().items():
            if name in mine and mine[name].kind != option.kind:
                raise ValidationError(f"family.run_options.{name}",
                                      f"the family {other.name!r} declares it as "
                                      f"{option.kind!r}; a shared name needs the same type "
                                      f"(got {mine[name].kind!r})")


def unregister_family(name: str) -> Family:
    """Remove the family ``name`` from the registry (and the flat-API names it exported
    from ``odeflow``'s namespace); returns it. A ValidationError names ``name`` when no
    such family is registered."""
    if name not in FAMILIES:
        raise ValidationError("name", f"no family {name!r} is registered")
    family = FAMILIES.pop(name)
    BY_CALL.discard(name)
    namespace = vars(sys.modules["odeflow"]) if "odeflow" in sys.modules else {}
    for export in family.exports:
        namespace.pop(export, None)
    return family
