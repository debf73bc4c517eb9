"""Induction-head fields (spec section 10): analytic gradients, the flow, rates, results."""

import numpy as np
import pytest
from scipy.differentiate import jacobian

import odeflow
from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError
from odeflow.families import FAMILIES, family_of
from odeflow.fields.induction import CopierFlow, InductionField, PopulationFlow
from odeflow.results.induction import InductionTrajectory

SMALL = {"ih-point": lambda: InductionData.preset("ih-point"),
         "dirichlet-3": lambda: InductionData(3, 3, 2, 2, alpha=0.3, num_kernels=3, seed=5),
         "bigram-H3": lambda: InductionData(2, 2, 3, 2, alpha=0.1, num_kernels=4, seed=1)}


def numeric_gradient(fun, y):
    """The gradient of ``fun`` at ``y`` by scipy.differentiate (central differences with
    Richardson extrapolation)."""
    def batched(x):  # x: (size, ...) -> one loss per trailing index
        flat = x.reshape(x.shape[0], -1)
        return np.array([fun(flat[:, i]) for i in range(flat.shape[1])]).reshape(x.shape[1:])

    result = jacobian(batched, y, initial_step=1e-3, tolerances={"atol": 1e-10, "rtol": 1e-8})
    assert np.all(result.success)
    return result.df


@pytest.mark.parametrize("model", sorted(SMALL))
@pytest.mark.parametrize("flow", [PopulationFlow, CopierFlow])
@pytest.mark.parametrize("loss", ["nll", "code"])
def test_gradient_equals_finite_differences(model, flow, loss):
    field = flow(SMALL[model](), loss=loss)
    rng = np.random.default_rng(abs(hash((model, flow.name, loss))) % 2**32)
    for _ in range(2):  # random parameters, a of either sign and order one
        y = field.initial_state() + rng.normal(scale=1.0, size=field.size)
        grad = field.gradient(y)
        fd = numeric_gradient(field.loss, y)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8 * np.max(np.abs(fd)))


def test_rhs_is_minus_rate_times_gradient_and_frozen_groups_stay():
    data = SMALL["ih-point"]()
    field = PopulationFlow(data, rates={"c": 2.0, "a": 0.5})
    y = field.initial_state()
    theta = field.start
    assert field.size == data.num_parameters == 9
    np.testing.assert_array_equal(field.rate_vector[field.slices["w"]], 0.0)
    np.testing.assert_array_equal(field.rate_vector[field.slices["c"]], 2.0)
    # the solver's state holds ln|c|: its flow is c'/c, the rest is -rate * gradient
    np.testing.assert_allclose(field.to_parameters(y), theta, rtol=1e-15)
    flow = -field.rate_vector * field.gradient(theta)
    c = field.slices["c"]
    flow[c] /= theta[c]
    np.testing.assert_allclose(field.rhs(0.0, y), flow, rtol=1e-12)
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
    np.testing.assert_allclose(traj.loss[-1], field.loss(traj.parameters(-1)), rtol=1e-12)
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


def test_solve_routes_a_schedule_to_solve_schedule():
    from odeflow.fields.induction import Schedule
    from odeflow.solver import solve_schedule

    data = InductionData.preset("ih-point")
    schedule = Schedule.staged(50.0, 5.0, 20.0)
    via_solve = odeflow.solve(data, schedule=schedule, progress=False)
    direct = solve_schedule(data, schedule, progress=False)
    np.testing.assert_array_equal(via_solve.t, direct.t)
    np.testing.assert_allclose(via_solve.a, direct.a, rtol=0, atol=0)
    assert via_solve.t[-1] == 75.0
    for options, field in (({"t_span": (0, 20.0)}, "t_span"), ({"eta_y": 1.0}, "eta_y")):
        with pytest.raises(ValidationError) as info:
            odeflow.solve(data, schedule=schedule, **options)
        assert info.value.field == field


def test_gradient_with_zero_probability_windows():
    """A kernel with zeros: context (0, 0) is transient, so windows of probability 0 and
    next tokens of probability 0 occur; repeated calls (the field reuses work arrays)
    still give the central-difference gradient."""
    kernel = [[0.9, 0.1], [0.0, 1.0], [0.5, 0.5], [0.3, 0.7]]
    data = InductionData(2, 3, 2, 2, kernel)
    assert np.any(data.window_laws() == 0)
    rng = np.random.default_rng(11)
    for loss in ("nll", "code"):
        field = PopulationFlow(data, loss=loss)
        for _ in range(3):
            y = field.initial_state() + rng.normal(size=field.size)
            fd = numeric_gradient(field.loss, y)
            np.testing.assert_allclose(field.gradient(y), fd, rtol=1e-6,
                                       atol=1e-8 * np.max(np.abs(fd)))


