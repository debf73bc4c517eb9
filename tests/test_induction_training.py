"""Finite-L training of the induction-head model (spec section 10; odeflow.training.induction).

The reference forward pass below is a second, independent implementation of the
contract's model (loops over sequences and key positions, one-hot vectors), so
the merged-key tables of the module are checked against the definition, and
the hand-written gradient against central finite differences of the empirical
loss.
"""

from __future__ import annotations

import numpy as np
import pytest

import odeflow.data.induction as induction_data
from odeflow.errors import ValidationError
from odeflow.training.induction import (
    EmpiricalInduction,
    Stage,
    initial_parameters,
    joint,
    log_spaced_steps,
    sample_sequences,
    train_sample,
)

#: The spec's point-mass kernel (d = 2, n = 3; row x_{i-1} d + x_{i-2}).
POINT_KERNEL = np.array(induction_data.POINT_KERNEL)
all_subsets = induction_data.subsets


def reference_loss(tokens, d, heads, subsets, theta, loss):
    """The contract's model written out: keys l = 2H..L, query L+1, one sequence at a time."""
    nS, H = len(subsets), heads
    c, w, a = theta[:nS], theta[nS:nS + H * H].reshape(H, H), theta[-1]
    p = c ** 2 / np.sum(c ** 2)
    s = np.exp(w) / np.exp(w).sum(axis=1, keepdims=True)
    total = 0.0
    for x in tokens:
        L = len(x) - 1

        def unit(l, h, x=x):                     # l is 1-based; x[l - 1] is x_l
            v = np.zeros(d)
            for j in range(H):
                v[x[l - h - j - 1]] += s[h - 1, j]
            return v / np.linalg.norm(v)

        q = L + 1
        K = np.array([sum(p[i] * np.prod([unit(l, h) @ unit(q, h) for h in S])
                          for i, S in enumerate(subsets)) for l in range(2 * H, L + 1)])
        att = np.exp(a * K - np.max(a * K))
        att /= att.sum()
        y = np.bincount(x[2 * H - 1:L], weights=att, minlength=d)
        target = x[L]
        total += -np.log(y[target]) if loss == "nll" else np.log(np.exp(y).sum()) - y[target]
    return total / len(tokens)


