"""Fuzzers: every input ends in a finite result or a clear error, never a raw exception.

- closed forms: any arguments -> finite values or ValidationError;
- result files: damaged bytes or tampered arrays/metadata -> a Trajectory whose
  arrays are finite, or ValidationError naming ``path``;
- CLI, per verb, in-process: exit 0, 2 (one line on stderr) or 3, no traceback;
  one fuzzer per verb of the real parser (``cli_verbs()``), ``sweep`` on generated
  configs (serial backend, tiny grids) and ``reproduce`` on tiny or out-of-limit
  counts (Fig. 6's grid cut to 1 x 2 x 2 cells so that an example stays short),
  ``derive`` on one cheap derivation or a wrong name.

Small budgets in the default profile; at least 2,000 examples per fuzzer under
``HYPOTHESIS_PROFILE=thorough`` (see docs/testing.md). Every solve is bounded by
a small evaluation budget (``MAX_NFEV`` patched to 3,000) so that each example
ends quickly; the reproducers of the reliability issue are ``@example``s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from odeflow import DataModel, SequenceClass, Trajectory, ValidationError, solve
from odeflow.analysis import closed_forms as cf
from odeflow.cli import main
from odeflow.solver import options as solve_options
from tests.fuzzers import (
    CLI_FLAGS,
    cli_argv,
    cli_flags,
    cli_verbs,
    closed_form_calls,
    corrupted_bytes,
    sweep_config_texts,
    tampered_result_arrays,
)
from tests.properties import fuzz_examples

SMALL = DataModel(6, [SequenceClass(4, 1, {0: 0.5, 2: 0.5}),
                      SequenceClass(5, 1, {0: 0.25, 3: 0.75})])
SUPPRESS = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture]


# ------------------------------------------------------------- closed forms
def _all_finite(value) -> bool:
    parts = value if isinstance(value, tuple) else (value,)
    return all(np.all(np.isfinite(np.asarray(p, dtype=float))) for p in parts)


@settings(max_examples=fuzz_examples(200), suppress_health_check=SUPPRESS)
@given(call=closed_form_calls())
@example(call=("speed_control_late", (5e-324, 1e12, 2.8e6, 0.71)))
@example(call=("dominant_bounds", (400.0, 0.41)))
@example(call=("transition_time", (3.16, 5e-324, 1.0)))
@example(call=("relative_gain", (1.4e299, 1.0, 1e-200)))
@example(call=("gamma_integral", (1e-300, 2.0, 1e-300, 1e-300)))
@example(call=("gamma_integral", (1e200, 1e100, 1e-100, 1e-300)))
@example(call=("snap_B", (1.0, 2.0, 1.0, 1e300, 1.0, 1e300, 1.0)))
@example(call=("relative_gain", (1e300, 1e-200, 1e-200)))
@example(call=("transition_time", (1e308, 1e-300, 1e-300)))
@example(call=("decoder_margin", ([1.0, [2.0, 3.0]], 10, 1.0, 0.5)))
@example(call=("decoder_margin", ([1.0, 2.0], [10, 3, 4], 1.0, 0.5)))
def test_closed_forms_finite_or_validation_error(call):
    name, args = call
    with np.errstate(all="raise"):  # a raw FloatingPointError would escape here
        try:
            value = getattr(cf, name)(*args)
        except ValidationError as exc:
            assert str(exc).startswith(exc.field + ":")
            event("ValidationError")
            return
    assert _all_finite(value), f"{name}{args} = {value!r}"
    event("finite result")


# ------------------------------------------------------------- result files
def _intact_file() -> tuple[bytes, dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.npz"
        solve(SMALL, flow="reduced", t_span=(0.0, 5.0), progress=False).save(path)
        raw = path.read_bytes()
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    metadata = json.loads(str(arrays.pop("metadata")))
    return raw, arrays, metadata


RAW, ARRAYS, METADATA = _intact_file()


def _check_load(path) -> None:
    try:
        traj = Trajectory.load(path)
    except ValidationError as exc:
        assert exc.field == "path" and "pickle" not in str(exc).lower()
        event("ValidationError")
        return
    event("loaded")
    for value in (traj.t, traj.z_active, traj.z_base, traj.decoder_lumped,
                  *traj.series.values()):
        assert value is None or np.all(np.isfinite(value))
    for n in traj.data.next_tokens:  # the accessors work on what was loaded
        assert np.all(np.isfinite(traj.attention(int(n))))
    try:
        assert np.all(np.isfinite(traj.objective))
    except ValidationError as exc:  # a file without a decoder says so
        assert exc.field == "decoder"


@settings(max_examples=fuzz_examples(100), suppress_health_check=SUPPRESS)
@given(data=corrupted_bytes(RAW))
@example(data=RAW[: len(RAW) // 2])
@example(data=b"\x80\x04\x95junk.")
def test_damaged_file_loads_or_is_refused(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.npz"
        path.write_bytes(data)
        _check_load(path)


@settings(max_examples=fuzz_examples(100), suppress_health_check=SUPPRESS)
@given(arrays=tampered_result_arrays(ARRAYS, METADATA))
def test_tampered_file_loads_or_is_refused(arrays):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.npz"
        np.savez(path, **arrays)
        _check_load(path)


# ---------------------------------------------------------------------- CLI
@contextlib.contextmanager
def _sandbox():
    """A temporary working folder holding the files the argv fuzzer refers to."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            Path("good.toml").write_text(SMALL.to_toml_string())
            Path("bad.toml").write_bytes(b"\xff\xfe vocab_size = 3")
            Path("deep.toml").write_text("a = " + "[" * 3000 + "]" * 3000)
            Path("runn.toml").write_text("[runn]\nt_end = 5.0\n" + SMALL.to_toml_string())
            Path("adir").mkdir()
            Path("afile").write_text("not a store\n")
            os.symlink("nowhere/x.zarr", "dangling")
            yield
        finally:
            os.chdir(old)


