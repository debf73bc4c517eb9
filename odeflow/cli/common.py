"""Options shared by the commands: where the data model comes from, learning rates."""

from __future__ import annotations

import argparse

from odeflow.data import DEFAULT_PRESET, PRESETS, load_config, make_preset


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset | --config``, ``--eta-y``, ``--eta-z``, ``--t-end``."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME",
                        help=f"built-in data model ({', '.join(sorted(PRESETS))}); "
                             f"default {DEFAULT_PRESET}")
    source.add_argument("--config", metavar="FILE.toml",
                        help="data model (and optional [run] table) in TOML")
    parser.add_argument("--eta-y", type=float, metavar="X", help="decoder learning rate (1.0)")
    parser.add_argument("--eta-z", type=float, metavar="X", help="attention learning rate (0.1)")
    parser.add_argument("--t-end", type=float, metavar="T", help="end time (1e4)")


def resolve(args, defaults: dict | None = None):
    """``(data_model, options, label)`` from the parsed arguments.

    Precedence: command-line flag, then the config's ``[run]`` table, then
    ``defaults``.
    """
    options = {"eta_y": 1.0, "eta_z": 0.1, "t_end": 1e4}
    options.update(defaults or {})
    if args.config:
        data, from_file = load_config(args.config)
        options.update(from_file)
        label = args.config.rsplit("/", 1)[-1].removesuffix(".toml")
    else:
        label = args.preset or DEFAULT_PRESET
        data = make_preset(label)
    for key in ("eta_y", "eta_z", "t_end"):
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
    return data, options, label
