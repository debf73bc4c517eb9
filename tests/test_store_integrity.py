"""A damaged sweep store is refused by name by every reader (``open_store``, ``odeflow plot
sweep``, ``odeflow sweep --resume``: exit 2, one line), silent corruption is detected
(checksums, every chunk present, a record of the ``computed`` flags), and one damaged
journal record costs one point (the journal resynchronises)."""

from __future__ import annotations

import json
import shutil
import struct
import zlib

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

from odeflow.errors import ValidationError  # noqa: E402
from odeflow.sweeps import open_store, sweep  # noqa: E402
from odeflow.sweeps.journal import JOURNAL_GROUP, JOURNAL_NAME, MAGIC, Journal, encode  # noqa: E402
from odeflow.sweeps.spec import make_spec  # noqa: E402
from odeflow.sweeps.store import SweepArrays  # noqa: E402
from tests.cli_helpers import cli, one_error_line  # noqa: E402
from tests.sweep_helpers import assert_same_numbers  # noqa: E402

GRID = {"eta_y": [0.5, 1.0], "eta_z": [0.1, 1.0, 2.0]}
SETTINGS = {"t_end": 50.0}
CONFIG = ('[sweep]\ntask = "exact"\npreset = "syn-small"\n[sweep.grid]\n'
          "eta_y = [0.5, 1.0]\neta_z = [0.1, 1.0, 2.0]\n[sweep.settings]\nt_end = 50.0\n")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2 x 3 sweep store (every point computed and folded) and its dataset."""
    path = tmp_path_factory.mktemp("finished") / "s.zarr"
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    return path, ds


@pytest.fixture
def store(finished, tmp_path):
    """A copy of the finished store, to damage."""
    path = tmp_path / "s.zarr"
    shutil.copytree(finished[0], path)
    (tmp_path / "s.toml").write_text(CONFIG)
    return path


def edit_json(path, change) -> None:
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def set_spec_attr(value):
    return lambda store: edit_json(store / "zarr.json",
                                   lambda m: m["attributes"].update(odeflow_sweep=value))


def journal(store, data: bytes) -> None:
    """Give ``store`` a journal holding ``data`` (as a killed sweep leaves it)."""
    folder = store / JOURNAL_GROUP
    folder.mkdir(exist_ok=True)
    (folder / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", '
                                      '"attributes": {}}')
    (folder / JOURNAL_NAME).write_bytes(data)


def raw_record(header: bytes, payload: bytes = b"") -> bytes:
    body = header + payload
    return struct.pack("<4sIII", MAGIC, len(header), len(payload), zlib.crc32(body)) + body


def point(index=(0, 0), **outputs) -> bytes:
    out = {"nfev": np.int64(7), "computed": np.int64(1), "error": ""}
    out.update(outputs)
    return encode(index, out)


def halve(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def flip_middle(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


DAMAGE = {
    "chunk truncated": lambda s: halve(s / "entropy/c/0/0/0"),
    "shape edited": lambda s: edit_json(s / "entropy/zarr.json",
                                        lambda m: m.update(shape=[2, 3, 20])),
    "data type edited": lambda s: edit_json(s / "computed/zarr.json",
                                            lambda m: m.update(data_type="float32")),
    "spec attribute not JSON": set_spec_attr("{broken"),
    "spec attribute a list": set_spec_attr("[1,2]"),
    "spec attribute a number": set_spec_attr(5),
    "journal group a file": lambda s: (s / JOURNAL_GROUP).write_text("x"),
    "journal a folder": lambda s: (journal(s, b""), (s / JOURNAL_GROUP / JOURNAL_NAME).unlink(),
                                   (s / JOURNAL_GROUP / JOURNAL_NAME).mkdir()),
    "record index out of range": lambda s: journal(s, point((99, 99))),
    "record of the wrong shape": lambda s: journal(s, point(entropy=np.zeros(3))),
    "record header not JSON": lambda s: journal(s, raw_record(b"not json")),
    # silent corruption: read as good data before
    "bit flipped in a chunk": lambda s: flip_middle(s / "entropy/c/0/0/0"),
    "chunk deleted": lambda s: (s / "entropy/c/0/0/0").unlink(),
    "array deleted": lambda s: shutil.rmtree(s / "t0"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_store_is_refused_by_every_reader(store, case, capsys):
    DAMAGE[case](store)
    with pytest.raises(ValidationError, match="store") as info:
        open_store(store)
    assert str(store) in str(info.value)
    code, _, err = cli(capsys, "sweep", store.parent / "s.toml", "--backend", "serial",
                       "--out", store, "--resume", "--no-progress")
    line = one_error_line(err)
    assert code == 2 and str(store) in line, err
    code, _, err = cli(capsys, "plot", "sweep", "--store", store,
                       "--out", store.parent / "p.png")
    line = one_error_line(err)
    assert code == 2 and str(store) in line and not (store.parent / "p.png").exists(), err


def test_an_undamaged_copy_reads_back_identical(finished, store, capsys):
    assert_same_numbers(open_store(store), finished[1])
    code, out, err = cli(capsys, "sweep", store.parent / "s.toml", "--backend", "serial",
                         "--out", store, "--resume", "--no-progress")
    assert code == 0 and "already done 6, computed now 0" in out, err


def test_every_chunk_is_written_with_a_checksum(store):
    group = zarr.open_group(store, mode="r")
    for name, array in group.arrays():
        assert array.nchunks_initialized == array.nchunks, name  # fill-only chunks too
        codecs = json.loads((store / name / "zarr.json").read_text())["codecs"]
        assert [c["name"] for c in codecs][-1] == "crc32c", name


def pending_store(path, finished_ds) -> list:
    """A store whose sweep was killed before its first fold: arrays pending, every point
    in the journal; the records' byte offsets."""
    spec = make_spec("exact", GRID, settings=SETTINGS)
    SweepArrays(spec, path).create()
    log, starts, size = Journal(path), [], 0
    (path / JOURNAL_GROUP).mkdir()
    for index, _ in spec.points():
        outputs = {name: finished_ds[name].values[index] for name in finished_ds.data_vars}
        outputs["error"] = str(outputs["error"])
        record = encode(index, outputs)
        starts.append(size)
        size += len(record)
        log.append(index, outputs)
    log.close()
    return starts


