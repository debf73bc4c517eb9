"""CLI rule: user input ends in exit 0, 2 (one line on stderr) or 3, never a traceback.

Each reproducer of the reliability and data-safety issues is a test here; the
random argv fuzzers live in tests/properties/test_fuzz_properties.py.
"""

from __future__ import annotations

import os
import stat

import pytest

from odeflow import ValidationError
from odeflow.data import parse_config
from odeflow.solver import options as solve_options
from tests.cli_helpers import cli, deny_temp_files, one_error_line

CONFIG = """
vocab_size = 6
[[classes]]
next_token = 4
query_token = 1
tokens = [0, 2]
probs = [0.5, 0.5]
"""




@pytest.fixture
def small_budget(monkeypatch):
    """A small evaluation budget, so that a stiff solve ends within a second."""
    monkeypatch.setattr(solve_options, "MAX_NFEV", 2000)


# ----------------------------------------------------------------- configs
def test_non_utf8_config(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe vocab_size = 3")
    code, _, err = cli(capsys, "run", "--config", str(bad), "--t-end", "1")
    assert code == 2 and "not UTF-8" in one_error_line(err)


def test_deeply_nested_config(tmp_path, capsys):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 3000 + "]" * 3000)
    code, _, err = cli(capsys, "run", "--config", str(deep), "--t-end", "1")
    assert code == 2 and "nested too deeply" in one_error_line(err)


def test_unknown_top_level_table_is_refused_by_name():
    with pytest.raises(ValidationError, match=r"^runn: unknown top-level key 'runn'.*'run'"):
        parse_config("[runn]\nt_end = 5.0\n[data]\n" + CONFIG.replace("[[classes]]",
                                                                         "[[data.classes]]"))
    with pytest.raises(ValidationError, match=r"^extra: unknown top-level key .*vocab_size"):
        parse_config(CONFIG + "\n[extra]\nx = 1\n")


def test_empty_keys_are_refused_by_name():
    with pytest.raises(ValidationError, match=r"^'': unknown top-level key ''; allowed"):
        parse_config('"" = 1\n' + CONFIG)
    with pytest.raises(ValidationError, match=r"^run\.'': unknown key ''; allowed: \['atol'"):
        parse_config(CONFIG + '\n[run]\n"" = 1\n')
    with pytest.raises(ValidationError, match=r"classes\[0\]\.'': unknown key ''; allowed"):
        parse_config(CONFIG + '"" = 2\n')
    with pytest.raises(ValidationError, match=r"^'': unknown key '' in data model; allowed"):
        parse_config('[data]\n"" = 1\n')


def test_run_table_of_a_data_table_config_still_applies(tmp_path):
    data, options = parse_config("[run]\nt_end = 5.0\n[data]\n"
                                 + CONFIG.replace("[[classes]]", "[[data.classes]]"))
    assert options == {"t_end": 5.0} and data.vocab_size == 6


# ------------------------------------------------------------------ outputs
@pytest.mark.parametrize("target", ["dir", "/"])
def test_out_naming_a_directory(tmp_path, capsys, target):
    out = str(tmp_path) if target == "dir" else "/"
    code, _, err = cli(capsys, "run", "--t-end", "1", "--no-progress", "--out", out)
    assert code == 2 and "is a directory" in one_error_line(err)


def test_unwritable_output_for_run_plot_and_save(tmp_path, capsys, monkeypatch):
    deny_temp_files(monkeypatch)
    code, _, err = cli(capsys, "run", "--t-end", "1", "--no-progress", "--out",
                       str(tmp_path / "r.npz"))
    assert code == 2 and "not writable" in one_error_line(err)
    code, _, err = cli(capsys, "plot", "margin", "--out", str(tmp_path / "m.png"))
    assert code == 2 and "not writable" in one_error_line(err)


