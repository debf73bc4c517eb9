"""Minibatch SGD on sampled finite-T sequences (spec section 6)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odeflow import Adam, DataModel, Momentum, SequenceClass, SolveError, ValidationError
from odeflow.analysis.compare import gap_table
from odeflow.training import (
    Batch,
    batch_loss,
    batch_loss_gradient,
    sample_batch,
    sgd_ensemble,
    train_sgd,
)
from odeflow.training.batch import _alias_table

# Learning rates with which the logits move within a few hundred steps (range ~0.5).
ETA_Y, ETA_Z = 1.0, 5.0


@pytest.fixture(scope="module")
def small():
    return DataModel.preset("shared-query-small")


def _random_state(data, rng, scale=0.5):
    K, M, L = data.num_classes, data.vocab_size, data.active_tokens.size
    R = K + (1 if M > K else 0)
    return (scale * rng.standard_normal((R, L)),
            scale * rng.standard_normal((data.query_tokens.size, L)))


def _naive_loss(data, Y_full, Z_full, batch):
    """Un-lumped reference: full M x M parameters, one sequence at a time, by positions."""
    total = 0.0
    for k, toks in zip(batch.classes, batch.tokens, strict=True):
        cls = data.classes[k]
        x = data.active_tokens[toks]
        a = Z_full[cls.query_token, x]
        b = np.exp(a - a.max())
        b /= b.sum()
        f = np.zeros(data.vocab_size)
        np.add.at(f, x, b)
        u = Y_full @ (f / np.linalg.norm(f))
        total += np.log(np.sum(np.exp(u - u.max()))) + u.max() - u[cls.next_token]
    return total / len(batch.classes)


def _two_queries():
    """Two query tokens, M > K: exercises the per-query sums and the shared row."""
    return DataModel(12, [SequenceClass(5, 0, {1: 0.3, 2: 0.3, 3: 0.4}),
                          SequenceClass(6, 0, {3: 0.5, 4: 0.5}),
                          SequenceClass(7, 9, {2: 0.2, 8: 0.8})])


def _unlump(data, Y, Z):
    M, K = data.vocab_size, data.num_classes
    Y_full = np.zeros((M, M))
    Y_full[:, data.active_tokens] = Y[K]
    Y_full[np.ix_(data.next_tokens, data.active_tokens)] = Y[:K]
    Z_full = np.zeros((M, M))
    Z_full[np.ix_(data.query_tokens, data.active_tokens)] = Z
    return Y_full, Z_full


# ----------------------------------------------------------------- sampling
def test_sampler_draws_classes_by_weight_and_tokens_from_their_class():
    data = DataModel(8, [SequenceClass(6, 7, {0: 0.5, 2: 0.3, 3: 0.2}),
                         SequenceClass(5, 7, {1: 0.25, 3: 0.75})], weights=[0.3, 0.7])
    batch = sample_batch(data, np.random.default_rng(3), 40000, 6)
    assert batch.classes.shape == (40000,) and batch.tokens.shape == (40000, 5)
    assert abs(np.mean(batch.classes == 0) - 0.3) < 0.01
    for k in range(2):
        toks = batch.tokens[batch.classes == k].ravel()
        freq = np.bincount(toks, minlength=data.active_tokens.size) / toks.size
        assert np.all(freq[data.active_probs[k] == 0] == 0)  # never outside the support
        np.testing.assert_allclose(freq, data.active_probs[k], atol=0.01)


@given(st.lists(st.sampled_from([0.0, 0.1, 1.0, 2.5, 7.0, 1e-9]), min_size=1, max_size=40)
       .filter(lambda w: sum(w) > 0))
def test_alias_table_reproduces_the_distribution(weights):
    p = np.asarray(weights) / np.sum(weights)
    keep, other = _alias_table(p)
    L = p.size
    implied = (keep + np.bincount(other, weights=1.0 - keep, minlength=L)) / L
    np.testing.assert_allclose(implied, p, rtol=1e-9, atol=1e-15)
    assert np.all(keep[p == 0] == 0) and np.all(p[other] > 0)


# ----------------------------------------------------- loss and its gradient
@pytest.mark.parametrize("model", ["shared-query-small", "two-queries"])
def test_lumped_batch_loss_equals_the_unlumped_model(model):
    data = DataModel.preset(model) if model == "shared-query-small" else _two_queries()
    rng = np.random.default_rng(0)
    Y, Z = _random_state(data, rng)
    batch = sample_batch(data, rng, 6, 9)
    Y_full, Z_full = _unlump(data, Y, Z)
    assert batch_loss(data, Y, Z, batch) == pytest.approx(
        _naive_loss(data, Y_full, Z_full, batch), rel=1e-12)


@pytest.mark.parametrize("model", ["shared-query-small", "two-queries"])
def test_gradient_matches_central_differences_of_the_batch_loss(model):
    data = DataModel.preset(model) if model == "shared-query-small" else _two_queries()
    rng = np.random.default_rng(1)
    Y, Z = _random_state(data, rng)
    batch = sample_batch(data, rng, 6, 7)
    grad_Y, grad_Z = batch_loss_gradient(data, Y, Z, batch)
    K, M = data.num_classes, data.vocab_size
    eps = 1e-6

    def central(array, index, loss_of):
        plus, minus = array.copy(), array.copy()
        plus[index] += eps
        minus[index] -= eps
        return (loss_of(plus) - loss_of(minus)) / (2 * eps)

    for index in np.ndindex(Y.shape):
        fd = central(Y, index, lambda A: batch_loss(data, A, Z, batch))
        if index[0] == K:  # the shared row stands for M - K tied rows
            fd /= M - K
        assert grad_Y[index] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    for index in np.ndindex(Z.shape):
        fd = central(Z, index, lambda A: batch_loss(data, Y, A, batch))
        assert grad_Z[index] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_shared_row_gradient_is_that_of_each_unlumped_row(small):
    rng = np.random.default_rng(2)
    Y, Z = _random_state(small, rng)
    batch = sample_batch(small, rng, 4, 5)
    grad_Y, _ = batch_loss_gradient(small, Y, Z, batch)
    Y_full, Z_full = _unlump(small, Y, Z)
    other, col = 17, 4  # an output that is never a next token; an active token
    eps = 1e-6
    plus, minus = Y_full.copy(), Y_full.copy()
    plus[other, small.active_tokens[col]] += eps
    minus[other, small.active_tokens[col]] -= eps
    fd = (_naive_loss(small, plus, Z_full, batch) - _naive_loss(small, minus, Z_full, batch)) \
        / (2 * eps)
    assert grad_Y[-1, col] == pytest.approx(fd, rel=1e-6)


def test_batch_functions_check_shapes(small):
    batch = sample_batch(small, np.random.default_rng(0), 2, 3)
    Y, Z = _random_state(small, np.random.default_rng(0))
    with pytest.raises(ValidationError, match="decoder"):
        batch_loss(small, Y[:-1], Z, batch)
    with pytest.raises(ValidationError, match="logits"):
        batch_loss_gradient(small, Y, Z.T, batch)
    with pytest.raises(ValidationError, match="batch"):
        batch_loss(small, Y, Z, Batch(batch.classes, batch.tokens[0]))


# --------------------------------------------------------------- training
def test_same_seed_same_trajectory(small):
    a = train_sgd(small, ETA_Y, ETA_Z, 60, 8, 16, seed=5, record=10)
    b = train_sgd(small, ETA_Y, ETA_Z, 60, 8, 16, seed=5, record=10)
    c = train_sgd(small, ETA_Y, ETA_Z, 60, 8, 16, seed=6, record=10)
    np.testing.assert_array_equal(a.z_active, b.z_active)
    np.testing.assert_array_equal(a.decoder_lumped, b.decoder_lumped)
    assert not np.array_equal(a.z_active, c.z_active)
    assert a.flow == "sgd"
    assert {k: a.meta[k] for k in ("seed", "batch_size", "seq_len")} == \
        {"seed": 5, "batch_size": 8, "seq_len": 16}


def test_ensemble_members_equal_single_runs(small):
    ens = sgd_ensemble(small, ETA_Y, ETA_Z, 40, 8, 16, seeds=[3, 9], record=10)
    assert ens.seeds == [3, 9]
    for tr in ens.trajectories:
        alone = train_sgd(small, ETA_Y, ETA_Z, 40, 8, 16, seed=tr.meta["seed"], record=10)
        np.testing.assert_allclose(tr.z_active, alone.z_active, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ens.mean_logits_active,
                               np.mean([tr.z_active for tr in ens.trajectories], axis=0))
    f = np.mean([tr.attention(1) for tr in ens.trajectories], axis=0)
    np.testing.assert_allclose(ens.attention(1), f, atol=1e-15)
    assert ens.mean_trajectory().flow == "sgd_mean"


def test_momentum_changes_the_run_and_stays_finite(small):
    plain = train_sgd(small, ETA_Y, ETA_Z, 50, 8, 16, seed=1, record=50)
    heavy = train_sgd(small, ETA_Y, ETA_Z, 50, 8, 16, optimizer=Momentum(0.5), seed=1, record=50)
    assert not np.allclose(plain.z_active[-1], heavy.z_active[-1])
    assert np.all(np.isfinite(heavy.z_active)) and heavy.meta["momentum"] == 0.5
    # the warm-up map of spec section 6: t_k = [k - mu (1 - mu^k)/(1 - mu)]/(1 - mu)
    assert np.allclose(heavy.t, [0.0, 2 * (50 - 0.5 * (1 - 0.5 ** 50) / 0.5)], rtol=1e-13)
    assert np.array_equal(plain.t, [0.0, 50.0])


def test_state_is_lumped_and_unlumps_on_syn_medium():
    data = DataModel.preset("shared-query-medium")
    run = train_sgd(data, ETA_Y, ETA_Z, 3, 4, 8, record=3)
    assert run.z_active.shape == (2, 5, 900) and run.decoder_lumped.shape == (2, 21, 900)
    Y = run.decoder[-1]
    others = np.setdiff1d(np.arange(1000), data.next_tokens)
    assert np.all(Y[others] == Y[others[0]])          # non-next rows identical
    assert np.all(Y[:, 900:] == 0)                      # inactive columns stay zero


def test_sgd_reproduces_the_qualitative_claims(small):
    # Theorem 2 / Sec. 8 (T -> inf): distinct tokens' logits rise, common ones fall,
    # and the most frequent distinct token gets the most attention among them.
    # At short T the finite-T bias pushes the rarest distinct tokens down (see
    # docs/validation.md), so a long sequence is used.
    common = small.common_tokens()
    for seed in range(3):
        run = train_sgd(small, ETA_Y, ETA_Z, 500, 16, 1024, seed=seed, record=500)
        z = run.logits(0)[-1]
        assert np.all(z[common] < 0)
        for n in small.next_tokens:
            distinct = small.distinct_tokens(n)
            assert np.all(z[distinct] > 0)
            top = distinct[np.argmax(small.probs(n)[distinct])]
            assert distinct[np.argmax(run.attention(n)[-1, distinct])] == top


def test_ensemble_mean_approaches_the_flow_as_sequences_lengthen(small):
    rows = gap_table(small, ETA_Y, ETA_Z, 200, seq_lens=(16, 64, 256), batch_sizes=(16,),
                     seeds=4)
    gaps = [r["z_gap"] for r in rows if r["process"] == "sgd"]
    tvs = [r["attention_tv"] for r in rows if r["process"] == "sgd"]
    assert gaps[0] / gaps[1] > 1.5 and gaps[1] / gaps[2] > 1.5
    assert tvs[0] > tvs[1] > tvs[2]
    assert gaps[2] < 0.35
    assert rows[-1]["process"] == "gradient_ascent" and rows[-1]["z_gap"] < gaps[2]


@pytest.mark.slow
def test_gap_shrinks_over_the_documented_table(small):
    rows = gap_table(small, ETA_Y, ETA_Z, 500, seq_lens=(16, 64, 256, 1024),
                     batch_sizes=(16, 128), seeds=8)
    for B in (16, 128):
        gaps = [r["z_gap"] for r in rows if r["batch_size"] == B]
        assert all(a / b > 1.8 for a, b in zip(gaps, gaps[1:], strict=False))
        singles = [r["member_z_gap"] for r in rows if r["batch_size"] == B]
        assert all(a > b for a, b in zip(singles, singles[1:], strict=False))
    by_batch = {r["batch_size"]: r["member_z_gap"] for r in rows if r["seq_len"] == 256}
    assert by_batch[128] < by_batch[16]


# ----------------------------------------------------------------- input
@pytest.mark.parametrize(("kwargs", "field"), [
    ({"steps": 0}, "steps"),
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 2.5}, "batch_size"),
    ({"seq_len": 1}, "seq_len"),
    ({"eta_y": float("nan")}, "eta_y"),
    ({"eta_z": float("inf")}, "eta_z"),
    ({"eta_z": 0.0}, "eta_z"),
    ({"optimizer": Adam()}, "optimizer"),
    ({"optimizer": "sgd"}, "optimizer"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"record": 0}, "record"),
])
def test_bad_input_names_the_field(small, kwargs, field):
    args = {"eta_y": ETA_Y, "eta_z": ETA_Z, "steps": 5, "batch_size": 4, "seq_len": 8,
            **kwargs}
    with pytest.raises(ValidationError) as err:
        train_sgd(small, **args)
    assert err.value.field == field


def test_bad_ensemble_and_sampler_input(small):
    with pytest.raises(ValidationError) as err:
        sgd_ensemble(small, ETA_Y, ETA_Z, 5, 4, 8, seeds=0)
    assert err.value.field == "seeds"
    for seeds, field in ((True, "seeds"), (None, "seeds"), ([0, -2], "seeds[1]")):
        with pytest.raises(ValidationError) as err:
            sgd_ensemble(small, ETA_Y, ETA_Z, 5, 4, 8, seeds=seeds)
        assert err.value.field == field
    with pytest.raises(ValidationError) as err:
        sample_batch(small, np.random.default_rng(0), 4, 1)
    assert err.value.field == "seq_len"
    with pytest.raises(ValidationError) as err:
        train_sgd("shared-query-small", ETA_Y, ETA_Z, 5, 4, 8)
    assert err.value.field == "data"


def test_divergence_is_an_error_not_a_nan(small):
    with pytest.raises(SolveError, match="sgd: floating-point error"):
        train_sgd(small, 1e300, 1e300, 20, 4, 8)
