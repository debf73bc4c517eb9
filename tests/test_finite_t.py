"""Level T (spec section 8): the sampler, the field against an independent dense
J_T by central differences, the analytic Jacobian, the trajectory accessors, and
the limit T -> infinity (Level E)."""

import numpy as np
import pytest

import odeflow
from odeflow.data import sample_counts
from odeflow.fields.finite_t import FiniteTFlow
from odeflow.results import FiniteTTrajectory
from tests.reference import dense_finite_t_objective, random_model, unlump


def dense_counts(sample):
    """The sample's counts as dense (N, M) arrays per class."""
    data = sample.data
    out = []
    for cls, k in zip(data.classes, sample.counts, strict=True):
        full = np.zeros((k.shape[0], data.vocab_size))
        full[:, cls.support] = k
        out.append(full)
    return out


# --------------------------------------------------------------------- sampler
def test_sampler_counts_are_multinomial_draws_over_the_support():
    data = odeflow.DataModel.preset("syn-small")
    s = sample_counts(data, seq_len=129, sample_size=5000, seed=3)
    assert s.size == data.num_classes * 5000
    for cls, k in zip(data.classes, s.counts, strict=True):
        assert k.shape == (5000, cls.support.size)
        assert np.all(k.sum(axis=1) == 128)
        assert k.min() >= 0
        # mean count = (T-1) c within 5 standard errors of the multinomial
        stderr = np.sqrt(128 * cls.support_probs * (1 - cls.support_probs) / 5000)
        assert np.all(np.abs(k.mean(axis=0) - 128 * cls.support_probs) < 5 * stderr)
    assert np.isclose(s.weights.sum(), 1.0)
    assert np.all(s.active_counts().sum(axis=1) == 128)


def test_sampler_is_seeded_and_nested():
    data = odeflow.DataModel.preset("syn-small")
    a = sample_counts(data, 64, 10, seed=7)
    b = sample_counts(data, 64, 10, seed=7)
    c = sample_counts(data, 64, 20, seed=7)
    d = sample_counts(data, 64, 10, seed=8)
    for k in range(data.num_classes):
        assert np.array_equal(a.counts[k], b.counts[k])
        assert np.array_equal(a.counts[k], c.counts[k][:10])  # N is a prefix of 2N
        assert not np.array_equal(a.counts[k], d.counts[k])


@pytest.mark.parametrize("field_name, kwargs", [
    ("seq_len", {"seq_len": 1}), ("seq_len", {"seq_len": 2.5}),
    ("sample_size", {"sample_size": 0}), ("seed", {"seed": -1}),
    ("seq_len", {"seq_len": True})])
def test_sampler_rejects_bad_input_naming_the_field(field_name, kwargs):
    data = odeflow.DataModel.preset("syn-small")
    args = {"seq_len": 16, "sample_size": 2, "seed": 0, **kwargs}
    with pytest.raises(odeflow.ValidationError, match=field_name):
        sample_counts(data, **args)
    with pytest.raises(odeflow.ValidationError, match=field_name):
        odeflow.solve(data, flow="finite_t", t_span=(0, 1), **args)


