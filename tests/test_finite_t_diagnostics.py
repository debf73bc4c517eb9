"""Level T diagnostics (spec sections 6 and 8): error in N, distance to Level E
as T grows, distance to an SGD ensemble on the flow-time axis, distinct entropy."""

import numpy as np
import pytest

import odeflow
from odeflow.analysis import (
    distance_to_exact,
    distance_to_sgd,
    flow_time,
    sample_size_error,
)
from odeflow.analysis.measures import distinct_entropy
from odeflow.plots.entropy import distinct_entropy as entropy_of_attention


@pytest.fixture(scope="module")
def data():
    return odeflow.DataModel.preset("syn-small")


def test_flow_time_map():
    # the warm-up map of spec section 6 (t_1 = 1, t_10 = 41.38, t_100 = 910.0)
    assert np.allclose(flow_time([0, 1, 10, 100], 0.9), [0, 1, 41.381, 910.0024], atol=1e-3)
    assert np.allclose(flow_time([3], 0.0), [3])


def test_distinct_entropy_is_the_entropy_of_the_distinct_attention(data):
    """From logits alone it equals the entropy of f_n restricted to G_DT(n) (same c_n)."""
    traj = odeflow.solve(data, eta_y=1.0, eta_z=3.0, t_span=(0, 1e3))
    ours = distinct_entropy(data, traj.z_active)
    assert np.allclose(ours, entropy_of_attention(traj), rtol=1e-12)
    assert ours[-1] < ours[0]  # attention on the distinct tokens sharpens (Theorem 2)
    stacked = distinct_entropy(data, np.stack([traj.z_active, traj.z_active]))
    assert stacked.shape == (2, traj.t.size)


def test_sample_size_error_shrinks_with_n(data):
    small = sample_size_error(data, 1.0, 1.0, 300, seq_len=32, sample_size=4)
    large = sample_size_error(data, 1.0, 1.0, 300, seq_len=32, sample_size=256)
    assert large.sample_size == 256 and large.seq_len == 32
    assert 0 < large.max_difference < small.max_difference / 2
    assert large.relative == pytest.approx(large.max_difference / large.z_range)


def test_distance_to_exact_shrinks_with_t(data):
    rows = distance_to_exact(data, 1.0, 1.0, 300, seq_lens=(100, 10**5),
                             sample_size=16)
    assert [r["seq_len"] for r in rows] == [100, 10**5]
    assert rows[1]["z_gap"] < rows[0]["z_gap"] / 5
    assert rows[1]["scaled_gap"] == pytest.approx(rows[1]["z_gap"] * np.sqrt(10**5 * 16))


def test_level_t_explains_sgd_at_short_sequences():
    """At T = 8, small steps and large batches, the SGD ensemble follows Level T,
    not Level E: the finite-T effect is what Level T models (two classes on one
    query; on the paper's syn-small, whose rarest distinct tokens appear in under 5%
    of 7-token contexts, Level T's error in N is larger: see docs/fidelity.md)."""
    data = odeflow.DataModel.preset("shared-query-small")
    d = distance_to_sgd(data, 0.5, 1.0, steps=120, seq_len=8, batch_size=512, seeds=3,
                        momentum=0.0, sample_size=2048, record=20)
    assert np.allclose(d.t, np.arange(0, 121, 20))
    s = d.summary()
    assert s["z_gap_finite_t"] < s["z_gap_exact"] / 3
    assert s["z_gap_exact"] > 10 * s["standard_error"]  # Level E's gap is not SGD noise


def test_momentum_runs_are_placed_on_flow_time(data):
    d = distance_to_sgd(data, 1.0, 1.0, steps=10, seq_len=16, batch_size=16, seeds=2,
                        momentum=0.5, sample_size=4, record=5)
    # warm-up map at mu = 0.5: t_k = 2 [k - (1 - 0.5^k)]
    assert np.allclose(d.t, [0, 2 * (5 - (1 - 0.5 ** 5)), 2 * (10 - (1 - 0.5 ** 10))])
    assert d.z_gap["exact"][0] == 0 and d.z_gap["finite_t"][0] == 0
    assert d.entropy["sgd"].shape == d.t.shape
    with pytest.raises(odeflow.ValidationError, match="levels"):
        distance_to_sgd(data, 1.0, 1.0, steps=2, seq_len=4, levels=("snap",))
