"""Tests of :func:`odeflow.analysis.verify` and ``odeflow verify``: the closed forms CF1-CF6
agree with scipy's integration of their ODEs, and a wrong closed form is caught."""

from __future__ import annotations

import json

import numpy as np
import pytest

from odeflow import SolveError, ValidationError
from odeflow.analysis import closed_forms as cf
from odeflow.analysis.check_registry import (
    CheckResult,
    VerificationReport,
    registered_checks,
    relative_error,
)
from odeflow.analysis.checks_scan_snap import CHECKS
from odeflow.analysis.checks_scan_snap_inputs import random_data_model, snap_data_model
from odeflow.analysis.verification import DEFAULT_RTOL, DEFAULT_TOLERANCE, verify
from odeflow.cli import main

#: End of the grid for the runs that only need to see a row fail.
SHORT = 1e4


@pytest.fixture(scope="module")
def report():
    """One full verification run at the defaults (rtol = 1e-10), shared by the tests."""
    return verify()


def rows_of(rep, check):
    return [row for row in rep.rows if row.check == check]


# ---------------------------------------------------------------------------
# the full run
# ---------------------------------------------------------------------------
def test_defaults_are_the_documented_ones():
    assert DEFAULT_RTOL == 1e-10
    assert DEFAULT_TOLERANCE == 1e-7


def test_every_check_passes_with_error_below_1e7(report):
    assert report.passed, report.format_table()
    assert {row.check for row in report.rows} == set(registered_checks())
    assert set(CHECKS) < set(registered_checks())
    for row in report.rows:
        assert row.passed, (row.check, row.parameters, row.note)
        if row.tolerance == DEFAULT_TOLERANCE:  # closed form vs scipy on the same ODE
            assert 0.0 <= row.max_rel_error <= 1e-7, (row.check, row.parameters)
    # the rows with their own tolerance: CF-IH1's O(a) comparison with the full flow and
    # CF-IH2's asymptote (a limit, approached at the end of a finite run)
    own = {(row.check, row.quantity) for row in report.rows if row.tolerance != DEFAULT_TOLERANCE}
    assert own == {("CF-IH1", "p_S(t): full flow, a=0.01"),
                   ("CF-IH1", "p_S(t): population flow, a=0.01"),
                   ("CF-IH2", "a(t) asymptote of the 1-D ODE")}
    assert max(row.max_rel_error for row in report.rows if row.check in CHECKS) <= 1e-7
    assert report.settings["rtol"] == 1e-10


def test_cf1_covers_syn_small_and_a_large_vocabulary(report):
    params = " ".join(row.parameters for row in rows_of(report, "CF1"))
    assert "M=30," in params
    assert "M=10000," in params
    assert "shared-query-small" in params


def test_cf4_runs_move_the_logits(report):
    gains = [row for row in rows_of(report, "CF4") if row.quantity.startswith("r_")]
    assert len(gains) == 2  # shared-query-small and the random model
    for row in gains:
        assert row.details["pairs"] >= 100
        low, high = row.details["chi_range"]
        assert low >= 0.0
        assert high > 1.0, "a check on logits that barely move proves nothing"
        # far above the round-off floor the error is the integrator's
        assert row.details["max_rel_error_far_above_floor"] <= 1e-9


def test_cf5_conditions_hold_and_bounds_have_slack(report):
    rows = rows_of(report, "CF5")
    assert len(rows) == 2
    for row in rows:
        d = row.details
        assert row.conditions_met
        assert d["dominance_ratio"] > 1.0
        assert d["common_max_rise"] <= 0.0
        assert d["worst_signed_violation"] <= 1e-7
        lower_slack, upper_slack = d["slack_at_t_max"]
        assert lower_slack > 0.1 and upper_slack > 0.1
        assert d["one_plus_chi_at_t_max"] > 2.0


