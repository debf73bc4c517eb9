"""Theory of the induction-head family (spec section 10): I_S, J_S, CF-IH1, CF-IH2.

The closed forms of :mod:`odeflow.analysis.induction.closed_forms` against
independent computations written here (enumeration of token sequences,
scipy integration of the ODEs), and the checks of ``odeflow verify``.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from odeflow.analysis.induction import closed_forms as cf
from odeflow.analysis.induction import verify as iv
from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError

#: The authors' notebook kernel (spec section 10), rows x_{i-1} d + x_{i-2}.
POINT_KERNEL = np.array([[0.4992, 0.5008], [0.0081, 0.9919], [0.8004, 0.1996],
                         [0.1080, 0.8920]])


def point_model(heads=2, degree=2) -> InductionData:
    return InductionData(2, 3, heads, degree, prior="point", kernel=POINT_KERNEL)


def dirichlet_model(seed=5, d=3, n=2, heads=3, degree=2, count=3, alpha=0.5) -> InductionData:
    return InductionData(d, n, heads, degree, prior="dirichlet", alpha=alpha,
                         num_kernels=count, seed=seed)


# ---------------------------------------------------------------------------
# an independent brute force: enumerate token sequences
# ---------------------------------------------------------------------------
def brute_laws(kernel, n, length):
    """``{(window, e): probability}`` by enumerating every sequence of length + 1 tokens.

    The stationary law of the last n - 1 tokens comes from power iteration of
    the sequence chain (not a linear solve); ``window[k - 1]`` is the token at
    offset ``k`` before ``e``.
    """
    d = kernel.shape[1]

    def pi(next_token, previous):  # previous: (x_{i-1}, ..., x_{i-n+1})
        row = sum(x * d ** (n - 2 - k) for k, x in enumerate(previous))
        return kernel[row, next_token]

    contexts = list(itertools.product(range(d), repeat=n - 1))
    law = {c: 1.0 / len(contexts) for c in contexts}
    for _ in range(1500):
        new = defaultdict(float)
        for c, w in law.items():
            for x in range(d):
                new[(x, *c[:-1])] += w * pi(x, c)
        law = dict(new)
    out = defaultdict(float)
    for seq in itertools.product(range(d), repeat=length + 1):  # oldest first
        prob = law[tuple(reversed(seq[: n - 1]))]
        for i in range(n - 1, length + 1):
            prob *= pi(seq[i], tuple(reversed(seq[i - n + 1: i])))
        window = tuple(reversed(seq[:-1]))
        out[window, seq[-1]] += prob
    return out


def brute_information(model, subset, loss="nll"):
    """Prior-averaged I_S (or J_S) from the definition, on enumerated sequences."""
    values = []
    length = max(model.heads, model.n_gram - 1)
    d = model.vocab_size
    for kernel in model.kernels:
        joint = brute_laws(kernel, model.n_gram, length)
        p_s = defaultdict(float)
        mu_e = np.zeros(d)
        for (window, e), prob in joint.items():
            p_s[tuple(window[h - 1] for h in subset), e] += prob
            mu_e[e] += prob
        target = np.exp(mu_e) / np.exp(mu_e).sum()
        total = 0.0
        for s in {key[0] for key in p_s}:
            mu_s = sum(p_s[s, e] for e in range(d))
            cond = np.array([p_s[s, e] / mu_s for e in range(d)])
            if loss == "nll":
                total += mu_s**2 * (np.sum(cond**2 / mu_e) - 1.0)
            else:
                total += mu_s**2 * np.sum((cond - target) * (cond - mu_e))
        values.append(total)
    return float(np.mean(values))


@pytest.mark.parametrize("loss", ["nll", "code"])
@pytest.mark.parametrize("model", [point_model(), dirichlet_model(),
                                   dirichlet_model(seed=2, d=2, n=3, heads=3, count=2)],
                         ids=["ih-point", "dirichlet-d3-n2", "dirichlet-d2-n3"])
def test_information_equals_brute_force(model, loss):
    table = cf.information_table(model, loss)
    assert list(table) == model.subsets
    for subset, value in table.items():
        assert value == pytest.approx(brute_information(model, subset, loss), abs=1e-12), subset
    assert table[()] == pytest.approx(0.0, abs=1e-15)


def test_single_subset_functions_agree_with_the_table():
    model = dirichlet_model()
    table = cf.information_table(model)
    code = cf.information_table(model, "code")
    for subset in table:
        assert cf.mutual_information(model, subset) == pytest.approx(table[subset], abs=1e-15)
        assert cf.code_information(model, subset) == pytest.approx(code[subset], abs=1e-15)


def test_ih_point_information_selects_offset_two():
    """Spec 10 claim: with the point-mass kernel stage 1 selects {2}, not {1, 2}."""
    table = cf.information_table(point_model())
    assert cf.selected_subset(point_model()) == (2,)
    assert table[(2,)] > table[(1, 2)] > table[(1,)] > 0
    assert cf.selected_subset(point_model(), "code") == (2,)


def test_window_pairing_equals_the_subset_formula_and_soft_copier_differs():
    model = dirichlet_model(heads=2)
    table = cf.information_table(model)
    exact = cf.kernel_information(model)
    for s in table:
        assert exact[s] == pytest.approx(table[s], abs=1e-14)
    sharp = cf.kernel_information(model, [[40.0, 0.0], [40.0, 0.0]])
    soft = cf.kernel_information(model, [[3.0, 0.1], [3.0, 0.1]])
    for s in table:
        assert sharp[s] == pytest.approx(table[s], rel=1e-12, abs=1e-15)
    assert max(abs(soft[s] - table[s]) for s in table if s) > 1e-3


def test_first_order_in_a_is_minus_information():
    """d loss/da at a = 0 of the window-sum loss at p = delta_S equals -I_S (complex step)."""
    model = point_model()
    laws = model.window_joint(2)
    table = cf.information_table(model)
    for subset, info in table.items():
        slope = iv.window_sum_loss(laws, subset, 1e-30j)[0].imag / 1e-30
        assert slope == pytest.approx(-info, abs=1e-14)


# ---------------------------------------------------------------------------
# CF-IH1: replicator
# ---------------------------------------------------------------------------
def test_replicator_closed_form_solves_the_ode():
    model = dirichlet_model(d=3, n=3, heads=3, count=4, alpha=0.3)
    info = np.array(list(cf.information_table(model).values()))
    p0 = np.random.default_rng(1).dirichlet(np.ones(info.size))
    eta_c, u0, a = 2.0, 7e-4, 0.01
    rate = 4 * eta_c * a / u0

    def rhs(t, p):
        return rate * p * (info - p @ info)

    t = np.linspace(0.0, 30.0, 61)
    sol = solve_ivp(rhs, (0, 30.0), p0, t_eval=t, method="DOP853", rtol=1e-12, atol=1e-15)
    closed = cf.replicator_weights(p0, info, cf.kappa(t, eta_c, u0, a))
    np.testing.assert_allclose(sol.y.T, closed, rtol=1e-8, atol=1e-13)
    assert closed[-1].argmax() == info.argmax() and closed[-1].max() > 0.99


def test_kappa_of_a_varying_a_is_the_trapezoid_integral():
    t = np.linspace(0, 2, 2001)
    a = 0.01 * (1 + t**2)
    k = cf.kappa(t, 1.5, 0.02, a)
    assert k[-1] == pytest.approx(4 * 1.5 / 0.02 * 0.01 * (2 + 8 / 3), rel=1e-6)
    assert cf.kappa(2.0, 1.5, 0.02, 0.01) == pytest.approx(4 * 1.5 / 0.02 * 0.02)


def test_replicator_weights_stay_finite_in_log_space():
    p = cf.replicator_weights([0.5, 0.5, 0.0], [1.0, 0.0, 5.0], [0.0, 1e4])
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p[-1], [1.0, 0.0, 0.0])


@pytest.mark.parametrize("kwargs, field", [
    ({"p0": [0.5, 0.6], "info": [1, 2], "kappa_values": 1.0}, "p0"),
    ({"p0": [0.5, 0.5], "info": [1, 2, 3], "kappa_values": 1.0}, "info"),
    ({"p0": [0.5, 0.5], "info": [1, np.nan], "kappa_values": 1.0}, "info"),
    ({"p0": [0.5, 0.5], "info": [1, 2], "kappa_values": np.inf}, "kappa"),
])
def test_replicator_bad_input_names_the_field(kwargs, field):
    with pytest.raises(ValidationError) as err:
        cf.replicator_weights(**kwargs)
    assert err.value.field == field


def test_bad_subset_and_loss_name_the_field():
    with pytest.raises(ValidationError) as err:
        cf.mutual_information(point_model(), (1, 3))
    assert err.value.field == "subset"
    with pytest.raises(ValidationError) as err:
        cf.information_table(point_model(), "mse")
    assert err.value.field == "loss"
    with pytest.raises(ValidationError) as err:
        cf.kappa(1.0, -1.0, 1.0, 0.1)
    assert err.value.field == "eta_c"


# ---------------------------------------------------------------------------
# CF-IH2: the classifier at p = delta_S*
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("subset", [(2,), (1, 2), (1,)])
def test_mixture_equals_window_sum(subset):
    model = point_model()
    laws = model.window_joint(2)
    windows = np.indices((2, 2)).reshape(2, -1).T  # row z = 2 z_1 + z_2
    index = np.ravel_multi_index(windows[:, [h - 1 for h in subset]].T, (2,) * len(subset))
    for a in (0.0, 0.3, 4.0, 40.0):
        mixture = cf.mixture_prediction(model, a, subset)[0]
        np.testing.assert_allclose(iv.window_sum_prediction(laws, subset, a)[0],
                                   mixture[index], rtol=1e-13)
    rho = cf.match_probability(model, subset)[0]
    assert rho.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("loss", ["nll", "code"])
def test_classifier_derivative_is_the_derivative_of_the_loss(loss):
    model = dirichlet_model(d=3, n=3, heads=2, count=3, alpha=0.3)
    subset = cf.selected_subset(model)
    a = np.array([0.01, 0.7, 3.0, 9.0])
    h = 1e-5
    numeric = (cf.classifier_loss(model, a + h, subset, loss)
               - cf.classifier_loss(model, a - h, subset, loss)) / (2 * h)
    analytic = cf.classifier_loss_derivative(model, a, subset, loss)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-11)
    assert np.all(analytic < 0)  # the loss falls as a grows: a -> infinity
    value, slope = cf.classifier_curve(model, subset, loss)(a)
    np.testing.assert_allclose(slope, analytic)
    np.testing.assert_allclose(value, cf.classifier_loss(model, a, subset, loss))


def test_classifier_asymptote_matches_the_1d_ode():
    """a(t) of a' = -eta_a loss'(a) approaches (1/2) ln(e^{2 a0} + 4 eta_a C t) + const."""
    model = point_model()
    subset = (2,)
    constant, limit = cf.classifier_constant(model, subset)
    t = np.concatenate([[0.0], np.geomspace(1.0, 1e12, 13)])
    a, _ = iv.integrate_classifier(model, subset, 0.5, 0.01, t, 1e-11, 1e-12)
    slope = np.diff(a[1:]) / np.diff(np.log(t[1:]))
    assert slope[-1] == pytest.approx(0.5, abs=1e-4)
    # loss - loss_inf ~ C e^{-2a}: -loss'(a) e^{2a} -> 2 C, and loss -> loss_inf
    rate = -cf.classifier_loss_derivative(model, a[-1], subset) * math.exp(2 * a[-1])
    assert rate == pytest.approx(2 * constant, rel=1e-4)
    assert cf.classifier_loss(model, a[-1], subset) == pytest.approx(limit, abs=1e-11)
    # the closed form of the asymptotic ODE lies parallel to the run: constant offset
    offset = a[1:] - cf.classifier_asymptote(t[1:], 0.01, 0.5, constant)
    assert abs(offset[-1] - offset[-2]) < 1e-4


def test_classifier_constant_needs_positive_probabilities():
    # Row 0 (x_{i-1} = x_{i-2} = 0) never emits 0; every context stays recurrent ((0,0)
    # is entered from (0,1)), so pi_{1,2} has a zero entry while pi_{1}(.|0) mixes rows 0
    # and 1 with positive weights and has none.
    kernel = POINT_KERNEL.copy()
    kernel[0] = [0.0, 1.0]
    model = InductionData(2, 3, 2, 2, prior="point", kernel=kernel)
    assert cf.classifier_constant(model, (1,))[0] > 0
    with pytest.raises(ValidationError) as err:
        cf.classifier_constant(model, (1, 2))
    assert err.value.field == "data"


# ---------------------------------------------------------------------------
# odeflow verify
# ---------------------------------------------------------------------------
def test_verify_lists_the_family_checks():
    from odeflow.analysis.check_registry import registered_checks

    checks = registered_checks()
    assert {"I_S", "CF-IH1", "CF-IH2"} <= set(checks)
    assert checks.index("CF6") < checks.index("I_S")  # Scan and Snap first, whatever the import


def test_cli_runs_one_induction_check(capsys):
    from odeflow.cli import main

    code = main(["verify", "--only", "CF-IH2", "--no-notes", "--wide"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line[:3].strip().isdigit()]
    assert code == 0, out
    assert rows and all(line.split()[1] == "CF-IH2" for line in rows)
    assert "asymptote" in out and "FAIL" not in out


def test_full_flow_error_is_first_order_in_a():
    from odeflow.analysis.check_registry import CheckSettings

    ctx = iv._Context(CheckSettings(1e-10, 1e-30, "LSODA", 1e-7, 1e-3, 1e9, 20, 0))
    row = iv._check_first_order(ctx, "ih-point", cf.information_table(ctx.model("ih-point")))
    low, high = iv.FIRST_ORDER_RATIO
    assert row.passed, row.note
    assert low <= row.details["ratio"] <= high
    assert row.max_rel_error < iv.FIRST_ORDER_A[0]


@pytest.mark.parametrize("target, factor, check", [
    ("replicator_weights", "kappa", "CF-IH1"),
    ("information_table", "value", "I_S"),
    ("mixture_prediction", "value", "CF-IH2"),
    ("classifier_constant", "value", "CF-IH2"),
])
def test_a_wrong_closed_form_fails_its_check(monkeypatch, target, factor, check):
    from odeflow.analysis.verification import verify

    original = getattr(cf, target)

    def wrong(*args, **kwargs):
        if factor == "kappa":
            p0, info, k = args
            return original(p0, info, 1.1 * np.asarray(k))
        out = original(*args, **kwargs)
        if target == "classifier_constant":
            return 1.1 * out[0], out[1]
        if isinstance(out, dict):
            return {key: 1.1 * value for key, value in out.items()}
        return 1.1 * out

    monkeypatch.setattr(cf, target, wrong)
    monkeypatch.setattr(iv, "PRESETS", ("ih-point",))  # the cheap preset is enough to fail
    report = verify(checks=[check])
    assert not report.passed
    assert all(row.check == check for row in report.rows)


# ---------------------------------------------------------------------------
# the spec's claims on the family's flows (spec section 10, "Claims to check")
# ---------------------------------------------------------------------------
def stage_one(data, t_end, a=None):
    """``flow="population"`` with only ``c`` moving (``w`` at init, ``a`` fixed)."""
    import odeflow

    field_start = np.concatenate([np.full(len(data.subsets), data.c0),
                                  data.initial_copier_logits.ravel(),
                                  [data.a0 if a is None else a]])
    return odeflow.solve(data, flow="population", rates={"c": 1.0}, start=field_start,
                         t_span=(0.0, t_end), t_eval=np.linspace(0.0, t_end, 11), rtol=1e-8,
                         atol=1e-12, progress=False)


def test_ih_point_stage_one_selects_two_and_the_joint_flow_moves_to_one_two():
    import odeflow

    data = InductionData.preset("ih-point")
    stage = stage_one(data, 5.0)
    assert cf.selected_subset(data) == (2,)
    assert data.subsets[int(np.argmax(stage.subset_weights[-1]))] == (2,)
    assert stage.subset_weights[-1].max() > 0.99

    t = np.array([0.0, 0.5, 5.0, 20.0, 500.0, 1000.0])
    joint = odeflow.solve(data, flow="population", t_span=(0.0, 1e3), t_eval=t, rtol=1e-8,
                          atol=1e-12, progress=False)
    winners = [data.subsets[int(k)] for k in np.argmax(joint.subset_weights, axis=1)]
    assert winners[1:4] == [(2,), (2,), (2,)]  # the joint flow first selects {2} too
    assert joint.subset_weights[2, data.subsets.index((2,))] > 0.99
    assert winners[4:] == [(1, 2), (1, 2)]  # ... and later moves to {1, 2}
    assert joint.subset_weights[-1, data.subsets.index((1, 2))] > 0.9
    assert np.all(np.diff(joint.loss) <= 1e-12)


def test_ih_point_staging_matters():
    """The authors' staged run (c, then w at rate 1e5, then a) keeps {2}: c is frozen after
    stage 1, while the joint flow moves on to {1, 2} (spec 10, "staging matters")."""
    import odeflow
    from odeflow.fields.induction import Schedule

    data = InductionData.preset("ih-point")
    staged = odeflow.solve(data, flow="population", schedule=Schedule.staged(5.0, 1.0, 100.0),
                           rtol=1e-8, atol=1e-12, progress=False)
    assert staged.t[-1] == pytest.approx(106.0)
    assert staged.subset_weights[-1, data.subsets.index((2,))] > 0.99
    assert staged.a[-1] > 1.0  # stage 3 moved a


@pytest.mark.slow
def test_ih_paper_stage_one_selects_the_argmax_of_information():
    data = InductionData.preset("ih-paper")
    star = cf.selected_subset(data)
    assert star == (1, 2)
    soft = cf.kernel_information(data, data.initial_copier_logits)
    assert max(soft, key=soft.get) == star  # the soft copier at init agrees
    stage = stage_one(data, 20.0)
    assert data.subsets[int(np.argmax(stage.subset_weights[-1]))] == star
    assert stage.subset_weights[-1].max() > 0.99


@pytest.mark.parametrize("name, star, outside", [("ih-point", (2,), 1),
                                                 ("ih-paper", (1, 2), 3)])
def test_heads_outside_the_selected_subset_get_a_vanishing_copier_gradient(name, star, outside):
    from odeflow.fields.induction import PopulationFlow

    data = InductionData.preset(name)
    flow = PopulationFlow(data)
    w = data.initial_copier_logits
    k = data.subsets.index(star)
    norms = {}
    for eps in (1e-2, 1e-4, 0.0):
        p = np.full(len(data.subsets), eps / (len(data.subsets) - 1))
        p[k] = 1.0 - eps
        grad = flow.split(flow.gradient(flow.pack(np.sqrt(p), w, 2.0)))["w"]
        norms[eps] = (np.abs(grad[outside - 1]).max(), np.abs(grad[star[-1] - 1]).max())
    assert norms[0.0][0] == 0.0  # exactly: the kernel does not see the head
    assert norms[1e-4][0] == pytest.approx(1e-2 * norms[1e-2][0], rel=0.05)  # O(1 - p_S*)
    assert norms[0.0][1] > 1e3 * norms[1e-4][0]  # while heads in S* still learn
