"""The optimiser flows beside the paper's runs (issue 20): goal arithmetic, the docs page."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from odeflow.experiments import goals, paper

ROOT = Path(__file__).resolve().parent.parent


def _fig6_rows(predictions, means, sds):
    return [{"preset": f"syn-medium-{1 + i % 2}", "M": 33, "eta_z": 1.0, "ratio": float(i),
             "eta_y": float(i), "sgd_mean": m, "sgd_std": s, "optflow_T_mean": p}
            for i, (p, m, s) in enumerate(zip(predictions, means, sds, strict=True))]


def test_fig6_goal_counts_cells_within_one_sd():
    rows = _fig6_rows([2.0, 2.09, 2.11, 1.5, 2.0], [2.0, 2.0, 2.0, 2.0, 2.0],
                      [0.1, 0.1, 0.1, 0.1, 0.0])
    g = goals.fig6_goal(rows)
    assert g["cells"] == 5 and g["hits"] == 3          # 0, 0.9 sd and the exact zero-sd cell
    assert [m["ratio"] for m in g["misses"]] == [2.0, 3.0]
    assert g["misses"][0]["distance"] == pytest.approx(1.1)
    assert g["distance"][1] == pytest.approx(0.9)
    # a prediction off a zero-sd mean is an infinite distance, not a hit
    assert goals.fig6_goal(_fig6_rows([2.1], [2.0], [0.0]))["hits"] == 0


def test_fig4_goal_ratio_and_worst_step():
    rows = [{"step": float(k), "loss_mean": 1.0 / (k + 1), "optflow_T_loss": 1.0 / (k + 1)}
            for k in range(0, 60)]
    rows[10]["optflow_T_loss"] = 1.3 / 11
    rows[11]["optflow_T_loss"] = 9.0        # an odd step is not part of the goal
    g = goals.fig4_goal(rows)
    assert g["steps"] == list(range(2, 51, 2)) and not g["missing"]
    assert g["worst_step"] == 10 and g["worst_ratio"] == pytest.approx(1.3)
    assert g["worst_rel"] == pytest.approx(0.3)
    short = goals.fig4_goal(rows[:20])
    assert short["missing"] == list(range(20, 51, 2))


def test_fig5_goal_worst_distance_per_rate():
    rows = []
    for ez in (0.1, 1.0):
        for k in range(4):
            rows.append({"eta_z": ez, "step": float(k), "entropy_mean": 2.0,
                         "entropy_std": 0.0 if k == 0 else 0.01,
                         "optflow_T_entropy": 2.0 + (0.03 if (ez == 1.0 and k == 2) else 0.0)})
    g = goals.fig5_goal(rows)
    assert g[0.1]["worst"] == 0.0
    assert g[1.0]["worst"] == pytest.approx(3.0) and g[1.0]["worst_step"] == 2
    rows[0]["optflow_T_entropy"] = 2.5     # off at the shared zero start: infinite
    assert math.isinf(goals.fig5_goal(rows)[0.1]["worst"])


def load_script(name: str, monkeypatch):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _write_small_csvs(folder: Path) -> None:
    """Small fig4/5/6.csv with the columns the page reads (made-up numbers)."""
    from odeflow.cli.reproduce import csv_text

    rows4 = [{"step": k, "flow_time": float(k), "loss_mean": 1.0 / (k + 1), "loss_std": 0.01,
              "level_T_loss": 2.0 / (k + 1), "level_E_loss": 3.0 / (k + 1),
              "optflow_E_loss": 0.9 / (k + 1),
              "optflow_T_loss": (1.4 if k == 6 else 1.1) / (k + 1)} for k in range(0, 52)]
    rows5 = [{"eta_z": ez, "step": k, "entropy_mean": 2.0, "entropy_std": 0.0 if k == 0 else 0.02,
              "level_E_entropy": 1.9, "optflow_T_entropy": 2.0 + (0.05 if k == 3 else 0.0)}
             for ez in (0.1, 1.0) for k in range(5)]
    rows6 = [{"preset": f"syn-medium-{n}", "M": 33, "eta_z": ez, "ratio": q, "eta_y": ez * q,
              "steps": 100, "flow_time": 910.0, "seeds": 10, "levels_from": "zero",
              "sgd_mean": 2.0, "sgd_std": 0.1, "level_E": 2.05, "level_T": 2.3,
              "optflow_T_mean": 2.25 if (n == 10 and q == 10.0) else 2.02,
              "optflow_T_std": 0.07, "optflow_E_mean": 2.05, "optflow_E_std": 0.06,
              "train_seconds": 1.0, "optflow_T_seconds": 3.0, "optflow_E_seconds": 0.5}
             for n in (1, 3, 5, 10) for ez in (0.5, 1.0, 2.0, 3.0) for q in (1.0, 2.0, 5.0, 10.0)]
    for stem, rows in (("fig4", rows4), ("fig5", rows5), ("fig6", rows6)):
        (folder / f"{stem}.csv").write_text(csv_text(rows), encoding="utf-8")


def test_which_level_page_is_built_from_the_csvs(tmp_path, monkeypatch):
    module = load_script("make_which_level", monkeypatch)
    _write_small_csvs(tmp_path)
    goals = module.build(tmp_path, tmp_path)
    page = " ".join((tmp_path / "which_level.md").read_text(encoding="utf-8").split())
    # Fig. 6: the four (eta_Z, ratio = 10) cells of syn-medium-10 are 2.5 sd off
    assert goals["fig6_hits"] == 60 and len(goals["fig6_misses"]) == 4
    assert "**60 of 64**" in page and "| syn-medium-10 | 3 | 10 | 30 |" in page
    # Fig. 4: step 6 at 1.4 times the runs is the worst even step in 2..50
    assert goals["fig4_worst_step"] == 6 and goals["fig4_worst_ratio"] == pytest.approx(1.4)
    assert "worst ratio **1.400** at step 6 (**not met**)" in page
    # Fig. 5: 0.05 off at sd 0.02
    assert goals["fig5_worst_sd"] == pytest.approx(2.5)
    assert "worst **2.50 sd** (**not met**)" in page
    assert "ratio **3.00** (**not met**)" in page        # 192 s of flows against 64 s
    assert "took 64 s" in page and "Level T 192 s" in page
    # the numbers follow the files: change one and build again
    text = (tmp_path / "fig6.csv").read_text(encoding="utf-8").replace(",2.25,", ",2.02,")
    (tmp_path / "fig6.csv").write_text(text, encoding="utf-8")
    assert module.build(tmp_path, tmp_path)["fig6_hits"] == 64
    page = " ".join((tmp_path / "which_level.md").read_text(encoding="utf-8").split())
    assert "**64 of 64** (**met**)" in page


def test_which_level_page_shows_the_discrete_heavy_ball_beside_the_flow(tmp_path, monkeypatch):
    from odeflow.cli.reproduce import csv_rows, csv_text

    module = load_script("make_which_level", monkeypatch)
    _write_small_csvs(tmp_path)
    module.build(tmp_path, tmp_path)
    assert "discrete heavy ball, Level T" not in (tmp_path / "which_level.md").read_text()
    # the recursion misses the four cells the flow misses and two more (syn-medium-1,
    # ratio 1, eta_Z 0.5 and 1: 1.5 sd off)
    rows = [{"preset": r["preset"], "eta_z": r["eta_z"], "ratio": r["ratio"],
             "eta_y": r["eta_y"], "seeds": 10, "steps": 100,
             "discrete_T_mean": r["optflow_T_mean"] + (0.15 if r["preset"] == "syn-medium-1"
                                                      and r["ratio"] == 1.0
                                                      and r["eta_z"] <= 1.0 else 0.01),
             "discrete_T_std": 0.07, "discrete_T_seconds": 1.0}
            for r in csv_rows(tmp_path / "fig6.csv")]
    (tmp_path / "fig6_discrete.csv").write_text(csv_text(rows), encoding="utf-8")
    assert module.build(tmp_path, tmp_path)["fig6_hits"] == 60  # the goal is the flow's
    page = " ".join((tmp_path / "which_level.md").read_text(encoding="utf-8").split())
    assert ("| discrete heavy ball, Level T (runs' starts, no minibatch noise) | 14/16 | 16/16 "
            "| 16/16 | 12/16 | 58/64 |") in page
    assert "within one sd in **58 of 64** cells (58 of them with the flow)" in page
    assert "at most 1.50 seed sd from it" in page


def test_fig6_discrete_rows_are_the_recursion_from_the_runs_starts():
    """One small cell: the columns, and the recursion's entropy against a hand loop over
    the seeds' starts (odeflow.training.optimizer_steps on Level T)."""
    import numpy as np

    import odeflow
    from odeflow.analysis.measures import distinct_entropy
    from odeflow.fields import FiniteTFlow

    rows = paper.fig6_discrete_rows(seeds=2, steps=3, sizes=(1,), eta_zs=(1.0,),
                                    ratios=(2.0,))
    assert len(rows) == 1 and rows[0]["eta_y"] == 2.0 and rows[0]["seeds"] == 2
    data = odeflow.DataModel.preset("syn-medium-1")
    protocol = paper.FIG6.replace(eta_z=1.0, eta_y=2.0, steps=3)
    options = paper.OPTFLOWS["T"][1]
    final = []
    for seed in (0, 1):
        y0, z0 = odeflow.training_start(data, seed, "uniform")
        field = FiniteTFlow(data, 2.0, 1.0, start=(y0, z0), seq_len=protocol.seq_len, **options)
        tr = odeflow.optimizer_steps(field, paper.optimizer_of(protocol), 3, progress=False)
        final.append(distinct_entropy(data, tr.z_active)[-1])
    assert rows[0]["discrete_T_mean"] == pytest.approx(np.mean(final), rel=1e-12)
    assert rows[0]["discrete_T_std"] == pytest.approx(np.std(final), rel=1e-9)
    assert final[0] != final[1]


