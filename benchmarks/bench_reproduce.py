"""Time of ``odeflow reproduce fig6`` and what running the seeds together saves.

Prints (not a timed test):

0. One right-hand side of Level T from a random start (un-lumped decoder) per
   vocabulary size, in sparse, dense and per-class-block storage (the
   optimiser-flow ensembles of parts 2-4 use the blocked one).
1. One Fig. 6 cell of each vocabulary size (``eta_Z = 1``, ``eta_Y/eta_Z = 2``,
   uniform start, 100 steps, batch 128, ``T = 128``): 10 seeds in one
   ensemble (one array operation per step for all seeds) beside 10 runs of one
   seed each, measured side by side in this process.
2. The whole ``odeflow reproduce fig6 --seeds N`` (64 cells, Level E, Level R
   and Level T beside each, and the heavy-ball optimiser-flow ensembles from the
   seeds' own starts on Level T and Level E), wall time, written to ``--out``.
3. From that same run, side by side: the wall time of the ``64 x N`` training
   runs (column ``train_seconds`` of fig6.csv) against that of the Level T
   optimiser-flow ensembles that predict them (``optflow_T_seconds``), and
   their ratio (issue 20's cost goal: at most 1), in all and per preset; written to
   ``cost.csv`` in ``--out`` for ``docs/make_which_level.py``.

4. A few Fig. 6 cells side by side in this process (``--cells``): the ``N``
   training runs of the cell (as ``reproduce fig6`` trains them) and the Level T
   heavy-ball ensemble from their starts three ways: as ``reproduce fig6`` now
   solves it (one solve per seed, ``storage="blocked"``), all seeds as one state
   (:func:`odeflow.solver.solve_ensemble`) and as it was solved before (one
   solve per seed, ``storage="dense"``); wall and CPU seconds
   (``time.process_time``; min of ``--repeats``), the ratios to the training,
   and the largest entropy difference of the new and the stacked ensembles from
   the old one, at any step and seed.
5. What is left to trade (``--levers``), on syn-medium-10's cell ``eta_Z = 1``,
   ``eta_Y/eta_Z = 2``: the Level T ensemble at a looser ``rtol`` or fewer
   sequences per class ``N``, its CPU seconds and how far its final entropy moves
   from the ``rtol = 1e-5``, ``N = 64`` ensemble (largest over the seeds). These
   change what is computed; nothing here is a default.

6. The tolerance's error budget (``--tolerance``): on the two syn-medium-10 cells with
   the smallest seed sd of fig6.csv (``eta_Z = 0.5`` and ``2``, ``eta_Y/eta_Z = 1``),
   each member's final entropy at other tolerances and methods against a tight
   reference (RK45, ``rtol = 1e-7``), in units of the cell's seed sd (``--csv``'s
   fig6.csv), with the right-hand sides and CPU seconds.

7. The optimiser flows' ``atol`` and first step (``--first-step``): each Level T heavy-ball
   member of four syn-medium-10 cells (seeds 0-2; final entropy) and of syn-medium-1 and -5
   (two cells, seeds 0-1), and the Fig. 4/5 flows on syn-small (Levels E and T, loss and
   entropy at steps 0-100), solved by ``solve_ivp`` on the wrapped field with RK45 at
   ``rtol = 1e-5`` and ``atol`` 1e-7 or 3e-7, with ``solve_ivp``'s own first step or one
   optimiser step; right-hand sides and the largest error against DOP853 at ``rtol =
   1e-11``.

Usage: ``python benchmarks/bench_reproduce.py [--seeds 10] [--out DIR] [--skip-full]
[--skip-ensemble] [--cells] [--repeats 1] [--levers] [--tolerance [--csv DIR]]
[--first-step]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from pathlib import Path

import numpy as np

import odeflow
from odeflow.cli import main as cli_main
from odeflow.experiments import paper
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
            train(data, **protocol.options(), seeds=seeds, progress=False)
            together.append(time.perf_counter() - t)
            t = time.perf_counter()
            for s in range(seeds):
                train(data, **protocol.options(), seeds=[s], progress=False)
            alone.append(time.perf_counter() - t)
        print(f"{'syn-medium-' + str(size):>14} {data.vocab_size:>4} {min(together):>11.2f} "
              f"{min(alone):>10.2f} {min(alone) / min(together):>6.2f}")


def level_t_storage() -> None:
    """Part 0: one right-hand side of Level T from a random start, dense and sparse storage."""
    from odeflow.fields.finite_t import FiniteTFlow
    from odeflow.training import training_start

    print("0. Level T (T = 128, 64 sequences per class) from seed 0's uniform start: one "
          "right-hand side (best of 20)")
    print(f"{'preset':>14} {'M':>4} {'state':>7} {'sparse ms':>10} {'dense ms':>9} "
          f"{'blocked ms':>10}")
    for size in (1, 3, 5, 10):
        data = odeflow.DataModel.preset(f"syn-medium-{size}")
        y0, z0 = training_start(data, 0)
        best = {}
        for storage in ("sparse", "dense", "blocked"):
            field = FiniteTFlow(data, 2.0, 1.0, start=(y0, z0), storage=storage)
            y = field.initial_state()
            times = []
            for _ in range(20):
                t = time.perf_counter()
                field.rhs(0.0, y)
                times.append(time.perf_counter() - t)
            best[storage] = min(times) * 1e3
        print(f"{'syn-medium-' + str(size):>14} {data.vocab_size:>4} {field.size:>7} "
              f"{best['sparse']:>10.2f} {best['dense']:>9.2f} {best['blocked']:>10.2f}")


#: Cells of part 4: (syn-medium size, eta_Z, eta_Y / eta_Z).
COST_CELLS = ((1, 1.0, 2.0), (3, 1.0, 2.0), (5, 1.0, 2.0), (10, 1.0, 2.0), (10, 3.0, 10.0))


def _timed(fn, *args, **kwargs):
    """``(result, wall s, cpu s)`` of ``fn(*args, **kwargs)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def dense_per_seed_ensemble(data, protocol, seeds, steps) -> np.ndarray:
    """The Level T ensemble as solved before: one solve per seed in dense storage."""
    flow, options = paper.OPTFLOWS["T"]
    H, _ = paper.optflow_ensemble(data, protocol, seeds, steps,
                                  {"T": (flow, {**options, "storage": "dense"})})
    return H["T"]


