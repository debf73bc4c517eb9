"""Shared look of the figures: the Okabe-Ito palette and small axis helpers.

Every plot function of :mod:`odeflow.plots` draws on Axes it is given or on a
new :class:`matplotlib.figure.Figure` made by :func:`new_figure`. The figure is
built without :mod:`matplotlib.pyplot`, so no GUI backend is needed (plots
render headless) and no figure is left registered with pyplot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from odeflow.errors import ValidationError
from odeflow.io import atomic_write

#: The Okabe-Ito colour-blind-safe palette (Okabe and Ito, 2008), by name.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

#: Order in which series take colours (yellow last: it is faint on white).
SERIES_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                  "#000000", "#F0E442")

#: Colour of reference lines (asymptotes, transition times).
REFERENCE_COLOUR = "#555555"

#: Perceptually uniform, colour-blind-safe colour map for heat maps.
HEATMAP_CMAP = "cividis"

#: Default size of one panel, inches.
PANEL_SIZE = (4.6, 3.6)


def series_colour(i: int) -> str:
    """Colour of the ``i``-th series (cycles through :data:`SERIES_COLOURS`)."""
    return SERIES_COLOURS[i % len(SERIES_COLOURS)]


def new_figure(ncols: int = 1, nrows: int = 1, panel_size=PANEL_SIZE, **subplot_kw):
    """A new figure with a grid of panels, created without :mod:`matplotlib.pyplot`.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : list of matplotlib.axes.Axes
        Flattened, row by row.
    """
    fig = Figure(figsize=(panel_size[0] * ncols, panel_size[1] * nrows), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, list(grid.ravel())


def single_axes(ax: Axes | None, panel_size=PANEL_SIZE):
    """``(figure, ax)``: the given Axes and its figure, or a new one-panel figure."""
    if ax is None:
        fig, (ax,) = new_figure(1, 1, panel_size)
        return fig, ax
    if not isinstance(ax, Axes):
        raise ValidationError("ax", f"must be a matplotlib Axes, got {type(ax).__name__}")
    return ax.figure, ax


def panel_axes(axes, count: int, panel_size=PANEL_SIZE):
    """``(figure, axes)`` for a figure of ``count`` panels.

    ``axes`` is ``None`` (a new figure with ``count`` panels side by side) or a
    sequence of ``count`` Axes (all drawn on; the figure is the first one's).
    """
    if axes is None:
        return new_figure(count, 1, panel_size)
    if isinstance(axes, Axes):
        axes = [axes]
    if isinstance(axes, np.ndarray):
        axes = list(axes.ravel())
    if not isinstance(axes, Sequence) or len(axes) != count \
            or not all(isinstance(a, Axes) for a in axes):
        raise ValidationError("axes", f"must be a sequence of {count} matplotlib Axes, "
                              f"got {axes!r:.80}")
    return axes[0].figure, list(axes)


def mark_time(ax: Axes, t: float, label: str | None = None, colour: str = REFERENCE_COLOUR):
    """A dotted vertical line at time ``t`` (e.g. the transition time ``t_0``)."""
    return ax.axvline(t, color=colour, linestyle=":", linewidth=1.2, label=label)


def log_times(t_start: float, t_end: float, points: int = 200) -> np.ndarray:
    """``points`` log-spaced times in ``[t_start, t_end]`` for curves on a log time axis.

    Raises
    ------
    ValidationError
        (field ``t_end``) when the span cannot carry a log axis: ``t_start``
        not a positive normal number (e.g. ``t_end / 1000`` underflowed to 0 for
        ``t_end = 5e-324``), or ``t_end <= t_start``.
    """
    tiny = float(np.finfo(float).tiny)
    if not (np.isfinite(t_start) and np.isfinite(t_end) and tiny <= t_start < t_end):
        raise ValidationError("t_end", f"a log time axis from {t_start:g} to {t_end:g} cannot "
                              "be drawn; choose a larger t_end")
    return np.geomspace(t_start, t_end, points)


def finish_axes(ax: Axes, xlabel: str, ylabel: str, title: str | None = None,
                legend: bool = True, **legend_kw) -> None:
    """Axis labels, optional title, light grid and a legend (if anything is labelled).

    The legend has a white box (:data:`LEGEND_FRAME`), so a curve passing behind it
    does not run through its text; ``legend_kw`` override it and place it.
    """
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    ax.grid(True, which="major", alpha=0.3, linewidth=0.6)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(**{**LEGEND_FRAME, **legend_kw})


#: The legends' box: white, opaque, a light edge.
LEGEND_FRAME = {"fontsize": "small", "frameon": True, "framealpha": 1.0, "facecolor": "white",
                "edgecolor": "#bbbbbb"}


#: Largest figure odeflow renders, in pixels (about 400 MB of RGBA).
MAX_PIXELS = 10**8
#: Smallest resolution: FreeType refuses a glyph smaller than one pixel ("invalid ppem");
#: 20 keeps every font size of the figures (xx-small, 5.8 pt) above 1.6 pixels.
MIN_DPI = 20


def save_figure(fig: Figure, path, dpi: int = 130) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix: ``.png``, ``.pdf``, ``.svg``).

    Written through :func:`odeflow.io.atomic_write` (symlinks followed, no
    debris, an unwritable path is a ValidationError). ``dpi`` is refused when
    the image would exceed :data:`MAX_PIXELS`.
    """
    path = Path(path)
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in ("png", "pdf", "svg"):
        raise ValidationError("out", f"must end in .png, .pdf or .svg, got {str(path)!r}")
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) \
            or not MIN_DPI <= dpi < float("inf"):
        raise ValidationError("dpi", f"must be a finite number >= {MIN_DPI} (below it the text "
                              f"cannot be rendered), got {dpi!r}")
    width, height = fig.get_size_inches()
    pixels = width * height * float(dpi) ** 2
    if pixels > MAX_PIXELS:
        largest = int((MAX_PIXELS / (width * height)) ** 0.5)
        raise ValidationError("dpi", f"{dpi!r} makes a {width * dpi:.0f} x {height * dpi:.0f} "
                              f"pixel image; at most {largest} for this figure")
    atomic_write(path, lambda fh: fig.savefig(fh, format=suffix, dpi=dpi), field="out")
    return path


