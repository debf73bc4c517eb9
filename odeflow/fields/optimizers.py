"""Optimiser flows: heavy-ball momentum and Adam as ODEs in step time (``docs/optimisers.md``).

A real run does not follow the gradient flow of its level: it follows its
optimiser (SGD with momentum 0.9 in the paper's Figs. 4 and 6, Adam in Fig. 5).
An *optimiser flow* keeps the optimiser's state next to the parameters and runs
in step time ``s`` (one unit per optimiser step). It wraps any
*parameter-level* field, one whose flat state is the parameters themselves
(Level E, Level T; the induction-head levels, whose solver state holds ``ln|c|``,
refuse it: ``optimizer_flows = False``), through a two-part interface:

``inner.gradient(y)``
    ``g(theta)``, the raw gradient that the field follows, on its flat state
    (ascent on ``J`` for Scan and Snap; ``-grad L`` for a field that descends a
    loss), with
``inner.rate_vector``
    the learning rate of every entry of the flat state, so that
    ``inner.rhs(t, y) == inner.rate_vector * inner.gradient(y)`` (``F = eta g``).

The wrapper is sign-agnostic: it uses ``F`` and ``g`` as the inner field
defines them. (Adam's update is odd in ``g``, so Adam ascending ``J`` with
``g = grad J`` is Adam descending ``L = -J``.) Level R and the snap system are
refused (:class:`~odeflow.errors.ValidationError` naming ``optimizer``): their
variables are not the parameters.

Descriptions
------------
:class:`Momentum` (heavy ball, ``v <- mu v + g``, ``theta <- theta + eta v``):
with ``u = eta v``,

.. math::

    \\theta' = u, \\qquad u' = a F(\\theta) - b u,

the plain rates ``a = 1, b = 1 - mu``, or (``modified=True``)
with the *matched* rates ``b = -ln mu``, ``a = b / (1 - mu)``. The recursion
``u_{k+1} = mu u_k + F(theta_k)``, ``theta_{k+1} = theta_k + u_{k+1}`` uses the
*new* velocity: it is the symplectic, not the forward, Euler step of the ODE,
and read on a staggered grid (``theta_k`` at ``s = k + 1/2``, ``u_k`` at ``s =
k``) it is the ODE's midpoint rule, second order except for the damping term,
which is first order in ``1 - mu``; the matched rates make that term exact for a
constant force (``derivations/heavy_ball_modified_equation.py`` derives both
with sympy). Hence ``offset``: the trajectory at step ``k`` is the ODE, started
at rest, read at ``s = k + offset`` (default ``1/2``: the ODE starts at rest
half a step *before* step 0, so its state at step 0 is not exactly
``theta_0``). ``offset = 0`` with ``u(0) = 0`` lags the recursion by one step
under a constant gradient. The defaults (the half-step reading, the matched
rates when ``mu > 0``) are chosen against the deterministic discrete heavy ball,
never against training runs (``docs/optimisers.md``, ``docs/make_optimisers.py``).

:class:`Adam` (``m <- b1 m + (1-b1) g``, ``v <- b2 v + (1-b2) g^2``, ``theta <-
theta + eta m_hat / (sqrt(v_hat) + eps)``, bias-corrected), entrywise:

.. math::

    m' = k_1 (g - m), \\quad v' = k_2 (g^2 - v), \\quad
    \\theta' = \\eta \\frac{m / (1 - b_1^s)}{\\sqrt{v / (1 - b_2^s)} + \\epsilon},

with the plain rates ``k_i = 1 - b_i`` or, ``modified=True``, the rates
``k_i = -ln b_i`` of the exact continuous twin of the moment recursions (a
constant ``g`` then gives ``m(s) = (1 - b_1^s) g``, so ``m_hat = g`` at every
``s``, as in the recursion). The bias corrections are singular at ``s = 0``:
``start="limit"`` starts there from the limits ``m_hat -> (k_1 / ln(1/b_1)) g``,
``v_hat -> (k_2 / ln(1/b_2)) g^2`` (the limits of ``m / (1 - b^s)`` as ``s -> 0``
with ``m(0) = 0``; ``m_hat -> g`` exactly with the modified rates);
``start="first_step"`` takes the first Adam steps exactly (``exact_steps = k``:
the recursion's states, straight lines between them; ``"auto"``, the default:
every step that is some entry's first, then one more) and the ODE from its clock
``s = k``. As the heavy ball's velocity, the update takes the *new* moments, so
read staggered (``theta_k`` at ``s = k + 1/2``, ``m_k, v_k`` at ``s = k``) the
recursion is the ODE's midpoint rule, second order (CF7 item 6); ``offset``
(default ``1/2``) is that reading, the ODE started at ``s = k`` from
``theta_k - offset (theta_k - theta_{k-1})``.
:func:`odeflow.solve` copies those states into the solution
(:attr:`OptimizerFlow.exact_until`) and integrates only from ``s = k``.
Adam acts per entry, so a lumped state is valid only where the lumped entries
share their gradient exactly: they do in the lumped decoder row of Levels E and
T (the ``M - K`` non-next outputs it stands for have equal rows and so equal
gradients; the row carries one output's gradient, not their sum), and entries
that never move (inactive columns, logits no class attends) have a
zero gradient, so Adam leaves them at rest as the full model does.

Time axis. Trajectories of an optimiser flow are on the step axis
(``traj.steps``); the heavy ball also carries the flow time of the warm-up map
(``traj.flow_time``, :meth:`Momentum.flow_time`); Adam has no first-order time
map (``traj.flow_time`` is None): its ODE is the comparison.

Jacobian. The heavy ball's is ``[[0, I], [a dF, -b I]]`` and Adam's
``[[0, D_m, D_v], [k_1 dg, -k_1 I, 0], [2 k_2 diag(g) dg, 0, -k_2 I]]``
(``dg = diag(1/eta) dF``, ``D_m``, ``D_v`` diagonal), both built from the inner
field's analytic Jacobian ``dF`` (Adam's ``D_v`` is taken as 0 where ``v = 0``, where it
is unbounded: entries at rest); :meth:`OptimizerFlow.jacobian` returns them
dense (every integrator, LSODA included, takes a dense Jacobian) and
:meth:`OptimizerFlow.jac_sparsity` the block pattern for states too large for a
dense one.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from odeflow.data.checks import as_real_number
from odeflow.errors import ValidationError
from odeflow.fields.base import PATTERN_BYTES_LIMIT, Field

#: Starts of :class:`Momentum`: ``"rest"`` (``u(0) = 0``) or ``"first_step"``.
MOMENTUM_STARTS = ("rest", "first_step")
#: Starts of :class:`Adam`: ``"limit"`` (from ``s = 0``) or ``"first_step"``.
ADAM_STARTS = ("limit", "first_step")
#: ``Adam``'s defaults with ``start="first_step"`` (``docs/optimisers.md``).
DEFAULT_EXACT_STEPS, DEFAULT_OFFSET = "auto", 0.5
#: Most steps ``Adam(exact_steps="auto")`` takes exactly before it refuses (entries that
#: keep taking their first step so late are not what the ODE start is made for).
AUTO_EXACT_LIMIT = 100


def _fraction(value, name: str) -> float:
    """A finite float in ``[0, 1)``, else a ValidationError naming ``name``."""
    x = as_real_number(value, name, "finite and in [0, 1)")
    if not (math.isfinite(x) and 0.0 <= x < 1.0):
        raise ValidationError(name, f"must be finite and in [0, 1), got {value!r}")
    return x


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(name, f"must be True or False, got {value!r:.80}")
    return bool(value)


def _choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(name, f"must be one of {list(choices)}, got {value!r:.80}")
    return value


def warmup_flow_time(steps, mu: float) -> np.ndarray:
    """Flow time of step ``k`` of heavy ball from rest (the warm-up map, ``docs/optimisers.md``):
    ``t_k = [k - mu (1 - mu^k)/(1 - mu)] / (1 - mu)``, for real ``k >= 0`` too.

    ``k`` heavy-ball steps under a constant gradient move the parameters as
    far as the first-order flow with the same rates does in time ``t_k``
    (``t_1 = 1``, slope ``1/(1 - mu)`` for large ``k``); ``mu = 0`` gives ``t_k = k``.
    """
    mu = _fraction(mu, "mu")
    k = np.asarray(steps, dtype=float)
    if mu == 0.0:
        return k.copy()
    return (k + mu * np.expm1(k * math.log(mu)) / (1.0 - mu)) / (1.0 - mu)


class Momentum:
    """Heavy-ball momentum (SGD with momentum, no dampening): an optimiser description.

    Parameters
    ----------
    mu : float
        Momentum coefficient in ``[0, 1)`` (0.9 in the paper).
    start : {"rest", "first_step"}, default "rest"
        ``"rest"``: ``u = 0`` at the ODE's start;
        ``"first_step"``: the first heavy-ball step taken exactly on ``[0, 1]``
        of the ODE's clock (``theta_1 = theta_0 + F_0``, ``u_1 = F_0``; a straight
        line in between), the ODE from there.
    offset : float, default 0.5
        Step ``k`` of the trajectory is the ODE at ``s = k + offset``, ``offset``
        in ``[0, 1]`` (module docstring; the half-step of the staggered reading).
    modified : bool, optional
        The matched rates ``b = -ln mu``, ``a = b / (1 - mu)`` instead of the plain
        ``a = 1``, ``b = 1 - mu`` (needs ``mu > 0``). Default: the matched rates
        when ``mu > 0``, the plain ones at ``mu = 0`` (where ``-ln mu`` has no value).
        With the half-step reading the matched rates make the recursion the ODE's
        midpoint rule to second order under a constant force (CF7,
        ``derivations/heavy_ball_modified_equation.py``), and at the paper's unit
        steps they follow the deterministic discrete heavy ball closer than the
        plain rates, on every Fig. 6 cell and in the Fig. 4 loss
        (``docs/optimisers.md``, ``python docs/make_optimisers.py --grid``).

    Raises
    ------
    ValidationError
        Naming ``mu``, ``start``, ``offset`` or ``modified``.
    """

    kind = "momentum"

    def __init__(self, mu: float = 0.9, start: str = "rest", offset: float = 0.5,
                 modified: bool | None = None):
        self.mu = _fraction(mu, "mu")
        self.start = _choice(start, "start", MOMENTUM_STARTS)
        off = as_real_number(offset, "offset", "in [0, 1]")
        if not 0.0 <= off <= 1.0:
            raise ValidationError("offset", f"must be in [0, 1], got {offset!r}")
        self.offset = off
        self.modified = self.mu > 0.0 if modified is None else _flag(modified, "modified")
        if self.modified and self.mu == 0.0:
            raise ValidationError("modified", "the matched rates -ln(mu) need mu > 0")

    def __repr__(self) -> str:
        return (f"Momentum(mu={self.mu!r}, start={self.start!r}, offset={self.offset!r}, "
                f"modified={self.modified!r})")

    def __eq__(self, other) -> bool:
        return isinstance(other, Momentum) and self.describe() == other.describe()

    @property
    def state_blocks(self) -> int:
        """Copies of the parameter state the optimiser keeps (the velocity: 1)."""
        return 1

    def coefficients(self) -> tuple[float, float]:
        """``(a, b)`` of ``u' = a F - b u``."""
        if not self.modified:
            return 1.0, 1.0 - self.mu
        b = -math.log(self.mu)
        return b / (1.0 - self.mu), b

    def flow_time(self, steps) -> np.ndarray:
        """The warm-up map :func:`warmup_flow_time` at ``mu``."""
        return warmup_flow_time(steps, self.mu)

    def describe(self) -> dict:
        """JSON-able description (saved with trajectories as ``meta["optimizer"]``)."""
        return {"kind": self.kind, "mu": self.mu, "start": self.start, "offset": self.offset,
                "modified": self.modified}


