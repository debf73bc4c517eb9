"""Data layer (spec sections 1 and 7): validation, derived token sets, presets, TOML."""

import math

import numpy as np
import pytest

import odeflow
import odeflow.analysis.closed_forms
import odeflow.training
from odeflow import DataModel, SequenceClass, ValidationError
from odeflow.data import parse_config


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
    (lambda: odeflow.solve(two_classes(), z0=np.zeros((1, 5))), "z0"),
    (lambda: odeflow.solve(two_classes(), z0=np.zeros((1, 6)) + 1j), "z0"),     # complex
    (lambda: odeflow.solve(two_classes(), z0={3: np.zeros(6)}), "z0"),         # not a query
    (lambda: odeflow.solve(two_classes(), eta_y=True), "eta_y"),               # bool
    (lambda: odeflow.solve(two_classes(), eta_z="0.5"), "eta_z"),              # text
    (lambda: odeflow.solve(two_classes(), t_span=(0, 10**400)), "t_end"),      # overflow
    (lambda: odeflow.solve(two_classes(), t_span=(10**400, 1)), "t_span"),
    (lambda: SequenceClass(1, 0, ["0.5", "0.5"]), "probs"),                    # text
    (lambda: SequenceClass(1, 0, [True, False]), "probs"),                     # bools
    (lambda: SequenceClass(1, 0, {1: 1e308, 2: 1e308, 3: 1e-300}, normalize=True), "probs"),
    (lambda: DataModel(10**9, [SequenceClass(1, 0, {0: 1.0})]), "vocab_size"),
    (lambda: odeflow.solve(None, flow="snap", a=1.0, pi=0.5, vocab_size=3, zc0=True), "zc0"),
    (lambda: odeflow.training.train_sgd(two_classes(), 1.0, 1.0, 2, 2, 4, momentum=10**400),
     "momentum"),
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
    small = DataModel.preset("syn-small")
    assert small.vocab_size == 30 and small.num_classes == 2
    assert small.query_tokens.tolist() == [0]
    assert small.common_tokens().tolist() == list(range(10))
    assert small.distinct_tokens(1).tolist() == list(range(10, 20))
    assert small.distinct_tokens(2).tolist() == list(range(20, 30))
    p1 = small.probs(1)
    assert np.all(np.diff(p1[10:20]) > 0)          # increasing within the block
    assert np.allclose(p1[:10], p1[0])              # equal common weights
    assert p1.sum() == pytest.approx(1.0, abs=1e-15)
    medium = DataModel.preset("syn-medium")
    assert medium.num_classes == 20 and medium.query_tokens.size == 5
    assert medium.common_tokens().size == 100
    assert medium.active_tokens.size < medium.vocab_size


@pytest.mark.parametrize("name", sorted(odeflow.PRESETS))
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
    assert data.vocab_size == 30 and options == {"eta_z": 0.5}
    with pytest.raises(ValidationError, match="^run.eta_y"):
        parse_config(text.replace("eta_z = 0.5", "eta_y = -2"))
    with pytest.raises(ValidationError, match="^run.speed"):
        parse_config(text.replace("eta_z = 0.5", "speed = 2"))