def test_which_level_page_shows_the_adam_start_study_from_its_csv(tmp_path, monkeypatch):
    from odeflow.cli.reproduce import csv_rows, csv_text

    module = load_script("make_which_level", monkeypatch)
    _write_small_csvs(tmp_path)
    rows5 = csv_rows(tmp_path / "fig5.csv")
    for r in rows5:
        r["discrete_T_entropy"] = 2.01
    (tmp_path / "fig5.csv").write_text(csv_text(rows5), encoding="utf-8")
    module.build(tmp_path, tmp_path)
    assert "exact steps before the ODE" not in (tmp_path / "which_level.md").read_text()
    # exact_steps 1: 0.1 off at step 4 (5 sd); exact_steps 3 and "auto" (resolved to 2),
    # read half a step later: on the runs' mean
    starts = [{"eta_z": ez, "exact_steps": k, "offset": off, "exact_until": until, "step": i,
               "entropy": 2.1 if (k, i) == (1, 4) else 2.0, "nfev": 10}
              for ez in (0.1, 1.0) for k, off, until in ((1, 0.0, 1), (3, 0.5, 3), ("auto", 0.5, 2))
              for i in range(5)]
    (tmp_path / "fig5_adam_starts.csv").write_text(csv_text(starts), encoding="utf-8")
    module.build(tmp_path, tmp_path)
    page = " ".join((tmp_path / "which_level.md").read_text(encoding="utf-8").split())
    assert "exact steps before the ODE" in page
    assert "| 0.1 | 1 | 0 | 5 | 4 | 5.00 | 5.00 | 5.00 | 9.00e-02 |" in page
    assert "| 1 | 3 | 0.5 | 0 | 0 | 0.00 | 0.00 | 0.00 | 1.00e-02 |" in page
    assert "| 1 | auto (2), the default | 0.5 | 0 | 0 | 0.00 | 0.00 | 0.00 | 1.00e-02 |" in page
    # a file written before the offset column: read as offset 0, exact_until = exact_steps
    old = [{k: v for k, v in r.items() if k not in ("offset", "exact_until")}
           for r in starts if r["exact_steps"] != "auto"]
    (tmp_path / "fig5_adam_starts.csv").write_text(csv_text(old), encoding="utf-8")
    module.build(tmp_path, tmp_path)
    page = " ".join((tmp_path / "which_level.md").read_text(encoding="utf-8").split())
    assert "| 1 | 3 | 0 | 0 | 0 | 0.00 | 0.00 | 0.00 | 1.00e-02 |" in page


