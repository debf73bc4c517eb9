"""Level E against Level R (odeflow.analysis.levels, ``odeflow compare-levels``)."""

import json

import numpy as np
import pytest

import odeflow
from odeflow.analysis.levels import compare_levels, compare_levels_over_ratios, format_table
from odeflow.cli import main


def weak_overlap_model(common_weight=0.1):
    """syn-small with the common tokens down-weighted: features nearly orthogonal
    (Assumption 2), where Theorem 1 should describe Level E."""
    ramp = np.linspace(0.5, 1.5, 10)
    classes = []
    for k, n in enumerate([1, 2]):
        toks = list(range(10)) + list(range(10 + 10 * k, 20 + 10 * k))
        w = np.concatenate([np.full(10, common_weight), ramp])
        classes.append(odeflow.SequenceClass(n, 0, dict(zip(toks, w / w.sum(), strict=True)),
                                             normalize=True))
    return odeflow.DataModel(30, classes)


@pytest.fixture(scope="module")
def syn_small_ratios():
    data = odeflow.DataModel.preset("syn-small")
    return compare_levels_over_ratios(data, 1.0, [1.0, 0.1, 0.01], 1e3)


def test_level_e_eqn11_error_shrinks_with_ratio(syn_small_ratios):
    errors = [r.invariant_error_exact for r in syn_small_ratios]
    assert errors[0] > errors[1] > errors[2] > 0
    assert errors[2] < 0.1 * errors[0]
    for r in syn_small_ratios:
        assert r.invariant_error_reduced < 1e-8
        assert np.isfinite(r.z_deviation) and r.z_deviation > 0
        assert r.z_deviation_relative == pytest.approx(r.z_deviation / r.z_range)
        assert r.exact.flow == "exact" and r.reduced.flow == "reduced"
    json.dumps([r.to_dict() for r in syn_small_ratios])
    table = format_table(syn_small_ratios)
    assert len(table.splitlines()) == 4 and "Eqn11" in table


def test_levels_agree_when_features_are_nearly_orthogonal():
    data = weak_overlap_model(0.1)
    result = compare_levels(data, 1.0, 0.01, 1e4)
    assert result.z_deviation_relative < 0.1
    assert result.transition_time_exact == pytest.approx(result.transition_time_reduced,
                                                         rel=0.01)


def test_beta_option_is_passed_to_level_r():
    data = odeflow.DataModel.preset("syn-small")
    default = compare_levels(data, 1.0, 0.1, 100.0, keep_trajectories=False)
    larger = compare_levels(data, 1.0, 0.1, 100.0, beta=0.3)
    assert default.exact is None
    assert larger.reduced.meta["beta"][0][1] == 0.3
    assert larger.z_deviation < default.z_deviation


def test_invalid_input():
    data = odeflow.DataModel.preset("syn-small")
    with pytest.raises(odeflow.ValidationError, match="t_end"):
        compare_levels(data, 1.0, 0.1, -1.0)
    with pytest.raises(odeflow.ValidationError, match="ratios"):
        compare_levels_over_ratios(data, 1.0, [], 10.0)


def test_cli_table_and_json(capsys):
    assert main(["compare-levels", "--t-end", "50", "--ratios", "0.1,1"]) == 0
    out = capsys.readouterr().out
    assert "syn-small" in out and len(out.strip().splitlines()) == 4
    assert main(["compare-levels", "--t-end", "50", "--eta-z", "0.5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["data"] == "syn-small" and doc["results"][0]["eta_z"] == 0.5
    assert main(["compare-levels", "--ratios", "0.1,x"]) == 2
    assert "ratios" in capsys.readouterr().err


def test_level_t_and_sgd_columns():
    data = odeflow.DataModel.preset("syn-small")
    r = compare_levels(data, 1.0, 1.0, 40.0, seq_len=16, sample_size=8, sgd_seeds=2,
                       batch_size=16, momentum=0.5)
    assert r.finite_t.flow == "finite_t" and r.seq_len == 16 and r.samples_per_class == 8
    assert r.z_deviation_finite_t > 0
    # warm-up map at mu = 0.5: t_21 = 2 (21 - 1 + 2^-21) = 40.0
    assert r.sgd_gap["steps"] == 21
    for level in ("exact", "finite_t", "reduced", "standard_error"):
        assert np.isfinite(r.sgd_gap[level]) and r.sgd_gap[level] > 0
    doc = r.to_dict()
    json.dumps(doc)
    assert doc["sgd"]["finite_t"] == r.sgd_gap["finite_t"]
    table = format_table([r])
    assert "max|zT-zE|" in table and "gap T-SGD" in table
    with pytest.raises(odeflow.ValidationError, match="sgd_seeds"):
        compare_levels(data, 1.0, 1.0, 40.0, sgd_seeds=2)


def test_cli_level_t_columns(capsys):
    assert main(["compare-levels", "--t-end", "20", "--eta-z", "1", "--seq-len", "16",
                 "--samples-per-class", "4", "--sgd-seeds", "2", "--batch-size", "8",
                 "--wide"]) == 0
    out = capsys.readouterr().out
    assert "gap T-SGD" in out and len(out.strip().splitlines()) == 3  # --wide: one block
    assert main(["compare-levels", "--t-end", "20", "--seq-len", "1"]) == 2
    assert "--seq-len" in capsys.readouterr().err
