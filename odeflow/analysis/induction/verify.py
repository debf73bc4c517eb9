"""``odeflow verify`` checks of the induction-head family: I_S, CF-IH1, CF-IH2.

Registered with :mod:`odeflow.analysis.check_registry` (no Scan-and-Snap module
is imported). Each check compares a closed form of
:mod:`odeflow.analysis.induction.closed_forms` with an independent numeric
computation on the presets ``ih-point`` (the point-mass kernel, exact) and
``ih-paper`` (the Dirichlet sample):

======  ===================================================================  ===============
check   numeric side                                                         closed form
======  ===================================================================  ===============
I_S     window-pair pairing ``<K_S, G>`` (:func:`kernel_information`)        ``I_S``, ``J_S``
CF-IH1  scipy integration of the replicator ODE with a varying ``a(t)``      replicator
CF-IH2  window sum of ``y`` over every key window; its complex-step ``dL/da``  mixture, ``L'``
CF-IH2  scipy integration of ``a' = -eta_a L'(a)`` to ``t = 1e12``            ``a(t)`` asymptote
======  ===================================================================  ===============

Beside these, the family's own levels are run through :func:`odeflow.solve`:
CF-IH1's stage 1 of ``flow="population"`` (``c`` moves, ``w`` and ``a`` fixed)
against the replicator with the soft-copier coefficients, at ``a = 0.01`` and
``0.005`` (the error must halve), and CF-IH2's ``flow="copier"`` and sharp
``flow="population"`` runs at ``p = delta_S*`` with only ``a`` moving against
the 1-D ODE (solver tolerance).

The numeric sides written without :mod:`odeflow.fields` are
:mod:`odeflow.analysis.induction.references`.

The asymptote row on ``ih-point`` measures ``r = -L'(a) e^{2a} / (2C)`` at the
end of the 1-D run (``-> 1``) and the slope of ``a`` in ``ln t`` (``-> 1/2``);
its note also gives the slope the 1-D ODE shows on ``ih-paper``, whose
Dirichlet kernels have entries down to ``1e-35`` so that its asymptote
(``C ~ 1e31``) lies beyond any practical time.
"""

from __future__ import annotations

import numpy as np

from odeflow.analysis.check_registry import (
    CheckFamily,
    CheckResult,
    CheckSettings,
    relative_error,
)
from odeflow.analysis.induction import closed_forms as cf
from odeflow.analysis.induction.references import (
    integrate_classifier,
    integrate_replicator,
    integrate_selector,
    subset_matches,
    window_sum_loss,
    window_sum_loss_of_kernel,
    window_sum_prediction,
)
from odeflow.data.induction import InductionData, markov, subset_label
from odeflow.solver import solve

__all__ = ["INDUCTION_CHECKS", "PRESETS", "integrate_classifier", "integrate_replicator",
           "integrate_selector", "subset_matches", "window_sum_loss", "window_sum_loss_of_kernel",
           "window_sum_prediction"]

#: Presets every check runs on.
PRESETS = ("ih-point", "ih-paper")
#: Classifier weights at which the mixture is compared with the window sum.
MIXTURE_A = (0.01, 1.0, 5.0, 20.0)
#: Stage-1 run of the replicator check: selector rate and ``a(t) = A0 (1 + 0.5 sin t)``.
REPLICATOR_ETA_C, REPLICATOR_A0 = 1.0, 0.01
#: kappa reached at the end of the replicator run.
REPLICATOR_KAPPA_END = 200.0
#: Stage-1 runs of the full flow (all orders in a): a, then a halved; kappa * spread(I) reached.
FIRST_ORDER_A, FIRST_ORDER_SPREAD = (0.01, 0.005), 40.0
#: Accepted range of error(a/2) / error(a): the error must shrink linearly with a.
FIRST_ORDER_RATIO = (0.4, 0.6)
#: Preset of the rows that run ``odeflow.solve`` of the family's population flow
#: (``ih-point``: a small model, so that ``odeflow verify`` stays quick).
POPULATION_PRESET = "ih-point"
#: Copier logits that make the population flow's copier exact to round-off (e^-40).
SHARP_LOGIT = 40.0
#: Stage-3 flows compared with the 1-D ODE: rate, end and output times.
STAGE3_T_END = 1e3
#: Stage-3 run: rate, start and end of the 1-D classifier ODE.
CLASSIFIER_ETA_A, CLASSIFIER_A0, CLASSIFIER_T_END = 1.0, 0.01, 1e12
#: Largest |r - 1| and |slope - 1/2| the asymptote row accepts at t = CLASSIFIER_T_END.
ASYMPTOTE_TOLERANCE = 1e-3

