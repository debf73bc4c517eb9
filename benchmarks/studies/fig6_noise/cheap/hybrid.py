"""The hybrid estimate: ``lowrank.py``'s rank-r filter (noise=class) plus Rw within-class
Monte Carlo members (see its docstring).

usage: python hybrid.py CELL r class Rw [seed]
"""
import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).with_name("lowrank.py")), init_globals={"WITHIN_MEMBERS": True},
               run_name="__main__")
