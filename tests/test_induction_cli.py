"""``odeflow run`` on the induction-head family: presets found through the family registry,
the family's own table, the result file, exit codes."""

import numpy as np

from odeflow.families import find_preset, preset_names
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


def test_run_stages(capsys, tmp_path):
    out = tmp_path / "s.npz"
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--stages", "5,2",
                       "--t-end", "20", "--out", out, "--rows", "0", "--no-progress")
    assert code == 0, err
    traj = InductionTrajectory.load(out)
    spans = [stage["t_span"] for stage in traj.meta["schedule"]]
    assert spans == [[0.0, 5.0], [5.0, 7.0], [7.0, 20.0]]
    moved = traj.t <= 5.0                       # stage 1: c alone, a frozen at a0
    np.testing.assert_array_equal(traj.a[moved], traj.a[0])
    assert traj.a[-1] > traj.a[0] and traj.t[-1] == 20.0
    for bad in ("5", "5,x", "15,10", "-1,2"):
        code, _, err = cli(capsys, "run", "--preset", "ih-point", f"--stages={bad}",
                           "--t-end", "20", "--out", out, "--no-progress")
        assert code == 2 and "--stages" in one_error_line(err)


def test_run_the_finite_length_level_with_its_sample(capsys, tmp_path):
    out = tmp_path / "fl.npz"
    code, text, err = cli(capsys, "run", "--preset", "ih-point", "--flow", "finite_l",
                          "--loss", "code", "--seq-len", "24", "--sample-size", "150",
                          "--seed", "3", "--t-end", "2", "--out", out, "--rows", "0",
                          "--no-progress")
    assert code == 0, err
    traj = InductionTrajectory.load(out)
    assert traj.meta["flow"] == "finite_l"
    assert (traj.meta["seq_len"], traj.meta["sample_size"], traj.meta["seed"]) == (24, 150, 3)
    # the same through a config's [run] table
    config = tmp_path / "fl.toml"
    config.write_text('family = "induction"\nvocab_size = 2\nn_gram = 3\nheads = 2\n'
                      'degree = 2\n[prior]\nkind = "point"\n'
                      'kernel = [[0.4992, 0.5008], [0.0081, 0.9919], [0.8004, 0.1996], '
                      '[0.1080, 0.8920]]\n[run]\nflow = "finite_l"\nloss = "code"\n'
                      't_end = 2.0\nseq_len = 24\nsample_size = 150\nseed = 3\n')
    out2 = tmp_path / "fl2.npz"
    code, _, err = cli(capsys, "run", "--config", config, "--out", out2, "--rows", "0",
                       "--no-progress")
    assert code == 0, err
    np.testing.assert_allclose(InductionTrajectory.load(out2).a[-1], traj.a[-1], rtol=1e-12)
    # the old flags and [run] keys are still read, each noted on stderr
    old_config = tmp_path / "old.toml"
    old_config.write_text(config.read_text().replace("seq_len", "length")
                          .replace("sample_size", "sequences").replace("seed", "sample_seed"))
    code, _, err = cli(capsys, "run", "--config", old_config, "--out", tmp_path / "o.npz",
                       "--rows", "0", "--no-progress")
    assert code == 0 and "[run] 'sample_seed' is now 'seed'" in err
    np.testing.assert_allclose(InductionTrajectory.load(tmp_path / "o.npz").a[-1], traj.a[-1],
                               rtol=1e-12)
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--flow", "finite_l",
                       "--loss", "code", "--length", "24", "--sequences", "150",
                       "--sample-seed", "3", "--t-end", "2", "--out", tmp_path / "f.npz",
                       "--rows", "0", "--no-progress")
    assert code == 0, err
    assert "warning: --length is now --seq-len" in err and "--sample-seed is now --seed" in err
    np.testing.assert_allclose(InductionTrajectory.load(tmp_path / "f.npz").a[-1], traj.a[-1],
                               rtol=1e-12)


def test_sample_options_without_the_finite_length_flow_exit_2_naming_them(capsys, tmp_path):
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--seq-len", "24",
                       "--out", tmp_path / "x.npz", "--no-progress")
    assert code == 2 and "seq-len" in one_error_line(err)
    code, _, err = cli(capsys, "run", "--preset", "ih-point", "--flow", "finite_l",
                       "--loss", "code", "--sample-size", "0", "--out", tmp_path / "x.npz",
                       "--no-progress")
    assert code == 2 and "sample" in one_error_line(err)
