"""Data layer (spec sections 1 and 7): validation, derived token sets, presets, TOML."""

import math

import numpy as np
import pytest

import odeflow
import odeflow.analysis.closed_forms
import odeflow.training
from odeflow import DataModel, SequenceClass, ValidationError
from odeflow.data import parse_config, sequence_classes


def two_classes(**overrides):
    spec = dict(vocab_size=6, c1={0: 0.5, 2: 0.5}, c2={0: 0.25, 3: 0.75}, n1=4, n2=5, weights=None)
    spec.update(overrides)
    return DataModel(spec["vocab_size"], [SequenceClass(spec["n1"], 1, spec["c1"]),
                                          SequenceClass(spec["n2"], 1, spec["c2"])],
                     spec["weights"])


def test_derived_sets():
    d = two_classes()
    assert d.common_tokens().tolist() == [0]
    assert d.distinct_tokens(4).tolist() == [2]
    assert d.distinct_tokens(5).tolist() == [3]
    assert d.token_group(0).tolist() == [4, 5]
    assert d.token_group(1).tolist() == []
    assert d.classes_of_query(1).tolist() == [4, 5]
    assert np.allclose(d.weights, 0.5)


@pytest.mark.parametrize("make, field", [
    (lambda: SequenceClass(1, 0, [0.5, 0.6]), "probs"),                   # sum != 1
    (lambda: SequenceClass(1, 0, [1.5, -0.5]), "probs"),                  # negative
    (lambda: SequenceClass(1, 0, [math.nan, 1.0]), "probs"),              # NaN
    (lambda: SequenceClass(1, 0, {}), "probs"),                           # empty
    (lambda: SequenceClass(-1, 0, [1.0]), "next_token"),
    (lambda: SequenceClass(1.5, 0, [1.0]), "next_token"),
    (lambda: SequenceClass(1, "a", [1.0]), "query_token"),
    (lambda: two_classes(c1={0: 0.5, 9: 0.5}), "classes[0].probs"),       # token id >= M
    (lambda: two_classes(n1=7), "classes[0].next_token"),                 # next token >= M
    (lambda: two_classes(n2=4), "classes[1].next_token"),                 # duplicate
    (lambda: two_classes(weights=[0.5, 0.6]), "weights"),
    (lambda: two_classes(weights=[1.0, 0.0]), "weights"),
    (lambda: two_classes(weights=[0.5]), "weights"),
    (lambda: two_classes(vocab_size=1), "vocab_size"),
    (lambda: DataModel(4, [SequenceClass(1, 0, [0.5, 0.5, 0, 0, 0])]), "classes[0].probs"),
    (lambda: DataModel(4, []), "classes"),
    (lambda: DataModel.preset("no-such-preset"), "preset"),
    (lambda: odeflow.solve(two_classes(), eta_y=0.0), "eta_y"),
    (lambda: odeflow.solve(two_classes(), eta_z=-1.0), "eta_z"),
    (lambda: odeflow.solve(two_classes(), eta_z=math.inf), "eta_z"),
    (lambda: odeflow.solve(two_classes(), t_span=(0, 0)), "t_end"),
    (lambda: odeflow.solve(two_classes(), t_span=(0, -5)), "t_end"),
    (lambda: odeflow.solve(two_classes(), t_span=(0, math.nan)), "t_end"),
    (lambda: odeflow.solve(two_classes(), flow="nope"), "flow"),
    (lambda: odeflow.solve(two_classes(), method="Euler"), "method"),
    (lambda: odeflow.solve(two_classes(), flow="reduced", bta=1.0), "bta"),
    (lambda: odeflow.solve(two_classes(), flow="exact", beta=1.0), "beta"),
    (lambda: odeflow.solve(two_classes(), rtol=0), "rtol"),
    (lambda: odeflow.solve(two_classes(), t_eval=[0, 2, 1]), "t_eval"),
    (lambda: odeflow.solve(two_classes(), start=(None, np.zeros((1, 5)))), "z0"),
    (lambda: odeflow.solve(two_classes(), start=(None, np.zeros((1, 6)) + 1j)), "z0"),  # complex
    (lambda: odeflow.solve(two_classes(), start=(None, {3: np.zeros(6)})), "z0"),  # not a query
    (lambda: odeflow.solve(two_classes(), eta_y=True), "eta_y"),               # bool
    (lambda: odeflow.solve(two_classes(), eta_z="0.5"), "eta_z"),              # text
    (lambda: odeflow.solve(two_classes(), t_span=(0, 10**400)), "t_end"),      # overflow
    (lambda: odeflow.solve(two_classes(), t_span=(10**400, 1)), "t_span"),
    (lambda: SequenceClass(1, 0, ["0.5", "0.5"]), "probs"),                    # text
    (lambda: SequenceClass(1, 0, [True, False]), "probs"),                     # bools
    (lambda: SequenceClass(1, 0, {1: 1e308, 2: 1e308, 3: 1e-300}, normalize=True), "probs"),
    (lambda: DataModel(10**9, [SequenceClass(1, 0, {0: 1.0})]), "vocab_size"),
    (lambda: odeflow.solve(None, flow="snap", a=1.0, pi=0.5, vocab_size=3, zc0=True), "zc0"),
    (lambda: odeflow.training.train_sgd(two_classes(), 1.0, 1.0, 2, 2, 4,
                                        optimizer=odeflow.Momentum(10**400)), "mu"),
    (lambda: odeflow.analysis.closed_forms.decoder_margin(1.0, 30, True, 0.5), "eta_y"),
])
def test_bad_input_names_the_field(make, field):
    with pytest.raises(ValueError) as info:
        make()
    assert isinstance(info.value, ValidationError)
    assert str(info.value).startswith(field + ":"), str(info.value)


