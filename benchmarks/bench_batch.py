"""Benchmark: a 20 x 20 log grid of (eta_Y, eta_Z) of the exact flow, batched vs separate.

Prints (not a timed test): on ``syn-small`` (the preset of this checkout), the
exact flow from ``Y(0) = Z(0) = 0`` to ``t = 1e4`` at 400 points
``eta_Y, eta_Z`` in ``geomspace(0.1, 10, 20)`` each, ``rtol = 1e-8``,
``atol = 1e-10``, output at ``t = 1e2, 1e3, 1e4``:

1. wall time of :func:`odeflow.solve_batch` (one stacked state, ``method="auto"``);
2. wall time of 400 separate :func:`odeflow.solve` calls (``method="auto"``);
3. the largest difference of the logits and of the decoder between the two.

BLAS is limited to one thread (threadpoolctl; ``solve_batch``'s default) for
both; the batch is also timed with the library's default threads. The
process is pinned to one core with ``--one-core`` (``os.sched_setaffinity``).

Run: ``python benchmarks/bench_batch.py [--one-core] [--points 20]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import odeflow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20, help="grid points per axis (20)")
    parser.add_argument("--t-end", type=float, default=1e4)
    parser.add_argument("--one-core", action="store_true", help="pin to one CPU core")
    parser.add_argument("--method", default="auto")
    args = parser.parse_args()
    if args.one_core:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    data = odeflow.DataModel.preset("syn-small")
    axis = np.geomspace(0.1, 10.0, args.points)
    params = [(ey, ez) for ey in axis for ez in axis]
    t_eval = [0.0, args.t_end / 100, args.t_end / 10, args.t_end]
    common = {"flow": "exact", "t_span": (0.0, args.t_end), "t_eval": t_eval,
              "rtol": 1e-8, "atol": 1e-10, "method": args.method, "progress": False}
    start = time.perf_counter()
    threaded = odeflow.solve_batch(data, params, blas_threads=None, **common)
    t_threaded = time.perf_counter() - start
    start = time.perf_counter()
    batch = odeflow.solve_batch(data, params, **common)  # one BLAS thread (the default)
    t_batch = time.perf_counter() - start
    with threadpool_limits(1):
        start = time.perf_counter()
        single = [odeflow.solve(data, eta_y=ey, eta_z=ez, **common) for ey, ez in params]
        t_single = time.perf_counter() - start
    dz = max(np.abs(a.z_carried - b.z_carried).max() for a, b in zip(batch, single, strict=True))
    dy = max(np.abs(a.decoder_lumped - b.decoder_lumped).max()
             for a, b in zip(batch, single, strict=True))
    s = batch[0].stats
    print(f"syn-small (M = {data.vocab_size}), exact flow, {len(params)} points "
          f"(eta_Y, eta_Z in geomspace(0.1, 10, {args.points})), t_end = {args.t_end:g}, "
          f"one BLAS thread{', one core' if args.one_core else ''}")
    print(f"batched : {t_batch:7.2f} s  ({s['method']}, {s['nfev']} rhs of the stacked "
          f"state of {s['n_state'] * len(params)} entries)")
    print(f"separate: {t_single:7.2f} s  (methods {sorted({t.stats['method'] for t in single})}, "
          f"{sum(t.stats['nfev'] for t in single)} rhs in all)")
    same = max(np.abs(a.z_carried - b.z_carried).max()
               for a, b in zip(threaded, batch, strict=True))
    print(f"batched, BLAS default threads: {t_threaded:7.2f} s (max |dz| to one thread "
          f"{same:.1e})")
    print(f"speed-up: {t_single / t_batch:7.1f}x")
    print(f"max |z_batch - z_single| = {dz:.2e}, max |Y_batch - Y_single| = {dy:.2e}")


if __name__ == "__main__":
    main()