# ----------------------------------------------------------------------- field
@pytest.mark.parametrize("seed", range(3))
def test_rhs_is_eta_times_gradient_of_dense_J_T(seed):
    """The Level T field equals eta * grad J_T (dense reference, central differences)."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=8, K=3, n_queries=2, support=4, active=7)
    eta_y, eta_z = 0.8, 1.7
    field = FiniteTFlow(data, eta_y, eta_z, seq_len=6, sample_size=3, seed=seed)
    y = rng.normal(size=field.size)
    Y, Z = unlump(field, y)
    counts = dense_counts(field.sample)
    h = 1e-5
    gY, gZ = np.zeros_like(Y), np.zeros_like(Z)
    for idx in np.ndindex(Y.shape):
        E = np.zeros_like(Y)
        E[idx] = h
        gY[idx] = (dense_finite_t_objective(data, counts, Y + E, Z)
                   - dense_finite_t_objective(data, counts, Y - E, Z)) / (2 * h)
        gZ[idx] = (dense_finite_t_objective(data, counts, Y, Z + E)
                   - dense_finite_t_objective(data, counts, Y, Z - E)) / (2 * h)
    grad = np.concatenate([eta_y * gY.ravel(), eta_z * gZ.ravel()])
    dY, dZ = unlump(field, field.rhs(0.0, y), base=False)
    rhs = np.concatenate([dY.ravel(), dZ.ravel()])
    assert np.linalg.norm(rhs - grad) / np.linalg.norm(grad) < 1e-6
    assert dense_finite_t_objective(data, counts, Y, Z) == pytest.approx(
        field.objective(y), rel=1e-12)


def test_sample_size_one_of_a_deterministic_sequence_is_level_e():
    """A class whose support is one token has one possible sequence: Level T = Level E."""
    data = odeflow.DataModel(6, [odeflow.SequenceClass(4, 0, {1: 1.0}),
                                 odeflow.SequenceClass(5, 0, {2: 1.0})])
    exact = odeflow.fields.ExactFlow(data, 1.0, 2.0)
    finite = FiniteTFlow(data, 1.0, 2.0, seq_len=9, sample_size=4)
    y = np.random.default_rng(0).normal(size=exact.size)
    assert np.allclose(finite.rhs(0, y), exact.rhs(0, y), rtol=1e-13, atol=1e-15)


def test_rhs_is_minus_the_sgd_batch_gradient_over_the_whole_sample():
    """Level T's field is exactly the training code's mean-loss gradient on a batch made
    of the sampled sequences (uniform weights: pi_n / N = 1 / (K N))."""
    from odeflow.training import Batch, batch_loss_gradient

    data = odeflow.DataModel.preset("syn-small")
    field = FiniteTFlow(data, 1.0, 1.0, seq_len=8, sample_size=50, seed=0)
    assert np.array_equal(field.columns, data.active_tokens)
    L, q = data.active_tokens.size, data.query_tokens.size
    rng = np.random.default_rng(1)
    y = rng.normal(scale=0.5, size=field.size)
    Yl, z = field.split(y)
    cols = np.searchsorted(data.active_tokens, field.logit_token)

    def dense_logits(values):
        out = np.zeros((q, L))
        out[field.logit_query, cols] = values
        return out

    counts = field.sample.active_counts()
    tokens = np.array([np.repeat(np.arange(L), k) for k in counts])
    grad_Y, grad_Z = batch_loss_gradient(data, Yl, dense_logits(z),
                                         Batch(field.sample.class_index, tokens))
    dY, dz = field.split(field.rhs(0.0, y))
    assert np.abs(dY + grad_Y).max() <= 1e-14 * np.abs(dY).max()
    assert np.abs(dense_logits(dz) + grad_Z).max() <= 1e-14 * np.abs(dz).max()


@pytest.mark.parametrize("seed", range(2))
def test_analytic_jacobian_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=10, K=3, n_queries=2, support=5, active=8)
    field = FiniteTFlow(data, 1.1, 0.5, seq_len=12, sample_size=4, seed=seed)
    y = rng.normal(size=field.size)
    J = field.jacobian(0.0, y)
    h = 1e-6
    Jfd = np.stack([(field.rhs(0, y + h * e) - field.rhs(0, y - h * e)) / (2 * h)
                    for e in np.eye(field.size)], axis=1)
    assert np.abs(J - Jfd).max() <= 1e-7 * max(1.0, np.abs(J).max())


# ------------------------------------------------------------------ trajectory
@pytest.fixture(scope="module")
def solved():
    data = odeflow.DataModel.preset("syn-small")
    return odeflow.solve(data, flow="finite_t", eta_y=1.0, eta_z=1.0, t_span=(0, 1e3),
                         seq_len=32, sample_size=8, seed=1, rtol=1e-10, atol=1e-12)


def test_trajectory_type_meta_and_monotone_objective(solved):
    assert isinstance(solved, FiniteTTrajectory)
    assert solved.meta["flow"] == "finite_t"
    assert (solved.meta["seq_len"], solved.meta["sample_size"], solved.meta["seed"]) \
        == (32, 8, 1)
    J = solved.objective
    assert J[-1] > J[0] + 0.5
    assert np.all(np.diff(J) >= -1e-10 * np.abs(J).max())
    Y = solved.decoder
    assert np.abs(Y.sum(axis=1) - Y[0].sum(axis=0)).max() < 1e-8
    for m in solved.data.query_tokens:
        z = solved.logits(m)
        assert np.abs(z.sum(axis=1) - z[0].sum()).max() < 1e-8


def test_attention_is_the_mean_over_the_class_samples(solved):
    data = solved.data
    counts = dense_counts(solved.sample)
    j = -1
    for i, n in enumerate(data.next_tokens):
        z = solved.logits(data.classes[i].query_token)[j]
        f = counts[i] * np.exp(z - z.max())
        f /= f.sum(axis=1, keepdims=True)
        assert np.allclose(solved.attention(int(n))[j], f.mean(axis=0), rtol=1e-12, atol=1e-15)
        fh = f / np.linalg.norm(f, axis=1, keepdims=True)
        assert np.allclose(solved.features(int(n))[j], fh.mean(axis=0), rtol=1e-12, atol=1e-15)
        c = solved.population_attention(int(n))[j]
        d = data.distinct_tokens(int(n))
        ref = data.probs(int(n))[d] * np.exp(z[d] - z[d].max())
        assert np.allclose(c[d], ref / ref.sum(), rtol=1e-12)
        assert np.all(np.delete(c, d) == 0)


def test_save_and_load_keep_the_sample(solved, tmp_path):
    path = solved.save(tmp_path / "t.npz")
    back = FiniteTTrajectory.load(path)
    assert np.array_equal(back.z_active, solved.z_active)
    assert np.array_equal(back.attention(int(solved.data.next_tokens[0])),
                          solved.attention(int(solved.data.next_tokens[0])))


# --------------------------------------------------------------- T -> infinity
def test_level_t_tends_to_level_e_like_the_sampling_error():
    """max |z_T - z_E| falls about like 1 / sqrt(T N) (the sampling error) at large T."""
    # the bound below was measured on this model (odeflow's former syn-small)
    data = odeflow.DataModel.preset("shared-query-small")
    opts = {"eta_y": 1.0, "eta_z": 1.0, "t_span": (0, 300), "rtol": 1e-10, "atol": 1e-12}
    exact = odeflow.solve(data, **opts)
    gaps = {}
    for T in (10**4, 10**6):
        traj = odeflow.solve(data, flow="finite_t", seq_len=T, sample_size=16, **opts)
        gaps[T] = np.abs(traj.z_active - exact.z_active).max()
    # sqrt(100) = 10 predicted; accept 4..25 (a seeded sample, not an average)
    assert 4 < gaps[10**4] / gaps[10**6] < 25
    assert gaps[10**6] < 1e-3 * np.ptp(exact.z_active)


def test_random_start_decoder_is_kept_unlumped_on_every_column():
    """Level T from a random Y(0): the decoder stays un-lumped, and the columns of tokens
    no sampled sequence contains keep their Y(0) (regression: they were zeroed, and the
    trajectory claimed a lumped layout)."""
    data = odeflow.DataModel.preset("syn-medium-1")
    y0 = np.random.default_rng(3).uniform(-0.2, 0.2, (data.vocab_size, data.vocab_size))
    traj = odeflow.solve(data, flow="finite_t", start=(y0, None), seq_len=4, sample_size=2,
                         t_span=(0.0, 5.0), progress=False)
    assert traj.decoder_layout == "full"
    from odeflow.families import family_named

    field_class = family_named("scan_snap").field_class("finite_t")
    field = field_class(data, 1.0, 0.1, seq_len=4, sample_size=2, start=(y0, None))
    unsampled = np.setdiff1d(data.active_tokens, field.columns)
    assert unsampled.size > 0  # the case the test is about
    np.testing.assert_allclose(traj.decoder_at(0), y0, atol=1e-14)
    np.testing.assert_allclose(traj.decoder_at(-1)[:, unsampled], y0[:, unsampled], atol=0)


def test_per_sequence_weights_give_any_minibatch_gradient():
    """``gradients(states, weights)``: the sample's own weights give the gradient; the
    counts of a minibatch drawn from the sample over its size give minus the training
    code's loss gradient on that batch; per-sequence rows add up to the gradient."""
    from odeflow.training import Batch, batch_loss_gradient

    data = odeflow.DataModel.preset("syn-small")
    field = FiniteTFlow(data, 1.0, 1.0, seq_len=8, sample_size=50, seed=0,
                        storage="blocked")
    assert np.array_equal(field.columns, data.active_tokens)
    K, N = len(data.classes), 50
    rng = np.random.default_rng(3)
    y = rng.normal(scale=0.5, size=field.size)
    full = field.gradients(y[None])
    own = np.broadcast_to((np.asarray(data.weights) / N)[None, :, None], (1, K, N))
    np.testing.assert_allclose(field.gradients(y[None], weights=own), full, rtol=1e-13,
                               atol=1e-15 * np.abs(full).max())
    # a batch of 64 sequences drawn with replacement from the sample
    pick = rng.integers(0, K * N, size=64)
    counts = np.bincount(pick, minlength=K * N).reshape(1, K, N) / pick.size
    got = field.gradients(y[None], weights=counts)[0]
    L, q = data.active_tokens.size, data.query_tokens.size
    cols = np.searchsorted(data.active_tokens, field.logit_token)
    Yl, z = field.split(y)
    logits = np.zeros((q, L))
    logits[field.logit_query, cols] = z
    tokens = np.array([np.repeat(np.arange(L), k) for k in field.sample.active_counts()])
    grad_Y, grad_Z = batch_loss_gradient(data, Yl, logits,
                                         Batch(field.sample.class_index[pick], tokens[pick]))
    dY, dz = field.split(got)
    assert np.abs(dY + grad_Y).max() <= 1e-13 * np.abs(dY).max()
    assert np.abs(dz + grad_Z[field.logit_query, cols]).max() <= 1e-13 * np.abs(dz).max()
    # per-sequence gradients (one-hot rows at one state), weighted, add up to the gradient
    rows = np.eye(K * N).reshape(K * N, K, N)
    each = field.gradients(y[None], weights=rows)
    assert each.shape == (K * N, field.size)
    total = np.tensordot(np.repeat(np.asarray(data.weights) / N, N), each, axes=1)
    np.testing.assert_allclose(total, full[0], rtol=1e-12, atol=1e-14 * np.abs(full).max())
    for bad, why in [(np.ones((1, K, N + 1)), "shape"), (np.ones((3, K, N)), "rows"),
                     (np.full((1, K, N), np.nan), "finite")]:
        with pytest.raises(odeflow.ValidationError, match=f"^weights: .*{why}"):
            field.gradients(np.stack([y, y]), weights=bad)


