"""Two-stage family theory: the stages on the population flow, CF-TS2 against the flow,
the outer rule's error."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from odeflow.analysis.two_stage.closed_forms import (
    block_constants,
    early_singular_values,
    measured_stage_times,
    stage_one_margin,
    stage_times,
)
from odeflow.data.two_stage import TwoStageData
from odeflow.errors import ValidationError
from odeflow.fields.two_stage import scoring
from odeflow.fields.two_stage.population import PopulationFlow

#: The horizon of ts-default: Q-only accuracy at T within 0.01 of its value at 2T.
HORIZON = 200.0


def flow(data, t_end, n=200, start=None, rtol=1e-8):
    field = PopulationFlow(data, start=start)
    t = np.concatenate([[0.0], np.geomspace(1e-4, t_end, n)])
    sol = solve_ivp(field.rhs, (0.0, t_end), field.initial_state(), method="LSODA", t_eval=t,
                    rtol=rtol, atol=rtol * 1e-3)
    assert sol.success
    return field.trajectory(sol.t, sol.y.T, {"nfev": sol.nfev})


@pytest.fixture(scope="module")
def default_run():
    return flow(TwoStageData.preset("ts-default"), 2 * HORIZON, n=300)


def test_ts_default_has_two_stages(default_run):
    traj = default_run
    t, i_T = traj.t, int(np.searchsorted(traj.t, HORIZON, side="right")) - 1
    assert t[i_T] == pytest.approx(HORIZON, rel=0.05)
    # the horizon: Q-only accuracy within 0.01 of its value at 2T
    assert abs(traj.accuracy_q_only[-1] - traj.accuracy_q_only[i_T]) <= 0.01
    t_p, t_q = measured_stage_times(traj, HORIZON)
    assert t_q / t_p >= 5
    # stage 1: P-only loss down, Q-only loss up (the growing W_P adds P-block noise)
    i_p = int(np.searchsorted(t, t_p))
    assert traj.loss_q_only[i_p] > traj.loss_q_only[0]
    assert traj.accuracy_q_only[i_p] < traj.accuracy_q_only[0]
    # stage 2: Q learned, P kept up to T (P-only accuracy falls slowly after it, 0.986 at
    # 2T: the Q block's label-blind noise on P-only queries grows with W_Q)
    assert traj.accuracy_q_only[i_T] >= 0.85
    assert np.all(traj.accuracy_p_only[: i_T + 1] >= 0.99)
    assert traj.accuracy_p_only[-1] < traj.accuracy_p_only[i_T]
    # spectral: the largest singular value moves from W_P to W_Q
    blocks = traj.largest_block()
    assert blocks[i_p] == "P" and blocks[i_T] == "Q"


def test_early_growth_matches_the_flow():
    for data in (TwoStageData(), TwoStageData(loss="squared", rho=0.1, gamma_p=2.0)):
        traj = flow(data, 1e-3, n=20)
        s_p, s_q = early_singular_values(data, traj.t)
        assert np.allclose(traj.singular_values_p[:, 0], s_p, rtol=0.02)
        assert np.allclose(traj.singular_values_q[:, 0], s_q, rtol=0.02)
        assert np.allclose(traj.singular_values_p[:, 1], data.sigma0, rtol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"gamma_p": 4.0}, {"gamma_p": 5.0}, {"gamma_q": 0.25},
                                    {"rho": 0.1}, {"rho": 0.3}, {"sigma0": 0.001},
                                    {"sigma0": 0.1}])
def test_predicted_stage_times_within_20_percent(kwargs):
    """Where the stages separate (t_Q / t_P >= 4); see docs for where the prediction misses."""
    data = TwoStageData(**kwargs)
    traj = flow(data, HORIZON, n=300)
    (tp, tq), (mp, mq) = stage_times(data), measured_stage_times(traj)
    assert abs(tp / mp - 1) < 0.2 and abs(tq / mq - 1) < 0.2


def test_stage_time_scaling():
    """t_P = (u_90 + e^u_90 - u_0 - e^u_0) / K_P, K_P = M_P^4 / (4 (1 - rho)): independent of
    gamma_Q, about kappa_P^-4 (u_90 moves a little with gamma_P); t_Q falls with rho and
    gamma_Q."""
    base = stage_times(TwoStageData(sigma0=1e-9))
    assert stage_times(TwoStageData(sigma0=1e-9, gamma_q=0.9))[0] == base[0]
    gammas = np.array([3.0, 4.0, 5.0, 6.0])
    t_p = [stage_times(TwoStageData(sigma0=1e-9, gamma_p=g))[0] for g in gammas]
    slopes = np.diff(np.log(t_p)) / np.diff(np.log(gammas + np.sqrt(2 / np.pi)))
    assert np.all((slopes > -4.2) & (slopes < -3.5))
    t_q = [stage_times(TwoStageData(sigma0=1e-9, rho=r))[1] for r in (0.1, 0.2, 0.3)]
    assert np.all(np.diff(t_q) < 0)
    t_q = [stage_times(TwoStageData(sigma0=1e-9, gamma_q=g))[1] for g in (0.25, 0.5, 0.75)]
    assert np.all(np.diff(t_q) < 0)
    data = TwoStageData()
    k = block_constants(data)
    u = stage_one_margin(data, np.array([0.0, 1.0, 10.0]))
    assert u[0] == pytest.approx(data.sigma0 * k["kappa_p"] * k["M_p"] / 2)
    assert np.all(np.diff(u) > 0)
    with pytest.raises(ValidationError):
        stage_times(TwoStageData(loss="squared"))


def test_measured_stage_times_definitions():
    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    lp = np.array([1.0, 0.5, 0.05, 0.0, 0.02, 0.03])   # 90% of the drop to 0: level 0.1
    lq = np.array([0.7, 0.8, 0.9, 0.75, 0.6, 0.5])     # back below 0.7 between 3 and 4
    traj = SimpleNamespace(t=t, loss_p_only=lp, loss_q_only=lq)
    t_p, t_q = measured_stage_times(traj)
    assert t_p == pytest.approx(1.0 + 0.4 / 0.45)
    assert t_q == pytest.approx(3.0 + 0.05 / 0.15)
    assert measured_stage_times(traj, T=2.5)[1] == math.inf


@pytest.mark.parametrize("start", [None, "random"])
def test_outer_rule_error_below_1e_3(start):
    """The scorer's 24 x 24 x 24 rule against a 120 x 120 x 120 Gauss-Legendre/Hermite rule
    at states along the ts-default flow (accuracy and loss, every query type)."""
    data = TwoStageData.preset("ts-default")
    if start == "random":
        rng = np.random.default_rng(3)
        start = (0.3 * rng.normal(size=(2, 2)), 0.3 * rng.normal(size=(2, 2)))
    traj = flow(data, HORIZON, n=12, start=start)
    reference = scoring.quadrature_rule(120, 120, reference=True)
    worst = 0.0
    for W_P, W_Q in zip(traj.W_P, traj.W_Q, strict=True):
        a, b = scoring.score(data, W_P, W_Q), scoring.score(data, W_P, W_Q, rule=reference)
        worst = max(worst, max(abs(a[k] - b[k]) for k in scoring.SCORE_KEYS))
    assert worst < 1e-4


@pytest.mark.slow  # the cluster-Q flow's gradient is a Sobol sample (about 15 s)
def test_cluster_q_is_not_learned():
    traj = flow(TwoStageData.preset("ts-cluster"), 50.0, n=8, rtol=1e-5)
    assert np.all(traj.accuracy_q_only < 0.6)
    assert np.all(traj.accuracy_p_only[1:] > 0.99)


def test_without_q_only_examples_q_is_not_learned():
    """rho = 0: once P is learned nothing pushes W_Q (predicted t_Q = inf; the flow agrees)."""
    data = TwoStageData(rho=0.0)
    assert stage_times(data)[1] == math.inf
    traj = flow(data, 1000.0, n=100)
    assert measured_stage_times(traj)[1] == math.inf
    assert traj.accuracy_q_only[-1] < 0.6
