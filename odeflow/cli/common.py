"""Options shared by the commands: where the data model comes from, learning rates."""

from __future__ import annotations

import argparse

from odeflow.data import DEFAULT_PRESET, PRESETS, DataModel, load_config, make_preset
from odeflow.errors import ValidationError
from odeflow.fields import family_of, find_preset, preset_names

#: Learning rates and end time used when neither a flag nor a config's [run] table sets them.
DATA_DEFAULTS = {"eta_y": 1.0, "eta_z": 0.1, "t_end": 1e4}


def add_data_arguments(parser: argparse.ArgumentParser, defaults: dict | None = None,
                       t_end_help: str = "end time", any_family: bool = False) -> None:
    """``--preset | --config``, ``--eta-y``, ``--eta-z``, ``--t-end``.

    ``defaults`` (merged over :data:`DATA_DEFAULTS`) are the values the command
    really uses, shown in the help; pass the same dict to :func:`resolve`.
    ``any_family``: ``--preset`` takes the presets of every model family
    (:func:`odeflow.fields.preset_names`), not only the sequence-class ones.
    """
    shown = {**DATA_DEFAULTS, **(defaults or {})}
    names = preset_names() if any_family else sorted(PRESETS)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME",
                        help=f"built-in data model ({', '.join(names)}); "
                             f"default {DEFAULT_PRESET}")
    source.add_argument("--config", metavar="FILE.toml",
                        help="data model (and optional [run] table) in TOML")
    parser.add_argument("--eta-y", type=float, metavar="X",
                        help=f"decoder learning rate ({shown['eta_y']:g})")
    parser.add_argument("--eta-z", type=float, metavar="X",
                        help=f"attention learning rate ({shown['eta_z']:g})")
    t_end = "" if shown["t_end"] is None else f" ({shown['t_end']:g})"
    parser.add_argument("--t-end", type=float, metavar="T", help=f"{t_end_help}{t_end}")


def resolve(args, defaults: dict | None = None, any_family: bool = False):
    """``(data_model, options, label)`` from the parsed arguments.

    Precedence: command-line flag, then the config's ``[run]`` table, then
    ``defaults``. ``any_family``: a preset or a config's data model may be of any
    model family (:func:`odeflow.fields.find_preset`); otherwise only a
    sequence-class model is taken (a config of another family is refused, naming
    ``config``). A learning rate the data model's family does not take is left
    out of ``options`` unless a flag or the config gives it (then the solve
    refuses it by name, rather than dropping it silently).
    """
    options = {**DATA_DEFAULTS, **(defaults or {})}
    given = set()
    if args.config:
        data, from_file = load_config(args.config)
        if not any_family and not isinstance(data, DataModel):
            raise ValidationError("config", f"holds a data model of the family "
                                  f"{data.family!r} ({type(data).__name__}); this command "
                                  "takes sequence classes only (odeflow run takes every "
                                  "family)")
        options.update(from_file)
        given.update(from_file)
        label = args.config.rsplit("/", 1)[-1].removesuffix(".toml")
    else:
        label = args.preset or DEFAULT_PRESET
        data = find_preset(label) if any_family else make_preset(label)
    for key in ("eta_y", "eta_z", "t_end"):
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
            given.add(key)
    family = family_of(data)
    for key in ("eta_y", "eta_z"):
        if key not in family.defaults and key not in given:
            options.pop(key, None)
    return data, options, label


def check_rows(rows) -> int:
    """``--rows``: a count >= 0 (0 prints no table)."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ValidationError("rows", f"must be a whole number >= 0, got {rows!r}")
    return rows