@pytest.mark.parametrize("random_start", [False, True])
@pytest.mark.parametrize("floor", [None, np.inf])
def test_blocked_gradient_equals_the_dense_storage_at_any_scale(random_start, floor, monkeypatch):
    """The per-class blocks (two products, the bound shifts of the features and the
    softmax) give the dense storage's gradient, lumped (zero start: a decoder row of
    multiplicity M - K) and un-lumped (random start), for several states at once, from
    states near the start to logits of size 1e3 (where the bound shifts underflow and the
    blocks are recomputed at their own maxima); ``floor=inf`` takes that path always."""
    import odeflow.fields.finite_t as finite_t

    if floor is not None:
        monkeypatch.setattr(finite_t, "SHIFT_FLOOR", floor)
    rng = np.random.default_rng(11)
    data = random_model(rng, M=9, K=3, n_queries=2, support=5, active=8)
    y0 = rng.uniform(-0.3, 0.3, (9, 9)) if random_start else None
    options = {"seq_len": 7, "sample_size": 4, "seed": 2, "start": (y0, None)}
    dense = FiniteTFlow(data, 1.3, 0.7, storage="dense", **options)
    blocked = FiniteTFlow(data, 1.3, 0.7, storage="blocked", **options)
    assert blocked.R == (9 if random_start else 4)
    for scale in (0.3, 30.0, 1e3):
        states = dense.initial_state() + scale * rng.standard_normal((3, dense.size))
        want = np.array([dense.gradient(y) for y in states])
        with np.errstate(all="raise", under="ignore"):
            got = blocked.gradients(states)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max())
        np.testing.assert_allclose(blocked.rhs(0.0, states[0]), dense.rhs(0.0, states[0]),
                                   rtol=0, atol=1e-11 * np.abs(want).max())


