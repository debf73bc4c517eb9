"""``odeflow plot``: draw a figure of the theory to PNG or PDF (see :mod:`odeflow.plots`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from odeflow.cli.catalog import preset_names
from odeflow.cli.common import add_mkdir_argument, replaced_note, typed_path_folder
from odeflow.errors import ValidationError

#: The flags of the options a figure may take (``FigureSpec.accepts``), for messages.
OPTION_FLAGS = {"data": "--preset/--config", "eta_y": "--eta-y", "eta_z": "--eta-z",
                "t_end": "--t-end", "flow": "--flow"}


def register(sub) -> None:
    from odeflow.plots.registry import family_figures

    figures = family_figures()
    listing = "\n".join(f"  {name:<15s}{spec.summary}" for name, spec in figures.items())
    p = sub.add_parser(
        "plot", help="draw a figure of the theory (PNG or PDF)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Draw one figure, or all of them, headless (matplotlib Agg).\n\n"
                    f"Figures:\n{listing}\n  {'all':<15s}every figure, into --outdir\n"
                    f"  {'sweep':<15s}a variable of a sweep store (--store): heat map over "
                    "two parameters (--x, --y) or lines over --x, one per --hue\n\n"
                    "Options left out keep each figure's own defaults; an option a figure "
                    "does not take is an error (with 'all' it applies to the figures that "
                    "take it).")
    p.add_argument("name", metavar="NAME", choices=[*figures, "all", "sweep"],
                   help=f"one of {', '.join(figures)}, all, or sweep")
    p.add_argument("--out", metavar="FILE", help="output file, .png, .pdf or .svg "
                   "(default NAME.png); an existing file is replaced (atomically)")
    p.add_argument("--outdir", metavar="DIR", help="output directory for 'all' (figures)")
    add_mkdir_argument(p)
    p.add_argument("--format", choices=["png", "pdf", "svg"], default="png",
                   help="file format for 'all' (png)")
    p.add_argument("--dpi", type=int, default=130, help="resolution of PNG output (130)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME",
                        help=f"built-in data model ({', '.join(preset_names())})")
    source.add_argument("--config", metavar="FILE.toml", help="data model in TOML")
    p.add_argument("--eta-y", type=float, metavar="X", help="decoder learning rate")
    p.add_argument("--eta-z", type=float, metavar="X", help="attention learning rate")
    p.add_argument("--t-end", type=float, metavar="T", help="end time (SGD steps for levels)")
    p.add_argument("--flow", metavar="FLOW", help="flow to show (exact, reduced; snap for "
                   "scan-snap)")
    sweep = p.add_argument_group("sweep stores (odeflow plot sweep --store STORE)")
    sweep.add_argument("--store", metavar="STORE", help="sweep store (zarr directory or .nc)")
    sweep.add_argument("--var", default=None, help="variable to draw (entropy; a store "
                       "without it: the task's first output, e.g. a)")
    sweep.add_argument("--x", metavar="PARAM", help="parameter on the x axis (first swept)")
    sweep.add_argument("--y", metavar="PARAM", help="parameter on the y axis: a heat map "
                       "(second swept, unless --hue)")
    sweep.add_argument("--hue", metavar="PARAM", help="one line (or heat-map panel) per value")
    sweep.add_argument("--time", type=float, metavar="T", help="read time series at T "
                       "(default: each point's end)")
    sweep.add_argument("--select", action="append", default=[], metavar="PARAM=VALUE",
                       help="fix another swept parameter (repeatable)")
    p.set_defaults(func=run)


def _plot_sweep(args) -> int:
    from odeflow.plots.style import save_figure
    from odeflow.plots.sweep import default_variable, plot_sweep
    from odeflow.sweeps import open_store

    if not args.store:
        raise ValidationError("store", "odeflow plot sweep needs --store STORE")
    for flag in ("preset", "config", "eta_y", "eta_z", "t_end", "flow", "outdir"):
        if getattr(args, flag) is not None:
            raise ValidationError(flag, "does not apply to a sweep store (use --select)")
    select = {}
    for item in args.select:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValidationError("select", f"must be PARAM=VALUE, got {item!r}")
        select[key.strip()] = value.strip()
    start = time.perf_counter()
    ds = open_store(args.store)  # a damaged store is refused here, naming it
    records, size = ds.attrs.get("journal_skipped", (0, 0))
    if records:
        print(f"odeflow plot: {args.store}: skipped {records} damaged journal record(s) "
              f"({size} bytes); their points are shown as pending", file=sys.stderr)
    var = default_variable(ds) if args.var is None else args.var
    fig = plot_sweep(ds, var=var, x=args.x, y=args.y, hue=args.hue,
                     time=args.time, select=select)
    path = save_figure(fig, Path(args.out or f"sweep-{var}.png"), dpi=args.dpi)
    print(f"odeflow plot: sweep {var} -> {path} ({time.perf_counter() - start:.1f} s)")
    return 0


def _sources(args) -> tuple:
    """``(data model or None, the config's [run] table)`` from ``--config`` / ``--preset``."""
    if args.config:
        from odeflow.data import load_config

        return load_config(args.config)
    if args.preset:
        from odeflow.families import find_preset

        return find_preset(args.preset), {}   # any family's preset (ih-paper too)
    return None, {}


def _options(args, data, run_table: dict, accepts) -> dict:
    """A figure's options: the flag if given, else the config's ``[run]`` value where the
    figure takes that option (like every other verb), else the figure's own default."""
    options = {"data": data}
    for key in ("eta_y", "eta_z", "t_end", "flow"):
        value = getattr(args, key)
        if value is None and key in accepts:
            value = run_table.get(key)
        options[key] = value
    return options


def run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from odeflow.plots import make_figure, save_figure
    from odeflow.plots.registry import family_figures
    from odeflow.plots.style import MIN_DPI

    if args.dpi < MIN_DPI:  # refused before any figure is computed
        raise ValidationError("dpi", f"must be a finite number >= {MIN_DPI} (below it the text "
                              f"cannot be rendered), got {args.dpi!r}")
    if args.out:
        typed_path_folder(args.out, "out", args.mkdir)
    if args.outdir:
        typed_path_folder(args.outdir, "outdir", args.mkdir)
    if args.name == "sweep":
        return _plot_sweep(args)
    if args.store:
        raise ValidationError("store", "only for 'odeflow plot sweep'")
    data, run_table = _sources(args)
    if args.name == "all":
        if args.out:
            raise ValidationError("out", "use --outdir with 'all'")
        outdir = Path(args.outdir or "figures")
        failed = []
        for name, spec in family_figures().items():
            options = _options(args, data, run_table, spec.accepts)
            taken = {k: v for k, v in options.items() if k in spec.accepts}
            try:
                _draw(name, taken, outdir / f"{name}.{args.format}", args.dpi, make_figure,
                      save_figure)
            except ValidationError as exc:  # e.g. a data model that does not fit a figure
                print(f"odeflow plot: {name} skipped: {exc}", file=sys.stderr)
                failed.append(name)
        return 2 if failed else 0
    if args.outdir:
        raise ValidationError("outdir", "only for 'all'; use --out FILE for one figure")
    spec = family_figures()[args.name]
    check_accepts(args, spec)
    options = _options(args, data, run_table, spec.accepts)
    _draw(args.name, options, Path(args.out or f"{args.name}.png"), args.dpi, make_figure,
          save_figure)
    return 0


def check_accepts(args, spec) -> None:
    """Refuse a flag the figure does not take, naming the flags it does take."""
    for key in OPTION_FLAGS:
        given = (args.preset or args.config) if key == "data" else getattr(args, key)
        if given is not None and key not in spec.accepts:
            takes = ", ".join(OPTION_FLAGS[k] for k in spec.accepts)
            raise ValidationError("preset" if args.preset else "config" if key == "data"
                                  else key, f"figure {spec.name} does not take it; it takes "
                                  f"{takes}")


def _draw(name, options, path, dpi, make_figure, save_figure) -> None:
    start = time.perf_counter()
    fig = make_figure(name, **options)
    replaced = replaced_note(path)
    save_figure(fig, path, dpi=dpi)
    print(f"odeflow plot: {name} -> {path} ({time.perf_counter() - start:.1f} s){replaced}")