TITLES = {"I_S": ("I_S, J_S (first order in a)", "stage 1, docs/derivations.md"),
          "CF-IH1": ("p_S(t) (replicator)", "stage 1, docs/derivations.md"),
          "CF-IH2": ("y, loss'(a), a(t) (stage 3)", "stage 3, docs/derivations.md")}


class _Context:
    """Settings and preset data models shared by the induction checks of one run."""

    def __init__(self, settings: CheckSettings):
        self.settings = settings
        self._models: dict = {}

    def model(self, name: str):
        if name not in self._models:
            self._models[name] = InductionData.preset(name)
        return self._models[name]


# ---------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------
def _check_information(ctx: _Context) -> list[CheckResult]:
    rows = []
    for name in PRESETS:
        data = ctx.model(name)
        for loss in ("nll", "code"):
            table = cf.information_table(data, loss)
            pairing = cf.kernel_information(data, None, loss)
            keys = list(table)
            closed = np.array([table[s] for s in keys])
            numeric = np.array([pairing[s] for s in keys])
            scale = float(np.max(np.abs(closed)))
            symbol = "I_S" if loss == "nll" else "J_S"
            best = max(table, key=table.get)
            rows.append(CheckResult(
                "I_S", f"{symbol}, every |S| <= D", "stage 1, docs/derivations.md",
                f"{name}, loss={loss}", relative_error(numeric, closed, scale),
                ctx.settings.tolerance, floor="max|I|",
                note=f"{name} {symbol}: " + ", ".join(f"{subset_label(s)} {table[s]:.4g}"
                                                      for s in keys)
                     + f"; argmax {subset_label(best)}",
                details={"table": {subset_label(s): table[s] for s in keys},
                         "argmax": list(best)}))
    return rows


def _check_replicator(ctx: _Context) -> list[CheckResult]:
    s = ctx.settings
    rows = []
    for name in PRESETS:
        data = ctx.model(name)
        table = cf.information_table(data)
        info = np.array(list(table.values()))
        p0 = np.full(info.size, 1.0 / info.size)
        u0 = info.size * 1e-4  # c_S(0) = 0.01 on every subset
        spread = float(np.ptp(info))
        t_end = REPLICATOR_KAPPA_END * u0 / (4 * REPLICATOR_ETA_C * REPLICATOR_A0)

        def a_of_t(t, t_end=t_end):
            return REPLICATOR_A0 * (1.0 + 0.5 * np.sin(6.0 * t / t_end))

        t_eval = np.linspace(0.0, t_end, 201)
        p_num, integral, stats = integrate_replicator(p0, info, REPLICATOR_ETA_C, u0, a_of_t,
                                                      t_eval, s.rtol, s.atol, s.method)
        # kappa from the exact integral of a(t), not from the solver's accumulator
        exact_integral = REPLICATOR_A0 * (t_eval + t_end / 12.0 * (1.0 - np.cos(6.0 * t_eval
                                                                                / t_end)))
        k = 4 * REPLICATOR_ETA_C / u0 * exact_integral
        closed = cf.replicator_weights(p0, info, k)
        best = int(np.argmax(info))
        rows.append(CheckResult(
            "CF-IH1", "p_S(t), replicator ODE", "stage 1, docs/derivations.md",
            f"{name}, eta_c={REPLICATOR_ETA_C:g}, a(t)={REPLICATOR_A0:g}(1+sin/2), p(0) uniform",
            relative_error(p_num, closed, 1e-12), s.tolerance, floor="1e-12",
            note=f"{name}: kappa to {k[-1]:.3g} (kappa * spread of I = {k[-1] * spread:.3g}); "
                 f"p_S* {subset_label(list(table)[best])} from {p_num[0, best]:.3f} to "
                 f"{p_num[-1, best]:.6f}",
            details={"kappa_end": float(k[-1]), "p_best_end": float(p_num[-1, best]),
                     "integral_rel_error": relative_error(integral[1:], exact_integral[1:]),
                     "solver": stats}))
        rows.append(_check_first_order(ctx, name, table))
    rows.append(_check_population_first_order(ctx, POPULATION_PRESET))
    return rows