def test_fields_of_one_sample_share_its_table():
    """Level T fields of the same data model, T, N and seed (an ensemble of starts, a
    sweep of rates) reuse the sample and its table; another seed or size draws anew, and
    the shared table gives the same field as a fresh one."""
    import odeflow.fields.finite_t as finite_t

    data = odeflow.DataModel.preset("syn-small")
    a = FiniteTFlow(data, 1.0, 0.5, seq_len=8, sample_size=3, seed=1)
    b = FiniteTFlow(data, 2.0, 0.1, seq_len=8, sample_size=3, seed=1,
                    start=(np.full((data.vocab_size,) * 2, 0.1), None))
    assert b.table is a.table and b.sample is a.sample
    for other in ({"seed": 2}, {"sample_size": 4}, {"seq_len": 9}):
        c = FiniteTFlow(data, 1.0, 0.5, **{"seq_len": 8, "sample_size": 3, "seed": 1,
                                           **other})
        assert c.table is not a.table
    finite_t._LAST_SAMPLE[0] = None
    fresh = FiniteTFlow(data, 1.0, 0.5, seq_len=8, sample_size=3, seed=1)
    assert fresh.table is not a.table
    y = np.random.default_rng(0).normal(size=a.size)
    np.testing.assert_array_equal(fresh.rhs(0.0, y), a.rhs(0.0, y))
