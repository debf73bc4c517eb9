"""Trajectory.load reads the format and refuses anything else with a clear ValidationError."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from odeflow import DataModel, SequenceClass, Trajectory, ValidationError, solve

SMALL = DataModel(6, [SequenceClass(4, 1, {0: 0.5, 2: 0.5}),
                      SequenceClass(5, 1, {0: 0.25, 3: 0.75})])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / "good.npz"
    solve(SMALL, flow="reduced", t_span=(0.0, 10.0), progress=False).save(path)
    return path


def contents(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return arrays, json.loads(str(arrays.pop("metadata")))


def rewrite(tmp_path, arrays, metadata=None, text=None):
    out = dict(arrays)
    out["metadata"] = np.array(text if text is not None else json.dumps(metadata))
    path = tmp_path / "t.npz"
    np.savez(path, **out)
    return path


def refused(path, pattern):
    with pytest.raises(ValidationError, match=pattern) as info:
        Trajectory.load(path)
    assert info.value.field == "path"
    assert "pickle" not in str(info.value).lower()
    return str(info.value)


def test_intact_file_round_trips(saved):
    traj = Trajectory.load(saved)
    assert np.all(np.isfinite(traj.z_active)) and "margin" in traj.series


def test_not_an_archive_says_so_without_pickle_advice(tmp_path):
    text = tmp_path / "notes.npz"
    text.write_text("hello")
    refused(text, "is not an odeflow result file")
    pickled = tmp_path / "p.npz"
    pickled.write_bytes(pickle.dumps({"t": [0, 1]}))
    refused(pickled, "is not an odeflow result file")
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(3))
    refused(npy, "is not an odeflow result file")


def test_object_array_is_not_unpickled(tmp_path, saved):
    arrays, metadata = contents(saved)
    arrays["t"] = np.array([{"a": 1}], dtype=object)
    path = tmp_path / "o.npz"
    np.savez(path, metadata=np.array(json.dumps(metadata)), **arrays)
    refused(path, "damaged or not an odeflow result")


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999])
def test_truncated_file(tmp_path, saved, cut):
    data = saved.read_bytes()
    path = tmp_path / "cut.npz"
    path.write_bytes(data[:int(len(data) * cut)])
    refused(path, "damaged|not an odeflow result")


def test_flipped_bytes(tmp_path, saved):
    data = bytearray(saved.read_bytes())
    for i in range(200, len(data), 997):
        data[i] ^= 0x5A
    path = tmp_path / "flip.npz"
    path.write_bytes(bytes(data))
    refused(path, "damaged|not an odeflow result")


def test_missing_extra_and_misshapen_arrays(tmp_path, saved):
    arrays, metadata = contents(saved)
    refused(rewrite(tmp_path, {k: v for k, v in arrays.items() if k != "z_base"}, metadata),
            "'z_base' is missing")
    refused(rewrite(tmp_path, {**arrays, "junk": np.zeros(2)}, metadata),
            "unexpected array 'junk'")
    refused(rewrite(tmp_path, {**arrays, "z_active": arrays["z_active"][:, :, :-1]}, metadata),
            "'z_active' has shape .* inconsistent with the stored data model")
    refused(rewrite(tmp_path, {**arrays, "series__margin": arrays["series__margin"][:-1]},
                    metadata), "expected .* times")
    refused(rewrite(tmp_path, {**arrays, "t": arrays["t"].astype(str)}, metadata),
            "'t' has type")


@pytest.mark.parametrize("name", ["t", "z_active", "series__margin"])
def test_non_finite_values(tmp_path, saved, name):
    arrays, metadata = contents(saved)
    bad = arrays[name].astype(float).copy()
    bad.flat[1] = np.nan
    refused(rewrite(tmp_path, {**arrays, name: bad}, metadata), f"'{name}' holds non-finite")


def test_unknown_version_and_other_kinds(tmp_path, saved):
    arrays, metadata = contents(saved)
    refused(rewrite(tmp_path, arrays, {**metadata, "format": "odeflow-trajectory/9"}),
            "format version 'odeflow-trajectory/9'; this odeflow reads")
    refused(rewrite(tmp_path, arrays, {**metadata, "format": "odeflow-snap/1"}),
            "is not an odeflow-trajectory file")


@pytest.mark.parametrize("text", ["{", "[]", "null", '"x"', '{"format": "odeflow-trajectory/1"}'])
def test_tampered_metadata(tmp_path, saved, text):
    arrays, _ = contents(saved)
    refused(rewrite(tmp_path, arrays, text=text), "metadata record is damaged")


def test_metadata_inconsistent_with_arrays(tmp_path, saved):
    arrays, metadata = contents(saved)
    metadata["data"]["vocab_size"] += 1
    refused(rewrite(tmp_path, arrays, metadata), "'z_base' has shape")
    metadata["data"]["vocab_size"] = -1
    refused(rewrite(tmp_path, arrays, metadata), "stored data model is invalid")


def test_snap_result_round_trips_and_is_checked(tmp_path):
    from odeflow import SnapResult

    snap_model = DataModel(6, [SequenceClass(4, 1, {0: 0.5, 2: 0.5}),
                               SequenceClass(5, 1, {0: 0.5, 3: 0.5})])
    result = solve(snap_model, flow="snap", t_span=(0.0, 10.0), progress=False)
    path = result.save(tmp_path / "snap.npz")
    loaded = SnapResult.load(path)
    np.testing.assert_array_equal(loaded.B, result.B)
    assert loaded.data is not None and loaded.meta["a"] == result.meta["a"]
    refused_snap = pytest.raises(ValidationError, match="is not an odeflow-snap file")
    traj_path = solve(SMALL, t_span=(0.0, 1.0), progress=False).save(tmp_path / "t.npz")
    with refused_snap:
        SnapResult.load(traj_path)
    refused(path, "is not an odeflow-trajectory file")
    arrays, metadata = contents(path)
    arrays["B"] = arrays["B"][:-1]
    with pytest.raises(ValidationError, match="'B' has shape"):
        SnapResult.load(rewrite(tmp_path, arrays, metadata))


@pytest.mark.parametrize("member, pattern", [("metadata", "'metadata' is not an .npy array"),
                                             ("metadata.npy", "'metadata' is not an .npy array")])
def test_a_member_that_is_not_npy_is_refused_by_name(tmp_path, saved, member, pattern):
    import zipfile

    arrays, _ = contents(saved)
    path = tmp_path / "text.npz"
    np.savez(path, **arrays)
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(member, b"hello")  # 5 bytes of text, no .npy header
    message = refused(path, pattern)
    assert str(path) in message


@pytest.mark.parametrize("name, dtype", [("t", np.int8), ("t", np.float32),
                                         ("z_active", np.float32), ("z_base", np.int64)])
def test_narrowed_types_are_refused(tmp_path, saved, name, dtype):
    arrays, metadata = contents(saved)
    arrays[name] = arrays[name].astype(dtype)
    refused(rewrite(tmp_path, arrays, metadata), f"array '{name}' has type")


def test_repeated_times_are_refused(tmp_path, saved):
    arrays, metadata = contents(saved)
    arrays["t"][2] = arrays["t"][1]
    refused(rewrite(tmp_path, arrays, metadata), "repeated")
