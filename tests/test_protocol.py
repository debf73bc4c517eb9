"""The paper's training protocol (spec section 6): optimisers, initialisation,
the un-lumped decoder, count batches, the time map, and the paper's measures."""

import math

import numpy as np
import pytest

import odeflow
from odeflow import DataModel, RenamedWarning, ValidationError
from odeflow.analysis import measures
from odeflow.experiments import paper
from odeflow.training import batch as batch_mod
from odeflow.training.batch import LumpedLayout, stacked_loss_and_gradient
from odeflow.training.counts import (
    counts_loss_and_gradient,
    counts_of,
    sample_counts,
)
from odeflow.training.protocol import (
    Protocol,
    UnlumpedLayout,
    decoder_row_order,
    initial_state,
    train,
)


@pytest.fixture(scope="module")
def small():
    return DataModel.preset("syn-small")


def random_state(data, layout, seed=3):
    rng = np.random.default_rng(seed)
    Y_full, Z_full = initial_state(data, "uniform", rng)
    rows = decoder_row_order(data) if isinstance(layout, UnlumpedLayout) else None
    Y = (Y_full[rows] if rows is not None else Y_full[:layout.R])[:, data.active_tokens]
    Z = Z_full[data.query_tokens][:, data.active_tokens]
    return Y[None], Z[None], rng


def central_differences(loss, X, h=1e-6):
    out = np.empty_like(X)
    for idx in np.ndindex(*X.shape):
        up, down = X.copy(), X.copy()
        up[idx] += h
        down[idx] -= h
        out[idx] = (loss(up) - loss(down)) / (2 * h)
    return out


# ----------------------------------------------------------------- step 0
def test_zero_init_sgd_loss_at_step_0_is_ln_M(small):
    run = train(small, **paper.FIG4.replace(steps=3).options(), seeds=4)
    assert small.vocab_size == 34
    assert np.all(np.abs(run.loss[:, 0] - math.log(34)) < 1e-12)
    assert run.lumped and run.decoder_final.shape == (4, 3, 30)


# ----------------------------------------------------------------- count batches
def test_count_batch_equals_the_token_batch(small):
    """Loss and gradients through counts equal the token-based finite-T model."""
    layout = LumpedLayout(small)
    Y, Z, rng = random_state(small, layout)
    tokens = batch_mod.sample_batch(small, rng, 16, 24)
    stacked = batch_mod.Batch(tokens.classes[None], tokens.tokens[None])
    ref = stacked_loss_and_gradient(layout, Y, Z, stacked)
    got = counts_loss_and_gradient(layout, Y, Z, counts_of(stacked, layout.L))
    for a, b in zip(ref, got, strict=True):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-15)


def test_count_batches_follow_the_class_distribution(small):
    layout = LumpedLayout(small)
    b = sample_counts(layout, [np.random.default_rng(0)], 4000, 9)
    assert np.all(b.counts.sum(axis=-1) == 8)
    for k in range(small.num_classes):
        mean = b.counts[0][b.classes[0] == k].mean(axis=0) / 8
        assert np.allclose(mean, small.active_probs[k], atol=0.01)
        assert np.all(b.counts[0][b.classes[0] == k][:, small.active_probs[k] == 0] == 0)


@pytest.mark.parametrize("preset", ["syn-small", "shared-query-small"])
def test_unlumped_random_init_gradient_matches_central_differences(preset):
    data = DataModel.preset(preset)
    layout = UnlumpedLayout(data)
    Y, Z, rng = random_state(data, layout)
    b = sample_counts(layout, [rng], 8, 12)
    loss, gY, gZ = counts_loss_and_gradient(layout, Y, Z, b)
    fdY = central_differences(lambda X: counts_loss_and_gradient(layout, X, Z, b, False)[0][0],
                              Y)
    fdZ = central_differences(lambda X: counts_loss_and_gradient(layout, Y, X, b, False)[0][0],
                              Z)
    assert np.abs(gY - fdY).max() < 1e-8 * max(1.0, np.abs(gY).max())
    assert np.abs(gZ - fdZ).max() < 1e-8 * max(1.0, np.abs(gZ).max())
    assert np.abs(gY).max() > 1e-3 and np.abs(gZ).max() > 1e-4   # not a trivial zero


