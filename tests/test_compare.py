"""Comparison of discrete runs with the Level E flow, and the ``compare`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from odeflow import DataModel, ValidationError
from odeflow.analysis.compare import (
    compare_runs,
    compare_to_flow,
    flow_at,
    format_gap_table,
    gap_table,
)
from odeflow.cli import main
from odeflow.training import gradient_ascent

ETA_Y, ETA_Z = 1.0, 5.0


@pytest.fixture(scope="module")
def small():
    return DataModel.preset("shared-query-small")


def test_gradient_ascent_comparison_is_small_and_first_order(small):
    coarse = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=200, run="gradient_ascent",
                          dt=0.5)
    fine = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=400, run="gradient_ascent",
                        dt=0.25)
    assert coarse.t[-1] == fine.t[-1] == 100.0
    assert coarse.z_range > 0.4
    assert fine.max_z_gap < coarse.max_z_gap < 0.01
    assert 1.7 <= coarse.max_z_gap / fine.max_z_gap <= 2.3
    assert fine.max_attention_tv < coarse.max_attention_tv < 0.01
    assert coarse.z_gap[0] == 0.0 and coarse.attention_tv[0] == 0.0


def test_sgd_comparison_summary_is_json(small):
    cmp = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=60, batch_size=8, seq_len=32,
                       seeds=3, record=20)
    assert cmp.member_z_gap.shape == (3,)
    assert np.all(cmp.member_z_gap >= 0)
    summary = json.loads(json.dumps(cmp.summary()))
    assert summary["seeds"] == [0, 1, 2] and summary["seq_len"] == 32
    assert summary["t"] == [0.0, 20.0, 40.0, 60.0]
    assert summary["max_z_gap"] == pytest.approx(max(summary["z_gap"]))


def test_attention_tv_is_the_largest_total_variation(small):
    run = gradient_ascent(small, ETA_Y, ETA_Z, 30, record=10)
    flow = flow_at(small, ETA_Y, ETA_Z, run.t)
    cmp = compare_to_flow(flow, run)
    expected = [max(0.5 * np.abs(flow.attention(n)[i] - run.attention(n)[i]).sum()
                    for n in small.next_tokens) for i in range(run.t.size)]
    np.testing.assert_allclose(cmp.attention_tv, expected, rtol=1e-12, atol=1e-15)
    z_flow = flow.logits(0)[:, small.active_tokens]
    z_run = run.logits(0)[:, small.active_tokens]
    np.testing.assert_allclose(cmp.z_gap, np.abs(z_flow - z_run).max(axis=1) / np.ptp(z_flow))


def test_mismatched_times_and_unknown_run_are_rejected(small):
    run = gradient_ascent(small, ETA_Y, ETA_Z, 30, record=10)
    flow = flow_at(small, ETA_Y, ETA_Z, run.t[:-1])
    with pytest.raises(ValidationError) as err:
        compare_to_flow(flow, run)
    assert err.value.field == "run"
    with pytest.raises(ValidationError) as err:
        compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=10, run="adam")
    assert err.value.field == "run"


def test_gap_table_rows_and_markdown(small):
    rows = gap_table(small, ETA_Y, ETA_Z, 40, seq_lens=(8, 32), batch_sizes=(4, 8), seeds=2)
    assert [(r["batch_size"], r["seq_len"]) for r in rows] == \
        [(4, 8), (4, 32), (8, 8), (8, 32), (None, None)]
    text = format_gap_table(rows)
    assert text.count("\n") == 6 and "| gradient_ascent | - | inf |" in text


# -------------------------------------------------------------------- CLI
def test_cli_compare_prints_a_table(capsys):
    assert main(["compare", "--steps", "40", "--seeds", "2", "--batch-size", "4",
                 "--seq-len", "16", "--rows", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "sgd (2 seeds, batch 4, T=16" in out and "max z gap" in out


def test_cli_compare_json_and_t_end(capsys):
    assert main(["compare", "--run", "gradient_ascent", "--dt", "0.5", "--t-end", "20",
                 "--eta-z", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"] == 40 and doc["eta_z"] == 2.0 and doc["t"][-1] == 20.0
    assert doc["run"] == "gradient_ascent" and doc["max_z_gap"] < 0.05


def test_cli_compare_table_json(capsys):
    assert main(["compare", "--table", "--steps", "20", "--seeds", "2", "--seq-lens", "8",
                 "16", "--batch-sizes", "4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["seq_len"] for r in doc["rows"]] == [8, 16, None]


@pytest.mark.parametrize(("argv", "field"), [
    (["--steps", "5", "--batch-size", "0"], "batch_size"),
    (["--steps", "5", "--seq-len", "1"], "seq_len"),
    (["--steps", "0"], "steps"),
    (["--steps", "5", "--seeds", "0"], "seeds"),
    (["--steps", "5", "--momentum", "1"], "momentum"),
    (["--steps", "5", "--preset", "nope"], "preset"),
    (["--t-end", "nan"], "t_end"),
])
def test_cli_compare_bad_input_exits_2(capsys, argv, field):
    assert main(["compare", "--no-progress", *argv]) == 2
    flag = "--" + field.replace("_", "-")  # typed on the command line: named as the flag
    assert f"odeflow: error: {flag}:" in capsys.readouterr().err


@pytest.mark.parametrize(("options", "field"), [
    ({"run": "gradient_ascent", "seeds": 5}, "seeds"),
    ({"run": "gradient_ascent", "seed": 3}, "seed"),
    ({"run": "gradient_ascent", "batch_size": 7}, "batch_size"),
    ({"run": "gradient_ascent", "seq_len": 9}, "seq_len"),
    ({"run": "gradient_ascent", "seeds": [0]}, "seeds"),
    ({"run": "sgd", "dt": 0.01}, "dt"),
    ({"dt": 1.0}, "dt"),
])
def test_compare_runs_refuses_what_its_process_does_not_take(small, options, field):
    """Nothing is dropped: gradient ascent refuses SGD's settings, SGD refuses dt."""
    with pytest.raises(ValidationError) as err:
        compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=4, **options)
    assert err.value.field == field


