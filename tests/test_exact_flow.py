"""Level E (spec section 3): the lumped vector field against an independent dense
reference, finite differences of J, the analytic Jacobian, and the invariants
along solved trajectories."""

import numpy as np
import pytest

import odeflow
from odeflow.fields.exact import ExactFlow
from tests.reference import dense_objective, dense_rhs, random_model, unlump


def random_state(field, rng, scale=1.0):
    return rng.normal(scale=scale, size=field.size)


@pytest.mark.parametrize("seed", range(4))
def test_dense_reference_is_eta_times_gradient_of_J(seed):
    """The dense vector field equals eta * grad J by central differences (rel err < 1e-6)."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=7, K=3, n_queries=2, support=4)
    Y = rng.normal(size=(7, 7))
    Z = rng.normal(size=(7, 7))
    eta_y, eta_z = 0.7, 0.3
    dY, dZ = dense_rhs(data, Y, Z, eta_y, eta_z)
    h = 1e-6
    gY = np.zeros_like(Y)
    gZ = np.zeros_like(Z)
    for idx in np.ndindex(Y.shape):
        E = np.zeros_like(Y)
        E[idx] = h
        gY[idx] = (dense_objective(data, Y + E, Z) - dense_objective(data, Y - E, Z)) / (2 * h)
        gZ[idx] = (dense_objective(data, Y, Z + E) - dense_objective(data, Y, Z - E)) / (2 * h)
    grad = np.concatenate([eta_y * gY.ravel(), eta_z * gZ.ravel()])
    field = np.concatenate([dY.ravel(), dZ.ravel()])
    assert np.linalg.norm(field - grad) / np.linalg.norm(grad) < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_lumped_field_is_eta_times_gradient_of_lumped_J(seed):
    """Our own rhs against finite differences of our own objective: a lumped row
    standing for mult outputs has gradient mult * (per-row derivative)."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=12, K=3, n_queries=2, support=5, active=9)
    field = ExactFlow(data, 0.9, 0.4)
    y = random_state(field, rng)
    h = 1e-6
    grad = np.array([(field.objective(y + h * e) - field.objective(y - h * e)) / (2 * h)
                     for e in np.eye(field.size)])
    scale = np.concatenate([field.eta_y / np.repeat(field.multiplicity, field.L),
                            np.full(field.q * field.L, field.eta_z)])
    rhs = field.rhs(0.0, y)
    assert np.linalg.norm(rhs - scale * grad) / np.linalg.norm(rhs) < 1e-6


@pytest.mark.parametrize("seed", range(3))
def test_lumped_and_unlumped_rhs_agree(seed):
    """M = 60 with only 14 active tokens: lumped rhs == dense rhs to 1e-12."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=60, K=4, n_queries=2, support=6, active=14)
    assert data.active_tokens.size < data.vocab_size / 2
    z0 = rng.normal(size=(data.query_tokens.size, data.vocab_size))
    field = ExactFlow(data, 1.3, 0.6, z0=z0)
    y = field.initial_state() + random_state(field, rng, 0.5)
    Y, Z = unlump(field, y)
    dY, dZ = dense_rhs(data, Y, Z, 1.3, 0.6)
    dYl, dZl = field.split(field.rhs(0.0, y))
    dY_lumped, dZ_lumped = unlump(field, np.concatenate([dYl.ravel(), dZl.ravel()]), base=False)
    scale = max(np.abs(dY).max(), np.abs(dZ).max())
    assert np.abs(dY - dY_lumped).max() <= 1e-12 * scale
    assert np.abs(dZ - dZ_lumped).max() <= 1e-12 * scale
    assert dense_objective(data, Y, Z) == pytest.approx(field.objective(y), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_analytic_jacobian_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=10, K=3, n_queries=2, support=5, active=8)
    field = ExactFlow(data, 1.1, 0.5)
    y = random_state(field, rng)
    J = field.jacobian(0.0, y)
    h = 1e-6
    Jfd = np.stack([(field.rhs(0, y + h * e) - field.rhs(0, y - h * e)) / (2 * h)
                    for e in np.eye(field.size)], axis=1)
    assert np.abs(J - Jfd).max() <= 1e-7 * max(1.0, np.abs(J).max())


@pytest.fixture(scope="module")
def solved():
    rng = np.random.default_rng(11)
    data = random_model(rng, M=40, K=3, n_queries=2, support=6, active=20)
    z0 = rng.normal(size=(2, 40))
    return odeflow.solve(data, eta_y=1.0, eta_z=0.5, t_span=(0, 1e4), z0=z0, rtol=1e-10,
                         atol=1e-12, method="Radau")


def test_conservation_laws_along_trajectory(solved):
    """1^T Y and the row sums of every z_m are conserved (to 1e-8)."""
    Y = solved.decoder
    assert np.abs(Y.sum(axis=1) - Y[0].sum(axis=0)).max() < 1e-8
    assert np.abs(Y).max() > 0.1  # the decoder did move
    for m in solved.data.query_tokens:
        z = solved.logits(m)
        assert np.abs(z.sum(axis=1) - z[0].sum()).max() < 1e-8
        assert np.abs(z - z[0]).max() > 1e-3


def test_objective_non_decreasing(solved):
    J = solved.objective
    assert J[-1] > J[0] + 1.0
    assert np.all(np.diff(J) >= -1e-10 * np.abs(J).max())


def test_inactive_logits_unchanged(solved):
    data = solved.data
    for m in data.query_tokens:
        z = solved.logits(m)
        support = np.unique(np.concatenate([data.classes[data.class_index(n)].support
                                            for n in data.classes_of_query(m)]))
        outside = np.setdiff1d(np.arange(data.vocab_size), support)
        assert outside.size > 0
        assert np.array_equal(z[:, outside], np.repeat(z[:1, outside], z.shape[0], axis=0))


def test_unused_rows_equal_and_inactive_columns_zero(solved):
    data = solved.data
    Y = solved.decoder[-1]
    others = np.setdiff1d(np.arange(data.vocab_size), data.next_tokens)
    assert np.allclose(Y[others], Y[others[0]], rtol=0, atol=0)
    inactive = np.setdiff1d(np.arange(data.vocab_size), data.active_tokens)
    assert np.all(Y[:, inactive] == 0)


def test_theorem2_on_syn_small():
    """From Y(0) = Z(0) = 0: distinct-token logits rise, common-token logits fall."""
    data = odeflow.DataModel.preset("shared-query-small")
    traj = odeflow.solve(data, eta_y=1.0, eta_z=1.0, t_span=(0, 1e4))
    z = traj.logits(0)
    dz = z[-1] - z[0]
    common = data.common_tokens()
    distinct = np.concatenate([data.distinct_tokens(n) for n in data.next_tokens])
    assert np.all(dz[distinct] > 0)
    assert np.all(dz[common] < 0)
    # scan order: the most probable distinct token gets the largest attention gain
    for n in data.next_tokens:
        d = data.distinct_tokens(n)
        f = traj.attention(n)
        gain = f[-1, d] - f[0, d]
        assert np.argmax(gain) == np.argmax(data.probs(n)[d])
