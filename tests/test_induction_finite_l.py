"""The finite-``L`` level of the induction-head family (``flow="finite_l"``, spec section 10).

The level is the gradient flow of the finite-``L`` model's mean loss on a fixed sample;
full-batch gradient descent on the same sample is its explicit Euler scheme. Checked
here: its field is the model's gradient on the sample its seed draws, it descends the
loss, gradient descent converges to it at order 1 as the step shrinks, refusals name
their field, and ``compare`` puts it beside the runs on an independent sample.
"""

from __future__ import annotations

import numpy as np
import pytest

import odeflow
from odeflow.data.induction import InductionData
from odeflow.errors import RenamedWarning, ValidationError
from odeflow.fields.induction import EmpiricalInduction, FiniteLengthFlow
from odeflow.training.induction import initial_parameters, joint, sample_for, train_sample


@pytest.fixture(scope="module")
def data():
    return InductionData.preset("ih-paper")


SMALL = {"seq_len": 24, "sample_size": 300}


def test_field_is_the_models_gradient_on_the_sample_its_seed_draws(data):
    field = FiniteLengthFlow(data, loss="code", seed=3, **SMALL)
    model = EmpiricalInduction(sample_for(data, 300, 24, seed=3), data.heads, data.subsets,
                               loss="code")
    y = field.start
    assert np.array_equal(y, initial_parameters(model, w_plus=data.w_plus,
                                                w_minus=data.w_minus, c0=data.c0, a0=data.a0))
    value, grad = model.loss_and_gradient(y)
    assert field.loss(y) == value
    np.testing.assert_array_equal(field.gradient(y), grad)
    flow = -grad                                                  # every group at rate 1
    flow[field.slices["c"]] /= y[field.slices["c"]]               # the state holds ln|c|
    np.testing.assert_allclose(field.rhs(0.0, field.initial_state()), flow, rtol=1e-12)
    other = FiniteLengthFlow(data, loss="code", seed=4, **SMALL)
    assert other.loss(y) != value                                # another seed, another sample
    assert field.parameters()["seed"] == 3 and field.parameters()["seq_len"] == 24


def test_rates_freeze_groups(data):
    field = FiniteLengthFlow(data, loss="code", rates={"a": 2.0}, **SMALL)
    rhs = field.rhs(0.0, field.initial_state())
    assert np.all(rhs[field.group_mask("c") | field.group_mask("w")] == 0)
    assert rhs[field.slices["a"]][0] == pytest.approx(-2.0 * field.gradient(field.start)[-1])


def test_the_flow_descends_the_finite_length_loss(data):
    traj = odeflow.solve(data, flow="finite_l", loss="code", t_span=(0, 50), progress=False,
                         **SMALL)
    assert traj.stats["status"] == 0 and traj.meta["flow"] == "finite_l"
    assert np.all(np.diff(traj.loss) <= 1e-12)
    assert traj.loss[-1] < traj.loss[0] - 0.01
    assert traj.a[-1] > traj.a[0]


def test_gradient_descent_converges_to_the_flow_at_order_one(data):
    """GD with step ``h`` for ``t/h`` steps against the flow at ``t``: the error halves with
    ``h`` (explicit Euler), on the flow's own sample."""
    t_end = 0.5
    field = FiniteLengthFlow(data, loss="code", seed=0, **SMALL)
    flow = odeflow.solve(data, flow="finite_l", loss="code", seed=0, t_span=(0, t_end),
                         t_eval=[0.0, t_end], rtol=1e-11, atol=1e-13, progress=False, **SMALL)
    model = field.model
    errors = []
    for steps in (50, 100, 200):
        run = train_sample(model, field.start, joint(steps, t_end / steps), progress=False)
        errors.append(np.abs(run.theta[-1] - flow.parameters(-1)).max())
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    assert all(1.8 < r < 2.2 for r in ratios), (errors, ratios)


@pytest.mark.parametrize("options, field", [
    ({"seq_len": 5}, "seq_len"), ({"seq_len": 0}, "seq_len"),
    ({"sample_size": 0}, "sample_size"), ({"sample_size": 2.5}, "sample_size"),
    ({"seed": -1}, "seed"), ({"seed": True}, "seed"),
])
def test_bad_sample_options_name_the_field(data, options, field):
    with pytest.raises(ValidationError) as err:
        FiniteLengthFlow(data, loss="code", **{**SMALL, **options})
    assert err.value.field == field


def test_infinite_nll_on_the_sample_is_refused_by_name(data):
    """At L = 2H each sequence has one key: most targets are the value of no key."""
    with pytest.raises(ValidationError) as err:
        FiniteLengthFlow(data, loss="nll", seq_len=6, sample_size=200)
    assert err.value.field == "loss" and "infinite" in str(err.value)