def test_cf6_logit_moves(report):
    for row in rows_of(report, "CF6"):
        if row.quantity == "z_c(t)":
            start, end = row.details["zc_range"]
            assert end < start - 1.0


def test_report_records_its_wall_time(report):
    # The time is reported (benchmarks/bench_verify.py prints it); no test asserts
    # a wall-clock bound, which a busy machine would break.
    assert report.wall_time > 0.0


# ---------------------------------------------------------------------------
# a wrong closed form makes its rows fail
# ---------------------------------------------------------------------------
def test_factor_two_in_decoder_margin_fails_cf1(monkeypatch):
    original = cf.decoder_margin
    monkeypatch.setattr(cf, "decoder_margin", lambda *a, **k: 2.0 * original(*a, **k))
    rep = verify(checks=["CF1"], t_max=SHORT)
    assert not rep.passed
    assert all(not row.passed for row in rep.rows)
    assert all(row.max_rel_error > 0.5 for row in rep.rows)


def test_factor_two_in_relative_gain_fails_only_the_gain_rows(monkeypatch):
    original = cf.relative_gain
    monkeypatch.setattr(cf, "relative_gain", lambda *a, **k: 2.0 * original(*a, **k))
    rep = verify(checks=["CF4"], t_max=SHORT)
    for row in rep.rows:
        is_gain = row.quantity.startswith("r_")
        assert row.passed is not is_gain, row.quantity


def test_squared_initial_features_fail_cf4(monkeypatch):
    """relative_gain takes f^(0), not its square; passing squares must be caught."""
    original = cf.relative_gain
    monkeypatch.setattr(cf, "relative_gain",
                        lambda chi, f, g: original(chi, f * f, g * g))
    rep = verify(checks=["CF4"], t_max=SHORT)
    assert not all(row.passed for row in rep.rows if row.quantity.startswith("r_"))


def test_factor_two_in_snap_B_fails_cf6(monkeypatch):  # noqa: N802
    original = cf.snap_B
    monkeypatch.setattr(cf, "snap_B", lambda *a, **k: 2.0 * original(*a, **k))
    rep = verify(checks=["CF6"], t_max=SHORT)
    for row in rep.rows:
        assert row.passed is (row.quantity != "B(t)")


def test_wrong_lower_bound_fails_cf5(monkeypatch):
    original = cf.dominant_bounds

    def doubled_lower(B, f0, log=False):
        lower, upper = original(B, f0, log=log)
        return (2.0 * lower if log else lower**2), upper

    monkeypatch.setattr(cf, "dominant_bounds", doubled_lower)
    rep = verify(checks=["CF5"], t_max=SHORT)
    assert all(not row.passed for row in rep.rows)


def test_factor_two_makes_the_cli_exit_non_zero(monkeypatch, capsys):
    original = cf.transition_time
    monkeypatch.setattr(cf, "transition_time", lambda *a, **k: 2.0 * original(*a, **k))
    assert main(["verify", "--only", "CF2"]) != 0
    out = capsys.readouterr().out
    assert "FAIL" in out


def test_a_closed_form_that_raises_becomes_a_failing_row(monkeypatch):
    def broken(*args, **kwargs):
        raise FloatingPointError("closed form produced NaN")

    monkeypatch.setattr(cf, "gamma_integral", broken)
    rep = verify(checks=["CF2", "CF3"])
    assert [row.check for row in rep.rows if not row.passed] == ["CF3"]
    failed = [row for row in rep.rows if not row.passed][0]
    assert "FloatingPointError" in failed.note
    assert np.isnan(failed.max_rel_error)


