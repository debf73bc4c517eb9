"""Sweep configuration files: a ``[sweep]`` table in TOML (optionally beside a data model).

Schema::

    [sweep]
    task = "exact"                 # a key of odeflow.sweep.TASKS
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
"""

from __future__ import annotations

import sys

from odeflow.data import DataModel
from odeflow.errors import ValidationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Keys of the ``[sweep]`` table.
SWEEP_KEYS = ("task", "preset", "seeds", "backend", "scheduler", "workers", "batch", "store",
              "format", "grid", "settings")


def parse_sweep_config(text: str) -> dict:
    """Keyword arguments of :func:`odeflow.sweep.sweep` from TOML text; errors name the field."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config", f"not valid TOML: {exc}") from None
    table = doc.pop("sweep", None)
    if not isinstance(table, dict):
        raise ValidationError("sweep", "the config needs a [sweep] table")
    doc.pop("run", None)
    for key in table:
        if key not in SWEEP_KEYS:
            raise ValidationError(f"sweep.{key}", f"unknown key; allowed: {list(SWEEP_KEYS)}")
    for key in ("grid", "settings"):
        if not isinstance(table.get(key, {}), dict):
            raise ValidationError(f"sweep.{key}", "must be a table")
    kwargs = {k: table[k] for k in ("task", "seeds", "backend", "scheduler", "workers",
                                     "batch", "store", "format") if k in table}
    kwargs["grid"] = dict(table.get("grid", {}))
    kwargs["settings"] = dict(table.get("settings", {}))
    if "grid" in kwargs and "task" in kwargs["grid"] and "task" not in kwargs:
        kwargs["task"] = None
    if "data" in doc and "vocab_size" not in doc:
        doc = doc["data"]
    if doc:
        if "preset" in table:
            raise ValidationError("sweep.preset", "the config also defines a data model; "
                                  "give one of them")
        kwargs["data"] = DataModel.from_dict(doc)
    elif "preset" in table:
        kwargs["data"] = table["preset"]
    return kwargs


def load_sweep_config(path) -> dict:
    """Read a sweep configuration file; see :func:`parse_sweep_config`."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValidationError("config", f"cannot read {str(path)!r}: {exc.strerror}") from None
    return parse_sweep_config(text)
