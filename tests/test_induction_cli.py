"""``odeflow run`` on the induction-head family: presets found through the family registry,
the family's own table, the result file, exit codes."""

import numpy as np

from odeflow.fields import find_preset, preset_names
from odeflow.results import InductionTrajectory
from tests.cli_helpers import cli, one_error_line


def test_presets_of_every_family_are_found():
    names = preset_names()
    assert {"ih-paper", "ih-point", "syn-small"} <= set(names)
    assert type(find_preset("ih-point")).__name__ == "InductionData"
    assert type(find_preset("syn-small")).__name__ == "DataModel"


def test_run_prints_the_family_table_and_saves(capsys, tmp_path):
    out = tmp_path / "r.npz"
    code, text, err = cli(capsys, "run", "--preset", "ih-point", "--flow", "copier",
                          "--t-end", "50", "--loss", "code", "--out", out, "--rows", "4",
                          "--no-progress")
    assert code == 0, err
    traj = InductionTrajectory.load(out)
    assert traj.meta["flow"] == "copier" and traj.meta["loss"] == "code"
    assert traj.t[-1] == 50.0
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["t", "loss", "a"])
    last = lines[-1].split()
    assert float(last[0]) == 50.0
    np.testing.assert_allclose(float(last[2]), traj.a[-1], rtol=1e-5)
    assert len(lines) - header - 1 >= 3
    top, p = traj.top_subset()
    assert last[-1] == f"{p:.6f}"


def test_run_default_flow_is_the_family_default(capsys, tmp_path):
    out = tmp_path / "p.npz"
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--t-end", "1", "--out", out,
                       "--rows", "0", "--no-progress")
    assert code == 0, err
    assert InductionTrajectory.load(out).meta["flow"] == "population"


def test_run_bad_options_exit_2_naming_them(capsys, tmp_path):
    code, _, err = cli(capsys, "run", "--preset", "ih-nope", "--out", tmp_path / "x.npz")
    assert code == 2 and "preset" in one_error_line(err)
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--flow", "exact",
                       "--out", tmp_path / "x.npz")
    assert code == 2 and "flow" in one_error_line(err)
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--eta-y", "2",
                       "--out", tmp_path / "x.npz")
    assert code == 2 and "eta-y" in one_error_line(err)
    code, _, err = cli(capsys, "run", "--preset", "syn-small", "--loss", "code",
                       "--out", tmp_path / "x.npz")
    assert code == 2 and "loss" in one_error_line(err)


def test_run_budget_exhausted_exits_3(capsys, tmp_path):
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--t-end", "1e4",
                       "--max-nfev", "5", "--out", tmp_path / "x.npz", "--no-progress")
    assert code == 3 and "max_nfev" in err
