"""The two-stage family's finite-N level, its training beside the flow and the reproduction."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import odeflow
from odeflow.data.two_stage import TwoStageData
from odeflow.errors import SolveError, ValidationError
from odeflow.fields.optimizers import Adam, Momentum
from odeflow.fields.two_stage.finite_n import (
    FiniteSampleFlow,
    accuracy_by_kind,
    attention_output,
    block_matrix,
    loss_and_gradient,
    margin_loss,
    sample_prompts,
)
from odeflow.training.two_stage import held_out_scores, log_spaced_steps, train, train_run

DATA = TwoStageData()


def generic_state(rng, data=DATA):
    """A start away from the ReLU's kinks on a small sample: random, not diagonal."""
    return 0.5 * rng.standard_normal(data.d_p ** 2 + data.d_q ** 2)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_finite_n_gradient_equals_finite_differences(loss):
    data = TwoStageData(loss=loss, d_p=2, d_q=3, w_q=(1.0, -2.0, 0.5))
    field = FiniteSampleFlow(data, seq_len=7, sample_size=40, seed=3)
    y = generic_state(np.random.default_rng(1), data)
    grad = -field.gradient(y)
    h = 1e-6
    fd = np.array([(field.loss(y + h * e) - field.loss(y - h * e)) / (2 * h)
                   for e in np.eye(y.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(field.rhs(0.0, y), field.rate_vector * field.gradient(y))
    assert np.all(field.rate_vector == 1.0)


def test_finite_n_gradient_is_the_diagonal_blocks_of_the_full_gradient():
    field = FiniteSampleFlow(DATA, seq_len=5, sample_size=30, seed=0)
    W_P, W_Q = field.split(generic_state(np.random.default_rng(2)))
    W = block_matrix(W_P, W_Q)

    def full_loss(M):
        f, _ = attention_output(field.prompts, M)
        return float(np.mean(margin_loss(field.prompts.label * f, DATA.loss)[0]))

    h = 1e-6
    full = np.zeros_like(W)
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            E = np.zeros_like(W)
            E[i, j] = h
            full[i, j] = (full_loss(W + E) - full_loss(W - E)) / (2 * h)
    _, g_p, g_q = loss_and_gradient(field.prompts, W_P, W_Q, DATA.loss)
    np.testing.assert_allclose(g_p, full[:2, :2], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(g_q, full[2:, 2:], rtol=1e-6, atol=1e-9)
    assert np.abs(full[:2, 2:]).max() > 1e-4  # the dropped blocks are not zero


def test_finite_n_start_options_and_errors():
    sigma = FiniteSampleFlow(DATA, seq_len=4, sample_size=3).initial_state()
    np.testing.assert_array_equal(sigma, [0.01, 0, 0, 0.01, 0.01, 0, 0, 0.01])
    pair = (np.arange(4.0).reshape(2, 2), -np.eye(2))
    W = block_matrix(*pair)
    a = FiniteSampleFlow(DATA, seq_len=4, sample_size=3, start=pair).initial_state()
    b = FiniteSampleFlow(DATA, seq_len=4, sample_size=3, start=W).initial_state()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[:4].reshape(2, 2), pair[0])
    W[0, 3] = 1.0
    with pytest.raises(ValidationError, match="start"):
        FiniteSampleFlow(DATA, start=W)
    with pytest.raises(ValidationError, match="start"):
        FiniteSampleFlow(DATA, start=np.eye(3))
    with pytest.raises(ValidationError, match="start"):
        FiniteSampleFlow(DATA, start=(np.eye(2), np.full((2, 2), np.nan)))
    for name, bad in (("seq_len", 0), ("sample_size", -1), ("seed", -2), ("seq_len", 2.5)):
        with pytest.raises(ValidationError, match=name):
            FiniteSampleFlow(DATA, **{name: bad})
    with pytest.raises(ValidationError, match="data"):
        FiniteSampleFlow("ts-default")


def test_finite_n_sample_is_seeded():
    a, b = (FiniteSampleFlow(DATA, seq_len=6, sample_size=20, seed=s) for s in (5, 5))
    c = FiniteSampleFlow(DATA, seq_len=6, sample_size=20, seed=6)
    np.testing.assert_array_equal(a.prompts.x, b.prompts.x)
    assert not np.array_equal(a.prompts.x, c.prompts.x)
    assert a.prompts.x.shape == (20, 6, 4) and a.prompts.query.shape == (20, 4)
    assert set(np.unique(a.prompts.y)) <= {-1.0, 1.0}


def test_accuracy_by_kind_reads_the_sign_of_f():
    rng = np.random.default_rng(0)
    prompts = sample_prompts(DATA, 300, 16, rng)
    W = block_matrix(np.eye(2), np.eye(2))
    acc = accuracy_by_kind(prompts, W)
    f, _ = attention_output(prompts, W)
    for k, name in enumerate(("p_only", "q_only", "both")):
        mask = prompts.kind == k
        assert acc[name] == pytest.approx(np.mean(prompts.label[mask] * f[mask] > 0))
    flipped = accuracy_by_kind(prompts, -W)
    assert flipped["both"] < 0.5 < acc["both"]


def test_full_batch_training_is_the_euler_scheme_of_the_finite_n_level():
    eta, steps = 0.3, 7
    run = train_run(DATA, steps, eta, seq_len=8, batch_size=50, sample="fixed", seed=4,
                    held_out=0, record=range(steps + 1))
    field = FiniteSampleFlow(DATA, seq_len=8, sample_size=50, seed=4)
    y = field.initial_state()
    for k in range(steps):
        assert run.train_loss[k] == pytest.approx(field.loss(y), rel=1e-12)
        y = y + eta * field.rhs(0.0, y)
    np.testing.assert_allclose(np.concatenate([run.W_P[-1].ravel(), run.W_Q[-1].ravel()]),
                               y, rtol=1e-12)
    np.testing.assert_allclose(run.t, eta * np.arange(steps + 1))


def test_training_is_reproducible_and_seeds_differ():
    kw = dict(seq_len=8, batch_size=20, held_out=50, record=[0, 3, 10])
    a, b = train_run(DATA, 10, 0.2, seed=1, **kw), train_run(DATA, 10, 0.2, seed=1, **kw)
    c = train_run(DATA, 10, 0.2, seed=2, **kw)
    np.testing.assert_array_equal(a.W_Q, b.W_Q)
    np.testing.assert_array_equal(a.accuracy_q_only, b.accuracy_q_only)
    assert not np.array_equal(a.W_Q[-1], c.W_Q[-1])
    assert a.steps.tolist() == [0, 3, 10] and a.accuracy_p_only.shape == (3,)
    assert a.meta["seed"] == 1 and a.meta["optimizer"] == {"kind": "gradient"}
    assert np.all(np.diff(a.singular_values_p, axis=1) <= 0)


def test_training_with_momentum_and_adam():
    kw = dict(seq_len=8, batch_size=20, held_out=0, seed=0, record=[0, 5, 20])
    gd = train_run(DATA, 20, 0.1, **kw)
    still = train_run(DATA, 20, 0.1, optimizer=Momentum(0.0), **kw)
    np.testing.assert_allclose(still.W_P, gd.W_P, rtol=1e-12)
    heavy = train_run(DATA, 20, 0.1, optimizer=Momentum(0.5), **kw)
    np.testing.assert_allclose(heavy.t, 0.1 * Momentum(0.5).flow_time([0, 5, 20]))
    assert not np.allclose(heavy.W_P[-1], gd.W_P[-1])
    adam = train_run(DATA, 20, 0.01, optimizer=Adam(), **kw)
    assert adam.meta["time_map"] == "eta * k" and np.all(np.isfinite(adam.W_Q))
    with pytest.raises(ValidationError, match="optimizer"):
        train_run(DATA, 5, 0.1, optimizer="sgd", **{**kw, "record": None})


def test_training_refuses_bad_input_and_reports_divergence():
    for name, kw in (("eta", {"eta": -1.0}), ("steps", {"steps": 0}),
                     ("batch_size", {"batch_size": 0}), ("sample", {"sample": "stale"}),
                     ("record", {"record": [0, 99]}), ("seed", {"seed": -1})):
        args = {"steps": 5, "eta": 0.1, "seq_len": 4, "held_out": 0, **kw}
        with pytest.raises(ValidationError, match=name):
            train(DATA, **args)
    with pytest.raises(SolveError, match="eta"):
        train_run(TwoStageData(loss="squared"), 60, 50.0, seq_len=8, batch_size=20, held_out=0)


def test_sample_size_is_taken_with_a_fixed_sample_only():
    """sample_size is the fixed training set's size: with the default fresh prompts it is
    refused naming it (it was dropped), in train, train_run and odeflow.train."""
    kw = dict(steps=3, eta=0.2, seq_len=4, batch_size=5, held_out=0, progress=False)
    for call in (train, odeflow.train, lambda data, **k: train_run(data, **k)):
        with pytest.raises(ValidationError, match="^sample_size: .*sample='fixed'"):
            call(DATA, sample_size=10, **kw)
    fixed = train(DATA, sample="fixed", sample_size=10, **kw)
    assert fixed[0].meta["sample_size"] == 10
    assert train(DATA, **kw)[0].meta["sample_size"] is None


def test_held_out_scores_of_many_weights_are_those_of_each():
    rng = np.random.default_rng(0)
    W_P = rng.standard_normal((3, 2, 2))
    W_Q = rng.standard_normal((3, 2, 2))
    together = held_out_scores(DATA, W_P, W_Q, seq_len=8, count=500, seed=9)
    alone = held_out_scores(DATA, W_P[1:2], W_Q[1:2], seq_len=8, count=500, seed=9)
    for key, value in alone.items():
        assert together[key][1] == pytest.approx(value[0], rel=1e-12)
    kinds = ("p_only", "q_only", "both")
    mix = sum(w * together[f"accuracy_{k}"] for w, k in zip((0.2, 0.2, 0.6), kinds, strict=True))
    np.testing.assert_allclose(together["accuracy"], mix)
    right = held_out_scores(DATA, np.eye(2)[None], np.eye(2)[None], 8, 500, 9)
    wrong = held_out_scores(DATA, -np.eye(2)[None], -np.eye(2)[None], 8, 500, 9)
    assert right["accuracy_both"][0] > 0.95 and wrong["accuracy_both"][0] < 0.05


def test_log_spaced_steps():
    marks = log_spaced_steps(1000, 40)
    assert marks[0] == 0 and marks[1] == 1 and marks[-1] == 1000
    assert np.all(np.diff(marks) > 0) and marks.size >= 30


def test_finite_n_trajectory_is_scored_by_the_population_scorer():
    from scipy.integrate import solve_ivp

    from odeflow.fields.two_stage.scoring import score
    from odeflow.results.two_stage import TwoStageTrajectory

    field = FiniteSampleFlow(DATA, seq_len=16, sample_size=200, seed=1)
    t = np.array([0.0, 0.5, 2.0, 8.0])
    sol = solve_ivp(field.rhs, (0.0, 8.0), field.initial_state(), t_eval=t, rtol=1e-8,
                    atol=1e-10)
    traj = field.trajectory(sol.t, sol.y.T, {})
    assert isinstance(traj, TwoStageTrajectory)
    assert traj.meta["flow"] == "finite_n" and traj.meta["seq_len"] == 16
    ref = score(DATA, traj.W_P[2], traj.W_Q[2])
    assert traj.accuracy_q_only[2] == pytest.approx(ref["accuracy_q_only"])
    losses = [field.loss(y) for y in sol.y.T]
    assert np.all(np.diff(losses) <= 1e-12)  # a gradient flow descends its loss


def test_finite_n_gradient_tends_to_the_population_gradient():
    from odeflow.fields.two_stage.population import PopulationFlow

    y = np.concatenate([np.diag([0.4, 0.1]).ravel(), np.diag([0.2, 0.3]).ravel()])
    population = PopulationFlow(DATA).gradient(y)
    errors = []
    for n in (4, 128):
        field = FiniteSampleFlow(DATA, seq_len=n, sample_size=4000, seed=0)
        errors.append(np.linalg.norm(field.gradient(y) - population))
    assert errors[1] < 0.1 * np.linalg.norm(population)
    assert errors[1] < 0.5 * errors[0]


def test_measured_stages_reads_the_losses():
    from odeflow.experiments.two_stage import measured_stages

    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    lp = np.array([1.0, 0.5, 0.05, 0.0, 0.02, 0.03])
    lq = np.array([0.7, 0.8, 0.75, 0.71, 0.69, 0.5])
    out = measured_stages(t, lp, lq, sv_p=[1, 2, 3, 3, 3, 3], sv_q=[0, 1, 2, 3, 4, 5])
    t_p = 1.0 + 0.4 / 0.45  # 90% of the drop (to 0.1) between t = 1 and 2
    t_q = 3.0 + 0.01 / 0.02  # below 0.7 between t = 3 and 4
    assert out["t_P"] == pytest.approx(t_p) and out["t_Q"] == pytest.approx(t_q)
    assert out["ratio"] == pytest.approx(t_q / t_p)
    assert (out["i_P"], out["t_cross"]) == (2, 4.0)
    assert measured_stages(t, lp, lq + np.arange(6))["t_Q"] == np.inf
    with pytest.raises(ValidationError, match="t"):
        measured_stages(t[1:], lp[1:], lq[1:])


def test_reproduction_writes_its_files(tmp_path):
    from odeflow.experiments.two_stage import OUTPUTS, run

    rep = run(tmp_path / "out", seeds=2, steps=40, eta=0.25, seq_len=16, sample_size=100,
              record=log_spaced_steps(40, 12), held_out=400, flow_points=15, progress=False)
    assert sorted(p.name for p in rep.files) == sorted(OUTPUTS)
    with open(tmp_path / "out" / "two_stage.csv") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0])[:7] == ["t", "flow_acc_p_only", "flow_acc_q_only",
                                  "run_acc_p_only_mean", "run_acc_q_only_mean",
                                  "run_acc_p_only_std", "run_acc_q_only_std"]
    t = [float(r["t"]) for r in table]
    assert t[0] == 0.0 and t[-1] == pytest.approx(10.0) and len(t) >= 10
    for r in table:
        assert abs(float(r["flow_acc_q_only"]) - float(r["run_acc_q_only_mean"])) < 0.15
    with open(tmp_path / "out" / "rank_truncation.csv") as fh:
        cut = list(csv.DictReader(fh))
    assert [r["checkpoint"] for r in cut] == ["early"] * 4 + ["late"] * 4
    assert [int(r["rank_kept"]) for r in cut] == [1, 2, 3, 4] * 2
    full = [r for r in cut if r["checkpoint"] == "late" and r["rank_kept"] == "4"][0]
    assert float(full["acc_q_only"]) == pytest.approx(
        rep.comparison.flow_all.accuracy_q_only[-1])
    assert float(full["run_t"]) == pytest.approx(10.0)
    assert float(full["run_acc_q_only_mean"]) == pytest.approx(
        rep.comparison.run_mean("accuracy_q_only")[-1])
    with open(tmp_path / "out" / "stages.csv") as fh:
        stages = list(csv.DictReader(fh))
    assert [r["source"] for r in stages] == ["flow", "runs", "derived"]
    assert 0 < float(stages[0]["t_P"]) < float(stages[0]["t_Q"])
    assert (tmp_path / "out" / "two_stage.png").stat().st_size > 10_000


def test_compare_runs_beside_the_flow():
    from odeflow.training.two_stage import compare

    kw = dict(steps=10, eta=0.2, seq_len=8, batch_size=50, held_out=300,
              record=log_spaced_steps(10, 6), progress=False)
    comp = compare(DATA, seeds=[3, 4], flow_times=[0.05, 1.5], **kw)
    np.testing.assert_allclose(comp.flow.t, comp.t)
    assert {0.05, 1.5} <= set(comp.flow_all.t.tolist()) and comp.t[-1] == pytest.approx(2.0)
    assert [r.meta["seed"] for r in comp.runs] == [3, 4]
    mean = comp.run_mean("accuracy_q_only")
    assert mean.shape == comp.t.shape
    gaps = comp.gaps()
    j = int(np.argmax(np.abs(mean - comp.flow.accuracy_q_only)))
    assert gaps["q_only"]["gap"] == pytest.approx(abs(mean[j] - comp.flow.accuracy_q_only[j]))
    row = comp.rows()[-1]
    assert row["flow_acc_q_only"] == comp.flow.accuracy_q_only[-1]
    assert row["run_acc_q_only_std"] == pytest.approx(comp.run_std("accuracy_q_only")[-1])
    again = compare(DATA, seeds=[3, 4], flow=comp.flow_all, **kw)
    np.testing.assert_array_equal(again.flow.W_Q, comp.flow.W_Q)
    np.testing.assert_array_equal(again.run_mean("W_Q"), comp.run_mean("W_Q"))
    with pytest.raises(ValidationError, match="flow_times"):
        compare(DATA, seeds=1, flow_times=[5.0], **kw)
    with pytest.raises(ValidationError, match="flow"):
        compare(DATA, seeds=1, flow=comp.flow_all, **{**kw, "eta": 0.1})


def test_plots_refuse_what_they_cannot_draw():
    from types import SimpleNamespace

    from odeflow.plots.two_stage import plot_accuracy, plot_rank_truncation

    with pytest.raises(ValidationError, match="rows"):
        plot_rank_truncation([])
    flat = SimpleNamespace(t=np.zeros(2), **{f"accuracy_{k}": np.ones(2)
                                             for k in ("p_only", "q_only", "both")})
    with pytest.raises(ValidationError, match="t"):
        plot_accuracy(flat)
    rows = [{"checkpoint": c, "t": 1.0, "rank_kept": r, "acc_p_only": 1.0, "acc_q_only": 0.5,
             "acc_both": 1.0} for c in ("early", "late") for r in (1, 2)]
    fig, axes = plot_rank_truncation(rows)
    assert len(axes) == 2 and len(axes[0].lines) == 3 + 1  # three kinds and chance
