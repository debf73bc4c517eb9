"""The Scan and Snap paper's figures (Sec. 8, Figs. 4-6) beside the levels.

Each figure is :func:`odeflow.analysis.paper.experiment` run with the paper's
protocol (:data:`FIG4`, :data:`FIG6`) on its presets: Fig. 4 on ``syn-small`` with
SGD (momentum 0.9), Fig. 5 the same with Adam at the rates :data:`FIG5_ETA_Z`, Fig. 6
the final distinct-token entropy over ``syn-medium-N x eta_Z x eta_Y/eta_Z``.
``odeflow reproduce fig4|fig5|fig6`` writes them (``docs/reproduce.md``). The
library's names these use are importable from here too.
"""

from __future__ import annotations

import numpy as np

from odeflow.analysis.measures import recall_curve
from odeflow.analysis.paper import (  # noqa: F401  (the library names the figures use)
    DECODER_LEVELS,
    LEVEL_T_SAMPLES,
    LEVELS,
    OPTFLOW_ATOL,
    OPTFLOW_METHOD,
    OPTFLOW_RTOL,
    OPTFLOWS,
    RECALL_THRESHOLDS,
    Experiment,
    add_optimizer_flows,
    discrete_ensemble,
    discrete_twins,
    distinct_maps,
    experiment,
    level_predictions,
    optflow_ensemble,
    optimizer_flows,
    optimizer_of,
)
from odeflow.data import DataModel
from odeflow.data.presets import SYN_MEDIUM_SIZES
from odeflow.training.protocol import Protocol

#: Fig. 4: syn-small, zero start, SGD with momentum 0.9, eta_Y = eta_Z = 1.
FIG4 = Protocol(optimizer="sgd", eta_y=1.0, eta_z=1.0, momentum=0.9, init="zero",
                batch_size=128, seq_len=128, steps=100)
#: Fig. 5: the same with Adam at two attention rates (the rates of the paper's
#: figure were lost in extraction; these are ours).
FIG5_ETA_Z = (0.1, 1.0)
#: Fig. 6 grid: attention rates and decoder/attention ratios.
FIG6_ETA_Z = (0.5, 1.0, 2.0, 3.0)
FIG6_RATIO = (1.0, 2.0, 5.0, 10.0)
FIG6 = FIG4.replace(init="uniform")


def fig6_discrete_rows(seeds=10, steps: int = 100, sizes=SYN_MEDIUM_SIZES, eta_zs=FIG6_ETA_Z,
                       ratios=FIG6_RATIO, levels=None) -> list[dict]:
    """The Fig. 6 grid for the deterministic discrete heavy ball (:func:`discrete_ensemble`,
    Level T by default) from the runs' starts (seeds ``0 .. seeds - 1``, the runs' own):
    one row per cell, ``preset, eta_z, ratio, eta_y, seeds, steps``, and per level
    ``discrete_<level>_mean``, ``discrete_<level>_std`` (over the seeds, at ``steps``) and
    ``discrete_<level>_seconds``. No training: the runs' columns are in ``fig6.csv``."""
    levels = {"T": OPTFLOWS["T"]} if levels is None else levels
    rows = []
    for name, data, eta_z, ratio, p in fig6_cells(steps, sizes, eta_zs, ratios):
        H, seconds = discrete_ensemble(data, p, range(seeds), [0, steps], levels)
        row = {"preset": name, "eta_z": eta_z, "ratio": ratio, "eta_y": p.eta_y,
               "seeds": seeds, "steps": steps}
        for level, values in H.items():
            row[f"discrete_{level}_mean"] = float(values[:, -1].mean())
            row[f"discrete_{level}_std"] = float(values[:, -1].std())
            row[f"discrete_{level}_seconds"] = seconds[level]
        rows.append(row)
    return rows


def fig6_cells(steps: int = 100, sizes=SYN_MEDIUM_SIZES, eta_zs=FIG6_ETA_Z, ratios=FIG6_RATIO):
    """The cells of the Fig. 6 grid in order: ``(preset name, DataModel, eta_Z,
    eta_Y/eta_Z, Protocol)`` for ``syn-medium-N x eta_Z x eta_Y/eta_Z`` (the :data:`FIG6`
    protocol at those rates)."""
    for size in sizes:
        name = f"syn-medium-{size}"
        data = DataModel.preset(name)
        for eta_z in eta_zs:
            for ratio in ratios:
                yield (name, data, eta_z, ratio,
                       FIG6.replace(eta_z=eta_z, eta_y=eta_z * ratio, steps=steps))


def fig4(seeds=10, steps: int = 100, progress: bool | None = None) -> Experiment:
    """Fig. 4: syn-small, zero start, SGD (momentum 0.9), ``eta_Y = eta_Z = 1``."""
    return experiment(DataModel.preset("syn-small"), FIG4.replace(steps=steps), seeds,
                      progress=progress)


