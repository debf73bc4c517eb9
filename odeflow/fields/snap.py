"""The scalar system of Sec. 6 (Theorem 4, Eqns 13-14, 124, 129): scan and snap.

One query token and one common token ``c`` shared by all ``K`` classes with
equal ``c_{c|n}``; the feature norms are held at ``||c~_n|| ~ rho_0`` and
``beta_{nn'} = beta`` is constant. Then every class has the same margin
``h`` and accumulator ``B``, ``xi_n = a exp(2 z_c)`` and (spec CF6)

.. math::

    \\dot h = \\eta_Y \\pi \\frac{M}{e^h + M - 1}, \\quad
    \\dot z_c = -a \\eta_Z \\gamma e^{2 z_c}, \\quad
    \\dot B = \\eta_Z \\pi \\gamma a e^{2 z_c}, \\quad
    \\dot \\Gamma = \\gamma,

with ``gamma = h (M-1) / (exp(h) + M - 1)`` (Eqn 9) and
``a = beta (K - 1) c_{c|n}^2 / rho_0^2``.

The parameter ``a`` is given directly (``a=``, with ``pi=``, ``vocab_size=``
and optionally ``zc0=``) or computed from a data model (see
:class:`SnapFlow`). Because the state has no attention row, a solve returns a
light :class:`SnapResult` (``.t``, ``.margin``, ``.gamma``,
``.gamma_integral``, ``.common_logit``, ``.B``, ``.stats``, ``.meta``), not a
:class:`~odeflow.results.trajectory.Trajectory`, whichever way the parameters were
given.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from odeflow.data import DataModel, validate_finite, validate_positive
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS, VectorField, initial_logits, split_start
from odeflow.numerics import logsumexp
from odeflow.results.snap import SnapResult

#: Relative tolerance for "equal ``c_{c|n}``" across classes.
EQUAL_PROB_RTOL = 1e-9


def snap_parameters(data: DataModel, z0=None, beta=None) -> dict:
    """``a``, ``z_c(0)``, ``pi`` and ``M`` of the Sec. 6 system for a data model.

    Parameters
    ----------
    data : DataModel
        One query token, exactly one common token, in the support of every
        class with the same ``c_{c|n}`` (relative tolerance
        :data:`EQUAL_PROB_RTOL`), and uniform class weights.
    z0 : optional
        Initial logits (see :func:`odeflow.fields.base.initial_logits`).
    beta : float, optional
        ``beta_{nn'}``; ``1/(M - 1)`` by default, the value Eqn 9 gives for
        orthogonal features (``alpha_{nn'} = (1 - alpha_nn)/(M - 1)``) and the
        default of the Level R flow.

    Returns
    -------
    dict
        ``a = beta (K - 1) c_c^2 / rho_0^2`` (Theorem 4), ``zc0``, ``pi = 1/K``,
        ``vocab_size``, ``beta``, ``common_token``, ``query_token`` and
        ``rho0`` (per class, ``||c~_n(0)||_2 = ||c_n * exp(z_m(0))||_2``).

    Notes
    -----
    ``xi_n = beta sum_{n' != n} f^_n . f^_n' = beta c_c^2 exp(2 z_c) sum_{n' != n}
    1 / (||c~_n|| ||c~_n'||)``. When the norms differ, ``1/rho_0^2`` is the
    mean of ``1/(||c~_n(0)|| ||c~_n'(0)||)`` over ordered pairs ``n != n'``, so
    ``a exp(2 z_c(0))`` is the class average of ``xi_n(0)``; for equal norms
    it is ``1/||c~_n(0)||^2``. The system drops the overlap term
    ``(f^_n . f^_n') f^_nc`` of Eqn 10 (weak correlation), as Theorem 4 does.
    """
    if not isinstance(data, DataModel):
        raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
    K, M = data.num_classes, data.vocab_size
    if data.query_tokens.size != 1:
        raise ValidationError("data", "the snap system needs exactly one query token, got "
                              f"{data.query_tokens.tolist()}")
    common = data.common_tokens()
    if common.size != 1:
        raise ValidationError("data", "the snap system needs exactly one common token, got "
                              f"{common.tolist()}")
    c = int(common[0])
    if data.token_group(c).size != K:
        raise ValidationError("data", f"common token {c} must be in the support of every "
                              f"class, it is in {data.token_group(c).tolist()}")
    # per-class supports, never a dense (K, L) array: O(K s) work and memory
    supports = [(cls.support, cls.support_probs) for cls in data.classes]
    probs_c = np.array([p[np.searchsorted(s, c)] for s, p in supports])
    if not np.allclose(probs_c, probs_c[0], rtol=EQUAL_PROB_RTOL, atol=0):
        raise ValidationError("data", f"c_{{{c}|n}} must be equal for every class, got "
                              f"{probs_c.tolist()}")
    if not data.uniform_weights:
        raise ValidationError("weights", "the snap system needs uniform class weights, got "
                              f"{data.weights.tolist()}")
    beta = 1.0 / (M - 1) if beta is None else validate_positive(beta, "beta")
    z_row = initial_logits(data, z0)[0]
    zc0 = float(z_row[c])
    # log ||c~_n(0)||_2 in log space, on each class's support
    log_rho = np.array([0.5 * logsumexp(2.0 * (np.log(p) + z_row[s])) for s, p in supports])
    # mean of 1 / (rho_n rho_n') over ordered pairs n != n': ((sum u)^2 - sum u^2) / (K(K-1))
    # with u = 1/rho_n, in O(K) instead of a (K, K) matrix (K = 1 has no pair: 0)
    u = np.exp(-log_rho)
    inv_rho0_sq = float((u.sum() ** 2 - np.sum(u * u)) / (K * (K - 1))) if K > 1 else 0.0
    a = beta * (K - 1) * float(probs_c[0]) ** 2 * inv_rho0_sq
    return {"a": a, "zc0": zc0, "pi": 1.0 / K, "vocab_size": M, "beta": beta,
            "common_token": c, "query_token": int(data.query_tokens[0]),
            "rho0": np.exp(log_rho).tolist()}


class SnapFlow(VectorField):
    """The Sec. 6 system on the state ``(h, z_c, B, Gamma)``.

    Parameters
    ----------
    data : DataModel or None
        When given, ``a``, ``z_c(0)``, ``pi = 1/K`` and ``M`` come from it
        (:func:`snap_parameters`; the initial common logit from ``start``'s ``z0``), and
        ``a``, ``pi``, ``vocab_size``, ``zc0`` must not be given.
    eta_y, eta_z : float
        Learning rates.
    start : (None, z0), optional
        Initial logits ``z0``, only with ``data`` (the decoder starts at zero: the
        part ``y0`` is None). The old keyword ``z0=`` warns.
    a : float
        ``a > 0`` (Theorem 4), without ``data``.
    pi : float
        Class weight in ``(0, 1]``, without ``data``.
    vocab_size : int
        ``M >= 2``, without ``data``.
    zc0 : float, default 0
        ``z_c(0)``, without ``data``.
    beta : float, optional
        Only with ``data``: ``beta`` in ``a`` (default ``1/(M-1)``).
    """

    name = "snap"
    has_jacobian = True
    #: Four scalar states; LSODA's Adams mode handles them cheaply and it falls
    #: back to BDF with the 4x4 Jacobian if needed.
    preferred_method = "LSODA"

    takes_decoder_start = False

    @renamed_keywords(START_PARTS)
    def __init__(self, data, eta_y, eta_z, start=None, a=None, pi=None, vocab_size=None,
                 zc0=None, beta=None):
        self.eta_y = validate_positive(eta_y, "eta_y")
        self.eta_z = validate_positive(eta_z, "eta_z")
        self.nfev = 0
        self.njev = 0
        self.data = data
        y0, z0 = split_start(start)
        if y0 is not None:
            raise ValidationError("start", "flow 'snap' starts from Y(0) = 0 (its state "
                                  "holds no decoder); give start=(None, z0)")
        if data is not None:
            given = [k for k, v in (("a", a), ("pi", pi), ("vocab_size", vocab_size),
                                    ("zc0", zc0)) if v is not None]
            if given:
                raise ValidationError(given[0], "give either a data model or the parameters "
                                      "(a, pi, vocab_size, zc0), not both")
            self.params = snap_parameters(data, z0, beta)
        else:
            if z0 is not None:
                raise ValidationError("start", "needs a data model; use zc0= for z_c(0)")
            if beta is not None:
                raise ValidationError("beta", "only used to compute a from a data model")
            if a is None or pi is None or vocab_size is None:
                missing = [k for k, v in (("a", a), ("pi", pi), ("vocab_size", vocab_size))
                           if v is None][0]
                raise ValidationError(missing, "is required without a data model")
            a = validate_positive(a, "a")
            pi = validate_positive(pi, "pi")
            if pi > 1:
                raise ValidationError("pi", f"must be <= 1, got {pi!r}")
            try:
                integral = not isinstance(vocab_size, bool) \
                    and float(vocab_size) == int(vocab_size) and int(vocab_size) >= 2
            except (TypeError, ValueError, OverflowError):
                integral = False
            if not integral:
                raise ValidationError("vocab_size", f"must be an integer >= 2, got "
                                      f"{vocab_size!r}")
            zc0 = 0.0 if zc0 is None else validate_finite(zc0, "zc0")
            self.params = {"a": a, "zc0": zc0, "pi": pi, "vocab_size": int(vocab_size)}
        self.a = float(self.params["a"])
        self.pi = float(self.params["pi"])
        self.M = int(self.params["vocab_size"])
        self.zc0 = float(self.params["zc0"])
        if 2.0 * self.zc0 > 700.0:
            raise ValidationError("zc0", f"exp(2 z_c(0)) overflows for z_c(0) = {self.zc0!r}")
        self.log_m_minus_1 = math.log(self.M - 1)
        self.margin_rate = self.eta_y * self.pi * self.M / (self.M - 1)

    @property
    def size(self) -> int:
        return 4

    def initial_state(self) -> np.ndarray:
        return np.array([0.0, self.zc0, 0.0, 0.0])

    def margins(self, y: np.ndarray) -> np.ndarray:
        """The one margin ``h`` shared by every class (Sec. 6), shape (1,)."""
        return np.array([y[0]])

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """CF6: ``(dh, dz_c, dB, dGamma)/dt``."""
        self.nfev += 1
        h, zc = y[0], y[1]
        s = expit(self.log_m_minus_1 - h)
        gamma = s * h
        xi = self.a * math.exp(2.0 * zc)
        return np.array([self.margin_rate * s, -self.eta_z * gamma * xi,
                         self.eta_z * self.pi * gamma * xi, gamma])

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic 4x4 Jacobian of :meth:`rhs`."""
        self.njev += 1
        h, zc = y[0], y[1]
        s = expit(self.log_m_minus_1 - h)
        ds = -s * expit(h - self.log_m_minus_1)
        gamma = s * h
        dgamma = ds * h + s
        xi = self.a * math.exp(2.0 * zc)
        J = np.zeros((4, 4))
        J[0, 0] = self.margin_rate * ds
        J[1, 0] = -self.eta_z * xi * dgamma
        J[1, 1] = -2.0 * self.eta_z * gamma * xi
        J[2, 0] = self.eta_z * self.pi * xi * dgamma
        J[2, 1] = 2.0 * self.eta_z * self.pi * gamma * xi
        J[3, 0] = dgamma
        return J

    def trajectory(self, t, states, stats):
        return SnapResult(t, states[:, 0], states[:, 1], states[:, 2], states[:, 3],
                          stats=stats, meta=self.parameters(), data=self.data)

    def parameters(self) -> dict:
        out = super().parameters()
        out.update(self.params)
        return out
