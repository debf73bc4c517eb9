"""Project hygiene: the docs build with warnings as errors, ruff is clean, the CLI runs."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                             str(ROOT / "docs"), str(tmp_path / "html")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr + result.stdout


def test_ruff_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed (it is in the test extras)")
    result = subprocess.run([ruff, "check", "."], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "odeflow", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_cli_run_default(tmp_path):
    result = run_cli("run", "--no-progress", "--t-end", "100", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "syn-small" in result.stdout and "nfev=" in result.stdout
    assert (tmp_path / "results" / "syn-small-exact.npz").stat().st_size > 0


def test_cli_run_config_and_bad_input(tmp_path):
    import odeflow

    cfg = tmp_path / "m.toml"
    cfg.write_text(odeflow.DataModel.preset("syn-small").to_toml_string()
                   + "\n[run]\nt_end = 50.0\n")
    result = run_cli("run", "--config", str(cfg), "--out", str(tmp_path / "o.npz"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert odeflow.Trajectory.load(tmp_path / "o.npz").t[-1] == 50.0
    bad = run_cli("run", "--eta-z", "0", cwd=tmp_path)
    assert bad.returncode == 2 and "--eta-z" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_cli_run_snap_flow(tmp_path):
    cfg = tmp_path / "one_common.toml"
    cfg.write_text("vocab_size = 10\n"
                   "[[classes]]\nnext_token = 8\nquery_token = 0\n"
                   "tokens = [0, 1, 2]\nprobs = [0.2, 0.3, 0.5]\n"
                   "[[classes]]\nnext_token = 9\nquery_token = 0\n"
                   "tokens = [0, 3, 4]\nprobs = [0.2, 0.4, 0.4]\n")
    result = run_cli("run", "--config", str(cfg), "--flow", "snap", "--t-end", "100",
                     "--out", str(tmp_path / "s.npz"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "z_c" in result.stdout and (tmp_path / "s.npz").stat().st_size > 0
    several = run_cli("run", "--preset", "shared-query-small", "--flow", "snap",
                      cwd=tmp_path)  # 10 common tokens
    assert several.returncode == 2 and "common token" in several.stderr
    preset = run_cli("run", "--preset", "snap-small", "--flow", "snap", "--t-end", "100",
                     "--out", str(tmp_path / "p.npz"), cwd=tmp_path)
    assert preset.returncode == 0, preset.stderr
    assert "z_c" in preset.stdout and (tmp_path / "p.npz").stat().st_size > 0


@pytest.mark.skipif(shutil.which("odeflow") is None, reason="console script not installed")
def test_console_script():
    result = subprocess.run(["odeflow", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "run" in result.stdout


def test_no_wall_clock_assertion_in_the_tests():
    """Timing goals live in benchmarks/; a test that asserts a wall time fails on a busy machine.

    Reads every test file: an ``assert`` line that compares a measured time
    (``wall_time``, ``elapsed``, ``perf_counter()``/``time()`` differences) with
    ``<`` or ``<=`` is refused.
    """
    import re

    timed = re.compile(r"assert .*(wall_time|elapsed|perf_counter\(\)|monotonic\(\)|"
                       r"time\.time\(\)).*<")
    here = Path(__file__).parent
    found = [f"{p.relative_to(here)}:{i}: {line.strip()}"
             for p in sorted(here.rglob("*.py")) if p.name != Path(__file__).name
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if timed.search(line)]
    assert found == []
