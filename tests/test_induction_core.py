"""Induction-head fields (spec section 10): analytic gradients, the flow, rates, results."""

import numpy as np
import pytest

import odeflow
from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError
from odeflow.fields import FAMILIES, family_of
from odeflow.fields.induction import CopierFlow, InductionField, PopulationFlow
from odeflow.results.induction import InductionTrajectory

SMALL = {"ih-point": lambda: InductionData.preset("ih-point"),
         "dirichlet-3": lambda: InductionData(3, 3, 2, 2, alpha=0.3, num_kernels=3, seed=5),
         "bigram-H3": lambda: InductionData(2, 2, 3, 2, alpha=0.1, num_kernels=4, seed=1)}


def central_differences(fun, y, h=1e-5):
    out = np.zeros_like(y)
    for i in range(y.size):
        e = np.zeros_like(y)
        e[i] = h
        out[i] = (fun(y + e) - fun(y - e)) / (2 * h)
    return out


@pytest.mark.parametrize("model", sorted(SMALL))
@pytest.mark.parametrize("flow", [PopulationFlow, CopierFlow])
@pytest.mark.parametrize("loss", ["nll", "code"])
def test_gradient_equals_finite_differences(model, flow, loss):
    field = flow(SMALL[model](), loss=loss)
    rng = np.random.default_rng(abs(hash((model, flow.name, loss))) % 2**32)
    for _ in range(2):  # random parameters, a of either sign and order one
        y = field.initial_state() + rng.normal(scale=1.0, size=field.size)
        grad = field.gradient(y)
        fd = central_differences(field.loss, y)
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7 * np.max(np.abs(fd)))


def test_rhs_is_minus_rate_times_gradient_and_frozen_groups_stay():
    data = SMALL["ih-point"]()
    field = PopulationFlow(data, rates={"c": 2.0, "a": 0.5})
    y = field.initial_state()
    assert field.size == data.num_parameters == 9
    np.testing.assert_array_equal(field.rate_vector[field.slices["w"]], 0.0)
    np.testing.assert_array_equal(field.rate_vector[field.slices["c"]], 2.0)
    np.testing.assert_allclose(field.rhs(0.0, y), -field.rate_vector * field.gradient(y))
    traj = odeflow.solve(data, flow="population", rates={"c": 1.0}, t_span=(0, 50.0))
    np.testing.assert_array_equal(traj.a, data.a0)
    assert np.all(traj.copier_logits == traj.copier_logits[0])
    assert not np.allclose(traj.subset_weights[-1], traj.subset_weights[0])


@pytest.mark.parametrize("flow, loss", [("population", "nll"), ("population", "code"),
                                        ("copier", "nll"), ("copier", "code")])
def test_loss_is_non_increasing_along_a_solve(flow, loss):
    data = SMALL["dirichlet-3"]()
    traj = odeflow.solve(data, flow=flow, loss=loss, t_span=(0, 1e3), rtol=1e-8)
    assert isinstance(traj, InductionTrajectory)
    steps = np.diff(traj.loss)
    assert np.all(steps <= 1e-9 * np.abs(traj.loss[:-1])), steps.max()
    assert traj.loss[-1] < traj.loss[0] - 1e-3
    assert traj.a[-1] > traj.a[0]


def test_family_is_registered_and_solve_returns_the_result():
    data = SMALL["ih-point"]()
    assert family_of(data) is FAMILIES["induction"]
    assert FAMILIES["induction"].default_flow == "population"
    traj = odeflow.solve(data, t_span=(0, 100.0))
    assert traj.flow == "population" and traj.meta["loss"] == "nll"
    for key in ("method", "nfev", "njev", "wall_time", "status"):
        assert key in traj.stats
    n, nS = traj.t.size, len(data.subsets)
    assert traj.subset_weights.shape == (n, nS) and traj.c.shape == (n, nS)
    assert traj.copier_logits.shape == (n, data.heads, data.heads)
    np.testing.assert_allclose(traj.subset_weights.sum(axis=1), 1.0)
    assert traj.subsets == [(), (1,), (2,), (1, 2)]
    # the recorded loss is the field's loss of the recorded state
    field = PopulationFlow(data)
    np.testing.assert_allclose(traj.loss[-1], field.loss(traj.y[:, -1]), rtol=1e-12)
    cop = odeflow.solve(data, flow="copier", t_span=(0, 100.0))
    assert cop.copier_logits is None and cop.flow == "copier"


