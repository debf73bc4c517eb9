"""Run configuration files: a data model of any family plus optional run settings, in TOML.

Schema (the default family, ``scan_snap``: sequence classes)::

    vocab_size = 30                 # the data model (see DataModel.from_dict)
    [[classes]]
    next_token = 1
    query_token = 0
    tokens = [10, 11]
    probs = [0.4, 0.6]

    [run]                           # optional; command-line flags override it
    flow = "exact"
    eta_y = 1.0
    eta_z = 0.1
    t_end = 1e4
    method = "auto"
    rtol = 1e-8
    atol = 1e-10

The ``[run]`` keys are the options of ``odeflow run``: those of every family
(:data:`SHARED_RUN_KEYS`) and each family's own (its ``run_options``, e.g.
``eta_y`` above; :func:`run_keys`).

Another family's data model is named by a top-level ``family`` key (or
``family`` inside the ``[data]`` table) and written in that family's schema,
e.g. the induction heads (``InductionData.from_dict``)::

    family = "induction"
    vocab_size = 2
    n_gram = 3
    heads = 2
    degree = 2
    [prior]
    kind = "dirichlet"
    alpha = 0.1
    [init]
    w_plus = 3.0
    [run]
    t_end = 1e3
    loss = "code"                   # the induction heads' loss (nll | code)
    stages = "100,1000"             # the staged run T_C,T_W (as --stages)
    seq_len = 100                   # flow = "finite_l": its sample (as --seq-len,
    sample_size = 9000              #   --sample-size, --seed; the old keys length,
    seed = 1                        #   sequences, sample_seed warn)

The family names the class in the family registry (:mod:`odeflow.families`); without
it the model is a :class:`~odeflow.data.DataModel`, as before families existed.
"""

from __future__ import annotations

from odeflow.data.checks import check_seed, parse_toml, validate_positive
from odeflow.data.forms import TomlForm, data_type, data_types
from odeflow.data.model import DataModel
from odeflow.errors import ValidationError, renamed
from odeflow.families import SHARED_RUN_OPTIONS
from odeflow.io import read_text

#: ``[run]`` keys of every family and their types (``float``: a number > 0, ``int``: a whole
#: number >= 0); :func:`run_keys` adds each registered family's own (its ``run_options``).
SHARED_RUN_KEYS = SHARED_RUN_OPTIONS
#: Old ``[run]`` keys -> their names now (``docs/api.md``, "One name per concept"): read
#: as the new ones with a :class:`~odeflow.errors.RenamedWarning`.
RUN_RENAMED = {"length": "seq_len", "sequences": "sample_size", "sample_seed": "seed"}
#: The family of a config without a ``family`` key.
DEFAULT_FAMILY = DataModel.family

#: Top-level keys of a config without a ``[data]`` table (the data model's own keys + run).
TOP_LEVEL = ("classes", "normalize", "run", "vocab_size")  # DataModel.toml_keys and run
#: Top-level keys of a config whose data model sits in a ``[data]`` table.
TOP_LEVEL_WITH_DATA = ("data", "run")


def check_top_level(doc: dict, allowed: tuple = TOP_LEVEL,
                    allowed_with_data: tuple = TOP_LEVEL_WITH_DATA,
                    what: str = "config") -> None:
    """Refuse a top-level key of the parsed config ``doc`` that it may not hold, by name.

    ``allowed``: the keys of a file whose data model is at the top level;
    ``allowed_with_data``: those of a file with a ``[data]`` table. The
    error's field is the key (quoted when blank, so it is visible).
    """
    with_data = "data" in doc
    extra = sorted(set(doc) - set(allowed_with_data if with_data else allowed))
    if not extra:
        return
    key = extra[0]
    shown = key if key.strip() else repr(key)
    if with_data:
        raise ValidationError(shown, f"unknown top-level key {key!r} beside [data]; a {what} "
                              f"holds {list(allowed_with_data)}")
    raise ValidationError(shown, f"unknown top-level key {key!r}; allowed: {list(allowed)} "
                          f"(or {list(allowed_with_data)})")