def stacked_ensemble(data, protocol, seeds, steps) -> np.ndarray:
    """The Level T ensemble with all seeds as one state (:func:`solve_ensemble`)."""
    from odeflow.analysis.measures import distinct_entropy
    from odeflow.solver import solve_ensemble
    from odeflow.training import training_start

    flow, options = paper.OPTFLOWS["T"]
    flows = solve_ensemble(data, [training_start(data, s, protocol.init) for s in seeds],
                           flow=flow, eta_y=protocol.eta_y, eta_z=protocol.eta_z,
                           optimizer=paper.optimizer_of(protocol),
                           t_span=(0.0, float(steps[-1])), t_eval=steps,
                           method=paper.OPTFLOW_METHOD, rtol=paper.OPTFLOW_RTOL,
                           atol=paper.OPTFLOW_ATOL, progress=False,
                           **{**options, "seq_len": protocol.seq_len, "storage": "dense"})
    return np.array([distinct_entropy(data, tr.z_active) for tr in flows])


def cell_costs(seeds: int, repeats: int) -> None:
    """Part 4: training against the Level T ensemble (new, stacked, old), per cell."""
    print(f"4. Fig. 6 cells, {seeds} seeds, side by side (min of {repeats}; wall s / cpu s; "
          "ratios of wall times)")
    print(f"{'preset':>14} {'eta_z':>5} {'ratio':>5} {'train':>11} {'blocked':>11} "
          f"{'stacked':>11} {'dense':>11} {'new/tr':>6} {'stk/tr':>6} {'old/tr':>6} "
          f"{'dH new':>7} {'dH stk':>7}")
    levels = {"T": paper.OPTFLOWS["T"]}
    for size, eta_z, ratio in COST_CELLS:
        data = odeflow.DataModel.preset(f"syn-medium-{size}")
        p = paper.FIG6.replace(eta_z=eta_z, eta_y=eta_z * ratio)
        steps = np.arange(p.steps + 1.0)
        keys = ("train", "new", "stk", "old")
        best = {k: [np.inf, np.inf] for k in keys}
        for _ in range(repeats):
            run, *tr = _timed(train, data, **p.options(), seeds=seeds, progress=False)
            (H, _), *new = _timed(paper.optflow_ensemble, data, p, run.seeds, steps, levels)
            stk_H, *stk = _timed(stacked_ensemble, data, p, run.seeds, steps)
            old, *per = _timed(dense_per_seed_ensemble, data, p, run.seeds, steps)
            for key, (w, c) in zip(keys, (tr, new, stk, per), strict=True):
                best[key] = [min(best[key][0], w), min(best[key][1], c)]
        cols = " ".join(f"{best[k][0]:>5.1f}/{best[k][1]:<5.1f}" for k in keys)
        ratios = " ".join(f"{best[k][0] / best['train'][0]:>6.2f}" for k in keys[1:])
        print(f"{'syn-medium-' + str(size):>14} {eta_z:>5g} {ratio:>5g} {cols} {ratios} "
              f"{np.abs(H['T'] - old).max():>7.1e} {np.abs(stk_H - old).max():>7.1e}",
              flush=True)