class Adam:
    """Adam (bias-corrected, no weight decay): an optimiser description.

    Parameters
    ----------
    betas : (float, float), default (0.9, 0.999)
        ``(b1, b2)``, each in ``[0, 1)`` (``> 0`` with ``modified=True``).
    eps : float, default 1e-8
        ``eps > 0``.
    start : {"limit", "first_step"}, default "first_step"
        ``"limit"``: from ``s = 0``, ``m(0) = v(0) = 0``, with the limits of the
        bias-corrected moments at ``s = 0`` (module docstring);
        ``"first_step"``: the first ``exact_steps`` Adam steps taken exactly
        (the recursion on the level's gradient, its states copied into the
        solution; straight lines between them on ``[j, j + 1]``), the ODE from
        ``s = exact_steps``.
    modified : bool, default True
        Moment rates ``-ln b_i`` (the exact continuous twin of the moment
        recursions) instead of the plain ``1 - b_i``.
    exact_steps : int or "auto", default "auto"
        Steps taken by the recursion before the ODE (``start="first_step"``
        only), ``>= 1`` (1 with ``start="limit"``). From a zero start the
        attention gradient is exactly zero at step 0 and switches on at step 1, so
        the first attention
        updates are Adam's bias-corrected sign steps, which no ODE in ``s``
        resolves; ``docs/which_level.md`` measures the Fig. 5 flow against
        ``exact_steps``. ``"auto"``: every step in which some entry takes its
        *first* Adam step (its gradient nonzero for the first time, so its
        update is the sign-like ``eta g / (|g| + eps)`` whatever ``|g|``), then
        one more: the last exact step is a regular step of every moving entry,
        from which the half-step start below is consistent (from a zero start
        the attention's first step is step 2, so ``"auto"`` takes 3; from a
        random start 2). At most :data:`AUTO_EXACT_LIMIT` steps.
    offset : float, default 1/2
        Step ``k > exact_steps`` of the trajectory is the ODE at ``s = k +
        offset`` (``start="first_step"`` only, 0 with ``start="limit"``; ``offset`` in
        ``[0, 1)``), the ODE
        started at ``s = exact_steps`` from ``theta_k - offset (theta_k -
        theta_{k-1})`` and the moments ``m_k, v_k`` (``k = exact_steps``). With
        ``offset = 1/2`` the recursion, whose update takes the *new* moments, read
        with ``theta_k`` at ``s = k + 1/2`` and ``m_k, v_k`` at ``s = k`` is the
        ODE's midpoint rule, second order with the matched rates (CF7 item 6,
        ``derivations/heavy_ball_modified_equation.py``); ``offset = 0`` is first
        order (the heavy ball's :class:`Momentum` ``offset`` likewise).
        The defaults (``"auto"``, ``1/2``) follow the deterministic discrete Adam
        closest in parameter distance and loss in every case measured
        (``docs/optimisers.md``, ``python docs/make_optimisers.py --kind adam``),
        chosen against that recursion, never against training runs.

    Raises
    ------
    ValidationError
        Naming ``betas``, ``eps``, ``start``, ``modified``, ``exact_steps`` or
        ``offset``.
    """

    kind = "adam"

    def __init__(self, betas=(0.9, 0.999), eps: float = 1e-8, start: str = "first_step",
                 modified: bool = True, exact_steps: int | str | None = None,
                 offset: float | None = None):
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValidationError("betas", f"must be two numbers (b1, b2), got {betas!r:.80}")
        self.betas = (_fraction(betas[0], "betas[0]"), _fraction(betas[1], "betas[1]"))
        eps_value = as_real_number(eps, "eps", "finite and > 0")
        if not (math.isfinite(eps_value) and eps_value > 0):
            raise ValidationError("eps", f"must be finite and > 0, got {eps!r}")
        self.eps = eps_value
        self.start = _choice(start, "start", ADAM_STARTS)
        self.modified = _flag(modified, "modified")
        if self.modified and min(self.betas) == 0.0:
            raise ValidationError("betas", "the modified moment rates -ln(b) need b > 0; "
                                  "pass modified=False for b = 0")
        if self.start == "limit" and min(self.betas) == 0.0:
            raise ValidationError("betas", "start='limit' needs b > 0 (the bias correction "
                                  "1 - b^s has no limit rate at b = 0); use "
                                  "start='first_step'")
        first = self.start == "first_step"
        if exact_steps is None:
            exact_steps = DEFAULT_EXACT_STEPS if first else 1
        if offset is None:
            offset = DEFAULT_OFFSET if first else 0.0
        auto = isinstance(exact_steps, str) and exact_steps == "auto"
        if not auto and (isinstance(exact_steps, bool)
                         or not isinstance(exact_steps, (int, np.integer)) or exact_steps < 1):
            raise ValidationError("exact_steps", f"must be an integer >= 1 or 'auto', got "
                                  f"{exact_steps!r:.40}")
        if self.start == "limit" and (auto or exact_steps != 1):
            raise ValidationError("exact_steps", "takes exact steps before the ODE: it needs "
                                  "start='first_step'")
        self.exact_steps = "auto" if auto else int(exact_steps)
        off = as_real_number(offset, "offset", "in [0, 1)")
        if not 0.0 <= off < 1.0:
            raise ValidationError("offset", f"must be in [0, 1), got {offset!r}")
        if self.start == "limit" and off != 0.0:
            raise ValidationError("offset", "reads the ODE after its exact steps: it needs "
                                  "start='first_step'")
        self.offset = off

    def __repr__(self) -> str:
        return (f"Adam(betas={self.betas!r}, eps={self.eps!r}, start={self.start!r}, "
                f"modified={self.modified!r}, exact_steps={self.exact_steps!r}, "
                f"offset={self.offset!r})")

    def __eq__(self, other) -> bool:
        return isinstance(other, Adam) and self.describe() == other.describe()

    @property
    def state_blocks(self) -> int:
        """Copies of the parameter state the optimiser keeps (the two moments: 2)."""
        return 2

    def rates(self) -> tuple[float, float]:
        """``(k_1, k_2)``: the moments' relaxation rates in step time."""
        b1, b2 = self.betas
        if self.modified:
            return -math.log(b1), -math.log(b2)
        return 1.0 - b1, 1.0 - b2

    def flow_time(self, steps):
        """None: Adam has no first-order time map (``docs/optimisers.md``)."""
        return None

    def describe(self) -> dict:
        """JSON-able description (saved with trajectories as ``meta["optimizer"]``)."""
        return {"kind": self.kind, "betas": list(self.betas), "eps": self.eps,
                "start": self.start, "modified": self.modified,
                "exact_steps": self.exact_steps, "offset": self.offset}


