"""Decoder margin ``h(t)`` and speed control ``gamma(t)`` (CF1, CF2; paper Fig. 8).

Checks Lemma 6 / Eqn 45 (CF1), the two regimes of Lemma 9 / Theorem 1(b)
(CF2) and the transition time ``t_0``, and sets the discrete recursion of
Lemma 5 beside the continuous flow of Eqn 44 (docs/model.md).
"""

from __future__ import annotations

import math

import numpy as np

from odeflow.analysis.closed_forms import (
    decoder_margin,
    speed_control,
    speed_control_early,
    speed_control_late,
    transition_time,
)
from odeflow.data import validate_positive
from odeflow.data.checks import check_count
from odeflow.errors import ValidationError
from odeflow.plots.style import (
    OKABE_ITO,
    bounded_log_ticks,
    finish_axes,
    log_times,
    mark_time,
    panel_axes,
)

#: Legend placement under a panel (one column).
BELOW = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.17)}


#: Most visits of the Lemma 5 recursion drawn by :func:`plot_margin` (and accepted by
#: :func:`lemma5_margin`).
LEMMA5_MAX_VISITS = 10**6
#: Colours of the closed form, Lemma 5's recursion and the early and late asymptotes.
EXACT_COLOUR, RECURSION_COLOUR = OKABE_ITO["sky_blue"], OKABE_ITO["vermillion"]
EARLY_COLOUR, LATE_COLOUR = OKABE_ITO["bluish_green"], OKABE_ITO["reddish_purple"]


def lemma5_margin(eta_y: float, vocab_size: int, visits: int) -> np.ndarray:
    """Margins ``h_0 .. h_visits`` of the discrete recursion of Lemma 5.

    ``h_{k+1} = h_k + eta_Y M / (exp(h_k) + M - 1)``, ``h_0 = 0``: one gradient
    step of the decoder per visit of the class (Lemma 5). Visit ``k``
    falls at time ``t = k / pi`` when every step draws the class with
    probability ``pi``, which is how it tracks Eqn 44.

    Parameters
    ----------
    eta_y : float
        Decoder step size ``eta_Y``.
    vocab_size : int
        ``M >= 2``.
    visits : int
        Number of steps, ``>= 1``.

    Returns
    -------
    numpy.ndarray, shape (visits + 1,)
    """
    eta_y = validate_positive(eta_y, "eta_y")
    M, visits = check_count(vocab_size, "vocab_size", 2), check_count(visits, "visits")
    if visits > LEMMA5_MAX_VISITS:
        raise ValidationError("visits", f"must be <= {LEMMA5_MAX_VISITS:,} (a Python loop of "
                              f"one step per visit), got {visits:,}")
    h = np.empty(visits + 1)
    h[0] = value = 0.0
    for k in range(1, h.size):
        decay = math.exp(-value)  # eta M / (e^h + M - 1) without overflow
        value += eta_y * M * decay / (1.0 + (M - 1) * decay)
        h[k] = value
    return h


def plot_margin(eta_y: float = 1.0, vocab_size: int = 34, pi: float = 0.5,
                t_end: float | None = None, markers: int = 28, axes=None):
    """``h(t)`` and ``gamma(t)`` on log-log axes: CF1, CF2 asymptotes, ``t_0``, Lemma 5.

    Left panel: the margin ``h(t)`` of Eqn 44 in closed form (CF1, Lemma 6,
    Eqn 45), its early and late forms ``h ~ eta_Y pi t`` and
    ``h ~ ln(eta_Y pi M t)`` (Lemma 9), and the discrete recursion of Lemma 5
    (one marker per visit ``k`` at ``t = k / pi``, log-spaced). Right panel: the
    speed control ``gamma = h (M - 1) / (exp(h) + M - 1)`` (Eqn 9), its two CF2
    asymptotes ``eta_Y pi t (M-1)/M`` and ``(M-1) ln(eta_Y pi M t) / (eta_Y pi M t)``
    (Theorem 1(b)) and the recursion's ``gamma``. Both panels mark
    ``t_0 = (M - 2 + (M-1) ln(M-1)) / (eta_Y pi M)``, where ``exp(h) = M - 1``.
    The defaults are those of the paper's syn-small (``M = 34``, ``pi = 1/2``).

    Parameters
    ----------
    eta_y : float
        Decoder learning rate ``eta_Y``.
    vocab_size : int
        ``M``.
    pi : float
        Class weight ``pi_n``.
    t_end : float, optional
        Right end of the time axis; ``10^4 t_0`` by default.
    markers : int
        Number of Lemma 5 markers (log-spaced visits).
    axes : sequence of two matplotlib Axes, optional
        Where to draw; a new figure by default.

    Returns
    -------
    matplotlib.figure.Figure
    """
    eta_y = validate_positive(eta_y, "eta_y")
    M = check_count(vocab_size, "vocab_size", 2)
    pi = validate_positive(pi, "pi")
    if pi > 1:
        raise ValidationError("pi", f"must be <= 1, got {pi!r}")
    t0 = float(transition_time(M, eta_y, pi))
    t_end = 1e4 * t0 if t_end is None else validate_positive(t_end, "t_end")
    t_start = min(1e-3 * t0, 1e-3 * t_end)
    fig, (ax_h, ax_g) = panel_axes(axes, 2, (5.0, 4.6))
    t = log_times(t_start, t_end, 400)
    curves = {"t": t, "early": t[(t >= t0 / 300.0) & (t <= 3.0 * t0)],
              "late": t[t >= t0 / 3.0], "t0": t0, "t_start": t_start, "t_end": t_end,
              "recursion": _recursion_markers(eta_y, M, pi, t_end, markers)}
    _margin_panel(ax_h, curves, M, eta_y, pi)
    _speed_panel(ax_g, curves, M, eta_y, pi)
    for ax in (ax_h, ax_g):
        # the time axis is exactly [t_start, t_end], without autoscaling's margin, and its
        # ticks stay below the largest float: for t_end = 1e300 both overflowed in exp
        ax.set_xlim(t_start, t_end)
        ax.set_xscale("log")
        bounded_log_ticks(ax, t_start, t_end)
    fig.suptitle(rf"Decoder margin and speed control: $M = {M}$, $\pi = {pi:g}$, "
                 rf"$\eta_Y = {eta_y:g}$", fontsize="medium")
    return fig


