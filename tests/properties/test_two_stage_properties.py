"""Properties of the two-stage family over its strategy's data models
(:func:`odeflow.testing.two_stage.two_stage_models`)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import odeflow
from odeflow.data.two_stage import TwoStageData
from odeflow.testing.two_stage import two_stage_models

FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FEW
@given(data=two_stage_models())
def test_forms_round_trip(data, tmp_path_factory):
    """A drawn model survives ``to_dict``/``from_dict`` and its TOML file unchanged."""
    assert TwoStageData.from_dict(data.to_dict()) == data
    path = tmp_path_factory.mktemp("ts") / "model.toml"
    data.to_toml(path)
    assert TwoStageData.from_toml(path) == data


@FEW
@given(data=two_stage_models(), seed=st.integers(0, 2**31 - 1))
def test_margin_blocks_keep_their_margins(data, seed):
    """Every example with a P block has ``y <p, w_P> >= gamma_P``, and with a margin Q
    block ``y <q, w_Q> >= gamma_Q`` (the half-space law of the blocks); labels are +-1."""
    x, y, kind = data.sample_examples(200, np.random.default_rng(seed))
    p, q = x[:, :data.d_p], x[:, data.d_p:]
    assert set(np.unique(y)) <= {-1, 1}
    has_p = kind != 1
    assert np.all(y[has_p] * (p[has_p] @ data.direction_p) >= data.gamma_p - 1e-12)
    if data.q_kind == "margin":
        has_q = kind != 0
        assert np.all(y[has_q] * (q[has_q] @ data.direction_q) >= data.gamma_q - 1e-12)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=two_stage_models(max_block=2, q_kinds=("margin",)))
def test_population_flow_does_not_raise_the_loss(data):
    """Gradient flow on the population loss: the loss never rises along the solve (the
    margin Q: its expectations are closed forms; the cluster Q's quadrature costs about
    20 ms a right-hand side)."""
    t = np.concatenate([[0.0], np.geomspace(0.01, 5.0, 8)])
    traj = odeflow.solve(data, t_span=(0.0, 5.0), t_eval=t, rtol=1e-8, atol=1e-11)
    assert traj.success
    assert np.all(np.diff(traj.loss) <= 1e-9 * (1.0 + np.abs(traj.loss[:-1])))
