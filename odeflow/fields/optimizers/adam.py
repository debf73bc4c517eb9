"""Adam (bias-corrected, no weight decay) and its ODE in step time (``docs/optimisers.md``).

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
(:attr:`~odeflow.fields.optimizers.OptimizerFlow.exact_until`) and integrates only from ``s = k``.
Adam acts per entry, so a lumped state is valid only where the lumped entries
share their gradient exactly: they do in the lumped decoder row of Levels E and
T (the ``M - K`` non-next outputs it stands for have equal rows and so equal
gradients; the row carries one output's gradient, not their sum), and entries
that never move (inactive columns, logits no class attends) have a
zero gradient, so Adam leaves them at rest as the full model does.

Jacobian of the flow's state ``(theta, m, v)``: ``[[0, D_m, D_v], [k_1 dg, -k_1 I, 0],
[2 k_2 diag(g) dg, 0, -k_2 I]]`` (``dg = diag(1/eta) dF``, ``D_m``, ``D_v`` diagonal;
``D_v`` is taken as 0 where ``v = 0``, where it is unbounded: entries at rest).
"""

from __future__ import annotations

import math

import numpy as np

from odeflow.data.checks import as_real_number
from odeflow.errors import ValidationError
from odeflow.fields.optimizers.base import Optimizer, choice, flag, fraction, keep_flag

#: Starts of :class:`Adam`: ``"limit"`` (from ``s = 0``) or ``"first_step"``.
ADAM_STARTS = ("limit", "first_step")
#: ``Adam``'s defaults with ``start="first_step"`` (``docs/optimisers.md``).
DEFAULT_EXACT_STEPS, DEFAULT_OFFSET = "auto", 0.5