def levers(seeds: int) -> None:
    """Part 5: the Level T ensemble at a looser tolerance or a smaller sample."""
    from odeflow.analysis.measures import distinct_entropy
    from odeflow.training import training_start

    data = odeflow.DataModel.preset("syn-medium-10")
    p = paper.FIG6.replace(eta_z=1.0, eta_y=2.0)
    steps = np.arange(p.steps + 1.0)
    starts = [training_start(data, s) for s in range(seeds)]
    flow, options = paper.OPTFLOWS["T"]
    print(f"5. syn-medium-10, eta_Z = 1, eta_Y/eta_Z = 2, {seeds} seeds: Level T ensemble "
          "(one blocked solve per seed) at other tolerances / samples (cpu s; right-hand "
          "sides; max |final entropy - the rtol 1e-5, N 64 one|)")

    def ensemble(rtol, n):
        levels = {"T": (flow, {**options, "sample_size": n})}
        out = [paper.optimizer_flows(data, p, steps, levels, start=(y0, z0), rtol=rtol,
                                     atol=rtol * 1e-2)["T"] for y0, z0 in starts]
        return (np.array([distinct_entropy(data, tr.z_active)[-1] for tr in out]),
                sum(tr.stats["nfev"] for tr in out))

    reference = None
    for rtol, n in ((1e-5, 64), (1e-4, 64), (1e-3, 64), (1e-5, 32), (1e-5, 16)):
        (final, nfev), _, cpu = _timed(ensemble, rtol, n)
        reference = final if reference is None else reference
        print(f"  rtol {rtol:g} N {n:>3}: {cpu:6.1f} s cpu, {nfev:>5} right-hand sides, "
              f"max |dH| {np.abs(final - reference).max():.1e}", flush=True)


#: Part 6: (method, rtol) against the reference; atol = rtol / 100 as the defaults.
TOLERANCES = (("RK45", 1e-5), ("RK45", 3e-5), ("RK45", 1e-4), ("RK23", 1e-3))


def tolerance_budget(seeds: int, csv_dir: Path) -> None:
    """Part 6: the final entropy's error at other tolerances, in seed sd, on two cells."""
    from odeflow.analysis.measures import distinct_entropy
    from odeflow.training import training_start

    with open(csv_dir / "fig6.csv", encoding="utf-8") as fh:
        sd = {(r["preset"], float(r["eta_z"]), float(r["ratio"])): float(r["sgd_std"])
              for r in csv.DictReader(fh)}
    data = odeflow.DataModel.preset("syn-medium-10")
    print(f"6. the tolerance's error budget, syn-medium-10, {seeds} seeds: max over members "
          "of |final entropy - RK45 at rtol 1e-7| (and in the cell's seed sd)")
    for eta_z in (0.5, 2.0):
        p = paper.FIG6.replace(eta_z=eta_z, eta_y=eta_z)
        starts = [training_start(data, s) for s in range(seeds)]

        def ensemble(method, rtol, p=p, starts=starts):
            out = [paper.optimizer_flows(data, p, [0.0, 100.0], {"T": paper.OPTFLOWS["T"]},
                                         start=(y0, z0), rtol=rtol, atol=rtol * 1e-2,
                                         method=method)["T"] for y0, z0 in starts]
            return (np.array([distinct_entropy(data, tr.z_active)[-1] for tr in out]),
                    sum(tr.stats["nfev"] for tr in out))

        reference, _ = ensemble("RK45", 1e-7)
        cell_sd = sd[("syn-medium-10", eta_z, 1.0)]
        for method, rtol in TOLERANCES:
            (H, nfev), _, cpu = _timed(ensemble, method, rtol)
            err = np.abs(H - reference).max()
            print(f"  eta_Z {eta_z:g}, ratio 1 (sd {cell_sd:.4f}): {method} rtol {rtol:g}: "
                  f"{cpu:5.1f} s cpu, {nfev:>5} right-hand sides, max error {err:.1e} "
                  f"({err / cell_sd:.3f} sd)", flush=True)


