"""Measure the figures of ``docs/fidelity.md`` (Level T, ``flow="finite_t"``).

Three parts, each printing its table and writing JSON under ``docs/fidelity/``:

``convergence``
    Level T against Level E on syn-small as ``T`` grows, for several ``N``
    (:func:`odeflow.analysis.distance_to_exact`), and Level T's error in ``N``
    (:func:`odeflow.analysis.sample_size_error`) over ``T``.
``protocol``
    The paper's Fig. 4 protocol on syn-small (zero init, SGD momentum 0.9,
    batch 128, ``T = 128``, ``eta_Y = eta_Z = 1``, 100 steps, 10 seeds): the logit
    gap of Level E, Level T and Level R to the ensemble mean, step ``k`` read at the
    warm-up flow time ``t_k = [k - mu (1 - mu^k)/(1 - mu)]/(1 - mu)``
    (:func:`odeflow.analysis.distance_to_sgd`).
``map``
    The fidelity map: for each preset, each ``T`` and each ``(eta_Y, eta_Z)`` of a
    grid spanning ``eta_Y / eta_Z`` from 0.1 to 10, the gap of each level to the
    SGD ensemble mean at the paper's horizon (100 steps of momentum-0.9 SGD,
    flow time 1000), and the distinct-token entropy of each level at that
    horizon, at 10x and at 100x it, from which the Fig. 6 trend is scored.
    Writes ``docs/fidelity/fidelity_map.png``.

Run: ``python docs/make_fidelity.py convergence|protocol|map [--presets ...]
[--seeds 10] [--samples-per-class 512]``. The map takes tens of minutes on a
2-core machine; the default test suite never runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

import odeflow
from odeflow.analysis import (
    distance_to_exact,
    distance_to_sgd,
    flow_time,
    sample_size_error,
)
from odeflow.analysis.measures import distinct_entropy
from odeflow.io import atomic_write_text
from odeflow.training import sgd_ensemble

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the sibling compact_png.py
from compact_png import compact_png  # noqa: E402

OUT = Path(__file__).parent / "fidelity"
SEQ_LENS = (16, 32, 64, 128, 256, 1024)
RATES = (0.5, 1.0, 2.0, 5.0)   # eta_Y and eta_Z each: eta_Y / eta_Z from 0.1 to 10
HORIZON_STEPS = 100
MOMENTUM = 0.9
BATCH = 128


def write(out: Path, name: str, payload) -> None:
    out.mkdir(exist_ok=True)
    atomic_write_text(out / name, json.dumps(payload, separators=(",", ":")))


# ------------------------------------------------------------------ convergence
def convergence(args) -> None:
    data = odeflow.DataModel.preset("syn-small")
    rows = []
    print("Level T vs Level E, syn-small, eta_Y = eta_Z = 1, t in [0, 300]")
    print(f"{'N':>5s} {'T':>9s} {'max|zT-zE|':>11s} {'rel.':>8s} {'*sqrt(TN)':>10s}")
    for N in (4, 16, 64):
        for r in distance_to_exact(data, 1.0, 1.0, 300.0, (10**3, 10**4, 10**5, 10**6), N):
            rows.append(r)
            print(f"{N:5d} {r['seq_len']:9d} {r['z_gap']:11.3e} {r['z_gap_relative']:8.2e} "
                  f"{r['scaled_gap']:10.3f}")
    errors = []
    print("\nerror in N: max|z_N - z_2N| (nested samples), syn-small, eta 1/1, t in [0, 1e3]")
    print(f"{'T':>6s} {'N':>6s} {'max diff':>9s} {'rel.':>8s}")
    for T in SEQ_LENS:
        for N in (64, 256, 1024):
            e = sample_size_error(data, 1.0, 1.0, 1e3, T, N)
            errors.append({"seq_len": T, "samples_per_class": N,
                           "max_difference": e.max_difference, "relative": e.relative})
            print(f"{T:6d} {N:6d} {e.max_difference:9.4f} {e.relative:8.4f}")
    write(args.out, "convergence.json", {"distance_to_exact": rows, "sample_size_error": errors})


# --------------------------------------------------------------------- protocol
def protocol(args) -> None:
    data = odeflow.DataModel.preset("syn-small")
    out = []
    print(f"syn-small (M = {data.vocab_size}), zero init, SGD momentum {MOMENTUM}, batch "
          f"{BATCH}, T = 128, eta_Y = eta_Z = 1, {HORIZON_STEPS} steps, {args.seeds} seeds")
    print(f"{'N':>5s} {'gap E':>8s} {'gap T':>8s} {'gap R':>8s} {'final E':>8s} "
          f"{'final T':>8s} {'final R':>8s} {'s.e.':>7s} {'range':>7s}")
    for N in (64, 256, 1024):
        d = distance_to_sgd(data, 1.0, 1.0, HORIZON_STEPS, 128, batch_size=BATCH,
                            seeds=args.seeds, momentum=MOMENTUM, sample_size=N,
                            levels=("exact", "finite_t", "reduced"), record=1)
        s = d.summary()
        s["z_gap_over_time"] = {k: v.tolist() for k, v in d.z_gap.items()}
        s["t"] = d.t.tolist()
        out.append(s)
        print(f"{N:5d} {s['z_gap_exact']:8.4f} {s['z_gap_finite_t']:8.4f} "
              f"{s['z_gap_reduced']:8.4f} {s['z_gap_exact_final']:8.4f} "
              f"{s['z_gap_finite_t_final']:8.4f} {s['z_gap_reduced_final']:8.4f} "
              f"{s['standard_error']:7.4f} {s['z_range']:7.4f}")
    write(args.out, "protocol.json", out)


# -------------------------------------------------------------------------- map
def trend_shares(H: np.ndarray) -> tuple[float, float]:
    """Shares of grid steps in the Fig. 6 direction for ``H[i_y, i_z]``.

    ``eta_Z`` share: steps ``eta_Z -> next eta_Z`` at fixed ``eta_Y`` where the
    entropy falls; ``eta_Y`` share: steps ``eta_Y -> next eta_Y`` at fixed
    ``eta_Z`` where it rises.
    """
    return float(np.mean(np.diff(H, axis=1) < 0)), float(np.mean(np.diff(H, axis=0) > 0))


def map_preset(name: str, args) -> dict:
    data = odeflow.DataModel.preset(name)
    n = len(RATES)
    horizons = [flow_time(HORIZON_STEPS, MOMENTUM) * f for f in (1, 10, 100)]
    steps_t = flow_time(np.arange(HORIZON_STEPS + 1), MOMENTUM)
    t_eval = np.unique(np.concatenate([steps_t, horizons]))
    at = [int(np.searchsorted(t_eval, h)) for h in horizons]
    n_sgd = steps_t.size
    common = {"t_span": (0.0, horizons[-1]), "t_eval": t_eval, "progress": False}
    result = {"preset": name, "vocab_size": data.vocab_size, "classes": data.num_classes,
              "rates": list(RATES), "horizons": horizons, "seeds": args.seeds,
              "samples_per_class": args.samples_per_class, "rows": []}
    flows = {}
    for level in ("exact", "reduced"):
        H = np.empty((3, n, n))
        for iy, ey in enumerate(RATES):
            for iz, ez in enumerate(RATES):
                tr = odeflow.solve(data, flow=level, eta_y=ey, eta_z=ez, **common)
                flows[level, iy, iz] = tr.z_active[:n_sgd]
                H[:, iy, iz] = distinct_entropy(data, tr.z_active[at])
        result[f"entropy_{level}"] = H.tolist()
        result[f"trend_{level}"] = [trend_shares(h) for h in H]
        print(f"{name} {level}: trend shares (eta_Z, eta_Y) at 1x/10x/100x "
              f"{result[f'trend_{level}']}", flush=True)
    for T in args.seq_lens:
        start = time.perf_counter()
        H_t = np.empty((3, n, n))
        H_sgd = np.empty((n, n))
        gaps = {k: np.empty((n, n)) for k in ("exact", "finite_t", "reduced", "se", "range")}
        for iy, ey in enumerate(RATES):
            for iz, ez in enumerate(RATES):
                tr = odeflow.solve(data, flow="finite_t", eta_y=ey, eta_z=ez, seq_len=T,
                                   sample_size=args.samples_per_class, **common)
                H_t[:, iy, iz] = distinct_entropy(data, tr.z_active[at])
                ens = sgd_ensemble(data, ey, ez, HORIZON_STEPS, BATCH, T, seeds=args.seeds,
                                   optimizer=odeflow.Momentum(MOMENTUM), record=1,
                                   progress=False)
                members = np.stack([m.z_active for m in ens.trajectories])
                mean = ens.mean_logits_active
                H_sgd[iy, iz] = float(distinct_entropy(data, members[:, -1]).mean())
                se = members.std(axis=0, ddof=1) / math.sqrt(members.shape[0])
                gaps["se"][iy, iz] = float(se.max())
                gaps["range"][iy, iz] = float(np.ptp(mean - mean[0]))
                for level, z in (("exact", flows["exact", iy, iz]),
                                 ("reduced", flows["reduced", iy, iz]),
                                 ("finite_t", tr.z_active[:n_sgd])):
                    gaps[level][iy, iz] = float(np.abs(z - mean).max())
        row = {"seq_len": T, "entropy_finite_t": H_t.tolist(), "entropy_sgd": H_sgd.tolist(),
               "trend_finite_t": [trend_shares(h) for h in H_t],
               "trend_sgd": trend_shares(H_sgd),
               **{f"gap_{k}": v.tolist() for k, v in gaps.items()}}
        if T in args.long_sgd:
            H_long = np.empty((n, n))
            for iy, ey in enumerate(RATES):
                for iz, ez in enumerate(RATES):
                    ens = sgd_ensemble(data, ey, ez, 10 * HORIZON_STEPS, BATCH, T,
                                       seeds=args.seeds, optimizer=odeflow.Momentum(MOMENTUM),
                                       progress=False)
                    members = np.stack([m.z_active[-1] for m in ens.trajectories])
                    H_long[iy, iz] = float(distinct_entropy(data, members).mean())
            row["entropy_sgd_10x"] = H_long.tolist()
            row["trend_sgd_10x"] = trend_shares(H_long)
            print(f"{name} T={T}: SGD trend at 10x {row['trend_sgd_10x']}", flush=True)
        row["wall_time"] = time.perf_counter() - start
        result["rows"].append(row)
        rel = {k: float(np.median(gaps[k] / gaps["range"])) for k in ("exact", "finite_t",
                                                                        "reduced")}
        print(f"{name} T={T}: median gap/range E {rel['exact']:.3f} T {rel['finite_t']:.3f} "
              f"R {rel['reduced']:.3f}; trend SGD {row['trend_sgd']}, Level T "
              f"{row['trend_finite_t']} ({row['wall_time']:.0f} s)", flush=True)
        write(args.out, f"map_{name}.json", result)
    return result


def plot_map(results: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, len(results), figsize=(4.6 * len(results), 9.5),
                             squeeze=False, sharex=True)
    colours = {"exact": "C0", "finite_t": "C1", "reduced": "C2", "sgd": "k"}
    labels = {"exact": "Level E", "finite_t": "Level T", "reduced": "Level R",
              "sgd": "SGD"}
    seq_lens = sorted({r["seq_len"] for res in results for r in res["rows"]})
    x_inf = len(seq_lens)
    ticks = [str(T) for T in seq_lens] + ["inf"]
    for col, res in enumerate(results):
        rows = sorted(res["rows"], key=lambda r: r["seq_len"])
        xs = np.array([seq_lens.index(r["seq_len"]) for r in rows])
        x = np.append(xs, x_inf)
        ax = axes[0, col]
        for level in ("exact", "finite_t", "reduced"):
            rel = [np.asarray(r[f"gap_{level}"]) / np.asarray(r["gap_range"]) for r in rows]
            med = [np.median(v) for v in rel]
            ax.plot(xs, med, "o-", color=colours[level], label=labels[level])
            ax.fill_between(xs, [v.min() for v in rel], [v.max() for v in rel],
                            color=colours[level], alpha=0.15)
        se = [np.median(np.asarray(r["gap_se"]) / np.asarray(r["gap_range"])) for r in rows]
        ax.plot(xs, se, ":", color="k", label="SGD mean s.e.")
        ax.set_yscale("log")
        ax.set_title(f"{res['preset']} (M = {res['vocab_size']}, K = {res['classes']})")
        if col == 0:
            ax.set_ylabel("max |z_level - z_SGD| / range\n(flow time 1000; median, min-max)")
        ax.legend(fontsize=7)
        for row_i, (k, name) in enumerate(((0, "eta_Z: entropy falls"),
                                           (1, "eta_Y: entropy rises")), start=1):
            ax = axes[row_i, col]
            ax.plot(xs, [r["trend_sgd"][k] for r in rows], "s-", color="k",
                    label=f"SGD ({res['seeds']} seeds) @1x")
            long = [(x[i], r["trend_sgd_10x"][k]) for i, r in enumerate(rows)
                    if "trend_sgd_10x" in r]
            if long:
                ax.plot([p[0] for p in long], [p[1] for p in long], "s", color="k",
                        markerfacecolor="none", markersize=9, label="SGD @10x")
            for h, style in enumerate(("-", "--", ":")):
                mult = ("1x", "10x", "100x")[h]
                t_shares = [r["trend_finite_t"][h][k] for r in rows] \
                    + [res["trend_exact"][h][k]]
                ax.plot(x, t_shares, style, marker="o", color=colours["finite_t"],
                        label=f"Level T {mult}")
                ax.plot(x_inf, res["trend_exact"][h][k], marker="D", linestyle="none",
                        color=colours["exact"], label=f"Level E {mult}" if h == 0 else None)
                ax.axhline(res["trend_reduced"][h][k], color=colours["reduced"],
                           linestyle=style, linewidth=1,
                           label=f"Level R {mult}")
            ax.set_ylim(-0.05, 1.05)
            ax.axhline(0.5, color="0.8", linewidth=0.8)
            if col == 0:
                ax.set_ylabel(f"share of steps in the Fig. 6 direction\n({name})")
            if row_i == 2:
                ax.set_xlabel("sequence length T (inf = Level E)")
            if col == len(results) - 1 and row_i == 1:
                ax.legend(fontsize=6, ncol=2)
    for ax in axes[-1]:
        ax.set_xticks(np.arange(x_inf + 1), ticks)
    fig.tight_layout()
    out.mkdir(exist_ok=True)
    fig.savefig(out / "fidelity_map.png", dpi=90)
    compact_png(out / "fidelity_map.png")
    print(f"wrote {out / 'fidelity_map.png'}")


def fmt_shares(shares) -> str:
    """``(eta_Z share, eta_Y share)`` as ``0.92/0.67``."""
    return f"{shares[0]:.2f}/{shares[1]:.2f}"


def summary(args) -> None:
    """Markdown tables of the map JSONs (for docs/fidelity.md)."""
    for name in args.presets:
        res = json.loads((args.out / f"map_{name}.json").read_text())
        print(f"\n{name} (M = {res['vocab_size']}, K = {res['classes']}, N = "
              f"{res['samples_per_class']}, {res['seeds']} seeds)\n")
        print("| T | gap E | gap T | gap R | s.e. | SGD 1x | SGD 10x | Level T 1x | 10x | 100x |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in sorted(res["rows"], key=lambda r: r["seq_len"]):
            rng = np.asarray(r["gap_range"])
            med = {k: float(np.median(np.asarray(r[f"gap_{k}"]) / rng))
                   for k in ("exact", "finite_t", "reduced", "se")}
            long = fmt_shares(r["trend_sgd_10x"]) if "trend_sgd_10x" in r else "-"
            print(f"| {r['seq_len']} | {med['exact']:.3f} | {med['finite_t']:.3f} | "
                  f"{med['reduced']:.3f} | {med['se']:.3f} | {fmt_shares(r['trend_sgd'])} | "
                  f"{long} | " + " | ".join(fmt_shares(x) for x in r["trend_finite_t"]) + " |")
        for level in ("exact", "reduced"):
            print(f"| {level} | | | | | | | " + " | ".join(
                fmt_shares(x) for x in res[f"trend_{level}"]) + " |")


def fidelity_map(args) -> None:
    results = []
    for name in args.presets:
        path = args.out / f"map_{name}.json"
        if args.reuse and path.exists():
            results.append(json.loads(path.read_text()))
            continue
        results.append(map_preset(name, args))
    plot_map(results, args.out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("convergence", "protocol", "map", "summary"))
    parser.add_argument("--presets", nargs="+", default=["syn-small"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--samples-per-class", type=int, default=1024)
    parser.add_argument("--seq-lens", type=int, nargs="+", default=list(SEQ_LENS))
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (docs/fidelity)")
    parser.add_argument("--long-sgd", type=int, nargs="*", default=[128], metavar="T",
                        help="map: also run SGD to 10x the horizon (1000 steps) at these T")
    parser.add_argument("--reuse", action="store_true",
                        help="map: reuse docs/fidelity/map_<preset>.json when present")
    args = parser.parse_args()
    {"convergence": convergence, "protocol": protocol, "map": fidelity_map,
     "summary": summary}[args.part](args)


if __name__ == "__main__":
    main()