def _solve_flow(data, flow: str, rates: dict, start, t_eval, settings: CheckSettings):
    """``odeflow.solve`` of one of the family's flows at the verify tolerances."""
    return solve(data, flow=flow, rates=rates, start=start, t_span=(0.0, float(t_eval[-1])),
                 t_eval=t_eval, rtol=max(settings.rtol, 1e-12), atol=1e-14,
                 method=settings.method, progress=False)


def _check_population_first_order(ctx: _Context, name: str) -> CheckResult:
    """Stage 1 of ``flow="population"`` (``c`` moves; ``w`` at init, ``a`` fixed) vs CF-IH1.

    With a soft copier the replicator's coefficients are the window pairings of
    :func:`~odeflow.analysis.induction.closed_forms.kernel_information` at the
    fixed logits ``w(0)``; the error must be ``O(a)``.
    """
    data = ctx.model(name)
    logits = data.initial_copier_logits
    table = cf.kernel_information(data, logits)
    info = np.array(list(table.values()))
    c0 = np.full(info.size, float(data.c0))

    def run(a, t_eval):
        start = np.concatenate([c0, logits.ravel(), [a]])
        traj = _solve_flow(data, "population", {"c": REPLICATOR_ETA_C}, start, t_eval,
                           ctx.settings)
        u = np.sum(traj.c**2, axis=1)
        return traj.subset_weights, u, dict(traj.stats)

    errors, drifts, _, stats = _first_order_errors(info, c0, run)
    ratio = errors[1] / errors[0]
    low, high = FIRST_ORDER_RATIO
    best = max(table, key=table.get)
    return CheckResult(
        "CF-IH1", f"p_S(t): population flow, a={FIRST_ORDER_A[0]:g}",
        "stage 1, docs/derivations.md",
        f"{name}, flow=population (w = w(0) fixed), eta_c={REPLICATOR_ETA_C:g}, a fixed",
        errors[0], FIRST_ORDER_A[0], floor="abs",
        conditions_met=bool(low <= ratio <= high and max(drifts) < 1e-8),
        note=f"{name} population: I_S at w(0) = " + ", ".join(
            f"{subset_label(k)} {v:.4g}" for k, v in table.items() if k)
             + f"; max_t |p - p_CF| = {errors[0]:.3e} at a = {FIRST_ORDER_A[0]:g}, "
             f"{errors[1]:.3e} at a = {FIRST_ORDER_A[1]:g} (ratio {ratio:.4f}); U drift "
             f"{max(drifts):.1e}; selects {subset_label(best)}",
        details={"errors": errors, "ratio": ratio, "u_drift": drifts,
                 "solver": {k: stats.get(k) for k in ("method", "nfev", "wall_time")}})


def _first_order_errors(info: np.ndarray, c0: np.ndarray, run):
    """``max_t |p_flow - p_CF|`` at each ``a`` of :data:`FIRST_ORDER_A`, ``p(0)`` uniform.

    ``run(a, t_eval) -> (p, u, stats)`` integrates stage 1 of a flow (``c``
    moves at rate :data:`REPLICATOR_ETA_C`, ``a`` fixed) to ``kappa * spread(I)
    = FIRST_ORDER_SPREAD``. Returns the errors, the drifts of ``U = sum c^2``,
    the closed form at the end and the last run's statistics.
    """
    p0 = np.full(info.size, 1.0 / info.size)
    u0 = float(np.sum(c0**2))
    errors, drifts, closed, stats = [], [], None, {}
    for a in FIRST_ORDER_A:
        t_end = FIRST_ORDER_SPREAD / np.ptp(info) * u0 / (4 * REPLICATOR_ETA_C * a)
        t_eval = np.linspace(0.0, t_end, 41)
        p_flow, u, stats = run(a, t_eval)
        closed = cf.replicator_weights(p0, info, cf.kappa(t_eval, REPLICATOR_ETA_C, u0, a))
        errors.append(float(np.max(np.abs(p_flow - closed))))
        drifts.append(float(np.max(np.abs(u / u0 - 1))))
    return errors, drifts, closed[-1], stats


