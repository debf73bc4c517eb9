"""Level R (spec section 4): the reduced flow's right-hand side, its analytic
Jacobian, the exact Eqn 11 invariant along scipy trajectories, CF2/CF3, and
Theorem 2's directions on syn-small."""

import math

import numpy as np
import pytest

import odeflow
from odeflow.analysis.diagnostics import eqn11_invariant, eqn11_spread, transition_time
from odeflow.fields.reduced import ReducedFlow
from odeflow.numerics import feature_vectors
from tests.reference import carried_logits, dense_reduced_rhs, random_model


def block_model(rng, M=40, K=3, n_queries=2, n_common=4, n_distinct=(2, 6), weights=True):
    """Random data model whose classes share ``n_common`` tokens (per query) and
    each own at least two distinct tokens; random class weights."""
    tokens = rng.permutation(M)
    pos = 0
    common = {}
    for q in range(n_queries):
        common[q] = tokens[pos:pos + n_common]
        pos += n_common
    next_tokens = rng.choice(M, size=K, replace=False)
    classes = []
    for k, n in enumerate(next_tokens):
        q = k % n_queries
        d = int(rng.integers(n_distinct[0], n_distinct[1] + 1))
        own = tokens[pos:pos + d]
        pos += d
        toks = np.concatenate([common[q], own])
        p = rng.uniform(0.1, 1.0, size=toks.size)
        classes.append(odeflow.SequenceClass(int(n), int(q), dict(zip(
            toks.tolist(), (p / p.sum()).tolist(), strict=True)), normalize=True))
    w = rng.uniform(0.5, 1.5, size=K) if weights else np.ones(K)
    return odeflow.DataModel(M, classes, w / w.sum(), normalize=True)


def fd_jacobian(field, y, step=1e-6):
    return np.stack([(field.rhs(0, y + step * e) - field.rhs(0, y - step * e)) / (2 * step)
                     for e in np.eye(field.size)], axis=1)


def random_state(field, rng):
    y = rng.normal(size=field.size)
    y[: field.K] = rng.uniform(0.0, 6.0, size=field.K)  # margins are >= 0 along the flow
    return y


@pytest.fixture(scope="module")
def syn_small():
    return odeflow.DataModel.preset("shared-query-small")


@pytest.fixture(scope="module")
def syn_small_run(syn_small):
    return odeflow.solve(syn_small, flow="reduced", eta_y=1.0, eta_z=0.5, t_span=(0, 1e4),
                         rtol=1e-11, atol=1e-14)


# ------------------------------------------------------------ right-hand side
@pytest.mark.parametrize("seed", range(3))
def test_analytic_jacobian_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=10, K=3, n_queries=2, support=5, active=8)
    beta = rng.uniform(0, 0.5, size=(3, 3))
    np.fill_diagonal(beta, 0.0)
    field = ReducedFlow(data, 1.3, 0.7, beta=beta)
    y = random_state(field, rng)
    J = field.jacobian(0.0, y)
    assert J.shape == (field.size, field.size)
    assert np.abs(J - fd_jacobian(field, y)).max() <= 1e-7 * max(1.0, np.abs(J).max())
    # B and Gamma do not feed back
    assert not J[:, field._sl_b].any() and not J[:, field._sl_g].any()


@pytest.mark.parametrize("storage", ["dense", "sparse"])
@pytest.mark.parametrize("matrix_beta", [False, True])
def test_rhs_matches_dense_reference(storage, matrix_beta):
    """Both storages, scalar (rank-one form) and matrix beta (shared-token pairs):
    the rhs equals a dense (K, L) evaluation of Eqns 44, 10, 98, 128 to 1e-12."""
    rng = np.random.default_rng(21)
    data = block_model(rng, M=60, K=5, n_queries=2, n_common=3)
    if matrix_beta:
        beta = rng.uniform(0, 0.3, size=(5, 5))
        np.fill_diagonal(beta, 0.0)
    else:
        beta = np.full((5, 5), 0.07)
        np.fill_diagonal(beta, 0.0)
    z0 = rng.normal(size=(2, 60))
    field = ReducedFlow(data, 1.3, 0.7, start=(None, z0), beta=beta, storage=storage)
    assert field.ops.dense == (storage == "dense")
    assert (field.beta_scalar is None) == matrix_beta
    y = random_state(field, rng)
    h, z, _, _ = field.split(y)
    dh, dZ, dB, dG = dense_reduced_rhs(data, h, carried_logits(field, z), 1.3, 0.7, beta)
    out = field.split(field.rhs(0.0, y))
    scale = np.abs(dZ).max()
    assert np.abs(out[0] - dh).max() <= 1e-12 * np.abs(dh).max()
    assert np.abs(carried_logits(field, out[1], base=False) - dZ).max() <= 1e-12 * scale
    assert np.abs(out[2] - dB).max() <= 1e-12 * np.abs(dB).max()
    assert np.abs(out[3] - dG).max() <= 1e-12 * np.abs(dG).max()
    J = field.jacobian(0.0, y)
    assert np.abs(J - fd_jacobian(field, y)).max() <= 1e-7 * max(1.0, np.abs(J).max())


