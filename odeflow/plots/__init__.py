"""Figures of the theory: matplotlib functions that return a Figure.

Each function draws on the Axes it is given (``ax=``, or ``axes=`` for
multi-panel figures) or on a new figure, and returns the
:class:`matplotlib.figure.Figure`. Colours follow the Okabe-Ito palette
(:mod:`odeflow.plots.style`); legends name the equation each curve checks.

==========================  ==================================================  ==========
function                    what it shows                                       paper
==========================  ==================================================  ==========
:func:`plot_margin`         ``h(t)``, ``gamma(t)``: CF1, CF2, ``t_0``, Lemma 5  Fig. 8
:func:`plot_scan_snap`      ``B_n(t)`` over learning rates, numerics and CF6    Figs. 3, 9
:func:`plot_attention_map`  attention ``f_n(t)`` as a heat map                  Fig. 4
:func:`plot_relative_gain`  Eqn 11, flow beside closed form                     Theorem 3
:func:`plot_entropy`        distinct-token entropy against the rates            Fig. 6
:func:`plot_levels`         ``z_ml(t)``: Level E, Level R, SGD                  Sec. 8
:func:`plot_sweep`          a sweep store: heat map over two parameters         Figs. 3, 6
==========================  ==================================================  ==========

:data:`FIGURES` names them for ``odeflow plot NAME`` and the docs gallery.
"""

from __future__ import annotations

import importlib

#: Public name -> submodule of :mod:`odeflow.plots` that defines it. The
#: submodules (and matplotlib) load on first use, so ``odeflow.plots.registry``
#: (used by the command line to list the figures) stays light.
_EXPORTS = {
    "FIGURES": "registry",
    "FigureSpec": "registry",
    "figure_arguments": "registry",
    "make_figure": "registry",
    "OKABE_ITO": "style",
    "save_figure": "style",
    "lemma5_margin": "margin",
    "plot_margin": "margin",
    "plot_scan_snap": "scan_snap",
    "single_common_token_model": "scan_snap",
    "plot_attention_map": "attention",
    "plot_relative_gain": "relative_gain",
    "relative_gain_curves": "relative_gain",
    "RelativeGainCurves": "relative_gain",
    "EntropyGrid": "entropy",
    "distinct_entropy": "entropy",
    "entropy_grid": "entropy",
    "plot_entropy": "entropy",
    "plot_levels": "levels",
    "plot_sweep": "sweep",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