class Adam(Optimizer):
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
        random start 2). At most
        :data:`odeflow.fields.optimizers.AUTO_EXACT_LIMIT` steps.
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
    keep_state : bool, optional
        Whether a flow's result keeps the moments (the series ``moment1``,
        ``moment2``, ``2 n`` doubles per output step): True always, False never,
        None (default) while they take at most
        :data:`~odeflow.fields.optimizers.base.KEEP_STATE_BYTES`. Output only.

    Raises
    ------
    ValidationError
        Naming ``betas``, ``eps``, ``start``, ``modified``, ``exact_steps``,
        ``offset`` or ``keep_state``.
    """

    kind = "adam"
    state_blocks = 2
    copies_exact_steps = True

    def __init__(self, betas=(0.9, 0.999), eps: float = 1e-8, start: str = "first_step",
                 modified: bool = True, exact_steps: int | str | None = None,
                 offset: float | None = None, keep_state: bool | None = None):
        self.keep_state = keep_flag(keep_state)
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValidationError("betas", f"must be two numbers (b1, b2), got {betas!r:.80}")
        self.betas = (fraction(betas[0], "betas[0]"), fraction(betas[1], "betas[1]"))
        eps_value = as_real_number(eps, "eps", "finite and > 0")
        if not (math.isfinite(eps_value) and eps_value > 0):
            raise ValidationError("eps", f"must be finite and > 0, got {eps!r}")
        self.eps = eps_value
        self.start = choice(start, "start", ADAM_STARTS)
        self.modified = flag(modified, "modified")
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
                f"offset={self.offset!r}, keep_state={self.keep_state!r})")

    @property
    def exact_request(self):
        """``exact_steps`` with ``start="first_step"`` (an int or ``"auto"``), else 0."""
        return self.exact_steps if self.start == "first_step" else 0

    def step(self, theta, g, state, k, rate) -> None:
        """Adam's step ``k >= 1`` in place, bias-corrected, ``state = [m, v]``.

        ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``, ``theta <- theta +
        (rate / (1 - b1^k)) m / (sqrt(v / (1 - b2^k)) + eps)`` (PyTorch's ``Adam``
        for ``g = grad L``, ``rate = -eta``).
        """
        m, v = state
        b1, b2 = self.betas
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * g * g
        c1, c2 = 1.0 - b1 ** k, 1.0 - b2 ** k
        theta += (rate / c1) * m / (np.sqrt(v / c2) + self.eps)

    def bias(self, s: float) -> tuple[float, float]:
        """``(1 - b1^s, 1 - b2^s)`` at real step time ``s``."""
        b1, b2 = self.betas
        return (-math.expm1(s * math.log(b1)) if b1 > 0 else 1.0,
                -math.expm1(s * math.log(b2)) if b2 > 0 else 1.0)

    def corrected(self, s, m, v, g):
        """Bias-corrected moments ``(m_hat, v_hat)`` at step time ``s`` (limits at 0)."""
        c1, c2 = self.bias(s)
        if c1 > 0 and c2 > 0:
            return m / c1, np.maximum(v, 0.0) / c2
        # s = 0 (start="limit"): m ~ k1 g s, 1 - b1^s ~ ln(1/b1) s
        k1, k2 = self.rates()
        b1, b2 = self.betas
        return (k1 / -math.log(b1)) * g, (k2 / -math.log(b2)) * g * g

    def ode_rhs(self, s, theta, state, inner, rate) -> np.ndarray:
        """``theta' = rate m_hat / (sqrt(v_hat) + eps)``, ``m' = k1 (g - m)``,
        ``v' = k2 (g^2 - v)`` with ``g = inner.gradient(theta)``."""
        m, v = state
        g = inner.gradient(theta)
        k1, k2 = self.rates()
        m_hat, v_hat = self.corrected(s, m, v, g)
        dtheta = rate * m_hat / (np.sqrt(v_hat) + self.eps)
        return np.concatenate([dtheta, k1 * (g - m), k2 * (g * g - v)])

    def ode_jacobian(self, s, theta, state, inner, rate, dF) -> np.ndarray:
        """``[[A, D_m, D_v], [k1 dg, -k1 I, 0], [2 k2 diag(g) dg, 0, -k2 I]]``, dense
        (``dg = diag(1/rate) dF``; ``D_v`` is 0 where ``v = 0``; ``A = 0`` except at
        ``s = 0`` from the limits, where ``theta'`` depends on ``theta`` through ``g``)."""
        m, v = state
        n = theta.size
        J = np.zeros((3 * n, 3 * n))
        diag = np.arange(n)
        k1, k2 = self.rates()
        g = inner.gradient(theta)
        dg = dF / rate[:, None]
        c1, c2 = self.bias(s)
        if c1 > 0 and c2 > 0:
            root = np.sqrt(np.maximum(v, 0.0) / c2)
            denom = root + self.eps
            J[diag, n + diag] = rate / (c1 * denom)
            with np.errstate(divide="ignore", invalid="ignore"):
                dv = np.where(root > 0, -rate * (m / c1) / (denom ** 2 * 2.0 * root * c2), 0.0)
            J[diag, 2 * n + diag] = dv
        else:
            self._limit_block(J, s, m, v, g, rate, dg)
        J[n:2 * n, :n] = k1 * dg
        J[n + diag, n + diag] = -k1
        J[2 * n:, :n] = (2.0 * k2 * g)[:, None] * dg
        J[2 * n + diag, 2 * n + diag] = -k2
        return J

    def _limit_block(self, J, s, m, v, g, rate, dg) -> None:
        """``d theta' / d theta`` at ``s = 0`` from the limits, into ``J[:n, :n]``."""
        n, eps = g.size, self.eps
        m_hat, v_hat = self.corrected(s, m, v, g)
        ra = m_hat / np.where(g != 0, g, 1.0)
        rb = np.sqrt(v_hat) / np.where(g != 0, np.abs(g), 1.0)
        # theta' = rate ra g / (rb |g| + eps): d/dg = rate ra eps / (rb |g| + eps)^2
        J[:n, :n] = (rate * ra * eps / (rb * np.abs(g) + eps) ** 2)[:, None] * dg

    def series(self, steps, state) -> dict:
        """``moment1`` and ``moment2`` (none when ``state`` is None)."""
        if state is None:
            return {}
        return {"moment1": np.ascontiguousarray(state[0]),
                "moment2": np.ascontiguousarray(state[1])}

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