def test_jacobian_on_syn_small(syn_small):
    field = ReducedFlow(syn_small, 1.0, 0.1)
    y = random_state(field, np.random.default_rng(5))
    J = field.jacobian(0.0, y)
    assert np.abs(J - fd_jacobian(field, y)).max() <= 1e-7 * max(1.0, np.abs(J).max())


@pytest.mark.parametrize("seed", range(3))
def test_rhs_pieces(seed):
    """Eqn 44 for h; dB/dt = eta_Z pi s w; dz_ml/dt = dB_n/dt f^_nl^2 on distinct tokens
    (Eqn 98); dGamma/dt = gamma; the iota term has no effect."""
    rng = np.random.default_rng(seed)
    data = block_model(rng)
    field = ReducedFlow(data, 1.7, 0.3)
    y = random_state(field, rng)
    dy = field.rhs(0.0, y)
    h, _, _, _ = field.split(y)
    M, pi = data.vocab_size, data.weights
    assert np.allclose(field.split(dy)[0], 1.7 * pi * M / (np.exp(h) + M - 1), rtol=1e-13)
    gamma = h * (M - 1) / (np.exp(h) + M - 1)
    assert np.allclose(field.split(dy)[3], gamma, rtol=1e-13)
    Z = carried_logits(field, field.split(y)[1])
    F = feature_vectors(data.active_log_probs, Z[data.class_query_index])
    dZ, dB = carried_logits(field, field.split(dy)[1], base=False), field.split(dy)[2]
    for i, n in enumerate(data.next_tokens):
        cols = np.searchsorted(data.active_tokens, data.distinct_tokens(n))
        qi = data.class_query_index[i]
        assert np.allclose(dZ[qi, cols], dB[i] * F[i, cols] ** 2, rtol=1e-12,
                           atol=1e-300)
    other = ReducedFlow(data, 1.7, 0.3, iota=rng.uniform(0.5, 2.0, size=data.num_classes))
    assert np.array_equal(other.rhs(0.0, y), dy)


def test_B_rate_is_eta_pi_gamma_xi_for_uniform_weights(syn_small):
    """Eqn 98: dB_n/dt = eta_Z pi gamma xi_n, xi_n = sum beta f^_n . f^_n'."""
    field = ReducedFlow(syn_small, 1.0, 0.4)
    rng = np.random.default_rng(3)
    y = field.initial_state()
    y[:2] = 2.5
    y[field._sl_z] = rng.normal(size=field.n_logits)
    Z = carried_logits(field, field.split(y)[1])
    F = feature_vectors(syn_small.active_log_probs, Z[syn_small.class_query_index])
    M = syn_small.vocab_size
    gamma = 2.5 * (M - 1) / (math.exp(2.5) + M - 1)
    xi = (F @ F.T)[0, 1] / (M - 1)
    dB = field.split(field.rhs(0.0, y))[2]
    assert dB == pytest.approx(np.full(2, 0.4 * 0.5 * gamma * xi), rel=1e-13)


