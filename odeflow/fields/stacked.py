"""Many parameter points of one flow on one data model, integrated as one state.

:class:`StackedField` stacks the states of ``P`` fields that differ only in
their learning rates ``(eta_Y, eta_Z)``; one right-hand side evaluates all of
them in one vectorised call of the field's ``rates`` (dense support storage),
so the per-call overhead of numpy and of ``solve_ivp`` is paid once per step
for all points instead of once per point. :func:`odeflow.solver.solve_batch`
integrates it.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from odeflow.errors import ValidationError
from odeflow.fields.base import PATTERN_BYTES_LIMIT, VectorField


class StackedField(VectorField):
    """``P`` fields of one flow and data model (learning rates apart) as one state.

    Parameters
    ----------
    fields : sequence of VectorField
        Built with the same data model, flow and options; only ``eta_y``,
        ``eta_z`` differ. The state is their states one after the other.

    Notes
    -----
    The Jacobian is block diagonal: :meth:`jacobian` returns it as a sparse
    matrix built from the fields' analytic Jacobians (``sparse_jacobian``),
    and :meth:`jac_sparsity` its block pattern.
    """

    name = "stacked"
    sparse_jacobian = True
    #: Explicit method of ``method="auto"`` for a stack too large for dense Jacobians:
    #: the stacked solve runs at ``rtol / sqrt(P)`` (see ``solve_batch``), where the
    #: 8th-order method takes fewer steps (``docs/benchmarks.md``).
    large_state_method = "DOP853"

    def __init__(self, fields):
        fields = list(fields)
        if not fields:
            raise ValidationError("params", "needs at least one parameter point")
        first = fields[0]
        if any(type(f) is not type(first) or f.size != first.size for f in fields):
            raise ValidationError("fields", "must be fields of one flow and data model")
        self.fields = fields
        self.first = first
        self.data = first.data
        self.P, self.n = len(fields), first.size
        self.eta_y = np.array([f.eta_y for f in fields])[:, None]
        self.eta_z = np.array([f.eta_z for f in fields])[:, None]
        self.has_jacobian = bool(getattr(first, "has_jacobian", False))
        self.preferred_method = getattr(first, "preferred_method", None)
        self.nfev = 0
        self.njev = 0

    @property
    def size(self) -> int:
        return self.P * self.n

    def initial_state(self) -> np.ndarray:
        return np.concatenate([f.initial_state() for f in self.fields])

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """All points' right-hand sides in one call of the field's ``rates``."""
        self.nfev += 1
        Y = y.reshape(self.P, self.n)
        if hasattr(self.first, "rates"):
            return self.first.rates(Y, self.eta_y, self.eta_z).ravel()
        return np.concatenate([f.rhs(t, Y[i]) for i, f in enumerate(self.fields)])

    def jacobian(self, t: float, y: np.ndarray):
        """Block-diagonal analytic Jacobian, a sparse ``(size, size)`` matrix."""
        self.njev += 1
        Y = y.reshape(self.P, self.n)
        return sparse.block_diag([f.jacobian(t, Y[i]) for i, f in enumerate(self.fields)],
                                 format="csc")

    def jac_sparsity(self):
        """Block-diagonal pattern (each block the field's pattern, or full), or None."""
        block = self.first.jac_sparsity()
        if block is None:
            if 12 * self.P * self.n ** 2 > PATTERN_BYTES_LIMIT:
                return None
            block = np.ones((self.n, self.n), dtype=bool)
        return sparse.block_diag([block] * self.P, format="csr").astype(bool)

    def trajectory(self, t, states, stats):
        """One trajectory per point, in order (a list)."""
        return [f.trajectory(t, states[:, i * self.n:(i + 1) * self.n], dict(stats))
                for i, f in enumerate(self.fields)]
