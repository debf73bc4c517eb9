"""CLI rule for ``odeflow sweep`` and ``odeflow reproduce``: every input ends in exit 0, 2
(one line ``odeflow: error: <field>: <why>`` on stderr) or 3, never a traceback, and
results are saved before anything derived is printed.

Each reproducer of a measured defect is a test here; the random argv fuzzers of both
verbs live in tests/properties/test_fuzz_properties.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli_helpers import cli, deny_temp_files

pytest.importorskip("xarray")
pytest.importorskip("zarr")

#: One exact point to t = 1 on syn-small (well under a second).
ONE_POINT = """
[sweep]
task = "exact"
preset = "syn-small"
[sweep.grid]
eta_y = [1.0]
[sweep.settings]
t_end = 1.0
"""



def error_line(err: str) -> str:
    """The one stderr line of an exit 2 (and that there is exactly one)."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("odeflow: error: "), err
    return lines[0]


def sweep_argv(config, *extra):
    return ["sweep", config, "--backend", "serial", "--no-progress", *extra]


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "one.toml"
    path.write_text(ONE_POINT)
    return path


# -------------------------------------------------------- sweep: the config
def test_sweep_config_that_is_not_utf8_is_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_bytes(b'[sweep]\ntask = "exact"\xff\n')
    code, out, err = cli(capsys, *sweep_argv(path))
    assert code == 2 and out == ""
    assert "config: " in error_line(err) and "not UTF-8" in err


def test_sweep_config_nested_too_deeply_is_exit_2(tmp_path, capsys):
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000)
    code, _, err = cli(capsys, *sweep_argv(path))
    assert code == 2 and "config: nested too deeply" in error_line(err)


def test_missing_sweep_config_is_exit_2(tmp_path, capsys):
    code, _, err = cli(capsys, *sweep_argv(tmp_path / "missing.toml"))
    assert code == 2 and "config: cannot read" in error_line(err)


@pytest.mark.parametrize("extra, field", [
    ("[foo]\nx = 1\n", "foo"),
    ('"" = 1\n', "''"),
    ("[sweeps]\ntask = 'exact'\n", "sweeps"),
])
def test_sweep_config_unknown_top_level_key_is_named(tmp_path, capsys, extra, field):
    path = tmp_path / "c.toml"
    path.write_text(extra + ONE_POINT)  # with a preset: once "also defines a data model"
    code, _, err = cli(capsys, *sweep_argv(path))
    line = error_line(err)
    assert code == 2 and line.startswith(f"odeflow: error: {field}: unknown top-level key")
    assert "['sweep', 'run', 'classes', 'normalize', 'vocab_size']" in line
    assert "data model" not in line.split("unknown", 1)[0]


