"""Many fields of one flow and data model, integrated as one state.

:class:`StackedField` stacks the states of ``P`` fields of one flow that may differ
in any of their options (learning rates, start, sample seed, sequence length...):
the members of :func:`odeflow.solver.solve_batch`, and (as
:class:`~odeflow.fields.ensemble.StartEnsemble`) of
:func:`odeflow.solver.solve_ensemble`. When the members differ only in their start
and their learning rates (:attr:`~odeflow.fields.base.Field.rate_options`), one call
of the field's :meth:`~odeflow.fields.base.Field.stacked_rhs` evaluates all of them,
so the per-call overhead of numpy and of ``solve_ivp`` is paid once per step for all
members instead of once per member; otherwise the members are evaluated one by one.
The Jacobian is block diagonal, a sparse matrix of the members' own.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from odeflow.errors import ValidationError
from odeflow.fields.base import PATTERN_BYTES_LIMIT, Field


class StackedField(Field):
    """``P`` fields of one flow and data model as one state, member after member.

    Parameters
    ----------
    fields : sequence of Field
        Fields of one type and data model. The state is their states one after the
        other (their sizes may differ, e.g. samples of different sequence lengths).
    varying : iterable of str, optional
        The constructor options in which the fields differ. When they are among the
        field's :attr:`~odeflow.fields.base.Field.rate_options` and its start options
        (:meth:`~odeflow.fields.base.Field.start_options`) and the sizes agree, the
        right-hand side is one call of the first field's ``stacked_rhs`` (and the
        gradient one call of its batched ``gradients``, where it has one); otherwise
        each field is evaluated in turn. By default the fields are taken to differ in
        their start and learning rates only.

    Attributes
    ----------
    P : int
        Number of members.
    n : int or None
        Each member's state size when they agree, else None.
    together : bool
        Whether the members are evaluated in one call.

    Notes
    -----
    The Jacobian is block diagonal: :meth:`jacobian` returns it as a sparse matrix
    built from the members' analytic Jacobians (only when every member has one), and
    :meth:`jac_sparsity` its block pattern. A member's gradient and learning rates
    (``gradient``, ``rate_vector``) make the stack a parameter-level field too, which an
    optimiser flow (:class:`~odeflow.fields.optimizers.OptimizerFlow`) wraps.

    Raises
    ------
    ValidationError
        Naming ``members`` when there are none, or they are fields of different
        flows.
    """

    name = "stacked"
    #: Explicit method of ``method="auto"`` for a stack too large for dense Jacobians:
    #: the stacked solve runs at tolerances divided by ``sqrt(P)`` or more (see
    #: ``solve_batch``), where the 8th-order method takes fewer steps
    #: (``docs/benchmarks.md``).
    large_state_method = "DOP853"

    def __init__(self, fields, varying=None):
        super().__init__()
        fields = list(fields)
        if not fields:
            raise ValidationError("members", "needs at least one field")
        first = fields[0]
        if any(type(f) is not type(first) for f in fields):
            raise ValidationError("members", "must be fields of one flow and data model")
        self.fields = self.members = fields
        self.first = first
        self.data = getattr(first, "data", None)
        self.P = len(fields)
        sizes = [int(f.size) for f in fields]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.n = sizes[0] if len(set(sizes)) == 1 else None
        self.together = self.n is not None and _shared_evaluation(first, varying)
        self._rhs = first.stacked_rhs(fields) if self.together else None
        gradients = getattr(first, "gradients", None)
        self._gradients = gradients if self.together and callable(gradients) else None
        self.has_jacobian = all(getattr(f, "has_jacobian", False) for f in fields)
        self.sparse_jacobian = self.has_jacobian
        self.preferred_method = getattr(first, "preferred_method", None)
        self.optimizer_flows = all(getattr(f, "optimizer_flows", True) for f in fields)
        self._rate = None

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def member_slice(self, i: int) -> np.ndarray:
        """Positions of member ``i``'s entries in the stacked state."""
        return np.arange(self.offsets[i], self.offsets[i + 1])

    def member_states(self, states: np.ndarray, i: int) -> np.ndarray:
        """Member ``i``'s columns of states ``(n_t, size)``."""
        return states[..., self.offsets[i]:self.offsets[i + 1]]

    def initial_state(self) -> np.ndarray:
        return np.concatenate([f.initial_state() for f in self.fields])

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """Every member's right-hand side: one ``stacked_rhs`` call when the members are
        evaluated together, else each member's ``rhs`` in turn."""
        self.nfev += 1
        if self._rhs is not None:
            return self._rhs(y.reshape(self.P, self.n)).ravel()
        return np.concatenate([f.rhs(t, self.member_states(y, i))
                               for i, f in enumerate(self.fields)])

    @property
    def rate_vector(self) -> np.ndarray:
        """Every member's learning rates, member after member (an AttributeError when a
        member has none: its state is not its parameters)."""
        if self._rate is None:
            missing = [f for f in self.fields if not hasattr(f, "rate_vector")]
            if missing:
                raise AttributeError(f"{type(missing[0]).__name__} has no rate_vector")
            self._rate = np.concatenate([
                np.broadcast_to(np.asarray(f.rate_vector, dtype=float), (int(f.size),))
                for f in self.fields])
        return self._rate

    def gradient(self, y: np.ndarray) -> np.ndarray:
        """Every member's gradient: one call of the batched ``gradients`` when the members
        are evaluated together and the field has one, else each member's ``gradient``."""
        if self._gradients is not None:
            return self._gradients(y.reshape(self.P, self.n)).ravel()
        return np.concatenate([f.gradient(self.member_states(y, i))
                               for i, f in enumerate(self.fields)])

    def jacobian(self, t: float, y: np.ndarray):
        """Block-diagonal analytic Jacobian, a sparse ``(size, size)`` matrix."""
        self.njev += 1
        return sparse.block_diag([f.jacobian(t, self.member_states(y, i))
                                  for i, f in enumerate(self.fields)], format="csc")

    def jac_sparsity(self):
        """Block-diagonal pattern (each block the member's pattern, or full), or None
        when the stored entries would exceed :data:`PATTERN_BYTES_LIMIT` bytes."""
        blocks = [f.jac_sparsity() for f in self.fields]
        entries = sum(int(f.size) ** 2 if b is None else
                      int(b.nnz if sparse.issparse(b) else np.count_nonzero(b))
                      for f, b in zip(self.fields, blocks, strict=True))
        if 12 * entries > PATTERN_BYTES_LIMIT:
            return None
        blocks = [np.ones((f.size, f.size), dtype=bool) if b is None else b
                  for f, b in zip(self.fields, blocks, strict=True)]
        return sparse.block_diag(blocks, format="csr").astype(bool)

    def trajectory(self, t, states, stats):
        """One result per member, in order (a list)."""
        return [f.trajectory(t, self.member_states(states, i), dict(stats))
                for i, f in enumerate(self.fields)]

    def parameters(self) -> dict:
        return {**self.first.parameters(), "members": self.P}


def _shared_evaluation(first: Field, varying) -> bool:
    """Whether members that differ in the options ``varying`` (None: their start and
    learning rates) can share one evaluation: ``varying`` among ``first``'s rate and
    start options."""
    if varying is None:
        return True
    shared = set(first.rate_options) | set(type(first).start_options(None))
    return set(varying) <= shared
