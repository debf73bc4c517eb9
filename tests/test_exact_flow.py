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
    # the state holds Y^T (columns x rows), so the row multiplicities repeat per column
    scale = np.concatenate([field.eta_y / np.tile(field.multiplicity, field.C),
                            np.full(field.n_logits, field.eta_z)])
    rhs = field.rhs(0.0, y)
    assert np.linalg.norm(rhs - scale * grad) / np.linalg.norm(rhs) < 1e-6


@pytest.mark.parametrize("seed", range(3))
def test_lumped_and_unlumped_rhs_agree(seed):
    """M = 60 with only 14 active tokens: lumped rhs == dense rhs to 1e-12."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=60, K=4, n_queries=2, support=6, active=14)
    assert data.active_tokens.size < data.vocab_size / 2
    z0 = rng.normal(size=(data.query_tokens.size, data.vocab_size))
    field = ExactFlow(data, 1.3, 0.6, start=(None, z0))
    y = field.initial_state() + random_state(field, rng, 0.5)
    Y, Z = unlump(field, y)
    dY, dZ = dense_rhs(data, Y, Z, 1.3, 0.6)
    dY_lumped, dZ_lumped = unlump(field, field.rhs(0.0, y), base=False)
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
    return odeflow.solve(data, eta_y=1.0, eta_z=0.5, t_span=(0, 1e4), start=(None, z0), rtol=1e-10,
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


# ------------------------------------------- sparse storage, initial decoder
@pytest.mark.parametrize("seed", range(3))
def test_sparse_and_dense_storage_match_the_dense_reference(seed):
    """Both support storages give the dense reference's rhs to 1e-12, on M = 80."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=80, K=6, n_queries=3, support=5, active=30)
    z0 = rng.normal(size=(data.query_tokens.size, data.vocab_size))
    for storage in ("dense", "sparse"):
        field = ExactFlow(data, 1.3, 0.6, start=(None, z0), storage=storage)
        assert field.ops.dense == (storage == "dense")
        y = field.initial_state() + random_state(field, rng, 0.5)
        Y, Z = unlump(field, y)
        dY, dZ = dense_rhs(data, Y, Z, 1.3, 0.6)
        dYs, dZs = unlump(field, field.rhs(0.0, y), base=False)
        scale = max(np.abs(dY).max(), np.abs(dZ).max())
        assert np.abs(dY - dYs).max() <= 1e-12 * scale
        assert np.abs(dZ - dZs).max() <= 1e-12 * scale
        assert dense_objective(data, Y, Z) == pytest.approx(field.objective(y), rel=1e-12)


def test_sparse_storage_jacobian_and_gradient():
    """Sparse storage: analytic Jacobian vs finite differences, rhs = eta * grad J."""
    rng = np.random.default_rng(7)
    data = random_model(rng, M=14, K=4, n_queries=2, support=4, active=10)
    field = ExactFlow(data, 1.1, 0.5, storage="sparse")
    y = random_state(field, rng)
    J = field.jacobian(0.0, y)
    h = 1e-6
    eye = np.eye(field.size)
    Jfd = np.stack([(field.rhs(0, y + h * e) - field.rhs(0, y - h * e)) / (2 * h)
                    for e in eye], axis=1)
    assert np.abs(J - Jfd).max() <= 1e-7 * max(1.0, np.abs(J).max())
    grad = np.array([(field.objective(y + h * e) - field.objective(y - h * e)) / (2 * h)
                     for e in eye])
    scale = np.concatenate([field.eta_y / np.tile(field.multiplicity, field.C),
                            np.full(field.n_logits, field.eta_z)])
    rhs = field.rhs(0.0, y)
    assert np.linalg.norm(rhs - scale * grad) / np.linalg.norm(rhs) < 1e-6


def test_sparse_storage_product_and_gather_agree(monkeypatch):
    """Supports.sample: the one-product path and the chunked gather give the same rhs."""
    import odeflow.fields.classes as classes

    rng = np.random.default_rng(11)
    data = random_model(rng, M=20, K=5, n_queries=2, support=5, active=15)
    field = ExactFlow(data, 1.1, 0.5, storage="sparse")
    y = random_state(field, rng)
    product = field.rhs(0.0, y)
    monkeypatch.setattr(classes, "SAMPLE_PRODUCT_LIMIT", 0)
    monkeypatch.setattr(classes, "GATHER_CHUNK", 7)
    gather = field.rhs(0.0, y)
    np.testing.assert_allclose(product, gather, rtol=1e-12, atol=1e-14)