def _check_first_order(ctx: _Context, name: str, table: dict) -> CheckResult:
    """The exact-copier flow of ``c`` at fixed ``a`` against CF-IH1: error ``O(a)``."""
    s = ctx.settings
    data = ctx.model(name)
    info = np.array(list(table.values()))
    c0 = np.full(info.size, 0.01)

    def run(a, t_eval):
        return integrate_selector(data, a, REPLICATOR_ETA_C, c0, t_eval, max(s.rtol, 1e-12),
                                  1e-14, s.method)

    errors, drifts, closed, stats = _first_order_errors(info, c0, run)
    ratio = errors[1] / errors[0]
    low, high = FIRST_ORDER_RATIO
    best = int(np.argmax(info))
    return CheckResult(
        "CF-IH1", f"p_S(t): full flow, a={FIRST_ORDER_A[0]:g}", "stage 1, docs/derivations.md",
        f"{name}, exact copier, eta_c={REPLICATOR_ETA_C:g}, c(0)=0.01, a fixed",
        errors[0], FIRST_ORDER_A[0], floor="abs",
        conditions_met=bool(low <= ratio <= high and max(drifts) < 1e-8),
        note=f"{name}: max_t |p_flow - p_CF| = {errors[0]:.3e} at a = {FIRST_ORDER_A[0]:g}, "
             f"{errors[1]:.3e} at a = {FIRST_ORDER_A[1]:g} (ratio {ratio:.4f}, must lie in "
             f"[{low}, {high}]: O(a)); U drift {max(drifts):.1e}; p_S* "
             f"{subset_label(list(table)[best])} -> {closed[best]:.4f}",
        details={"errors": errors, "ratio": ratio, "u_drift": drifts, "solver": stats})


def _check_classifier(ctx: _Context) -> list[CheckResult]:
    s = ctx.settings
    rows = []
    for name in PRESETS:
        data = ctx.model(name)
        subset = cf.selected_subset(data)
        laws = data.window_joint(data.heads)
        tokens = markov.window_tokens(data.vocab_size, data.heads)
        index = np.zeros(len(tokens), int)  # z_q -> z_{q,S*}
        for h in subset:
            index = index * data.vocab_size + tokens[:, h - 1]
        # (1) mixture vs window sum, per query window
        err = 0.0
        for a in MIXTURE_A:
            mixture = cf.mixture_prediction(data, a, subset)
            direct = window_sum_prediction(laws, subset, a)
            err = max(err, relative_error(direct, mixture[:, index]))
        rows.append(CheckResult(
            "CF-IH2", "y(z_q): mixture vs window sum", "stage 3, docs/derivations.md",
            f"{name}, S*={subset_label(subset)}, a in {list(MIXTURE_A)}", err, s.tolerance,
            note=f"{name}: every query window of every kernel ({len(laws)})"))
        # (2) analytic loss'(a) vs complex step of the window-sum loss
        h = 1e-30
        grid = [0.01, 0.5, 2.0, 8.0]
        analytic = cf.classifier_loss_derivative(data, grid, subset)
        stepped = np.array([np.mean(window_sum_loss(laws, subset, a + 1j * h).imag) / h
                            for a in grid])
        value = cf.classifier_loss(data, grid, subset)
        direct = np.array([np.mean(window_sum_loss(laws, subset, a).real) for a in grid])
        rows.append(CheckResult(
            "CF-IH2", "loss(a), loss'(a) vs window sum", "stage 3, docs/derivations.md",
            f"{name}, S*={subset_label(subset)}, a in {grid}",
            max(relative_error(analytic, stepped), relative_error(value, direct)), s.tolerance,
            note=f"{name}: loss' by complex step (h = 1e-30) of the window-sum loss; "
                 f"loss from {value[0]:.4f} to {value[-1]:.4f}"))
    rows += _check_stage3_flows(ctx)
    rows.append(_check_asymptote(ctx))
    return rows