# ------------------------------------------------------------ the command writes the columns
def _columns_finite(rows, columns):
    for c in columns:
        assert c in rows[0], c
        assert all(math.isfinite(float(r[c])) for r in rows), c


def test_reproduce_fig4_fig5_write_the_optimiser_flow_columns(tmp_path):
    from odeflow.cli import main
    from odeflow.cli.reproduce import csv_rows

    for fig, columns in (("fig4", ("optflow_E_loss", "optflow_T_loss", "optflow_T_entropy",
                                  "discrete_T_loss", "discrete_E_entropy")),
                         ("fig5", ("optflow_T_entropy",))):
        assert main(["reproduce", fig, "--seeds", "2", "--steps", "3", "--out", str(tmp_path),
                     "--no-progress"]) == 0
        rows = csv_rows(tmp_path / f"{fig}.csv")
        _columns_finite(rows, columns)
        # the columns of before stay, in their order, ahead of the new ones
        names = list(rows[0])
        assert names[:7] == (["step", "flow_time", "loss_mean", "loss_std", "entropy_mean",
                              "entropy_std", "level_E_loss"] if fig == "fig4" else
                             ["eta_z", "step", "flow_time", "loss_mean", "loss_std",
                              "entropy_mean", "entropy_std"])
        assert names.index("optflow_T_entropy") > names.index("level_T_entropy")
        # zero start: the attention gradient is zero there, so every flow's entropy at step 0
        # is the runs' (ln of the distinct tokens' count) up to the half step below
        assert rows[0]["optflow_T_entropy"] == pytest.approx(rows[0]["entropy_mean"], abs=1e-5)
        if fig == "fig4":
            # the heavy-ball ODE starts at rest from the runs' start half a step before step 0
            # (Momentum's default offset 1/2): under a near-constant force it has moved
            # (1/2)^2 / 2 = 1/8 of the discrete heavy ball's first step by step 0
            assert rows[0]["loss_mean"] == pytest.approx(math.log(34), abs=1e-12)
            for name in ("T", "E"):
                moved = math.log(34) - rows[0][f"optflow_{name}_loss"]
                first = math.log(34) - rows[1][f"discrete_{name}_loss"]
                assert moved / first == pytest.approx(1 / 8, rel=0.05), name
            assert rows[-1]["optflow_T_loss"] < rows[0]["optflow_T_loss"]
        assert "warm-up" in rows[0]["time_map"] if fig == "fig4" else "Adam" in rows[0]["time_map"]


