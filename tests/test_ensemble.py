"""Level T per class block and many starts as one state (issue 20's cost goal): the same flows.

:meth:`FiniteTFlow.gradients` (per class block) and ``storage="blocked"`` against
the field's dense gradient, :func:`odeflow.solver.solve_ensemble` against one
solve per start, and the Fig. 6 ensemble (:func:`odeflow.analysis.paper.optflow_ensemble`,
blocked storage) against one dense-storage solve per seed (the code it replaced).
"""

import numpy as np
import pytest

import odeflow
from odeflow.analysis.measures import distinct_entropy
from odeflow.errors import ValidationError
from odeflow.experiments import paper
from odeflow.fields.ensemble import StartEnsemble
from odeflow.fields.exact import ExactFlow
from odeflow.fields.finite_t import FiniteTFlow
from odeflow.solver import solve, solve_ensemble
from odeflow.training import training_start


@pytest.fixture(scope="module")
def medium():
    return odeflow.DataModel.preset("syn-medium-1")


@pytest.mark.parametrize("start", ["uniform", "zero"])
def test_blocked_gradients_equal_the_fields_gradient(medium, start):
    """Un-lumped (random start) and lumped (zero start) decoders, states moved off the start."""
    fields = []
    for seed in range(3):
        y0, z0 = training_start(medium, seed, start)
        fields.append(FiniteTFlow(medium, 2.0, 1.0, start=(y0, z0), seq_len=16,
                                  sample_size=8))
    rng = np.random.default_rng(5)
    states = np.stack([f.initial_state() for f in fields])
    states += 0.5 * rng.standard_normal(states.shape)
    want = np.stack([fields[0].gradient(y) for y in states])
    got = fields[0].gradients(states)
    assert fields[0].lumped == (start == "zero")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())
    # a sample where some class token is never drawn (short sequences): still equal
    sparse_draw = FiniteTFlow(medium, 2.0, 1.0, seq_len=3, sample_size=2)
    assert sparse_draw.C < medium.active_tokens.size
    y = sparse_draw.initial_state() + 0.5 * rng.standard_normal(sparse_draw.size)
    np.testing.assert_allclose(sparse_draw.gradients(y[None])[0], sparse_draw.gradient(y),
                               rtol=0, atol=1e-12)


def test_ensemble_of_momentum_flows_equals_one_solve_per_start(medium):
    starts = [training_start(medium, s) for s in (0, 1, 2)]
    steps = np.arange(0.0, 21.0)
    options = {"flow": "finite_t", "eta_y": 2.0, "eta_z": 1.0, "t_span": (0.0, 20.0),
               "t_eval": steps, "method": "RK45", "rtol": 1e-6, "atol": 1e-8,
               "optimizer": odeflow.Momentum(0.9), "seq_len": 32, "sample_size": 8,
               "progress": False}
    together = solve_ensemble(medium, starts, **options)
    assert len(together) == 3 and together[0].stats["ensemble_size"] == 3
    for (y0, z0), tr in zip(starts, together, strict=True):
        alone = solve(medium, start=(y0, z0), **options)
        np.testing.assert_array_equal(tr.t, alone.t)
        assert tr.meta["optimizer"] == alone.meta["optimizer"]
        scale = np.abs(alone.z_active).max()
        assert np.abs(tr.z_active - alone.z_active).max() < 1e-5 * scale
        assert np.abs(tr.series["velocity"] - alone.series["velocity"]).max() < 1e-5 * scale


