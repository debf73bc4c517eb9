"""Benchmark: Level T's cost per right-hand side against N and T (spec section 8).

Prints (not a timed test), for a data model (syn-small by default), the time of
one right-hand side and of one analytic Jacobian of ``flow="finite_t"`` at a
random state, for ``N`` sampled sequences per class and sequence lengths
``T``, beside Level E's. Each sampled sequence is a sub-class of Level E's table
over the active tokens, so the cost should grow linearly in ``N`` and not
depend on ``T`` (a sequence's count vector lives on its class's support,
whatever ``T``).

Run: ``python benchmarks/bench_finite_t.py [--preset syn-small] [--n 16 64 256 1024]
[--seq-len 16 128 1024 1000000] [--repeat 200]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import odeflow
from odeflow.fields import ExactFlow, FiniteTFlow


def per_call(fn, repeat: int) -> float:
    """Best-of-3 mean time of ``fn()`` over ``repeat`` calls, in seconds."""
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="syn-small")
    parser.add_argument("--n", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--seq-len", type=int, nargs="+", default=[16, 128, 1024, 10**6])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    data = odeflow.DataModel.preset(args.preset)
    exact = ExactFlow(data, 1.0, 1.0)
    y = np.random.default_rng(0).normal(size=exact.size)
    rhs_e = per_call(lambda: exact.rhs(0.0, y), args.repeat)
    jac_e = per_call(lambda: exact.jacobian(0.0, y), max(1, args.repeat // 20))
    print(f"{args.preset}: K={data.num_classes}, active tokens L={data.active_tokens.size}, "
          f"state {exact.size}; Level E: rhs {1e6 * rhs_e:.1f} us, jacobian "
          f"{1e3 * jac_e:.2f} ms")
    print(f"{'N':>6s} {'T':>8s} {'sub-classes':>11s} {'rhs [us]':>9s} {'rhs/N [us]':>10s} "
          f"{'jac [ms]':>9s}")
    for N in args.n:
        for T in args.seq_len:
            field = FiniteTFlow(data, 1.0, 1.0, seq_len=T, sample_size=N)
            rhs = per_call(lambda f=field: f.rhs(0.0, y), max(1, args.repeat * 16 // N))
            jac = per_call(lambda f=field: f.jacobian(0.0, y), max(1, args.repeat // N))
            print(f"{N:6d} {T:8d} {field.sample.size:11d} {1e6 * rhs:9.1f} "
                  f"{1e6 * rhs / N:10.2f} {1e3 * jac:9.2f}")


if __name__ == "__main__":
    main()