#: Part 7: (label, atol, first step) of RK45 at rtol 1e-5 (None: solve_ivp's own).
FIRST_STEP_ROWS = (("atol 1e-7, own first step (before)", 1e-7, None),
                   ("atol 1e-7, first step 1 (now)", 1e-7, 1.0),
                   ("atol 3e-7, own first step", 3e-7, None),
                   ("atol 3e-7, first step 1", 3e-7, 1.0))


def _first_step_cases():
    """Part 7's members: ``(group, data, protocol, level, start)``."""
    from odeflow.training import training_start

    small = odeflow.DataModel.preset("syn-small")
    for protocol in (paper.FIG4, *(paper.FIG4.replace(optimizer="adam", eta_z=ez)
                                   for ez in paper.FIG5_ETA_Z)):
        for level in ("E", "T"):
            yield "Figs. 4-5, syn-small", small, protocol, level, None
    grid = ((10, ((0.5, 1.0), (2.0, 1.0), (1.0, 2.0), (3.0, 10.0)), 3),
            (1, ((0.5, 1.0), (3.0, 10.0)), 2), (5, ((0.5, 1.0), (3.0, 10.0)), 2))
    for size, cells, seeds in grid:
        data = odeflow.DataModel.preset(f"syn-medium-{size}")
        for eta_z, ratio in cells:
            p = paper.FIG6.replace(eta_z=eta_z, eta_y=eta_z * ratio)
            for seed in range(seeds):
                yield (f"Fig. 6, syn-medium-{size}", data, p, "T",
                       training_start(data, seed, p.init))


def _member_solve(data, protocol, level, start, method, rtol, atol, first):
    """``(loss, entropy, nfev)`` at steps 0..100 of one optimiser flow, by ``solve_ivp``."""
    from scipy.integrate import solve_ivp

    from odeflow.analysis.measures import distinct_entropy
    from odeflow.families import family_named
    from odeflow.fields.optimizers import optimizer_flow

    flow, options = paper.OPTFLOWS[level]
    if flow == "finite_t":
        options = {"seq_len": protocol.seq_len, **options}
    field = family_named("scan_snap").field_class(flow)(
        data, protocol.eta_y, protocol.eta_z, start=start, **options)
    wrapped = optimizer_flow(field.parameter_level(), paper.optimizer_of(protocol))
    steps = np.arange(protocol.steps + 1.0)
    extra = {} if first is None else {"first_step": first}
    head = wrapped.exact_until  # Adam: its exact steps copied, the ODE after them
    t0, y0 = ((wrapped.start_step, wrapped.initial_state()) if head is None else
              (wrapped.ode_start, wrapped.ode_start_state()))
    early = steps[steps <= head] if head is not None else steps[:0]
    sol = solve_ivp(wrapped.rhs, (t0, steps[-1]), y0, method=method, rtol=rtol, atol=atol,
                    t_eval=steps[early.size:], **extra)
    states = np.vstack([wrapped.exact_state_at(early), sol.y.T]) if early.size else sol.y.T
    tr = wrapped.trajectory(steps, states, {})
    return -tr.objective, distinct_entropy(data, tr.z_active), sol.nfev


