"""The Scan and Snap figures of ``odeflow plot`` on the common options.

``odeflow plot NAME`` hands every figure the same options (``data``, ``eta_y``,
``eta_z``, ``t_end``, ``flow``; :data:`odeflow.plots.registry.COMMON_OPTIONS`).
These wrappers translate them for the plot functions whose own arguments
differ, so the registry never branches on a figure.
"""

from __future__ import annotations

from odeflow.plots.attention import plot_attention_map
from odeflow.plots.levels import plot_levels
from odeflow.plots.margin import plot_margin
from odeflow.plots.relative_gain import plot_relative_gain


def margin_figure(data=None, **options):
    """:func:`~odeflow.plots.margin.plot_margin` for a data model: its vocabulary size
    ``M`` and the weight ``pi`` of its first class (Eqn 44)."""
    if data is not None:
        options.update(vocab_size=data.vocab_size, pi=float(data.weights[0]))
    return plot_margin(**options)


def attention_map_figure(flow=None, **options):
    """:func:`~odeflow.plots.attention.plot_attention_map` of one ``flow`` (default: two)."""
    return plot_attention_map(**options, **({"flows": (flow,)} if flow is not None else {}))


def relative_gain_figure(flow=None, **options):
    """:func:`~odeflow.plots.relative_gain.plot_relative_gain` of one ``flow`` (default: two)."""
    return plot_relative_gain(**options, **({"flows": (flow,)} if flow is not None else {}))


def levels_figure(t_end=None, **options):
    """:func:`~odeflow.plots.levels.plot_levels` up to step ``round(t_end)`` (at least 1)."""
    if t_end is not None:
        from odeflow.data import validate_positive

        t_end = validate_positive(t_end, "t_end")  # nan, inf: named, not raw
        options["steps"] = max(1, round(t_end))
    return plot_levels(**options)
