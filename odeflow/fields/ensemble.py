"""Members of one parameter-level field that differ only in their start, as one state.

:class:`StartEnsemble` stacks ``P`` fields of one flow, data model, learning
rates and options (for Level T: one sample) that were started from different
draws (``y0``, ``z0``; the Fig. 6 seeds, ``docs/optimisers.md``). The
right-hand side depends on the start only through the state, so one call of
the first member's ``gradients`` (:meth:`ExactFlow.gradients
<odeflow.fields.exact.ExactFlow.gradients>`, per class block for Level T)
evaluates every member. It is a parameter-level field itself (``gradient``,
``rate_vector``), so an optimiser flow
(:class:`~odeflow.fields.optimizers.OptimizerFlow`) wraps it unchanged;
:func:`odeflow.solver.solve_ensemble` integrates it and hands back one result
per member.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError
from odeflow.fields.base import Field


class StartEnsemble(Field):
    """``P`` fields that differ only in their start, stacked member after member.

    Parameters
    ----------
    members : sequence of Field
        Fields of one type, state size and learning rates (``rate_vector``)
        with ``gradient(y)``, built with the same options and different starts.
        A field with a batched ``gradients(states)`` (e.g.
        :class:`~odeflow.fields.exact.ExactFlow`,
        :class:`~odeflow.fields.finite_t.FiniteTFlow`) is evaluated for every
        member in one call; any other, member by member.

    Raises
    ------
    ValidationError
        Naming ``members`` when they are empty, of different types or sizes, or
        have different learning rates.
    """

    name = "ensemble"

    def __init__(self, members):
        super().__init__()
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
        self.members = members
        self.first = first
        self.data = first.data
        self.P, self.n = len(members), int(first.size)
        self._rate = np.tile(rate, self.P)

    @property
    def size(self) -> int:
        return self.P * self.n

    def initial_state(self) -> np.ndarray:
        return np.concatenate([m.initial_state() for m in self.members])

    @property
    def rate_vector(self) -> np.ndarray:
        """Every member's learning rates, member after member."""
        return self._rate

    def gradient(self, y: np.ndarray) -> np.ndarray:
        """Every member's gradient: one call of the first member's ``gradients`` where it
        has one, else each member's ``gradient`` in turn."""
        states = y.reshape(self.P, self.n)
        if callable(getattr(self.first, "gradients", None)):
            return self.first.gradients(states).ravel()
        return np.concatenate([m.gradient(s) for m, s in zip(self.members, states,
                                                             strict=True)])

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``rate_vector * gradient``: each member's own right-hand side."""
        self.nfev += 1
        out = self.gradient(y)
        out *= self._rate
        return out

    def member_slice(self, i: int) -> np.ndarray:
        """Positions of member ``i``'s entries in the stacked state."""
        return np.arange(i * self.n, (i + 1) * self.n)

    def member_states(self, states: np.ndarray, i: int) -> np.ndarray:
        """Member ``i``'s columns of states ``(n_t, size)``."""
        return states[:, i * self.n:(i + 1) * self.n]

    def trajectory(self, t, states, stats):
        """One result per member, in order (a list)."""
        return [m.trajectory(t, self.member_states(states, i), dict(stats))
                for i, m in enumerate(self.members)]

    def parameters(self) -> dict:
        return {**self.first.parameters(), "members": self.P}