def reference_run(data, protocol, seed, steps, fd=True):
    """The protocol by hand: same draws, textbook updates, gradients by central
    differences of the sampled batch loss (``fd=True``) or the analytic ones."""
    layout = UnlumpedLayout(data)
    rng = np.random.default_rng(seed)
    Y_full, Z_full = initial_state(data, protocol.init, rng)
    Y = Y_full[decoder_row_order(data)][:, data.active_tokens][None]
    Z = Z_full[data.query_tokens][:, data.active_tokens][None]
    state = {"Y": [np.zeros_like(Y), np.zeros_like(Y)], "Z": [np.zeros_like(Z), np.zeros_like(Z)]}
    eta = {"Y": protocol.eta_y, "Z": protocol.eta_z}
    lam = protocol.weight_decay
    for k in range(1, steps + 1):
        b = sample_counts(layout, [rng], protocol.batch_size, protocol.seq_len)
        if fd:
            grads = {
                "Y": central_differences(
                    lambda X, Z=Z, b=b: counts_loss_and_gradient(layout, X, Z, b, False)[0][0],
                    Y),
                "Z": central_differences(
                    lambda X, Y=Y, b=b: counts_loss_and_gradient(layout, Y, X, b, False)[0][0],
                    Z)}
        else:
            _, gY, gZ = counts_loss_and_gradient(layout, Y, Z, b)
            grads = {"Y": gY, "Z": gZ}
        new = {}
        for name, theta in (("Y", Y), ("Z", Z)):
            g = grads[name] + lam * theta
            first, second = state[name]
            if protocol.optimizer == "sgd":
                first = protocol.momentum * first + g
                new[name] = theta - eta[name] * first
            else:
                b1, b2 = protocol.betas
                first = b1 * first + (1 - b1) * g
                second = b2 * second + (1 - b2) * g * g
                mhat, shat = first / (1 - b1 ** k), second / (1 - b2 ** k)
                new[name] = theta - eta[name] * mhat / (np.sqrt(shat) + protocol.eps)
            state[name] = [first, second]
        Y, Z = new["Y"], new["Z"]
    return Y[0], Z[0]


@pytest.mark.parametrize("optimizer, extra", [
    ("sgd", {"momentum": 0.9}),
    ("sgd", {"momentum": 0.5, "weight_decay": 0.1}),
    ("adam", {}),
    ("adam", {"weight_decay": 0.05}),
])
def test_optimisers_match_a_hand_written_reference_on_fd_gradients(small, optimizer, extra):
    protocol = Protocol(optimizer=optimizer, eta_y=0.7, eta_z=0.3, init="uniform",
                        batch_size=6, seq_len=10, steps=3, **extra)
    run = train(small, **protocol.options(), seeds=[5])
    # the update rules, exactly (same draws, analytic gradients)
    Y_ref, Z_ref = reference_run(small, protocol, 5, 3, fd=False)
    assert np.abs(run.decoder_final[0] - Y_ref).max() < 1e-12
    assert np.abs(run.z_active[0, -1] - Z_ref).max() < 1e-12
    # the gradients they are fed: central differences of the sampled batch loss.
    # Adam divides by sqrt(s) + eps, which turns a difference error delta on an entry
    # whose gradient is ~0 into a step error eta delta / (|g| + eps): hence its bound.
    Y_fd, Z_fd = reference_run(small, protocol, 5, 3)
    bound = 1e-7 if optimizer == "sgd" else 1e-5
    assert np.abs(run.decoder_final[0] - Y_fd).max() < bound
    assert np.abs(run.z_active[0, -1] - Z_fd).max() < bound
    moved = np.abs(run.decoder_final[0] - run.decoder_initial[0]).max()
    assert moved > 0.05   # the steps did something


def test_unlumped_equals_lumped_from_a_symmetric_start(small):
    for protocol in (paper.FIG4.replace(steps=20, batch_size=32, seq_len=32),
                     paper.FIG4.replace(optimizer="adam", eta_z=0.1, steps=20,
                                        weight_decay=0.01)):
        lumped = train(small, **protocol.options(), seeds=[0, 1])
        full = train(small, **protocol.options(), seeds=[0, 1], unlumped=True)
        assert lumped.lumped and not full.lumped
        for i in range(2):
            assert np.abs(lumped.final_decoder(i) - full.final_decoder(i)).max() < 1e-12
        assert np.abs(lumped.z_active - full.z_active).max() < 1e-12
        assert np.abs(lumped.loss - full.loss).max() < 1e-12