def fig5(seeds=10, steps: int = 100, progress: bool | None = None) -> list[Experiment]:
    """Fig. 5: the Fig. 4 setting with Adam, one experiment per attention rate."""
    data = DataModel.preset("syn-small")
    return [experiment(data, FIG4.replace(optimizer="adam", eta_z=ez, steps=steps), seeds,
                       progress=progress) for ez in FIG5_ETA_Z]


def fig6_rows(seeds=10, steps: int = 100, sizes=SYN_MEDIUM_SIZES, eta_zs=FIG6_ETA_Z,
              ratios=FIG6_RATIO, progress: bool | None = None,
              same_start: bool = False, optflows=None) -> list[dict]:
    """Fig. 6: final distinct-token entropy over ``syn-medium-N x eta_Z x eta_Y/eta_Z``.

    One row per cell: ``preset, M, eta_z, ratio, eta_y``, the runs' mean and
    standard deviation over seeds (``sgd_mean, sgd_std``), the entropy at the
    start (``initial_mean``), each level's entropy at the mapped flow time
    (``level_E``, ``level_R``, ...; from the zero start, or the mean over the
    seeds' starts with ``same_start``; column ``levels_from``), ``recall``: the
    runs' mean recall at :data:`RECALL_THRESHOLDS` after the last step, the
    optimiser-flow ensemble from the seeds' own starts at the last step
    (``optflow_T_mean``, ``optflow_T_std``, ``optflow_E_mean``, ``optflow_E_std``;
    ``docs/optimisers.md``), wall times (``train_seconds``, ``flow_seconds``,
    ``optflow_<level>_seconds``) and ``time_map`` (the map of ``flow_time``).
    """
    rows = []
    for name, data, eta_z, ratio, p in fig6_cells(steps, sizes, eta_zs, ratios):
        exp = experiment(data, p, seeds, progress=progress, same_start=same_start,
                         optflows=optflows, optflow_steps=[0, steps])
        final = exp.entropy[:, -1]
        row = {"preset": name, "M": data.vocab_size, "eta_z": eta_z, "ratio": ratio,
               "eta_y": p.eta_y, "steps": steps, "flow_time": float(exp.t[-1]),
               "seeds": len(exp.run.seeds), "levels_from": "run start" if
               exp.seconds["same_start"] else "zero",
               "sgd_mean": float(final.mean()),
               "sgd_std": float(final.std()),
               "initial_mean": float(exp.entropy[:, 0].mean())}
        for level, H in exp.level_entropy.items():
            row[f"level_{level}"] = float(H[-1])
        for level, H in exp.optflow_members.items():
            row[f"optflow_{level}_mean"] = float(H[:, -1].mean())
            row[f"optflow_{level}_std"] = float(H[:, -1].std())
        recall = recall_curve(data, exp.run.z_active[:, -1], RECALL_THRESHOLDS)
        row["recall"] = recall.mean(axis=0).tolist()
        row["train_seconds"] = exp.seconds["train"]
        row["flow_seconds"] = exp.seconds["flows"]
        for level in exp.optflow_members:
            row[f"optflow_{level}_seconds"] = exp.seconds[f"optflow_{level}"]
        row["time_map"] = p.time_map     # of flow_time and the level_* columns
        rows.append(row)
    return rows


def trend_summary(rows: list[dict], column: str) -> list[dict]:
    """Per preset: does ``column`` fall with ``eta_Z`` (each ratio) and rise with the ratio?

    Returns one dict per preset with the fraction of adjacent pairs that move
    in the predicted direction along ``eta_Z`` (``falls_with_eta_z``) and
    along ``eta_Y/eta_Z`` (``rises_with_ratio``), and whether every pair does.
    """
    out = []
    for preset in dict.fromkeys(r["preset"] for r in rows):
        cells = [r for r in rows if r["preset"] == preset]
        eta_zs = sorted({r["eta_z"] for r in cells})
        ratios = sorted({r["ratio"] for r in cells})
        grid = np.array([[next(r[column] for r in cells
                               if r["eta_z"] == ez and r["ratio"] == q) for q in ratios]
                         for ez in eta_zs])                          # (eta_z, ratio)
        down_z = np.diff(grid, axis=0) < 0
        up_r = np.diff(grid, axis=1) > 0
        out.append({"preset": preset, "column": column,
                    "falls_with_eta_z": float(down_z.mean()) if down_z.size else float("nan"),
                    "rises_with_ratio": float(up_r.mean()) if up_r.size else float("nan"),
                    "all_fall_with_eta_z": bool(down_z.all()),
                    "all_rise_with_ratio": bool(up_r.all())})
    return out
