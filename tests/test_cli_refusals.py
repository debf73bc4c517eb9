"""Input that used to end in a traceback or be taken silently is refused with exit 2 and
one line naming the flag or key: values a store cannot hold, ``plot sweep --time`` outside
the stored times, stdout that cannot be written, ``verify --seed -1``, and ``--rows``,
``--ratios``, ``--sgd-seeds``, ``--out`` like their siblings."""

from __future__ import annotations

import errno
import io
import subprocess
import sys

import pytest

from odeflow.cli import main
from odeflow.errors import ValidationError
from tests.cli_helpers import cli, one_error_line

SWEEP = ('[sweep]\ntask = "exact"\n[sweep.grid]\neta_z = [0.1, 1.0]\n'
         "[sweep.settings]\nt_end = 20.0\n")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A finished two-point sweep: its config and store."""
    folder = tmp_path_factory.mktemp("swept")
    config = folder / "small.toml"
    config.write_text(SWEEP)
    code = main(["sweep", str(config), "--backend", "serial", "--out",
                 str(folder / "s.zarr"), "--no-progress"])
    assert code == 0
    return config, folder / "s.zarr"


def refused(capsys, flag, *argv):
    code, _, err = cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and flag in line, err
    return line


@pytest.mark.parametrize("text, key", [
    ('[sweep]\ntask = "sgd"\nseeds = [18446744073709551616]\n[sweep.settings]\nsteps = 10\n',
     "seeds[0]"),
    ('[sweep]\ntask = "sgd"\n[sweep.grid]\nsteps = [1e30]\n', "grid.steps[0]"),
    ('[sweep]\ntask = "sgd"\n[sweep.settings]\nsteps = 9223372036854775808\n',
     "settings.steps"),
])
def test_values_a_store_cannot_hold_are_refused_before_any_point(tmp_path, capsys, text, key):
    config = tmp_path / "big.toml"
    config.write_text(text)
    line = refused(capsys, key, "sweep", config, "--backend", "serial",
                   "--out", tmp_path / "s.zarr")
    assert "64-bit" in line and not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize("time", ["nan", "inf", "-5", "1e9"])
def test_plot_sweep_time_must_be_finite_and_stored(swept, tmp_path, capsys, time):
    pytest.importorskip("matplotlib")
    refused(capsys, "--time", "plot", "sweep", "--store", swept[1], "--time", time,
            "--out", tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


def test_stdout_on_a_full_disk_ends_with_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "odeflow", "run", "--t-end", "10",
                                 "--out", str(tmp_path / "o.npz"), "--no-progress"],
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "odeflow: error: stdout: cannot write the output of run (No space left on device)"]


class FailingStdout(io.TextIOBase):
    """stdout whose every write fails as a dying disk does (EIO)."""

    def write(self, text):
        raise OSError(errno.EIO, "Input/output error")

    def fileno(self):
        raise io.UnsupportedOperation("fileno")


def test_stdout_io_error_ends_with_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "stdout", FailingStdout())
    code = main(["verify", "--only", "CF1", "--t-max", "10", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and one_error_line(err).startswith("odeflow: error: stdout:")


def test_verify_refuses_a_negative_seed(capsys):
    refused(capsys, "--seed", "verify", "--seed", "-1", "--only", "CF4")
    from odeflow.analysis.verification import verify

    with pytest.raises(ValidationError, match="seed"):
        verify(checks=["CF4"], seed=-1)


def test_sweep_rows_like_the_other_verbs(swept, capsys):
    config, store = swept
    refused(capsys, "--rows", "sweep", config, "--out", store, "--resume", "--rows", "-5")
    code, out, err = cli(capsys, "sweep", config, "--backend", "serial", "--out", store,
                         "--resume", "--rows", "0")
    assert code == 0, err
    assert "more points" not in out and "entropy(end)" not in out and "saved" in out


@pytest.mark.parametrize("argv, flag", [
    (["compare-levels", "--ratios", ""], "--ratios"),
    (["compare-levels", "--sgd-seeds", "0", "--seq-len", "8"], "--sgd-seeds"),
    (["run", "--out", ""], "--out"),
    (["plot", "margin", "--out", ""], "--out"),
])
def test_empty_and_zero_values_are_refused_by_flag(capsys, argv, flag):
    refused(capsys, flag, *argv)


def test_sweep_out_empty_is_refused(swept, capsys):
    refused(capsys, "--out", "sweep", swept[0], "--out", "")