FILES = {"config": ["good.toml", "bad.toml", "deep.toml", "runn.toml", "missing.toml",
                    "adir"],
         "out": ["r.npz", "adir", "/", "sub/r.npz", "r.png", "r.gif", ""]}


def _bounded(argv: list[str]) -> list[str]:
    """Keep each example cheap: small defaults for the costly counts unless drawn."""
    verb = argv[0]
    extra = []
    if verb in ("run", "compare-levels", "plot") and "--t-end" not in argv:
        extra += ["--t-end", "2"]
    if verb == "compare":
        for flag, value in (("--steps", "5"), ("--seeds", "2"), ("--batch-size", "4"),
                            ("--seq-len", "8")):
            if flag not in argv:
                extra += [flag, value]
    if verb == "verify":
        if "--only" not in argv:
            extra += ["--only", "CF1"]
        if "--t-max" not in argv:
            extra += ["--t-max", "10"]
    if verb == "sweep" and "--backend" not in argv:
        extra += ["--backend", "serial"]  # no process pool, no dask cluster
    if verb == "reproduce":
        for flag, value in (("--steps", "1"), ("--seeds", "1")):
            if flag not in argv:
                extra += [flag, value]
    if verb in ("run", "compare", "sweep", "reproduce") and "--no-progress" not in argv:
        extra.append("--no-progress")
    return argv + extra


#: If set, every CLI example appends "verb, exit code or exception, seconds, argv" here
#: (to count examples, raw exceptions and slow examples of a thorough run).
FUZZ_LOG = os.environ.get("ODEFLOW_FUZZ_LOG")


def check_cli(argv: list[str], one_line: bool = False) -> None:
    """Run ``odeflow ARGV`` in-process: exit 0, 1 (verify only), 2 or 3, no traceback.

    With ``one_line``, an exit 2 of the command itself prints exactly one line
    on stderr, ``odeflow: error: <field>: <why>`` (argparse's usage errors print
    their usage line and then one ``odeflow VERB: error:`` line).
    """
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    code = "raw-exception"
    usage = False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
                code, usage = exc.code, True
    finally:
        if FUZZ_LOG:
            with open(FUZZ_LOG, "a", encoding="utf-8") as fh:
                fh.write(json.dumps([argv[0], code, round(time.perf_counter() - start, 3),
                                     argv]) + "\n")
    event(f"exit {code}")
    assert code in (0, 1, 2, 3), (argv, code)
    if code == 1:  # only `verify` uses 1, for a failed check (its documented meaning)
        assert argv[0] == "verify", (argv, err.getvalue())
    if code == 2 and argv[0] != "plot":  # plot all prints one line per skipped figure
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        assert lines and lines[-1].startswith(("odeflow: error:", "odeflow ", "usage:")), \
            (argv, err.getvalue())
    if code == 2 and one_line:
        lines = err.getvalue().splitlines()
        if usage:
            assert lines[0].startswith("usage:") and lines[-1].startswith(
                f"odeflow {argv[0]}: error:"), (argv, err.getvalue())
        else:
            assert len(lines) == 1 and lines[0].startswith("odeflow: error: "), \
                (argv, err.getvalue())
    assert "Traceback" not in err.getvalue()


