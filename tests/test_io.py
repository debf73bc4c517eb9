"""The one writer (odeflow.io): what a save may replace, atomicity, debris, file mode."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import stat
import time

import numpy as np
import pytest

from odeflow import DataModel, SequenceClass, ValidationError, solve
from odeflow import io as odeio
from odeflow.io import TEMP_MARK, atomic_write, atomic_write_npz, atomic_write_text
from tests.cli_helpers import deny_temp_files

SMALL = DataModel(6, [SequenceClass(4, 1, {0: 0.5, 2: 0.5}),
                      SequenceClass(5, 1, {0: 0.25, 3: 0.75})])


def temps(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if TEMP_MARK in n)


@pytest.fixture(scope="module")
def traj():
    return solve(SMALL, t_span=(0.0, 10.0), progress=False)


# ------------------------------------------------------------ what is replaced
def test_fifo_is_refused_and_left_alone(tmp_path, traj):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    with pytest.raises(ValidationError, match="pipe.npz.*is a FIFO") as info:
        traj.save(fifo)
    assert info.value.field == "path"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert temps(tmp_path) == []


def test_device_node_is_refused_and_left_alone(tmp_path, traj):
    node = tmp_path / "mynull"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        node = "/dev/null"  # not root: the real device node, which must stay one
    with pytest.raises(ValidationError, match="is a character device"):
        traj.save(node)
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_directory_is_refused(tmp_path, traj):
    folder = tmp_path / "results"
    folder.mkdir()
    with pytest.raises(ValidationError, match="results.*is a directory"):
        traj.save(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []
    with pytest.raises(ValidationError, match="is a directory"):
        traj.save("/")


def test_symlink_is_followed_and_its_target_replaced(tmp_path, traj):
    real = tmp_path / "store" / "real.npz"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    traj.save(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    loaded = type(traj).load(real)
    np.testing.assert_array_equal(loaded.z_active, traj.z_active)
    assert temps(tmp_path) == [] and temps(real.parent) == []


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.toml"
    link.symlink_to(tmp_path / "made.toml")
    SMALL.to_toml(link)
    assert link.is_symlink() and (tmp_path / "made.toml").is_file()


def test_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "null.txt"
    link.symlink_to("/dev/null")
    with pytest.raises(ValidationError, match="null.txt -> /dev/null"):
        atomic_write_text(link, "x")
    assert link.is_symlink()


def test_mode_follows_the_umask(tmp_path, traj):
    for mask, expected in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        old = os.umask(mask)
        try:
            path = traj.save(tmp_path / f"m{mask:o}.npz")
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(path).st_mode) == expected


def test_unwritable_folder_is_a_validation_error(tmp_path, monkeypatch, traj):
    deny_temp_files(monkeypatch)
    with pytest.raises(ValidationError, match=r"path: cannot write .*x\.npz.*not writable"):
        traj.save(tmp_path / "x.npz")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_a_validation_error(tmp_path, traj):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(ValidationError, match="cannot write"):
            traj.save(folder / "x.npz")
    finally:
        folder.chmod(0o755)


# ---------------------------------------------------------- failure and debris
@pytest.mark.parametrize("failure", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_failure_between_write_and_rename_keeps_the_old_file(tmp_path, monkeypatch, traj,
                                                           failure):
    path = traj.save(tmp_path / "r.npz")
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise failure

    monkeypatch.setattr(odeio.os, "replace", broken_replace)
    with pytest.raises(type(failure)):
        traj.save(path)
    assert path.read_bytes() == before
    assert temps(tmp_path) == []


def test_failure_inside_the_writer_leaves_no_temp(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write_text(path, "old")

    def write(fh):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(ValidationError, match="No space left"):
        atomic_write(path, write)
    assert path.read_text() == "old" and temps(tmp_path) == []


def test_sigterm_during_a_save_removes_the_temp(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write_text(path, "old")

    def write(fh):
        fh.write(b"partial")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this

    with pytest.raises(SystemExit) as info:
        atomic_write(path, write)
    assert info.value.code == 128 + signal.SIGTERM
    assert path.read_text() == "old" and temps(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_object_arrays_are_refused_not_pickled(tmp_path):
    with pytest.raises(ValidationError, match="object array"):
        atomic_write_npz(tmp_path / "o.npz", {"x": np.array([{"a": 1}], dtype=object)})
    assert list(tmp_path.iterdir()) == []


def test_stale_temps_of_dead_processes_are_cleaned(tmp_path):
    path = tmp_path / "run.npz"
    pid = os.fork()
    if pid == 0:  # a process that exits at once: its id is then free
        os._exit(0)
    os.waitpid(pid, 0)
    stale = tmp_path / f".run.npz{TEMP_MARK}{pid}-deadbeef"
    stale.write_bytes(b"")
    live = tmp_path / f".run.npz{TEMP_MARK}{os.getppid()}-cafecafe"  # a running process
    live.write_bytes(b"")
    other = tmp_path / f".other.npz{TEMP_MARK}{pid}-deadbeef"  # another file's: not ours
    other.write_bytes(b"")
    atomic_write_npz(path, {"x": np.arange(3)})
    assert not stale.exists() and live.exists() and other.exists()


def _payload(version: int) -> bytes:
    rng = np.random.default_rng(version)
    body = rng.integers(0, 256, size=4_000_000, dtype=np.uint8).tobytes()
    return hashlib.sha256(body).digest() + body


def _intact(data: bytes) -> bool:
    return len(data) == 32 + 4_000_000 and hashlib.sha256(data[32:]).digest() == data[:32]


def test_sigkill_loop_never_corrupts_and_next_save_leaves_no_debris(tmp_path):
    """>= 20 saves killed with SIGKILL at random moments: the old file stays intact."""
    path = tmp_path / "run.bin"
    payloads = [_payload(v) for v in range(2)]
    atomic_write(path, lambda fh: fh.write(payloads[0]))
    rng = random.Random(0)
    debris_seen = 0
    for i in range(25):
        pid = os.fork()
        if pid == 0:
            try:
                while True:  # save over and over until killed

                    def write(fh, data=payloads[1]):
                        for k in range(0, len(data), 1 << 16):  # slow, chunked write
                            fh.write(data[k:k + (1 << 16)])

                    atomic_write(path, write)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert _intact(path.read_bytes()), f"corrupted after kill {i}"
        debris_seen += bool(temps(tmp_path))
    assert debris_seen > 0, "no kill landed inside a save: the test exercised nothing"
    atomic_write(path, lambda fh: fh.write(payloads[0]))
    assert temps(tmp_path) == []
    assert path.read_bytes() == payloads[0]
