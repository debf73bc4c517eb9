"""Default standard output of the commands fits 100 columns; ``--wide`` gives the full tables.

Each command runs in-process on a small input. Lines that quote a path the test
gave (``saved``/``wrote`` lines) are exempt, as are progress lines and errors
(they go to stderr).
"""

from __future__ import annotations

from functools import partial

import pytest

from odeflow.cli import main
from odeflow.tables import WIDTH, blocks, wrap

COMMANDS = {
    "run": ["run", "--no-progress", "--out", "{tmp}/a.npz"],
    "run-snap": ["run", "--preset", "snap-small", "--flow", "snap", "--no-progress",
                 "--out", "{tmp}/s.npz"],
    "run-finite-t": ["run", "--flow", "finite_t", "--t-end", "100", "--no-progress",
                     "--out", "{tmp}/t.npz"],
    "run-induction": ["run", "--preset", "ih-point", "--t-end", "10", "--no-progress",
                      "--out", "{tmp}/i.npz"],
    "verify": ["verify", "--only", "CF2", "CF5", "CF6", "--t-max", "100", "--no-progress"],
    "compare": ["compare", "--steps", "20", "--seeds", "2", "--batch-size", "4",
                "--seq-len", "16", "--no-progress"],
    "compare-table": ["compare", "--table", "--steps", "10", "--seeds", "1", "--seq-lens", "8",
                      "--batch-sizes", "4", "--no-progress"],
    "compare-levels": ["compare-levels", "--t-end", "20", "--ratios", "0.1,1", "--seq-len",
                       "16", "--sample-size", "4", "--sgd-seeds", "2",
                       "--batch-size", "8"],
    "reproduce-fig4": ["reproduce", "fig4", "--seeds", "1", "--steps", "6", "--out",
                       "{tmp}/r", "--no-progress"],
    "reproduce-fig5": ["reproduce", "fig5", "--seeds", "1", "--steps", "4", "--out",
                       "{tmp}/r", "--no-progress"],
    "reproduce-fig6": ["reproduce", "fig6", "--seeds", "1", "--steps", "2", "--sizes", "1",
                       "--out", "{tmp}/r", "--no-progress"],
    "reproduce-induction": ["reproduce", "induction", "--seeds", "2", "--steps", "5", "--out",
                            "{tmp}/r", "--no-progress"],
}


@pytest.fixture
def small_induction(monkeypatch):
    """``reproduce induction`` on ih-point with 300 sequences per seed (seconds, not minutes)."""
    from odeflow import InductionData
    from odeflow.training.induction import beside_flow

    monkeypatch.setattr(beside_flow, "compare",
                        partial(beside_flow.compare, InductionData.preset("ih-point"),
                                sample_size=300))


def _stdout(capsys, tmp_path, argv) -> list[str]:
    code = main([arg.format(tmp=tmp_path) for arg in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return [line for line in captured.out.splitlines() if str(tmp_path) not in line]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_default_output_fits_100_columns(name, capsys, tmp_path, small_induction):
    lines = _stdout(capsys, tmp_path, COMMANDS[name])
    assert lines, name
    too_long = [line for line in lines if len(line) > WIDTH]
    assert not too_long, f"{name}: {len(too_long)} lines over {WIDTH}: {too_long[0]!r}"


def test_sweep_summary_fits_100_columns(capsys, tmp_path):
    config = tmp_path / "grid.toml"
    config.write_text('[sweep]\ntask = "reduced"\n[sweep.grid]\neta_y = [0.5, 1.0]\n'
                      'eta_z = [0.1, 1.0]\n[sweep.settings]\nt_end = 100.0\n', encoding="utf-8")
    lines = _stdout(capsys, tmp_path, ["sweep", str(config), "--out", "{tmp}/s.zarr",
                                       "--backend", "serial", "--no-progress"])
    assert any("computed now 4" in line for line in lines)
    assert max(map(len, lines)) <= WIDTH


def test_wide_prints_the_table_in_one_block(capsys, tmp_path):
    argv = COMMANDS["reproduce-fig4"]
    narrow = _stdout(capsys, tmp_path, argv)
    wide = _stdout(capsys, tmp_path, [*argv, "--wide"])
    assert max(map(len, wide)) > WIDTH  # 13 columns side by side
    assert sum(line.startswith("step") for line in wide) == 1
    assert sum(line.startswith("step") for line in narrow) > 1  # continued below
    # the same cells, only arranged differently (the last line gives the wall time)
    assert set(" ".join(wide[:-1]).split()) == set(" ".join(narrow[:-1]).split())


def test_blocks_repeat_the_key_columns_and_keep_every_cell():
    header = ["t", *(f"column_{i}" for i in range(12))]
    rows = [[str(k), *(f"{k}.{i:08d}" for i in range(12))] for k in range(3)]
    lines = blocks(header, rows, keys=1, width=60)
    assert max(map(len, lines)) <= 60
    assert sum(line.split()[0] == "t" for line in lines if line) > 1
    cells = {cell for line in lines for cell in line.split()}
    assert cells >= {cell for row in rows for cell in row} | set(header)
    assert len(blocks(header, rows, width=None)) == 4  # header and three rows


def test_wrap_keeps_words_whole_and_indents_continuations():
    text = "  solver: " + " ".join(f"word{i}" for i in range(40))
    lines = wrap(text, 50).splitlines()
    assert max(map(len, lines)) <= 50 and all(line.startswith("    ") for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())
    assert wrap(text, None) == text