def test_ensemble_members_equal_single_runs(small):
    protocol = paper.FIG6.replace(steps=5, batch_size=16, seq_len=16)
    data = DataModel.preset("syn-medium-1")
    together = train(data, **protocol.options(), seeds=[3, 7])
    for i, seed in enumerate([3, 7]):
        alone = train(data, **protocol.options(), seeds=[seed])
        assert np.array_equal(together.z_active[i], alone.z_active[0])
        assert np.array_equal(together.decoder_final[i], alone.decoder_final[0])
        assert np.array_equal(together.loss[i], alone.loss[0])


def test_uniform_init_bounds_and_seeding(small):
    Y, Z = initial_state(small, "uniform", np.random.default_rng(0))
    bound = 1 / math.sqrt(34)
    assert np.abs(Y).max() <= bound and np.abs(Z).max() <= bound
    assert np.abs(Y).max() > 0.9 * bound and np.abs(Z).max() > 0.9 * bound
    again, _ = initial_state(small, "uniform", np.random.default_rng(0))
    assert np.array_equal(Y, again)
    run = train(small, start="uniform", steps=1, batch_size=4, seq_len=4, seeds=[0])
    assert np.allclose(run.initial_decoder(0), Y[:, small.active_tokens])
    assert np.allclose(run.initial_logits(0), Z[small.query_tokens])


# ----------------------------------------------------------------- time map
def test_time_map():
    """The warm-up map of spec section 6 against its definition as a sum, and its slope."""
    mu = 0.9
    k = np.arange(0, 201)
    t = Protocol(momentum=mu).flow_time(k)
    # the definition: t_k = sum_{j=1..k} (1 - mu^j) / (1 - mu), summed term by term
    by_sum = np.concatenate([[0.0], np.cumsum((1.0 - mu ** k[1:]) / (1.0 - mu))])
    assert np.allclose(t, by_sum, rtol=1e-13, atol=1e-12)
    assert t[1] == pytest.approx(1.0, abs=1e-12)
    assert t[10] == pytest.approx(41.381, abs=1e-3) and t[100] == pytest.approx(910.0, abs=0.01)
    # slope: t_{k+1} - t_k = (1 - mu^{k+1}) / (1 - mu), rising to 1 / (1 - mu) = 10
    slope = np.diff(t)
    assert np.all(np.diff(slope) > 0) and slope[0] == pytest.approx(1.0)
    assert slope[-1] == pytest.approx(10.0, rel=1e-8)
    assert t[200] - 200 / (1 - mu) == pytest.approx(-mu / (1 - mu) ** 2, rel=1e-8)
    # the same for a simulated heavy ball in a constant gradient (what the map means)
    v, theta, moved = 0.0, 0.0, []
    for _ in range(100):
        v = mu * v + 1.0
        theta += v
        moved.append(theta)
    assert np.allclose(moved, t[1:101], rtol=1e-12)
    # the inverse, for plot axes; mu = 0 and Adam: t = k
    assert np.allclose(Protocol(momentum=mu).step_of(t), k, atol=1e-9)
    assert np.allclose(Protocol(momentum=0.0).flow_time([0, 7]), [0, 7])
    assert np.allclose(Protocol(optimizer="adam").flow_time([3]), [3])
    assert "warm-up" in Protocol(momentum=mu).time_map


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, field", [
    ({"eta_y": -1.0}, "eta_y"),
    ({"eta_z": 0.0}, "eta_z"),
    ({"eta_z": float("nan")}, "eta_z"),
    ({"momentum": 1.0}, "momentum"),
    ({"momentum": -0.1}, "momentum"),
    ({"optimizer": "rmsprop"}, "optimizer"),
    ({"init": "normal"}, "init"),
    ({"weight_decay": -1e-3}, "weight_decay"),
    ({"betas": (0.9, 1.0)}, "betas[1]"),
    ({"betas": 0.9}, "betas"),
    ({"eps": 0.0}, "eps"),
    ({"batch_size": 0}, "batch_size"),
    ({"seq_len": 1}, "seq_len"),
    ({"steps": 2.5}, "steps"),
])
def test_bad_protocol_names_the_field(kwargs, field):
    with pytest.raises(ValidationError) as info:
        Protocol(**kwargs)
    assert info.value.field == field


def test_bad_train_arguments(small):
    with pytest.raises(ValidationError, match="^seeds"):
        train(small, steps=1, seeds=0)
    with pytest.raises(ValidationError, match="^protocol"), pytest.warns(RenamedWarning):
        train(small, protocol={"steps": 1})
    with pytest.raises(ValidationError, match="^unlumped"):
        train(small, start="uniform", steps=1, unlumped=False)
    with pytest.raises(ValidationError, match="^start"):
        train(small, start=np.zeros((34, 34)), steps=1)
    with pytest.raises(ValidationError, match="^sample_size"):
        train(small, steps=1, sample_size=10)
    with pytest.raises(ValidationError, match="^seed: "):
        train(small, steps=1, seeds=[1, 2], seed=4)


