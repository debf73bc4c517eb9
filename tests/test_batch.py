"""The batched solve (issue: scale): many learning-rate points of one data model as one
stacked state give the same answers as separate solves."""

import numpy as np
import pytest

import odeflow
from odeflow.fields.exact import ExactFlow
from odeflow.fields.reduced import ReducedFlow
from odeflow.fields.stacked import StackedField
from tests.reference import random_model

POINTS = [(0.3, 0.2), (1.0, 1.0), (3.0, 0.5), (0.5, 4.0)]


@pytest.mark.parametrize("flow", ["exact", "reduced"])
@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_stacked_rhs_is_the_separate_rhs(flow, storage):
    """One vectorised call equals the P separate right-hand sides (to round-off)."""
    rng = np.random.default_rng(1)
    data = random_model(rng, M=30, K=4, n_queries=2, support=5, active=15)
    cls = ExactFlow if flow == "exact" else ReducedFlow
    fields = [cls(data, ey, ez, storage=storage) for ey, ez in POINTS]
    stacked = StackedField(fields)
    y = stacked.initial_state() + 0.3 * rng.normal(size=stacked.size)
    if flow == "reduced":
        for i in range(len(POINTS)):
            y[i * fields[0].size:i * fields[0].size + 4] = rng.uniform(0, 5, size=4)
    out = stacked.rhs(0.0, y).reshape(len(POINTS), -1)
    for i, f in enumerate(fields):
        ref = f.rhs(0.0, y[i * f.size:(i + 1) * f.size])
        assert np.abs(out[i] - ref).max() <= 1e-13 * np.abs(ref).max()


@pytest.mark.parametrize("flow", ["exact", "reduced"])
def test_batched_solve_matches_separate_solves(flow):
    data = odeflow.DataModel.preset("syn-small")
    kw = dict(flow=flow, t_span=(0, 1e3), t_eval=[0.0, 10.0, 100.0, 1e3], rtol=1e-9,
              atol=1e-11, progress=False)
    batch = odeflow.solve_batch(data, POINTS, **kw)
    assert len(batch) == len(POINTS)
    for (ey, ez), traj in zip(POINTS, batch, strict=True):
        single = odeflow.solve(data, eta_y=ey, eta_z=ez, **kw)
        assert traj.meta["eta_y"] == ey and traj.meta["eta_z"] == ez
        assert traj.stats["batch_size"] == len(POINTS)
        assert np.abs(traj.z_carried - single.z_carried).max() < 1e-6
        assert np.abs(traj.decoder_lumped - single.decoder_lumped).max() < 1e-6


def test_batched_radau_uses_the_block_diagonal_jacobian():
    data = odeflow.DataModel.preset("syn-small")
    kw = dict(t_span=(0, 100.0), t_eval=[0.0, 100.0], rtol=1e-9, atol=1e-11, progress=False)
    batch = odeflow.solve_batch(data, POINTS[:2], method="Radau", **kw)
    assert batch[0].stats["analytic_jacobian"] and batch[0].stats["njev"] > 0
    for (ey, ez), traj in zip(POINTS[:2], batch, strict=True):
        single = odeflow.solve(data, eta_y=ey, eta_z=ez, method="Radau", **kw)
        assert np.abs(traj.z_carried - single.z_carried).max() < 1e-6


@pytest.mark.parametrize("params", [[], [(1.0,)], "ab", [(1.0, -1.0)], [(1.0, float("nan"))]])
def test_bad_points_are_refused(params):
    data = odeflow.DataModel.preset("syn-small")
    with pytest.raises(odeflow.ValidationError):
        odeflow.solve_batch(data, params, t_span=(0, 1.0))