def _check_stage3_flows(ctx: _Context) -> list[CheckResult]:
    """The family's flows at ``p = delta_S*`` with only ``a`` moving vs the 1-D ODE."""
    s = ctx.settings
    t_eval = np.concatenate([[0.0], np.geomspace(1e-2, STAGE3_T_END, 21)])
    rows = []
    runs = [(name, "copier") for name in PRESETS] + [(POPULATION_PRESET, "population")]
    for name, flow in runs:
        data = ctx.model(name)
        subset = cf.selected_subset(data)
        c = np.array([1.0 if sub == subset else 0.0 for sub in data.subsets])
        one_d, _ = integrate_classifier(data, subset, CLASSIFIER_ETA_A, CLASSIFIER_A0, t_eval,
                                        max(s.rtol, 1e-12), 1e-14, s.method)
        if flow == "copier":
            start, label = np.concatenate([c, [CLASSIFIER_A0]]), "flow=copier"
        else:
            logits = np.zeros((data.heads, data.heads))
            logits[:, 0] = SHARP_LOGIT
            start = np.concatenate([c, logits.ravel(), [CLASSIFIER_A0]])
            label = f"flow=population, w+={SHARP_LOGIT:g}, w-=0"
        traj = _solve_flow(data, flow, {"a": CLASSIFIER_ETA_A}, start, t_eval, s)
        rows.append(CheckResult(
            "CF-IH2", "a(t): flow vs 1-D ODE", "stage 3, docs/derivations.md",
            f"{name}, {label}, p=delta_{subset_label(subset)}, only a moves",
            relative_error(traj.a, one_d), s.tolerance,
            note=f"{name} {flow}: a from {one_d[0]:.3g} to {one_d[-1]:.4g} by t = "
                 f"{STAGE3_T_END:g}; loss {traj.loss[0]:.4f} -> {traj.loss[-1]:.4f}",
            details={"a_end": float(one_d[-1]),
                     "solver": {k: traj.stats.get(k) for k in ("method", "nfev", "wall_time")}}))
    return rows


def _check_asymptote(ctx: _Context) -> CheckResult:
    s = ctx.settings
    t_eval = np.concatenate([[0.0], np.geomspace(1.0, CLASSIFIER_T_END, 25)])
    rtol = max(s.rtol, 1e-12)
    data = ctx.model("ih-point")
    subset = cf.selected_subset(data)
    constant, limit = cf.classifier_constant(data, subset)
    a, stats = integrate_classifier(data, subset, CLASSIFIER_ETA_A, CLASSIFIER_A0, t_eval,
                                    rtol, 1e-12)
    ratio = -cf.classifier_loss_derivative(data, a[-1], subset) * np.exp(2 * a[-1]) / (2 * constant)
    slopes = np.diff(a[1:]) / np.diff(np.log(t_eval[1:]))
    asymptote = cf.classifier_asymptote(t_eval[-1], CLASSIFIER_A0, CLASSIFIER_ETA_A, constant)
    error = max(abs(float(ratio) - 1.0), abs(float(slopes[-1]) - 0.5))
    paper = ctx.model("ih-paper")
    paper_subset = cf.selected_subset(paper)
    paper_t = np.concatenate([[0.0], np.geomspace(1.0, 1e4, 5)])
    paper_a, _ = integrate_classifier(paper, paper_subset, CLASSIFIER_ETA_A, CLASSIFIER_A0,
                                      paper_t, rtol, 1e-12)
    paper_slope = np.diff(paper_a[1:]) / np.diff(np.log(paper_t[1:]))
    return CheckResult(
        "CF-IH2", "a(t) asymptote of the 1-D ODE", "stage 3, docs/derivations.md",
        f"ih-point, S*={subset_label(subset)}, eta_a={CLASSIFIER_ETA_A:g}, a0={CLASSIFIER_A0:g}, "
        f"t to {CLASSIFIER_T_END:g}", error, ASYMPTOTE_TOLERANCE,
        note=f"ih-point: C = {constant:.4g}, loss_inf = {limit:.4g}; at t = "
             f"{CLASSIFIER_T_END:g}: a = {a[-1]:.3f} (asymptote {float(asymptote):.3f}), "
             f"-L'(a) e^(2a)/(2C) = {float(ratio):.6f}, slope da/dln t = {slopes[-1]:.5f}; "
             f"ih-paper ({subset_label(paper_subset)}) 1-D ODE slope per decade t = 1..1e4: "
             + ", ".join(f"{x:.3f}" for x in paper_slope),
        details={"C": constant, "loss_inf": limit, "a_end": float(a[-1]),
                 "ratio": float(ratio), "slope_end": float(slopes[-1]),
                 "paper_slopes": paper_slope, "solver": stats})


_CHECKS = {"I_S": _check_information, "CF-IH1": _check_replicator, "CF-IH2": _check_classifier}

#: The induction family's checks in the registry of ``odeflow verify``.
INDUCTION_CHECKS = CheckFamily(
    "induction", TITLES, _Context, lambda ctx, name: _CHECKS[name](ctx), position=1,
    grid=f"each stage on its own times (stage 1 linear to its end; stage 3 log-spaced "
         f"in [0.01, {STAGE3_T_END:g}] and [1, {CLASSIFIER_T_END:g}])")