@pytest.fixture(autouse=True)
def _small_budget():
    """Every solve of a fuzz example ends after 3,000 right-hand sides (SolveError)."""
    saved = solve_options.MAX_NFEV
    solve_options.MAX_NFEV = 3000
    yield
    solve_options.MAX_NFEV = saved


@settings(max_examples=fuzz_examples(15), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("run", FILES).map(_bounded))
@example(argv=["run", "--config", "bad.toml"])
@example(argv=["run", "--config", "deep.toml"])
@example(argv=["run", "--config", "runn.toml"])
@example(argv=["run", "--out", "adir", "--t-end", "1", "--no-progress"])
@example(argv=["run", "--out", "/", "--t-end", "1", "--no-progress"])
@example(argv=["run", "--rows", "99999999999999999999", "--t-end", "1", "--no-progress"])
@example(argv=["run", "--atol", "5e-324", "--t-end", "1", "--no-progress"])
@example(argv=["run", "--t-end", "5e-324", "--no-progress"])
@example(argv=["run", "--eta-z", "1e12", "--t-end", "1e-3", "--method", "RK23",
               "--no-progress"])
def test_cli_run(argv):
    with _sandbox():
        check_cli(argv)


@settings(max_examples=fuzz_examples(10), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("compare-levels", FILES).map(_bounded))
@example(argv=["compare-levels", "--ratios", "0.1,,0.2", "--t-end", "1"])
@example(argv=["compare-levels", "--eta-y", "0", "--t-end", "2"])
@example(argv=["compare-levels", "--t-end", "5e-324"])
def test_cli_compare_levels(argv):
    with _sandbox():
        check_cli(argv)


@settings(max_examples=fuzz_examples(10), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("compare", FILES).map(_bounded))
@example(argv=["compare", "--steps", "99999999999999999999"])
@example(argv=["compare", "--steps", "3", "--seq-len", "99999999999999999999"])
def test_cli_compare(argv):
    with _sandbox():
        check_cli(argv)


#: Arguments of ``odeflow plot`` that once failed (the last five found by the thorough
#: profile); one test case each, so that xdist spreads them.
PLOT_REPRODUCERS = [
    ["plot", "margin", "--dpi", "100000", "--out", "m.png"],
    ["plot", "attention-map", "--dpi", "5", "--t-end", "2"],
    ["plot", "scan-snap", "--t-end", "1", "--out", "s.png"],
    ["plot", "levels", "--eta-z", "1e12", "--t-end", "10", "--out", "l.png"],
    ["plot", "levels", "--eta-z", "1e4", "--t-end", "1e10", "--out", "l.png"],
    ["plot", "all", "--t-end", "5e-324"],
    ["plot", "levels", "--t-end", "nan", "--out", "l.png"],
    ["plot", "margin", "--t-end", "1e300", "--out", "m.png"],
    ["plot", "margin", "--t-end", "0.01", "--dpi", "10"],
    ["plot", "margin", "--t-end", "5e-324", "--out", "m.png"],
]


def _check_plot(argv):
    import matplotlib.pyplot as plt

    with _sandbox():
        try:
            check_cli(argv)
        finally:
            plt.close("all")


@settings(max_examples=fuzz_examples(8), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("plot", FILES).map(_bounded))
def test_cli_plot(argv):
    _check_plot(argv)


@pytest.mark.parametrize("argv", PLOT_REPRODUCERS, ids=" ".join)
@settings(max_examples=1, suppress_health_check=SUPPRESS)
@given(nothing=st.none())  # check_cli records hypothesis events: run inside a test
def test_plot_reproducers_of_past_failures(argv, nothing):
    _check_plot(argv)


@settings(max_examples=fuzz_examples(8), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("verify", FILES).map(_bounded))
@example(argv=["verify", "--only", "CF1", "--t-max", "10", "--atol", "1e-300"])  # hung
@example(argv=["verify", "--seed", "0", "--method", "LSODA", "--t-max", "1.797693134862316e+305",
               "--only", "CF1"])  # found by the thorough profile: t_max / t_min overflowed