def test_sweep_config_empty_keys_are_named_with_the_allowed_keys(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(ONE_POINT.replace('task = "exact"', 'task = "exact"\n"" = 1'))
    code, _, err = cli(capsys, *sweep_argv(path))
    assert code == 2 and error_line(err).startswith("odeflow: error: sweep.'': unknown key ''")
    assert "'grid', 'settings'" in err
    path.write_text(ONE_POINT + '"" = 2.0\n')  # into [sweep.settings]
    code, _, err = cli(capsys, *sweep_argv(path))
    line = error_line(err)
    assert code == 2 and line.startswith("odeflow: error: sweep.settings.'': empty parameter")
    assert "'eta_z'" in line and "'t_end'" in line


def test_sweep_config_beside_a_data_table_refuses_other_keys(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text("vocab_size = 3\n[data]\nvocab_size = 3\n"
                    + ONE_POINT.replace('preset = "syn-small"\n', ""))
    code, _, err = cli(capsys, *sweep_argv(path))
    line = error_line(err)
    assert code == 2 and line.startswith("odeflow: error: vocab_size: unknown top-level key")
    assert "['sweep', 'run', 'data']" in line


def test_sweep_task_given_twice_names_the_config_key(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(ONE_POINT.replace("eta_y = [1.0]", 'task = ["exact", "reduced"]'))
    code, _, err = cli(capsys, *sweep_argv(path))
    assert code == 2 and error_line(err).startswith("odeflow: error: sweep.task: is also swept")


# --------------------------------------------------------- sweep: the store
def test_sweep_out_dangling_symlink_is_exit_2_and_creates_nothing(tmp_path, capsys, config):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere" / "s.zarr")
    code, out, err = cli(capsys, *sweep_argv(config, "--out", link))
    assert code == 2 and out == ""
    assert error_line(err).startswith("odeflow: error: --out: ") and "dangling" in err
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_sweep_store_in_config_dangling_symlink_names_store(tmp_path, capsys):
    link = tmp_path / "link.zarr"
    link.symlink_to(tmp_path / "gone.zarr")
    path = tmp_path / "c.toml"
    path.write_text(ONE_POINT.replace('preset = "syn-small"',
                                      f'preset = "syn-small"\nstore = "{link}"'))
    code, _, err = cli(capsys, *sweep_argv(path))
    assert code == 2 and error_line(err).startswith("odeflow: error: store: ")


@pytest.mark.parametrize("resume", [False, True])
def test_sweep_out_regular_file_is_exit_2_and_untouched(tmp_path, capsys, config, resume):
    target = tmp_path / "s.zarr"
    target.write_text("precious\n")
    extra = ["--resume"] if resume else []
    code, _, err = cli(capsys, *sweep_argv(config, "--out", target, *extra))
    assert code == 2 and "regular file" in error_line(err) and "--out" in err
    assert target.read_text() == "precious\n"


def test_sweep_out_below_a_file_is_exit_2(tmp_path, capsys, config):
    (tmp_path / "f").write_text("x")
    code, _, err = cli(capsys, *sweep_argv(config, "--out", tmp_path / "f" / "s.zarr"))
    assert code == 2 and "is a regular file, not a folder" in error_line(err)


def test_sweep_out_in_an_unwritable_folder_is_exit_2(tmp_path, capsys, config, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    real_access = os.access

    def access(path, mode, *args, **kwargs):  # root writes anywhere: simulate read-only
        if Path(path) == folder and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    for out in (folder / "s.zarr", folder / "sub" / "s.zarr", folder / "s.nc"):
        code, _, err = cli(capsys, *sweep_argv(config, "--out", out))
        assert code == 2 and "not writable" in error_line(err) and "--out" in err
    assert list(folder.iterdir()) == []


def test_sweep_good_store_still_runs_and_resumes(tmp_path, capsys, config):
    store = tmp_path / "s.zarr"
    code, out, err = cli(capsys, *sweep_argv(config, "--out", store))
    assert code == 0 and f"saved {store}" in out and err == ""
    code, out, _ = cli(capsys, *sweep_argv(config, "--out", store, "--resume"))
    assert code == 0 and "already done 1" in out


# ---------------------------------------------------------------- reproduce
@pytest.mark.parametrize("argv, line", [
    (["--steps", "99999999999999999999"],
     "--steps: must be <= 100,000, got 99,999,999,999,999,999,999"),
    (["--seeds", "99999999999999999999"], "--seeds: must be <= 1,000"),
    (["--steps", "0"], "--steps: must be >= 1, got 0"),
    (["--seeds", "-2"], "--seeds: must be >= 1, got -2"),
    (["--seeds", "1000", "--steps", "1000"], "--steps: seeds x steps = 1,000,000; at most"),
])
def test_reproduce_counts_are_bounded(capsys, monkeypatch, argv, line):
    from odeflow.experiments import paper

    monkeypatch.setattr(paper, "fig4", lambda *a, **k: pytest.fail("trained anyway"))
    code, out, err = cli(capsys, "reproduce", "fig4", *argv)
    assert code == 2 and out == ""
    assert error_line(err).startswith(f"odeflow: error: {line}")


def test_reproduce_out_that_is_a_file_is_refused_before_training(tmp_path, capsys,
                                                                    monkeypatch):
    from odeflow.experiments import paper

    monkeypatch.setattr(paper, "fig6_rows", lambda *a, **k: pytest.fail("trained anyway"))
    (tmp_path / "f").write_text("x")
    for out in (tmp_path / "f", tmp_path / "f" / "sub", ""):
        code, _, err = cli(capsys, "reproduce", "fig6", "--steps", "1", "--seeds", "1",
                           "--out", out)
        assert code == 2 and error_line(err).startswith("odeflow: error: --out: ")


def test_reproduce_writes_its_files_before_printing(tmp_path, capsys, monkeypatch):
    from odeflow.cli import reproduce

    out = tmp_path / "rep"
    seen = []
    real = reproduce.print_table

    def print_table(*args, **kwargs):
        seen.append(sorted(p.name for p in out.iterdir()))
        return real(*args, **kwargs)

    monkeypatch.setattr(reproduce, "print_table", print_table)
    code, stdout, err = cli(capsys, "reproduce", "fig4", "--steps", "2", "--seeds", "1",
                            "--out", out, "--no-progress")
    assert code == 0, err
    assert seen == [["fig4.csv", "fig4.png"]]
    assert stdout.index("step") < stdout.index(f"wrote {out / 'fig4.csv'}")


def test_reproduce_that_cannot_write_prints_no_table(tmp_path, capsys, monkeypatch):
    deny_temp_files(monkeypatch)
    code, stdout, err = cli(capsys, "reproduce", "fig4", "--steps", "1", "--seeds", "1",
                            "--out", tmp_path, "--no-progress")
    assert code == 2 and stdout == ""
    assert error_line(err).startswith("odeflow: error: --out: cannot write")
