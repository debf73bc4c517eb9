"""A batch of parameter sets (:func:`odeflow.solve_batch`) for every family: one stacked
solve equals the separate :func:`odeflow.solve` calls, member by member.

Each family's batch varies options that no vectorised path covers (a sample's seed,
a sequence length, the induction heads' ``rates``, a user family's ``rate``) beside
the learning rates that Scan and Snap's levels evaluate in one call; every member's
result carries its options in ``meta["batch_options"]``. Bad ``params`` are refused
by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import odeflow
from odeflow.errors import ValidationError
from odeflow.families import register_family, unregister_family
from tests.linear_family import Linear2, LinearData

#: Tolerances of every solve here (batch members and separate solves alike): far below
#: the comparison's ``rtol`` so that the two integrations' errors do not matter.
TOL = {"rtol": 1e-9, "atol": 1e-11}


@pytest.fixture(scope="module", autouse=True)
def linear2():
    """The user family of ``tests/linear_family.py``, registered for this module."""
    family = register_family(Linear2)
    yield family
    unregister_family(family.name)


def _scan_snap():
    data = odeflow.DataModel.preset("syn-small")
    params = [{"seed": 0}, {"seed": 1, "eta_z": 0.5}, {"seq_len": 6, "eta_y": 2.0}]
    return data, "finite_t", params, {"seq_len": 12, "sample_size": 4}, (0.0, 50.0), \
        lambda r: [r.z_carried, r.decoder_lumped]


def _induction():
    data = odeflow.InductionData.preset("ih-point")
    params = [{"rates": 1.0}, {"rates": {"c": 2.0, "w": 1.0, "a": 0.5}}, {"loss": "code"}]
    return data, "population", params, {}, (0.0, 5.0), lambda r: [r.loss, r.a]


def _two_stage():
    data = odeflow.TwoStageData.preset("ts-default")
    params = [{"seed": 0}, {"seed": 1}, {"sample_size": 30, "seq_len": 8}]
    return data, "finite_n", params, {"sample_size": 20, "seq_len": 16}, (0.0, 2.0), \
        lambda r: [r.W_P, r.W_Q, r.loss]


def _linear():
    data = LinearData.preset("linear2-small")
    start = 0.2 * np.random.default_rng(4).standard_normal(10)
    params = [{"rate": 0.5}, {"rate": 2.0}, {"start": start}]
    return data, "population", params, {}, (0.0, 10.0), lambda r: [r.W1, r.W2, r.loss]


CASES = {"scan_snap": _scan_snap, "induction": _induction, "two_stage": _two_stage,
         "linear2": _linear}


@pytest.mark.parametrize("family", list(CASES))
def test_a_batch_equals_the_separate_solves(family):
    data, flow, params, shared, span, series = CASES[family]()
    t_eval = np.linspace(*span, 6)
    kw = {"flow": flow, "t_span": span, "t_eval": t_eval, "progress": False, **TOL, **shared}
    batch = odeflow.solve_batch(data, params, **kw)
    assert len(batch) == len(params)
    for point, member in zip(params, batch, strict=True):
        assert member.stats["batch_size"] == len(params)
        assert member.meta["batch_options"] == point
        alone = odeflow.solve(data, **{**kw, **point})
        np.testing.assert_array_equal(member.t, alone.t)
        for got, want in zip(series(member), series(alone), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9 * np.abs(want).max())
    # the members differ from each other far more than from their own solves
    first, last = series(batch[0])[0], series(batch[-1])[0]
    assert first.shape != last.shape or np.abs(first - last).max() > 1e-4


def test_the_members_options_are_in_their_results_meta():
    data = odeflow.InductionData.preset("ih-point")
    rates = {"c": 2.0, "w": 1.0, "a": 0.5}
    batch = odeflow.solve_batch(data, [{"rates": 1.0}, {"rates": rates}], t_span=(0.0, 1.0),
                                progress=False)
    assert [m.meta["batch_options"] for m in batch] == [{"rates": 1.0}, {"rates": rates}]
    assert batch[1].meta["rates"] == rates and batch[0].meta["rates"]["w"] == 1.0
    pairs = odeflow.solve_batch(odeflow.DataModel.preset("syn-small"), [(1.0, 0.1), (2.0, 0.3)],
                                t_span=(0.0, 1.0), progress=False)
    assert pairs[1].meta["batch_options"] == {"eta_y": 2.0, "eta_z": 0.3}
    assert (pairs[1].meta["eta_y"], pairs[1].meta["eta_z"]) == (2.0, 0.3)


def test_scan_and_snap_rates_keep_the_one_call_path():
    """Learning-rate points (pairs or mappings) are one vectorised call; a seed that
    varies is not (each member has its own sample)."""
    from odeflow.fields.finite_t import FiniteTFlow
    from odeflow.fields.stacked import StackedField

    data = odeflow.DataModel.preset("syn-small")
    rates = [FiniteTFlow(data, ey, 0.1, seq_len=8, sample_size=2) for ey in (1.0, 2.0)]
    assert StackedField(rates, varying={"eta_y"}).together
    seeds = [FiniteTFlow(data, 1.0, 0.1, seq_len=8, sample_size=2, seed=s) for s in (0, 1)]
    stack = StackedField(seeds, varying={"seed"})
    assert not stack.together
    y = stack.initial_state() + 0.1
    want = np.concatenate([f.rhs(0.0, stack.member_states(y, i)) for i, f in enumerate(seeds)])
    np.testing.assert_array_equal(stack.rhs(0.0, y), want)


def test_a_batch_with_an_optimiser_equals_the_separate_optimiser_flows():
    data = odeflow.DataModel.preset("syn-small")
    params = [{"eta_y": 1.0, "eta_z": 0.1}, {"eta_y": 0.5, "eta_z": 0.4}]
    kw = {"flow": "exact", "t_span": (0.0, 20.0), "optimizer": odeflow.Momentum(0.9),
          "progress": False, "rtol": 1e-8, "atol": 1e-10}
    batch = odeflow.solve_batch(data, params, **kw)
    for point, member in zip(params, batch, strict=True):
        alone = odeflow.solve(data, method="RK45", **{**kw, **point})
        np.testing.assert_array_equal(member.steps, alone.steps)
        assert member.meta["optimizer"]["kind"] == "momentum"
        scale = np.abs(alone.z_carried).max()
        assert np.abs(member.z_carried - alone.z_carried).max() < 1e-5 * scale
        assert np.abs(member.series["velocity"] - alone.series["velocity"]).max() < 1e-5 * scale
    with pytest.raises(ValidationError, match="^method: "):
        odeflow.solve_batch(data, params, method="Radau", **kw)
    with pytest.raises(ValidationError, match="^optimizer: "):
        odeflow.solve_batch(data, params, **{**kw, "flow": "reduced"})


@pytest.mark.parametrize("params, field", [
    ([{"rates": 1.0}, {"bogus": 1.0}], "params[1].bogus"),
    ([{"rates": 1.0}, {"rates": -1.0}], "params[1].rates"),
    ([1.0], "params[0]"),
    ([(1.0, 1.0)], "params[0]"),      # a pair names no options of the induction flows
    ([{1: 2.0}], "params[0]"),
    ([], "params"),
    ({"rates": 1.0}, "params"),       # one mapping, not a sequence of them
    (3, "params"),
])
def test_bad_params_are_refused_by_name(params, field):
    data = odeflow.InductionData.preset("ih-point")
    with pytest.raises(ValidationError) as err:
        odeflow.solve_batch(data, params, t_span=(0.0, 1.0), progress=False)
    assert err.value.field == field, str(err.value)


def test_bad_scan_and_snap_points_are_refused_by_name():
    data = odeflow.DataModel.preset("syn-small")
    for params, field in [([(1.0,)], "params[0]"), ([(1.0, -1.0)], "params[0].eta_z"),
                          ([{"eta_y": 1.0}, {"seed": 1}], "params[1].seed"),
                          ([{"optimizer": None}], "params[0].optimizer")]:
        with pytest.raises(ValidationError) as err:
            odeflow.solve_batch(data, params, t_span=(0.0, 1.0), progress=False)
        assert err.value.field == field, str(err.value)


def test_implicit_methods_get_the_block_diagonal_jacobian_of_members_of_any_size():
    """Level T members on samples of different sizes (different state layouts): Radau
    takes the sparse block-diagonal analytic Jacobian of the stack."""
    data = odeflow.DataModel.preset("syn-small")
    params = [{"seq_len": 6}, {"seq_len": 12, "seed": 2}]
    kw = {"flow": "finite_t", "sample_size": 3, "t_span": (0.0, 20.0),
          "t_eval": [0.0, 2.0, 20.0], "method": "Radau", "progress": False, **TOL}
    batch = odeflow.solve_batch(data, params, **kw)
    assert batch[0].stats["analytic_jacobian"] and batch[0].stats["njev"] > 0
    assert batch[0].stats["n_state"] != batch[1].stats["n_state"]
    for point, member in zip(params, batch, strict=True):
        alone = odeflow.solve(data, **{**kw, **point})
        np.testing.assert_allclose(member.z_carried, alone.z_carried, rtol=1e-5,
                                   atol=1e-9 * np.abs(alone.z_carried).max())


def test_lsoda_on_a_stack_gets_a_dense_jacobian():
    """LSODA (``method="auto"`` for small stacks) takes dense Jacobians only: a stack of
    members with analytic Jacobians gives it the block-diagonal matrix as an array, so
    the stiff member (rate 1e4) of a user family's batch solves as it does alone."""
    data = LinearData.preset("linear2-small")
    params = [{"rate": 1e4}, {"rate": 1.0}]
    out = odeflow.solve_batch(data, params, t_span=(0.0, 1e3), progress=False)
    assert out[0].stats["method"] == "LSODA" and out[0].stats["njev"] > 0
    for member, options in zip(out, params, strict=True):
        alone = odeflow.solve(data, t_span=(0.0, 1e3), t_eval=member.t, progress=False,
                              method="LSODA", **options)
        np.testing.assert_allclose(member.loss, alone.loss, rtol=1e-4, atol=1e-12)