def test_normalize_survives_an_overflowing_sum():
    c = SequenceClass(1, 0, {2: 1e308, 3: 1e308}, normalize=True)
    assert c.support_probs.tolist() == [0.5, 0.5]


def test_normalize_on_request_only():
    with pytest.raises(ValidationError):
        SequenceClass(1, 0, {2: 2.0, 3: 2.0})
    c = SequenceClass(1, 0, {2: 2.0, 3: 6.0}, normalize=True)
    assert c.support_probs.tolist() == [0.25, 0.75]


def test_presets():
    # the paper's syn-small (spec section 7): common 0-9, distinct 10-19 and 20-29,
    # queries 30, 31, next tokens 32, 33
    small = DataModel.preset("syn-small")
    assert small.vocab_size == 34 and small.num_classes == 2
    assert small.query_tokens.tolist() == [30, 31]
    assert small.next_tokens.tolist() == [32, 33]
    assert [small.classes_of_query(m).tolist() for m in (30, 31)] == [[32], [33]]
    assert small.common_tokens().tolist() == list(range(10))
    assert small.distinct_tokens(32).tolist() == list(range(10, 20))
    assert small.distinct_tokens(33).tolist() == list(range(20, 30))
    p1 = small.probs(32)
    raw = np.concatenate([np.ones(10), np.linspace(0.1, 1.0, 10)])
    assert np.allclose(p1[:20], raw / raw.sum(), rtol=1e-15, atol=0)
    assert np.all(np.diff(p1[10:20]) > 0)          # increasing within the block
    assert p1.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.array_equal(small.weights, [0.5, 0.5])
    for n, M in zip((1, 3, 5, 10), (33, 79, 125, 240), strict=True):
        medium = DataModel.preset(f"syn-medium-{n}")
        assert medium.vocab_size == M and medium.num_classes == 2 * n
        assert medium.query_tokens.size == n
        assert all(medium.classes_of_query(m).size == 2 for m in medium.query_tokens)
        assert medium.common_tokens().tolist() == list(range(10))
        assert all(medium.distinct_tokens(k).size == 10 for k in medium.next_tokens)
    snap = DataModel.preset("snap-small")
    assert snap.query_tokens.size == 1 and snap.common_tokens().tolist() == [0]
    # the former models under their own names
    shared = DataModel.preset("shared-query-small")
    assert shared.vocab_size == 30 and shared.query_tokens.tolist() == [0]
    assert shared.classes_of_query(0).tolist() == [1, 2]
    assert shared.distinct_tokens(1).tolist() == list(range(10, 20))
    big = DataModel.preset("shared-query-medium")
    assert big.num_classes == 20 and big.query_tokens.size == 5
    assert big.common_tokens().size == 100
    assert big.active_tokens.size < big.vocab_size


def test_generator_blocks_and_token_order():
    d = sequence_classes(num_last=2, num_next_per_last=2, num_common=3, num_common_per_last=2,
                         num_unique_per_next=4, unique_min=0.5, unique_max=2.0)
    # 3 common, 2 x 2 per-query common, 4 x 4 distinct, 2 queries, 4 next tokens
    assert d.vocab_size == 3 + 4 + 16 + 2 + 4
    assert d.query_tokens.tolist() == [23, 24]
    assert d.next_tokens.tolist() == [25, 26, 27, 28]
    assert d.classes_of_query(23).tolist() == [25, 26]
    assert d.common_tokens().tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert d.token_group(3).tolist() == [25, 26] and d.token_group(5).tolist() == [27, 28]
    assert d.distinct_tokens(27).tolist() == [15, 16, 17, 18]
    raw = np.concatenate([np.ones(5), np.linspace(0.5, 2.0, 4)])
    assert np.allclose(d.probs(27)[[0, 1, 2, 5, 6, 15, 16, 17, 18]], raw / raw.sum(),
                       rtol=1e-15, atol=0)
    assert d == DataModel.from_dict(d.to_dict())


