"""Run configuration files: a data model plus optional run settings, in TOML.

Schema::

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
"""

from __future__ import annotations

from odeflow.data.model import DataModel, parse_toml, validate_positive
from odeflow.errors import ValidationError
from odeflow.io import read_text

#: Keys allowed in the ``[run]`` table and how each is checked.
RUN_KEYS = {"flow": str, "method": str, "eta_y": float, "eta_z": float, "t_end": float,
            "rtol": float, "atol": float}

#: Top-level keys of a data model written at the top of a config file.
DATA_MODEL_KEYS = ("classes", "normalize", "vocab_size")
#: Top-level keys of a config without a ``[data]`` table (the data model's own keys + run).
TOP_LEVEL = ("classes", "normalize", "run", "vocab_size")  # DATA_MODEL_KEYS and run, sorted
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


def parse_config(text: str) -> tuple[DataModel, dict]:
    """Parse TOML text into ``(data_model, run_options)``; errors name the field."""
    doc = parse_toml(text, "config")
    run = doc.pop("run", {})
    if not isinstance(run, dict):
        raise ValidationError("run", "must be a table")
    options = {}
    for key, value in run.items():
        if key not in RUN_KEYS:
            raise ValidationError(f"run.{key if key.strip() else repr(key)}",
                                  f"unknown key {key!r}; allowed: {sorted(RUN_KEYS)}")
        if RUN_KEYS[key] is float:
            options[key] = validate_positive(value, f"run.{key}")
        elif not isinstance(value, str):
            raise ValidationError(f"run.{key}", f"must be a string, got {value!r}")
        else:
            options[key] = value
    check_top_level(doc)
    if "data" in doc:
        doc = doc["data"]
    try:
        return DataModel.from_dict(doc), options
    except RecursionError:
        raise ValidationError("config", "nested too deeply") from None


def load_config(path) -> tuple[DataModel, dict]:
    """Read a configuration file; see :func:`parse_config`."""
    return parse_config(read_text(path, "config"))
