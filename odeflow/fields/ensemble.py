"""Members of one parameter-level field that differ only in their start, as one state.

:class:`StartEnsemble` is the :class:`~odeflow.fields.stacked.StackedField` of ``P``
fields of one flow, data model, learning rates and options (for Level T: one
sample) that were started from different draws (``start``; the Fig. 6 seeds,
``docs/optimisers.md``). The right-hand side depends on the start only through the
state, so one call of the first member's batched ``gradients`` (:meth:`ExactFlow.gradients
<odeflow.fields.exact.ExactFlow.gradients>`, per class block for Level T) evaluates
every member, where the field has one. It is a parameter-level field itself
(``gradient``, ``rate_vector``), so an optimiser flow
(:class:`~odeflow.fields.optimizers.OptimizerFlow`) wraps it unchanged;
:func:`odeflow.solver.solve_ensemble` integrates it and hands back one result per
member.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError
from odeflow.fields.stacked import StackedField


class StartEnsemble(StackedField):
    """``P`` fields that differ only in their start, stacked member after member.

    Parameters
    ----------
    members : sequence of Field
        Fields of one type, state size and learning rates (``rate_vector``) with
        ``gradient(y)``, built with the same options and different starts. A field
        with a batched ``gradients(states)`` (e.g.
        :class:`~odeflow.fields.exact.ExactFlow`,
        :class:`~odeflow.fields.finite_t.FiniteTFlow`) is evaluated for every member
        in one call (:meth:`~odeflow.fields.base.Field.stacked_rhs`); any other,
        member by member.

    Raises
    ------
    ValidationError
        Naming ``members`` when they are empty, of different types or sizes, have
        different learning rates, or their state is not their parameters.
    """

    name = "ensemble"

    def __init__(self, members):
        members = list(members)
        if not members:
            raise ValidationError("members", "needs at least one field")
        first = members[0]
        if not (callable(getattr(first, "gradient", None)) and hasattr(first, "rate_vector")):
            raise ValidationError("members", f"{type(first).__name__} has no gradient(y) "
                                  "and rate_vector: its state is not its parameters")
        if any(type(m) is not type(first) or m.size != first.size for m in members):
            raise ValidationError("members", "must be fields of one flow and state layout")
        rate = np.asarray(first.rate_vector, dtype=float)
        if any(not np.array_equal(m.rate_vector, rate) for m in members):
            raise ValidationError("members", "must share their learning rates (they may "
                                  "differ only in their start)")
        super().__init__(members, varying=())