def test_logits_carried_only_where_a_class_of_the_query_can_attend():
    rng = np.random.default_rng(3)
    data = random_model(rng, M=50, K=4, n_queries=2, support=3, active=40)
    field = ExactFlow(data, 1.0, 1.0)
    expected = sum(np.unique(np.concatenate([data.classes[data.class_index(n)].support
                                             for n in data.classes_of_query(m)])).size
                   for m in data.query_tokens)
    assert field.n_logits == expected < data.query_tokens.size * data.active_tokens.size


@pytest.mark.parametrize("seed", range(2))
def test_unlumped_decoder_matches_dense_reference(seed):
    """An asymmetric Y(0) keeps all M rows; its rhs equals the dense one to 1e-12."""
    rng = np.random.default_rng(seed)
    data = random_model(rng, M=20, K=3, n_queries=2, support=5, active=12)
    y0 = rng.normal(size=(20, 20))
    field = ExactFlow(data, 0.8, 0.6, start=(y0, None))
    assert not field.lumped and field.R == 20
    y = field.initial_state()
    Y, Z = unlump(field, y)
    assert np.array_equal(Y[:, data.active_tokens], y0[:, data.active_tokens])
    dY, dZ = dense_rhs(data, y0, Z, 0.8, 0.6)
    dYs, dZs = unlump(field, field.rhs(0.0, y), base=False)
    scale = max(np.abs(dY).max(), np.abs(dZ).max())
    assert np.abs(dY - dYs).max() <= 1e-12 * scale
    assert np.abs(dZ - dZs).max() <= 1e-12 * scale
    assert dense_objective(data, y0, Z) == pytest.approx(field.objective(y), rel=1e-12)


