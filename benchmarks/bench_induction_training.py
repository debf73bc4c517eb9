"""Speed of the finite-L induction-head training (``odeflow.training.induction``).

The authors' protocol (spec section 10): ``ih-paper`` (d = 3, n = 3, H = 3,
D = 2, alpha = 0.1), ``L = 100``, 9000 training sequences, full-batch gradient
descent. Prints, per sample size: the time to sample and to merge the keys,
the number of merged key entries (what a step works on) and their memory, and
full-batch steps per second (loss and exact gradient, ``loss="code"``; best of
``--repeats``) and the minor page faults per step (fresh arrays of the entries' size fault
in their pages at every step unless the allocator keeps them: the model reuses work
arrays, so this stays near 0; before it did, 2,600-5,700 per step on 9000 sequences or
none, depending on the process's allocation history). A step costs ``O(E (#S + H))`` for
``E`` merged entries plus
``O(H d^(2H))`` for the copier tables, independent of ``L`` beyond the number
of distinct windows per sequence.

Usage::

    PYTHONPATH=. python benchmarks/bench_induction_training.py [--steps 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import resource
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 9000])
    args = parser.parse_args(argv)
    import numpy as np

    from odeflow.training.induction import (
        EmpiricalInduction,
        initial_parameters,
        sample_sequences,
    )

    heads, degree = 3, 2
    subsets = [s for k in range(degree + 1)
               for s in itertools.combinations(range(1, heads + 1), k)]
    print(f"numpy {np.__version__}, python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} cpus; ih-paper (d=3, n=3, H=3, D=2, alpha=0.1), L=100; "
          f"best of {args.repeats} x {args.steps} steps")
    print(f"{'sequences':>9s} {'sample s':>9s} {'merge s':>8s} {'entries':>8s} {'MB':>6s} "
          f"{'steps/s':>8s} {'1e4 steps (min)':>16s} {'faults/step':>11s} "
          f"{'unseen nll targets':>19s}")
    for count in args.sizes:
        t0 = time.perf_counter()
        seqs = sample_sequences(count, 100, vocab_size=3, n_gram=3, alpha=0.1, seed=0)
        t1 = time.perf_counter()
        model = EmpiricalInduction(seqs, heads, subsets, loss="code")
        t2 = time.perf_counter()
        keys = model.keys
        mb = sum(a.nbytes for a in (keys.seq, keys.codes, keys.value, keys.log_count)) / 1e6
        theta = initial_parameters(model)
        model.loss_and_gradient(theta)  # warm-up
        best, faults = float("inf"), 0
        for _ in range(args.repeats):
            start = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(args.steps):
                _, grad = model.loss_and_gradient(theta)
                theta = theta - grad
            elapsed = time.perf_counter() - start
            if elapsed < best:
                best = elapsed
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        rate = args.steps / best
        print(f"{count:>9d} {t1 - t0:>9.3f} {t2 - t1:>8.3f} {keys.seq.size:>8d} {mb:>6.1f} "
              f"{rate:>8.1f} {1e4 / rate / 60:>16.1f} {faults / args.steps:>11.0f} "
              f"{model.unseen_targets:>19d}")


if __name__ == "__main__":
    main()