def test_compare_runs_defaults_of_the_other_process_are_taken(small):
    """The defaults given by name (seeds=1, seed=0, batch_size/seq_len None, dt None)
    are the same comparison; gradient ascent's dt is 1 by default."""
    ga = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=6, run="gradient_ascent")
    same = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=6, run="gradient_ascent",
                        seeds=1, seed=0, batch_size=None, seq_len=None, dt=1.0)
    assert np.array_equal(ga.z_gap, same.z_gap) and ga.settings["dt"] == 1.0
    sgd = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=6, batch_size=4, seq_len=8)
    again = compare_runs(small, eta_y=ETA_Y, eta_z=ETA_Z, steps=6, batch_size=4, seq_len=8,
                         dt=None)
    assert np.array_equal(sgd.z_gap, again.z_gap) and "dt" not in sgd.settings


@pytest.mark.parametrize(("argv", "flag"), [
    (["--run", "gradient_ascent", "--seeds", "3"], "--seeds"),
    (["--run", "gradient_ascent", "--batch-size", "4"], "--batch-size"),
    (["--run", "gradient_ascent", "--seq-len", "8"], "--seq-len"),
    (["--run", "gradient_ascent", "--momentum", "0.5"], "--momentum"),
    (["--dt", "0.5"], "--dt"),
    (["--run", "sgd", "--dt", "1"], "--dt"),
    (["--table", "--dt", "0.5"], "--dt"),
    (["--table", "--run", "gradient_ascent"], "--run"),
    (["--table", "--batch-size", "4"], "--batch-size"),
    (["--table", "--seq-len", "8"], "--seq-len"),
])
def test_cli_compare_refuses_the_flags_of_the_other_process(capsys, argv, flag):
    assert main(["compare", "--steps", "5", "--no-progress", *argv]) == 2
    assert f"odeflow: error: {flag}:" in capsys.readouterr().err


def test_cli_compare_gradient_ascent_is_compare_runs_with_dt_only(capsys):
    assert main(["compare", "--run", "gradient_ascent", "--steps", "6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    direct = compare_runs(DataModel.preset("syn-small"), eta_y=1.0, eta_z=5.0, steps=6,
                          run="gradient_ascent")
    assert doc["dt"] == 1.0 and doc["z_gap"] == direct.z_gap.tolist()
