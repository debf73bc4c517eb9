"""Time of ``odeflow reproduce fig6`` and what running the seeds together saves.

Prints (not a timed test):

1. One Fig. 6 cell of each vocabulary size (``eta_Z = 1``, ``eta_Y/eta_Z = 2``,
   uniform start, 100 steps, batch 128, ``T = 128``): 10 seeds in one
   ensemble (one array operation per step for all seeds) beside 10 runs of one
   seed each, measured side by side in this process.
2. The whole ``odeflow reproduce fig6 --seeds N`` (64 cells, Level E, Level R
   and Level T beside each), wall time, written to ``--out``.

Usage: ``python benchmarks/bench_reproduce.py [--seeds 10] [--out DIR] [--skip-full]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import odeflow
from odeflow.analysis import paper
from odeflow.cli import main as cli_main
from odeflow.training.protocol import train


def ensemble_vs_single(seeds: int) -> None:
    print(f"1. ensemble of {seeds} seeds vs {seeds} single-seed runs (best of 2)")
    print(f"{'preset':>14} {'M':>4} {'ensemble s':>11} {'singles s':>10} {'ratio':>6}")
    for size in (1, 3, 5, 10):
        data = odeflow.DataModel.preset(f"syn-medium-{size}")
        protocol = paper.FIG6.replace(eta_z=1.0, eta_y=2.0)
        together, alone = [], []
        for _ in range(2):
            t = time.perf_counter()
            train(data, protocol, seeds=seeds, progress=False)
            together.append(time.perf_counter() - t)
            t = time.perf_counter()
            for s in range(seeds):
                train(data, protocol, seeds=[s], progress=False)
            alone.append(time.perf_counter() - t)
        print(f"{'syn-medium-' + str(size):>14} {data.vocab_size:>4} {min(together):>11.2f} "
              f"{min(alone):>10.2f} {min(alone) / min(together):>6.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default="results/reproduce")
    parser.add_argument("--skip-full", action="store_true")
    args = parser.parse_args(argv)
    print(f"odeflow {odeflow.__version__}, numpy {np.__version__}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f}")
    ensemble_vs_single(args.seeds)
    if not args.skip_full:
        print(f"2. odeflow reproduce fig6 --seeds {args.seeds} --out {args.out}")
        t = time.perf_counter()
        cli_main(["reproduce", "fig6", "--seeds", str(args.seeds), "--out", args.out,
                  "--no-progress"])
        print(f"fig6 with {args.seeds} seeds: {time.perf_counter() - t:.1f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
