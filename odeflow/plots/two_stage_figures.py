"""The two-stage family's figures of ``odeflow plot`` on the common options.

Each solves the flow (``population`` by default) of a
:class:`~odeflow.data.two_stage.TwoStageData` (``ts-default`` by default) to
``t_end`` on a log-spaced grid and draws it with :mod:`odeflow.plots.two_stage`.
"""

from __future__ import annotations

import numpy as np

from odeflow.plots.two_stage import plot_accuracy, plot_spectra

#: Flow time of the figures without ``t_end`` (past both stages of ``ts-default``).
T_END = 200.0


def _solve(data, t_end, flow):
    from odeflow.data.two_stage import TwoStageData
    from odeflow.solver import solve

    data = TwoStageData.preset("ts-default") if data is None else data
    t_end = T_END if t_end is None else float(t_end)
    times = np.concatenate([[0.0], np.geomspace(t_end * 1e-4, t_end, 120)])
    return solve(data, flow=flow or "population", t_span=(0.0, t_end), t_eval=times,
                 progress=False)


def accuracy_figure(data=None, t_end=None, flow=None):
    """Accuracy per query kind (P only, Q only, both) over log time."""
    return plot_accuracy(_solve(data, t_end, flow))[0]


def spectra_figure(data=None, t_end=None, flow=None):
    """Singular values of ``W_P`` and ``W_Q`` over log time."""
    return plot_spectra(_solve(data, t_end, flow))[0]
