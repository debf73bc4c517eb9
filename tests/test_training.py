"""Discrete gradient ascent beside the Level E flow (spec section 6, Lemma 5)."""

from __future__ import annotations

import numpy as np
import pytest

from odeflow import DataModel, SequenceClass, Trajectory, ValidationError, solve
from odeflow.fields.exact import ExactFlow
from odeflow.training import gradient_ascent

# eta_Z = 5 so that the logits move: by t = 100 the flow's logits span ~0.47.
ETA_Y, ETA_Z, T_END = 1.0, 5.0, 100.0


@pytest.fixture(scope="module")
def small():
    return DataModel.preset("shared-query-small")


@pytest.fixture(scope="module")
def reference(small):
    t = np.linspace(0.0, T_END, 101)
    return solve(small, "exact", eta_y=ETA_Y, eta_z=ETA_Z, t_span=(0.0, T_END), t_eval=t,
                 rtol=1e-12, atol=1e-14)


def _relative_gap(run, flow):
    return np.max(np.abs(run.z_active - flow.z_active)) / np.ptp(flow.z_active)


def _euler(small, dt):
    steps = round(T_END / dt)
    return gradient_ascent(small, ETA_Y, ETA_Z, steps, dt=dt, record=steps // 100)


def test_small_steps_match_the_flow_at_first_order(small, reference):
    assert np.ptp(reference.z_active) > 0.4  # the logits move: the comparison means something
    # Largest gap over t = 0, 1, ..., 100 (it peaks early, while the decoder learns).
    coarse, fine = _euler(small, 1 / 32), _euler(small, 1 / 64)
    np.testing.assert_allclose(fine.t, reference.t)
    gap_coarse, gap_fine = _relative_gap(coarse, reference), _relative_gap(fine, reference)
    assert gap_coarse < 1e-3
    assert gap_fine < 1e-3
    assert 1.7 <= gap_coarse / gap_fine <= 2.3  # explicit Euler: error O(dt)


def test_unit_step_is_a_plain_gradient_step(small):
    field = ExactFlow(small, ETA_Y, ETA_Z)
    y0 = field.initial_state()
    y1 = y0 + field.rhs(0.0, y0)
    y2 = y1 + field.rhs(1.0, y1)
    run = gradient_ascent(small, ETA_Y, ETA_Z, 2, record=1)
    Y, z = field.split(y2)
    np.testing.assert_array_equal(run.decoder_lumped[-1], Y)
    cols = np.searchsorted(small.active_tokens, field.logit_token)
    np.testing.assert_array_equal(run.z_active[-1][field.logit_query, cols], z)
    np.testing.assert_array_equal(run.t, [0.0, 1.0, 2.0])


def test_decoder_margin_follows_lemma5_recursion():
    # One distinct token per class: f^_n = e_{l_n} is fixed, so the decoder margin
    # h = Y[n, l_n] - Y[o, l_n] obeys h <- h + eta_Y pi M / (exp(h) + M - 1) exactly.
    M, eta_y = 12, 0.7
    data = DataModel(M, [SequenceClass(3, 0, {5: 1.0}), SequenceClass(4, 0, {6: 1.0})])
    run = gradient_ascent(data, eta_y, 1.0, 50, record=1)
    col = int(np.searchsorted(data.active_tokens, 5))
    h_run = run.decoder_lumped[:, 0, col] - run.decoder_lumped[:, -1, col]
    h = np.zeros(51)
    for k in range(50):
        h[k + 1] = h[k] + eta_y * 0.5 * M / (np.exp(h[k]) + M - 1)
    np.testing.assert_allclose(h_run, h, rtol=1e-12, atol=1e-14)


def test_objective_rises_and_trajectory_round_trips(small, tmp_path):
    run = gradient_ascent(small, ETA_Y, ETA_Z, 200, record=20)
    assert run.flow == "gradient_ascent"
    assert run.meta["dt"] == 1.0 and run.meta["steps"] == 200
    assert np.all(np.diff(run.objective) > 0)
    assert run.decoder.shape == (run.t.size, 30, 30)
    back = Trajectory.load(run.save(tmp_path / "ga.npz"))
    np.testing.assert_array_equal(back.z_active, run.z_active)
    assert back.meta["flow"] == "gradient_ascent"


def test_records_always_end_at_the_last_step(small):
    run = gradient_ascent(small, ETA_Y, ETA_Z, 25, dt=0.5, record=10)
    np.testing.assert_array_equal(run.t, [0.0, 5.0, 10.0, 12.5])


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"steps": 0}, "steps"),
    ({"steps": 2.5}, "steps"),
    ({"steps": True}, "steps"),
    ({"dt": 0.0}, "dt"),
    ({"dt": float("nan")}, "dt"),
    ({"eta_y": float("inf")}, "eta_y"),
    ({"eta_z": -1.0}, "eta_z"),
    ({"record": 0}, "record"),
])
def test_bad_input_names_the_field(small, kwargs, field):
    args = {"eta_y": ETA_Y, "eta_z": ETA_Z, "steps": 10, **kwargs}
    with pytest.raises(ValidationError) as err:
        gradient_ascent(small, **args)
    assert err.value.field == field
