"""Properties of Level E, the exact population gradient flow (spec section 3).

Lemma 1 / Eqns 3-4, 7: the vector field is ``eta * grad J``; the column sums
of ``Y`` and the row sums of every ``z_m`` are conserved; ``J`` never
decreases; the dynamics commute with relabelling tokens and with the gauge
``z_m -> z_m + const``; scaling both learning rates by ``s`` is a rescaling of
time by ``1/s``. These hold for every data model, learning rates and initial
logits, so they are checked without ``assume``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import odeflow
from odeflow.fields.exact import ExactFlow
from odeflow.testing import (
    data_models,
    initial_logits,
    learning_rate_pairs,
    learning_rates,
    relabel_tokens,
    state_vectors,
)
from tests.properties import examples, monotone_violation
from tests.reference import dense_objective, dense_rhs, unlump

#: Tolerances of the reference solves (tight, so that a tolerance on a property
#: of the solution measures the property, not the integrator).
TIGHT = {"rtol": 1e-10, "atol": 1e-12}
T_EVAL = np.concatenate([[0.0], np.geomspace(1e-2, 50.0, 24)])


@st.composite
def fields_and_states(draw, max_vocab=12, scale=2.0):
    """An ExactFlow on a random model, rates and Z(0), and a random lumped state."""
    data = draw(data_models(max_vocab=max_vocab))
    eta_y, eta_z = draw(learning_rate_pairs())
    z0 = draw(initial_logits(data))
    field = ExactFlow(data, eta_y, eta_z, start=(None, z0))
    y = field.initial_state() + draw(state_vectors(field.size, scale))
    return field, y


def gradient_scale(field: ExactFlow) -> np.ndarray:
    """rhs = scale * dJ/dy on the lumped state: eta_Y / multiplicity on a lumped decoder
    row (it stands for `multiplicity` outputs), eta_Z on the logits. The state holds
    Y^T (columns x rows), so the multiplicities repeat once per column."""
    return np.concatenate([field.eta_y / np.tile(field.multiplicity, field.C),
                           np.full(field.n_logits, field.eta_z)])


def central_gradient(f, y: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.empty_like(y)
    for i in range(y.size):
        e = np.zeros_like(y)
        e[i] = h
        out[i] = (f(y + e) - f(y - e)) / (2 * h)
    return out


# ------------------------------------------------------------ the vector field
@given(pair=fields_and_states())
def test_vector_field_is_eta_times_gradient_of_J(pair):
    """Lemma 1: dY/dt = eta_Y dJ/dY and dZ/dt = eta_Z dJ/dZ (central differences
    of J on the lumped state, any state, any rates)."""
    field, y = pair
    rhs = field.rhs(0.0, y)
    scale = gradient_scale(field)
    grad = central_gradient(field.objective, y)
    J = abs(field.objective(y))
    # error of a central difference with h = 1e-6: O(h^2) + O(eps |J| / h)
    err = np.abs(rhs - scale * grad)
    assert np.all(err <= 1e-6 * np.abs(rhs).max() + scale * 1e-8 * (1.0 + J)), err.max()


@given(pair=fields_and_states(max_vocab=16))
def test_lumped_field_matches_dense_reference(pair):
    """The lumped O(K L) right-hand side is the dense M x M one of Lemma 1
    (tests/reference.py) un-lumped, to round-off; same for J."""
    field, y = pair
    data = field.data
    Y, Z = unlump(field, y)
    dY, dZ = dense_rhs(data, Y, Z, field.eta_y, field.eta_z)
    dY_l, dZ_l = unlump(field, field.rhs(0.0, y), base=False)
    scale = max(np.abs(dY).max(), np.abs(dZ).max(), 1e-300)
    assert np.abs(dY - dY_l).max() <= 1e-11 * scale
    assert np.abs(dZ - dZ_l).max() <= 1e-11 * scale
    J = dense_objective(data, Y, Z)
    assert abs(J - field.objective(y)) <= 1e-12 * max(1.0, abs(J))


@settings(max_examples=examples(15))
@given(data=data_models(max_vocab=8), rates=learning_rate_pairs((1e-1, 1e1), (1e-1, 1e1)),
       draw=st.data())
def test_analytic_jacobian_matches_finite_differences(data, rates, draw):
    """The analytic Jacobian equals central differences of the rhs."""
    field = ExactFlow(data, *rates)
    y = draw.draw(state_vectors(field.size))
    J = field.jacobian(0.0, y)
    h = 1e-6
    Jfd = np.stack([(field.rhs(0, y + h * e) - field.rhs(0, y - h * e)) / (2 * h)
                    for e in np.eye(field.size)], axis=1)
    assert np.abs(J - Jfd).max() <= 1e-6 * max(1.0, np.abs(J).max())


@given(pair=fields_and_states())
def test_field_conserves_sums_and_freezes_untouched_logits(pair):
    """At every state: d(1^T Y)/dt = 0 (each lumped row counted with its
    multiplicity), d(sum_l z_ml)/dt = 0, and the state carries z_ml exactly for the
    tokens l in the support of some class of query m (dz_ml/dt = 0 for all others)."""
    field, y = pair
    data = field.data
    dY, dz = field.split(field.rhs(0.0, y))
    size = max(np.abs(dY).max(), np.abs(dz).max())
    assert np.abs(field.multiplicity @ dY).max() <= 1e-12 * size + 1e-300
    sums = np.bincount(field.logit_query, dz, minlength=data.query_tokens.size)
    assert np.abs(sums).max() <= 1e-12 * size + 1e-300
    for qi, m in enumerate(data.query_tokens):
        rows = [data.class_index(n) for n in data.classes_of_query(m)]
        touched = data.active_tokens[(data.active_probs[rows] > 0).any(axis=0)]
        assert np.array_equal(np.sort(field.logit_token[field.logit_query == qi]), touched)


@given(pair=fields_and_states())
def test_objective_rate_is_the_weighted_gradient_norm(pair):
    """dJ/dt = eta_Y ||dJ/dY||^2 + eta_Z ||dJ/dZ||^2 >= 0 (spec section 3): the
    derivative of J along the field, by central differences."""
    field, y = pair
    rhs = field.rhs(0.0, y)
    scale = gradient_scale(field)
    rate = float(np.sum(rhs**2 / scale))
    norm = np.linalg.norm(rhs)
    if norm == 0:
        return
    h = 1e-6 / norm
    fd = (field.objective(y + h * rhs) - field.objective(y - h * rhs)) / (2 * h)
    J = abs(field.objective(y))
    assert rate >= 0
    assert abs(fd - rate) <= 1e-5 * rate + 1e-9 * (1 + J) * norm


# ---------------------------------------------------------------- along solves
def solve_exact(data, eta_y, eta_z, z0=None, t_eval=T_EVAL, **kw):
    return odeflow.solve(data, flow="exact", eta_y=eta_y, eta_z=eta_z,
                         t_span=(0.0, float(t_eval[-1])), t_eval=t_eval, start=(None, z0),
                         **{**TIGHT, **kw})


@settings(max_examples=examples(20))
@given(data=data_models(), rates=learning_rate_pairs(), draw=st.data())
def test_solve_conserves_sums(data, rates, draw):
    """Along a solve: 1^T Y(t) = 1^T Y(0) = 0 and sum_l z_ml(t) = sum_l z_ml(0)."""
    z0 = draw.draw(initial_logits(data))
    traj = solve_exact(data, *rates, z0=z0)
    Y = traj.decoder
    assert np.abs(Y.sum(axis=1)).max() <= 1e-8 * (1 + np.abs(Y).max())
    for m in data.query_tokens:
        z = traj.logits(m)
        assert np.abs(z.sum(axis=1) - z[0].sum()).max() <= 1e-8 * (1 + np.abs(z).max())


#: Two balanced classes (separate queries) over the same single contextual token:
#: both features are e_0, alpha_n = (1/2, 1/2) and dY = sum_n pi_n (e_n - alpha_n) = 0,
#: so Y(0) = 0 is a stationary point and J stays at -ln 2. Strict increase needs a
#: non-zero vector field at t = 0 (found by the thorough profile).
STATIONARY_AT_START = odeflow.DataModel(2, [odeflow.SequenceClass(0, 0, {0: 1.0}),
                                            odeflow.SequenceClass(1, 1, {0: 1.0})])


@example(data=STATIONARY_AT_START, rates=(1.0, 1.0), draw=None)
@settings(max_examples=examples(20))
@given(data=data_models(), rates=learning_rate_pairs(), draw=st.data())
def test_objective_non_decreasing_along_solve(data, rates, draw):
    """J(t) is non-decreasing (gradient ascent: dJ/dt = eta ||grad J||^2 >= 0), and
    strictly increases when the vector field is not zero at t = 0."""
    z0 = None if draw is None else draw.draw(initial_logits(data))
    traj = solve_exact(data, *rates, z0=z0)
    J = traj.objective
    assert monotone_violation(J) <= 1e-9 * (1 + np.abs(J).max())
    field = ExactFlow(data, *rates, start=(None, z0))
    if np.linalg.norm(field.rhs(0.0, field.initial_state())) > 1e-12:
        assert J[-1] > J[0]
    else:
        assert np.allclose(J, J[0], rtol=0, atol=1e-12)


@settings(max_examples=examples(20))
@given(data=data_models(), rates=learning_rate_pairs(), draw=st.data())
def test_relabelling_tokens_permutes_the_solution(data, rates, draw):
    """Relabelling the vocabulary by a permutation sigma (next, query and contextual
    tokens alike) and listing the classes in another order permutes the solution:
    z'_{sigma m, sigma l}(t) = z_ml(t), Y'_{sigma a, sigma b}(t) = Y_ab(t), J' = J."""
    M, K = data.vocab_size, data.num_classes
    perm = np.array(draw.draw(st.permutations(range(M))))
    order = draw.draw(st.permutations(range(K)))
    other = relabel_tokens(data, perm, order)
    z0 = draw.draw(initial_logits(data))
    z0_other = np.zeros((other.query_tokens.size, M))
    for qi, m in enumerate(data.query_tokens):
        z0_other[other.query_index(perm[m]), perm] = z0[qi]
    a = solve_exact(data, *rates, z0=z0, method="Radau")
    b = solve_exact(other, *rates, z0=z0_other, method="Radau")
    tol = 1e-7
    for m in data.query_tokens:
        za, zb = a.logits(m), b.logits(perm[m])[:, perm]
        assert np.abs(za - zb).max() <= tol * (1 + np.abs(za).max())
    Ya = a.decoder
    Yb = b.decoder[:, perm][:, :, perm]
    assert np.abs(Ya - Yb).max() <= tol * (1 + np.abs(Ya).max())
    assert np.abs(a.objective - b.objective).max() <= tol * (1 + np.abs(a.objective).max())