# ------------------------------------------------------------ the selector in log coordinates
def crossing(traj, subset, level=0.5):
    """First output time at which ``p_subset`` exceeds ``level`` (None if never)."""
    j = np.flatnonzero(traj.subset_weights[:, traj.subsets.index(subset)] > level)
    return traj.t[j[0]] if j.size else None


def test_a_losing_coefficient_below_the_range_of_doubles_recovers_on_time():
    """On ih-point the joint flow's ``c_(1,2)`` falls far below the smallest double before
    ``{1, 2}`` wins; in ``ln|c|`` the time it wins does not move with the tolerance (in
    ``c`` it was set by ``atol``: 25 at the defaults, 27-28 with ``atol_c = 1e-60``), and
    ``U = sum c^2``, which the exact flow conserves, stays put."""
    data = InductionData.preset("ih-point")
    t_eval = np.geomspace(1e-2, 1e3, 401)
    loose, tight = (odeflow.solve(data, t_span=(0, 1e3), t_eval=t_eval, rtol=rtol,
                                  atol=rtol * 1e-2) for rtol in (1e-6, 1e-10))
    assert np.min(tight.log_c[:, tight.subsets.index((1, 2))]) < np.log(5e-324)
    t_loose, t_tight = crossing(loose, (1, 2)), crossing(tight, (1, 2))
    assert t_tight is not None and abs(t_loose - t_tight) <= 0.02 * t_tight
    np.testing.assert_allclose(loose.subset_weights, tight.subset_weights, atol=1e-3)
    finite = np.isfinite(tight.log_c)
    u = np.sum(np.exp(2 * np.where(finite, tight.log_c, -np.inf)), axis=1)
    np.testing.assert_allclose(u, u[0], rtol=1e-6)


def test_the_default_integrator_follows_an_independent_tight_solve_through_the_switch():
    """``method="auto"`` (LSODA) on ih-point to ``t = 1e4``: in its Adams mode through the
    dip of ``c_(1,2)`` and the switch of the selector to ``{1, 2}`` (near ``t = 41``), and
    in its stiff mode late (from about ``t = 4e3``, while ``p_(2)`` decays), it stays
    within 1e-6 of BDF at ``rtol = 1e-10``: the choice costs no accuracy at the default
    tolerances."""
    data = InductionData.preset("ih-point")
    t_eval = np.geomspace(1e-2, 1e4, 241)
    auto = odeflow.solve(data, t_span=(0, 1e4), t_eval=t_eval, progress=False)
    ref = odeflow.solve(data, t_span=(0, 1e4), t_eval=t_eval, method="BDF", rtol=1e-10,
                        atol=1e-12, progress=False)
    assert auto.stats["method"] == "LSODA" and auto.stats["status"] == 0
    assert auto.stats["njev"] > 0                     # its stiff mode was used
    assert np.max(np.abs(auto.subset_weights - ref.subset_weights)) < 1e-6
    np.testing.assert_allclose(auto.a, ref.a, rtol=1e-6)
    np.testing.assert_allclose(auto.loss, ref.loss, rtol=0, atol=1e-8)
    assert crossing(auto, (1, 2)) == crossing(ref, (1, 2))


