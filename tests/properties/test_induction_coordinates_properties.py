"""Property: the induction levels' flow in log coordinates is the chain rule of the flow of
``c`` (``l_S' = c_S' / c_S``), for any signs, zero coefficients and magnitudes, also
where ``c`` itself is below the range of doubles (the model sees ``p`` only)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from odeflow.data.induction import InductionData
from odeflow.fields.induction import CopierFlow, PopulationFlow

POINT = InductionData.preset("ih-point")
FIELDS = {"population": PopulationFlow(POINT), "copier": CopierFlow(POINT)}

log_c = st.lists(st.one_of(st.floats(-40.0, 5.0), st.floats(-3000.0, -800.0),
                           st.just(-np.inf)), min_size=4, max_size=4).filter(
    lambda v: max(v) > -40.0)


@settings(max_examples=40, deadline=None)
@given(log_c, st.lists(st.booleans(), min_size=4, max_size=4),
       st.sampled_from(sorted(FIELDS)), st.floats(0.01, 5.0), st.integers(0, 2**31))
def test_log_rhs_is_the_chain_rule_of_the_c_flow(logs, negative, flow, a, seed):
    base = FIELDS[flow]
    logs = np.array(logs)
    c = np.where(negative, -1.0, 1.0) * np.exp(logs)           # 0.0 / -0.0 below doubles
    start = base.start
    start[base.slices["c"]] = c
    start[base.slices["a"]] = a
    if "w" in base.groups:
        start[base.slices["w"]] += np.random.default_rng(seed).normal(size=base.heads ** 2)
    field = type(base)(POINT, start=start, start_log_c=logs)
    x = field.initial_state()
    rhs = field.rhs(0.0, x)
    # the same p with every coefficient rescaled into the doubles (p is scale-free)
    alive = np.isfinite(logs)
    top = logs[alive].max()
    shifted = np.where(alive, logs - top, -np.inf)
    scaled = np.where(negative, -1.0, 1.0) * np.exp(np.maximum(shifted, -300.0)) * alive
    theta = start.copy()
    theta[field.slices["c"]] = scaled
    grad = field.gradient(theta)
    want = -field.rate_vector * grad
    sl = field.slices["c"]
    want[sl] = np.divide(-grad[sl], scaled, out=np.zeros(4), where=alive) * np.exp(-2 * top)
    scale = np.abs(want).max()
    np.testing.assert_allclose(rhs, want, rtol=1e-9, atol=1e-12 * scale)
    assert np.all(rhs[sl][~alive] == 0.0)
    # p from the state, in log space: e^{2 l} normalised (0 where it underflows)
    weights = np.exp(2 * shifted)
    np.testing.assert_allclose(field.selector_weights(x), weights / weights.sum(),
                               rtol=1e-12, atol=1e-300)
