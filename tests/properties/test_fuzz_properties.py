"""Fuzzers: every input ends in a finite result or a clear error, never a raw exception.

- closed forms: any arguments -> finite values or ValidationError;
- result files: damaged bytes or tampered arrays/metadata -> a Trajectory whose
  arrays are finite, or ValidationError naming ``path``;
- CLI, per verb, in-process: exit 0, 2 (one line on stderr) or 3, no traceback.

Small budgets in the default profile; at least 2,000 examples per fuzzer under
``HYPOTHESIS_PROFILE=thorough`` (see docs/testing.md). Every solve is bounded by
a small evaluation budget (``MAX_NFEV`` patched to 3,000) so that each example
ends quickly; the reproducers of the reliability issue are ``@example``s.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings

from odeflow import DataModel, SequenceClass, Trajectory, ValidationError, solve
from odeflow.analysis import closed_forms as cf
from odeflow.cli import main
from odeflow.testing import (
    CLI_VERBS,
    cli_argv,
    closed_form_calls,
    corrupted_bytes,
    tampered_result_arrays,
)
from tests.properties import fuzz_examples

solve_module = importlib.import_module("odeflow.solver.solve")
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
    if verb in ("run", "compare"):
        extra.append("--no-progress")
    return argv + extra


#: If set, every CLI example appends "verb, exit code or exception, seconds, argv" here
#: (to count examples, raw exceptions and slow examples of a thorough run).
FUZZ_LOG = os.environ.get("ODEFLOW_FUZZ_LOG")


def check_cli(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    code = "raw-exception"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
                code = exc.code
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
    assert "Traceback" not in err.getvalue()


@pytest.fixture(autouse=True)
def _small_budget():
    """Every solve of a fuzz example ends after 3,000 right-hand sides (SolveError)."""
    saved = solve_module.MAX_NFEV
    solve_module.MAX_NFEV = 3000
    yield
    solve_module.MAX_NFEV = saved


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


@settings(max_examples=fuzz_examples(8), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("plot", FILES).map(_bounded))
@example(argv=["plot", "margin", "--dpi", "100000", "--out", "m.png"])
@example(argv=["plot", "attention-map", "--dpi", "5", "--t-end", "2"])
@example(argv=["plot", "scan-snap", "--t-end", "1", "--out", "s.png"])
@example(argv=["plot", "levels", "--eta-z", "1e12", "--t-end", "10", "--out", "l.png"])
@example(argv=["plot", "levels", "--eta-z", "1e4", "--t-end", "1e10", "--out", "l.png"])
def test_cli_plot(argv):
    import matplotlib.pyplot as plt

    with _sandbox():
        try:
            check_cli(argv)
        finally:
            plt.close("all")


@settings(max_examples=fuzz_examples(8), suppress_health_check=SUPPRESS)
@given(argv=cli_argv("verify", FILES).map(_bounded))
def test_cli_verify(argv):
    with _sandbox():
        check_cli(argv)


def test_every_verb_has_a_fuzzer():
    assert {name.removeprefix("test_cli_").replace("_", "-")
            for name in globals() if name.startswith("test_cli_")} == set(CLI_VERBS)