@pytest.mark.parametrize("kwargs, field", [
    ({"num_unique_per_next": 0}, "num_unique_per_next"),
    ({"num_last": 0}, "num_last"),
    ({"num_next_per_last": 0}, "num_next_per_last"),
    ({"num_common": -1}, "num_common"),
    ({"num_common_per_last": -2}, "num_common_per_last"),
    ({"num_last": 1.5}, "num_last"),
    ({"num_common": True}, "num_common"),
    ({"unique_min": 0.0}, "unique_min"),
    ({"unique_min": float("nan")}, "unique_min"),
    ({"unique_max": 0.05}, "unique_max"),
    ({"unique_max": float("inf")}, "unique_max"),
    ({"unique_max": "1"}, "unique_max"),
])
def test_generator_bad_input_names_the_field(kwargs, field):
    args = {"num_last": 2, "num_next_per_last": 1, "num_common": 10, "num_common_per_last": 0,
            "num_unique_per_next": 10, **kwargs}
    with pytest.raises(ValidationError) as info:
        sequence_classes(**args)
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize("name", sorted(odeflow.data.PRESETS))
def test_toml_round_trip_is_exact(tmp_path, name):
    d = DataModel.preset(name)
    path = tmp_path / "model.toml"
    d.to_toml(path)
    back = DataModel.from_toml(path)
    assert back == d
    assert np.array_equal(back.active_probs, d.active_probs)
    assert np.array_equal(back.weights, d.weights)
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("text, field", [
    ("vocab_size = [", "toml"),
    ("classes = []", "vocab_size"),
    ("vocab_size = 4\nclasses = 3", "classes"),
    ("vocab_size = 4\n[[classes]]\nnext_token = 1\nquery_token = 0", "classes[0].probs"),
    ("vocab_size = 4\n[[classes]]\nnext_token = 1\nquery_token = 0\nprobs = {a = 1.0}",
     "classes[0].probs"),
    ("vocab_size = 4\n[[classes]]\nnext_token = 1\nquery_token = 0\ntokens = [1, 2]\n"
     "probs = [1.0]", "classes[0].probs"),
    ("vocab_size = 4\n[[classes]]\nnext_token = 1\nquery_token = 0\nprobs = [0.5, 0.5, 0.5, 0]",
     "classes[0].probs"),
    ("vocab_size = 4\ncolour = 1\n[[classes]]\nnext_token = 1\nquery_token = 0\nprobs = [1,0,0,0]",
     "colour"),
])
def test_bad_toml_names_the_field(text, field):
    with pytest.raises(ValidationError) as info:
        DataModel.from_toml_string(text)
    assert str(info.value).startswith(field), str(info.value)


def test_config_run_table():
    text = DataModel.preset("syn-small").to_toml_string() + "\n[run]\neta_z = 0.5\n"
    data, options = parse_config(text)
    assert data.vocab_size == 34 and options == {"eta_z": 0.5}
    with pytest.raises(ValidationError, match="^run.eta_y"):
        parse_config(text.replace("eta_z = 0.5", "eta_y = -2"))
    with pytest.raises(ValidationError, match="^run.speed"):
        parse_config(text.replace("eta_z = 0.5", "speed = 2"))


# ---------------------------------------------------------------- counts and seeds
def _count_entry_points():
    """Every public place a count or a seed enters, each as ``value -> checked value``."""
    from odeflow.data import sample_counts
    from odeflow.data.checks import check_count
    from odeflow.data.induction import InductionData
    from odeflow.data.induction.sequences import sample_sequences
    from odeflow.training.common import check_count as training_check_count

    small = DataModel.preset("syn-small")
    return {
        "data.checks.check_count": lambda v: check_count(v, "n"),
        "training.common.check_count": lambda v: training_check_count(v, "n"),
        "InductionData(vocab_size)": lambda v: InductionData(v, 2, 1, 1).vocab_size,
        "sample_counts(sample_size)":
            lambda v: sample_counts(small, 4, v).sample_size,
        "sample_sequences(sample_size)":
            lambda v: sample_sequences(v, 6, vocab_size=2, n_gram=2, alpha=1.0).sample_size,
    }


@pytest.mark.parametrize("value", [3, np.int64(3), 3.0, np.float64(3.0)])
def test_counts_take_integers_and_integral_floats_everywhere(value):
    """One policy for counts (the four validators it replaced had two): an integral
    float is exact, so it is taken as the integer."""
    for where, check in _count_entry_points().items():
        got = check(value)
        assert got == 3 and type(got) is int, where


@pytest.mark.parametrize("value", [True, 2.5, "3", None, math.nan, math.inf, [3]])
def test_counts_refuse_non_integers_everywhere(value):
    for where, check in _count_entry_points().items():
        with pytest.raises(ValidationError, match="must be an integer"):
            check(value)
            pytest.fail(where)


def test_count_bounds_and_seeds():
    from odeflow.data.checks import check_count, check_seeds

    with pytest.raises(ValidationError, match="^n: must be >= 2, got 1"):
        check_count(1, "n", 2)
    with pytest.raises(ValidationError, match="^n: must be <= 5, got 6"):
        check_count(6.0, "n", maximum=5)
    assert check_seeds(3) == [0, 1, 2] == check_seeds(3.0)
    assert check_seeds((4, np.int64(7), 2.0)) == [4, 7, 2]
    for bad, field in [(0, "seeds"), ([], "seeds"), ("12", "seeds"), ([1, -1], r"seeds\[1\]"),
                       ([0.5], r"seeds\[0\]"), (object(), "seeds")]:
        with pytest.raises(ValidationError, match=f"^{field}"):
            check_seeds(bad)
