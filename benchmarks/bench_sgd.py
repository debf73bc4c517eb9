"""Throughput of SGD training (``odeflow.training.train_sgd``) on the presets.

Prints steps per second for single runs and for an 8-seed ensemble (runs that
advance together) on ``shared-query-small`` and ``shared-query-medium``. The cost of a step is
``O(B T + B K L)`` and independent of the vocabulary size ``M`` (lumped state).

The matrix products of a step are small (``B x L`` by ``L x R``); on a busy
machine a multi-threaded BLAS can spend more time waking threads than
multiplying, so ``--blas-threads 1`` (set before numpy is imported) is offered
for comparison.

Usage::

    PYTHONPATH=. python benchmarks/bench_sgd.py [--steps 2000] [--repeats 3] [--blas-threads N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

#: (batch size, sequence length) pairs measured on every preset.
SHAPES = ((32, 64), (128, 256))


def steps_per_second(run, steps: int, repeats: int) -> float:
    """Best of ``repeats`` timings of ``run(steps)``, as steps per second."""
    run(min(steps, 50))  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        best = min(best, time.perf_counter() - start)
    return steps / best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blas-threads", type=int, metavar="N",
                        help="set OPENBLAS/OMP/MKL_NUM_THREADS to N before importing numpy")
    args = parser.parse_args(argv)
    if args.blas_threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.blas_threads)
    import numpy as np

    from odeflow import DataModel
    from odeflow.training import sgd_ensemble, train_sgd

    print(f"numpy {np.__version__}, python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cpus, BLAS threads "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; best of {args.repeats}, "
          f"{args.steps} steps")
    print(f"{'preset':>10s} {'M':>5s} {'L':>4s} {'batch':>5s} {'T':>4s} "
          f"{'single run steps/s':>19s} {'8-seed ensemble steps/s (x8 runs)':>34s}")
    for name in ("shared-query-small", "shared-query-medium"):
        data = DataModel.preset(name)
        for B, T in SHAPES:
            def single(n, B=B, T=T, data=data):
                train_sgd(data, 1.0, 5.0, n, B, T, record=n, progress=False)

            def ensemble(n, B=B, T=T, data=data):
                sgd_ensemble(data, 1.0, 5.0, n, B, T, seeds=8, record=n,
                             progress=False)

            one = steps_per_second(single, args.steps, args.repeats)
            eight = steps_per_second(ensemble, max(args.steps // 8, 10), args.repeats)
            print(f"{name:>10s} {data.vocab_size:5d} {data.active_tokens.size:4d} {B:5d} "
                  f"{T:4d} {one:19.0f} {eight:20.0f} ({8 * eight:.0f} run-steps/s)")


if __name__ == "__main__":
    main()