OPTIMIZERS = (Momentum, Adam)



def check_optimizer(optimizer):
    """``optimizer`` if it is a :class:`Momentum` or :class:`Adam`, else a ValidationError."""
    if not isinstance(optimizer, OPTIMIZERS):
        raise ValidationError("optimizer", "must be odeflow.Momentum(mu) or odeflow.Adam(...), "
                              f"got {optimizer!r:.80}")
    return optimizer


def check_parameter_field(inner: Field) -> None:
    """Refuse a field whose state is not the parameters (no ``gradient``/``rate_vector``)."""
    if not isinstance(inner, Field):
        raise ValidationError("optimizer", f"wraps a Field, got {type(inner).__name__}")
    if not getattr(inner, "optimizer_flows", True):
        name = getattr(inner, "name", type(inner).__name__)
        raise ValidationError("optimizer", f"flow {name!r} has no optimiser flow yet: "
                              "optimiser flows wrap Scan and Snap's parameter levels "
                              "('exact', 'finite_t'); this family has its gradient flow only")
    if not (callable(getattr(inner, "gradient", None)) and hasattr(inner, "rate_vector")):
        name = getattr(inner, "name", type(inner).__name__)
        raise ValidationError("optimizer", f"flow {name!r} has no optimiser flow: its "
                              "variables are not the model's parameters (an optimiser flow "
                              "wraps a parameter-level field such as 'exact' or 'finite_t')")


