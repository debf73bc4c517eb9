"""The base of an optimiser: one discrete ``step`` and the ODE of its augmented state.

Every optimiser of odeflow (:class:`~odeflow.fields.optimizers.GradientDescent`,
:class:`~odeflow.fields.optimizers.Momentum`, :class:`~odeflow.fields.optimizers.Adam`)
is one subclass of :class:`Optimizer`. The trainers (:func:`odeflow.train`,
:func:`odeflow.train_sgd`, :func:`odeflow.gradient_ascent`), the deterministic
recursion (:func:`odeflow.optimizer_steps` and the exact steps of an optimiser flow)
all update the parameters with :meth:`Optimizer.step`; the optimiser flow
(:class:`~odeflow.fields.optimizers.OptimizerFlow`) integrates :meth:`Optimizer.ode_rhs`
with the Jacobian :meth:`Optimizer.ode_jacobian` (``docs/optimisers.md``).

Sign convention. ``step`` moves the parameters by ``rate`` times the optimiser's
update of the gradient ``g`` it is given: ``theta <- theta + rate * update(g)``. An
ascent on an objective ``J`` (the Scan and Snap levels) passes ``g = grad J`` and
``rate = +eta``; a descent on a loss ``L`` (PyTorch's ``SGD``/``Adam``) passes
``g = grad L`` and ``rate = -eta``. Every update here is odd in ``g``, so both
readings are the same optimiser.
"""

from __future__ import annotations

import math

import numpy as np

from odeflow.data.checks import as_real_number
from odeflow.errors import ValidationError


def fraction(value, name: str) -> float:
    """A finite float in ``[0, 1)``, else a ValidationError naming ``name``."""
    x = as_real_number(value, name, "finite and in [0, 1)")
    if not (math.isfinite(x) and 0.0 <= x < 1.0):
        raise ValidationError(name, f"must be finite and in [0, 1), got {value!r}")
    return x


def flag(value, name: str) -> bool:
    """``value`` if it is a bool, else a ValidationError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(name, f"must be True or False, got {value!r:.80}")
    return bool(value)


def keep_flag(value) -> bool | None:
    """``keep_state`` of an optimiser: None (kept while small) or a bool, else a ValidationError."""
    return None if value is None else flag(value, "keep_state")


def choice(value, name: str, choices) -> str:
    """``value`` if it is one of ``choices``, else a ValidationError naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(name, f"must be one of {list(choices)}, got {value!r:.80}")
    return value


#: Bytes of optimiser state (``8 x points x state_blocks x n``) up to which an
#: optimiser flow's result keeps it when ``keep_state`` is None (:meth:`Optimizer.keeps_state`).
KEEP_STATE_BYTES = 16 * 2**20


class Optimizer:
    """An optimiser: its discrete step and its ODE in step time ``s``.

    State layout: the optimiser's state is a list of :attr:`state_blocks` arrays,
    each of the parameters' shape (:meth:`init_state`: all zero, the optimiser at
    rest), in the order :meth:`step` documents. An optimiser flow's flat state is
    the parameters followed by these blocks.
    """

    #: Whether an optimiser flow's result keeps the optimiser's state as series
    #: (True, False, or None: while it is small, :meth:`keeps_state`).
    keep_state = None

    #: Name saved in ``describe()["kind"]``.
    kind = "optimizer"
    #: Copies of the parameter state the optimiser keeps.
    state_blocks = 0
    #: Whether an optimiser flow copies its exact first steps into the solution
    #: (:attr:`~odeflow.fields.optimizers.OptimizerFlow.exact_until`).
    copies_exact_steps = False
    #: Step ``k`` of a flow is the ODE at ``s = k + offset``.
    offset = 0.0
    #: ``"rest"``, ``"limit"`` or ``"first_step"``: how an optimiser flow starts.
    start = "rest"

    def init_state(self, shape) -> list:
        """The optimiser at rest for parameters of ``shape``: :attr:`state_blocks` zeros."""
        return [np.zeros(shape) for _ in range(self.state_blocks)]

    def step(self, theta: np.ndarray, g: np.ndarray, state: list, k: int, rate) -> None:
        """Step ``k >= 1``: update ``theta`` and ``state`` in place from the gradient ``g``
        (module docstring for the sign of ``rate``, a number or an array like ``theta``)."""
        raise NotImplementedError

    def flow_step(self, theta, g, state, k: int, rate) -> None:
        """:meth:`step` on an optimiser flow's state layout (here the same)."""
        self.step(theta, g, state, k, rate)

    @property
    def exact_request(self):
        """Steps an optimiser flow takes by the recursion before its ODE (0: none)."""
        return 0

    def ode_rhs(self, s: float, theta, state, inner, rate) -> np.ndarray:
        """``d(theta, state)/ds`` flat, at step time ``s`` on the ODE's clock, for the
        parameter-level field ``inner`` with per-entry rates ``rate``."""
        raise NotImplementedError

    def ode_jacobian(self, s: float, theta, state, inner, rate, dF) -> np.ndarray:
        """Dense Jacobian of :meth:`ode_rhs`, given ``dF``, the inner field's Jacobian."""
        raise NotImplementedError

    def series(self, steps, state) -> dict:
        """Named series of a flow's result from the optimiser's state blocks (``state``
        None: the series that need no state)."""
        return {}

    def keeps_state(self, points: int, n: int) -> bool:
        """Whether a flow's result at ``points`` output steps of ``n`` parameters keeps the
        optimiser's state: :attr:`keep_state` when given, else whether it takes at most
        :data:`KEEP_STATE_BYTES` (``8 points state_blocks n`` bytes)."""
        if self.keep_state is not None:
            return bool(self.keep_state)
        return 8 * int(points) * self.state_blocks * int(n) <= KEEP_STATE_BYTES

    def flow_time(self, steps):
        """Flow time of ``steps`` of a first-order flow, or None where there is no map."""
        return None

    def describe(self) -> dict:
        """JSON-able description (saved with trajectories as ``meta["optimizer"]``)."""
        return {"kind": self.kind}

    def __eq__(self, other) -> bool:
        return isinstance(other, Optimizer) and self.describe() == other.describe()

    __hash__ = None