@settings(max_examples=examples(20))
@given(data=data_models(), rates=learning_rate_pairs(), draw=st.data())
def test_gauge_shift_changes_no_observable(data, rates, draw):
    """Adding a constant c_m to every logit of z_m(0) changes neither the attention
    f_n, the features f^_n, the decoder Y nor J at any time; the logits stay
    shifted by exactly c_m."""
    z0 = draw.draw(initial_logits(data))
    shift = np.array(draw.draw(st.lists(st.floats(-20, 20), min_size=z0.shape[0],
                                        max_size=z0.shape[0])))
    a = solve_exact(data, *rates, z0=z0, method="Radau")
    b = solve_exact(data, *rates, z0=z0 + shift[:, None], method="Radau")
    tol = 1e-7
    for n in data.next_tokens:
        assert np.abs(a.attention(n) - b.attention(n)).max() <= tol
        assert np.abs(a.features(n) - b.features(n)).max() <= tol
    assert np.abs(a.decoder - b.decoder).max() <= tol * (1 + np.abs(a.decoder).max())
    assert np.abs(a.objective - b.objective).max() <= tol * (1 + np.abs(a.objective).max())
    for qi, m in enumerate(data.query_tokens):
        za, zb = a.logits(m), b.logits(m)
        assert np.abs(zb - za - shift[qi]).max() <= tol * (1 + np.abs(za).max() + abs(shift[qi]))