def test_members_of_different_sizes_keep_their_own_tolerance():
    """The stacked solve divides the tolerances by ``sqrt(n / min n_i)``, not ``sqrt(P)``:
    a small member (zero start, the lumped 130 numbers) beside seven of 1,060 (random
    starts) keeps the error it has alone (at ``sqrt(P)`` it was about three times larger)."""
    data = odeflow.DataModel.preset("syn-small")
    fast = {"eta_y": 3.0, "eta_z": 1.0}
    span = (0.0, 200.0)
    ref = odeflow.solve(data, t_span=span, method="DOP853", rtol=1e-13, atol=1e-14,
                        progress=False, **fast)
    rng = np.random.default_rng(0)
    V = data.vocab_size
    slow = [{"start": (rng.uniform(-0.3, 0.3, (V, V)), None), "eta_y": 0.01, "eta_z": 1e-3}
            for _ in range(7)]
    run = {"t_span": span, "method": "RK45", "rtol": 1e-5, "atol": 1e-7, "progress": False}
    alone = odeflow.solve(data, **run, **fast)
    batch = odeflow.solve_batch(data, [fast, *slow], **run)
    assert {b.stats["n_state"] for b in batch} == {130, 1060}
    error = np.abs(batch[0].z_carried[-1] - ref.z_carried[-1]).max()
    error_alone = np.abs(alone.z_carried[-1] - ref.z_carried[-1]).max()
    assert error <= 1.5 * error_alone
