"""Method choice and Jacobians (issue: scale): nothing that grows like size^2 beyond
DENSE_MEMORY_LIMIT bytes, sparse Jacobian patterns for implicit methods on large states."""

import numpy as np
import pytest

import odeflow
from odeflow.fields.exact import ExactFlow
from odeflow.fields.reduced import ReducedFlow
from odeflow.solver import options as solve_options
from tests.test_reduced import block_model, random_state


def test_auto_never_picks_a_dense_jacobian_method_above_the_limit(monkeypatch):
    data = odeflow.DataModel.preset("syn-small")
    for flow in (ExactFlow(data, 1.0, 0.1), ReducedFlow(data, 1.0, 0.1)):
        assert solve_options.choose_method(flow) == "LSODA"
        monkeypatch.setattr(solve_options, "DENSE_MEMORY_LIMIT", 8 * flow.size ** 2 - 1)
        assert solve_options.choose_method(flow) == solve_options.LARGE_STATE_METHOD
        assert solve_options.LARGE_STATE_METHOD not in solve_options.IMPLICIT
        monkeypatch.undo()


def test_shared_query_medium_auto_is_explicit():
    """shared-query-medium's Level E state (~20k entries) would need a 3 GB dense Jacobian."""
    field = ExactFlow(odeflow.DataModel.preset("shared-query-medium"), 1.0, 0.1)
    assert 8 * field.size ** 2 > solve_options.DENSE_MEMORY_LIMIT
    assert solve_options.choose_method(field) not in solve_options.IMPLICIT


def test_sparsity_pattern_covers_the_jacobian():
    rng = np.random.default_rng(4)
    data = block_model(rng, M=60, K=6, n_queries=3, n_common=2)
    field = ReducedFlow(data, 1.0, 0.5)
    pattern = field.jac_sparsity().toarray()
    J = field.jacobian(0.0, random_state(field, rng))
    assert np.all(pattern[J != 0])
    assert pattern.sum() < 0.5 * field.size ** 2  # classes of other queries do not couple


def test_implicit_methods_above_the_limit(monkeypatch):
    """Above the limit: Radau gets the sparsity pattern (same answer), LSODA and a
    flow without a pattern are refused, naming the method and the bytes."""
    rng = np.random.default_rng(5)
    data = block_model(rng, M=60, K=6, n_queries=3, n_common=2)
    kw = dict(flow="reduced", t_span=(0, 50.0), rtol=1e-10, atol=1e-12, progress=False)
    dense = odeflow.solve(data, method="Radau", **kw)
    assert dense.stats["analytic_jacobian"]
    monkeypatch.setattr(solve_options, "DENSE_MEMORY_LIMIT", 1000)
    sparse_run = odeflow.solve(data, method="Radau", **kw)
    assert not sparse_run.stats["analytic_jacobian"]
    assert np.abs(sparse_run.z_carried - dense.z_carried).max() < 1e-7
    with pytest.raises(odeflow.ValidationError, match="bytes") as info:
        odeflow.solve(data, method="LSODA", **kw)
    assert info.value.field == "method"
    with pytest.raises(odeflow.ValidationError, match="dense"):
        odeflow.solve(data, method="BDF", flow="exact", t_span=(0, 1.0))
    auto = odeflow.solve(data, method="auto", **kw)
    assert auto.stats["method"] == solve_options.LARGE_STATE_METHOD