def test_loose_atol_spoils_small_quantities():
    """Gamma ~ t^2 is tiny at t = 1e-3: an atol of 1e-10 makes the control absolute there."""
    rep = verify(checks=["CF3"], atol=1e-10, t_max=SHORT)
    assert not rep.passed
    assert max(row.max_rel_error for row in rep.rows) > 1e-7


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def test_cli_table_and_exit_code(capsys):
    assert main(["verify", "--only", "cf2", "cf6"]) == 0
    out = capsys.readouterr().out
    assert "quantity: parameters" in out and "max rel err" in out
    assert "CF2: t_0" in out and "CF6: z_c(t), B(t) (Thm 4, Eqns 13-14)" in out
    results = [line.split()[-1] for line in out.splitlines()
               if line[:2].strip().isdigit() and "checks," not in line]
    assert results == ["PASS"] * 9  # 3 rows of CF2, 6 of CF6
    assert "FAIL" not in out
    assert "all PASS" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_cli_wide_prints_one_row_per_check(capsys):
    assert main(["verify", "--only", "CF6", "--wide", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "paper eqn" in out
    rows = [line for line in out.splitlines() if line.endswith("PASS")]
    assert len(rows) == 6 and all("CF6" in row and "Thm 4" in row for row in rows)


def _report(errors_and_tolerances):
    rows = [CheckResult(f"CF{i + 1}", "q", "Eqn 1", "p", err, tol)
            for i, (err, tol) in enumerate(errors_and_tolerances)]
    settings = {"method": "LSODA", "rtol": 1e-10, "atol": 1e-30, "t_min": 1e-3,
                "t_max": 1e9, "points": 241}
    return VerificationReport(rows, settings)


def test_summary_ranks_rows_by_their_own_tolerance():
    """A 1e-3 error under a 1e-2 tolerance is 0.1 of it; a 5e-8 error under 1e-7 is worse."""
    summary = _report([(1e-3, 1e-2), (5e-8, 1e-7)]).summary()
    assert "all PASS" in summary
    assert "worst error 0.5 of its tolerance: row 2, CF2 q (5.00e-08, tol 1e-07)" in summary
    assert "max rel error" not in summary


def test_summary_names_each_familys_times():
    """The closing line shows the families' grids (``settings["grids"]``): one shared by
    every family alone, else each led by the families that use it."""
    report = _report([(1e-8, 1e-7)])
    assert "; t in [0.001, 1e+09] (241 log-spaced points); " in report.summary()
    report.settings["grids"] = {"a": "t in [0, 1]", "b": "t in [0, 1]"}
    assert "atol=1e-30; t in [0, 1]; " in report.summary()
    report.settings["grids"] = {"a": "t in [0, 1]", "b": "t in [1, 2]", "c": "t in [0, 1]"}
    assert "atol=1e-30; a, c: t in [0, 1]; b: t in [1, 2]; " in report.summary()


def test_summary_names_failing_rows_and_a_row_without_error():
    report = _report([(1e-3, 1e-2), (3e-7, 1e-7), (float("nan"), 1e-7)])
    summary = report.summary()
    assert "2 FAIL (rows 2, 3)" in summary
    assert "worst: row 3, CF3 q (no error measured)" in summary
    assert report.to_dict()["worst_row"] == 3


def test_progress_goes_to_stderr_and_not_into_json(capsys):
    assert main(["verify", "--only", "CF2", "CF3", "--json", "--t-max", "100"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert captured.err.splitlines() == [line for line in captured.err.splitlines()
                                         if line.startswith("verify ")]
    assert [line.split(":")[0] for line in captured.err.splitlines()] == \
        ["verify 1/2", "verify 1/2", "verify 2/2", "verify 2/2"]  # as each starts, ends
    assert captured.err.splitlines()[0].endswith("...") and "rows PASS" in captured.err
    assert main(["verify", "--only", "CF2", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_json_parses(capsys):
    assert main(["verify", "--json", "--only", "CF2", "--rtol", "1e-10"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is True
    assert doc["settings"]["rtol"] == 1e-10
    assert doc["settings"]["checks"] == ["CF2"]
    assert len(doc["rows"]) == 3
    for row in doc["rows"]:
        assert row["passed"] is True
        assert row["max_rel_error"] <= 1e-7
        assert {"quantity", "equation", "parameters", "tolerance", "floor",
                "details"} <= set(row)


def test_cli_json_of_a_failing_row_is_strict_json(monkeypatch, capsys):
    monkeypatch.setattr(cf, "transition_time", lambda *a, **k: float("nan"))
    assert main(["verify", "--json", "--only", "CF2"]) == 1
    doc = json.loads(capsys.readouterr().out)  # NaN is written as the string "nan"
    assert doc["passed"] is False
    assert all(row["max_rel_error"] == "nan" for row in doc["rows"])


def test_cli_loose_rtol_fails(capsys):
    assert main(["verify", "--only", "CF1", "--rtol", "1e-6"]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--rtol", "0"], ["--atol", "-1"], ["--tolerance", "nan"]])
def test_cli_invalid_settings_exit_2(argv, capsys):
    assert main(["verify", "--only", "CF2", *argv]) == 2
    assert "odeflow: error:" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "field"), [
    ({"rtol": 0.0}, "rtol"), ({"atol": float("inf")}, "atol"),
    ({"tolerance": -1.0}, "tolerance"), ({"method": "Euler"}, "method"),
    ({"checks": ["CF9"]}, "checks"), ({"checks": []}, "checks"),
    ({"t_min": 10.0, "t_max": 1.0}, "t_max"), ({"points_per_decade": 0}, "points_per_decade"),
])
def test_invalid_settings_name_the_field(kwargs, field):
    with pytest.raises(ValidationError) as info:
        verify(**kwargs)
    assert info.value.field == field


def test_relative_error_uses_the_floor():
    closed = np.array([1.0, 1e-12, 0.0])
    numeric = closed + np.array([1e-9, 1e-13, 1e-14])
    assert relative_error(numeric[:1], closed[:1]) == pytest.approx(1e-9)
    assert relative_error(numeric[:2], closed[:2]) == pytest.approx(0.1)
    assert relative_error(numeric, closed, floor=1e-6) == pytest.approx(1e-7)
    assert relative_error(numeric, closed) == np.inf
    assert relative_error([0.0], [0.0]) == 0.0
    assert np.isnan(relative_error([np.nan], [1.0]))


def test_random_data_model_has_distinct_pairs_and_is_seeded():
    data, z0 = random_data_model(3)
    again, z0_again = random_data_model(3)
    assert data == again and np.array_equal(z0, z0_again)
    assert not data.uniform_weights
    assert data.query_tokens.size == 2
    for n in data.next_tokens:
        assert data.distinct_tokens(int(n)).size == 6
    assert z0.shape == (2, data.vocab_size)


def test_snap_data_model_fits_the_section_6_system():
    from odeflow.fields.snap import snap_parameters

    p = snap_parameters(snap_data_model())
    assert p["common_token"] == 0
    assert p["a"] > 0 and p["pi"] == pytest.approx(1 / 3)


def test_verify_tolerances_have_the_limits_of_solve():
    """Regression (thorough fuzz run): `verify --atol 1e-300` never finished."""
    from odeflow.analysis.verification import verify

    for kwargs, field in (({"atol": 1e-300}, "atol"), ({"rtol": 2.0}, "rtol"),
                          ({"rtol": 1e-20}, "rtol")):
        with pytest.raises(ValidationError) as info:
            verify(checks=["CF1"], t_max=10.0, **kwargs)
        assert info.value.field == field


def test_verify_margin_solve_has_the_evaluation_budget(monkeypatch):
    from odeflow.analysis.checks_scan_snap_inputs import integrate_margin
    from odeflow.solver import options as solve_options

    monkeypatch.setattr(solve_options, "MAX_NFEV", 20)
    with pytest.raises(SolveError, match="after 20 right-hand-side evaluations"):
        integrate_margin(100.0, 1.0, 0.5, np.geomspace(1e-3, 1e6, 50))
