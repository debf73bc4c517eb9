"""Cost of the induction-head population flow (spec section 10; issue 23 speed goal).

Prints
- the right-hand-side cost (min / median of repeated calls, one BLAS thread) of the
  population flow (nll, code) and the exact-copier flow on ``ih-paper``;
- the same with the window products done densely (``P`` as a ``W x N_pi d`` matrix,
  ``4 W**2 N_pi d`` flops: the code before issue 23) against split by the next token's
  context (``P = mu pi``, ``4 W**2 N_pi`` flops plus ``4 W N_pi d**n``), side by side;
- how that cost grows with ``N_pi``, ``d`` and ``H`` (``W = d**(2H-1)`` windows);
- the ``ih-paper`` solve to ``t = 1e4`` with each integrator (nfev, njev, the
  right-hand sides spent on finite-difference Jacobians, wall and CPU time, final ``a``,
  the top subset and its ``p_S``);
- the loss at fixed parameters (the init and the end of the default solve) for nested
  kernel samples ``N_pi = 16 .. 2048`` (the first kernels of a larger sample are the
  smaller sample), its change when ``N_pi`` halves, and the standard error
  ``std_k(loss_k) / sqrt(N_pi)`` of the sample mean.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_induction.py [--quick]``.
Wall times depend on the machine's load; CPU times less so; nfev not at all.
``--n-pi N`` solves with ``N`` kernels instead of the preset's; ``--goal R`` only times
the goal's solve (``odeflow.solve`` with its defaults) ``R`` times; ``--methods [LEVEL ...]``
prices each integrator at the default tolerances against a tight solve (the choice of
``method="auto"``); ``--tolerances`` prices
looser tolerances than the defaults: CPU time, nfev and the largest error against a
tight solve (``rtol = 1e-10``, ``atol = 1e-12``) on ``ih-paper`` and on ``ih-point``
(whose ``c_(1,2)`` dips to about ``1e-17`` and recovers), side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import odeflow
from odeflow.data.induction import InductionData
from odeflow.fields.induction import CopierFlow, PopulationFlow
from odeflow.fields.induction.population import WindowLaws, window_loss


def rhs_cost(field, reps: int = 30) -> tuple[float, float, float]:
    """(min, median) wall milliseconds and min CPU milliseconds of one right-hand side
    at the init (CPU time is the steadier figure on a shared machine)."""
    y = field.initial_state()
    field.rhs(0.0, y)
    times, cpu = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), time.process_time()
        field.rhs(0.0, y)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return 1e3 * min(times), 1e3 * float(np.median(times)), 1e3 * min(cpu)


def dense(field):
    """``field`` with its window products done densely (no context split)."""
    field.windows = WindowLaws(field.data.window_laws())
    return field


def paper(num_kernels=None) -> InductionData:
    base = InductionData.preset("ih-paper")
    if num_kernels is None:
        return base
    return InductionData(3, 3, 3, 2, alpha=base.alpha, num_kernels=num_kernels,
                         seed=base.seed)


def per_kernel_losses(field, y) -> np.ndarray:
    """The loss of each kernel of the sample at the flat state ``y``."""
    parts = field.split(y)
    c, w, a = parts["c"], parts["w"], parts["a"]
    p = c * c / np.dot(c, c)
    _, _, _, vhat = field.features(w)
    grams = vhat @ vhat.transpose(0, 2, 1)
    kernel = np.zeros_like(grams[0])
    for weight, s in zip(p, field.subsets, strict=True):
        term = np.full_like(kernel, weight)
        for h in s:
            term = term * grams[h - 1]
        kernel += term
    laws = field.data.window_laws()
    out = []
    for law in laws:
        one = WindowLaws(law[None], context=field.data.n_gram - 1)
        out.append(window_loss(one, kernel, a, field.loss_name, gradient=False)[0])
    return np.array(out)


def split_solve(data) -> dict:
    """CPU seconds and calls of the right-hand sides and of the output losses in one
    default solve to ``t = 1e4`` (a timed subclass swapped in for the flow)."""
    from odeflow.fields.induction import INDUCTION_FLOWS

    spent = {"total": [0.0, 1], "rhs": [0.0, 0], "loss": [0.0, 0]}

    def timed(method):
        def wrapper(self, *args):
            start = time.process_time()
            out = method(self, *args)
            spent[method.__name__][0] += time.process_time() - start
            spent[method.__name__][1] += 1
            return out
        return wrapper

    class Timed(PopulationFlow):
        rhs = timed(PopulationFlow.rhs)
        loss = timed(PopulationFlow.loss)

    INDUCTION_FLOWS["population"] = Timed
    try:
        start = time.process_time()
        odeflow.solve(data, flow="population", t_span=(0.0, 1e4), progress=False)
        spent["total"][0] = time.process_time() - start
    finally:
        INDUCTION_FLOWS["population"] = PopulationFlow
    return {k: tuple(v) for k, v in spent.items()}


def main(quick: bool, n_pi=None) -> None:
    data = paper(n_pi)
    print(f"ih-paper: {data!r}")
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.1f}" for x in os.getloadavg())
          + f" on {os.cpu_count()} CPUs (wall times grow with it; CPU times much less)")
    print("\n## right-hand side, ih-paper (ms: wall min / wall median / CPU min, of 30)")
    for label, field in (("population nll", PopulationFlow(data)),
                         ("population code", PopulationFlow(data, loss="code")),
                         ("copier nll", CopierFlow(data))):
        lo, med, cpu = rhs_cost(field)
        print(f"{label:18s} {lo:8.2f} {med:8.2f} {cpu:8.2f}")

    print("\n## window products dense (before issue 23) vs split by context, alternating "
          "(ms: CPU min / CPU median of 5 x 10)")
    fields = {"dense": dense(PopulationFlow(data)), "context": PopulationFlow(data)}
    cpu = {k: [] for k in fields}
    for _ in range(5):
        for k, field in fields.items():
            cpu[k].append(rhs_cost(field, reps=10)[2])
    for k, values in cpu.items():
        print(f"{k:18s} {min(values):8.2f} {float(np.median(values)):8.2f}")
    print(f"ratio dense / context (CPU min): {min(cpu['dense']) / min(cpu['context']):.2f}")

    print("\n## growth of the population rhs (ms: wall min / wall median / CPU min)")
    print(f"{'case':28s} {'W':>6s} {'min':>8s} {'median':>8s} {'cpu':>8s}")
    cases = [(f"N_pi={n}", paper(n)) for n in (32, 64, 128, 256, 512)]
    cases += [(f"d={d}, H=3, N_pi=16", InductionData(d, 3, 3, 2, alpha=0.1, num_kernels=16))
              for d in (2, 3, 4)]
    cases += [(f"d=2, H={h}, N_pi=16", InductionData(2, 3, h, 2, alpha=0.1, num_kernels=16))
              for h in (2, 3, 4, 5)]
    for label, model in cases:
        lo, med, cpu = rhs_cost(PopulationFlow(model), reps=10)
        print(f"{label:28s} {model.vocab_size ** model.window_length:6d} {lo:8.2f} {med:8.2f} "
              f"{cpu:8.2f}")

    print("\n## ih-paper population solve to t = 1e4 (rtol 1e-8, atol 1e-10; BDF's and "
          "Radau's finite-difference Jacobians are the rhs outside nfev, LSODA counts its "
          "own in nfev)")
    methods = ("BDF", "LSODA") if quick else ("BDF", "LSODA", "Radau", "RK45")
    budget = {"RK45": 5000}  # explicit: stiff (the c-rates ~ a / sum c^2); stop it early
    ends = {}
    for method in methods:
        cpu = time.process_time()
        try:
            traj = odeflow.solve(data, flow="population", t_span=(0.0, 1e4), method=method,
                                 progress=False,
                                 max_nfev=budget.get(method, 20_000))
        except odeflow.SolveError as exc:
            print(f"{method:6s} stopped: {str(exc)[:120]}")
            continue
        cpu = time.process_time() - cpu
        top, p = traj.top_subset()
        s = traj.stats
        print(f"{method:6s} nfev {s['nfev']:6d} njev {s['njev']:4d} (+{s['rhs_calls'] - s['nfev']} "
              f"rhs outside nfev) wall {s['wall_time']:7.2f} s "
              f"CPU {cpu:7.2f} s (with the loss at {traj.t.size} output times) "
              f"a(1e4) {traj.a[-1]:.4f} loss {traj.loss[-1]:.5f} top {top} p_S {p:.6f}")
        ends[method] = traj

    print("\n## where the BDF solve spends (CPU timers around rhs and loss)")
    spent = split_solve(data)
    total = spent.pop("total")[0]
    print(f"solve  {total:7.2f} s CPU")
    for key, (seconds, calls) in spent.items():
        print(f"{key:6s} {seconds:7.2f} s CPU ({100 * seconds / total:4.1f} %) in {calls:5d} "
              f"calls, {1e3 * seconds / calls:6.2f} ms each")

    print("\nload average now: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    print("\n## N_pi: loss at fixed parameters, nested samples (seed of ih-paper)")
    reference = ends.get("BDF") or next(iter(ends.values()))
    states = {"init": reference.parameters(0), "t=1e2": reference.parameters(
        int(np.searchsorted(reference.t, 1e2))), "t=1e4": reference.parameters(-1)}
    sizes = (16, 32, 64, 128, 256, 512, 1024) if quick else (16, 32, 64, 128, 256, 512,
                                                             1024, 2048)
    big = PopulationFlow(paper(sizes[-1]))
    losses = {k: per_kernel_losses(big, y) for k, y in states.items()}
    print(f"{'N_pi':>6s} " + " ".join(f"{k:>22s}" for k in states))
    print(f"{'':6s} " + " ".join(f"{'loss  dHalf  stderr':>22s}" for _ in states))
    for n in sizes:
        cells = []
        for k in states:
            mean = losses[k][:n].mean()
            half = abs(mean - losses[k][:n // 2].mean()) if n > sizes[0] else float("nan")
            err = losses[k][:n].std(ddof=1) / np.sqrt(n)
            cells.append(f"{mean:.4f} {half:.4f} {err:.4f}")
        print(f"{n:6d} " + " ".join(f"{c:>22s}" for c in cells))


def goal_solve(repeats: int, n_pi=None) -> None:
    """Only the goal's call, ``odeflow.solve(ih-paper, flow="population", t_span=(0, 1e4))``
    with its defaults, ``repeats`` times: wall and CPU seconds, nfev, njev, load."""
    data = paper(n_pi)
    for rep in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        traj = odeflow.solve(data, flow="population", t_span=(0.0, 1e4), progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"repeat {rep}: wall {wall:6.2f} s CPU {cpu:6.2f} s nfev {traj.stats['nfev']} "
              f"njev {traj.stats['njev']} a(1e4) {traj.a[-1]:.10f} load average "
              f"{os.getloadavg()[0]:.2f}", flush=True)


def errors_against(traj, ref) -> str:
    """The largest errors of ``traj`` against ``ref`` over their output times, as printed:
    relative in ``a``, absolute in ``p_S`` and in the loss."""
    err_a = np.max(np.abs(traj.a - ref.a) / np.abs(ref.a))
    err_p = np.max(np.abs(traj.subset_weights - ref.subset_weights))
    err_loss = np.max(np.abs(traj.loss - ref.loss))
    return f"{err_a:14.2e} {err_p:12.2e} {err_loss:13.2e}"


#: (rtol, atol) pairs priced by ``--tolerances``; the first is the solve's default.
TOLERANCES = ((1e-8, 1e-10), (1e-7, 1e-9), (1e-6, 1e-8), (1e-6, 1e-10), (1e-5, 1e-7))


def tolerance_cost() -> None:
    """CPU seconds, nfev, njev and the largest errors (relative in ``a``, absolute in
    ``p_S`` and the loss, over the default output times) of each :data:`TOLERANCES`
    against a tight solve, for ``ih-paper`` and ``ih-point`` to ``t = 1e4`` (the default
    method)."""
    for name in ("ih-paper", "ih-point"):
        data = InductionData.preset(name)
        ref = odeflow.solve(data, flow="population", t_span=(0.0, 1e4), rtol=1e-10,
                            atol=1e-12, progress=False)
        last = {s: i for i, s in enumerate(ref.subsets)}
        top = max(last, key=lambda s: ref.subset_weights[-1, last[s]])
        print(f"{name}: tight solve nfev {ref.stats['nfev']}, a(1e4) {ref.a[-1]:.8f}, "
              f"top subset {top} p = {ref.subset_weights[-1, last[top]]:.6f}")
        print("  rtol    atol    CPU s   nfev njev  max rel err a  max err p_S  max err loss"
              "  p_top(1e4)")
        for rtol, atol in TOLERANCES:
            cpu = time.process_time()
            traj = odeflow.solve(data, flow="population", t_span=(0.0, 1e4), rtol=rtol,
                                 atol=atol, progress=False)
            cpu = time.process_time() - cpu
            print(f"  {rtol:.0e} {atol:.0e} {cpu:7.2f} {traj.stats['nfev']:6d} "
                  f"{traj.stats['njev']:4d} {errors_against(traj, ref)}"
                  f"  {traj.subset_weights[-1, last[top]]:.6f}", flush=True)


#: Integrators priced by ``--methods`` at the solve's default tolerances.
METHODS = ("LSODA", "BDF", "RK45", "Radau")


def method_cost(levels) -> None:
    """CPU seconds, nfev, njev and the largest errors (as :func:`tolerance_cost`) of each
    of :data:`METHODS` at the default tolerances, for each level in ``levels`` on
    ``ih-paper`` and ``ih-point`` to ``t = 1e4`` (joint flow from the preset's init) and
    for the staged schedule ``c -> w -> a`` (2000, 100, 1000) of the population flow.
    The reference is Radau at ``rtol = 1e-11`` (``finite_l``: BDF at ``1e-10``, a Radau
    solve of 9000 sequences costs minutes); ``finite_l`` uses ``loss="code"`` (the
    protocol's sample has sequences of infinite nll)."""
    from odeflow.fields.induction import Schedule
    from odeflow.solver import solve_schedule

    cases = []
    for level in levels:
        for name in ("ih-paper", "ih-point"):
            options = {"loss": "code"} if level == "finite_l" else {}
            cases.append((f"{level} {name}", name, level, None, options))
    if "population" in levels:
        for name in ("ih-paper", "ih-point"):
            cases.append((f"staged {name}", name, "population",
                          Schedule.staged(2000.0, 100.0, 1000.0), {}))
    def run(case, method, rtol=1e-8, atol=1e-10):
        _, name, level, schedule, options = case
        data = InductionData.preset(name)
        if schedule is not None:
            return solve_schedule(data, schedule, flow=level, method=method, rtol=rtol,
                                  atol=atol, progress=False, **options)
        return odeflow.solve(data, flow=level, t_span=(0.0, 1e4), method=method,
                             rtol=rtol, atol=atol, progress=False, **options)

    for case in cases:
        label, level = case[0], case[2]
        tight = ("BDF", 1e-10, 1e-12) if level == "finite_l" else ("Radau", 1e-11, 1e-13)
        ref = run(case, *tight)
        print(f"{label}: reference {tight[0]} rtol {tight[1]:.0e} nfev {ref.stats['nfev']}, "
              f"a(1e4) {ref.a[-1]:.8f}")
        print("  method   CPU s   nfev njev  max rel err a  max err p_S  max err loss")
        for method in METHODS:
            cpu = time.process_time()
            try:
                traj = run(case, method)
            except odeflow.SolveError as exc:
                print(f"  {method:6s} stopped: {str(exc)[:100]}", flush=True)
                continue
            cpu = time.process_time() - cpu
            print(f"  {method:6s} {cpu:7.2f} {traj.stats['nfev']:6d} {traj.stats['njev']:4d} "
                  f"{errors_against(traj, ref)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer methods and sizes")
    parser.add_argument("--n-pi", type=int, default=None, help="kernels of the solved model")
    parser.add_argument("--goal", type=int, default=0, metavar="R",
                        help="only time the goal's solve (the defaults), R times")
    parser.add_argument("--tolerances", action="store_true",
                        help="only price looser tolerances against a tight solve")
    parser.add_argument("--methods", nargs="*", metavar="LEVEL", default=None,
                        choices=("population", "copier", "finite_l"),
                        help="only price each integrator at the defaults against a tight "
                             "solve (levels: population copier by default; finite_l too)")
    args = parser.parse_args()
    with threadpool_limits(limits=1, user_api="blas"):
        if args.methods is not None:
            method_cost(args.methods or ("population", "copier"))
        elif args.tolerances:
            tolerance_cost()
        elif args.goal:
            goal_solve(args.goal, args.n_pi)
        else:
            main(args.quick, args.n_pi)