def test_saved_file_mode_follows_umask(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        code, _, _ = cli(capsys, "run", "--t-end", "1", "--no-progress", "--out",
                         str(tmp_path / "r.npz"))
    finally:
        os.umask(old)
    assert code == 0 and stat.S_IMODE(os.stat(tmp_path / "r.npz").st_mode) == 0o644


def test_result_is_saved_before_the_table(tmp_path, capsys, monkeypatch):
    from odeflow.results.trajectory import Trajectory

    def table_too_large(*args, **kwargs):
        raise MemoryError("a 90 GiB table")

    monkeypatch.setattr(Trajectory, "summary_table", table_too_large)
    out = tmp_path / "r.npz"
    code, stdout, err = cli(capsys, "run", "--t-end", "1", "--no-progress", "--out", str(out))
    assert code == 2 and "more memory" in one_error_line(err)
    assert out.is_file() and f"saved {out}" in stdout


def test_rows_never_exceed_the_stored_times(tmp_path, capsys):
    code, out, _ = cli(capsys, "run", "--t-end", "1", "--no-progress", "--rows",
                       "99999999999999999999", "--out", str(tmp_path / "r.npz"))
    assert code == 0 and len(out.splitlines()) < 700


# -------------------------------------------------------------------- plots
def test_plot_huge_dpi(tmp_path, capsys):
    code, _, err = cli(capsys, "plot", "margin", "--dpi", "100000", "--out",
                       str(tmp_path / "m.png"))
    assert code == 2 and one_error_line(err).startswith("odeflow: error: --dpi:")
    assert not (tmp_path / "m.png").exists()


def test_plot_tiny_dpi(tmp_path, capsys):
    code, _, err = cli(capsys, "plot", "attention-map", "--dpi", "5", "--t-end", "2",
                       "--out", str(tmp_path / "a.png"))
    from odeflow.plots.style import MIN_DPI

    assert code == 2 and f"dpi: must be a finite number >= {MIN_DPI}" in one_error_line(err)


def test_plot_scan_snap_short_t_end(tmp_path, capsys):
    code, _, err = cli(capsys, "plot", "scan-snap", "--t-end", "1", "--out",
                       str(tmp_path / "s.png"))
    assert code == 0, err


def test_plot_all_non_finite_rate_names_it(tmp_path, capsys):
    code, _, err = cli(capsys, "plot", "all", "--eta-y", "inf", "--outdir", str(tmp_path),
                       "--t-end", "1")
    assert code == 2 and "eta_y" in err


def test_plot_levels_huge_t_end(tmp_path, capsys):
    code, _, err = cli(capsys, "plot", "levels", "--eta-z", "1e4", "--t-end", "1e10",
                       "--out", str(tmp_path / "l.png"))
    assert code == 2 and "steps: must be <= 100,000" in one_error_line(err)


def test_plot_levels_stiff_rates_end_in_solve_error(tmp_path, capsys, small_budget):
    code, _, err = cli(capsys, "plot", "levels", "--eta-z", "1e12", "--t-end", "10",
                       "--out", str(tmp_path / "l.png"))
    assert code == 3 and "max_nfev = 2000" in one_error_line(err)


# --------------------------------------------------------- compare-levels
def test_compare_levels_empty_ratio_field(capsys):
    code, out, err = cli(capsys, "compare-levels", "--ratios", "0.1,,0.2", "--t-end", "1")
    assert code in (0, 2), err
    if code == 0:
        assert "nan" not in out.lower()


@pytest.mark.parametrize("figure", ["margin", "scan-snap", "attention-map", "relative-gain",
                                    "levels"])
def test_plot_with_a_subnormal_t_end_names_t_end(tmp_path, capsys, figure):
    """Found by the thorough fuzz run: t_end / 1000 underflowed to 0 and np.geomspace
    raised a raw ValueError; a span that cannot carry a log axis is now a ValidationError."""
    code, _, err = cli(capsys, "plot", figure, "--t-end", "5e-324", "--out",
                       str(tmp_path / "f.png"))
    # levels rounds t_end to one SGD step and draws; the log-time figures refuse it
    assert code == (0 if figure == "levels" else 2)
    if code == 2:
        assert one_error_line(err).startswith("odeflow: error: --t-end:")


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_plot_levels_non_finite_t_end_names_t_end(tmp_path, capsys, value):
    """Found by the thorough fuzz run: the levels figure rounded t_end to a step count
    before checking it (ValueError: cannot convert float NaN to integer)."""
    code, _, err = cli(capsys, "plot", "levels", "--t-end", value, "--out",
                       str(tmp_path / "l.png"))
    assert code == 2 and one_error_line(err).startswith("odeflow: error: --t-end:")


def test_plot_margin_far_horizon_is_bounded(tmp_path, capsys):
    """Found by the thorough fuzz run: t_end = 1e300 asked the Lemma 5 recursion for
    5e299 steps (numpy: 'Maximum allowed dimension exceeded'); its markers now stop at
    LEMMA5_MAX_VISITS visits while CF1 is drawn to t_end."""
    from odeflow.plots.margin import LEMMA5_MAX_VISITS, lemma5_margin

    code, _, err = cli(capsys, "plot", "margin", "--t-end", "1e300", "--out",
                       str(tmp_path / "m.png"))
    assert code == 0 and (tmp_path / "m.png").stat().st_size > 5000
    with pytest.raises(ValidationError, match="visits"):
        lemma5_margin(1.0, 34, LEMMA5_MAX_VISITS + 1)


def test_plot_dpi_at_which_the_labels_cannot_render_is_refused(tmp_path, capsys):
    """Found by the thorough fuzz run: dpi 10 passed the old limit, then FreeType raised
    a raw RuntimeError ("invalid ppem") for the small mathtext labels."""
    from odeflow.plots.style import MIN_DPI

    code, _, err = cli(capsys, "plot", "margin", "--t-end", "0.01", "--dpi", "10", "--out",
                       str(tmp_path / "m.png"))
    assert code == 2 and one_error_line(err).startswith("odeflow: error: --dpi:")
    code, _, _ = cli(capsys, "plot", "margin", "--t-end", "0.01", "--dpi", str(MIN_DPI),
                     "--out", str(tmp_path / "m.png"))
    assert code == 0


# ------------------------------------------------------------- run budget
def test_run_max_nfev_bounds_a_stiff_solve(tmp_path, capsys):
    """--max-nfev caps the solve the error message tells the user to enlarge; nothing is
    saved for a stopped solve."""
    out = tmp_path / "r.npz"
    code, _, err = cli(capsys, "run", "--eta-z", "1e12", "--t-end", "10", "--max-nfev", "300",
                       "--no-progress", "--out", str(out))
    line = one_error_line(err)
    assert code == 3 and "after max_nfev = 300 " in line and "--max-nfev" in line
    assert not out.exists()
    code, _, err = cli(capsys, "run", "--max-nfev", "0", "--out", str(out))
    assert code == 2 and one_error_line(err).startswith("odeflow: error: --max-nfev: must be")
    code, stdout, _ = cli(capsys, "run", "--t-end", "10", "--max-nfev", "100000", "--rows", "0",
                          "--out", str(out))
    assert code == 0 and out.exists() and "status=0" in stdout