def test_protocol_options_are_the_run_and_old_forms_warn(small):
    """``train(data, **protocol.options())`` is the protocol's run; the old forms
    (positional protocol, ``protocol=``, ``record_every=``) give it too, warning."""
    protocol = Protocol(optimizer="adam", init="uniform", eta_y=0.5, eta_z=0.2, steps=4,
                        batch_size=4, seq_len=8, betas=(0.8, 0.99))
    new = train(small, **protocol.options(), seeds=[2, 3], record=2)
    assert new.protocol == protocol and list(new.steps) == [0, 2, 4]
    with pytest.warns(RenamedWarning) as record:
        old = train(small, protocol, [2, 3], 2)
    assert record[0].filename == __file__
    assert "positional arguments after data" in str(record[0].message)
    with pytest.warns(RenamedWarning) as record:
        kw = train(small, protocol=protocol, seeds=[2, 3], record_every=2)
    assert {str(w.message).split(" is now ")[0] for w in record} == {"'protocol'",
                                                                      "'record_every'"}
    for run in (old, kw):
        assert np.array_equal(run.z_active, new.z_active)
        assert np.array_equal(run.loss, new.loss) and np.array_equal(run.steps, new.steps)
    with pytest.warns(RenamedWarning):
        ends = train(small, protocol=protocol, record_every=None)
    assert list(ends.steps) == [0, 4]
    counted = train(small, **protocol.options(), seeds=2, seed=2)
    assert counted.seeds == [2, 3] and np.array_equal(counted.loss, new.loss)


# ----------------------------------------------------------------- measures
def test_distinct_entropy_and_recall(small):
    z0 = np.zeros((small.query_tokens.size, small.active_tokens.size))
    p = small.probs(32)[10:20]
    p = p / p.sum()
    H = measures.distinct_entropy(small, z0)
    assert H == pytest.approx(-np.sum(p * np.log(p)), rel=1e-14)
    # all attention on one distinct token of each class: entropy 0, recall 1/10 above 0.5
    z = z0.copy()
    z[:, [19, 29]] = 800.0
    assert measures.distinct_entropy(small, z) == pytest.approx(0.0, abs=1e-12)
    rec = measures.recall_curve(small, np.stack([z0, z]), [0.0, 0.05, 0.5])
    assert rec.shape == (2, 3)
    assert np.allclose(rec[1], [1.0, 0.1, 0.1])
    assert np.allclose(rec[0], [1.0, np.mean(p >= 0.05), 0.0])
    traj = odeflow.solve(small, flow="reduced", t_span=(0, 10.0), t_eval=[0.0, 10.0])
    from odeflow.plots import distinct_entropy as plotted
    assert np.allclose(measures.distinct_entropy(small, traj.z_active), plotted(traj),
                       rtol=1e-13)
    with pytest.raises(ValidationError, match="^z_active"):
        measures.distinct_entropy(small, np.zeros((3, 30)))


def test_fig4_small_budget_falls_and_levels_share_the_axis():
    exp = paper.fig4(seeds=3, steps=12)
    # the warm-up map (spec section 6): 1, 1 + 1.9, 1 + 1.9 + 2.71, ...
    assert np.allclose(exp.t[:4], [0.0, 1.0, 2.9, 5.61], rtol=1e-12)
    assert np.allclose(exp.t, paper.FIG4.flow_time(np.arange(13)))
    for level in ("E", "R", "T"):
        assert np.array_equal(exp.levels[level].t, exp.t)
        assert exp.level_loss(level)[0] == pytest.approx(math.log(34), abs=1e-12)
    # Level T runs at the protocol's sequence length with the documented sample size
    meta = exp.levels["T"].meta
    assert meta["seq_len"] == paper.FIG4.seq_len == 128
    assert meta["sample_size"] == paper.LEVEL_T_SAMPLES
    loss = exp.run.loss.mean(axis=0)
    assert loss[-1] < 0.1 * loss[0]


