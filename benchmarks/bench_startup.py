"""Start-up time of the command line: ``odeflow --help``, each command's ``--help`` and
``odeflow run`` (the default job), beside ``python -c pass``.

Each command runs ``--repeats`` times (5) as ``python -m odeflow ...`` in a fresh
process; the table gives the median wall time and, in brackets, the median CPU
time (user + system) of the process, which is what the wall time is on an idle
machine (start-up is single-threaded) and is less disturbed by other jobs.
``--old REV`` times a git revision (or a checkout folder) the same way, side by
side (:mod:`old_checkout`)::

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --old HEAD~1
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from old_checkout import old_checkout  # noqa: E402

#: The goals of the start-up work, in seconds.
GOALS = {"help": 0.3, "run": 1.5}


def commands(verbs: list[str], out: str) -> dict[str, list[str]]:
    """Label -> arguments after ``python``."""
    table = {"python -c pass": ["-c", "pass"], "odeflow --help": ["-m", "odeflow", "--help"]}
    table.update({f"odeflow {verb} --help": ["-m", "odeflow", verb, "--help"]
                  for verb in verbs})
    table["odeflow run"] = ["-m", "odeflow", "run", "--no-progress", "--out", out]
    return table


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_time(args: list[str], env: dict, repeats: int, cwd: str) -> tuple | None:
    """Median wall and CPU time (s) of ``python ARGS`` over ``repeats`` fresh processes;
    None when the command fails (a revision without that command)."""
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run([sys.executable, *args], env=env, cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0:
            return None
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def verbs_of(env: dict) -> list[str]:
    """The commands of the ``odeflow`` that ``env`` imports."""
    code = ("from odeflow.cli import command_modules\n"
            "print(' '.join(m.replace('_', '-') for m in command_modules()))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.split()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per command (5)")
    parser.add_argument("--old", metavar="REV", help="also time this revision or folder")
    args = parser.parse_args(argv)
    envs = {"now": dict(os.environ)}
    if args.old:
        folder = old_checkout(args.old)
        envs = {args.old: {**os.environ, "PYTHONPATH": folder}, **envs}
    verbs = verbs_of(envs["now"])
    with tempfile.TemporaryDirectory() as tmp:
        table = commands(verbs, str(Path(tmp) / "run.npz"))
        header = f"{'command':<30s}" + "".join(f"{name:>18s}" for name in envs)
        print(f"median of {args.repeats} runs of python -m odeflow: wall s (CPU s); load "
              f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(header)
        for label, command in table.items():
            cells = [median_time(command, env, args.repeats, tmp) for env in envs.values()]
            goal = GOALS["run"] if label == "odeflow run" else \
                GOALS["help"] if label.endswith("--help") else None
            mark = f"   goal < {goal:g}" if goal else ""
            print(f"{label:<30s}" + "".join("-".rjust(18) if cell is None else
                                            f"{cell[0]:10.3f} ({cell[1]:5.3f})"
                                            for cell in cells) + mark)


if __name__ == "__main__":
    main()