def label_log_ticks(ax: Axes, values, axis: str = "x") -> None:
    """Major ticks exactly at ``values`` labelled ``%g``, no minor ticks (log axes of rates)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(np.asarray(values, dtype=float)))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_locator(NullLocator())


#: Largest end of a log axis left to matplotlib's tick locator: past it the locator's
#: decades (it reaches one stride beyond the end) overflow float64 (about 1.8e308).
LOG_AXIS_SAFE_END = 1e250


def bounded_log_ticks(ax: Axes, low: float, high: float, axis: str = "x",
                      count: int = 7) -> None:
    """Decade ticks of a log axis ending past :data:`LOG_AXIS_SAFE_END`, computed here.

    At most ``count`` ticks ``10^k`` in ``[low, high]`` (labelled ``10^k``), no
    minor ticks; an axis ending below the limit keeps matplotlib's ticks.
    """
    if not high > LOG_AXIS_SAFE_END:
        return
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    first, last = int(np.ceil(np.log10(low))), int(np.floor(np.log10(high)))
    stride = max(1, int(np.ceil((last - first) / max(count - 1, 1))))
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(10.0 ** np.arange(first, last + 1, stride)))
    target.set_major_formatter(FuncFormatter(
        lambda v, _pos: f"$10^{{{int(round(np.log10(v)))}}}$" if v > 0 else ""))
    target.set_minor_locator(NullLocator())


#: Legend placement under a panel.
LEGEND_BELOW = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.18)}
