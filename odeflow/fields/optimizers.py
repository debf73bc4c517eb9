"""Optimiser flows: heavy-ball momentum and Adam as ODEs in step time (spec section 9).

A real run does not follow the gradient flow of its level: it follows its
optimiser (SGD with momentum 0.9 in the paper's Figs. 4 and 6, Adam in Fig. 5).
An *optimiser flow* keeps the optimiser's state next to the parameters and runs
in step time ``s`` (one unit per optimiser step). It wraps any
*parameter-level* field, one whose flat state is the parameters themselves
(Level E, Level T, the induction-head levels), through a two-part interface:

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

    \\theta' = c_u u + c_F F(\\theta), \\qquad u' = a F(\\theta) - b u,

where the spec's ODE (section 9) is ``c_u = 1, c_F = 0, a = 1, b = 1 - mu`` and
the *modified* equation (``modified=True``; derived and checked in
``derivations/heavy_ball_modified_equation.py``) is

.. math::

    b = -\\ln\\mu, \\quad a = \\frac{b}{1-\\mu}, \\quad c_u = \\frac{\\mu b}{1-\\mu},
    \\quad c_F = \\frac{1 - \\mu - \\mu b}{(1-\\mu)^2},

the flow whose solution from ``u(0) = 0`` under a constant ``F`` passes through
the discrete heavy ball at *every* step: ``theta(k) = theta_0 + t_k F`` with the
warm-up map ``t_k`` of spec section 6. The spec's ODE from ``u(0) = 0`` lags the
recursion by one step there (``theta_{k+1} = theta_k + u_{k+1}`` uses the *new*
velocity: the recursion is the symplectic, not the forward, Euler step of the
spec's ODE). Which flow and which start follow the recursion best on a real
level is measured in ``docs/optimisers.md`` (``docs/make_optimisers.py``).

:class:`Adam` (``m <- b1 m + (1-b1) g``, ``v <- b2 v + (1-b2) g^2``, ``theta <-
theta + eta m_hat / (sqrt(v_hat) + eps)``, bias-corrected), entrywise:

.. math::

    m' = k_1 (g - m), \\quad v' = k_2 (g^2 - v), \\quad
    \\theta' = \\eta \\frac{m / (1 - b_1^s)}{\\sqrt{v / (1 - b_2^s)} + \\epsilon},

with the spec's rates ``k_i = 1 - b_i`` or, ``modified=True``, the rates
``k_i = -ln b_i`` of the exact continuous twin of the moment recursions (a
constant ``g`` then gives ``m(s) = (1 - b_1^s) g``, so ``m_hat = g`` at every
``s``, as in the recursion). The bias corrections are singular at ``s = 0``:
``start="limit"`` starts there from the limits ``m_hat -> (k_1 / ln(1/b_1)) g``,
``v_hat -> (k_2 / ln(1/b_2)) g^2`` (the limits of ``m / (1 - b^s)`` as ``s -> 0``
with ``m(0) = 0``; ``m_hat -> g`` exactly with the modified rates);
``start="first_step"`` takes the first Adam step exactly on ``[0, 1]`` (a
straight line from ``(theta_0, 0, 0)`` to ``(theta_1, m_1, v_1)``) and the ODE
from ``s = 1``. Adam acts per entry, so a lumped state is valid only where the
lumped entries share their gradient exactly: they do in the lumped decoder row
of Levels E and T (the ``M - K`` non-next outputs it stands for have equal rows
and so equal gradients; the row carries one output's gradient, not their sum),
and entries that never move (inactive columns, logits no class attends) have a
zero gradient, so Adam leaves them at rest as the full model does.

Time axis. Trajectories of an optimiser flow are on the step axis
(``traj.steps``); the heavy ball also carries the flow time of the warm-up map
(``traj.flow_time``, :meth:`Momentum.flow_time`); Adam has no first-order time
map (``traj.flow_time`` is None): its ODE is the comparison.

Jacobian. The heavy ball's is ``[[c_F dF, c_u I], [a dF, -b I]]`` and Adam's
``[[0, D_m, D_v], [k_1 dg, -k_1 I, 0], [2 k_2 diag(g) dg, 0, -k_2 I]]``
(``dg = diag(1/eta) dF``, ``D_m``, ``D_v`` diagonal), both built from the inner
field's analytic Jacobian ``dF``; :meth:`OptimizerFlow.jacobian` returns them
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
    """Flow time of step ``k`` of heavy ball from rest (spec section 6):
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
        ``"rest"``: ``u(0) = 0`` (spec section 9); ``"first_step"``: the first
        heavy-ball step taken exactly on ``[0, 1]`` (``theta_1 = theta_0 + F_0``,
        ``u_1 = F_0``; a straight line in between), the ODE from ``s = 1``.
    modified : bool, default True
        Use the modified equation (module docstring) instead of the spec's
        ``theta' = u, u' = F - (1 - mu) u``: exact at every step for a constant
        gradient, and measured to follow the recursion on syn-small many times
        closer (``docs/optimisers.md``). ``mu = 0`` with ``modified=True`` is the
        gradient flow ``theta' = F`` (the velocity is then not tracked: zero).

    Raises
    ------
    ValidationError
        Naming ``mu``, ``start`` or ``modified``.
    """

    kind = "momentum"

    def __init__(self, mu: float = 0.9, start: str = "rest", modified: bool = True):
        self.mu = _fraction(mu, "mu")
        self.start = _choice(start, "start", MOMENTUM_STARTS)
        self.modified = _flag(modified, "modified")

    def __repr__(self) -> str:
        return f"Momentum(mu={self.mu!r}, start={self.start!r}, modified={self.modified!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Momentum) and self.describe() == other.describe()

    @property
    def state_blocks(self) -> int:
        """Copies of the parameter state the optimiser keeps (the velocity: 1)."""
        return 1

    def coefficients(self) -> tuple[float, float, float, float]:
        """``(c_u, c_F, a, b)`` of ``theta' = c_u u + c_F F``, ``u' = a F - b u``."""
        mu = self.mu
        if not self.modified:
            return 1.0, 0.0, 1.0, 1.0 - mu
        if mu == 0.0:
            return 0.0, 1.0, 0.0, 0.0
        b = -math.log(mu)
        return mu * b / (1.0 - mu), (1.0 - mu - mu * b) / (1.0 - mu) ** 2, b / (1.0 - mu), b

    def flow_time(self, steps) -> np.ndarray:
        """The warm-up map :func:`warmup_flow_time` at ``mu``."""
        return warmup_flow_time(steps, self.mu)

    def describe(self) -> dict:
        """JSON-able description (saved with trajectories as ``meta["optimizer"]``)."""
        return {"kind": self.kind, "mu": self.mu, "start": self.start,
                "modified": self.modified}


class Adam:
    """Adam (bias-corrected, no weight decay): an optimiser description.

    Parameters
    ----------
    betas : (float, float), default (0.9, 0.999)
        ``(b1, b2)``, each in ``[0, 1)`` (``> 0`` with ``modified=True``).
    eps : float, default 1e-8
        ``eps > 0``.
    start : {"limit", "first_step"}, default "limit"
        ``"limit"``: from ``s = 0``, ``m(0) = v(0) = 0``, with the limits of the
        bias-corrected moments at ``s = 0`` (module docstring);
        ``"first_step"``: the first Adam step taken exactly on ``[0, 1]``.
    modified : bool, default True
        Moment rates ``-ln b_i`` (the exact continuous twin of the moment
        recursions) instead of the spec's ``1 - b_i``.

    Raises
    ------
    ValidationError
        Naming ``betas``, ``eps``, ``start`` or ``modified``.
    """

    kind = "adam"

    def __init__(self, betas=(0.9, 0.999), eps: float = 1e-8, start: str = "limit",
                 modified: bool = True):
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

    def __repr__(self) -> str:
        return (f"Adam(betas={self.betas!r}, eps={self.eps!r}, start={self.start!r}, "
                f"modified={self.modified!r})")

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
        """None: Adam has no first-order time map (spec section 9)."""
        return None

    def describe(self) -> dict:
        """JSON-able description (saved with trajectories as ``meta["optimizer"]``)."""
        return {"kind": self.kind, "betas": list(self.betas), "eps": self.eps,
                "start": self.start, "modified": self.modified}


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
    if not (callable(getattr(inner, "gradient", None)) and hasattr(inner, "rate_vector")):
        name = getattr(inner, "name", type(inner).__name__)
        raise ValidationError("optimizer", f"flow {name!r} has no optimiser flow: its "
                              "variables are not the model's parameters (an optimiser flow "
                              "wraps a parameter-level field such as 'exact' or 'finite_t')")


class OptimizerFlow(Field):
    """An optimiser flow in step time around a parameter-level field (spec section 9).

    Parameters
    ----------
    inner : Field
        A parameter-level field: it has ``gradient(y)`` and ``rate_vector``
        with ``inner.rhs(t, y) == inner.rate_vector * inner.gradient(y)``.
    optimizer : Momentum or Adam

    Notes
    -----
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
        self._first = None  # the exact first step (start="first_step"), made on first use

    # ------------------------------------------------------------ state
    @property
    def size(self) -> int:
        return self.blocks * self.n

    def initial_state(self) -> np.ndarray:
        return np.concatenate([self._theta0, np.zeros(self.size - self.n)])

    def split(self, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """Views ``(theta, u)`` or ``(theta, m, v)`` of a flat state."""
        n = self.n
        return tuple(y[i * n:(i + 1) * n] for i in range(self.blocks))

    def first_step(self) -> np.ndarray:
        """The exact state after the first optimiser step from the start, flat."""
        if self._first is None:
            g0 = self.inner.gradient(self._theta0)
            if self.optimizer.kind == "momentum":
                F0 = self.rate * g0
                self._first = np.concatenate([self._theta0 + F0, F0])
            else:
                b1, b2 = self.optimizer.betas
                step = self.rate * g0 / (np.abs(g0) + self.optimizer.eps)
                self._first = np.concatenate([self._theta0 + step, (1.0 - b1) * g0,
                                              (1.0 - b2) * g0 * g0])
        return self._first

    def _in_first_step(self, s: float) -> bool:
        return self.optimizer.start == "first_step" and s < 1.0

    # ------------------------------------------------------------ field
    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``d(theta, state)/ds`` at step time ``s = t``."""
        self.nfev += 1
        if self._in_first_step(t):
            return self.first_step() - self.initial_state()
        if self.optimizer.kind == "momentum":
            theta, u = self.split(y)
            cu, cf, a, b = self.optimizer.coefficients()
            F = self.inner.rhs(t, theta)
            dtheta = cu * u + cf * F if cf else cu * u
            return np.concatenate([dtheta, a * F - b * u])
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
        n = self.n
        J = np.zeros((self.size, self.size))
        if self._in_first_step(t):
            return J
        theta = y[:n]
        dF = np.asarray(self.inner.jacobian(t, theta))
        diag = np.arange(n)
        if self.optimizer.kind == "momentum":
            cu, cf, a, b = self.optimizer.coefficients()
            J[:n, :n] = cf * dF
            J[diag, n + diag] = cu
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
            rows = [[block, eye], [block, eye]]
        else:
            rows = [[block, eye, eye], [block, eye, None], [block, None, eye]]
        return sparse.bmat(rows, format="csr").astype(bool)

    def margins(self, y: np.ndarray) -> np.ndarray:
        return self.inner.margins(y[: self.n])

    # ------------------------------------------------------------ results
    def default_steps(self, t0: float, t_end: float, max_points: int = 2001) -> np.ndarray | None:
        """Every whole step in ``[t0, t_end]`` (and ``t_end``) when there are at most
        ``max_points``; None otherwise (the solve's log-spaced default)."""
        first, last = math.ceil(t0), math.floor(t_end)
        if last - first + 1 > max_points:
            return None
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