def test_a_schedule_continues_the_selector_below_the_range_of_doubles():
    """Two joint stages split where ``c_(1,2)`` is below the smallest double give the one
    joint solve: the second stage starts from the first one's ``ln|c|``
    (``start_log_c``), not from ``c = 0``."""
    data = InductionData.preset("ih-point")
    t_eval = np.linspace(0.0, 200.0, 41)
    one = odeflow.solve(data, t_span=(0, 200.0), t_eval=t_eval, rtol=1e-10, atol=1e-12)
    k = one.subsets.index((1, 2))
    split = float(t_eval[np.argmin(one.log_c[:, k])])
    assert one.c[t_eval == split, k] == 0.0          # underflowed in c: only ln|c| holds it
    from odeflow.fields.induction import Schedule, Stage

    staged = odeflow.solve(data, schedule=Schedule([Stage(1.0, split), Stage(1.0, 200.0 - split)]),
                           t_eval=t_eval, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(staged.subset_weights, one.subset_weights, atol=1e-6)
    assert crossing(staged, (1, 2)) == crossing(one, (1, 2))


def test_start_log_c_and_signs():
    data = InductionData.preset("ih-point")
    field = PopulationFlow(data)
    start = field.start
    c = field.slices["c"]
    start[c] = [-0.5, 0.0, 0.25, 1.0]
    signed = PopulationFlow(data, start=start)
    assert list(signed.log_c(signed.initial_state())) == [np.log(0.5), -np.inf, np.log(0.25),
                                                          0.0]
    np.testing.assert_allclose(signed.to_parameters(signed.initial_state()), start)
    np.testing.assert_allclose(signed.selector_weights(signed.initial_state()),
                               start[c] ** 2 / np.sum(start[c] ** 2))
    deep_start = start.copy()
    deep_start[c] = [-0.0, 0.0, 1.0, 1.0]           # -0.0: underflowed, sign kept
    deep = PopulationFlow(data, start=deep_start, start_log_c=[-2000.0, -np.inf, 0.0, 0.0])
    assert deep.parameters()["start_log_c"] == [-2000.0, None, 0.0, 0.0]
    theta = deep.to_parameters(deep.initial_state())
    assert theta[c][0] == 0.0 and np.signbit(theta[c][0])      # below doubles, sign kept
    rhs = deep.rhs(0.0, deep.initial_state())
    assert np.all(np.isfinite(rhs)) and rhs[c][1] == 0.0        # a zero coefficient stays 0
    # the model is evaluated with c_0 at e^-300 of the largest, not e^-2000: the flow of
    # every entry is that of a state where c_0 is merely small (e^-200, not clamped)
    shallow_start = deep_start.copy()
    shallow_start[c] = [-np.exp(-200.0), 0.0, 1.0, 1.0]
    shallow = PopulationFlow(data, start=shallow_start, start_log_c=[-200.0, -np.inf, 0.0, 0.0])
    assert "start_log_c" not in shallow.parameters()          # ln|c| of start's c
    np.testing.assert_allclose(rhs, shallow.rhs(0.0, shallow.initial_state()), rtol=1e-12,
                               atol=1e-300)
    for bad, why in [([0.0] * 3, "one per subset"), ([np.nan, 0, 0, 0], "finite or -inf"),
                     ([np.inf, 0, 0, 0], "finite or -inf"), ([-np.inf] * 4, "every"),
                     ([710.0, 0, 0, 0], "<= 709"),
                     ([np.log(0.01)] * 3 + [-1.0], r"entry 3 .* is not ln\|c\| of start's c")]:
        with pytest.raises(ValidationError, match=f"^start_log_c: .*{why}"):
            PopulationFlow(data, start_log_c=bad)
    tiny = start.copy()
    tiny[c] = 1e-140                      # U = sum c^2 below e^-600: rates 2/U overflow
    with pytest.raises(ValidationError, match="^start: the largest selector coefficient"):
        PopulationFlow(data, start=tiny)


def test_saved_trajectory_keeps_ln_c_below_the_range_of_doubles(tmp_path):
    """A file keeps ``log_c`` (``-inf`` for a zero coefficient), so a solve continued from a
    loaded trajectory is the one continued from the solved one: on ih-point at t = 20,
    ``c_(1,2)`` is 0 as a double and the continuation still switches to ``{1, 2}``."""
    data = InductionData.preset("ih-point")
    start = PopulationFlow(data).start
    start[PopulationFlow(data).slices["c"]][0] = 0.0          # a zero coefficient: stays 0
    first = odeflow.solve(data, start=start, t_span=(0, 20.0))
    k = first.subsets.index((1, 2))
    assert first.c[-1, k] == 0.0 and np.isfinite(first.log_c[-1, k])
    first.save(tmp_path / "first.npz")
    loaded = InductionTrajectory.load(tmp_path / "first.npz")
    np.testing.assert_array_equal(loaded.log_c, first.log_c)
    assert np.isneginf(loaded.log_c[:, 0]).all()
    ends = [odeflow.solve(data, start=tr.parameters(-1), start_log_c=tr.log_c[-1],
                          t_span=(0, 1e3)).subset_weights[-1] for tr in (first, loaded)]
    np.testing.assert_array_equal(ends[0], ends[1])
    assert ends[0][k] > 0.9 and ends[0][0] == 0.0
    # a file whose log_c contradicts c is refused
    import zipfile
    with zipfile.ZipFile(tmp_path / "first.npz") as z:
        members = {n: z.read(n) for n in z.namelist()}
    import io
    bad = first.log_c.copy()
    bad[0, 2] += 1.0
    buf = io.BytesIO()
    np.save(buf, np.where(np.isneginf(bad), -np.finfo(float).max, bad))
    members["log_c.npy"] = buf.getvalue()
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    with pytest.raises(ValidationError, match="'log_c' is not ln"):
        InductionTrajectory.load(tmp_path / "bad.npz")
