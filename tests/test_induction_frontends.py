"""Front ends of the induction-head family: figures and ``odeflow reproduce induction``."""

from __future__ import annotations

import itertools

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from odeflow.errors import ValidationError  # noqa: E402
from odeflow.plots import induction as ihplots  # noqa: E402
from odeflow.training.induction import (  # noqa: E402
    EmpiricalInduction,
    initial_parameters,
    joint,
    sample_sequences,
    train_sample,
)
from tests.cli_helpers import cli, one_error_line  # noqa: E402


@pytest.fixture(scope="module")
def small_run():
    subsets = [s for k in range(3) for s in itertools.combinations(range(1, 4), k)]
    seqs = sample_sequences(200, 40, vocab_size=3, n_gram=3, alpha=0.1, seed=0)
    model = EmpiricalInduction(seqs, 3, subsets, loss="code")
    return train_sample(model, initial_parameters(model), joint(30))


def test_figures_draw_a_run(small_run):
    fig = ihplots.plot_subset_weights(small_run)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    # the stacked bands end at sum_S p_S = 1 at every recorded time
    top = max(coll.get_paths()[0].vertices[:, 1].max() for coll in ax.collections)
    assert top == pytest.approx(1.0)
    fig = ihplots.plot_classifier_weight({"run": small_run})
    (line,) = fig.axes[0].get_lines()
    np.testing.assert_allclose(line.get_ydata(), small_run.a[small_run.t > 0])
    fig = ihplots.plot_copier_logits(small_run)
    assert len(fig.axes) == 3                                # two maps and a colour bar
    fig = ihplots.plot_loss({"flow": small_run, "GD run": small_run})
    assert len(fig.axes[0].get_lines()) == 2
    fig = ihplots.plot_run_beside_flow(small_run, small_run)
    assert len(fig.axes) == 7                                # six panels and a colour bar


def test_figures_refuse_what_is_not_a_trajectory(small_run):
    with pytest.raises(ValidationError, match="trajectory"):
        ihplots.plot_subset_weights(np.zeros(3))
    with pytest.raises(ValidationError, match="run"):
        ihplots.plot_run_beside_flow(object(), small_run)
    with pytest.raises(ValidationError, match="trajectories"):
        ihplots.plot_loss({})


@pytest.mark.parametrize("argv, line", [
    (["--steps", "0"], "--steps: must be >= 1, got 0"),
    (["--seeds", "-2"], "--seeds: must be >= 1, got -2"),
    (["--same-start"], "--same-start: only for fig6"),
])
def test_reproduce_induction_refuses_bad_flags_before_training(capsys, monkeypatch, argv,
                                                               line):
    from odeflow.training.induction import beside_flow as induction_flow

    monkeypatch.setattr(induction_flow, "compare", lambda *a, **k: pytest.fail("trained"))
    code, out, err = cli(capsys, "reproduce", "induction", *argv)
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"odeflow: error: {line}")


def test_reproduce_induction_out_that_is_a_file_is_refused(tmp_path, capsys, monkeypatch):
    from odeflow.training.induction import beside_flow as induction_flow

    monkeypatch.setattr(induction_flow, "compare", lambda *a, **k: pytest.fail("trained"))
    (tmp_path / "f").write_text("x")
    code, _, err = cli(capsys, "reproduce", "induction", "--steps", "1", "--seeds", "1",
                       "--out", tmp_path / "f")
    assert code == 2 and one_error_line(err).startswith("odeflow: error: --out: ")


