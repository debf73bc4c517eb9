"""InductionTrajectory (spec section 10): save/load round trip, refusal of foreign files, table."""

import json

import numpy as np
import pytest

from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError
from odeflow.results import InductionTrajectory


def example(copier=True, n=6):
    data = InductionData.preset("ih-point")
    S = data.subsets
    rng = np.random.default_rng(0)
    t = np.concatenate([[0.0], np.geomspace(0.1, 100.0, n - 1)])
    c = rng.normal(size=(n, len(S)))
    p = c**2 / (c**2).sum(axis=1, keepdims=True)
    w = rng.normal(size=(n, 2, 2)) if copier else None
    return InductionTrajectory(t, np.linspace(0.01, 3, n), S, p, w, c,
                               np.linspace(0.7, 0.4, n), stats={"nfev": 12, "method": "LSODA"},
                               meta={"flow": "population" if copier else "copier",
                                     "loss": "nll"}, data=data)


@pytest.mark.parametrize("copier", [True, False])
def test_save_load_round_trip(tmp_path, copier):
    traj = example(copier)
    path = traj.save(tmp_path / "r.npz")
    back = InductionTrajectory.load(path)
    for name in ("t", "a", "c", "subset_weights", "loss"):
        np.testing.assert_array_equal(getattr(back, name), getattr(traj, name))
    if copier:
        np.testing.assert_array_equal(back.copier_logits, traj.copier_logits)
    else:
        assert back.copier_logits is None
    assert back.subsets == traj.subsets
    assert back.data == traj.data
    assert back.stats == traj.stats
    assert back.meta["flow"] == traj.meta["flow"] and "provenance" in back.meta
    assert back.top_subset() == traj.top_subset()


def test_load_refuses_foreign_files(tmp_path):
    bad = tmp_path / "x.npz"
    np.savez(bad, t=np.arange(3.0))
    with pytest.raises(ValidationError) as info:
        InductionTrajectory.load(bad)
    assert info.value.field == "path" and "x.npz" in str(info.value)
    text = tmp_path / "x.txt"
    text.write_text("hello")
    with pytest.raises(ValidationError) as info:
        InductionTrajectory.load(text)
    assert info.value.field == "path"


def rewrite(path, out, **changes):
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(str(arrays["metadata"]))
    for key, value in changes.items():
        if key in meta:
            meta[key] = value
        elif value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    arrays["metadata"] = np.array(json.dumps(meta))
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize("change, words", [
    ({"a": np.zeros(5)}, "shape"),
    ({"loss": None}, "arrays"),
    ({"t": np.array([0.0, 1.0, 1.0, 2.0, 3.0, 4.0])}, "increasing"),
    ({"subsets": [[1], [2]]}, "subsets"),
    ({"format": "odeflow-trajectory/1"}, "odeflow-induction"),
    ({"data": {"vocab_size": 1}}, "data model"),
    ({"c": np.full((6, 4), np.nan)}, "non-finite"),
])
def test_load_refuses_damaged_files(tmp_path, change, words):
    good = example().save(tmp_path / "good.npz")
    bad = rewrite(good, tmp_path / "bad.npz", **change)
    with pytest.raises(ValidationError, match=words) as info:
        InductionTrajectory.load(bad)
    assert info.value.field == "path"


def test_table_rows_follow_the_series():
    traj = example(n=20)
    header, rows = traj.table_rows(5)
    assert header == ["t", "loss", "a", "top subset", "p_S"]
    assert rows[0][0] == 0.0 and rows[-1][0] == traj.t[-1]
    for t, loss, a, top, p in rows:
        i = int(np.searchsorted(traj.t, t))
        assert (loss, a) == (traj.loss[i], traj.a[i])
        k = int(np.argmax(traj.subset_weights[i]))
        assert p == traj.subset_weights[i, k]
        assert top == "{" + ", ".join(map(str, traj.subsets[k])) + "}"
    assert len(traj.summary_table(5).splitlines()) == len(rows) + 1
