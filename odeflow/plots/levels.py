"""The levels side by side: attention logits ``z_ml(t)`` from Level E, Level R and SGD.

Level E is the population gradient flow (Lemma 1, Eqns 3-4), Level R the
reduced flow of Theorem 1 (Eqns 9-10, 44) and SGD the real training of
Sec. 8 (docs/levels.md) that both approximate.
"""

from __future__ import annotations

import numpy as np

from odeflow.data import DataModel, validate_positive
from odeflow.data.checks import check_count
from odeflow.errors import ValidationError
from odeflow.plots.style import finish_axes, log_times, series_colour, single_axes
from odeflow.solver import solve

#: Line style of each level.
LEVEL_STYLES = {"exact": ("-", 2.2, "Level E (Eqns 3-4)"),
                "reduced": ("--", 1.6, "Level R (Theorem 1)"),
                "sgd": (":", 1.6, "SGD")}


#: Most SGD steps the figure runs (``t_end`` of ``odeflow plot levels``): beyond it the
#: figure would take hours.
MAX_STEPS = 100_000


def sgd_available() -> bool:
    """Whether :func:`odeflow.training.train_sgd` can be imported."""
    try:
        from odeflow.training import train_sgd  # noqa: F401
    except ImportError:
        return False
    return True


def default_tokens(data: DataModel, query_token: int) -> list[int]:
    """A common token and three distinct tokens of the first class of ``m``.

    The first common token in the support of a class of ``m``, then the
    distinct tokens of that class with the smallest, a middle and the largest
    ``c_{l|n}`` (the classes of syn-small mirror each other, so one class
    shows them all).
    """
    classes = data.classes_of_query(query_token)
    support = set()
    for n in classes:
        support.update(np.flatnonzero(data.probs(int(n)) > 0).tolist())
    tokens = [int(c) for c in data.common_tokens() if int(c) in support][:1]
    for n in classes:
        distinct = data.distinct_tokens(int(n))
        if distinct.size:
            ranked = distinct[np.argsort(data.probs(int(n))[distinct], kind="stable")]
            picks = [ranked[0], ranked[ranked.size // 2], ranked[-1]]
            tokens.extend(int(x) for x in dict.fromkeys(picks))
            break
    return tokens


def plot_levels(data: DataModel | None = None, tokens=None, query_token: int | None = None,
                eta_y: float = 1.0, eta_z: float = 5.0, steps: int = 1000,
                sgd: bool | None = None, batch_size: int = 128, seq_len: int = 512,
                seed: int = 0, points: int = 150, ax=None):
    """``z_ml(t)`` for chosen tokens from Level E, Level R and (if available) SGD.

    Colour is the token, line style the level: Level E, the population
    gradient flow (Lemma 1, Eqns 3-4), solid; Level R, the reduced flow of
    Theorem 1 (Eqns 9-10, 44), dashed; minibatch SGD on sampled sequences of
    length ``seq_len`` (Sec. 8; step ``k`` at ``t = k``), dotted. Theorem 2
    predicts distinct-token logits rising and common-token logits falling at
    every level; the gaps between the levels show what Assumption 1(c) (a fast
    decoder) and the finite ``T`` and batch cost.

    Parameters
    ----------
    data : DataModel, optional
        ``syn-small`` by default.
    tokens : sequence of int, optional
        Contextual tokens ``l``; :func:`default_tokens` by default.
    query_token : int, optional
        ``m``; the first query token by default.
    eta_y, eta_z : float
        Learning rates (SGD step sizes).
    steps : int
        SGD steps; the flows are solved on ``[0, steps]``.
    sgd : bool, optional
        Include SGD; by default when :mod:`odeflow.training` is importable.
    batch_size, seq_len, seed : int
        SGD settings.
    points : int
        Log-spaced output times of the flows.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    data = DataModel.preset("syn-small") if data is None else data
    m = int(data.query_tokens[0]) if query_token is None else int(query_token)
    data.query_index(m)
    tokens = _check_tokens(data, m, tokens)
    steps = _check_steps(steps)
    t_end = float(steps)
    validate_positive(eta_y, "eta_y")
    validate_positive(eta_z, "eta_z")
    use_sgd = sgd_available() if sgd is None else bool(sgd)
    t = np.concatenate([[0.0], log_times(min(0.1, 1e-3 * t_end), t_end, points)])
    runs = {flow: solve(data, flow=flow, eta_y=eta_y, eta_z=eta_z, t_span=(0.0, t_end),
                        t_eval=t, progress=False) for flow in ("exact", "reduced")}
    if use_sgd:
        from odeflow.training import train_sgd

        runs["sgd"] = train_sgd(data, eta_y, eta_z, steps, batch_size, seq_len, seed=seed,
                                record=max(1, steps // 1000), progress=False)
    fig, ax = single_axes(ax, (6.4, 4.8))
    for level, traj in runs.items():
        style, width, _ = LEVEL_STYLES[level]
        z = traj.logits(m)
        keep = traj.t > 0
        for i, tok in enumerate(tokens):
            ax.plot(traj.t[keep], z[keep, tok], color=series_colour(i), linestyle=style,
                    linewidth=width)
    _legend_entries(ax, data, tokens, runs, f" (batch {batch_size}, $T = {seq_len}$)")
    ax.set_xscale("log")
    finish_axes(ax, "time $t$ (SGD step $k$ at $t = k$)", rf"attention logit $z_{{{m}l}}(t)$",
                rf"Levels side by side: query $m = {m}$, $\eta_Y = {eta_y:g}$, "
                rf"$\eta_Z = {eta_z:g}$", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _check_tokens(data: DataModel, query_token: int, tokens) -> list[int]:
    """The contextual tokens to draw (:func:`default_tokens` for None), checked to be ids."""
    tokens = default_tokens(data, query_token) if tokens is None else [int(x) for x in tokens]
    if not tokens:
        raise ValidationError("tokens", "needs at least one token")
    for tok in tokens:
        if not 0 <= tok < data.vocab_size:
            raise ValidationError("tokens", f"token {tok} is outside [0, {data.vocab_size})")
    return tokens


def _check_steps(steps) -> int:
    """``steps`` an integer in ``[1, MAX_STEPS]`` (SGD steps; the flows' ``t_end``)."""
    steps = check_count(steps, "steps")
    if steps > MAX_STEPS:
        raise ValidationError("steps", f"must be <= {MAX_STEPS:,} (SGD steps, from t_end), "
                              f"got {steps:,}")
    return steps


def _legend_entries(ax, data: DataModel, tokens: list[int], runs: dict, sgd_note: str) -> None:
    """Legend entries: one per token (colour; its role and ``c_{l|n}``), one per level (style)."""
    groups = {int(n): set(data.distinct_tokens(int(n)).tolist()) for n in data.next_tokens}
    common = set(data.common_tokens().tolist())
    for i, tok in enumerate(tokens):
        if tok in common:
            role = "common"
        else:
            owner = [n for n, toks in groups.items() if tok in toks]
            role = f"distinct to {owner[0]}" if owner else "not in context"
        ax.plot([], [], color=series_colour(i), linewidth=2.2,
                label=rf"$l = {tok}$ ({role}, $c_{{l|n}} = {_prob_text(data, tok)}$)")
    for level in runs:
        style, width, name = LEVEL_STYLES[level]
        if level == "sgd":
            name += sgd_note
        ax.plot([], [], color="black", linestyle=style, linewidth=width, label=name)

def _prob_text(data: DataModel, token: int) -> str:
    """``c_{l|n}`` over the classes whose support holds ``token``, as text."""
    values = sorted({round(float(data.probs(int(n))[token]), 3) for n in data.next_tokens
                     if data.probs(int(n))[token] > 0})
    return "/".join(f"{v:.3g}" for v in values) if values else "0"