def test_save_load_round_trip(tmp_path):
    traj = odeflow.solve(SMALL["ih-point"](), flow="population", loss="code",
                         t_span=(0, 10.0))
    path = traj.save(tmp_path / "ih.npz")
    back = InductionTrajectory.load(path)
    for name in ("t", "a", "subset_weights", "copier_logits", "c", "loss"):
        np.testing.assert_array_equal(getattr(back, name), getattr(traj, name))
    assert back.subsets == traj.subsets and back.meta["loss"] == "code"
    assert back.data == traj.data


@pytest.mark.parametrize("options, field", [
    ({"loss": "mse"}, "loss"),
    ({"rates": {"c": -1.0}}, "rates.c"),
    ({"rates": {"z": 1.0}}, "rates.z"),
    ({"rates": {"c": 0.0}}, "rates"),
    ({"rates": [1, 2]}, "rates"),
    ({"start": np.zeros(3)}, "start"),
    ({"start": np.r_[np.zeros(4), np.ones(5)]}, "start"),     # c all zero
    ({"start": np.full(9, np.nan)}, "start"),
    ({"eta": 1.0}, "eta"),
])
def test_bad_options_name_the_field(options, field):
    with pytest.raises(ValidationError) as info:
        odeflow.solve(SMALL["ih-point"](), flow="population", t_span=(0, 1.0), **options)
    assert info.value.field == field


def test_copier_has_no_w_group():
    with pytest.raises(ValidationError) as info:
        CopierFlow(SMALL["ih-point"](), rates={"w": 1.0})
    assert info.value.field == "rates.w"
    assert issubclass(CopierFlow, InductionField)


def test_population_reduces_to_the_copier_as_w_plus_grows():
    """w+ -> infinity: the soft copier's loss tends to the exact copier's (spec 10)."""
    data = SMALL["ih-point"]()
    pop, cop = PopulationFlow(data), CopierFlow(data)
    rng = np.random.default_rng(3)
    c, a = rng.normal(size=4), 2.0
    w = np.full((2, 2), 0.0)
    gaps = []
    for w_plus in (5.0, 10.0, 40.0):
        w[:, 0] = w_plus
        gaps.append(abs(pop.loss(pop.pack(c, w, a)) - cop.loss(cop.pack(c, None, a))))
    assert gaps[-1] < 1e-12 < gaps[0]
    assert gaps[0] > gaps[1] > gaps[2]


def test_staged_schedule_on_ih_point_selects_offset_two_and_joint_moves_to_both():
    """Spec 10, claims: with the point-mass kernel stage 1 (c alone) selects {2}; the joint
    flow later moves to {1, 2}."""
    from odeflow.fields.induction import Schedule, Stage
    from odeflow.solver import solve_schedule

    data = InductionData.preset("ih-point")
    staged = solve_schedule(data, Schedule.staged(2000.0, 100.0, 1000.0), progress=False)
    end1 = np.searchsorted(staged.t, 2000.0)
    assert staged.t[end1] == 2000.0
    assert staged.top_subset(end1)[0] == (2,) and staged.subset_weights[end1, 2] > 0.99
    # stage 1 moves c only; stage 2 w only; stage 3 a only
    assert np.all(staged.a[:end1 + 1] == data.a0) and staged.a[-1] > 1.0
    assert np.all(staged.copier_logits[:end1 + 1] == staged.copier_logits[0])
    assert np.all(np.diff(staged.t) > 0) and np.all(np.diff(staged.loss) <= 1e-12)
    assert len(staged.stats["stages"]) == 3
    assert [s["rates"]["w"] for s in staged.meta["schedule"]] == [0.0, 1e5, 0.0]
    joint = solve_schedule(data, Schedule([Stage(1.0, 1e4)]), progress=False)
    assert joint.top_subset()[0] == (1, 2)
    with pytest.raises(ValidationError) as info:
        solve_schedule(data, Schedule.joint(10.0), rates={"c": 1.0})
    assert info.value.field == "rates"
    with pytest.raises(ValidationError) as info:
        solve_schedule(data, Schedule([Stage({"c": 1.0}, -1.0)]))
    assert info.value.field == "schedule[0].duration"