def run_keys() -> dict:
    """Keys allowed in a ``[run]`` table -> their type: :data:`SHARED_RUN_KEYS` and every
    registered family's own options (:func:`odeflow.families.run_options`; a key the data
    model's family or flow does not take is refused, naming it, when the run starts)."""
    from odeflow.families import run_options as family_options

    own = {name: pairs[0][1].kind for name, pairs in family_options().items()}
    return {**SHARED_RUN_KEYS, **own}


def run_value(key: str, kind, value):
    """A ``[run]`` value checked against its type (:func:`run_keys`), or a ValidationError
    naming ``run.<key>``."""
    field = f"run.{key}"
    if kind is float:
        return validate_positive(value, field)
    if kind is int:
        return check_seed(value, field)   # an integer >= 0
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {value!r}")
    if isinstance(kind, tuple) and value not in kind:
        raise ValidationError(field, f"must be one of {list(kind)}, got {value!r}")
    return value


def run_options(run) -> dict:
    """The checked ``[run]`` table; an unknown key or a bad value is refused by name."""
    if not isinstance(run, dict):
        raise ValidationError("run", "must be a table")
    options = {}
    try:
        run = renamed(run, RUN_RENAMED, stacklevel=4, own_calls=True)
    except ValidationError as err:
        raise ValidationError(f"run.{err.field}", err.reason) from None
    allowed = run_keys()
    for key, value in run.items():
        if key not in allowed:
            raise ValidationError(f"run.{key if key.strip() else repr(key)}",
                                  f"unknown key {key!r}; allowed: {sorted(allowed)}")
        options[key] = run_value(key, allowed[key], value)
    return options


def pop_family(doc: dict) -> str:
    """Remove and return the ``family`` key of ``doc`` (top level or ``[data]`` table).

    Default :data:`DEFAULT_FAMILY`; given in both places it must agree (else a
    ValidationError naming ``data.family``).
    """
    family = doc.pop("family", None)
    inner = doc.get("data")
    if isinstance(inner, dict) and "family" in inner:
        doc["data"] = inner = dict(inner)
        nested = inner.pop("family")
        if family is not None and nested != family:
            raise ValidationError("data.family", f"is {nested!r:.40} but the top-level family "
                                  f"is {family!r:.40}; give it once")
        family = nested
    return DEFAULT_FAMILY if family is None else family


def _other_family(key: str, cls: type) -> str:
    """A hint naming the families whose data model has the top-level ``key`` (or "")."""
    others = [name for name, other in data_types().items()
              if other is not cls and key in other.toml_keys and key not in cls.toml_keys]
    return f" (a key of the {others[0]!r} family's data model: add family = " \
           f"\"{others[0]}\")" if others else ""


def parse_config(text: str) -> tuple[TomlForm, dict]:
    """Parse TOML text into ``(data_model, run_options)``; errors name the field.

    The data model's class is the one registered for the config's ``family``
    (:func:`odeflow.data.forms.data_type`; default ``"scan_snap"``, a
    :class:`~odeflow.data.DataModel`).
    """
    doc = parse_toml(text, "config")
    options = run_options(doc.pop("run", {}))
    cls = data_type(pop_family(doc))
    allowed = tuple(sorted((*cls.toml_keys, "family", "run")))
    try:
        check_top_level(doc, allowed, ("data", "family", "run"))
    except ValidationError as exc:
        raise ValidationError(exc.field, exc.reason + _other_family(exc.field, cls)) from None
    if "data" in doc:
        doc = doc["data"]
    try:
        return cls.from_dict(doc), options
    except RecursionError:
        raise ValidationError("config", "nested too deeply") from None


def load_config(path) -> tuple[TomlForm, dict]:
    """Read a configuration file; see :func:`parse_config`."""
    return parse_config(read_text(path, "config"))  # an old [run] key warns at our caller