def test_cli_verify(argv):
    with _sandbox():
        check_cli(argv)


SWEEP_FILES = {"config": ["s.toml"] * 6 + ["bad.toml", "deep.toml", "missing.toml", "adir",
                                            "good.toml"],
               "out": ["s.zarr", "s.nc", "adir", "afile", "dangling", "sub/s.zarr", "/",
                       ""]}

#: The config of the sweep reproducers: one exact point to t = 1.
ONE_POINT = '[sweep]\ntask = "exact"\npreset = "syn-small"\n[sweep.grid]\neta_y = [1.0]\n' \
            '[sweep.settings]\nt_end = 1.0\n'


@settings(max_examples=fuzz_examples(10), suppress_health_check=SUPPRESS, deadline=None)
@given(text=sweep_config_texts(), argv=cli_argv("sweep", SWEEP_FILES).map(_bounded))
@example(text=ONE_POINT, argv=["sweep", "bad.toml", "--backend", "serial"])
@example(text=ONE_POINT, argv=["sweep", "deep.toml", "--backend", "serial"])
@example(text=ONE_POINT, argv=["sweep", "s.toml", "--backend", "serial", "--out", "dangling"])
@example(text=ONE_POINT, argv=["sweep", "s.toml", "--backend", "serial", "--out", "afile"])
@example(text=ONE_POINT + "[foo]\nx = 1\n", argv=["sweep", "s.toml", "--backend", "serial"])
@example(text='"" = 1\n' + ONE_POINT, argv=["sweep", "s.toml", "--backend", "serial"])
def test_cli_sweep(text, argv):
    with _sandbox():
        Path("s.toml").write_bytes(text if isinstance(text, bytes) else text.encode())
        check_cli(argv, one_line=True)


@pytest.fixture
def _small_fig6(monkeypatch):
    """Fig. 6 on syn-medium-1 x 2 rates x 2 ratios (4 cells, not 64): an example stays short."""
    from odeflow.experiments import paper

    full = paper.fig6_rows

    def small(*args, **kwargs):
        kwargs.update(sizes=(1,), eta_zs=(0.5, 1.0), ratios=(1.0, 2.0))
        return full(*args, **kwargs)

    monkeypatch.setattr(paper, "fig6_rows", small)


#: Folders for ``reproduce --out`` (never "/": that is a folder the command would write into).
REPRODUCE_FILES = {"out": ["rep", "rep", "sub/rep", "adir", "afile", "dangling", "r.png", ""]}


@settings(max_examples=fuzz_examples(8), suppress_health_check=SUPPRESS, deadline=None)
@given(argv=cli_argv("reproduce", REPRODUCE_FILES).map(_bounded))
@example(argv=["reproduce", "fig4", "--steps", "99999999999999999999"])
@example(argv=["reproduce", "fig5", "--seeds", "99999999999999999999", "--steps", "1"])
@example(argv=["reproduce", "fig6", "--steps", "2", "--seeds", "1", "--no-progress"])
def test_cli_reproduce(argv, _small_fig6):
    import matplotlib.pyplot as plt

    with _sandbox():
        try:
            check_cli(argv, one_line=True)
        finally:
            plt.close("all")


@settings(max_examples=fuzz_examples(6), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("derive"))
@example(argv=["derive", "nope", "--list"])
def test_cli_derive(argv):
    with _sandbox():
        check_cli(argv, one_line=True)


def test_every_verb_has_a_fuzzer():
    verbs = set(cli_verbs())
    assert verbs == cli_verbs_of_parser()
    assert {name.removeprefix("test_cli_").replace("_", "-")
            for name in globals() if name.startswith("test_cli_")} == verbs
    assert set(CLI_FLAGS) == verbs
    for verb, flags in CLI_FLAGS.items():  # no fuzzer draws a flag the verb lost
        assert set(flags) <= cli_flags(verb), (verb, set(flags) - cli_flags(verb))


def cli_verbs_of_parser() -> set[str]:
    """The verbs ``odeflow --help`` lists (one per command module under odeflow.cli)."""
    from odeflow.cli import build_parser, command_modules

    usage = build_parser().format_help()
    verbs = {m.replace("_", "-") for m in command_modules()}
    assert all(v in usage for v in verbs)
    return verbs