class OptimizerFlow(Field):
    """An optimiser flow in step time around a parameter-level field (``docs/optimisers.md``).

    Parameters
    ----------
    inner : Field
        A parameter-level field: it has ``gradient(y)`` and ``rate_vector``
        with ``inner.rhs(t, y) == inner.rate_vector * inner.gradient(y)``.
    optimizer : Momentum or Adam

    Notes
    -----
    The solve runs from :attr:`start_step` (``-offset``) with the optimiser at rest,
    so that step ``k`` is the ODE at ``k + offset`` on its own clock
    (:func:`odeflow.solve` does this); for the heavy ball the state at step 0 is then
    not exactly the level's start for ``offset > 0``. Adam with
    ``start="first_step"`` copies its exact steps and integrates from
    :attr:`ode_start` (``exact_steps - offset``). The optimiser's state is read at
    the same clock as ``theta``: with the staggered reading, step ``k``'s velocity
    or moments are the ODE's at ``s = k + offset``, half a step after the
    recursion's ``u_k`` or ``m_k, v_k`` (which sit at ``s = k``).
    Flat state: the inner field's state ``theta`` (``n`` entries), then the
    velocity ``u = eta v`` (heavy ball) or the moments ``m``, ``v`` (Adam), each
    in the inner field's state layout. ``t`` is the step time ``s``. The result
    is the inner field's (a Trajectory on the step axis) with the optimiser's
    state as the series ``velocity`` or ``moment1``, ``moment2``, the heavy
    ball's flow time as the series ``flow_time``, and ``meta["optimizer"]``.
    """

    def __init__(self, inner: Field, optimizer):
        super().__init__()
        self.optimizer = check_optimizer(optimizer)
        check_parameter_field(inner)
        self.inner = inner
        self.name = inner.name
        self.data = getattr(inner, "data", None)
        self.n = int(inner.size)
        self.rate = np.broadcast_to(np.asarray(inner.rate_vector, dtype=float),
                                    (self.n,)).copy()
        self.has_jacobian = bool(getattr(inner, "has_jacobian", False))
        self.blocks = 1 + optimizer.state_blocks
        self._theta0 = np.asarray(inner.initial_state(), dtype=float)
        self._exact = None  # the exact steps' states (start="first_step"), made on first use
        # steps the recursion takes before the ODE (an int or "auto"; 0 without first_step)
        self._exact_request = (getattr(optimizer, "exact_steps", 1)
                               if optimizer.start == "first_step" else 0)
        #: Step ``k`` is the ODE's clock at ``k + offset`` (both optimisers' ``offset``).
        self.offset = float(getattr(optimizer, "offset", 0.0))

    # ------------------------------------------------------------ state
    @property
    def size(self) -> int:
        return self.blocks * self.n

    def rest_state(self) -> np.ndarray:
        """The optimiser at rest at the level's start (the ODE's clock at 0), flat."""
        return np.concatenate([self._theta0, np.zeros(self.size - self.n)])

    def initial_state(self) -> np.ndarray:
        """The state at :attr:`start_step` (at rest: :meth:`rest_state`)."""
        return self.rest_state()

    @property
    def exact_steps(self) -> int:
        """Steps taken by the recursion before the ODE (``start="first_step"``; else 0);
        ``Adam(exact_steps="auto")`` resolved (:meth:`exact_states` takes them)."""
        if self._exact_request == "auto":
            return len(self.exact_states()) - 1
        return int(self._exact_request)

    @property
    def start_step(self) -> float:
        """The step at which the ODE starts at rest: ``-offset`` (the solve starts there,
        so that step ``k`` is the ODE at ``k + offset`` on its own clock)."""
        return -self.offset

    def split(self, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """Views ``(theta, u)`` or ``(theta, m, v)`` of a flat state."""
        n = self.n
        return tuple(y[i * n:(i + 1) * n] for i in range(self.blocks))

    def recursion_step(self, k: int, theta, first, second=None) -> tuple:
        """Step ``k >= 1`` of the discrete optimiser on the inner field's gradient at
        ``theta``: ``(theta, first, second)`` after it (``second`` is None for the
        heavy ball).

        Heavy ball: ``u_k = mu u_{k-1} + F(theta_{k-1})``, ``theta_k = theta_{k-1} + u_k``
        (``first = u = eta v``). Adam: ``m_k = b1 m_{k-1} + (1 - b1) g``, ``v_k = b2
        v_{k-1} + (1 - b2) g^2``, ``theta_k = theta_{k-1} + eta m_hat / (sqrt(v_hat) +
        eps)`` with the bias corrections ``1 - b^k``. The exact steps of the flow and
        :func:`odeflow.training.optimizer_steps` both take their steps here.
        """
        g = self.inner.gradient(theta)
        opt = self.optimizer
        if opt.kind == "momentum":
            first = opt.mu * first + self.rate * g
            return theta + first, first, second
        b1, b2 = opt.betas
        first = b1 * first + (1.0 - b1) * g
        second = b2 * second + (1.0 - b2) * g * g
        m_hat = first / (1.0 - b1 ** k)
        v_hat = second / (1.0 - b2 ** k)
        return theta + self.rate * m_hat / (np.sqrt(v_hat) + opt.eps), first, second

    def join(self, theta, first, second=None) -> np.ndarray:
        """The flat state ``(theta, u)`` or ``(theta, m, v)`` (the inverse of :meth:`split`)."""
        return np.concatenate([theta, first] if self.blocks == 2 else [theta, first, second])

    def first_step(self) -> np.ndarray:
        """The exact state after the first optimiser step from the start, flat."""
        return self.exact_states()[1]

    def exact_states(self) -> np.ndarray:
        """The states at steps ``0 .. exact_steps`` of the recursion
        (:meth:`recursion_step`), shape ``(k + 1, size)``; the heavy ball's one step.

        ``Adam(exact_steps="auto")``: step ``j`` is a *first* step of an entry when
        its second moment was 0 before it and is positive after (its gradient is
        nonzero for the first time); the recursion goes on until a step ``j >= 2``
        is no entry's first step, and ``k = j``.

        Raises
        ------
        ValidationError
            Naming ``exact_steps``: ``"auto"`` found entries still taking their first
            step after :data:`AUTO_EXACT_LIMIT` steps.
        """
        if self._exact is None:
            rest = self.rest_state()
            theta, first, *second = (x.copy() for x in self.split(rest))
            second = second[0] if second else None
            states = [rest]
            request = self._exact_request if self.optimizer.kind == "adam" else 1
            auto = request == "auto"
            last = AUTO_EXACT_LIMIT if auto else max(int(request), 1)
            for k in range(1, last + 1):
                before = second.copy() if auto else None
                theta, first, second = self.recursion_step(k, theta, first, second)
                states.append(self.join(theta, first, second))
                if auto and k >= 2 and not np.any((before == 0.0) & (second > 0.0)):
                    break
            else:
                if auto:
                    raise ValidationError("exact_steps", "'auto' found entries taking their "
                                          f"first Adam step after {AUTO_EXACT_LIMIT} steps; "
                                          "give exact_steps as a number")
            self._exact = np.array(states)
        return self._exact

    def _in_first_step(self, s: float) -> bool:
        return s < self.exact_steps

    @property
    def exact_until(self) -> float | None:
        """The step up to which the solution is the recursion's own states, copied (not
        integrated): ``exact_steps`` for Adam with ``start="first_step"``; None otherwise
        (the heavy ball's first step sits on the ODE's offset clock and is integrated).
        :func:`odeflow.solve` starts the ODE at :attr:`ode_start` from
        :meth:`ode_start_state`."""
        if self.optimizer.kind == "adam" and self.exact_steps > 0:
            return float(self.exact_steps)
        return None

    @property
    def ode_start(self) -> float:
        """The step time at which the ODE after the exact steps starts: ``exact_until -
        offset`` (the ODE's clock ``exact_steps``)."""
        return float(self.exact_until) - self.offset

    def ode_start_state(self) -> np.ndarray:
        """The ODE's state at :attr:`ode_start`: the recursion's ``(theta_k, m_k, v_k)``
        (``k = exact_steps``) with ``theta_k - offset (theta_k - theta_{k-1})`` in place of
        ``theta_k`` (the half-step start of the staggered reading; ``theta_k`` at offset 0)."""
        k = self.exact_steps
        y = self.exact_state_at([k])[0]
        if self.offset:
            states = self.exact_states()
            y[:self.n] -= self.offset * (states[k, :self.n] - states[k - 1, :self.n])
        return y

    def exact_state_at(self, steps) -> np.ndarray:
        """The recursion's states at ``steps`` in ``[0, exact_steps]`` (straight lines
        between them), shape ``(len(steps), size)``."""
        states = self.exact_states()
        s = np.asarray(steps, dtype=float).reshape(-1)
        j = np.clip(np.floor(s).astype(int), 0, len(states) - 2)
        frac = (s - j)[:, None]
        return states[j] + frac * (states[j + 1] - states[j])

    # ------------------------------------------------------------ field
    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``d(theta, state)/ds`` at step ``t`` (the ODE's clock at ``t + offset``)."""
        self.nfev += 1
        return self._ode_rhs(t + self.offset, y)

    def _ode_rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """The optimiser ODE at ``t`` on its own clock (0 at rest)."""
        if self._in_first_step(t):
            states = self.exact_states()
            j = min(max(int(math.floor(t)), 0), len(states) - 2)
            return states[j + 1] - states[j]
        if self.optimizer.kind == "momentum":
            theta, u = self.split(y)
            a, b = self.optimizer.coefficients()
            return np.concatenate([u, a * self.inner.rhs(t, theta) - b * u])
        theta, m, v = self.split(y)
        g = self.inner.gradient(theta)
        k1, k2 = self.optimizer.rates()
        m_hat, v_hat = self._corrected(t, m, v, g)
        dtheta = self.rate * m_hat / (np.sqrt(v_hat) + self.optimizer.eps)
        return np.concatenate([dtheta, k1 * (g - m), k2 * (g * g - v)])

    def _bias(self, s: float) -> tuple[float, float]:
        """``(1 - b1^s, 1 - b2^s)``."""
        b1, b2 = self.optimizer.betas
        return (-math.expm1(s * math.log(b1)) if b1 > 0 else 1.0,
                -math.expm1(s * math.log(b2)) if b2 > 0 else 1.0)

    def _corrected(self, s, m, v, g):
        """Bias-corrected moments ``(m_hat, v_hat)`` at step time ``s`` (limits at 0)."""
        c1, c2 = self._bias(s)
        if c1 > 0 and c2 > 0:
            return m / c1, np.maximum(v, 0.0) / c2
        # s = 0 (start="limit"): m ~ k1 g s, 1 - b1^s ~ ln(1/b1) s
        k1, k2 = self.optimizer.rates()
        b1, b2 = self.optimizer.betas
        return (k1 / -math.log(b1)) * g, (k2 / -math.log(b2)) * g * g

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic Jacobian (module docstring), dense ``(size, size)``."""
        self.njev += 1
        t = t + self.offset
        n = self.n
        J = np.zeros((self.size, self.size))
        if self._in_first_step(t):
            return J
        theta = y[:n]
        dF = np.asarray(self.inner.jacobian(t, theta))
        diag = np.arange(n)
        if self.optimizer.kind == "momentum":
            a, b = self.optimizer.coefficients()
            J[diag, n + diag] = 1.0
            J[n:, :n] = a * dF
            J[n + diag, n + diag] = -b
            return J
        _, m, v = self.split(y)
        k1, k2 = self.optimizer.rates()
        eps = self.optimizer.eps
        g = self.inner.gradient(theta)
        dg = dF / self.rate[:, None]
        c1, c2 = self._bias(t)
        if c1 > 0 and c2 > 0:
            root = np.sqrt(np.maximum(v, 0.0) / c2)
            denom = root + eps
            J[diag, n + diag] = self.rate / (c1 * denom)
            with np.errstate(divide="ignore", invalid="ignore"):
                dv = np.where(root > 0, -self.rate * (m / c1) / (denom ** 2 * 2.0 * root * c2),
                              0.0)
            J[diag, 2 * n + diag] = dv
        else:  # s = 0 from the limits: theta' depends on theta through g only
            m_hat, v_hat = self._corrected(t, m, v, g)
            ra, rb = m_hat / np.where(g != 0, g, 1.0), np.sqrt(v_hat) / np.where(g != 0,
                                                                                  np.abs(g), 1.0)
            # theta' = rate ra g / (rb |g| + eps): d/dg = rate ra eps / (rb |g| + eps)^2
            J[:n, :n] = (self.rate * ra * eps / (rb * np.abs(g) + eps) ** 2)[:, None] * dg
        J[n:2 * n, :n] = k1 * dg
        J[n + diag, n + diag] = -k1
        J[2 * n:, :n] = (2.0 * k2 * g)[:, None] * dg
        J[2 * n + diag, 2 * n + diag] = -k2
        return J

    def jac_sparsity(self):
        """Block pattern of the Jacobian (the inner pattern, or full, in the ``dF`` blocks)."""
        n = self.n
        block = self.inner.jac_sparsity()
        if block is None:
            if 12 * n * n * self.blocks > PATTERN_BYTES_LIMIT:
                return None
            block = np.ones((n, n), dtype=bool)
        block = sparse.csr_matrix(block, dtype=bool)
        eye = sparse.identity(n, dtype=bool, format="csr")
        if self.blocks == 2:
            rows = [[None, eye], [block, eye]]
        else:
            rows = [[block, eye, eye], [block, eye, None], [block, None, eye]]
        return sparse.bmat(rows, format="csr").astype(bool)

    def margins(self, y: np.ndarray) -> np.ndarray:
        return self.inner.margins(y[: self.n])

    # ------------------------------------------------------------ results
    def default_steps(self, t0: float, t_end: float, max_points: int = 2001) -> np.ndarray:
        """Output steps of a solve on ``[t0, t_end]``: every whole step (and ``t_end``)
        when there are at most ``max_points``, else ``max_points`` whole steps spaced
        evenly in ``log(1 + k)``."""
        first, last = math.ceil(t0), math.floor(t_end)
        if last - first + 1 > max_points:
            grid = np.unique(np.round(np.expm1(np.linspace(math.log1p(first), math.log1p(last),
                                                           max_points))))
        else:
            grid = np.arange(first, last + 1, dtype=float)
        if grid.size == 0 or grid[0] > t0:
            grid = np.concatenate([[t0], grid])
        if grid[-1] < t_end:
            grid = np.append(grid, t_end)
        return grid

    def trajectory(self, t, states, stats):
        """The inner field's result on the step axis, with the optimiser's state."""
        n = self.n
        traj = self.inner.trajectory(t, states[:, :n], stats)
        if self.optimizer.kind == "momentum":
            traj.series["velocity"] = np.ascontiguousarray(states[:, n:2 * n])
            traj.series["flow_time"] = self.optimizer.flow_time(t)
        else:
            traj.series["moment1"] = np.ascontiguousarray(states[:, n:2 * n])
            traj.series["moment2"] = np.ascontiguousarray(states[:, 2 * n:])
        traj.meta.update(self.parameters())
        return traj

    def parameters(self) -> dict:
        return {**self.inner.parameters(), "optimizer": self.optimizer.describe(),
                "time_axis": "step"}


def optimizer_flow(inner: Field, optimizer, t0: float = 0.0) -> OptimizerFlow:
    """The optimiser flow of ``optimizer`` around ``inner`` for a solve from step ``t0``.

    Raises
    ------
    ValidationError
        Naming ``optimizer`` (not an optimiser, or a level whose state is not the
        parameters) or ``t_span`` (an optimiser flow starts at step 0: its
        initial state is the optimiser's at rest and the bias corrections count
        steps from there).
    """
    flow = OptimizerFlow(inner, optimizer)
    if t0 != 0.0:
        raise ValidationError("t_span", f"an optimiser flow starts at step 0, got t0 = {t0!r}")
    return flow