@settings(max_examples=examples(20))
@given(data=data_models(), rates=learning_rate_pairs(), s=learning_rates(1e-2, 1e2),
       draw=st.data())
def test_scaling_both_rates_rescales_time(data, rates, s, draw):
    """Rates (s eta_Y, s eta_Z) at time t/s give the state of (eta_Y, eta_Z) at t
    (the field is linear in the rates)."""
    z0 = draw.draw(initial_logits(data))
    a = solve_exact(data, *rates, z0=z0)
    b = solve_exact(data, s * rates[0], s * rates[1], z0=z0, t_eval=T_EVAL / s)
    tol = 1e-6
    assert np.abs(a.z_active - b.z_active).max() <= tol * (1 + np.abs(a.z_active).max())
    Ya, Yb = a.decoder_lumped, b.decoder_lumped
    assert np.abs(Ya - Yb).max() <= tol * (1 + np.abs(Ya).max())


@settings(max_examples=examples(20))
@given(data=data_models(), rates=learning_rate_pairs(), draw=st.data())
def test_accessors_are_consistent_along_solve(data, rates, draw):
    """Along a solve: f_n >= 0 sums to one and f^_n has unit norm, both zero off the
    support of c_n; logits of tokens outside the support of every class of m stay
    at z_m(0); decoder rows of tokens that are never a next token stay equal and
    columns of tokens never in a context stay zero."""
    z0 = draw.draw(initial_logits(data))
    traj = solve_exact(data, *rates, z0=z0)
    M = data.vocab_size
    for n in data.next_tokens:
        off = data.probs(n) == 0
        f, fh = traj.attention(n), traj.features(n)
        assert np.all(f >= 0) and np.allclose(f.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert np.allclose(np.linalg.norm(fh, axis=1), 1.0, rtol=0, atol=1e-12)
        assert np.all(f[:, off] == 0) and np.all(fh[:, off] == 0)
    for qi, m in enumerate(data.query_tokens):
        support = np.zeros(M, dtype=bool)
        for n in data.classes_of_query(m):
            support |= data.probs(n) > 0
        z = traj.logits(m)
        assert np.array_equal(z[:, ~support], np.broadcast_to(z0[qi, ~support],
                                                              z[:, ~support].shape))
    Y = traj.decoder
    others = np.setdiff1d(np.arange(M), data.next_tokens)
    if others.size:
        assert np.array_equal(Y[:, others], np.broadcast_to(Y[:, others[:1]],
                                                            Y[:, others].shape))
    inactive = np.setdiff1d(np.arange(M), data.active_tokens)
    assert np.all(Y[:, :, inactive] == 0)
