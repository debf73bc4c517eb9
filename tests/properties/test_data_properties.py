"""Properties of the data layer and the TOML/config loaders (spec section 1).

Valid input round-trips exactly and derives consistent token sets; every
invalid input is rejected with a ValidationError (a ValueError) whose message
starts with the name of the offending field; arbitrary text never escapes as
any other exception.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tomli_w
from hypothesis import example, given, settings
from hypothesis import strategies as st

from odeflow import DataModel, SequenceClass, ValidationError
from odeflow.data import parse_config
from odeflow.testing import data_models, learning_rates, model_tables, probability_vectors
from tests.invalid_inputs import (
    invalid_data_model_args,
    invalid_model_tables,
    invalid_run_tables,
    invalid_sequence_class_args,
    toml_documents,
)
from tests.properties import assert_field, examples

VALID_MODEL = DataModel(4, [SequenceClass(1, 0, {1: 0.5, 2: 0.5}),
                            SequenceClass(2, 0, {1: 0.25, 3: 0.75})])


def _load_all_ways(table: dict):
    """Load a table with from_dict, from_toml_string and parse_config; the results."""
    text = tomli_w.dumps(table)
    return [DataModel.from_dict(table), DataModel.from_toml_string(text),
            parse_config(text)[0], parse_config(tomli_w.dumps({"data": table}))[0]]


# ------------------------------------------------------------------ valid input
@settings(max_examples=examples(60))
@given(data=data_models())
def test_toml_round_trip_is_exact(data):
    """to_toml_string -> from_toml_string gives the same model, bit for bit."""
    back = DataModel.from_toml_string(data.to_toml_string())
    assert back == data
    assert np.array_equal(back.active_tokens, data.active_tokens)
    assert np.array_equal(back.active_probs, data.active_probs)
    assert np.array_equal(back.weights, data.weights)
    assert np.array_equal(back.query_tokens, data.query_tokens)


@settings(max_examples=examples(60))
@given(pair=model_tables())
def test_every_table_layout_loads_the_same_model(pair):
    """tokens+probs arrays, a probs table and a dense probs array describe one model,
    through from_dict, from_toml_string and parse_config alike (also under [data])."""
    table, data = pair
    for loaded in _load_all_ways(table):
        assert loaded == data
        assert np.array_equal(loaded.weights, data.weights)


@settings(max_examples=examples(60))
@given(data=data_models(max_classes=4, max_common=3))
def test_token_sets_are_consistent(data):
    """Spec section 1: G(l) = {n : c_{l|n} > 0}; the distinct sets G_DT(n) and the
    common set G_CT partition the active tokens; probabilities and weights are
    distributions."""
    active = set(data.active_tokens.tolist())
    common = set(data.common_tokens().tolist())
    seen: set[int] = set()
    for c in data.classes:
        n = c.next_token
        distinct = set(data.distinct_tokens(n).tolist())
        assert distinct <= set(c.support.tolist())
        assert not distinct & seen and not distinct & common
        seen |= distinct
        assert data.probs(n).sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(data.probs(n) >= 0)
        assert n in data.classes_of_query(c.query_token)
    assert seen | common == active
    for token in range(data.vocab_size):
        group = data.token_group(token).tolist()
        expected = [c.next_token for c in data.classes if data.probs(c.next_token)[token] > 0]
        assert group == expected
        assert (len(group) > 1) == (token in common)
    assert np.all(data.weights > 0) and data.weights.sum() == pytest.approx(1.0, abs=1e-12)


@given(p=st.integers(1, 6).flatmap(probability_vectors),
       scale=learning_rates(1e-100, 1e100))
def test_normalize_rescales_any_moderate_scale(p, scale):
    """normalize=True turns c * p (any positive scale c) back into p."""
    cls = SequenceClass(0, 0, list(p * scale), normalize=True)
    assert np.allclose(cls.support_probs, p, rtol=1e-12, atol=0)
    data = DataModel(max(2, p.size), [SequenceClass(k, 0, {0: 1.0}) for k in range(p.size)],
                     list(p * scale), normalize=True)
    assert np.allclose(data.weights, p, rtol=1e-12, atol=0)


@given(data=data_models(),
       run=st.fixed_dictionaries({}, optional={
           "eta_y": learning_rates(), "eta_z": learning_rates(), "t_end": learning_rates(1, 1e10),
           "rtol": learning_rates(1e-12, 1e-3), "atol": learning_rates(1e-14, 1e-3),
           "flow": st.sampled_from(["exact", "reduced", "snap"]),
           "method": st.sampled_from(["auto", "LSODA", "Radau"])}))
def test_config_run_table_is_read_back(data, run):
    """parse_config returns the model and exactly the [run] options given."""
    loaded, options = parse_config(data.to_toml_string() + "\n" + tomli_w.dumps({"run": run}))
    assert loaded == data
    assert options == run


# ---------------------------------------------------------------- invalid input
@settings(max_examples=examples(200))
@given(bad=invalid_sequence_class_args())
def test_invalid_sequence_class_names_the_field(bad):
    """Every invalid next token, query token or probability vector is a
    ValidationError naming that argument."""
    with pytest.raises(Exception) as info:
        SequenceClass(**bad.value)
    assert_field(info.value, bad.field)


@settings(max_examples=examples(200))
@given(bad=invalid_data_model_args())
def test_invalid_data_model_names_the_field(bad):
    """Every invalid vocabulary size, class list or weight vector is a
    ValidationError naming the field (classes[i]... for per-class faults)."""
    with pytest.raises(Exception) as info:
        DataModel(**bad.value)
    assert_field(info.value, bad.field)


@settings(max_examples=examples(200))
@given(bad=invalid_model_tables())
def test_invalid_model_table_names_the_field(bad):
    """Every broken data-model table is rejected by from_dict, by from_toml_string
    and by parse_config (top level and under [data]) with a ValidationError naming
    the field (TOML key path)."""
    text = tomli_w.dumps(bad.value)
    loaders = [lambda: DataModel.from_dict(bad.value), lambda: DataModel.from_toml_string(text),
               lambda: parse_config(text)]
    if bad.kind not in ("unknown-key",):  # under [data], an unknown top-level key is the same
        loaders.append(lambda: parse_config(tomli_w.dumps({"data": bad.value})))
    for load in loaders:
        with pytest.raises(Exception) as info:
            load()
        assert_field(info.value, bad.field)


@settings(max_examples=examples(200))
@given(data=data_models(max_classes=2), bad=invalid_run_tables())
def test_invalid_run_table_names_the_field(data, bad):
    """A [run] value that is not a positive finite number (or, for flow/method, not
    a string) or an unknown [run] key is a ValidationError naming run.<key>."""
    text = data.to_toml_string() + "\n" + tomli_w.dumps({"run": bad.value})
    with pytest.raises(Exception) as info:
        parse_config(text)
    assert_field(info.value, bad.field)


@example(text="vocab_size = [")
@example(text="[run]\neta_y = 0")
@example(text="data = 3")
@settings(max_examples=examples(200))
@given(text=toml_documents(nested=False))
def test_arbitrary_text_loads_or_names_a_field(text):
    """Any text either loads or raises a ValidationError whose message starts with
    its field; never another exception type (no traceback from the internals)."""
    for load in (DataModel.from_toml_string, parse_config):
        try:
            result = load(text)
        except ValidationError as exc:
            assert exc.field and str(exc).startswith(exc.field + ":")
        else:
            data = result if isinstance(result, DataModel) else result[0]
            assert data.num_classes >= 1 and data.active_tokens.size >= 1
            assert np.all(np.isfinite(data.active_probs))


# ------------------------------------- fixed bugs (kept as regression properties)
UNHASHABLE_TOKENS = ("vocab_size = 4\n[[classes]]\nnext_token = 1\nquery_token = 0\n"
                     "tokens = [[1], [2]]\nprobs = [0.5, 0.5]\n")


@example(text=UNHASHABLE_TOKENS)
@given(text=toml_documents(nested=True))
def test_nested_values_load_or_name_a_field(text):
    """As test_arbitrary_text_loads_or_names_a_field, with arrays and tables nested
    at any depth (e.g. inside `tokens`)."""
    for load in (DataModel.from_toml_string, parse_config):
        try:
            load(text)
        except ValidationError as exc:
            assert str(exc).startswith(exc.field + ":")


HUGE_TOKEN = ("vocab_size = 4\n[[classes]]\nnext_token = 1\nquery_token = 0\n"
              "tokens = [99999999999999999999, 2]\nprobs = [0.5, 0.5]\n")
HUGE_RUN = VALID_MODEL.to_toml_string() + "\n[run]\neta_y = " + "9" * 400 + "\n"


@example(case=(HUGE_TOKEN, "classes[0]"))
@example(case=(HUGE_RUN, "run.eta_y"))
@given(case=st.one_of(
    st.integers(2**63, 10**400).map(
        lambda v: (HUGE_TOKEN.replace("99999999999999999999", str(v)), "classes[0]")),
    st.integers(2**1024, 10**400).map(
        lambda v: (HUGE_RUN.replace("9" * 400, str(v)), "run.eta_y"))))
def test_out_of_range_integers_name_the_field(case):
    """Integers beyond TOML's 64-bit range are rejected with a ValidationError
    naming the field, in a token list and in the [run] table."""
    text, field = case
    with pytest.raises(Exception) as info:
        parse_config(text)
    assert_field(info.value, field)


@example(values=[1e308, 1e308])
@given(values=st.lists(st.floats(min_value=5e-324, max_value=1.7e308), min_size=1, max_size=5))
def test_normalize_never_empties_a_distribution(values):
    """normalize=True on positive finite numbers gives a distribution with the same
    support, or a ValidationError naming probs/weights."""
    try:
        cls = SequenceClass(0, 0, values, normalize=True)
    except ValidationError as exc:
        assert_field(exc, "probs")
    else:
        assert cls.support.size == len(values)
        assert math.isclose(cls.support_probs.sum(), 1.0, abs_tol=1e-9)
    classes = [SequenceClass(k, 0, {0: 1.0}) for k in range(len(values))]
    try:
        data = DataModel(max(2, len(values)), classes, values, normalize=True)
    except ValidationError as exc:
        assert_field(exc, "weights")
    else:
        assert np.all(data.weights > 0)
        assert math.isclose(data.weights.sum(), 1.0, abs_tol=1e-9)


def test_valid_model_fixture_is_valid():
    """The fixed model the open-bug examples build on loads (so only the bug fails)."""
    assert parse_config(VALID_MODEL.to_toml_string())[0] == VALID_MODEL
