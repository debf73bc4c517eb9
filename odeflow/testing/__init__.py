"""Hypothesis strategies of valid inputs, for property tests of claims built on odeflow.

One module per family, as the families' ``strategies`` declare: Scan and Snap
(:mod:`odeflow.testing.scan_snap`: :class:`~odeflow.data.DataModel` objects with a
controlled token structure, their tables, rate pairs, initial logits), the induction
heads (:mod:`odeflow.testing.induction`: :class:`~odeflow.data.induction.InductionData`
objects, transition kernels, parameters ``(c, w, a)``, group rates) and the two-stage
family (:mod:`odeflow.testing.two_stage`); shared ones (:mod:`odeflow.testing.common`):
probability vectors, learning rates spread over decades, flat states, and
:func:`family_data_models`, the data models of every registered family (each family's
``DATA_MODELS`` hook). The first two families' names are also here. Users test their
own claims with them, e.g.::

    from hypothesis import given
    from odeflow.testing import data_models, learning_rates

    @given(data=data_models(min_distinct=1), eta=learning_rates())
    def test_my_claim(data, eta):
        ...

Hypothesis is a test extra (``pip install odeflow[test]``; without it, importing
this package raises :class:`ImportError`). Sizes are small by default, so that every
example solves in milliseconds; the guide is ``docs/testing.md``.
"""

try:
    import hypothesis  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover
    raise ImportError("odeflow.testing needs hypothesis: pip install 'odeflow[test]'") from exc

from odeflow.testing.common import (
    family_data_models,
    learning_rates,
    probability_vectors,
    state_vectors,
)
from odeflow.testing.induction import (
    induction_kernels,
    induction_models,
    induction_parameters,
    induction_rates,
)
from odeflow.testing.scan_snap import (
    data_models,
    initial_logits,
    learning_rate_pairs,
    model_tables,
    models_and_logits,
    relabel_tokens,
)

__all__ = ["data_models", "family_data_models", "induction_kernels", "induction_models",
           "induction_parameters", "induction_rates", "initial_logits", "learning_rate_pairs",
           "learning_rates", "model_tables", "models_and_logits", "probability_vectors",
           "relabel_tokens", "state_vectors"]
