"""The Scan and Snap checks of ``odeflow verify``: closed forms CF1-CF6 against scipy.

Every closed form in :mod:`odeflow.analysis.closed_forms` is derived with sympy in
``derivations/`` and checked there by substitution. This module checks the
numbers: it integrates the ODE each closed form solves with
:func:`scipy.integrate.solve_ivp` (stiff method, tight tolerances) and measures
the largest relative difference over a log-spaced grid of times,
``t in [1e-3, 1e9]`` by default (Tian, Wang, Chen and Du, "Scan and Snap",
NeurIPS 2023):

=====  ==========================================================  ===================
check  numeric side                                                closed form
=====  ==========================================================  ===================
CF1    ``h(t)`` of Eqn 44 (solve_ivp; Level R margins)             Lemma 6, Eqn 45
CF2    crossing ``exp(h) = M - 1`` located by a solve_ivp event    Lemma 9, Theorem 1b
CF3    ``Gamma = int gamma`` integrated as a state                 Eqn 128
CF4    relative gain and Eqn 11 invariant of Level R runs          Theorem 3, Eqn 11
CF5    ``ln(1 + chi_l0)`` and ``B_n`` of a Level R run             Eqn 12
CF6    ``z_c`` and ``B`` of the Sec. 6 system                      Thm 4, Eqns 13-14,
                                                                   124, 129
=====  ==========================================================  ===================

Relative error is ``max_t |numeric - closed| / max(|closed|, floor)``. The
floor is zero where the quantity is strictly positive on the grid (``h``,
``Gamma``, ``B``, ``-z_c``, ``t_0``). Two quantities start at zero and are
formed from differences of O(1) numbers, so their round-off is absolute:

- the relative gain ``r_{l/l'|n} = R(t) - R(0)``, ``R = f^_l^2 / f^_l'^2``,
  has round-off ``~ eps R(0)``, and its closed form ``(R(0) - 1) chi_l``
  inherits the round-off ``~ eps |z_l(0)|`` of ``chi_l = exp(2 (z_l(t) -
  z_l(0))) - 1``, i.e. ``~ eps |R(0) - 1| |z_l(0)|``; its floor is
  ``1e-6 max(R(0), 1)``;
- the Eqn 11 invariant ``I_l = chi_l / ((1 + chi_l) f^_l(0)^2)`` has
  round-off ``~ eps |z_l(0)| / f^_l(0)^2``; its floor is
  ``1e-6 max_l 1/f^_l(0)^2`` over the distinct tokens of the class.

Below the floor the comparison is absolute (scaled by the floor). The
absolute tolerance of the integrator defaults to ``1e-30``: the quantities
checked reach ``1e-15`` or less at ``t = 1e-3`` (``Gamma ~ eta_Y pi t^2 / 2``,
attention logits ``~ eta_Z eta_Y t^2``), so any ``atol`` that is not far below
``rtol`` times those values would make the integrator's error control
absolute there and the relative error meaningless (with ``atol = 1e-12``,
``Gamma`` is off by ``1e-7 .. 1e-5`` at ``t = 1e-3``).

The checks are registered as :data:`SCAN_SNAP_CHECKS`; :func:`odeflow.analysis.verification.verify`
runs them (``odeflow verify`` prints its table). Their inputs (the reference
integration of Eqn 44 and the data models) are
:mod:`odeflow.analysis.checks_scan_snap_inputs`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from odeflow.analysis import closed_forms
from odeflow.analysis.check_registry import CheckFamily, CheckResult, CheckSettings, relative_error
from odeflow.analysis.checks_scan_snap_inputs import (
    integrate_margin,
    random_data_model,
    snap_data_model,
)
from odeflow.analysis.verification import time_grid
from odeflow.data import DataModel
from odeflow.fields.snap import snap_parameters
from odeflow.solver import solve, solve_snap

__all__ = ["CHECKS", "SCAN_SNAP_CHECKS"]

#: Floors of the quantities that start at zero, relative to their natural O(1) scale.
GAIN_FLOOR = 1e-6
INVARIANT_FLOOR = 1e-6
#: A common-token logit counts as "not growing" (Eqn 12) if it never rises above
#: its initial value by more than this.
COMMON_GROWTH_ALLOWANCE = 1e-12

#: Decoder settings ``(M, eta_Y, pi)`` of CF1-CF3: the shared-query-small vocabulary, two
#: large vocabularies and the smallest one (``M = 2``, where ``t_0 = 0``).
MARGIN_SETTINGS = ((30, 1.0, 0.5), (10_000, 1.0, 0.5), (1_000_000, 10.0, 0.05), (2, 0.3, 1.0))
#: Learning rates of the Level R runs (CF1, CF3-CF5): ``eta_Z`` comparable to
#: ``eta_Y`` so that the distinct-token logits move by O(1).
SYN_SMALL_RATES = (1.0, 1.0)
RANDOM_MODEL_RATES = (0.5, 2.0)
#: Parameter sets ``(M, eta_Y, eta_Z, pi, a, z_c(0))`` of CF6 given directly.
SNAP_SETTINGS = ((30, 1.0, 1.0, 0.5, 0.5, 0.0), (10_000, 2.0, 0.5, 0.1, 2.0, -0.5))
#: Learning rates of the CF6 run whose ``a`` comes from a data model.
SNAP_MODEL_RATES = (1.0, 3.0)

#: The Scan-and-Snap checks in table order (every registered check:
#: :func:`odeflow.analysis.check_registry.registered_checks`).
CHECKS = ("CF1", "CF2", "CF3", "CF4", "CF5", "CF6")


def _fmt(x: float) -> str:
    """Short number for the parameter column: 30, 1e+04, 0.5."""
    return f"{x:g}"


class _Context:
    """Settings shared by the checks and the Level R runs they reuse."""

    def __init__(self, settings: CheckSettings):
        self.rtol, self.atol = settings.rtol, settings.atol
        self.method, self.tolerance = settings.method, settings.tolerance
        self.t_grid = time_grid(settings.t_min, settings.t_max, settings.points_per_decade)
        self.t_with_zero = np.concatenate([[0.0], self.t_grid])
        self.seed = settings.seed
        self._margins: dict = {}
        self._reduced: dict = {}

    def margin(self, M, eta_y, pi) -> dict:
        key = (M, eta_y, pi)
        if key not in self._margins:
            self._margins[key] = integrate_margin(M, eta_y, pi, self.t_grid, self.rtol,
                                                  self.atol, self.method)
        return self._margins[key]

    def reduced(self, name: str):
        """Level R trajectory of ``"shared-query-small"`` or ``"random"``, with ``t[0] = 0``."""
        if name not in self._reduced:
            if name == "shared-query-small":
                data, z0 = DataModel.preset("shared-query-small"), None
                eta_y, eta_z = SYN_SMALL_RATES
            else:
                data, z0 = random_data_model(self.seed)
                eta_y, eta_z = RANDOM_MODEL_RATES
            self._reduced[name] = solve(data, flow="reduced", eta_y=eta_y, eta_z=eta_z,
                                        t_span=(0.0, float(self.t_grid[-1])),
                                        t_eval=self.t_with_zero, method=self.method,
                                        rtol=self.rtol, atol=self.atol, start=(None, z0),
                                        progress=False)
        return self._reduced[name]

    def label(self, name: str) -> str:
        eta_y, eta_z = SYN_SMALL_RATES if name == "shared-query-small" else RANDOM_MODEL_RATES
        model = name if name == "shared-query-small" else f"random(seed={self.seed})"
        return f"{model}, Level R, eta_y={_fmt(eta_y)}, eta_z={_fmt(eta_z)}"


def _solver_stats(stats: dict) -> dict:
    return {k: stats[k] for k in ("method", "nfev", "njev", "nlu", "wall_time") if k in stats}


def _margin_label(M, eta_y, pi) -> str:
    return f"Eqn 44 solve_ivp, M={_fmt(M)}, eta_y={_fmt(eta_y)}, pi={_fmt(pi)}"


# ---------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------
def _check_cf1(ctx: _Context) -> list[CheckResult]:
    """CF1: ``h(t)`` integrated vs :func:`closed_forms.decoder_margin` (Lemma 6, Eqn 45)."""
    return _margin_checks(ctx, "CF1", "h", "Lemma 6, Eqn 45", closed_forms.decoder_margin,
                          "margin", lambda traj, pi: (
                              f"Level R margins of {traj.data.num_classes} classes, "
                              f"pi_n in [{pi.min():.3g}, {pi.max():.3g}]", {"pi": pi}))


def _margin_checks(ctx: _Context, check: str, key: str, ref: str, closed_form: Callable,
                   series: str, level_r_note: Callable) -> list[CheckResult]:
    """Rows of CF1 or CF3: ``key`` of the Eqn 44 integration at :data:`MARGIN_SETTINGS`, and
    the per-class Level R ``series``, against ``closed_form(t, M, eta_y, pi)``."""
    rows = []
    for M, eta_y, pi in MARGIN_SETTINGS:
        run = ctx.margin(M, eta_y, pi)
        first, last = run[key][0], run[key][-1]
        rows.append(CheckResult(
            check, f"{key}(t)", ref, _margin_label(M, eta_y, pi),
            relative_error(run[key], closed_form(ctx.t_grid, M, eta_y, pi)), ctx.tolerance,
            note=f"{key} from {first:.3g} to {last:.3g}",
            details={f"{key}_range": [first, last], "solver": run["stats"]}))
    for name in ("shared-query-small", "random"):
        traj = ctx.reduced(name)
        pi = np.asarray(traj.data.weights)
        closed = closed_form(ctx.t_grid[:, None], traj.data.vocab_size, traj.meta["eta_y"],
                             pi[None, :])
        note, details = level_r_note(traj, pi)
        rows.append(CheckResult(
            check, f"{key}_n(t), every class", ref, ctx.label(name),
            relative_error(np.asarray(traj.series[series])[1:], closed), ctx.tolerance,
            note=note, details={**details, "solver": _solver_stats(traj.stats)}))
    return rows


def _check_cf2(ctx: _Context) -> list[CheckResult]:
    """CF2: the crossing ``exp(h) = M - 1`` vs :func:`closed_forms.transition_time`."""
    rows = []
    for M, eta_y, pi in MARGIN_SETTINGS:
        if M <= 2:  # t_0 = 0: exp(h) = 1 = M - 1 at t = 0
            continue
        run = ctx.margin(M, eta_y, pi)
        closed = closed_forms.transition_time(M, eta_y, pi)
        rows.append(CheckResult(
            "CF2", "t_0: exp(h) = M-1", "Lemma 9, Thm 1b", _margin_label(M, eta_y, pi),
            relative_error(run["t0"], closed), ctx.tolerance,
            note=f"t_0 = {run['t0']:.10g} (solve_ivp event) vs {float(closed):.10g}",
            details={"t0_numeric": run["t0"], "t0_closed_form": float(closed),
                     "solver": run["stats"]}))
    return rows


def _check_cf3(ctx: _Context) -> list[CheckResult]:
    """CF3: ``Gamma`` integrated as a state vs :func:`closed_forms.gamma_integral` (Eqn 128)."""
    return _margin_checks(ctx, "CF3", "Gamma", "Eqn 128", closed_forms.gamma_integral,
                          "gamma_integral",
                          lambda traj, pi: ("Level R accumulators dGamma_n/dt = s_n h_n", {}))


def _distinct_pairs(data: DataModel):
    """``(n, l, l')`` for every ordered pair of distinct tokens of every class."""
    for n in data.next_tokens:
        tokens = data.distinct_tokens(int(n))
        for l in tokens:
            for lp in tokens:
                if l != lp:
                    yield int(n), int(l), int(lp)


def _check_cf4(ctx: _Context) -> list[CheckResult]:
    """CF4: relative gain (Eqn 11) and the invariant ``chi_l / ((1 + chi_l) f^_l(0)^2)``."""
    rows = []
    for name in ("shared-query-small", "random"):
        traj = ctx.reduced(name)
        data = traj.data
        initial = {int(n): traj.features(int(n))[0] for n in data.next_tokens}
        growth = {}
        gain_error, gain_error_above, n_pairs = 0.0, 0.0, 0
        for n, l, lp in _distinct_pairs(data):
            if (n, l) not in growth:
                growth[n, l] = traj.growth_factor(n, l)
            chi = growth[n, l]
            f0_l, f0_lp = initial[n][l], initial[n][lp]
            numeric = traj.relative_gain(n, l, lp)[1:]
            closed = closed_forms.relative_gain(chi[1:], f0_l, f0_lp)
            floor = GAIN_FLOOR * max((f0_l / f0_lp) ** 2, 1.0)
            gain_error = max(gain_error, relative_error(numeric, closed, floor))
            above = np.abs(closed) >= 1e4 * floor  # far from the floor: integration error
            if np.any(above):
                gain_error_above = max(gain_error_above,
                                       relative_error(numeric[above], closed[above]))
            n_pairs += 1
        chi_all = np.array([growth[key][1:] for key in sorted(growth)])
        chi_range = [float(chi_all.min()), float(chi_all.max())]
        rows.append(CheckResult(
            "CF4", "r_{l/l'|n}(t)", "Theorem 3, Eqn 11", ctx.label(name), gain_error,
            ctx.tolerance, floor="1e-6 R0",
            note=f"{n_pairs} ordered distinct-token pairs over {data.num_classes} classes; "
                 f"chi_l covers [{chi_range[0]:.2e}, {chi_range[1]:.3g}]; rel err where "
                 f"|r| >= 1e4 floor: {gain_error_above:.1e}",
            details={"pairs": n_pairs, "chi_range": chi_range,
                     "max_rel_error_far_above_floor": gain_error_above,
                     "solver": _solver_stats(traj.stats)}))

        spread, spread_at_end = 0.0, 0.0
        for n in data.next_tokens:
            n = int(n)
            tokens = data.distinct_tokens(n)
            f0 = initial[n][tokens]
            chi = np.array([growth[n, int(l)][1:] for l in tokens])
            invariant = chi / ((1.0 + chi) * f0[:, None] ** 2)
            mean = invariant.mean(axis=0)
            floor = INVARIANT_FLOOR * float(np.max(1.0 / f0**2))
            # every token's invariant against the class mean (the common value)
            spread = max(spread, relative_error(invariant, mean[None, :], floor))
            spread_at_end = max(spread_at_end, float(np.ptp(invariant[:, -1]) / abs(mean[-1])))
        rows.append(CheckResult(
            "CF4", "chi_l/((1+chi_l) f^_l(0)^2) spread", "Theorem 3, Eqn 11", ctx.label(name),
            spread, ctx.tolerance, floor="1e-6 I0",
            note=f"max over classes, tokens and t of |I_l - mean_l I_l| / max(mean, floor); "
                 f"(max-min)/mean at t_max = {spread_at_end:.1e}",
            details={"spread_at_t_max": spread_at_end, "solver": _solver_stats(traj.stats)}))
    return rows


def _check_cf5(ctx: _Context) -> list[CheckResult]:
    """CF5: ``exp(2 f^_l0(0)^2 B_n) <= 1 + chi_l0 <= exp(2 B_n)`` (Eqn 12).

    On shared-query-small.
    """
    rows = []
    traj = ctx.reduced("shared-query-small")
    data = traj.data
    for n in data.next_tokens:
        n = int(n)
        query = int(data.classes[data.class_index(n)].query_token)
        tokens = data.distinct_tokens(n)
        f0_all = traj.features(n)[0]
        order = np.argsort(f0_all[tokens])[::-1]
        l0 = int(tokens[order[0]])
        dominance = float(f0_all[l0] / f0_all[tokens[order[1]]]) if tokens.size > 1 else math.inf
        common = np.intersect1d(data.common_tokens(), np.flatnonzero(data.probs(n) > 0))
        z = traj.logits(query)
        common_growth = float(np.max(z[:, common] - z[0, common])) if common.size else 0.0
        conditions = dominance > 1.0 and common_growth <= COMMON_GROWTH_ALLOWANCE

        log_growth = np.log1p(traj.growth_factor(n, l0))[1:]  # ln(1 + chi_l0)
        B = traj.B(n)[1:]
        lower, upper = closed_forms.dominant_bounds(B, f0_all[l0], log=True)
        lower, upper = np.asarray(lower), np.asarray(upper)
        violation = np.maximum(lower - log_growth, log_growth - upper) / log_growth
        worst = float(np.max(violation))
        slack_lower = (log_growth - lower) / log_growth
        slack_upper = (upper - log_growth) / log_growth
        rows.append(CheckResult(
            "CF5", "bounds on ln(1+chi_l0)", "Eqn 12", f"{ctx.label('shared-query-small')}, n={n}",
            max(worst, 0.0), ctx.tolerance, conditions_met=conditions,
            note=f"n={n}: l0={l0} dominant (f^_l0(0)/next = {dominance:.4f}); common logits "
                 f"max rise {common_growth:.1e} ({'ok' if conditions else 'CONDITIONS FAIL'}); "
                 f"worst signed violation {worst:.1e}; slack lower "
                 f"[{slack_lower.min():.1e}, {slack_lower.max():.3f}], upper "
                 f"[{slack_upper.min():.3f}, {slack_upper.max():.3f}]; "
                 f"1+chi_l0(t_max) = {math.exp(log_growth[-1]):.3f}",
            details={"l0": l0, "dominance_ratio": dominance, "common_max_rise": common_growth,
                     "worst_signed_violation": worst,
                     "slack_lower_range": [slack_lower.min(), slack_lower.max()],
                     "slack_upper_range": [slack_upper.min(), slack_upper.max()],
                     "slack_at_t_max": [slack_lower[-1], slack_upper[-1]],
                     "B_at_t_max": B[-1], "one_plus_chi_at_t_max": math.exp(log_growth[-1])}))
    return rows


def _check_cf6(ctx: _Context) -> list[CheckResult]:
    """CF6: the Sec. 6 system vs :func:`closed_forms.snap_common_logit` and ``snap_B``."""
    runs = []
    for M, eta_y, eta_z, pi, a, zc0 in SNAP_SETTINGS:
        runs.append(((M, eta_y, eta_z, pi, a, zc0),
                     {"a": a, "pi": pi, "vocab_size": M, "zc0": zc0}, None,
                     f"M={_fmt(M)}, eta_y={_fmt(eta_y)}, eta_z={_fmt(eta_z)}, pi={_fmt(pi)}, "
                     f"a={_fmt(a)}, zc0={_fmt(zc0)}"))
    data = snap_data_model()
    p = snap_parameters(data)
    eta_y, eta_z = SNAP_MODEL_RATES
    runs.append(((p["vocab_size"], eta_y, eta_z, p["pi"], p["a"], p["zc0"]), {}, data,
                 f"snap_data_model (a={p['a']:.4g}), eta_y={_fmt(eta_y)}, eta_z={_fmt(eta_z)}"))
    rows = []
    for (M, eta_y, eta_z, pi, a, zc0), direct, data, label in runs:
        res = solve_snap(data, eta_y=eta_y, eta_z=eta_z, t_span=(0.0, float(ctx.t_grid[-1])),
                         t_eval=ctx.t_with_zero, method=ctx.method, rtol=ctx.rtol,
                         atol=ctx.atol, progress=False, **direct)
        t = ctx.t_grid
        zc = res.common_logit[1:]
        B = res.B[1:]
        closed_zc = closed_forms.snap_common_logit(t, M, eta_y, eta_z, pi, a, zc0)
        closed_B = closed_forms.snap_B(t, M, eta_y, eta_z, pi, a, zc0)
        stats = _solver_stats(res.stats)
        rows.append(CheckResult(
            "CF6", "z_c(t)", "Thm 4, Eqns 13, 124", label, relative_error(zc, closed_zc),
            ctx.tolerance, note=f"z_c from {zc[0]:.3g} to {zc[-1]:.3g}",
            details={"zc_range": [zc[0], zc[-1]], "solver": stats}))
        rows.append(CheckResult(
            "CF6", "B(t)", "Thm 4, Eqns 14, 129", label, relative_error(B, closed_B),
            ctx.tolerance, note=f"B from {B[0]:.3g} to {B[-1]:.3g}",
            details={"B_range": [B[0], B[-1]], "solver": stats}))
    return rows


_CHECK_FUNCTIONS: dict[str, Callable[[_Context], list[CheckResult]]] = {
    "CF1": _check_cf1, "CF2": _check_cf2, "CF3": _check_cf3, "CF4": _check_cf4,
    "CF5": _check_cf5, "CF6": _check_cf6}

_CHECK_TITLES = {"CF1": ("h(t)", "Lemma 6, Eqn 45"), "CF2": ("t_0", "Lemma 9, Thm 1b"),
                 "CF3": ("Gamma(t)", "Eqn 128"), "CF4": ("r_{l/l'|n}(t)", "Theorem 3, Eqn 11"),
                 "CF5": ("bounds on ln(1+chi_l0)", "Eqn 12"),
                 "CF6": ("z_c(t), B(t)", "Thm 4, Eqns 13-14")}

#: The Scan-and-Snap family's checks in the registry of ``odeflow verify``.
SCAN_SNAP_CHECKS = CheckFamily(
    "scan_snap", _CHECK_TITLES, _Context, lambda ctx, name: _CHECK_FUNCTIONS[name](ctx))


