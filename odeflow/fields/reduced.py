"""Level R: the reduced flow of Theorem 1 (Eqns 8-10, 44-45, 98).

The decoder is taken to have converged to its decoupled form (Lemma 3,
Assumptions 1c and 2): ``Y = W F^T`` with ``w_n = h_n (e_n - 1/M)``, so the
whole decoder is carried by one logit margin ``h_n`` per class (Eqn 44),

.. math::

    \\dot h_n = \\eta_Y \\pi_n \\frac{M}{e^{h_n} + M - 1}, \\qquad h_n(0) = 0.

With :math:`s_n = 1 - \\alpha_{nn} = (M-1)/(e^{h_n} + M - 1)` the back-propagated
gradient takes the form of Eqn 9,

.. math::

    g_n = s_n \\Big[ \\iota_n h_n \\hat f_n
          - \\sum_{n'} \\beta_{nn'} h_{n'} \\hat f_{n'} \\Big],
    \\qquad \\beta_{nn} = 0,

(defaults ``iota_n = 1``, ``beta_{nn'} = 1/(M-1)``; for uniform weights
``s_n h_n = gamma(t)``, the speed-control coefficient), and the attention
logits follow Eqn 10,

.. math::

    \\dot z_m = \\eta_Z \\sum_{n \\in \\psi^{-1}(m)} \\pi_n\\,
        \\mathrm{diag}(\\hat f_n) (I - \\hat f_n \\hat f_n^\\top) g_n .

The ``iota`` term drops out exactly because ``(I - f^_n f^_n^T) f^_n = 0``,
so with ``v_n = sum_{n'} beta_{nn'} h_{n'} f^_{n'}`` and
``w_n = f^_n . v_n``,

.. math::

    \\dot z_m = \\eta_Z \\sum_{n \\in \\psi^{-1}(m)} \\pi_n s_n\\,
        \\hat f_n \\odot (w_n \\hat f_n - v_n).

Two accumulators ride along: ``dB_n/dt = eta_Z pi_n s_n w_n`` (for uniform
weights this is ``eta_Z pi gamma xi_n``, Eqn 98; for a distinct token ``l`` of
``n``, ``dz_ml/dt = dB_n/dt f^_nl^2`` exactly) and ``dGamma_n/dt = s_n h_n``
(Eqn 128).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from odeflow.data import as_real_array
from odeflow.errors import ValidationError
from odeflow.fields.base import VectorField
from odeflow.numerics import feature_vectors


def _speed_factors(h: np.ndarray, log_m_minus_1: float) -> tuple[np.ndarray, np.ndarray]:
    """``s = (M-1)/(exp(h)+M-1)`` and ``1 - s``, as logistic functions (no overflow)."""
    return expit(log_m_minus_1 - h), expit(h - log_m_minus_1)


def _check_iota(iota, K: int) -> np.ndarray:
    arr = as_real_array(iota, "iota")
    if arr.ndim == 0:
        arr = np.full(K, float(arr))
    if arr.shape != (K,):
        raise ValidationError("iota", f"must be a scalar or have shape ({K},), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValidationError("iota", f"must be finite and > 0, got {arr.tolist()}")
    return arr


def _check_beta(beta, K: int, M: int) -> np.ndarray:
    if beta is None:
        beta = 1.0 / (M - 1)
    arr = as_real_array(beta, "beta")
    # the sign is checked before a scalar is spread over the off-diagonal, so a
    # negative scalar is refused even when K = 1 leaves no entry to hold it
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValidationError("beta", f"must be finite and >= 0, got {beta!r:.80}")
    if arr.ndim == 0:
        arr = np.full((K, K), float(arr))
        np.fill_diagonal(arr, 0.0)
    elif arr.shape != (K, K):
        raise ValidationError("beta", f"must be a scalar or have shape ({K}, {K}), "
                              f"got {arr.shape}")
    elif np.any(np.diag(arr) != 0):
        raise ValidationError("beta", f"diagonal must be zero (beta_nn = 0 in Eqn 9), "
                              f"got {np.diag(arr).tolist()}")
    return arr


class ReducedFlow(VectorField):
    """Level R vector field (Theorem 1) on the state ``(h, Z_active, B, Gamma)``.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of the decoder and of the attention logits.
    z0 : optional
        Initial logits (see :func:`odeflow.fields.base.initial_logits`).
    iota : float or array_like of shape (K,), default 1
        ``iota_n`` of Eqn 9. It multiplies ``f^_n`` in ``g_n`` and is removed
        by the projection ``I - f^_n f^_n^T``, so it does not change the
        dynamics; it is validated and recorded in ``meta``.
    beta : float or array_like of shape (K, K), default ``1/(M-1)``
        ``beta_{nn'}`` of Eqn 9, finite and ``>= 0``. A scalar sets every
        off-diagonal entry; a matrix must have a zero diagonal.

    Notes
    -----
    Flat state layout: ``h`` (K), ``Z_active`` (q x L, same layout as
    :class:`~odeflow.fields.exact.ExactFlow`), ``B`` (K), ``Gamma`` (K), all
    zero at ``t = 0`` except ``Z_active = Z(0)``. The right-hand side costs
    ``O(K^2 L)``; the analytic Jacobian is formed by the batched forward-mode
    :meth:`jvp`.
    """

    name = "reduced"
    has_jacobian = True
    #: Measured with ``benchmarks/bench_reduced.py`` (see ``docs/levels.md``):
    #: the flow is not stiff, LSODA stays in its Adams mode and is the cheapest
    #: method at equal accuracy (RK45 needs ~0.9x its right-hand sides at the
    #: same ``rtol`` but is 4x less accurate in ``h``); it switches to BDF with
    #: the analytic Jacobian should a problem turn stiff.
    preferred_method = "LSODA"

    def __init__(self, data, eta_y, eta_z, z0=None, iota=1.0, beta=None):
        super().__init__(data, eta_y, eta_z, z0)
        K, M = data.num_classes, data.vocab_size
        self.K = K
        self.M = M
        self.L = data.active_tokens.size
        self.q = data.query_tokens.size
        self.iota = _check_iota(iota, K)
        self.beta = _check_beta(beta, K, M)
        self.pi = np.asarray(data.weights, dtype=float)
        self.qidx = data.class_query_index
        self.log_probs = data.active_log_probs
        self.log_m_minus_1 = float(np.log(M - 1))
        self.margin_rate = self.eta_y * self.pi * M / (M - 1)
        self.query_of_class = np.zeros((self.q, K))
        self.query_of_class[self.qidx, np.arange(K)] = 1.0
        nz = self.q * self.L
        self._sl_h = slice(0, K)
        self._sl_z = slice(K, K + nz)
        self._sl_b = slice(K + nz, 2 * K + nz)
        self._sl_g = slice(2 * K + nz, 3 * K + nz)

    @property
    def size(self) -> int:
        return 3 * self.K + self.q * self.L

    def initial_state(self) -> np.ndarray:
        y = np.zeros(self.size)
        y[self._sl_z] = self.z_base[:, self.data.active_tokens].ravel()
        return y

    def split(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views ``(h (K,), Z_active (q, L), B (K,), Gamma (K,))`` of a flat state."""
        return (y[self._sl_h], y[self._sl_z].reshape(self.q, self.L), y[self._sl_b],
                y[self._sl_g])

    # ----------------------------------------------------------------- pieces
    def forward(self, y: np.ndarray) -> dict:
        """Intermediate quantities of Eqns 9-10 at state ``y``.

        Returns a dict with ``margin`` ``h`` (K,), ``s`` ``= 1 - alpha_nn`` and
        ``one_minus_s`` (K,), ``features`` ``f^_n`` (K, L), ``mix``
        ``v_n = sum_n' beta_nn' h_n' f^_n'`` (K, L) and ``drive``
        ``w_n = f^_n . v_n`` (K,).
        """
        h, Z, _, _ = self.split(y)
        s, one_minus_s = _speed_factors(h, self.log_m_minus_1)
        F = feature_vectors(self.log_probs, Z[self.qidx])
        V = (self.beta * h[None, :]) @ F
        w = np.sum(F * V, axis=1)
        return {"margin": h, "s": s, "one_minus_s": one_minus_s, "features": F,
                "mix": V, "drive": w}

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """Eqns 44, 10, 98 and 128 on the flat state."""
        self.nfev += 1
        p = self.forward(y)
        h, s, F, V, w = p["margin"], p["s"], p["features"], p["mix"], p["drive"]
        out = np.empty(self.size)
        out[self._sl_h] = self.margin_rate * s
        piS = self.pi * s
        out[self._sl_z] = self.eta_z * (self.query_of_class @ (
            piS[:, None] * F * (w[:, None] * F - V))).ravel()
        out[self._sl_b] = self.eta_z * piS * w
        out[self._sl_g] = s * h
        return out

    def jvp(self, y: np.ndarray, directions: np.ndarray) -> np.ndarray:
        """Directional derivatives ``(dF/dy) v`` for a batch ``v`` of shape (P, size).

        Forward-mode differentiation of :meth:`rhs`, written out by hand; with
        the identity as ``v`` it gives the analytic Jacobian. The right-hand
        side does not depend on ``B`` or ``Gamma``, so those columns are zero.
        """
        p = self.forward(y)
        h, s, oms, F, V, w = (p["margin"], p["s"], p["one_minus_s"], p["features"],
                              p["mix"], p["drive"])
        P = directions.shape[0]
        dh = directions[:, self._sl_h]
        dZ = directions[:, self._sl_z].reshape(P, self.q, self.L)[:, self.qidx, :]
        ds = -s * oms * dh
        # d f^ = diag(f^) dz - f^ (f^ . f^ dz)
        dF = F * dZ - F * np.sum(F * F * dZ, axis=-1, keepdims=True)
        dV = np.einsum("kj,pj,jl->pkl", self.beta, dh, F, optimize=True) \
            + np.einsum("kj,pjl->pkl", self.beta * h[None, :], dF, optimize=True)
        dw = np.sum(dF * V + F * dV, axis=-1)
        inner = w[:, None] * F - V
        dinner = dw[..., None] * F + w[:, None] * dF - dV
        dterm = self.pi[:, None] * (ds[..., None] * F * inner + s[:, None] * dF * inner
                                    + s[:, None] * F * dinner)
        out = np.zeros((P, self.size))
        out[:, self._sl_h] = self.margin_rate * ds
        out[:, self._sl_z] = self.eta_z * np.einsum(
            "qk,pkl->pql", self.query_of_class, dterm, optimize=True).reshape(P, -1)
        out[:, self._sl_b] = self.eta_z * self.pi * (ds * w + s * dw)
        out[:, self._sl_g] = ds * h + s * dh
        return out

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic Jacobian of the Level R right-hand side, shape (size, size)."""
        self.njev += 1
        return self.jvp(y, np.eye(self.size)).T

    # -------------------------------------------------------------- results
    def implied_decoder(self, h: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """The decoder ``Y = sum_n w_n f^_n^T``, ``w_n = h_n (e_n - 1/M)`` (Lemma 3), lumped.

        Parameters
        ----------
        h : ndarray, shape (n, K)
        Z : ndarray, shape (n, q, L)

        Returns
        -------
        ndarray, shape (n, R, L)
            Rows in :class:`~odeflow.fields.exact.ExactFlow`'s lumped layout:
            the ``K`` next tokens in class order, then (when ``M > K``) the
            row shared by the other ``M - K`` outputs.
        """
        F = feature_vectors(self.log_probs, Z[:, self.qidx, :])
        shared = -np.einsum("tk,tkl->tl", h, F) / self.M
        rows = h[..., None] * F + shared[:, None, :]
        if self.M > self.K:
            rows = np.concatenate([rows, shared[:, None, :]], axis=1)
        return rows

    def trajectory(self, t, states, stats):
        from odeflow.results import Trajectory

        n = states.shape[0]
        h = states[:, self._sl_h]
        Z = states[:, self._sl_z].reshape(n, self.q, self.L)
        series = {"margin": h, "B": states[:, self._sl_b],
                  "gamma_integral": states[:, self._sl_g]}
        return Trajectory(self.data, t, Z, self.z_base,
                          decoder_lumped=self.implied_decoder(h, Z), series=series,
                          stats=stats, meta=self.parameters())

    def parameters(self) -> dict:
        out = super().parameters()
        out.update({"beta": self.beta.tolist(), "iota": self.iota.tolist()})
        return out