def _recursion_markers(eta_y: float, M, pi: float, t_end: float, markers: int):
    """``(t_k, h_k, gamma_k)`` of Lemma 5's recursion at about ``markers`` log-spaced visits.

    Visit ``k`` sits at ``t = k / pi``; the recursion is one Python step per visit,
    so the markers stop at :data:`LEMMA5_MAX_VISITS` visits however long the axis is.
    """
    visits = max(1, min(int(pi * t_end), LEMMA5_MAX_VISITS))
    h_rec = lemma5_margin(eta_y, M, visits)
    k = np.unique(np.geomspace(1, visits, markers).round().astype(int))
    gamma_rec = h_rec[k] * (M - 1) / (np.exp(np.minimum(h_rec[k], 700.0)) + M - 1)
    return k / pi, h_rec[k], gamma_rec


def _margin_panel(ax_h, curves: dict, M, eta_y: float, pi: float) -> None:
    """``h(t)`` (CF1, Eqn 45), its early and late forms (Lemma 9) and Lemma 5's markers."""
    t, early, late, t0 = curves["t"], curves["early"], curves["late"], curves["t0"]
    t_rec, h_rec, _ = curves["recursion"]
    ax_h.plot(t, decoder_margin(t, M, eta_y, pi), color=EXACT_COLOUR, linewidth=3,
              alpha=0.8, label=r"CF1 (Eqn 45): $e^h - 1 + (M-1)h = \eta_Y \pi M t$")
    ax_h.plot(early, eta_y * pi * early, color=EARLY_COLOUR, linestyle="--", linewidth=1.4,
              label=r"early: $h \approx \eta_Y \pi t$")
    ax_h.plot(late, np.log(eta_y * pi * M * late), color=LATE_COLOUR, linestyle="-.",
              linewidth=1.4, label=r"late: $h \approx \ln(\eta_Y \pi M t)$")
    ax_h.plot(t_rec, h_rec, linestyle="none", marker="o", markersize=4.5,
              markerfacecolor="none", color=RECURSION_COLOUR,
              label=r"Lemma 5: $h_{k+1} = h_k + \frac{\eta_Y M}{e^{h_k} + M - 1}$, $t = k/\pi$")
    mark_time(ax_h, t0, label=rf"$t_0 = {t0:.3g}$ ($e^h = M - 1$)")
    ax_h.set_yscale("log")
    finish_axes(ax_h, "time $t$", "decoder margin $h(t)$", "Eqn 44: margin (CF1)",
                **BELOW)


def _speed_panel(ax_g, curves: dict, M, eta_y: float, pi: float) -> None:
    """``gamma(t)`` (Eqn 9), its CF2 asymptotes (Theorem 1(b)) and Lemma 5's markers."""
    t, early, late = curves["t"], curves["early"], curves["late"]
    t_rec, _, gamma_rec = curves["recursion"]
    ax_g.plot(t, speed_control(t, M, eta_y, pi), color=EXACT_COLOUR, linewidth=3,
              alpha=0.8, label=r"$\gamma = h(M-1)/(e^h + M - 1)$ (Eqn 9, CF1)")
    ax_g.plot(early, speed_control_early(early, M, eta_y, pi), color=EARLY_COLOUR,
              linestyle="--", linewidth=1.4, label=r"CF2 early: $\eta_Y \pi t (M-1)/M$")
    ax_g.plot(late, speed_control_late(late, M, eta_y, pi), color=LATE_COLOUR,
              linestyle="-.", linewidth=1.4,
              label=r"CF2 late: $(M-1)\ln(\eta_Y\pi M t)/(\eta_Y \pi M t)$")
    ax_g.plot(t_rec, gamma_rec, linestyle="none", marker="o", markersize=4.5,
              markerfacecolor="none", color=RECURSION_COLOUR, label=r"Lemma 5 recursion")
    mark_time(ax_g, curves["t0"], label=r"$t_0$")
    ax_g.set_yscale("log")
    peak = float(np.max(speed_control(t, M, eta_y, pi)))
    g_end = float(speed_control(curves["t_end"], M, eta_y, pi))
    g_start = float(speed_control_early(curves["t_start"], M, eta_y, pi))
    ax_g.set_ylim(min(g_end, g_start) / 3.0, peak * 5.0)
    finish_axes(ax_g, "time $t$", r"speed control $\gamma(t)$",
                "Theorem 1(b): two stages of $\\gamma$ (CF2)", **BELOW)
