"""Reproductions of the papers' experiments, apart from the library.

A package that imports the library and that only ``odeflow reproduce`` (lazily), the
docs' ``make_*.py`` scripts and the benchmarks import:

- :mod:`odeflow.experiments.paper`: Scan and Snap's Figs. 4-6 beside the levels;
- :mod:`odeflow.experiments.goals`: their pass/fail goal tables and the study of
  Fig. 6's misses;
- :mod:`odeflow.experiments.induction`: the induction-head reproduction and its goal
  table.
"""