def test_symmetric_y0_is_lumped_and_unlumped_flow_agrees():
    """From a symmetric Y(0) the lumped and the un-lumped fields agree to 1e-12 (as
    full M x M derivatives, at states along the lumped solve); the two solves agree to
    1e-10 (their adaptive steps differ by round-off)."""
    rng = np.random.default_rng(4)
    data = random_model(rng, M=16, K=3, n_queries=2, support=5, active=10)
    y0 = np.zeros((16, 16))
    y0[data.next_tokens] = rng.normal(size=(3, 16))
    others = np.setdiff1d(np.arange(16), data.next_tokens)
    y0[others] = rng.normal(size=16)                         # equal non-next rows
    y0[others[0], np.setdiff1d(np.arange(16), data.active_tokens)] += 5.0  # inactive: ignored
    lumped = ExactFlow(data, 1.0, 0.5, start=(y0, None))
    full = ExactFlow(data, 1.0, 0.5, start=(y0, None), unlumped=True)
    assert lumped.lumped and not full.lumped
    kw = dict(eta_y=1.0, eta_z=0.5, t_span=(0, 50.0), rtol=1e-12, atol=1e-14, method="DOP853",
              progress=False)
    a = odeflow.solve(data, start=(y0, None), **kw)
    b = odeflow.solve(data, start=(y0, None), unlumped=True, **kw)
    assert a.decoder_layout == "lumped" and b.decoder_layout == "full"
    for i in (0, a.t.size // 2, a.t.size - 1):
        Y, z = a.decoder_at(i), a.z_active[i]
        ya = np.empty(lumped.size)
        ya[: lumped.C * lumped.R] = np.vstack([Y[data.next_tokens], Y[others[:1]]])[
            :, lumped.columns].T.ravel()
        yb = np.empty(full.size)
        yb[: full.C * full.R] = Y[:, full.columns].T.ravel()
        cols = np.searchsorted(data.active_tokens, lumped.logit_token)
        ya[lumped.C * lumped.R:] = z[lumped.logit_query, cols]
        yb[full.C * full.R:] = z[full.logit_query, cols]
        dYa, dZa = unlump(lumped, lumped.rhs(0, ya), base=False)
        dYb, dZb = unlump(full, full.rhs(0, yb), base=False)
        scale = max(np.abs(dYa).max(), np.abs(dZa).max())
        assert np.abs(dYa - dYb).max() <= 1e-12 * scale
        assert np.abs(dZa - dZb).max() <= 1e-12 * scale
        assert lumped.objective(ya) == pytest.approx(full.objective(yb), rel=1e-12)
    assert np.abs(a.z_active - b.z_active).max() <= 1e-10
    assert np.abs(a.decoder_at(-1) - b.decoder_at(-1)).max() <= 1e-10
    # the inactive columns of Y(0) are kept as they are
    assert np.array_equal(a.decoder_at(-1)[:, ~np.isin(np.arange(16), data.active_tokens)],
                          y0[:, ~np.isin(np.arange(16), data.active_tokens)])


def test_asymmetric_y0_solve_and_accessors():
    rng = np.random.default_rng(5)
    data = random_model(rng, M=12, K=2, n_queries=1, support=4, active=8)
    y0 = 0.1 * rng.normal(size=(12, 12))
    traj = odeflow.solve(data, start=(y0, None), t_span=(0, 100.0), progress=False)
    assert traj.decoder_layout == "full"
    assert np.abs(traj.decoder_at(0) - y0).max() <= 1e-15
    assert traj.decoder.shape == (traj.t.size, 12, 12)
    J = traj.objective
    assert np.all(np.diff(J) >= -1e-10 * np.abs(J).max()) and J[-1] > J[0]
    # 1^T Y is conserved (every column of dY sums to zero)
    Y = traj.decoder
    assert np.abs(Y.sum(axis=1) - y0.sum(axis=0)).max() < 1e-8


@pytest.mark.parametrize("bad, match", [(np.zeros((3, 3)), "shape"),
                                        (np.full((12, 12), np.nan), "finite"),
                                        ("text", "real numbers")])
def test_y0_is_validated(bad, match):
    data = random_model(np.random.default_rng(0), M=12, K=2, n_queries=1, support=4)
    with pytest.raises(odeflow.ValidationError, match=match) as info:
        odeflow.solve(data, start=(bad, None), t_span=(0, 1.0))
    assert info.value.field == "y0"


def test_decoder_is_never_built_beyond_its_limit():
    """shared-query-medium (M = 1000, the former syn-medium): the full decoder would be
    8 n M^2 bytes; it is refused unless asked for."""
    data = odeflow.DataModel.preset("shared-query-medium")
    traj = odeflow.solve(data, t_span=(0, 10.0), t_eval=np.linspace(0, 10, 40),
                         progress=False)
    assert traj.decoder_nbytes() == 8 * 40 * 1000 ** 2
    with pytest.raises(odeflow.ValidationError, match="bytes"):
        _ = traj.decoder
    with pytest.raises(odeflow.ValidationError, match="bytes"):
        traj.full_decoder()
    Y = traj.decoder_at(-1)
    assert Y.shape == (1000, 1000)
    n0 = int(data.next_tokens[0])
    assert np.array_equal(Y[n0, data.active_tokens], traj.decoder_lumped[-1, 0])
    small = traj.full_decoder(max_bytes=traj.decoder_nbytes())
    assert np.array_equal(small[-1], Y)


@pytest.mark.parametrize("preset", ["syn-small", "syn-medium-3", "shared-query-small"])
def test_fused_small_state_rhs_equals_the_general_path(preset):
    """ExactFlow.rhs takes a fused path for dense storage; it must equal rates() exactly
    up to rounding (the batched path and the Jacobian use rates/forward)."""
    data = odeflow.DataModel.preset(preset)
    field = ExactFlow(data, 1.7, 0.3)
    assert field.ops.dense
    rng = np.random.default_rng(11)
    for scale in (0.1, 3.0, 30.0):
        y = rng.normal(size=field.size) * scale
        np.testing.assert_allclose(field.rhs(0.0, y), field.rates(y, 1.7, 0.3),
                                   rtol=1e-13, atol=1e-15)
