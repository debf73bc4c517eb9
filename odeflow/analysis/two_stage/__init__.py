"""Analysis of the two-stage family (odeflow's model of Gong et al. 2025, arXiv 2502.20681).

- :mod:`odeflow.analysis.two_stage.closed_forms`: CF-TS2 (early growth of ``W_P``,
  ``W_Q`` from ``W = sigma0 I``, the stage-1 margin, the stage-2 growth of ``W_Q``)
  and the predicted and measured stage times; numeric twins of
  ``derivations/cf_ts2_early_growth.py``.
"""

from odeflow.analysis.two_stage import closed_forms

__all__ = ["closed_forms"]