def test_one_damaged_journal_record_costs_one_point(finished, tmp_path, capsys):
    path = tmp_path / "s.zarr"
    starts = pending_store(path, finished[1])
    data = bytearray((path / JOURNAL_GROUP / JOURNAL_NAME).read_bytes())
    data[starts[3] + 40] ^= 0x01  # a byte of the fourth record's header
    (path / JOURNAL_GROUP / JOURNAL_NAME).write_bytes(bytes(data))
    ds = open_store(path)
    assert ds.computed.values.ravel().tolist() == [1, 1, 1, 0, 1, 1]
    assert ds.attrs["journal_skipped"] == [1, starts[4] - starts[3]]
    (tmp_path / "s.toml").write_text(CONFIG)
    code, out, err = cli(capsys, "sweep", tmp_path / "s.toml", "--backend", "serial",
                         "--out", path, "--resume", "--no-progress")
    assert code == 0 and "already done 5, computed now 1" in out, err
    assert f"skipped 1 damaged journal record(s) ({starts[4] - starts[3]} bytes)" in err
    assert_same_numbers(open_store(path), finished[1])


def test_plot_sweep_says_how_many_journal_records_it_skipped(finished, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "s.zarr"
    starts = pending_store(path, finished[1])
    data = bytearray((path / JOURNAL_GROUP / JOURNAL_NAME).read_bytes())
    data[starts[1] + 40] ^= 0x01
    (path / JOURNAL_GROUP / JOURNAL_NAME).write_bytes(bytes(data))
    code, out, err = cli(capsys, "plot", "sweep", "--store", path, "--x", "eta_z",
                         "--hue", "eta_y", "--out", tmp_path / "p.png")
    assert code == 0 and (tmp_path / "p.png").exists(), err
    assert f"skipped 1 damaged journal record(s) ({starts[2] - starts[1]} bytes)" in err


def test_a_store_of_before_still_opens_and_resumes(finished, tmp_path, capsys):
    """A store without checksums or integrity record (odeflow before this version) opens,
    and a resume adds the outputs such stores lack (njev, nlu, wall_time)."""
    path = tmp_path / "old.zarr"
    old = finished[1].drop_vars(["njev", "nlu", "wall_time"])
    old.attrs = {"odeflow_sweep": finished[1].attrs["odeflow_sweep"]}
    old["error"] = old["error"].astype(object)
    old.to_zarr(path, consolidated=False)
    ds = open_store(path)
    assert "njev" not in ds and (ds.computed.values == 1).all()
    (tmp_path / "s.toml").write_text(CONFIG)
    code, out, err = cli(capsys, "sweep", tmp_path / "s.toml", "--backend", "serial",
                         "--out", path, "--resume", "--no-progress")
    assert code == 0 and "already done 6, computed now 0" in out, err
    assert (open_store(path).njev.values == -1).all()


def test_a_store_of_before_missing_another_output_is_refused(finished, tmp_path, capsys):
    """Only njev, nlu and wall_time may be missing from a store of before; a resume does not
    re-create any other output (a deleted t0 used to come back as all-NaN)."""
    path = tmp_path / "old.zarr"
    old = finished[1].drop_vars(["t0"])
    old.attrs = {"odeflow_sweep": finished[1].attrs["odeflow_sweep"]}
    old["error"] = old["error"].astype(object)
    old.to_zarr(path, consolidated=False)
    with pytest.raises(ValidationError, match="'t0' is missing"):
        open_store(path)
    (tmp_path / "s.toml").write_text(CONFIG)
    code, _, err = cli(capsys, "sweep", tmp_path / "s.toml", "--backend", "serial",
                       "--out", path, "--resume", "--no-progress")
    assert code == 2 and "'t0' is missing" in one_error_line(err)
    assert not (path / "t0").exists()


def test_a_damaged_netcdf_store_is_refused(finished, tmp_path):
    pytest.importorskip("h5netcdf")
    path = tmp_path / "s.nc"
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=path)
    assert_same_numbers(open_store(path), ds)
    data = bytearray(path.read_bytes())
    at = bytes(data).find(ds["entropy"].values.tobytes()[:64])
    assert at > 0
    data[at + 100] ^= 0x01  # a bit of entropy's values (Fletcher-32 covers them)
    path.write_bytes(bytes(data))
    with pytest.raises(ValidationError, match="cannot read") as info:
        open_store(path)
    assert str(path) in str(info.value)