def test_invalid_options(syn_small):
    with pytest.raises(odeflow.ValidationError, match="beta"):
        ReducedFlow(syn_small, 1.0, 0.1, beta=np.ones((2, 2)))
    with pytest.raises(odeflow.ValidationError, match="beta"):
        ReducedFlow(syn_small, 1.0, 0.1, beta=np.zeros((3, 3)))
    with pytest.raises(odeflow.ValidationError, match="beta"):
        ReducedFlow(syn_small, 1.0, 0.1, beta=-0.1)
    with pytest.raises(odeflow.ValidationError, match="beta"):
        ReducedFlow(syn_small, 1.0, 0.1, beta=float("nan"))
    with pytest.raises(odeflow.ValidationError, match="iota"):
        ReducedFlow(syn_small, 1.0, 0.1, iota=0.0)
    with pytest.raises(odeflow.ValidationError, match="iota"):
        ReducedFlow(syn_small, 1.0, 0.1, iota=[1.0, 2.0, 3.0])
    with pytest.raises(odeflow.ValidationError, match="eta_z"):
        odeflow.solve(syn_small, flow="reduced", eta_z=0.0)


# ------------------------------------------------------------- trajectories
def test_eqn11_invariant_exact_on_syn_small(syn_small_run, syn_small):
    assert eqn11_spread(syn_small_run).max() < 1e-8
    for n in syn_small.next_tokens:
        inv = eqn11_invariant(syn_small_run, n)
        assert inv.shape == (syn_small_run.t.size, 10)
        assert np.all(inv[1:] > 0)
        rel = np.ptp(inv[1:], axis=1) / inv[1:].max(axis=1)
        assert rel.max() < 1e-8


@pytest.mark.parametrize("seed", range(6))
def test_eqn11_invariant_exact_on_random_models(seed):
    """Exact to < 1e-8 at every time. With Z(0) != 0 the logits are stored as
    ``z(0) + growth``, so growths below ~1e-4 carry a round-off of ~eps |z(0)| that
    no solver tolerance removes; those times are left out (``floor``)."""
    rng = np.random.default_rng(100 + seed)
    data = block_model(rng, M=int(rng.integers(20, 60)), K=int(rng.integers(2, 5)),
                       n_queries=int(rng.integers(1, 3)))
    with_z0 = seed % 2 == 1
    z0 = rng.normal(scale=0.5, size=(data.query_tokens.size, data.vocab_size)) \
        if with_z0 else None
    traj = odeflow.solve(data, flow="reduced", eta_y=float(rng.uniform(0.5, 3)),
                         eta_z=float(rng.uniform(0.1, 2)), t_span=(0, 1e3), start=(None, z0),
                         rtol=1e-11, atol=1e-14)
    assert eqn11_spread(traj, floor=1e-4 if with_z0 else 0.0).max() < 1e-8
    # Theorem 3: the relative gain is (f^_l(0)^2/f^_l'(0)^2 - 1) chi_l
    n = int(data.next_tokens[0])
    l, l2 = data.distinct_tokens(n)[:2]
    f0 = traj.features(n)[0]
    expected = (f0[l] ** 2 / f0[l2] ** 2 - 1.0) * traj.growth_factor(n, l)
    got = traj.relative_gain(n, l, l2)
    assert np.allclose(got, expected, rtol=1e-7, atol=1e-12 * np.abs(expected).max())


def test_gamma_positive_rises_then_decays_and_cf2_transition(syn_small_run, syn_small):
    traj = syn_small_run
    gamma = traj.gamma
    assert gamma.shape == traj.t.shape
    assert np.all(gamma[1:] > 0)
    peak = int(np.argmax(gamma))
    assert 0 < peak < traj.t.size - 1
    assert np.all(np.diff(gamma[: peak + 1]) > 0)
    assert np.all(np.diff(gamma[peak:]) < 0)
    M, pi = syn_small.vocab_size, 0.5
    t0_cf2 = (M - 2 + (M - 1) * math.log(M - 1)) / (1.0 * pi * M)
    t0 = transition_time(traj)
    assert t0.shape == (2,)
    assert t0 == pytest.approx(np.full(2, t0_cf2), rel=0.05)
    # gamma peaks near the crossover (Lemma 9)
    assert 0.2 * t0_cf2 < traj.t[peak] < 5 * t0_cf2


def test_cf3_gamma_integral_and_margin(syn_small_run, syn_small):
    """CF3: Gamma = (M-1) h^2 / (2 M eta_Y pi); CF1: exp(h) - 1 + (M-1) h = eta_Y pi M t."""
    traj = syn_small_run
    M, pi = syn_small.vocab_size, 0.5
    h = traj.margin
    assert np.allclose(traj.gamma_integral, (M - 1) * h ** 2 / (2 * M * pi), rtol=1e-8,
                       atol=1e-14)
    assert np.allclose(np.expm1(h) + (M - 1) * h, pi * M * traj.t, rtol=1e-8, atol=1e-12)