def test_reproduce_induction_writes_run_beside_flow(tmp_path, capsys, monkeypatch):
    """The command's files and table, on ih-point with 300 sequences per seed (the
    ih-paper flow takes about a minute even to t = 5 on a busy machine)."""
    from functools import partial

    from odeflow import InductionData
    from odeflow.training.induction import beside_flow

    monkeypatch.setattr(beside_flow, "compare",
                        partial(beside_flow.compare, InductionData.preset("ih-point"),
                                sample_size=300))
    out = tmp_path / "rep"
    code, stdout, err = cli(capsys, "reproduce", "induction", "--steps", "5", "--seeds", "2",
                            "--out", out, "--no-progress")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["induction.csv", "induction.png",
                                                     "induction_agreement.csv",
                                                     "induction_worst.csv"]
    import csv

    with open(out / "induction.csv", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in table] == [0, 1, 2, 3, 4, 5]
    first = table[0]
    assert float(first["a_run"]) == pytest.approx(0.01) == float(first["a_flow"])  # init
    assert float(first["loss_run"]) > 0 and float(first["loss_flow"]) > 0
    assert {"p_run_S_12", "p_flow_S_12", "p_run_S_", "a_run_sd"} <= set(first)
    with open(out / "induction_agreement.csv", encoding="utf-8") as fh:
        goal = list(csv.DictReader(fh))
    assert [int(r["t"]) for r in goal] == [5]
    assert "goal (a within 15%" in stdout
    with open(out / "induction_worst.csv", encoding="utf-8") as fh:
        worst = list(csv.DictReader(fh))
    assert [r["level"] for r in worst] == ["population", "population at L", "finite_l"]
    assert all(int(r["times"]) == 1 and float(r["t_from"]) == 5.0 for r in worst)
    assert "every recorded step from t = 5 to 5 (1 step)" in stdout
    # again into the same folder, short of the first goal time: the goal tables of the
    # run above would describe another run, so they go
    code, stdout, err = cli(capsys, "reproduce", "induction", "--steps", "2", "--seeds", "1",
                            "--out", out, "--no-progress")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["induction.csv", "induction.png"]
    assert stdout.count("an earlier run's") == 2


def test_plot_induction_figures_from_the_cli(tmp_path, capsys):
    for name in ("ih-subsets", "ih-copier"):
        target = tmp_path / f"{name}.png"
        code, _, err = cli(capsys, "plot", name, "--preset", "ih-point", "--t-end", "5",
                           "--out", target)
        assert code == 0, err
        assert target.stat().st_size > 5000
    code, _, err = cli(capsys, "plot", "ih-loss", "--preset", "syn-small", "--out",
                       tmp_path / "x.png")
    assert code == 2 and "data" in one_error_line(err)


def _toy_comparison():
    """A comparison of one run and a flow whose ``a`` differs by 10% and loss by 0.005."""
    from types import SimpleNamespace

    from odeflow.training.induction import Comparison

    steps = np.array([0, 5, 10])
    run = SimpleNamespace(steps=steps, a=np.array([0.01, 0.11, 0.22]),
                          loss=np.array([1.0, 0.9, 0.8]))
    flow = SimpleNamespace(a=np.array([0.01, 0.1, 0.2]), loss=np.array([1.0, 0.905, 0.805]))
    return Comparison([run], flow, [0], "code", 10, 100)


def test_agreement_criterion_is_a_parameter_with_the_documented_default():
    from odeflow.training import induction

    comp = _toy_comparison()
    default = induction.agreement(comp)
    assert [r["t"] for r in default] == [5, 10]
    assert all(r["a_ok"] and r["loss_ok"] for r in default)        # 10% < 15%, 0.005 < 0.01
    strict = induction.agreement(comp, a_tolerance=0.05, loss_tolerance=0.001)
    assert not any(r["a_ok"] or r["loss_ok"] for r in strict)
    assert [r["a_rel_err"] for r in strict] == [r["a_rel_err"] for r in default]
    worst = induction.worst_agreement(comp, 5, 10, a_tolerance=0.05, loss_tolerance=0.001)
    assert (worst[0]["a_misses"], worst[0]["loss_misses"]) == (2, 2)
    assert induction.worst_agreement(comp, 5, 10)[0]["a_misses"] == 0


def test_the_reproduction_reads_its_goal_from_the_experiments_package(monkeypatch):
    """``odeflow.experiments.induction.reproduce``: the goal tables of the comparison at its
    goal times; none over the interval when the run stops before the first."""
    from odeflow.experiments import induction as experiment
    from odeflow.training.induction import beside_flow

    comp = _toy_comparison()
    monkeypatch.setattr(beside_flow, "compare", lambda **k: comp)
    monkeypatch.setattr(beside_flow, "rows", lambda c: ["row"])
    rep = experiment.reproduce(seeds=1, steps=10, progress=False)
    assert rep.comparison is comp and rep.table == ["row"]
    assert [r["t"] for r in rep.goal] == [5, 10] and rep.worst[0]["times"] == 2
    monkeypatch.setattr(experiment, "GOAL_TIMES", (20, 100))
    rep = experiment.reproduce(seeds=1, steps=10, progress=False)
    assert rep.goal == [] and rep.worst == []
