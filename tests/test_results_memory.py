"""Results memory (issue: scale): compact logits, subset and one-time accessors that
build no (n, M) array, and the save/load round trip of the compact storage."""

import tracemalloc

import numpy as np
import pytest

import odeflow
from tests.reference import random_model


@pytest.fixture(scope="module")
def traj():
    rng = np.random.default_rng(2)
    data = random_model(rng, M=40, K=4, n_queries=2, support=5, active=25)
    z0 = rng.normal(size=(2, 40))
    return odeflow.solve(data, flow="exact", t_span=(0, 100.0), start=(None, z0), progress=False)


def test_logits_are_stored_compactly(traj):
    data = traj.data
    assert traj.z_carried.shape[1] < data.query_tokens.size * data.active_tokens.size


@pytest.mark.parametrize("flow", ["exact", "reduced"])
def test_subset_and_one_time_accessors_agree_with_the_full_ones(traj, flow):
    data = traj.data
    if flow == "reduced":
        traj = odeflow.solve(data, flow="reduced", t_span=(0, 100.0), progress=False)
    tokens = np.array([0, 3, 17, 39, int(data.active_tokens[2])])
    for m in data.query_tokens:
        full = traj.logits(m)
        assert np.array_equal(traj.logits(m, tokens=tokens), full[:, tokens])
        assert np.array_equal(traj.logits(m, index=-1), full[-1])
        assert np.array_equal(traj.logits(m, tokens=tokens, index=5), full[5, tokens])
    for n in data.next_tokens:
        for name in ("attention", "features"):
            full = getattr(traj, name)(n)
            sub = getattr(traj, name)(n, tokens=tokens)
            assert np.allclose(sub, full[:, tokens], rtol=0, atol=1e-15)
            assert np.allclose(getattr(traj, name)(n, index=3), full[3], rtol=0, atol=1e-15)
        assert traj.attention(n).sum(axis=1) == pytest.approx(1.0, rel=1e-12)


def test_compact_trajectory_round_trips(traj, tmp_path):
    path = traj.save(tmp_path / "t.npz")
    back = odeflow.Trajectory.load(path)
    assert np.array_equal(back.z_active, traj.z_active)
    assert np.array_equal(back.decoder_lumped, traj.decoder_lumped)
    for m in traj.data.query_tokens:
        assert np.array_equal(back.logits(m), traj.logits(m))


def test_accessors_build_no_n_by_m_array_at_a_million_tokens():
    """M = 1e6: logits of a token subset and the attention at one time cost memory
    of the support, not 8 n M bytes (tracemalloc peak far below one (n, M) array)."""
    data = odeflow.DataModel(10**6, [
        odeflow.SequenceClass(5, 0, {10: 0.5, 20: 0.3, 30: 0.2}),
        odeflow.SequenceClass(6, 0, {20: 0.4, 40: 0.6})])
    traj = odeflow.solve(data, flow="reduced", t_span=(0, 10.0), progress=False)
    one_row = 8 * traj.t.size * data.vocab_size
    tracemalloc.start()
    z = traj.logits(0, tokens=[10, 20, 999_999])
    f = traj.attention(5, tokens=[10, 20, 30, 40])
    f_end = traj.attention(6, index=-1, tokens=[20, 40])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < one_row / 100
    assert z.shape == (traj.t.size, 3) and np.all(z[:, 2] == 0)
    assert f.shape == (traj.t.size, 4) and np.all(f[:, 3] == 0)
    assert f_end.sum() == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(odeflow.ValidationError, match="tokens"):
        traj.logits(0, tokens=[10**6])
    with pytest.raises(odeflow.ValidationError, match="index"):
        traj.attention(5, index=traj.t.size)
