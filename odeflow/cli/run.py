"""``odeflow run``: solve a flow on a data model, print a summary table, save the result."""

from __future__ import annotations

import argparse

from odeflow.cli.catalog import MAX_NFEV, METHODS
from odeflow.cli.common import (
    add_data_arguments,
    add_mkdir_argument,
    check_rows,
    renamed_flags,
    replaced_note,
    resolve,
    typed_path_folder,
)
from odeflow.cli.parser import any_case
from odeflow.cli.tables import add_wide_argument, width_of, wrap
from odeflow.errors import ValidationError
from odeflow.families import families, run_options

#: The options of a flow on a fixed sample (``finite_t``, ``finite_l``, ``finite_n``: any
#: flow whose field takes them, read from its signature), passed to it by name.
SAMPLE_OPTIONS = ("seq_len", "sample_size", "seed")

#: Old flags of ``odeflow run`` -> the new ones (``docs/api.md``, "One name per concept").
FLAG_RENAMED = {"length": "seq_len", "sequences": "sample_size", "sample_seed": "seed"}


def solve(*args, **kwargs):
    """:func:`odeflow.solve`, imported on the first call (``--help`` stays light)."""
    from odeflow.solver import solve as solve_flow

    return solve_flow(*args, **kwargs)


def register(sub) -> None:
    p = sub.add_parser("run", help="solve the dynamics and save the trajectory",
                       description="Solve a flow of a data model's family (default: the "
                                   "syn-small preset and its exact population gradient "
                                   "flow, Level E), print a table over time and write the "
                                   "result. Every family's presets and configs are taken "
                                   "(odeflow --help lists the families); a family's own "
                                   "options below apply to its flows only.")
    add_data_arguments(p, any_family=True)
    flows = "; ".join(f"{', '.join((f.default_flow, *(n for n in f.flows if n != f.default_flow)))}"
                      f" for {f.title.split(' (')[0]}" for f in families().values())
    p.add_argument("--flow", default=None, metavar="FLOW",
                   help=f"the data model's family's flow (its first one by default): {flows}")
    add_family_flags(p)
    p.add_argument("--seq-len", type=int, default=None, metavar="L",
                   help="a flow on a fixed sample (finite_t, finite_l, finite_n): sequence "
                        "length (the flow's default: 128, 100, 64)")
    p.add_argument("--sample-size", type=int, default=None, metavar="N",
                   help="a flow on a fixed sample: sequences in it (finite_t: per class; "
                        "defaults 64, 9000, 2000)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="a flow on a fixed sample: seed of the sample (0)")
    for old in FLAG_RENAMED:   # the old flags, taken with a warning (not in --help)
        p.add_argument(f"--{old.replace('_', '-')}", type=int, default=None,
                       help=argparse.SUPPRESS)
    p.add_argument("--method", default=None, choices=["auto", *METHODS],
                   type=any_case(["auto", *METHODS], "method"),
                   help="solve_ivp method, any letter case (auto)")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance (1e-8)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance (1e-10)")
    p.add_argument("--max-nfev", type=int, default=None, metavar="N",
                   help=f"budget of right-hand-side evaluations; the solve stops with exit 3 "
                        f"when it is used up ({MAX_NFEV:,})")
    p.add_argument("--out", metavar="PATH", help="result file (.npz); default "
                   "results/<data>-<flow>.npz. An existing file is replaced (atomically)")
    add_mkdir_argument(p)
    p.add_argument("--rows", type=int, default=8, help="rows of the printed table (8; 0: no "
                   "table)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_wide_argument(p)
    p.set_defaults(func=run)


def add_family_flags(parser) -> None:
    """A flag for each family's own option of ``odeflow run`` (every registered family's
    ``run_options``, :func:`odeflow.families.run_options`), its help naming the family and
    the flows that take it."""
    for name, pairs in run_options().items():
        flag = f"--{name.replace('_', '-')}"
        if flag in parser._option_string_actions:
            continue
        kind = pairs[0][1].kind
        texts = []
        for family, option in pairs:
            scope = "" if option.flows is None else f" (flows {', '.join(option.flows)})"
            texts.append(f"{family.title.split(' (')[0]}{scope}: {option.help}")
        typed = {"choices": list(kind)} if isinstance(kind, tuple) else \
            {"type": kind, "metavar": name.upper()}
        parser.add_argument(flag, default=None, help="; ".join(texts), **typed)


def check_scope(options: dict, family, flow: str, label: str, args) -> None:
    """Refuse a family's own option (:func:`odeflow.families.run_options`) or a sample option
    (:data:`SAMPLE_OPTIONS`) that the flow does not take, and a flow of another family,
    naming the flag (or the config's ``[run]`` key) and the flags that apply instead."""
    title = family.title.split(" (")[0]
    if flow not in family.flows:
        from odeflow.cli.parser import nearest

        guess = nearest(str(flow), list(family.flows))
        hint = f"; did you mean {guess}?" if guess else ""
        raise ValidationError("flow" if args.flow is not None else "run.flow",
                              f"{flow!r} is not a flow of {title} ({label}); its flows: "
                              f"{', '.join(family.flows)}{hint}")
    takes = flow_flags(family, flow)
    for key in (*run_options(), *SAMPLE_OPTIONS):
        if options.get(key) is None or key in takes:
            continue
        shown = [f"--{k.replace('_', '-')}" for k in takes]
        field = key if getattr(args, key, None) is not None else f"run.{key}"
        raise ValidationError(field, f"does not apply to flow {flow} of {title} ({label}); "
                              f"that flow takes {', '.join(shown) or 'no family-specific flag'}")


def flow_flags(family, flow: str) -> list:
    """The options ``flow`` of ``family`` takes beyond the shared ones: the family's own
    (:meth:`~odeflow.families.Family.run_option_table`) and those of
    :data:`SAMPLE_OPTIONS` its field's constructor has."""
    import inspect

    own = [name for name, option in family.run_option_table().items()
           if option.applies_to(flow)]
    params = inspect.signature(family.field_class(flow).__init__).parameters
    return own + [k for k in SAMPLE_OPTIONS if k in params]


def run(args) -> int:
    from odeflow.families import family_of
    from odeflow.io import writable_target

    renamed_flags(args, FLAG_RENAMED)
    rows = check_rows(args.rows)
    data, options, label = resolve(args, {"flow": None, "method": "auto", "rtol": 1e-8,
                                          "atol": 1e-10}, any_family=True)
    for key in ("flow", "method", "rtol", "atol", *SAMPLE_OPTIONS, *run_options()):
        if getattr(args, key, None) is not None:
            options[key] = getattr(args, key)
    family = family_of(data)
    flow = options["flow"] or family.default_flow
    check_scope(options, family, flow, label, args)
    # the family's own options that a flag, the config or resolve's defaults gave (a learning
    # rate of those defaults is there only for a family whose fields take it), then the
    # sample of a flow on a fixed sample (check_scope refused any other), as solve's keywords
    own = family.run_option_table()
    given = {key: options[key] for key in (*own, *SAMPLE_OPTIONS)
             if options.get(key) is not None}
    settings = {}
    for key, value in given.items():
        settings.update(own[key].solve_options(value, options) if key in own else {key: value})
    out = args.out or f"results/{label}-{flow}.npz"
    if args.out:
        typed_path_folder(out, "out", args.mkdir)
    writable_target(out, "out")  # a target that can never be written is refused before solving
    traj = solve(data, flow=flow, t_span=(0.0, options["t_end"]), method=options["method"],
                 rtol=options["rtol"], atol=options["atol"], max_nfev=args.max_nfev,
                 progress=False if args.no_progress else None, **settings)
    # Results first: the file is written before anything derived from it is printed.
    replaced = replaced_note(out)
    path = traj.save(out, field="out")
    s = traj.stats
    shown = "".join(f", {k}={v:g}" if isinstance(v, float) else f", {k}={v}"
                    for k, v in given.items())
    width = width_of(args)
    print(wrap(f"odeflow run: {label}, flow={flow}{shown}, t in [0, {options['t_end']:g}]",
               width))
    print(wrap(f"  data: {data!r}", width))
    print(wrap(f"  solver: {s['method']} status={s['status']} nfev={s['nfev']} "
               f"njev={s['njev']} nlu={s['nlu']} wall={s['wall_time']:.3f}s "
               f"({s.get('message', '')})", width))
    print(f"saved {path}{replaced}")
    if rows == 0:
        return 0
    if hasattr(traj, "summary_table"):  # a result that prints a table of itself
        print(traj.summary_table(rows, width))
    return 0
