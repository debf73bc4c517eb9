"""Rerun the Fig. 6 minibatch-noise study and print its tables (docs/studies.md).

Runs the study's scripts one after the other, each in its own process pinned
to one BLAS thread, writes their JSON results and logs to ``--out`` (default
``~/odeflow-studies/fig6_noise``, outside the repository), then prints the
tables of docs/studies.md from them (``table.py``, ``project.py``; with
``--part cheap``, ``cheap/summary.py``).

usage: python benchmarks/studies/fig6_noise/study.py [--part main|extra|cheap|all]
                                                     [--out DIR] [--tables] [--cpu N]

``main`` gives the main table, ``extra`` the batch-size, noise-block and
sample-size checks (the two took about 70 min on one core when the study was
run), ``cheap`` the follow-up's cheaper estimates (0.3-80 s a job, 86 jobs);
``cheap``'s table reads ``main``'s results: run ``main`` first into the same
``--out``.
``--tables`` only prints the tables from an existing ``--out``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = Path.home() / "odeflow-studies" / "fig6_noise"
CELLS = ("m5_ez2_r10", "m10_ez1_r10", "m10_ez3_r10", "m3_ez3_r10", "m1_ez1_r5")


def r_lin(cell: str) -> str:
    """Linearised trajectories per cell: 64 on syn-medium-10 (its cost), else 128."""
    return "64" if cell.startswith("m10") else "128"


def main_jobs() -> list[tuple[str, list[str], dict]]:
    """(script, arguments, extra environment) of the main table."""
    jobs = [("runs.py", [c, "40"], {}) for c in CELLS]
    jobs += [("noise_check.py", [c], {}) for c in ("m1_ez1_r5", "m3_ez3_r10")]
    jobs += [("lna.py", [c, m, r_lin(c)], {}) for c in CELLS for m in ("lna", "mc2")]
    jobs += [("nl.py", [c, "gauss", "40"], {}) for c in CELLS]
    return jobs


def extra_jobs() -> list[tuple[str, list[str], dict]]:
    """The checks beside the main table: 1/B scaling, noise blocks, Level T's sample."""
    jobs = [("runs.py", [c, "40", "512"], {}) for c in ("m3_ez3_r10", "m10_ez3_r10")]
    jobs += [("nl.py", ["m3_ez3_r10", "gauss", "40", "11", b], {})
             for b in ("512", "1280", "12800")]
    jobs += [("nl.py", ["m3_ez3_r10", "resample", "40"], {})]
    jobs += [("nl.py", [c, "gauss", "40"], {"NOISE_BLOCK": b})
             for c in ("m3_ez3_r10", "m5_ez2_r10") for b in ("Y", "Z")]
    jobs += [("nl.py", ["m1_ez1_r5", "gauss", "40"], {"LEVEL_T_N": "256"}),
             ("lna_dense.py", ["m1_ez1_r5"], {})]
    return jobs


def cheap_jobs(out: Path) -> list[tuple[str, list[str], dict]]:
    """The follow-up's rows: rank-r filters, class-structured noise, hybrids, small-R Monte
    Carlo (each cell and seed of its table, as run)."""
    own = {"NOISE_STUDY_OUT": str(out / "cheap")}   # its Monte Carlo runs write beside it
    m3, m5, m1, m10a, m10b = "m3_ez3_r10", "m5_ez2_r10", "m1_ez1_r5", "m10_ez1_r10", "m10_ez3_r10"
    low = [(c, "20", "class", []) for c in CELLS]
    low += [(c, r, "class", []) for c, r in ((m10a, "40"), (m10b, "40"), (m1, "4"),
                                             (m3, "12"), (m3, "6"), (m5, "10"))]
    low += [(c, "8", "gauss", ["8", "0"]) for c in CELLS]
    low += [(c, "16", "gauss", ["16", "0"]) for c in (m5, m10b, m3)]
    low += [(c, "8", "gauss", ["8", "1"]) for c in (m10b, m3)]
    jobs = [("cheap/lowrank.py", [c, r, noise, *extra], {}) for c, r, noise, extra in low]
    hybrid = [(c, "20", "8") for c in CELLS]
    hybrid += [(m10a, "40", "8"), (m10b, "40", "8"), (m1, "4", "4"), (m3, "12", "4"),
               (m5, "20", "4")]
    jobs += [("cheap/hybrid.py", [c, r, "class", w, "0"], {}) for c, r, w in hybrid]
    jobs += [("lna.py", [c, "lna", members, s], own)
             for members in ("2", "4", "8") for s in "123" for c in CELLS]
    jobs += [("lna.py", [c, "lna", "8", s], {**own, "NOISE_DRAW": "orth"})
             for s in "12" for c in CELLS]
    return jobs


def run(jobs, out: Path, cpu: int | None) -> None:
    """Run each job serially; its stdout and stderr go to ``out/log_<script>_<args>.txt``."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []
    base = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "NOISE_STUDY_OUT": str(out),
            "NOISE_CHEAP_OUT": str(out / "cheap")}
    for i, (script, args, env) in enumerate(jobs, 1):
        tag = "_".join([Path(script).stem, *args, *(f"{k}{v}" for k, v in env.items()
                                                    if k != "NOISE_STUDY_OUT")])
        print(f"[{i}/{len(jobs)}] {script} {' '.join(args)}", flush=True)
        with open(out / f"log_{tag}.txt", "w") as log:
            done = subprocess.run([*pin, sys.executable, str(HERE / script), *args],
                                  cwd=(HERE / script).parent, env={**base, **env},
                                  stdout=log, stderr=subprocess.STDOUT)
        if done.returncode:
            sys.exit(f"study.py: {script} {' '.join(args)} failed (exit {done.returncode}); "
                     f"see {log.name}")


def tables(out: Path, part: str) -> None:
    """Print the tables of docs/studies.md from the results in ``out``."""
    env = {**os.environ, "NOISE_STUDY_OUT": str(out), "NOISE_CHEAP_OUT": str(out / "cheap")}
    scripts = ["table.py", "project.py"] + (["cheap/summary.py"] if part in ("cheap", "all")
                                            else [])
    for script in scripts:
        print(f"\n## {script}\n", flush=True)
        subprocess.run([sys.executable, str(HERE / script)], cwd=(HERE / script).parent,
                       env=env, check=True)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("main", "extra", "cheap", "all"), default="main",
                   help="which jobs to run (default main)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"folder for results and logs (default {DEFAULT_OUT})")
    p.add_argument("--tables", action="store_true",
                   help="only print the tables from the results in --out")
    p.add_argument("--cpu", type=int, default=None,
                   help="pin every job to this core with taskset (default: not pinned)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse(argv)
    out = args.out.expanduser().resolve()
    (out / "cheap").mkdir(parents=True, exist_ok=True)
    if not args.tables:
        jobs = {"main": main_jobs, "extra": extra_jobs}
        parts = ("main", "extra", "cheap") if args.part == "all" else (args.part,)
        for part in parts:
            run(cheap_jobs(out) if part == "cheap" else jobs[part](), out, args.cpu)
    tables(out, args.part)


if __name__ == "__main__":
    main()