def test_fig6_ensemble_starts_where_each_run_starts():
    """Each seed's heavy-ball flow starts from that seed's own draw (training_start)."""
    import numpy as np

    from odeflow import DataModel

    data = DataModel.preset("syn-medium-1")
    protocol = paper.FIG6.replace(steps=3, eta_z=3.0, eta_y=30.0)
    exp = paper.experiment(data, protocol, seeds=3)
    for name in ("T", "E"):
        members = exp.optflow_members[name]
        assert members.shape == (3, 4)
        # each flow starts at rest from its own seed's draw half a step before step 0
        # (Momentum's default offset 1/2): by step 0 it is nearest its own run's start, and
        # has moved about 1/8 of that run's first step (exactly 1/8 under a constant force;
        # the runs' first step carries minibatch noise)
        gap = np.abs(members[:, 0][:, None] - exp.entropy[:, 0][None, :])
        assert np.array_equal(gap.argmin(axis=1), np.arange(3))
        moved = (members[:, 0] - exp.entropy[:, 0]) / (exp.entropy[:, 1] - exp.entropy[:, 0])
        assert np.all((moved > 0.08) & (moved < 0.17)), moved
        assert np.all(np.isfinite(members)) and members[:, -1].std() > 0
        assert np.allclose(exp.optflow_entropy[name], members.mean(axis=0))
        assert exp.seconds[f"optflow_{name}"] > 0
    rows = paper.fig6_rows(seeds=2, steps=3, sizes=(1,), eta_zs=(3.0,), ratios=(10.0,))
    _columns_finite(rows, ("optflow_T_mean", "optflow_T_std", "optflow_E_mean",
                           "optflow_E_std", "optflow_T_seconds", "optflow_E_seconds"))
    assert "warm-up" in rows[0]["time_map"]


