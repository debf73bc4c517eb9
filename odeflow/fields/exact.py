"""Level E: the exact population gradient flow (Lemma 1, Eqns 3-4, 7).

.. math::

    \\dot Y = \\eta_Y \\sum_n \\pi_n (e_n - \\alpha_n) \\hat f_n^\\top, \\qquad
    \\dot z_m = \\eta_Z \\sum_{n \\in \\psi^{-1}(m)} \\pi_n\\,
        \\mathrm{diag}(\\hat f_n) P_n g_n,

with :math:`g_n = Y^\\top (e_n - \\alpha_n)` and :math:`P_n = I - \\hat f_n \\hat f_n^\\top`
(spec section 3). This is exactly :math:`\\eta \\nabla J` of Eqn 2.

The state is *lumped* exactly (spec section 3): the decoder keeps one row per
next token plus one row standing for all ``M - K`` outputs that are never a
next token (their rows stay equal from ``Y(0) = 0``; the row enters every
softmax with multiplicity ``M - K``), and only the ``L`` active tokens as
columns (the others stay zero). Logits are kept for the query tokens in use
over the active tokens. One right-hand side costs ``O(K^2 L)``, independent of
``M``.
"""

from __future__ import annotations

import numpy as np

from odeflow.fields.base import VectorField
from odeflow.numerics import feature_vectors, logsumexp, lumped_objective


class ExactFlow(VectorField):
    """Level E vector field on the lumped state ``(Y_lumped, Z_active)``.

    State layout: ``Y_lumped`` of shape ``(R, L)`` (rows: next tokens in class
    order, then the shared row of the other outputs when ``M > K``) followed by
    ``Z_active`` of shape ``(q, L)`` (query tokens in use x active tokens).
    ``Y(0) = 0``; ``Z(0)`` from ``z0``.
    """

    name = "exact"
    has_jacobian = True

    def __init__(self, data, eta_y, eta_z, z0=None):
        super().__init__(data, eta_y, eta_z, z0)
        K = data.num_classes
        self.L = data.active_tokens.size
        self.q = data.query_tokens.size
        self.multiplicity = data.output_multiplicity
        self.R = self.multiplicity.size
        self.log_multiplicity = np.log(self.multiplicity)
        self.log_probs = data.active_log_probs
        self.pi = np.asarray(data.weights, dtype=float)
        self.qidx = data.class_query_index
        self.target = np.zeros((K, self.R))
        self.target[np.arange(K), np.arange(K)] = 1.0
        self.query_of_class = np.zeros((self.q, K))
        self.query_of_class[self.qidx, np.arange(K)] = 1.0
        self._ny = self.R * self.L

    @property
    def size(self) -> int:
        return self._ny + self.q * self.L

    def initial_state(self) -> np.ndarray:
        y = np.zeros(self.size)
        y[self._ny:] = self.z_base[:, self.data.active_tokens].ravel()
        return y

    def split(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(Y_lumped (R, L), Z_active (q, L))`` of a flat state."""
        return (y[: self._ny].reshape(self.R, self.L), y[self._ny:].reshape(self.q, self.L))

    # ----------------------------------------------------------------- pieces
    def forward(self, y: np.ndarray) -> dict:
        """Intermediate quantities of Eqns 3-7 at state ``y`` (all lumped).

        Returns a dict with ``features`` ``f^_n`` (K, L), ``logits`` ``Y f^_n``
        (K, R), ``log_partition`` (K,), ``alpha`` (K, R; per output token),
        ``residual`` ``e_n - alpha_n`` (K, R) and ``backprop`` ``g_n`` (K, L).
        """
        Y, Z = self.split(y)
        F = feature_vectors(self.log_probs, Z[self.qidx])
        U = F @ Y.T
        lse = logsumexp(U, axis=1, log_weights=self.log_multiplicity)
        alpha = np.exp(U - lse[:, None])
        D = self.target - alpha
        G = (D * self.multiplicity) @ Y
        return {"Y": Y, "features": F, "logits": U, "log_partition": lse, "alpha": alpha,
                "residual": D, "backprop": G}

    def objective(self, y: np.ndarray) -> float:
        """``J(Y, Z) = sum_n pi_n [e_n^T Y f^_n - log 1^T exp(Y f^_n)]`` (Eqn 2)."""
        Y, Z = self.split(y)
        F = feature_vectors(self.log_probs, Z[self.qidx])
        return float(lumped_objective(Y, F, self.pi, self.log_multiplicity))

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """Eqns 3-4 (Lemma 1) on the lumped state."""
        self.nfev += 1
        p = self.forward(y)
        F, D, G = p["features"], p["residual"], p["backprop"]
        dY = self.eta_y * (self.pi[:, None] * D).T @ F
        S = np.sum(F * G, axis=1)
        dZ = self.eta_z * self.query_of_class @ (self.pi[:, None] * F * (G - F * S[:, None]))
        return np.concatenate([dY.ravel(), dZ.ravel()])

    def jvp(self, y: np.ndarray, directions: np.ndarray) -> np.ndarray:
        """Directional derivatives ``(dF/dy) v`` for a batch ``v`` of shape (P, size).

        Forward-mode differentiation of :meth:`rhs`, written out by hand; with
        the identity as ``v`` it gives the analytic Jacobian.
        """
        p = self.forward(y)
        Y, F, alpha, D, G = p["Y"], p["features"], p["alpha"], p["residual"], p["backprop"]
        P = directions.shape[0]
        dY = directions[:, : self._ny].reshape(P, self.R, self.L)
        dZ = directions[:, self._ny:].reshape(P, self.q, self.L)[:, self.qidx, :]
        # d f^ = diag(f^) dz - f^ (f^ . f^ dz)
        dF = F * dZ - F * np.sum(F * F * dZ, axis=-1, keepdims=True)
        dU = np.einsum("kl,prl->pkr", F, dY, optimize=True) + dF @ Y.T
        dalpha = alpha * (dU - np.sum(self.multiplicity * alpha * dU, axis=-1, keepdims=True))
        dD = -dalpha
        piF = self.pi[:, None] * F
        ddY = np.einsum("pkr,kl->prl", self.pi[:, None] * dD, F, optimize=True) \
            + np.einsum("kr,pkl->prl", self.pi[:, None] * D, dF, optimize=True)
        dG = np.einsum("kr,prl->pkl", D * self.multiplicity, dY, optimize=True) \
            + (dD * self.multiplicity) @ Y
        S = np.sum(F * G, axis=1)
        dS = np.sum(dF * G + F * dG, axis=-1)
        proj = G - F * S[:, None]
        dproj = dG - dF * S[:, None] - F * dS[..., None]
        dterm = self.pi[:, None] * dF * proj + piF * dproj
        ddZ = np.einsum("qk,pkl->pql", self.query_of_class, dterm, optimize=True)
        return np.concatenate([self.eta_y * ddY.reshape(P, -1),
                               self.eta_z * ddZ.reshape(P, -1)], axis=1)

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic Jacobian of Eqns 3-4 on the lumped state, shape (size, size)."""
        self.njev += 1
        return self.jvp(y, np.eye(self.size)).T

    # -------------------------------------------------------------- results
    def trajectory(self, t, states, stats):
        from odeflow.results import Trajectory

        n = states.shape[0]
        Y = states[:, : self._ny].reshape(n, self.R, self.L)
        Z = states[:, self._ny:].reshape(n, self.q, self.L)
        return Trajectory(self.data, t, Z, self.z_base, decoder_lumped=Y,
                          stats=stats, meta=self.parameters())
