"""The figures by name, for ``odeflow plot`` and the docs gallery.

Each entry names a plot function and the common options it understands
(``data``, ``eta_y``, ``eta_z``, ``t_end``, ``flow``); :func:`make_figure`
translates those options into the function's own arguments.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from odeflow.errors import ValidationError

#: The options :func:`make_figure` knows.
COMMON_OPTIONS = ("data", "eta_y", "eta_z", "t_end", "flow")


@dataclass(frozen=True)
class FigureSpec:
    """A named figure: where its plot function lives, a summary and the options it takes.

    ``target`` is ``"module:function"`` relative to :mod:`odeflow.plots`; the
    module (and matplotlib) is imported only when :attr:`function` is used, so
    listing the figures stays cheap for the command line.
    """

    name: str
    target: str
    summary: str
    accepts: tuple[str, ...]

    @property
    def function(self) -> Callable:
        """The plot function."""
        module, attr = self.target.split(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), attr)


FIGURES: dict[str, FigureSpec] = {spec.name: spec for spec in (
    FigureSpec("margin", "margin:plot_margin",
               "h(t) and gamma(t): CF1, CF2 asymptotes, t_0, Lemma 5 recursion (Fig. 8)",
               ("data", "eta_y", "t_end")),
    FigureSpec("scan-snap", "scan_snap:plot_scan_snap",
               "B_n(t) over (eta_Y, eta_Z): Level R beside CF6 (Figs. 3, 9)",
               ("data", "t_end", "flow")),
    FigureSpec("attention-map", "attention:plot_attention_map",
               "attention f_n(t) as a tokens x time heat map (Fig. 4)",
               ("data", "eta_y", "eta_z", "t_end", "flow")),
    FigureSpec("relative-gain", "relative_gain:plot_relative_gain",
               "Eqn 11: relative gain from the flow beside the closed form",
               ("data", "eta_y", "eta_z", "t_end", "flow")),
    FigureSpec("entropy", "entropy:plot_entropy",
               "distinct-token attention entropy against eta_Y and eta_Z (Fig. 6)",
               ("data", "t_end", "flow")),
    FigureSpec("levels", "levels:plot_levels",
               "z_ml(t) from Level E, Level R and SGD side by side",
               ("data", "eta_y", "eta_z", "t_end")),
    FigureSpec("ih-subsets", "induction:plot_subset_weights",
               "induction heads: selector weights p_S(t) stacked over log t",
               ("data", "t_end", "flow")),
    FigureSpec("ih-classifier", "induction:plot_classifier_weight",
               "induction heads: classifier weight a(t) on log time",
               ("data", "t_end", "flow")),
    FigureSpec("ih-copier", "induction:plot_copier_logits",
               "induction heads: copier logits (H x H) at start and end",
               ("data", "t_end", "flow")),
    FigureSpec("ih-loss", "induction:plot_loss",
               "induction heads: loss over log time",
               ("data", "t_end", "flow")),
)}


def figure_arguments(name: str, **options) -> dict:
    """Keyword arguments of figure ``name``'s function for the common ``options``.

    Options that are ``None`` are left to the function's defaults; an option
    the figure does not take raises a :class:`~odeflow.ValidationError`.
    """
    spec = _spec(name)
    given = {k: v for k, v in options.items() if v is not None}
    for key in given:
        if key not in COMMON_OPTIONS:
            raise ValidationError(key, f"unknown option; known: {list(COMMON_OPTIONS)}")
        if key not in spec.accepts:
            raise ValidationError(key, f"figure {name!r} does not take it; it takes "
                                  f"{list(spec.accepts)}")
    kwargs = dict(given)
    if name == "margin" and "data" in kwargs:
        data = kwargs.pop("data")
        kwargs["vocab_size"] = data.vocab_size
        kwargs["pi"] = float(data.weights[0])
    if name in ("attention-map", "relative-gain") and "flow" in kwargs:
        kwargs["flows"] = (kwargs.pop("flow"),)
    if name == "levels" and "t_end" in kwargs:
        from odeflow.data import validate_positive

        t_end = validate_positive(kwargs.pop("t_end"), "t_end")  # nan, inf: named, not raw
        kwargs["steps"] = max(1, round(t_end))
    return kwargs


def make_figure(name: str, **options):
    """Draw figure ``name`` (a key of :data:`FIGURES`) with the common ``options``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _spec(name).function(**figure_arguments(name, **options))


def _spec(name: str) -> FigureSpec:
    try:
        return FIGURES[name]
    except (KeyError, TypeError):
        raise ValidationError("name", f"unknown figure {name!r}; choose one of "
                              f"{sorted(FIGURES)}") from None