def first_step_table() -> None:
    """Part 7: RK45's right-hand sides and error at two ``atol`` and two first steps."""
    print("7. optimiser flows, RK45 at rtol 1e-5: right-hand sides and largest error against "
          "DOP853 at rtol 1e-11 (Fig. 6: final entropy; Figs. 4-5: loss and entropy, steps "
          "0-100)")
    table = {}
    for group, data, p, level, start in _first_step_cases():
        ref = _member_solve(data, p, level, start, "DOP853", 1e-11, 1e-13, None)
        for label, atol, first in FIRST_STEP_ROWS:
            loss, H, nfev = _member_solve(data, p, level, start, "RK45", 1e-5, atol, first)
            last = slice(-1, None) if group.startswith("Fig. 6") else slice(None)
            row = table.setdefault((group, label), [0, 0.0, 0.0])
            row[0] += nfev
            row[1] = max(row[1], np.abs(loss - ref[0])[last].max())
            row[2] = max(row[2], np.abs(H - ref[1])[last].max())
    print(f"{'members':>22} {'RK45, rtol 1e-5':>36} {'rhs':>6} {'loss err':>9} "
          f"{'entropy err':>11}")
    for (group, label), (nfev, loss, H) in table.items():
        print(f"{group:>22} {label:>36} {nfev:>6} {loss:>9.2e} {H:>11.2e}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default="results/reproduce")
    parser.add_argument("--skip-full", action="store_true")
    parser.add_argument("--skip-ensemble", action="store_true",
                        help="skip part 1 (ensemble against single-seed runs)")
    parser.add_argument("--cells", action="store_true",
                        help="part 4: training vs the Level T ensemble on a few cells")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--levers", action="store_true",
                        help="part 5: the Level T ensemble at a looser rtol or smaller N")
    parser.add_argument("--tolerance", action="store_true",
                        help="part 6: the error of other tolerances, in seed sd")
    parser.add_argument("--csv", default="docs/reproduce",
                        help="folder of the fig6.csv whose seed sd part 6 uses")
    parser.add_argument("--first-step", action="store_true",
                        help="part 7: the optimiser flows' atol and first step")
    args = parser.parse_args(argv)
    print(f"odeflow {odeflow.__version__}, numpy {np.__version__}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f}")
    level_t_storage()
    if args.cells:
        cell_costs(args.seeds, args.repeats)
    if args.levers:
        levers(args.seeds)
    if args.tolerance:
        tolerance_budget(args.seeds, Path(args.csv))
    if args.first_step:
        first_step_table()
    if not args.skip_ensemble:
        ensemble_vs_single(args.seeds)
    if not args.skip_full:
        print(f"2. odeflow reproduce fig6 --seeds {args.seeds} --out {args.out}")
        t = time.perf_counter()
        cli_main(["reproduce", "fig6", "--seeds", str(args.seeds), "--out", args.out,
                  "--no-progress"])
        wall = time.perf_counter() - t
        print(f"fig6 with {args.seeds} seeds: {wall:.1f} s wall")
        optflow_cost(Path(args.out), wall)
    return 0


def optflow_cost(out: Path, wall: float) -> None:
    """Part 3: training against the optimiser-flow ensembles of the same run (fig6.csv)."""
    from odeflow.cli.reproduce import csv_text
    from odeflow.io import atomic_write_text

    with open(out / "fig6.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    total = {c: sum(float(r[c]) for r in rows)
             for c in ("train_seconds", "optflow_T_seconds", "optflow_E_seconds",
                       "flow_seconds")}
    runs = sum(int(r["seeds"]) for r in rows)
    print(f"3. the same run, side by side: {runs} training runs {total['train_seconds']:.1f} s; "
          f"heavy-ball flow ensembles from the runs' starts: Level T "
          f"{total['optflow_T_seconds']:.1f} s, Level E {total['optflow_E_seconds']:.1f} s; "
          f"first-order levels {total['flow_seconds']:.1f} s")
    ratio = total["optflow_T_seconds"] / total["train_seconds"]
    print(f"cost ratio (Level T optimiser flows / training runs): {ratio:.2f}")
    for preset in dict.fromkeys(r["preset"] for r in rows):
        cells = [r for r in rows if r["preset"] == preset]
        train_s = sum(float(r["train_seconds"]) for r in cells)
        flow_s = sum(float(r["optflow_T_seconds"]) for r in cells)
        print(f"  {preset}: training {train_s:.1f} s, Level T flows {flow_s:.1f} s, "
              f"ratio {flow_s / train_s:.2f}")
    table = [{"what": "training", "seconds": total["train_seconds"]},
             {"what": "optflow_T", "seconds": total["optflow_T_seconds"]},
             {"what": "optflow_E", "seconds": total["optflow_E_seconds"]},
             {"what": "first-order levels", "seconds": total["flow_seconds"]},
             {"what": "whole reproduce fig6", "seconds": wall}]
    atomic_write_text(out / "cost.csv", csv_text(table))
    print(f"wrote {out / 'cost.csv'}")


if __name__ == "__main__":
    raise SystemExit(main())