def test_fig6_small_budget_table():
    rows = paper.fig6_rows(seeds=2, steps=3, sizes=(1,), eta_zs=(0.5, 3.0), ratios=(1.0, 10.0))
    assert len(rows) == 4
    assert {r["eta_y"] for r in rows} == {0.5, 5.0, 3.0, 30.0}
    for r in rows:
        assert r["flow_time"] == pytest.approx(5.61)   # warm-up map: 1 + 1.9 + 2.71
        assert np.isfinite([r["sgd_mean"], r["sgd_std"], r["level_E"], r["level_R"],
                            r["level_T"]]).all()
    summary = paper.trend_summary(rows, "sgd_mean")
    assert summary[0]["preset"] == "syn-medium-1"
    assert 0.0 <= summary[0]["falls_with_eta_z"] <= 1.0


# ----------------------------------------------------------------- command line
def test_reproduce_fig6_small_budget_writes_the_cell_table(tmp_path, capsys):
    import csv

    from odeflow.cli import main

    # one of the four vocabulary sizes (the 64-cell table: test_reproduce_fig6_full_protocol)
    assert main(["reproduce", "fig6", "--seeds", "2", "--steps", "2", "--sizes", "1",
                 "--out", str(tmp_path), "--no-progress"]) == 0
    with open(tmp_path / "fig6.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and {r["preset"] for r in rows} == {"syn-medium-1"}
    assert main(["reproduce", "fig6", "--sizes", "2", "--out", str(tmp_path)]) == 2
    assert all(float(r["flow_time"]) == pytest.approx(2.9) for r in rows)  # 1 + 1.9
    assert all(np.isfinite(float(r[c])) for r in rows for c in ("sgd_mean", "level_E",
                                                                 "level_R"))
    # the heavy-ball flow ensembles from the seeds' own starts (issue 20), after the old columns
    names = list(rows[0])
    assert names[:11] == ["preset", "M", "eta_z", "ratio", "eta_y", "steps", "flow_time",
                          "seeds", "levels_from", "sgd_mean", "sgd_std"]
    assert all(np.isfinite(float(r[c])) for r in rows for c in (
        "optflow_T_mean", "optflow_T_std", "optflow_E_mean", "optflow_E_std"))
    for stem in ("fig6", "fig6_recall"):
        assert (tmp_path / f"{stem}.png").stat().st_size > 5000
    assert not list(tmp_path.glob(".*.tmp"))
    assert "wrote" in capsys.readouterr().out


def test_reproduce_fig4_and_fig5_small_budget(tmp_path):
    import csv

    from odeflow.cli import main

    for fig in ("fig4", "fig5"):
        assert main(["reproduce", fig, "--seeds", "2", "--steps", "4", "--out", str(tmp_path),
                     "--no-progress"]) == 0
        with open(tmp_path / f"{fig}.csv", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == (5 if fig == "fig4" else 10)
        assert float(rows[0]["loss_mean"]) == pytest.approx(math.log(34), abs=1e-12)
        assert (tmp_path / f"{fig}.png").stat().st_size > 5000
    assert main(["reproduce", "fig4", "--seeds", "0", "--out", str(tmp_path)]) == 2


def test_levels_from_the_runs_random_start():
    """same_start: each level starts where its seed's run starts (same entropy at t = 0)."""
    data = DataModel.preset("syn-medium-1")
    protocol = paper.FIG6.replace(steps=3, batch_size=16, seq_len=16)
    same = paper.experiment(data, protocol, seeds=2, same_start=True)
    zero = paper.experiment(data, protocol, seeds=2)
    for level in ("E", "R", "T"):
        assert same.level_entropy[level][0] == pytest.approx(same.entropy[:, 0].mean(),
                                                             abs=1e-12)
        assert zero.level_entropy[level][0] != pytest.approx(same.entropy[:, 0].mean(),
                                                             abs=1e-6)
    y0 = np.zeros((data.vocab_size, data.vocab_size))
    y0[:, data.active_tokens] = same.run.initial_decoder(0)
    for level in ("E", "T"):
        start = same.levels[level].decoder_at(0)[:, data.active_tokens]
        assert np.abs(start - y0[:, data.active_tokens]).max() < 1e-12
    assert same.levels["T"].meta["seq_len"] == protocol.seq_len == 16


@pytest.mark.slow
def test_reproduce_fig6_full_protocol(tmp_path):
    """The paper's Fig. 6 protocol in full: 64 cells, 10 seeds, 100 steps."""
    rows = paper.fig6_rows(seeds=10, steps=100)
    assert len(rows) == 64 and all(r["seeds"] == 10 for r in rows)
    assert all(r["flow_time"] == pytest.approx(910.0024, abs=1e-4) for r in rows)
    # the runs sharpen the attention in every cell
    assert all(r["sgd_mean"] < r["initial_mean"] for r in rows)
