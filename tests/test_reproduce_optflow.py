"""The optimiser flows beside the paper's runs (issue 20): goal arithmetic, the docs page."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from odeflow.analysis import paper

ROOT = Path(__file__).resolve().parent.parent


def _fig6_rows(predictions, means, sds):
    return [{"preset": f"syn-medium-{1 + i % 2}", "M": 33, "eta_z": 1.0, "ratio": float(i),
             "eta_y": float(i), "sgd_mean": m, "sgd_std": s, "optflow_T_mean": p}
            for i, (p, m, s) in enumerate(zip(predictions, means, sds, strict=True))]


def test_fig6_goal_counts_cells_within_one_sd():
    rows = _fig6_rows([2.0, 2.09, 2.11, 1.5, 2.0], [2.0, 2.0, 2.0, 2.0, 2.0],
                      [0.1, 0.1, 0.1, 0.1, 0.0])
    g = paper.fig6_goal(rows)
    assert g["cells"] == 5 and g["hits"] == 3          # 0, 0.9 sd and the exact zero-sd cell
    assert [m["ratio"] for m in g["misses"]] == [2.0, 3.0]
    assert g["misses"][0]["distance"] == pytest.approx(1.1)
    assert g["distance"][1] == pytest.approx(0.9)
    # a prediction off a zero-sd mean is an infinite distance, not a hit
    assert paper.fig6_goal(_fig6_rows([2.1], [2.0], [0.0]))["hits"] == 0


def test_fig4_goal_ratio_and_worst_step():
    rows = [{"step": float(k), "loss_mean": 1.0 / (k + 1), "optflow_T_loss": 1.0 / (k + 1)}
            for k in range(0, 60)]
    rows[10]["optflow_T_loss"] = 1.3 / 11
    rows[11]["optflow_T_loss"] = 9.0        # an odd step is not part of the goal
    g = paper.fig4_goal(rows)
    assert g["steps"] == list(range(2, 51, 2)) and not g["missing"]
    assert g["worst_step"] == 10 and g["worst_ratio"] == pytest.approx(1.3)
    assert g["worst_rel"] == pytest.approx(0.3)
    short = paper.fig4_goal(rows[:20])
    assert short["missing"] == list(range(20, 51, 2))


def test_fig5_goal_worst_distance_per_rate():
    rows = []
    for ez in (0.1, 1.0):
        for k in range(4):
            rows.append({"eta_z": ez, "step": float(k), "entropy_mean": 2.0,
                         "entropy_std": 0.0 if k == 0 else 0.01,
                         "optflow_T_entropy": 2.0 + (0.03 if (ez == 1.0 and k == 2) else 0.0)})
    g = paper.fig5_goal(rows)
    assert g[0.1]["worst"] == 0.0
    assert g[1.0]["worst"] == pytest.approx(3.0) and g[1.0]["worst_step"] == 2
    rows[0]["optflow_T_entropy"] = 2.5     # off at the shared zero start: infinite
    assert math.isinf(paper.fig5_goal(rows)[0.1]["worst"])


def load_script(name: str, monkeypatch):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module