def test_blocked_storage_is_the_dense_field(medium):
    y0, z0 = training_start(medium, 4)
    dense, blocked = (FiniteTFlow(medium, 2.0, 1.0, start=(y0, z0), seq_len=16,
                                  sample_size=8, storage=st) for st in ("dense", "blocked"))
    y = dense.initial_state() + 0.3 * np.random.default_rng(2).standard_normal(dense.size)
    want = dense.rhs(0.0, y)
    np.testing.assert_allclose(blocked.rhs(0.0, y), want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(blocked.gradient(y), dense.gradient(y), rtol=0, atol=1e-12)
    assert blocked.nfev == 1 and blocked.objective(y) == pytest.approx(dense.objective(y))
    with pytest.raises(ValidationError, match="storage.*blocked"):
        FiniteTFlow(medium, 2.0, 1.0, storage="blocks")


def test_fig6_ensemble_equals_dense_per_seed_solves_in_entropy(medium):
    """The Level T heavy-ball ensemble (blocked storage) within 1e-5 relative of the
    dense-storage solves it replaced, at every step and seed."""
    protocol = paper.FIG6.replace(eta_z=1.0, eta_y=2.0, steps=30)
    steps = np.arange(31)
    assert paper.OPTFLOWS["T"][1]["storage"] == "blocked"
    H, seconds = paper.optflow_ensemble(medium, protocol, [0, 1, 2], steps)
    assert H["T"].shape == (3, 31) and seconds["T"] > 0
    flow, options = paper.OPTFLOWS["T"]
    dense = {"T": (flow, {**options, "storage": "dense"})}
    for i, seed in enumerate((0, 1, 2)):
        y0, z0 = training_start(medium, seed)
        tr = paper.optimizer_flows(medium, protocol, steps, dense, start=(y0, z0))["T"]
        alone = distinct_entropy(medium, tr.z_active)
        assert np.all(np.abs(H["T"][i] - alone) <= 1e-5 * np.abs(alone))
    # the seeds' flows differ from each other far more than the two storages do
    assert np.abs(H["T"][0] - H["T"][1]).max() > 1e-3


def test_solve_ensemble_refuses_bad_input(medium):
    with pytest.raises(ValidationError, match="starts"):
        solve_ensemble(medium, [])
    with pytest.raises(ValidationError, match="method"):
        solve_ensemble(medium, [(None, None)], method="Radau")
    with pytest.raises(ValidationError, match="seq_len"):
        solve_ensemble(medium, [(None, None)], flow="exact", seq_len=16)


def test_start_ensemble_refuses_members_that_differ_in_more_than_the_start(medium):
    with pytest.raises(ValidationError, match="members"):
        StartEnsemble([ExactFlow(medium, 1.0, 0.1), ExactFlow(medium, 2.0, 0.1)])
    with pytest.raises(ValidationError, match="members"):
        StartEnsemble([])


def test_ensemble_copies_adams_exact_steps_as_solve_does():
    """With ``Adam(exact_steps=k)`` the ensemble's first ``k`` steps are the recursion's own
    states, as one ``solve`` per start has them (not integrated to the tolerance)."""
    data = odeflow.DataModel.preset("syn-small")
    starts = [training_start(data, s) for s in (0, 1)]
    opt = odeflow.Adam(exact_steps=3)
    ens = solve_ensemble(data, starts, flow="exact", eta_y=1.0, eta_z=0.1, optimizer=opt,
                         t_span=(0, 6), rtol=1e-8, atol=1e-10)
    for traj, (y0, z0) in zip(ens, starts, strict=True):
        one = solve(data, flow="exact", eta_y=1.0, eta_z=0.1, optimizer=opt, t_span=(0, 6),
                    start=(y0, z0), method="RK45", rtol=1e-8, atol=1e-10, progress=False)
        assert traj.stats["exact_until"] == 3.0
        np.testing.assert_allclose(traj.z_active[:4], one.z_active[:4], rtol=0, atol=1e-15)
        np.testing.assert_allclose(traj.z_active, one.z_active, rtol=0, atol=1e-6)


def test_ensemble_of_a_level_in_other_coordinates_follows_each_members_flow():
    """The induction levels' solver state holds ``ln|c|``, not the parameters: the stack
    evaluates each member's own right-hand side (``rate_vector * gradient`` on that state
    would ascend the loss)."""
    data = odeflow.InductionData.preset("ih-point")
    starts = [None, solve(data, t_span=(0.0, 1.0), progress=False).parameters(-1)]
    t_eval = np.array([0.0, 1.0, 4.0])
    together = solve_ensemble(data, starts, t_span=(0.0, 4.0), t_eval=t_eval, progress=False)
    for start, member in zip(starts, together, strict=True):
        alone = solve(data, start=start, t_span=(0.0, 4.0), t_eval=t_eval, method="RK45",
                      progress=False)
        np.testing.assert_allclose(member.loss, alone.loss, rtol=1e-5)
        assert member.loss[-1] < member.loss[0]


def test_old_positional_rates_warn_and_mean_the_keywords():
    data = odeflow.DataModel.preset("syn-small")
    kw = {"t_span": (0.0, 5.0), "t_eval": [0.0, 5.0], "progress": False}
    with pytest.warns(odeflow.RenamedWarning, match="eta_y=, eta_z="):
        old = solve_ensemble(data, [(None, None)], "exact", 2.0, 0.5, **kw)
    new = solve_ensemble(data, [(None, None)], "exact", eta_y=2.0, eta_z=0.5, **kw)
    np.testing.assert_array_equal(old[0].z_carried, new[0].z_carried)
    assert old[0].meta["eta_y"] == 2.0 and old[0].meta["eta_z"] == 0.5
    with pytest.raises(ValidationError, match="^eta_y: "):
        solve_ensemble(data, [(None, None)], "exact", 2.0, eta_y=1.0, **kw)