def test_compare_puts_the_level_beside_the_runs_on_an_independent_sample():
    from odeflow.training.induction import agreement, compare, rows, worst_agreement

    data = InductionData.preset("ih-point")      # small: d = 2, H = 2
    comp = compare(data, seeds=[0, 2], steps=10, sample_size=200, seq_len=24,
                   progress=False)
    assert comp.finite_l_seed == 3
    assert comp.finite_l.meta["seed"] == 3 and comp.finite_l.meta["sample_size"] == 200
    np.testing.assert_array_equal(comp.finite_l.t, comp.runs[0].t)
    table = rows(comp)
    assert table[0]["loss_finite_l"] == pytest.approx(
        FiniteLengthFlow(data, loss="code", seed=3, seq_len=24, sample_size=200).loss(
            comp.finite_l.parameters(0)))
    scorer = FiniteLengthFlow(data, loss="code", seed=3, seq_len=24, sample_size=200)
    scored = [scorer.loss(comp.flow.parameters(j)) for j in range(comp.flow.t.size)]
    np.testing.assert_allclose(comp.flow_loss_at_length, scored, rtol=1e-14)
    assert table[-1]["loss_flow_at_length"] == comp.flow_loss_at_length[-1]
    # the population flow's own (L -> infinity) loss is another number
    assert not np.allclose(comp.flow_loss_at_length, comp.flow.loss)
    goal = agreement(comp, times=(5, 10))
    assert [r["t"] for r in goal] == [5, 10]
    for r in goal:
        assert r["loss_abs_err_finite_l"] == pytest.approx(abs(r["loss_run"] -
                                                               r["loss_finite_l"]))
        assert r["loss_abs_err_at_length"] == pytest.approx(abs(r["loss_run"] -
                                                                r["loss_flow_at_length"]))
    # the goal over its interval: every recorded step in [5, 10], not only the table's two
    worst = {r["level"]: r for r in worst_agreement(comp, 5, 10)}
    assert set(worst) == {"population", "population at L", "finite_l"}
    table_by_step = {r["step"]: r for r in table}
    inside = [table_by_step[k] for k in range(5, 11)]
    for level, a_key, loss_key in (("population", "a_flow", "loss_flow"),
                                   ("population at L", "a_flow", "loss_flow_at_length"),
                                   ("finite_l", "a_finite_l", "loss_finite_l")):
        r = worst[level]
        assert r["times"] == 6 and (r["t_from"], r["t_to"]) == (5.0, 10.0)
        to_level = [abs(x["a_run"] - x[a_key]) / abs(x[a_key]) for x in inside]
        to_run = [abs(x["a_run"] - x[a_key]) / abs(x["a_run"]) for x in inside]
        loss_err = [abs(x["loss_run"] - x[loss_key]) for x in inside]
        assert r["a_rel_err"] == pytest.approx(max(to_level), rel=1e-12)
        assert r["a_rel_err_to_run"] == pytest.approx(max(to_run), rel=1e-12)
        assert r["a_rel_err_t"] == inside[int(np.argmax(to_level))]["step"]
        assert r["loss_abs_err"] == pytest.approx(max(loss_err), rel=1e-12)
        assert r["loss_abs_err_t"] == inside[int(np.argmax(loss_err))]["step"]
        assert r["a_misses"] == sum(e > 0.15 for e in to_level)
        assert r["loss_misses"] == sum(e > 0.01 for e in loss_err)
    with pytest.raises(ValidationError) as err:
        worst_agreement(comp, 50, 100)
    assert err.value.field == "t_from"
    plain = compare(data, seeds=1, steps=2, sample_size=100, seq_len=24, progress=False,
                    finite_l=False)
    assert plain.finite_l is None and "a_finite_l" not in rows(plain)[0]
    assert plain.flow_loss_at_length is None and "loss_flow_at_length" not in rows(plain)[0]


def test_a_sample_too_large_for_memory_is_refused_by_name(data):
    from odeflow.data.induction.sequences import MAX_SAMPLE_ENTRIES, sample_sequences

    with pytest.raises(ValidationError) as err:
        sample_sequences(MAX_SAMPLE_ENTRIES // 10, 100, vocab_size=3, n_gram=3, alpha=0.1)
    assert err.value.field == "sample_size" and "tokens" in str(err.value)
    with pytest.raises(ValidationError) as err:
        FiniteLengthFlow(data, loss="code", seq_len=10_000, sample_size=10_000)
    assert err.value.field == "sample_size"


def test_old_sample_names_warn_and_mean_the_new_ones(data):
    """``length``, ``sequences`` (and ``compare``'s ``count``) are the old names of
    ``seq_len``, ``sample_size``: taken one release, with a RenamedWarning."""
    from odeflow.data.induction.sequences import sample_sequences
    from odeflow.training.induction import compare

    new = FiniteLengthFlow(data, loss="code", seed=3, **SMALL)
    with pytest.warns(RenamedWarning) as record:
        old = FiniteLengthFlow(data, loss="code", seed=3, length=24, sequences=300)
    assert old.parameters() == new.parameters()
    assert sorted(str(w.message) for w in record) == ["'length' is now 'seq_len'",
                                                      "'sequences' is now 'sample_size'"]
    with pytest.warns(RenamedWarning, match="'sequences' is now 'sample_size'"):
        traj = odeflow.solve(data, flow="finite_l", loss="code", sequences=300, seq_len=24,
                             seed=3, t_span=(0.0, 1.0), t_eval=[1.0], progress=False)
    assert traj.meta["sample_size"] == 300
    with pytest.warns(RenamedWarning, match="'count' is now 'sample_size'"):
        sample = sample_sequences(count=5, seq_len=6, vocab_size=2, n_gram=2, alpha=1.0)
    with pytest.warns(RenamedWarning, match="'length' is now 'seq_len'"):
        assert sample.length == sample.seq_len == 6
    with pytest.warns(RenamedWarning, match="'count' is now 'sample_size'"):
        comp = compare(data, seeds=1, steps=2, count=50, seq_len=24, progress=False,
                       finite_l=False)
    assert comp.sample_size == 50
    with pytest.raises(ValidationError, match="give only 'seq_len'"):
        FiniteLengthFlow(data, loss="code", length=24, seq_len=24)
