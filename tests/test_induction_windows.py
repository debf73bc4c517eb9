"""Window products of the induction population flow (spec section 10; issue 23 speed).

:class:`WindowLaws` splits the products with ``P_k(z, e) = mu_k(z) pi_k(e | context)``
when the next token depends only on the first ``n - 1`` window tokens; these tests
hold it to the dense products it replaces.
"""

import numpy as np
import pytest

from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError
from odeflow.fields.induction import CopierFlow, PopulationFlow
from odeflow.fields.induction.population import WindowLaws, window_loss

MODELS = {"trigram-H2": lambda: InductionData(3, 3, 2, 2, alpha=0.3, num_kernels=5, seed=3),
          "bigram-H3": lambda: InductionData(2, 2, 3, 2, alpha=0.1, num_kernels=4, seed=1),
          "4gram-H3": lambda: InductionData(2, 4, 3, 2, alpha=0.5, num_kernels=3, seed=7),
          "point": lambda: InductionData.preset("ih-point")}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("loss", ["nll", "code"])
def test_context_split_equals_dense_products(model, loss):
    data = MODELS[model]()
    laws = data.window_laws()
    split = WindowLaws(laws, context=data.n_gram - 1)
    dense = WindowLaws(laws)
    assert split.factored and not dense.factored
    W = laws.shape[1]
    rng = np.random.default_rng(len(model))
    for a in (0.01, -3.0, 12.0):
        kernel = rng.uniform(-1, 1, size=(W, W))
        kernel += kernel.T
        got = window_loss(split, kernel, a, loss)
        want = window_loss(dense, kernel, a, loss)
        assert got[0] == pytest.approx(want[0], rel=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-10,
                                   atol=1e-13 * np.max(np.abs(want[1])))
        assert got[2] == pytest.approx(want[2], rel=1e-10, abs=1e-14)
        # the gradient alone: the same derivatives, no loss
        alone = window_loss(split, kernel, a, loss, value=False)
        assert alone[0] is None
        np.testing.assert_array_equal(alone[1], got[1])


def test_wrong_context_is_refused_naming_laws():
    data = InductionData(3, 3, 3, 2, alpha=0.3, num_kernels=2, seed=3)  # context: 2 tokens
    with pytest.raises(ValidationError) as info:
        WindowLaws(data.window_laws(), context=1)
    assert info.value.field == "laws"


@pytest.mark.parametrize("flow", [PopulationFlow, CopierFlow])
def test_window_not_longer_than_context_keeps_dense_products(flow):
    """A 4-gram chain with H = 2: the population flow's windows have 3 tokens (as many as
    the context), the exact copier's 2 (fewer): no split, and the gradient is still the
    loss's."""
    data = InductionData(2, 4, 2, 2, alpha=0.5, num_kernels=3, seed=2)
    field = flow(data)
    assert not field.windows.factored
    y = field.initial_state() + np.random.default_rng(4).normal(size=field.size)
    grad = field.gradient(y)
    step = 1e-6
    for i in range(field.size):
        e = np.zeros(field.size)
        e[i] = step
        fd = (field.loss(y + e) - field.loss(y - e)) / (2 * step)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-9)