@pytest.mark.parametrize("loss", ["nll", "code"])
@pytest.mark.parametrize("d, heads, degree", [(3, 2, 2), (2, 3, 2), (3, 3, 1)])
def test_loss_is_the_model_and_gradient_is_finite_differences(loss, d, heads, degree):
    seqs = sample_sequences(10, 16, vocab_size=d, n_gram=3, alpha=5.0, seed=5)
    subsets = all_subsets(heads, degree)
    model = EmpiricalInduction(seqs, heads, subsets, loss=loss)
    assert model.unseen_targets == 0          # every target occurs as a key value
    rng = np.random.default_rng(7)
    theta = rng.normal(size=model.size)
    theta[-1] = 2.5
    value, grad = model.loss_and_gradient(theta)
    assert value == pytest.approx(reference_loss(seqs.tokens, d, heads, subsets, theta, loss),
                                  rel=1e-12, abs=1e-12)
    h = 1e-6
    fd = np.array([(model.loss(theta + h * e) - model.loss(theta - h * e)) / (2 * h)
                   for e in np.eye(model.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    assert np.max(np.abs(grad)) > 1e-3        # a non-trivial gradient was compared


@pytest.mark.parametrize("loss", ["nll", "code"])
def test_full_batch_descent_does_not_increase_the_loss(loss):
    seqs = sample_sequences(60, 30, vocab_size=2, n_gram=3, kernel=POINT_KERNEL, seed=1)
    model = EmpiricalInduction(seqs, 2, all_subsets(2, 2), loss=loss)
    theta0 = initial_parameters(model, a0=0.5, c0=0.3)
    run = train_sample(model, theta0, joint(150, rate=0.5), record=range(151))
    assert np.all(np.diff(run.loss) <= 1e-12)
    assert run.loss[-1] < run.loss[0] - 1e-3
    np.testing.assert_array_equal(run.steps, np.arange(151))
    np.testing.assert_array_equal(run.t, run.steps)          # t = k (module's time map)
    assert run.subset_weights.shape == (151, 4)
    np.testing.assert_allclose(run.subset_weights.sum(axis=1), 1.0)
    assert run.copier_logits.shape == (151, 2, 2)


def test_staged_schedule_moves_only_its_groups():
    seqs = sample_sequences(30, 20, vocab_size=2, n_gram=3, kernel=POINT_KERNEL, seed=2)
    model = EmpiricalInduction(seqs, 2, all_subsets(2, 2), loss="code")
    theta0 = initial_parameters(model)
    run = train_sample(model, theta0, [Stage({"c": 2.0}, 5), Stage({"a": 1.0}, 5)], record=[5])
    start, middle, end = run.theta
    nS = 4
    assert not np.array_equal(start[:nS], middle[:nS])
    np.testing.assert_array_equal(start[nS:], middle[nS:])   # w and a frozen in stage 1
    np.testing.assert_array_equal(middle[:-1], end[:-1])     # c and w frozen in stage 2
    assert end[-1] != middle[-1]


def test_sampled_chain_follows_the_kernel_with_the_contract_row_order():
    seqs = sample_sequences(400, 200, vocab_size=2, n_gram=3, kernel=POINT_KERNEL, seed=3)
    x = seqs.tokens
    rows = (x[:, 1:-1] * 2 + x[:, :-2]).ravel()       # x_{i-1} d + x_{i-2}
    nxt = x[:, 2:].ravel()
    for r in range(4):
        hits = nxt[rows == r]
        q = POINT_KERNEL[r, 1]
        assert hits.size > 300
        assert np.mean(hits) == pytest.approx(q, abs=4 * np.sqrt(q * (1 - q) / hits.size))
    again = sample_sequences(400, 200, vocab_size=2, n_gram=3, kernel=POINT_KERNEL, seed=3)
    np.testing.assert_array_equal(again.tokens, x)


def test_dirichlet_prior_draws_a_kernel_per_sequence():
    seqs = sample_sequences(2000, 3, vocab_size=3, n_gram=2, alpha=0.1, seed=4)
    # with alpha = 0.1 rows are nearly one-hot, and differ between sequences
    x = seqs.tokens
    same_row = x[:, 1] == x[:, 2]
    agree = np.mean(x[same_row, 2] == x[same_row, 3])
    assert agree > 0.8                   # within a sequence the row repeats its choice
    first = x[x[:, 0] == 0, 1]               # x_2 given x_1 = 0: row 0 of each kernel
    assert 0.25 < np.mean(first == 0) < 0.42   # varies across sequences (1/3 on average)


def test_nll_with_an_unseen_target_is_refused_not_infinite():
    # one sequence whose target token (1) never occurs among the key values
    tokens = np.array([[0, 0, 0, 0, 0, 0, 0, 1]])
    from odeflow.training.induction import InductionSequences

    seqs = InductionSequences(tokens, 2, 3)
    model = EmpiricalInduction(seqs, 2, all_subsets(2, 2), loss="nll")
    assert model.unseen_targets == 1
    with pytest.raises(ValidationError, match="loss"):
        model.loss(initial_parameters(model))
    code = EmpiricalInduction(seqs, 2, all_subsets(2, 2), loss="code")
    assert np.isfinite(code.loss(initial_parameters(code)))


def test_log_spaced_steps():
    marks = log_spaced_steps(10_000, 40)
    assert marks[0] == 0 and marks[-1] == 10_000 and marks[1] == 1
    assert np.all(np.diff(marks) > 0)


@pytest.mark.parametrize("call, field", [
    (lambda: sample_sequences(5, 10, vocab_size=3, n_gram=3, alpha=-0.1), "alpha"),
    (lambda: sample_sequences(5, 10, vocab_size=3, n_gram=3), "alpha"),
    (lambda: sample_sequences(5, 10, vocab_size=2, n_gram=3, kernel=POINT_KERNEL * 1.1),
     "kernel[0]"),
    (lambda: sample_sequences(5, 10, vocab_size=2, n_gram=3, kernel=POINT_KERNEL[:3]),
     "kernel"),
    (lambda: sample_sequences(5, 10, vocab_size=3, n_gram=1, alpha=1.0), "n_gram"),
    (lambda: sample_sequences(0, 10, vocab_size=3, n_gram=3, alpha=1.0), "sample_size"),
    (lambda: sample_sequences(5, 10, vocab_size=3, n_gram=3, alpha=1.0, seed=-1), "seed"),
])
def test_bad_sampling_inputs_name_the_field(call, field):
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field


def test_bad_model_and_training_inputs_name_the_field():
    seqs = sample_sequences(5, 10, vocab_size=2, n_gram=3, alpha=1.0, seed=0)
    subsets = all_subsets(2, 2)
    cases = [
        (lambda: EmpiricalInduction(seqs, 2, subsets, loss="mse"), "loss"),
        (lambda: EmpiricalInduction(seqs, 2, [(1,), (3,)]), "subsets[1]"),
        (lambda: EmpiricalInduction(seqs, 6, all_subsets(6, 1)), "seq_len"),
        (lambda: EmpiricalInduction(seqs.tokens, 2, subsets), "sequences"),
    ]
    model = EmpiricalInduction(seqs, 2, subsets, loss="code")
    theta = initial_parameters(model)
    bad = theta.copy()
    bad[-1] = np.nan
    cases += [
        (lambda: model.loss(theta[:-1]), "theta"),
        (lambda: model.loss(bad), "theta"),
        (lambda: model.loss(np.concatenate([np.zeros(4), theta[4:]])), "theta"),
        (lambda: initial_parameters(model, w_plus=np.inf), "w_plus"),
        (lambda: train_sample(model, theta, [Stage({"c": 1.0, "z": 1.0}, 3)]),
         "schedule[0].rates.z"),
        (lambda: train_sample(model, theta, [Stage({"a": -1.0}, 3)]), "schedule[0].rates.a"),
        (lambda: train_sample(model, theta, [Stage({"a": 1.0}, 2.5)]), "schedule[0].duration"),
        (lambda: train_sample(model, theta, joint(3), record=[7]), "record"),
        (lambda: train_sample(model, theta, ["joint"]), "schedule[0]"),
        (lambda: train_sample(model, theta, 3), "schedule"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == field, (field, str(info.value))


def test_sample_for_reads_the_prior_of_the_data_model():
    from odeflow import InductionData
    from odeflow.training.induction import sample_for

    point = InductionData.preset("ih-point")
    np.testing.assert_array_equal(
        sample_for(point, 50, 20, seed=1).tokens,
        sample_sequences(50, 20, vocab_size=2, n_gram=3, kernel=POINT_KERNEL, seed=1).tokens)
    paper = InductionData.preset("ih-paper")
    np.testing.assert_array_equal(
        sample_for(paper, 50, 20, seed=1).tokens,
        sample_sequences(50, 20, vocab_size=3, n_gram=3, alpha=0.1, seed=1).tokens)
    with pytest.raises(ValidationError) as info:
        sample_for(object(), 5, 5)
    assert info.value.field == "data"


def test_finite_length_loss_approaches_the_population_loss_of_the_point_mass_model():
    """With the point-mass kernel the population loss (L -> infinity) is exact. The mean
    loss of the finite-L model over 20,000 sampled sequences, at the same parameters
    (a = 3, where keys and query windows matter), is off by a finite-L bias at L = 12
    (several standard errors) and agrees within sampling error at L = 200 (both losses)."""
    import odeflow
    from odeflow.training.induction import sample_for

    data = odeflow.InductionData(2, 3, 2, 2, prior="point", kernel=POINT_KERNEL, a0=3.0,
                                 c0=0.5)

    def gap(loss, length):
        flow = odeflow.solve(data, flow="population", loss=loss, t_span=(0.0, 1e-6),
                             t_eval=[0.0, 1e-6])
        model = EmpiricalInduction(sample_for(data, 20_000, length, seed=length), 2,
                                   data.subsets, loss=loss)
        theta = initial_parameters(model, w_plus=data.w_plus, w_minus=data.w_minus,
                                   c0=data.c0, a0=data.a0)
        y = model.outputs(theta)
        target = model.keys.target
        picked = y[np.arange(target.size), target]
        per_seq = -np.log(picked) if loss == "nll" else np.log(np.exp(y).sum(1)) - picked
        assert per_seq.mean() == pytest.approx(model.loss(theta), rel=1e-12)
        return model.loss(theta) - float(flow.loss[0]), per_seq.std() / np.sqrt(target.size)

    short, _ = gap("code", 12)
    long, se = gap("code", 200)
    assert abs(long) < 4 * se and abs(long) < 0.01
    assert abs(short) > 3 * se                  # the finite-L bias is resolved at L = 12
    long, se = gap("nll", 200)
    assert abs(long) < 4 * se and abs(long) < 0.01


@pytest.fixture(scope="module")
def protocol_comparison():
    """The authors' protocol (ih-paper, 9000 x 100, joint GD at lr 1 from the code's init,
    1e4 steps, loss 'code') beside the population flow and the finite-L level (its own
    sample, seed 1). Minutes: the run about 1.5 min, the flows about half a minute.
    Returns the goal table (t = 5, 10, 100, 1e3, 1e4) and the worst errors over every
    recorded step from t = 5 to 1e4, by level (the goal's interval)."""
    from odeflow.training.induction import agreement, compare, rows, worst_agreement

    comp = compare(seeds=1, steps=10_000, progress=False)
    table = agreement(comp)
    assert [row["t"] for row in table] == [5, 10, 100, 1000, 10000]
    worst = {row["level"]: row for row in worst_agreement(comp)}
    assert all(row["times"] == 52 for row in worst.values())
    return table, worst, rows(comp)


def measured_miss(reason: str):
    """A goal a level misses, as measured and explained in docs/induction.md (the miss
    itself, an AssertionError; any other error fails the test)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError,
                             reason=f"measured (docs/induction.md): {reason}")


#: Issue 23's goal per level and quantity, over every recorded step from t = 5 to 1e4:
#: (level of worst_agreement, its count of missing steps).
GOAL_OVER_THE_INTERVAL = [
    # within 15% of the flow's value at every step: 13.6% at worst, at t = 5 (relative to
    # the run's value it is 15.7% there, docs/induction.md)
    pytest.param("population", "a_misses", id="population-a"),
    pytest.param("population", "loss_misses", id="population-loss", marks=measured_miss(
        "the population flow's own loss (L -> infinity) differs from the run's by 0.022 "
        "already at t = 0 (the same parameters) and by more than 0.01 at every recorded step "
        "from t = 5 to 19 (0.030 at worst, t = 14)")),
    pytest.param("population at L", "loss_misses", id="population-parameters-at-L-loss",
                 marks=measured_miss(
                     "within 0.0021 at the table's five times, but 0.014 at t = 14, where the "
                     "run's selector oscillates (gradient descent at lr 1; its loss rises at "
                     "step 13)")),
    pytest.param("finite_l", "loss_misses", id="finite-l-loss", marks=measured_miss(
        "within 0.0064 at the table's five times, but 0.0225 at t = 14, where the run's "
        "selector oscillates (gradient descent at lr 1; its loss rises at step 13)")),
    pytest.param("finite_l", "a_misses", id="finite-l-a", marks=measured_miss(
        "the finite-L level's a(t) is above the run's by more than 15% of its own value at "
        "t = 5 to 8 (22%; 29% of the run's value, at t = 5: gradient descent at lr 1 is not "
        "a small-step scheme for the selector at the init), within 15% from t = 9")),
]


@pytest.mark.slow
@pytest.mark.parametrize("level, misses", GOAL_OVER_THE_INTERVAL)
def test_protocol_level_meets_the_goal_over_its_interval(protocol_comparison, level, misses):
    """Issue 23's goal (a within 15% of the level's value, the loss within 0.01), level by
    level, at every recorded step from t = 5 to 1e4 (the goal table's five times are a
    subset: checked for the population flow's a as well)."""
    table, worst, _ = protocol_comparison
    if (level, misses) == ("population", "a_misses"):
        assert all(row["a_ok"] for row in table), table
    assert worst[level][misses] == 0, worst[level]


@pytest.mark.slow
def test_protocol_goal_misses_stay_where_measured(protocol_comparison):
    """The misses the strict xfails above record stay where docs/induction.md says they
    are, so that a level getting worse elsewhere fails: the finite-L level's loss and the
    population flow's parameters scored at L = 100 within 0.01 at every recorded step but
    the run's oscillation (steps 13-16; recorded: 14), and at the goal table's five times;
    the population flow's loss within 0.01 from t = 20 on; the finite-L level's a within
    15% of its value from t = 9 on."""
    table, _, steps = protocol_comparison
    assert all(r["loss_ok_finite_l"] and r["loss_ok_at_length"] for r in table), table

    def missed(quantity, level_key, tolerance):
        out = []
        for r in steps:
            if not 5 <= r["step"] <= 10_000:
                continue
            if quantity == "a":
                err = abs(r["a_run"] - r[level_key]) / abs(r[level_key])
            else:
                err = abs(r["loss_run"] - r[level_key])
            if err > tolerance:
                out.append(r["step"])
        return out

    for key in ("loss_finite_l", "loss_flow_at_length"):
        assert all(13 <= k <= 16 for k in missed("loss", key, 0.01)), key
    assert all(k < 20 for k in missed("loss", "loss_flow", 0.01))
    assert all(k < 9 for k in missed("a", "a_finite_l", 0.15))
