"""The base classes every vector field derives from.

:class:`Field` is what the solve entry point (:func:`odeflow.solve`) knows of a
right-hand side, for every model family: the flat state vector that
:func:`scipy.integrate.solve_ivp` integrates, the right-hand side (and, where it
can, the analytic Jacobian), and the family's result built from the solver's
output. :class:`VectorField` is the base of the Scan and Snap levels (a
:class:`~odeflow.data.DataModel` and the two learning rates).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from odeflow.data import DataModel, as_real_array, validate_positive
from odeflow.errors import ValidationError, renamed_keywords

#: Largest sparsity pattern a field builds for finite-difference Jacobians
#: (bytes, ~12 per stored entry of a CSR matrix); above it ``jac_sparsity`` is None.
PATTERN_BYTES_LIMIT = 64 * 2**20


#: Old keywords of a Scan and Snap level's start -> their part of ``start=(y0, z0)``
#: (``docs/api.md``, "One name per concept").
START_PARTS = {"y0": ("start", 0), "z0": ("start", 1)}


def split_start(start, name: str = "start") -> tuple:
    """``(y0, z0)`` of a Scan and Snap start: None (both zero) or a pair ``(y0, z0)``
    (a tuple or list of two; either part None: zero).

    ``y0`` is the initial decoder ``Y(0)`` (shape ``(M, M)``), ``z0`` the initial
    logits ``Z(0)`` (:func:`initial_logits`). A bare array is refused, naming
    ``name``: it would be ambiguous between the two parts.
    """
    if start is None:
        return None, None
    if isinstance(start, (tuple, list)) and len(start) == 2:
        return start[0], start[1]
    raise ValidationError(name, f"must be a (y0, z0) pair (either None: zero), got "
                          f"{type(start).__name__} {start!r:.60}")


def initial_logits(data: DataModel, z0) -> np.ndarray:
    """Full initial logits of the query rows in use, shape ``(q, M)``.

    Parameters
    ----------
    data : DataModel
    z0 : None, ndarray of shape (q, M), or mapping {query_token: array of length M}
        ``Z(0)``; zero by default (the paper's initial condition).
    """
    q, M = data.query_tokens.size, data.vocab_size
    out = np.zeros((q, M))
    if z0 is None:
        return out
    if isinstance(z0, dict):
        for m, row in z0.items():
            if m not in set(data.query_tokens.tolist()):
                raise ValidationError("z0", f"key {m!r} is not a query token of the data "
                                      f"model (query tokens: {data.query_tokens.tolist()})")
            out[data.query_index(m)] = _logit_row(row, M, f"z0[{m}]")
        return out
    arr = as_real_array(z0, "z0")
    if arr.shape != (q, M):
        raise ValidationError("z0", f"must have shape (queries={q}, M={M}), got {arr.shape}")
    for qi in range(q):
        out[qi] = _logit_row(arr[qi], M, f"z0[{int(data.query_tokens[qi])}]")
    return out


def _logit_row(row, M, name) -> np.ndarray:
    row = as_real_array(row, name)
    if row.shape != (M,):
        raise ValidationError(name, f"must have length M = {M}, got shape {row.shape}")
    if not np.all(np.isfinite(row)):
        raise ValidationError(name, "must be finite")
    return row


def batch_by_loop(rates, y: np.ndarray, eta_y, eta_z) -> np.ndarray:
    """``rates(y_i, eta_y_i, eta_z_i)`` stacked over the rows of ``y`` (P, size).

    The fallback of a field's ``rates`` for a batch its storage cannot
    vectorise; learning rates are scalars or arrays of shape (P, 1).
    """
    ey = np.broadcast_to(np.asarray(eta_y, dtype=float).reshape(-1), (y.shape[0],))
    ez = np.broadcast_to(np.asarray(eta_z, dtype=float).reshape(-1), (y.shape[0],))
    return np.stack([rates(y[i], ey[i], ez[i]) for i in range(y.shape[0])])


class Field(ABC):
    """Any right-hand side ``dy/dt = F(t, y)`` that :func:`odeflow.solve` integrates.

    The base of every model family's levels (the sequence-class levels of Scan
    and Snap derive from :class:`VectorField`, the induction-head levels from
    their own family base), and of the wrappers around a field (an optimiser
    flow, a stack of fields). A field owns its flat state: it builds the initial
    state, evaluates the right-hand side (and, where it can, the analytic
    Jacobian or a sparsity pattern), and turns the solver's output into its
    family's result. It never calls the solver.

    Attributes
    ----------
    nfev, njev : int
        Right-hand sides and Jacobians evaluated so far (reported with results).
    """

    #: Name used by ``odeflow.solve(flow=...)``.
    name: str = ""
    #: True when :meth:`jacobian` returns the analytic Jacobian.
    has_jacobian: bool = False
    #: The constructor's learning-rate options, in order. The gradient does not depend
    #: on them (``rhs = rate_vector * gradient``), so the members of a stack that differ
    #: only in these and in their start are evaluated together (:meth:`stacked_rhs`),
    #: and a point of :func:`odeflow.solve_batch` may give them as a tuple in this order.
    rate_options: tuple = ()

    def __init__(self):
        self.nfev = 0
        self.njev = 0

    @property
    @abstractmethod
    def size(self) -> int:
        """Length of the flat state vector."""

    @abstractmethod
    def initial_state(self) -> np.ndarray:
        """The flat state at ``t = 0``."""

    @abstractmethod
    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``dy/dt`` at ``(t, y)``."""

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic ``dF/dy`` (only when :attr:`has_jacobian`)."""
        raise NotImplementedError(f"{type(self).__name__} has no analytic Jacobian")

    def jac_sparsity(self):
        """Sparsity pattern of ``dF/dy`` for finite-difference Jacobians, or None."""
        return None

    def initial_step(self) -> float | None:
        """The integrator's first step size, in units of ``t``, or None: the integrator
        picks its own (``solve_ivp``'s estimate from the right-hand side at the start).
        :func:`odeflow.solver.options.prepare` passes it to ``solve_ivp`` as
        ``first_step`` (at most the span) for the one-step methods
        (:data:`~odeflow.solver.options.ONE_STEP`); the error control still rejects it
        when it is too large. None here: a field that knows no natural scale of its ``t``."""
        return None

    @classmethod
    def start_options(cls, start) -> dict:
        """The constructor's keyword arguments that set the start ``start`` (one member
        of :func:`odeflow.solve_ensemble`'s ``starts``): ``{"start": start}``."""
        return {"start": start}

    def stacked_rhs(self, members):
        """One function for the right-hand sides of ``members`` together, or None.

        ``members`` are fields of this type, state size, data model and options
        (this field among them), apart from their start and :attr:`rate_options`
        (:class:`~odeflow.fields.stacked.StackedField`). The function maps their
        states, shape ``(P, size)``, to their right-hand sides, same shape, in one
        call. The default is ``rate_vector * gradients(states)`` for a field with a
        batched ``gradients`` (a parameter level, whose right-hand side is its
        ``rate_vector`` times its ``gradient``), else None: the stack evaluates the
        members one by one.
        """
        gradients = getattr(self, "gradients", None)
        if not callable(gradients) or not all(hasattr(m, "rate_vector") for m in members):
            return None
        rates = np.stack([np.broadcast_to(np.asarray(m.rate_vector, dtype=float),
                                          (self.size,)) for m in members])

        def rhs(states: np.ndarray) -> np.ndarray:
            out = gradients(states)
            out *= rates
            return out

        return rhs

    def parameter_level(self) -> Field:
        """The field in parameter coordinates, for an optimiser flow to wrap.

        An optimiser steps the model's parameters; a field whose solver state
        is another chart of them (the induction levels carry ``ln|c|``) returns
        the same flow with the parameters as its state, with ``gradient(y)`` and
        ``rate_vector``. The default is the field itself.
        """
        return self

    def margins(self, y: np.ndarray) -> np.ndarray:
        """Decoder logit margin ``h_n`` of each class at state ``y`` (Eqn 44), shape (K,).

        Used by the ready events of :mod:`odeflow.solver.events`. Levels that
        carry a decoder override it.
        """
        raise ValidationError("events", f"flow {self.name!r} has no decoder margin")

    @abstractmethod
    def trajectory(self, t: np.ndarray, states: np.ndarray, stats: dict):
        """The family's result (e.g. a :class:`~odeflow.results.Trajectory`) from
        states of shape (n, size)."""

    @abstractmethod
    def parameters(self) -> dict:
        """JSON-able description of the field's parameters (saved with results)."""


class VectorField(Field):
    """A level of the Scan and Snap family: a field of a :class:`DataModel`.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of the decoder ``Y`` and the attention logits ``Z``
        (Eqns 3-4); finite and positive.
    start : (y0, z0), optional
        The initial decoder ``Y(0)`` and logits ``Z(0)`` (:func:`split_start`;
        either None: zero, the paper's start). A level whose state holds no
        decoder (:attr:`takes_decoder_start` False) starts from ``Y(0) = 0`` and
        refuses a ``y0``. The old keywords ``y0=``, ``z0=`` warn.
    """

    #: Whether the level starts from a given decoder ``Y(0)`` (``start[0]``).
    takes_decoder_start = True
    #: The learning rates of the decoder and of the logits (:attr:`Field.rate_options`).
    rate_options = ("eta_y", "eta_z")

    @classmethod
    def start_options(cls, start) -> dict:
        """``start = (y0, z0)``, the decoder and the logits (either None: zero):
        ``{"start": (y0, z0)}``."""
        return {"start": split_start(start, "starts")}

    @renamed_keywords(START_PARTS)
    def __init__(self, data: DataModel, eta_y: float, eta_z: float, start=None):
        super().__init__()
        if not isinstance(data, DataModel):
            raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
        self.data = data
        self.eta_y = validate_positive(eta_y, "eta_y")
        self.eta_z = validate_positive(eta_z, "eta_z")
        y0, z0 = split_start(start)
        if y0 is not None and not self.takes_decoder_start:
            raise ValidationError("start", f"flow {self.name!r} starts from Y(0) = 0 (its "
                                  "state holds no decoder); give start=(None, z0)")
        self.start_decoder = y0
        self.z_base = initial_logits(data, z0)

    def stacked_rhs(self, members):
        """:meth:`Field.stacked_rhs`; for a level with ``rates(states, eta_y, eta_z)``
        (its right-hand side at every row of ``states``, one pair of learning rates per
        row, e.g. Level R's Eqns 8-10) and no batched ``gradients``, one call of
        ``rates`` with each member's ``eta_y``, ``eta_z``."""
        together = super().stacked_rhs(members)
        rates = getattr(self, "rates", None)
        if together is not None or not callable(rates):
            return together
        eta_y = np.array([m.eta_y for m in members], dtype=float)[:, None]
        eta_z = np.array([m.eta_z for m in members], dtype=float)[:, None]
        return lambda states: rates(states, eta_y, eta_z)

    def parameters(self) -> dict:
        return {"flow": self.name, "eta_y": self.eta_y, "eta_z": self.eta_z}