def test_theorem2_directions_on_syn_small(syn_small_run, syn_small):
    z = syn_small_run.logits(0)
    for n in syn_small.next_tokens:
        distinct = syn_small.distinct_tokens(n)
        assert np.all(np.diff(z[:, distinct], axis=0) > 0)
        assert np.all(z[-1, distinct] > 0)
    common = syn_small.common_tokens()
    assert np.all(np.diff(z[:, common], axis=0) < 0)
    # within a class the most frequent distinct token gains the most (Eqn 12)
    d1 = syn_small.distinct_tokens(1)
    assert np.all(np.diff(z[-1, d1]) > 0)


def test_single_common_token_falls():
    classes = [odeflow.SequenceClass(1, 0, {0: 0.3, 3: 0.3, 4: 0.4}),
               odeflow.SequenceClass(2, 0, {0: 0.3, 5: 0.2, 6: 0.5})]
    data = odeflow.DataModel(10, classes)
    traj = odeflow.solve(data, flow="reduced", eta_y=1.0, eta_z=1.0, t_span=(0, 1e3))
    z = traj.logits(0)
    assert np.all(np.diff(z[:, 0]) < 0) and z[-1, 0] < -1e-3
    assert np.all(z[-1, [3, 4, 5, 6]] > 0)
    assert np.all(z[:, [7, 8, 9]] == 0)


def test_B_series_matches_integrated_rate(syn_small_run, syn_small):
    """B_n recorded as a state equals eta_Z pi int gamma xi_n dt (trapezoid on the grid)."""
    traj = syn_small_run
    for n in syn_small.next_tokens:
        rate = 0.5 * 0.5 * traj.gamma * traj.xi(n)
        t = traj.t
        approx = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(t))])
        assert traj.B(n)[-1] == pytest.approx(approx[-1], rel=2e-3)
        assert np.all(np.diff(traj.B(n)) > 0)


def test_implied_decoder_and_objective(syn_small_run, syn_small):
    traj = syn_small_run
    Y = traj.decoder[-1]
    M = syn_small.vocab_size
    h = traj.margin[-1]
    F = np.stack([traj.features(n)[-1] for n in syn_small.next_tokens])
    W = np.zeros((M, 2))
    for k, n in enumerate(syn_small.next_tokens):
        W[:, k] = h * ((np.arange(M) == n) - 1.0 / M)
    assert np.allclose(Y, W @ F, atol=1e-12)
    J = traj.objective
    assert np.all(np.isfinite(J)) and J[-1] > J[0]
    assert traj.stats["method"] == ReducedFlow.preferred_method
    assert traj.meta["flow"] == "reduced"
    assert np.allclose(traj.meta["beta"], [[0, 1 / 29], [1 / 29, 0]])


def test_non_uniform_weights_and_beta_option():
    rng = np.random.default_rng(7)
    data = block_model(rng, M=30, K=3, n_queries=1)
    traj = odeflow.solve(data, flow="reduced", eta_y=1.0, eta_z=0.3, t_span=(0, 100),
                         beta=0.2, iota=2.0)
    assert traj.margin.shape == (traj.t.size, 3)
    order = np.argsort(data.weights)
    assert np.all(np.diff(traj.margin[-1, order]) > 0)  # larger pi_n, larger margin
    assert np.allclose(traj.meta["beta"], 0.2 * (1 - np.eye(3)))
    assert traj.meta["iota"] == [2.0, 2.0, 2.0]
    default = odeflow.solve(data, flow="reduced", eta_y=1.0, eta_z=0.3, t_span=(0, 100))
    # a larger beta drives attention faster
    assert np.all(traj.series["B"][-1] > default.series["B"][-1])


def test_save_load_round_trip(syn_small_run, tmp_path):
    path = syn_small_run.save(tmp_path / "r.npz")
    back = odeflow.Trajectory.load(path)
    assert np.array_equal(back.margin, syn_small_run.margin)
    assert np.array_equal(back.B(1), syn_small_run.B(1))
    assert back.meta["beta"] == syn_small_run.meta["beta"]
