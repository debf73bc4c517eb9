"""Analysis layer: closed forms, diagnostics, level comparisons and verification.

- :mod:`odeflow.analysis.closed_forms`: CF1-CF6 (Eqns 11-14, 44-45, 124,
  128-129; ``docs/derivations.md``), the numeric twins of the sympy derivations
  in ``derivations/``.
- :mod:`odeflow.analysis.diagnostics`: quantities measured on a trajectory
  (margin, speed control, transition time, Eqn 11 spread).
- :mod:`odeflow.analysis.levels`: Level E against Level R.
- :mod:`odeflow.analysis.finite_t`: Level T diagnostics (error in ``N``,
  distance to Level E as ``T`` grows, distance to an SGD ensemble on the
  flow-time axis).
- :mod:`odeflow.analysis.verification`: :func:`verify`, scipy integration of each
  closed form's ODE against the closed form (``odeflow verify``), every family's
  checks (:mod:`odeflow.analysis.check_registry`; Scan and Snap's CF1-CF6 in
  :mod:`odeflow.analysis.checks_scan_snap`).
- :mod:`odeflow.analysis.compare`: gradient ascent and SGD beside the flow.
- :mod:`odeflow.analysis.measures`: the paper's attention-sparsity measures
  (distinct-token entropy, recall-threshold curves, attention maps).
- :mod:`odeflow.analysis.paper`: the levels and optimiser flows beside real training.
- :mod:`odeflow.analysis.check_registry`: the checks of ``odeflow verify``, registered
  by each family (rows, report, :func:`relative_error`).
- :mod:`odeflow.analysis.induction`: the induction-head family (``docs/induction.md``):
  ``I_S``, CF-IH1, CF-IH2 and their checks.
"""

from odeflow.analysis import closed_forms, diagnostics, induction, measures, paper
from odeflow.analysis.compare import compare_runs, compare_to_flow
from odeflow.analysis.finite_t import (
    distance_to_exact,
    distance_to_sgd,
    flow_time,
    sample_size_error,
)
from odeflow.analysis.levels import compare_levels, compare_levels_over_ratios
from odeflow.analysis.verification import verify

__all__ = ["closed_forms", "compare_levels", "compare_levels_over_ratios", "compare_runs",
           "compare_to_flow", "diagnostics", "distance_to_exact", "induction", "distance_to_sgd",
           "flow_time", "measures", "paper", "sample_size_error", "verify"]