def test_level_t_objective_of_a_full_decoder_matches_the_field():
    """Level T from a random start (all M decoder rows): the trajectory's J_T is the field's."""
    import numpy as np

    import odeflow
    from odeflow.fields.finite_t import FiniteTFlow
    from odeflow.training import training_start

    data = odeflow.DataModel.preset("syn-medium-1")
    y0, z0 = training_start(data, 4)
    traj = odeflow.solve(data, flow="finite_t", eta_y=2.0, eta_z=1.0, t_span=(0.0, 5.0),
                         t_eval=[0.0, 5.0], start=(y0, z0), sample_size=8, seq_len=16,
                         progress=False)
    assert traj.decoder_layout == "full"
    field = FiniteTFlow(data, 2.0, 1.0, start=(y0, z0), sample_size=8, seq_len=16)
    assert traj.objective[0] == pytest.approx(field.objective(field.initial_state()), abs=1e-12)
    assert np.all(np.diff(traj.objective) > 0)           # a gradient flow ascends J_T


def test_training_start_is_each_runs_own_draw():
    """training_start(data, s) is exactly Y(0), Z(0) of member s of an ensemble run."""
    import numpy as np

    from odeflow import DataModel, ValidationError
    from odeflow.training import Protocol, train, training_start

    data = DataModel.preset("syn-medium-1")
    run = train(data, **Protocol(init="uniform", steps=1, batch_size=4, seq_len=4).options(),
                seeds=[3, 7, 11])
    for i, s in enumerate(run.seeds):
        y0, z0 = training_start(data, s)
        assert y0.shape == (33, 33) and z0.shape == (data.query_tokens.size, 33)
        assert np.array_equal(y0[:, data.active_tokens], run.initial_decoder(i))
        assert np.array_equal(z0, run.initial_logits(i))
    assert not np.array_equal(training_start(data, 3)[0], training_start(data, 7)[0])
    with pytest.raises(ValidationError, match="^seed"):
        training_start(data, -1)


def test_fig6_ensemble_recorded_at_fewer_steps_keeps_the_last_one():
    """``optflow_steps`` only changes where the ensemble is recorded, not its solve: the
    last step's entropies equal those of the ensemble recorded at every step."""
    import numpy as np

    from odeflow import DataModel
    from odeflow.errors import ValidationError

    data = DataModel.preset("syn-medium-1")
    protocol = paper.FIG6.replace(steps=4, eta_z=1.0, eta_y=2.0)
    every = paper.experiment(data, protocol, seeds=2, optflows={"T": paper.OPTFLOWS["T"]})
    ends = paper.experiment(data, protocol, seeds=2, optflows={"T": paper.OPTFLOWS["T"]},
                            optflow_steps=[0, 4])
    assert every.optflow_members["T"].shape == (2, 5)
    assert ends.optflow_members["T"].shape == (2, 2)
    assert np.array_equal(ends.optflow_steps, [0, 4])
    assert np.allclose(ends.optflow_members["T"][:, -1], every.optflow_members["T"][:, -1],
                       rtol=0, atol=1e-12)
    assert np.allclose(ends.optflow_members["T"][:, 0], every.optflow_members["T"][:, 0],
                       rtol=0, atol=1e-6)
    for bad in ([4, 0], [0, 5], [], [0, 2.5]):
        with pytest.raises(ValidationError, match="optflow_steps"):
            paper.experiment(data, protocol, seeds=1, optflows={"T": paper.OPTFLOWS["T"]},
                             optflow_steps=bad)
