"""Defects a new user hits (architecture issue): each a regression test.

--version, provenance, tolerance limits, --rows 0, help that shows the real
defaults, plot --config honouring [run], Ctrl-C, progress off a terminal,
CLI flags named in errors, plain numbers in messages, normalised probabilities.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import odeflow
from tests.cli_helpers import cli, deny_temp_files

SMALL = odeflow.DataModel.preset("syn-small")



def test_version(capsys):
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.strip() == f"odeflow {odeflow.__version__}"


def test_saved_results_carry_provenance(tmp_path, capsys):
    code, _, _ = cli(capsys, "run", "--t-end", "1", "--no-progress", "--out",
                     str(tmp_path / "r.npz"))
    assert code == 0
    prov = odeflow.Trajectory.load(tmp_path / "r.npz").meta["provenance"]
    assert prov["odeflow"] == odeflow.__version__
    assert prov["numpy"] == np.__version__ and "scipy" in prov and "python" in prov
    assert prov["created"].endswith("+00:00")  # UTC
    assert isinstance(prov["command"], list)
    # a seeded level records its seed; a reload and re-save keeps the original origin
    traj = odeflow.solve(SMALL, flow="finite_t", t_span=(0.0, 1.0), seed=7,
                         sample_size=4)
    back = odeflow.Trajectory.load(traj.save(tmp_path / "t.npz"))
    assert back.meta["provenance"]["seeds"] == {"seed": 7}
    again = odeflow.Trajectory.load(back.save(tmp_path / "t2.npz"))
    assert again.meta["provenance"] == back.meta["provenance"]
    snap = odeflow.solve(odeflow.DataModel.preset("snap-small"), flow="snap",
                         t_span=(0.0, 1.0))
    assert "created" in odeflow.SnapResult.load(snap.save(tmp_path / "s.npz")).meta[
        "provenance"]


@pytest.mark.parametrize("rtol", [1.0, 2.0, 1e-15, 1e-300])
def test_rtol_outside_what_solve_ivp_honours_is_refused(rtol, capsys):
    with pytest.raises(odeflow.ValidationError) as info:
        odeflow.solve(SMALL, t_span=(0.0, 1.0), rtol=rtol)
    assert info.value.field == "rtol"
    code, _, err = cli(capsys, "run", "--t-end", "1", "--rtol", repr(rtol))
    assert code == 2 and err.startswith("odeflow: error: --rtol: must be in [")


def test_rows_zero_prints_no_table(tmp_path, capsys):
    code, out, _ = cli(capsys, "run", "--t-end", "10", "--no-progress", "--rows", "0",
                       "--out", str(tmp_path / "r.npz"))
    assert code == 0 and out.splitlines()[-1].startswith("saved ")
    code, out, _ = cli(capsys, "run", "--t-end", "10", "--no-progress", "--rows", "1",
                       "--out", str(tmp_path / "r.npz"))
    table = out.split("saved ", 1)[1].splitlines()[1:]
    assert code == 0 and len(table) == 2 and table[1].split()[0] == "0"  # header + t = 0
    code, _, err = cli(capsys, "run", "--rows", "-1")
    assert code == 2 and "--rows" in err


def test_compare_help_shows_the_defaults_it_uses(capsys):
    from odeflow.cli.compare import DEFAULTS

    code, out, _ = cli(capsys, "compare", "--help")
    text = " ".join(out.split())
    assert code == 0
    assert f"attention learning rate ({DEFAULTS['eta_z']:g})" in text
    assert f"decoder learning rate ({DEFAULTS['eta_y']:g})" in text
    assert f"default {DEFAULTS['steps']} steps" in text


def test_plot_config_honours_the_run_table(tmp_path, capsys, monkeypatch):
    import odeflow.plots

    config = tmp_path / "c.toml"
    SMALL.to_toml(config)
    config.write_text(config.read_text() + '\n[run]\neta_y = 2.0\nt_end = 50.0\n'
                      'flow = "reduced"\n')
    seen = {}

    def fake_make_figure(name, **options):
        seen[name] = options
        raise odeflow.ValidationError("figure", "stop here")

    monkeypatch.setattr(odeflow.plots, "make_figure", fake_make_figure)
    cli(capsys, "plot", "margin", "--config", str(config), "--out", str(tmp_path / "m.png"))
    # margin takes eta_y and t_end but not flow: the [run] values it takes are used
    assert seen["margin"]["eta_y"] == 2.0 and seen["margin"]["t_end"] == 50.0
    assert seen["margin"]["flow"] is None
    cli(capsys, "plot", "attention-map", "--config", str(config), "--t-end", "7",
        "--out", str(tmp_path / "a.png"))
    assert seen["attention-map"]["flow"] == "reduced"
    assert seen["attention-map"]["t_end"] == 7.0  # the flag wins over the config


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch):
    import odeflow.cli.run as run_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "solve", interrupted)
    code, out, err = cli(capsys, "run")
    assert code == 130 and err == "odeflow: run interrupted\n" and out == ""


def test_progress_lines_off_a_terminal(capsys, monkeypatch):
    from odeflow.solver import integrate as solve_loop

    monkeypatch.setattr(solve_loop, "PROGRESS_LOG_SECONDS", 0.0)
    odeflow.solve(SMALL, t_span=(0.0, 100.0))  # progress=None, stderr captured (no tty)
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("odeflow: exact flow (LSODA): t = ") for line in lines)
    odeflow.solve(SMALL, t_span=(0.0, 100.0), progress=False)
    assert capsys.readouterr().err == ""


def test_errors_name_the_flag_the_user_typed(tmp_path, capsys):
    code, _, err = cli(capsys, "run", "--eta-y", "-1")
    assert code == 2 and err == "odeflow: error: --eta-y: must be finite and > 0, got -1.0\n"
    config = tmp_path / "c.toml"
    SMALL.to_toml(config)
    config.write_text(config.read_text() + "\n[run]\neta_y = -1.0\n")
    code, _, err = cli(capsys, "run", "--config", str(config))
    assert code == 2 and err.startswith("odeflow: error: ") and "--eta-y" not in err


def test_unwritable_compare_output_is_exit_2(tmp_path, capsys, monkeypatch):
    args = ("compare", "--steps", "5", "--seeds", "1", "--no-progress", "--out")
    code, out, err = cli(capsys, *args, str(tmp_path / "c.json"))
    assert code == 0 and out.startswith("saved ")  # written before the table is printed
    assert json.loads((tmp_path / "c.json").read_text())["data"] == "syn-small"
    deny_temp_files(monkeypatch)
    code, _, err = cli(capsys, *args, str(tmp_path / "d.json"))
    assert code == 2 and err.startswith("odeflow: error: --out: cannot write")
    code, _, err = cli(capsys, "run", "--t-end", "1", "--no-progress", "--out",
                       str(tmp_path / "r.npz"))
    assert code == 2 and err.startswith("odeflow: error: --out: cannot write")
    code, _, err = cli(capsys, "plot", "margin", "--out", str(tmp_path / "m.png"))
    assert code == 2 and err.startswith("odeflow: error: --out: cannot write")


def test_messages_show_plain_numbers():
    with pytest.raises(odeflow.ValidationError) as info:
        odeflow.solve(SMALL, eta_y=np.float64(-1.0))
    assert str(info.value) == "eta_y: must be finite and > 0, got -1.0"
    with pytest.raises(odeflow.ValidationError) as info:
        odeflow.SequenceClass(3, 2, {0: np.float64(0.3), 1: np.float32(0.3)})
    assert "np." not in str(info.value)


def test_normalize_exposes_the_normalised_probabilities():
    c = odeflow.SequenceClass(3, 2, {0: 2.0, 5: 6.0}, normalize=True)
    assert c.probs == {0: 0.25, 5: 0.75}
    c = odeflow.SequenceClass(3, 2, [2.0, 0.0, 6.0], normalize=True)
    np.testing.assert_array_equal(c.probs, [0.25, 0.0, 0.75])
    np.testing.assert_array_equal(c.support_probs, [0.25, 0.75])


def test_run_refuses_an_impossible_out_before_solving(tmp_path, capsys, monkeypatch):
    import odeflow.cli.run as run_module

    def must_not_solve(*args, **kwargs):
        raise AssertionError("solved although --out can never be written")

    monkeypatch.setattr(run_module, "solve", must_not_solve)
    code, _, err = cli(capsys, "run", "--out", str(tmp_path))
    assert code == 2 and err.startswith("odeflow: error: --out: ") and "directory" in err


def test_readers_refuse_a_fifo_instead_of_blocking(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(odeflow.ValidationError, match="is a FIFO"):
        odeflow.Trajectory.load(fifo)
    with pytest.raises(odeflow.ValidationError, match="is a FIFO"):
        odeflow.SnapResult.load(fifo)
    code, _, err = cli(capsys, "run", "--config", str(fifo))
    assert code == 2 and "FIFO" in err


# ------------------------------------------------ reliability reproducers at the API
def test_atol_at_the_smallest_double_is_refused():
    with pytest.raises(odeflow.ValidationError) as info:
        odeflow.solve(odeflow.DataModel.preset("shared-query-small"), atol=5e-324)
    assert info.value.field == "atol"


def test_violent_rate_with_rk23_ends_in_a_result_or_a_solve_error():
    """eta_Z = 1e12 with an explicit method: within its budget the solve reaches t_end
    with finite values; past the budget it is a SolveError naming max_nfev."""
    traj = odeflow.solve(SMALL, eta_z=1e12, t_span=(0.0, 1e-4), method="RK23",
                         max_nfev=20_000)
    assert traj.t[-1] == 1e-4 and np.all(np.isfinite(traj.y))
    with pytest.raises(odeflow.SolveError, match=r"stopped at t = .* after max_nfev = 500"):
        odeflow.solve(SMALL, eta_z=1e12, t_span=(0.0, 1e-3), method="RK23", max_nfev=500)


def test_budget_and_scipy_errors_become_solve_errors():
    with pytest.raises(odeflow.SolveError, match=r"stopped at t = .* after max_nfev = 50"):
        odeflow.solve(SMALL, t_span=(0.0, 1e6), max_nfev=50)
    with pytest.raises(odeflow.SolveError, match=r"after max_nfev = 50"):
        odeflow.solve_batch(SMALL, [(1.0, 0.1), (1.0, 1.0)], t_span=(0.0, 1e6), max_nfev=50)

    def bad_event(t, y):
        raise ValueError("an event that cannot be evaluated")

    with pytest.raises(odeflow.SolveError, match="ValueError: an event"):
        odeflow.solve(SMALL, t_span=(0.0, 10.0), events=bad_event)


def test_plot_all_with_a_short_horizon(tmp_path, capsys):
    code, out, err = cli(capsys, "plot", "all", "--t-end", "1", "--outdir", str(tmp_path))
    assert code in (0, 2)
    drawn = sorted(p.name for p in tmp_path.iterdir())
    skipped = [line for line in err.splitlines() if "skipped" in line]
    from odeflow.plots import FIGURES

    assert len(drawn) + len(skipped) == len(FIGURES) and drawn
