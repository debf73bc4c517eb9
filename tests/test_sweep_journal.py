"""The sweep store's journal: records round-trip bit for bit, a record cut short is
ignored, an interrupted sweep's points are read and resumed from the journal, the journal
is folded into the zarr arrays, one sweep at a time writes a store, and store chunks."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

from odeflow.errors import ValidationError  # noqa: E402
from odeflow.sweeps import TASKS, open_store, register, sweep  # noqa: E402
from odeflow.sweeps import store as store_module  # noqa: E402
from odeflow.sweeps.journal import (  # noqa: E402
    JOURNAL_GROUP,
    JOURNAL_NAME,
    decode,
    encode,
    read_journal,
)
from odeflow.sweeps.outputs import VARYING  # noqa: E402
from odeflow.sweeps.scan_snap import FLOW_PARAMETERS, solve_flow  # noqa: E402
from odeflow.sweeps.store import CHUNK_BYTES, chunk_shape, store_lock  # noqa: E402
from odeflow.sweeps.tasks import TaskKind  # noqa: E402
from tests.sweep_helpers import assert_same_numbers  # noqa: E402

GRID = {"eta_y": [0.5, 1.0, 2.0], "eta_z": [0.1, 1.0]}
SETTINGS = {"t_end": 200.0}
TASK = "exact_interruptible"


def outputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((2, 5))
    logits[0, 1] = np.nan
    return {"logits": logits, "nfev": np.int64(seed), "wall_time": np.float64(-0.0),
            "J": np.array([np.inf, -np.inf, 1e-310]), "error": f"E{seed}: é"}


def assert_same_outputs(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        if isinstance(a[name], str):
            assert a[name] == b[name]
        else:  # same dtype, shape and bytes: NaN, -0.0 and subnormals kept
            x, y = np.asarray(a[name]), np.asarray(b[name])
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


# ------------------------------------------------------------------ records
def test_records_round_trip_bit_for_bit():
    data = encode((1, 0), outputs(1)) + encode((2, 3), outputs(2))
    (i1, o1), (i2, o2) = decode(data)
    assert (i1, i2) == ((1, 0), (2, 3))
    assert_same_outputs(o1, outputs(1))
    assert_same_outputs(o2, outputs(2))


def test_a_record_cut_short_or_damaged_is_skipped_alone():
    first, second = encode((0,), outputs(0)), encode((1,), outputs(1))
    data = first + second
    for end in range(len(data) + 1):  # a write stopped after any byte
        expected = (end >= len(first)) + (end == len(data))
        records = decode(data[:end])
        assert len(records) == expected, end
        torn = end - len(first) if end >= len(first) else end
        assert (records.skipped_records, records.skipped_bytes) == (int(torn > 0) * (
            end != len(data)), torn * (end != len(data))), end
    for at in (0, 5, len(first) - 1):  # a byte changed (magic, lengths, body): skipped
        broken = bytearray(data)
        broken[at] ^= 0xFF
        records = decode(bytes(broken))
        assert [index for index, _ in records] == [(1,)]  # the next record is found
        assert (records.skipped_records, records.skipped_bytes) == (1, len(first))
        assert_same_outputs(records[0][1], outputs(1))


def test_a_non_numeric_output_is_refused():
    with pytest.raises(TypeError, match="'x'"):
        encode((0,), {"x": np.array(["a"], dtype=object)})


# ---------------------------------------------------------- interrupted sweeps
STOP = {"at": None}


def stops_at(data, values, times):
    if (values["eta_y"], values["eta_z"]) == STOP["at"]:
        raise KeyboardInterrupt
    return solve_flow(data, values, times, flow="exact")


@pytest.fixture
def interruptible():
    register(TaskKind(TASK, "flow", stops_at, FLOW_PARAMETERS))
    yield partial(sweep, TASK, GRID, settings=SETTINGS, backend="serial")
    TASKS.pop(TASK, None)
    STOP["at"] = None


@pytest.fixture
def interrupted(tmp_path, interruptible):
    """A store whose sweep stopped at its fourth point: three points in the journal."""
    path = tmp_path / "s.zarr"
    STOP["at"] = (1.0, 1.0)
    with pytest.raises(KeyboardInterrupt):
        interruptible(store=path)
    STOP["at"] = None
    return path


def test_an_interrupted_sweep_keeps_its_points_in_the_journal(interrupted, interruptible):
    assert len(read_journal(interrupted)) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the journal's group is no stray object for zarr
        raw = xr.open_zarr(interrupted, consolidated=False)
        assert int(raw.computed.sum()) == 0  # not folded yet
    stored = open_store(interrupted)  # the arrays with the journal replayed
    assert stored.computed.values.ravel().tolist() == [1, 1, 1, 0, 0, 0]
    whole = interruptible()
    assert_same_numbers(stored.isel(eta_y=slice(0, 1)), whole.isel(eta_y=slice(0, 1)))
    assert_same_numbers(stored.isel(eta_y=[1], eta_z=[0]), whole.isel(eta_y=[1], eta_z=[0]))
    assert np.isnan(stored.J.values.reshape(6, -1)[3:]).all()  # the pending points


def test_resume_folds_the_journal_and_runs_only_the_rest(interrupted, interruptible, tmp_path):
    ds = interruptible(store=interrupted, resume=True)
    assert ds.attrs["already_done"] == 3 and ds.attrs["computed_now"] == 3
    assert not (interrupted / JOURNAL_GROUP).exists()  # folded, and the group removed
    reference = interruptible(store=tmp_path / "whole.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        raw = xr.open_zarr(interrupted, consolidated=False).load()
    xr.testing.assert_identical(raw.drop_vars(VARYING), xr.open_zarr(
        tmp_path / "whole.zarr", consolidated=False).load().drop_vars(VARYING))
    assert (raw.computed.values == 1).all()
    assert_same_numbers(ds, reference)


def test_a_torn_last_record_is_ignored(interrupted, interruptible):
    journal = interrupted / JOURNAL_GROUP / JOURNAL_NAME
    whole = journal.read_bytes()
    journal.write_bytes(whole + encode((2, 1), outputs(9))[:-3])  # a fourth write cut short
    assert open_store(interrupted).computed.values.ravel().tolist() == [1, 1, 1, 0, 0, 0]
    ds = interruptible(store=interrupted, resume=True)
    assert ds.attrs["computed_now"] == 3 and (ds.computed.values == 1).all()
    assert not journal.exists()


def test_folding_as_it_goes(tmp_path, interruptible, monkeypatch):
    """With a fold after every point, the zarr arrays alone hold the finished points."""
    monkeypatch.setattr(store_module, "FOLD_SECONDS", 0.0)
    path = tmp_path / "s.zarr"
    STOP["at"] = (2.0, 0.1)
    with pytest.raises(KeyboardInterrupt):
        interruptible(store=path)
    assert read_journal(path) == []
    raw = xr.open_zarr(path, consolidated=False)
    assert raw.computed.values.ravel().tolist() == [1, 1, 1, 1, 0, 0]


def test_one_sweep_at_a_time_writes_a_store(interrupted, interruptible):
    before = {p: p.read_bytes() for p in sorted(interrupted.rglob("*"))
              if p.is_file() and p.name != "lock"}
    with store_lock(interrupted):  # another sweep holds the store
        with pytest.raises(ValidationError, match=r"store: .* is being written by another"):
            interruptible(store=interrupted, resume=True)
    after = {p: p.read_bytes() for p in sorted(interrupted.rglob("*"))
             if p.is_file() and p.name != "lock"}
    assert after == before  # journal and arrays untouched
    assert interruptible(store=interrupted, resume=True).attrs["computed_now"] == 3


# ------------------------------------------------------------------- chunks
@pytest.mark.parametrize("points, inner, itemsize", [
    ((20, 20), (2, 62), 8), ((20, 20), (), 8), ((400, 10, 3), (200,), 8),
    ((7,), (3000, 100), 8), ((5, 4), (), 64)])
def test_chunks_hold_whole_points_up_to_the_target(points, inner, itemsize):
    chunks = chunk_shape(points, inner, itemsize)
    n = len(points)
    assert chunks[n:] == inner  # whole per-point axes
    assert all(1 <= c <= s for c, s in zip(chunks[:n], points, strict=True))
    per_point = int(np.prod(inner, dtype=np.int64)) * itemsize
    size = int(np.prod(chunks[:n])) * per_point
    assert size <= max(CHUNK_BYTES, per_point)
    # a dim is split only when everything after it is whole
    for k in range(n - 1):
        if chunks[k] > 1:
            assert chunks[k + 1:n] == points[k + 1:]


def test_a_small_grid_is_one_chunk_per_output(tmp_path):
    path = tmp_path / "s.zarr"
    sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    group = zarr.open_group(path, mode="r")
    for name in ("logits", "J", "computed", "error"):
        assert group[name].chunks == group[name].shape, name
