"""Sweep configuration files: a ``[sweep]`` table in TOML (optionally beside a data model).

Schema::

    [sweep]
    task = "exact"                 # a key of odeflow.sweeps.tasks()
    preset = "syn-small"           # or a data model in the same file (vocab_size, classes)
    seeds = [0, 1, 2]              # stochastic tasks only
    backend = "processes"          # processes | serial | dask
    scheduler = "tcp://host:8786"  # dask only
    workers = 2                    # processes only
    batch = 1                      # points per task (processes, dask)
    store = "results/sweep.zarr"   # .nc for netCDF

    [sweep.grid]                   # swept parameters, in dimension order
    eta_y = [0.5, 1.0, 2.0]
    eta_z = [0.05, 0.1, 0.2]

    [sweep.settings]               # fixed parameters
    t_end = 1e4

A dotted key of ``[sweep.grid]`` or ``[sweep.settings]`` (``prior.alpha = [0.1, 1.0]``, a
table in TOML) is the parameter ``"prior.alpha"``: a number of the data model, for a
task that takes model fields (``induction_flow``, :mod:`odeflow.sweeps.models`).

Beside ``[sweep]`` a file holds only a data model (the ``toml_keys`` of its class at
the top level, or a ``[data]`` table) and a ``[run]`` table (the
settings of ``odeflow run``, ignored here); any other top-level key is refused
by name. A ``family`` key picks the data model class of the file's model
(:func:`odeflow.data.forms.data_type`; default ``"scan_snap"``): ``family =
"induction"`` with ``task = "induction_flow"``. The file is read like every
other config (:func:`odeflow.io.read_text`: an unreadable or non-UTF-8 file is a
:class:`ValidationError` naming ``config``), and TOML too deeply nested to parse is
refused the same way.
"""

from __future__ import annotations

from odeflow.data import parse_toml
from odeflow.data.config import check_top_level, pop_family
from odeflow.data.forms import data_type
from odeflow.errors import ValidationError
from odeflow.io import read_text

#: Keys of the ``[sweep]`` table.
SWEEP_KEYS = ("task", "preset", "seeds", "backend", "scheduler", "workers", "batch", "store",
              "format", "grid", "settings")

#: Top-level keys of a sweep config whose data model sits in a ``[data]`` table.
TOP_LEVEL_WITH_DATA = ("sweep", "run", "data")


def _shown(key: str) -> str:
    """A key as it appears in a field name (a blank key quoted, so it is visible)."""
    return key if key.strip() else repr(key)


def _parameter_names(table: dict) -> list[str] | None:
    """The parameters the config's task(s) take (``None`` if the task is not known)."""
    from odeflow.sweeps.spec import DATA_KEYS
    from odeflow.sweeps.tasks import tasks

    grid = table.get("grid", {})
    names = grid.get("task") if "task" in grid else [table.get("task", "exact")]
    if isinstance(names, str) or not isinstance(names, list):
        return None
    try:
        kinds = [tasks()[n] for n in names]
    except (KeyError, TypeError):
        return None
    return sorted({p.name for k in kinds for p in k.parameters} | set(DATA_KEYS))


def parse_sweep_config(text: str) -> dict:
    """Keyword arguments of :func:`odeflow.sweeps.sweep` from TOML text; errors name the field."""
    doc = parse_toml(text, "config")
    model_class = data_type(pop_family(doc))
    # without a [data] table: the model class's own top-level keys beside sweep and run
    top_level = ("sweep", "run", *model_class.toml_keys)
    check_top_level(doc, top_level, TOP_LEVEL_WITH_DATA, "sweep config")
    table = doc.pop("sweep", None)
    if not isinstance(table, dict):
        raise ValidationError("sweep", "the config needs a [sweep] table")
    run = doc.pop("run", {})
    if not isinstance(run, dict):
        raise ValidationError("run", "must be a table")
    for key in table:
        if key not in SWEEP_KEYS:
            raise ValidationError(f"sweep.{_shown(key)}", f"unknown key {key!r}; allowed: "
                                  f"{list(SWEEP_KEYS)}")
    for key in ("grid", "settings"):
        if not isinstance(table.get(key, {}), dict):
            raise ValidationError(f"sweep.{key}", "must be a table")
        for name in table.get(key, {}):
            if not name.strip():
                allowed = _parameter_names(table)
                listed = f"; allowed: {allowed}" if allowed else ""
                raise ValidationError(f"sweep.{key}.{name!r}",
                                      f"empty parameter name {name!r}{listed}")
    kwargs = {k: table[k] for k in ("task", "seeds", "backend", "scheduler", "workers",
                                     "batch", "store", "format") if k in table}
    kwargs["grid"] = dotted(table.get("grid", {}))
    kwargs["settings"] = dotted(table.get("settings", {}))
    if "task" in kwargs["grid"]:
        if "task" in kwargs:
            raise ValidationError("sweep.task", "is also swept in [sweep.grid] (task = "
                                  "[...]); give it once")
        kwargs["task"] = None
    if "data" in doc:
        doc = doc["data"]
        if not isinstance(doc, dict):
            raise ValidationError("data", f"must be a table, got {type(doc).__name__}")
    if doc:
        if "preset" in table:
            raise ValidationError("sweep.preset", "the config also defines a data model "
                                  f"({', '.join(map(repr, sorted(doc)))}); give one of them")
        try:
            kwargs["data"] = model_class.from_dict(doc)
        except RecursionError:
            raise ValidationError("config", "nested too deeply") from None
    elif "preset" in table:
        kwargs["data"] = table["preset"]
    return kwargs


def dotted(table: dict) -> dict:
    """``table`` with each sub-table's keys as dotted names: TOML's ``prior.alpha = [...]``
    (``{"prior": {"alpha": [...]}}``) becomes ``{"prior.alpha": [...]}``."""
    out = {}
    for name, value in table.items():
        if isinstance(value, dict) and value:
            out.update({f"{name}.{key}": inner for key, inner in value.items()})
        else:
            out[name] = value
    return out


def load_sweep_config(path) -> dict:
    """Read a sweep configuration file (:func:`odeflow.io.read_text`); see
    :func:`parse_sweep_config`."""
    return parse_sweep_config(read_text(path, "config"))
