"""Options shared by the commands: where the data model comes from, the end time, and (for
the commands of sequence classes) Scan and Snap's learning rates."""

from __future__ import annotations

import argparse
import os
import sys

from odeflow.cli.catalog import DEFAULT_PRESET, preset_names, scan_snap_presets
from odeflow.errors import ValidationError

#: End time used when neither a flag nor a config's [run] table sets it.
DATA_DEFAULTS = {"t_end": 1e4}
#: The learning rates of the commands that take sequence classes only (``compare``,
#: ``compare-levels``); a command of every family takes each family's own options.
RATE_DEFAULTS = {"eta_y": 1.0, "eta_z": 0.1}


def add_data_arguments(parser: argparse.ArgumentParser, defaults: dict | None = None,
                       t_end_help: str = "end time", any_family: bool = False) -> None:
    """``--preset | --config``, ``--t-end`` and, for sequence classes only, ``--eta-y``,
    ``--eta-z``.

    ``defaults`` (merged over :data:`DATA_DEFAULTS` and, without ``any_family``,
    :data:`RATE_DEFAULTS`) are the values the command really uses, shown in the help;
    pass the same dict to :func:`resolve`. ``any_family``: ``--preset`` takes the
    presets of every model family (:func:`odeflow.families.preset_names`), not only
    the sequence-class ones, and the command adds each family's own options itself
    (``odeflow run``: :func:`odeflow.families.run_options`). The names come from
    :mod:`odeflow.cli.catalog` (nothing heavy is imported).
    """
    shown = {**DATA_DEFAULTS, **({} if any_family else RATE_DEFAULTS), **(defaults or {})}
    names = preset_names() if any_family else scan_snap_presets()
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME", choices=preset_names(),
                        help=f"built-in data model ({', '.join(names)}); "
                             f"default {DEFAULT_PRESET}")
    source.add_argument("--config", metavar="FILE.toml",
                        help="data model (and optional [run] table) in TOML")
    if not any_family:
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
    ``config``), with the learning rates of :data:`RATE_DEFAULTS`. With
    ``any_family``, the defaults of the family's own options
    (``Family.run_options``) are its ``solve_defaults``; a flag of them is the
    command's to read.
    """
    from odeflow.data import DataModel, load_config, make_preset
    from odeflow.families import family_of, find_preset

    options = {**DATA_DEFAULTS, **({} if any_family else RATE_DEFAULTS), **(defaults or {})}
    given = set()
    if args.config:
        data, from_file = config_with_notes(args.config, load_config)
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
        if not any_family and label not in scan_snap_presets():
            raise ValidationError("preset", f"{label!r} is a preset of another model family; "
                                  "this command takes sequence classes only (odeflow run "
                                  "takes every family)")
        data = find_preset(label) if any_family else make_preset(label)
    for key in ("t_end",) if any_family else ("eta_y", "eta_z", "t_end"):
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
            given.add(key)
    if any_family:
        family = family_of(data)
        for key in family.run_options:
            if key not in given and key in family.solve_defaults:
                options[key] = family.solve_defaults[key]
    return data, options, label


def config_with_notes(path, load_config):
    """``load_config(path)``, each old ``[run]`` key it reads noted on stderr
    (``warning: <path>: 'length' is now 'seq_len'``) instead of as a Python warning."""
    import warnings

    from odeflow.errors import RenamedWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RenamedWarning)
        loaded = load_config(path)
    for w in caught:
        if issubclass(w.category, RenamedWarning):
            print(f"warning: {path}: [run] {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return loaded


def renamed_flags(args, renames: dict) -> None:
    """Old flags of ``renames`` (``{old dest: new dest}``) given on the command line are
    noted on stderr (``warning: --length is now --seq-len``) and moved to the new one;
    the old and the new one together are refused, naming the old one."""
    for old, new in renames.items():
        if getattr(args, old, None) is None:
            continue
        flag, now = f"--{old.replace('_', '-')}", f"--{new.replace('_', '-')}"
        if getattr(args, new, None) is not None:
            raise ValidationError(old, f"{flag} is the old name of {now}; give only {now}")
        print(f"warning: {flag} is now {now}", file=sys.stderr)
        setattr(args, new, getattr(args, old))
        setattr(args, old, None)


def check_rows(rows) -> int:
    """``--rows``: a count >= 0 (0 prints no table)."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ValidationError("rows", f"must be a whole number >= 0, got {rows!r}")
    return rows


def add_mkdir_argument(parser: argparse.ArgumentParser) -> None:
    """``--mkdir``: create the missing folders of a path given with ``--out``/``--outdir``."""
    parser.add_argument("--mkdir", action="store_true",
                        help="create the missing folders of a path you give (without it, a "
                             "path into a folder that does not exist is refused; the "
                             "default folders are always created)")


def typed_path_folder(path, field: str, mkdir: bool) -> None:
    """Refuse a path the user typed whose folder does not exist, unless ``--mkdir``.

    A typo in a folder name (``--out /nonexistent/dir/x.npz``) would otherwise make
    a tree of folders; the commands' default paths (``results/...``) are created
    without asking. For an output that is itself a folder (a sweep store,
    ``reproduce --out DIR``), ``path`` is that folder: it may be new, its parent
    must exist.
    """
    folder = os.path.dirname(os.path.normpath(os.fspath(path))) or "."
    if mkdir or os.path.isdir(folder):
        return
    if os.path.lexists(folder) and not os.path.isdir(folder):
        return  # a file or a dangling link where the folder should be: the writer says so
    raise ValidationError(field, f"the folder {folder!r} does not exist; create it, or add "
                          "--mkdir to have it made")


def replaced_note(path) -> str:
    """``" (replaced the earlier file)"`` if ``path`` is an existing file, else ``""``
    (every command replaces an existing output file atomically, and says so)."""
    return " (replaced the earlier file)" if os.path.isfile(path) else ""
