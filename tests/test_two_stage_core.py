"""Two-stage family core: data, inner expectation, scorer, population flow, result type."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.differentiate import jacobian
from scipy.integrate import solve_ivp

from odeflow.data.two_stage import TwoStageData
from odeflow.errors import ValidationError
from odeflow.fields.two_stage import scoring
from odeflow.fields.two_stage.expectations import (
    inner_expectation,
    inner_gradient,
    kind_terms,
    relu_skew,
)
from odeflow.fields.two_stage.population import (
    PopulationFlow,
    full_loss_and_gradient,
    initial_blocks,
)
from odeflow.results.two_stage import TwoStageTrajectory, truncate_blocks


def numeric_gradient(fun, y):
    """Central differences with Richardson extrapolation (scipy.differentiate)."""
    def batched(x):
        flat = x.reshape(x.shape[0], -1)
        return np.array([fun(flat[:, i]) for i in range(flat.shape[1])]).reshape(x.shape[1:])

    result = jacobian(batched, y, initial_step=1e-3, tolerances={"atol": 1e-10, "rtol": 1e-8})
    assert np.all(result.success)
    return result.df


# ----------------------------------------------------------------- data
@pytest.mark.parametrize("kwargs, field", [
    ({"rho": 0.6}, "rho"), ({"rho": -0.01}, "rho"), ({"rho": float("nan")}, "rho"),
    ({"gamma_p": -1.0}, "gamma_p"), ({"gamma_q": 0.0}, "gamma_q"), ({"sigma0": 0.0}, "sigma0"),
    ({"sigma0": -1e-3}, "sigma0"), ({"w_p": (1.0, 2.0, 3.0)}, "w_p"), ({"w_q": (0.0, 0.0)}, "w_q"),
    ({"d_p": 3, "w_p": (1.0, 0.0)}, "w_p"), ({"d_q": 0}, "d_q"), ({"loss": "hinge"}, "loss"),
    ({"q_kind": "xor"}, "q_kind"), ({"zeta": -2.0}, "zeta"), ({"d_p": 2.5}, "d_p"),
    ({"rho": "0.2"}, "rho"),
])
def test_bad_inputs_refused_by_name(kwargs, field):
    with pytest.raises(ValidationError) as info:
        TwoStageData(**kwargs)
    assert info.value.field == field


def test_forms_round_trip_and_presets():
    for name in ("ts-default", "ts-cluster"):
        data = TwoStageData.preset(name)
        assert TwoStageData.from_dict(data.to_dict()) == data
        assert TwoStageData.from_toml_string(data.to_toml_string()) == data
    assert TwoStageData.preset("ts-cluster").q_kind == "cluster"
    data = TwoStageData(w_p=(3.0, 4.0))  # a non-unit direction is normalised
    assert data.w_p == pytest.approx((0.6, 0.8))
    with pytest.raises(ValidationError) as info:
        TwoStageData.from_dict({"gamma_p": 1.0, "margin": 2.0})
    assert info.value.field == "margin"


def test_sampler_kinds_margins_and_reproducibility():
    data = TwoStageData(rho=0.3, gamma_p=2.0, gamma_q=0.7, w_q=(1.0, -1.0))
    n = 200_000
    x, y, kind = data.sample_examples(n, np.random.default_rng(4))
    freq = np.bincount(kind, minlength=3) / n
    assert np.abs(freq - [0.3, 0.3, 0.4]).max() < 5 * np.sqrt(0.25 / n)
    assert abs(np.mean(y == 1) - 0.5) < 5 * np.sqrt(0.25 / n)
    p_proj = y * (x[:, :2] @ data.direction_p)
    q_proj = y * (x[:, 2:] @ data.direction_q)
    # present blocks: y <x, w> >= gamma (the half-space condition); absent: label-blind
    assert np.all(p_proj[kind != 1] >= data.gamma_p - 1e-12)
    assert np.all(q_proj[kind != 0] >= data.gamma_q - 1e-12)
    assert abs(np.mean(p_proj[kind == 1])) < 5 / np.sqrt(np.sum(kind == 1))
    assert abs(np.mean(q_proj[kind == 0])) < 5 / np.sqrt(np.sum(kind == 0))
    # the component along w is gamma + |c|: mean gamma + sqrt(2/pi), variance 1 - 2/pi
    assert np.mean(p_proj[kind != 1]) == pytest.approx(2.0 + np.sqrt(2 / np.pi), abs=0.01)
    assert np.var(p_proj[kind != 1]) == pytest.approx(1 - 2 / np.pi, abs=0.01)
    again = data.sample_examples(n, np.random.default_rng(4))
    assert all(np.array_equal(a, b) for a, b in zip((x, y, kind), again, strict=True))
    xq, yq, kq = data.sample_queries(1000, np.random.default_rng(1), kind=2)
    assert xq.shape == (1000, 4) and np.all(kq == 2)
    with pytest.raises(ValidationError) as info:
        data.sample_queries(10, np.random.default_rng(1), kind=3)
    assert info.value.field == "kind"


def test_cluster_sampler():
    data = TwoStageData(q_kind="cluster", zeta=3.0)
    x, y, kind = data.sample_queries(100_000, np.random.default_rng(2), kind=1)
    proj = x[:, 2:] @ data.direction_q
    assert abs(np.mean(proj[y == 1])) < 0.03
    neg = proj[y == -1]
    assert np.mean(np.abs(neg)) > 2.5 and abs(np.mean(neg)) < 0.05


# ----------------------------------------------------------------- inner expectation
def test_relu_skew_against_monte_carlo_and_its_derivatives():
    rng = np.random.default_rng(0)
    n = 1_000_000
    c, z = np.abs(rng.standard_normal(n)), rng.standard_normal(n)
    for m, u, s in [(0.3, 1.2, 0.7), (-0.5, 2.0, 0.3), (1.0, -1.5, 0.5), (-0.2, -0.4, 1.1)]:
        value, dm, du, ds = relu_skew(m, u, s)
        x = m + u * c + s * z
        for got, sample in ((value, np.maximum(x, 0)), (dm, x > 0), (du, c * (x > 0)),
                            (ds, z * (x > 0))):
            assert abs(got - np.mean(sample)) < 5 * np.std(sample) / np.sqrt(n)
        # Euler: R is positively homogeneous of degree 1
        assert m * dm + u * du + s * ds == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("q_kind", ["margin", "cluster"])
def test_inner_expectation_equals_monte_carlo(q_kind):
    """Every kind, 10^6 examples each; tolerance 5 standard errors of the sample mean."""
    data = TwoStageData(q_kind=q_kind, gamma_p=2.0, gamma_q=0.8, w_p=(1.0, 0.3))
    rng = np.random.default_rng(11)
    n = 1_000_000
    for v in (np.array([0.7, -0.3, 0.4, 1.1]), np.array([-1.2, 0.5, -0.8, 0.2])):
        values, grads = kind_terms(data, v)
        for k in range(3):
            x, y, _ = data.sample_queries(n, rng, kind=k)
            s = x @ v
            sample = y * np.maximum(s, 0)
            assert abs(values[k] - sample.mean()) < 5 * sample.std() / np.sqrt(n)
            gsample = (y * (s > 0))[:, None] * x
            assert np.all(np.abs(grads[k] - gsample.mean(0)) < 5 * gsample.std(0) / np.sqrt(n)
                          + 1e-12)


@pytest.mark.parametrize("q_kind", ["margin", "cluster"])
def test_inner_gradient_is_the_derivative(q_kind):
    data = TwoStageData(q_kind=q_kind)
    rng = np.random.default_rng(5)
    for _ in range(3):
        v = rng.normal(size=4)
        fd = numeric_gradient(lambda u: float(inner_expectation(data, u)), v)
        assert np.allclose(inner_gradient(data, v), fd, atol=1e-8)


def test_margin_inner_expectation_is_linear():
    data = TwoStageData.preset("ts-default")
    v = np.random.default_rng(3).normal(size=(5, 4))
    mu = 0.8 * (np.array([3.0, 3.0, 0.5, 0.5]) / np.sqrt(2) + np.sqrt(1 / np.pi))
    assert np.allclose(inner_expectation(data, v), 0.5 * v @ mu, atol=1e-14)


@given(w_q=st.lists(st.floats(-5, 5), min_size=4, max_size=4),
       q=st.lists(st.floats(-6, 6), min_size=2, max_size=2),
       zeta=st.floats(0.05, 6.0))
def test_cluster_q_alone_never_scores_positive(w_q, q, zeta):
    """Cluster Q, W_P = 0: f(x_q) = g(0, W_Q q_q) <= 0 for every W_Q and every query
    (Jensen: mu -> E[ReLU(N(mu, s^2))] is convex)."""
    data = TwoStageData(q_kind="cluster", zeta=zeta)
    b = np.array(w_q).reshape(2, 2) @ np.array(q)
    f = inner_expectation(data, np.concatenate([np.zeros(2), b]))
    assert f <= 1e-12 * (1.0 + np.abs(b).sum())


# ----------------------------------------------------------------- scorer
@pytest.mark.parametrize("kwargs", [{}, {"loss": "squared"}, {"q_kind": "cluster"}])
def test_score_equals_monte_carlo(kwargs):
    """2 x 10^5 sampled queries per kind; tolerance 5 standard errors (plus the cluster
    sample's own error, 2e-3)."""
    data = TwoStageData(**kwargs)
    rng = np.random.default_rng(8)
    W_P, W_Q = rng.normal(size=(2, 2)) * 0.8, rng.normal(size=(2, 2)) * 1.5
    scores = scoring.score(data, W_P, W_Q)
    n = 200_000
    slack = 2e-3 if data.q_kind == "cluster" else 0.0
    for k, name in enumerate(("p_only", "q_only", "both")):
        x, y, _ = data.sample_queries(n, rng, kind=k)
        f = inner_expectation(data, np.concatenate([x[:, :2] @ W_P.T, x[:, 2:] @ W_Q.T], 1))
        ell = scoring.loss_derivatives(data.loss, y * f)[0]
        right = y * f > 0
        assert abs(scores[f"loss_{name}"] - ell.mean()) < 5 * ell.std() / np.sqrt(n) + slack
        acc = scores[f"accuracy_{name}"]
        se = np.sqrt(max(acc * (1 - acc), 1 / n) / n)
        assert abs(acc - right.mean()) < 5 * se + slack
    assert scores["loss"] == pytest.approx(
        data.kind_probabilities @ [scores[f"loss_{k}"] for k in ("p_only", "q_only", "both")])


def test_score_is_scale_free_in_accuracy():
    data = TwoStageData.preset("ts-default")
    rng = np.random.default_rng(2)
    W_P, W_Q = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    a, b = scoring.score(data, W_P, W_Q), scoring.score(data, 7.0 * W_P, 7.0 * W_Q)
    for key in ("accuracy_p_only", "accuracy_q_only", "accuracy_both"):
        assert a[key] == pytest.approx(b[key], abs=1e-12)


def test_score_refuses_wrong_shapes():
    data = TwoStageData.preset("ts-default")
    with pytest.raises(ValidationError) as info:
        scoring.score(data, np.eye(3), np.eye(2))
    assert info.value.field == "W_P"


# ----------------------------------------------------------------- population flow
@pytest.mark.parametrize("kwargs", [{}, {"loss": "squared", "rho": 0.35}, {"q_kind": "cluster"}])
def test_population_gradient_equals_finite_differences(kwargs):
    field = PopulationFlow(TwoStageData(**kwargs))
    rng = np.random.default_rng(6)
    for _ in range(2):
        y = rng.normal(scale=0.7, size=field.size)
        fd = numeric_gradient(field.loss, y)
        assert np.allclose(-field.gradient(y), fd, atol=1e-7, rtol=1e-6)
        assert np.array_equal(field.rhs(0.0, y), field.rate_vector * field.gradient(y))


def test_block_gradient_is_the_block_diagonal_part_of_the_full_w_gradient():
    data = TwoStageData(gamma_q=0.9, w_q=(0.2, 1.0))
    field = PopulationFlow(data)
    rng = np.random.default_rng(7)
    W = rng.normal(scale=0.6, size=(4, 4))
    full_fd = numeric_gradient(lambda w: full_loss_and_gradient(data, w.reshape(4, 4))[0],
                               W.ravel()).reshape(4, 4)
    assert np.allclose(full_loss_and_gradient(data, W)[1], full_fd, atol=1e-7)
    W_block = np.zeros((4, 4))
    W_block[:2, :2], W_block[2:, 2:] = W[:2, :2], W[2:, 2:]
    block_fd = numeric_gradient(lambda w: full_loss_and_gradient(data, w.reshape(4, 4))[0],
                                W_block.ravel()).reshape(4, 4)
    y = np.concatenate([W[:2, :2].ravel(), W[2:, 2:].ravel()])
    grad = -field.gradient(y)
    assert np.allclose(grad[:4].reshape(2, 2), block_fd[:2, :2], atol=1e-7)
    assert np.allclose(grad[4:].reshape(2, 2), block_fd[2:, 2:], atol=1e-7)
    assert np.abs(block_fd[:2, 2:]).max() > 1e-3  # the flow leaves out a non-zero part


@pytest.mark.parametrize("kwargs", [{}, {"loss": "squared"}])
def test_loss_non_increasing_along_the_flow(kwargs):
    data = TwoStageData(**kwargs)
    field = PopulationFlow(data, start=(np.array([[0.3, -0.2], [0.1, 0.05]]),
                                        np.array([[0.02, 0.1], [-0.1, 0.0]])))
    t = np.concatenate([[0.0], np.geomspace(1e-3, 200.0, 60)])
    sol = solve_ivp(field.rhs, (0, 200.0), field.initial_state(), method="LSODA", t_eval=t,
                    rtol=1e-8, atol=1e-10)
    assert sol.success
    losses = np.array([field.loss(row) for row in sol.y.T])
    assert np.all(np.diff(losses) <= 1e-9 * np.abs(losses[:-1]))
    assert losses[-1] < 0.5 * losses[0]


def test_start_option():
    data = TwoStageData.preset("ts-default")
    W = np.diag([1.0, 2.0, 3.0, 4.0])
    W_P, W_Q = initial_blocks(data, W)
    assert np.array_equal(W_P, np.diag([1.0, 2.0])) and np.array_equal(W_Q, np.diag([3.0, 4.0]))
    W[0, 3] = 0.1
    with pytest.raises(ValidationError) as info:
        PopulationFlow(data, start=W)
    assert info.value.field == "start"
    with pytest.raises(ValidationError) as info:
        PopulationFlow(data, start=(np.eye(2), np.eye(3)))
    assert info.value.field == "start.W_Q"
    field = PopulationFlow(data)
    assert np.array_equal(field.initial_state(), 0.01 * np.array([1, 0, 0, 1, 1, 0, 0, 1.0]))


# ----------------------------------------------------------------- result type
def _short_trajectory():
    data = TwoStageData.preset("ts-default")
    field = PopulationFlow(data)
    t = np.array([0.0, 0.5, 5.0, 50.0])
    sol = solve_ivp(field.rhs, (0, 50.0), field.initial_state(), method="LSODA", t_eval=t,
                    rtol=1e-8, atol=1e-10)
    return field.trajectory(sol.t, sol.y.T, {"nfev": sol.nfev})


def test_trajectory_series_and_rank_truncation(tmp_path):
    traj = _short_trajectory()
    assert isinstance(traj, TwoStageTrajectory)
    assert traj.W_P.shape == (4, 2, 2) and traj.singular_values_q.shape == (4, 2)
    assert np.all(np.diff(traj.singular_values_p, axis=1) <= 0)
    assert traj.accuracy_p_only.shape == traj.loss_q_only.shape == (4,)
    full = traj.rank_truncation(-1)
    assert list(full["rank_kept"]) == [1, 2, 3, 4]
    assert full["accuracy_q_only"][-1] == pytest.approx(traj.accuracy_q_only[-1], abs=1e-12)
    # at T the largest singular value is W_Q's: keeping one leaves P-only queries at chance
    assert traj.largest_block()[-1] == "Q" and traj.largest_block()[1] == "P"
    assert full["accuracy_p_only"][0] <= 0.5 + 1e-9
    table = traj.summary_table(4).splitlines()
    assert "acc Q only" in table[0] and len(table) == 5
    path = tmp_path / "ts.npz"
    traj.save(path)
    back = TwoStageTrajectory.load(path, scorer=scoring.score)
    assert np.array_equal(back.W_Q, traj.W_Q) and back.data == traj.data
    assert np.array_equal(back.accuracy_both, traj.accuracy_both)


def test_truncate_blocks_keeps_the_top_singular_values():
    rng = np.random.default_rng(1)
    W_P, W_Q = rng.normal(size=(2, 2)), 3.0 * rng.normal(size=(3, 3))
    full = np.zeros((5, 5))
    full[:2, :2], full[2:, 2:] = W_P, W_Q
    U, S, Vt = np.linalg.svd(full)
    for r in range(1, 6):
        a, b = truncate_blocks(W_P, W_Q, r)
        expect = (U[:, :r] * S[:r]) @ Vt[:r]
        assert np.allclose(a, expect[:2, :2]) and np.allclose(b, expect[2:, 2:])
