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

The mixing term ``v_n`` is evaluated on the supports only: for a scalar
``beta`` (every off-diagonal entry equal, the default) in rank-one form,
``v_n = beta (sum_n' h_n' f^_n' - h_n f^_n)`` (one scatter of ``h f^`` onto the
tokens), and for a general matrix through the pairs of support entries that
share a token. One right-hand side therefore costs ``O(K s)`` plus the shared
token overlaps, ``s`` the support size, and the state carries per query token
only the logits of tokens some class of that query attends.

Two accumulators ride along: ``dB_n/dt = eta_Z pi_n s_n w_n`` (for uniform
weights this is ``eta_Z pi gamma xi_n``, Eqn 98; for a distinct token ``l`` of
``n``, ``dz_ml/dt = dB_n/dt f^_nl^2`` exactly) and ``dGamma_n/dt = s_n h_n``
(Eqn 128).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.special import expit

from odeflow.data import as_real_array
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import PATTERN_BYTES_LIMIT, START_PARTS, VectorField, batch_by_loop
from odeflow.fields.classes import ClassTable, Supports
from odeflow.numerics import feature_vectors
from odeflow.results.trajectory import DECODER_BYTES_LIMIT


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
    """Level R vector field (Theorem 1) on the state ``(h, z, B, Gamma)``.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of the decoder and of the attention logits.
    start : (None, z0), optional
        Initial logits ``z0`` (see :func:`odeflow.fields.base.initial_logits`); the
        level starts from ``Y(0) = 0`` (``h = B = Gamma = 0``), so the decoder part
        is None. The old keyword ``z0=`` warns.
    iota : float or array_like of shape (K,), default 1
        ``iota_n`` of Eqn 9. It multiplies ``f^_n`` in ``g_n`` and is removed
        by the projection ``I - f^_n f^_n^T``, so it does not change the
        dynamics; it is validated and recorded in ``meta``.
    beta : float or array_like of shape (K, K), default ``1/(M-1)``
        ``beta_{nn'}`` of Eqn 9, finite and ``>= 0``. A scalar sets every
        off-diagonal entry; a matrix must have a zero diagonal.
    storage : {"auto", "dense", "sparse"}, default "auto"
        Storage of the supports (:class:`~odeflow.fields.classes.Supports`).

    Notes
    -----
    Flat state layout: ``h`` (K), the carried logits ``z`` (in the order of
    :attr:`ClassTable.logit_index <odeflow.fields.classes.ClassTable.logit_index>`:
    per query token, the tokens its classes attend), ``B`` (K), ``Gamma`` (K),
    all zero at ``t = 0`` except ``z = Z(0)``. The analytic Jacobian is formed
    column by column from :meth:`jvp` (only for small states; see
    :func:`odeflow.solver.choose_method`).
    """

    name = "reduced"
    has_jacobian = True
    #: Integrator of ``method="auto"``: the flow is not stiff, LSODA stays in its Adams
    #: mode and is the cheapest method at equal accuracy on small states
    #: (``docs/levels.md``, "Integrators"). :func:`odeflow.solver.choose_method` only
    #: keeps it while its dense Jacobian fits the memory limit.
    preferred_method = "LSODA"

    takes_decoder_start = False

    @renamed_keywords(START_PARTS)
    def __init__(self, data, eta_y, eta_z, start=None, iota=1.0, beta=None, storage="auto"):
        super().__init__(data, eta_y, eta_z, start=start)
        K, M = data.num_classes, data.vocab_size
        if storage not in ("auto", "dense", "sparse"):
            raise ValidationError("storage", f"must be 'auto', 'dense' or 'sparse', "
                                  f"got {storage!r}")
        self.K = K
        self.M = M
        self.iota = _check_iota(iota, K)
        self.beta = _check_beta(beta, K, M)
        self.table = ClassTable.from_data_model(data)
        self.ops = Supports(self.table, None if storage == "auto" else storage == "dense")
        self.pi = np.asarray(data.weights, dtype=float)
        self.log_m_minus_1 = float(np.log(M - 1))
        self.margin_rate = self.eta_y * self.pi * M / (M - 1)
        self._margin_unit = self.pi * M / (M - 1)
        off = self.beta[~np.eye(K, dtype=bool)]
        if off.size == 0:
            self.beta_scalar = 0.0
        else:
            self.beta_scalar = float(off[0]) if np.all(off == off[0]) else None
        if self.beta_scalar is None and not self.ops.dense:
            self._pairs = self._shared_pairs()
        self.n_logits = self.ops.n_logits
        qrow, tok = self.table.logit_index
        self.logit_query, self.logit_token = qrow, tok
        nz = self.n_logits
        self._sl_h = slice(0, K)
        self._sl_z = slice(K, K + nz)
        self._sl_b = slice(K + nz, 2 * K + nz)
        self._sl_g = slice(2 * K + nz, 3 * K + nz)

    def _shared_pairs(self):
        """Pairs ``(a, b)`` of support entries of different classes on the same token,
        with ``beta_{n(a) n(b)}``: the overlaps a general ``beta`` matrix needs."""
        col, seg = self.table.column, self.table.entry_of
        order = np.argsort(col, kind="stable")
        counts = np.bincount(col, minlength=self.ops.C)
        starts = np.concatenate([[0], np.cumsum(counts)])
        a_list, b_list = [], []
        for c in np.flatnonzero(counts > 1):
            members = order[starts[c]:starts[c + 1]]
            a, b = np.meshgrid(members, members, indexing="ij")
            keep = a != b
            a_list.append(a[keep])
            b_list.append(b[keep])
        if not a_list:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        a, b = np.concatenate(a_list), np.concatenate(b_list)
        return a, b, self.beta[seg[a], seg[b]]

    @property
    def size(self) -> int:
        return 3 * self.K + self.n_logits

    def initial_state(self) -> np.ndarray:
        y = np.zeros(self.size)
        q = np.searchsorted(self.data.query_tokens, self.table.query_tokens)[self.logit_query]
        y[self._sl_z] = self.z_base[q, self.logit_token]
        return y

    def split(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views ``(h (K,), z (n_logits,), B (K,), Gamma (K,))`` of a flat state."""
        return y[self._sl_h], y[self._sl_z], y[self._sl_b], y[self._sl_g]

    # ----------------------------------------------------------------- pieces
    def mix(self, x: np.ndarray) -> np.ndarray:
        """``sum_{n'} beta_{nn'} x_{n'}`` on the support of each ``n`` (support values ``x``)."""
        ops = self.ops
        if self.beta_scalar is not None:
            return self.beta_scalar * (ops.at_columns(ops.column_sum(x)) - x)
        if ops.dense:
            return self.beta @ x
        a, b, w = self._pairs
        return np.bincount(a, w * x[b], minlength=x.size)

    def forward(self, y: np.ndarray) -> dict:
        """Intermediate quantities of Eqns 9-10 at state ``y``.

        Returns a dict with ``margin`` ``h`` (K,), ``s`` ``= 1 - alpha_nn`` and
        ``one_minus_s`` (K,), and as support values (see
        :class:`~odeflow.fields.classes.Supports`) ``features`` ``f^_n`` and
        ``mix`` ``v_n = sum_n' beta_nn' h_n' f^_n'``, and ``drive``
        ``w_n = f^_n . v_n`` (K,).
        """
        ops = self.ops
        h = y[..., self._sl_h]
        s, one_minus_s = _speed_factors(h, self.log_m_minus_1)
        F = ops.features(y[..., self._sl_z])
        V = self.mix(ops.expand(h) * F)
        w = ops.entry_dot(F, V)
        return {"margin": h, "s": s, "one_minus_s": one_minus_s, "features": F,
                "mix": V, "drive": w}

    def margins(self, y: np.ndarray) -> np.ndarray:
        """The margins ``h_n`` carried in the state (Eqn 44), shape (K,)."""
        return np.array(y[self._sl_h])

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """Eqns 44, 10, 98 and 128 on the flat state."""
        self.nfev += 1
        return self.rates(y, self.eta_y, self.eta_z)

    def rates(self, y: np.ndarray, eta_y, eta_z) -> np.ndarray:
        """The right-hand side for states ``y`` of shape (..., size) and learning rates
        broadcast against ``y[..., :1]`` (one per state of a batch, or scalars)."""
        ops = self.ops
        if y.ndim > 1 and not ops.dense:
            return batch_by_loop(self.rates, y, eta_y, eta_z)
        p = self.forward(y)
        h, s, F, V, w = p["margin"], p["s"], p["features"], p["mix"], p["drive"]
        out = np.empty(y.shape)
        out[..., self._sl_h] = self._margin_unit * s
        out[..., self._sl_h] *= eta_y
        piS = self.pi * s
        V -= ops.expand(w) * F
        V *= F
        V *= ops.expand(-piS)
        out[..., self._sl_z] = ops.scatter_logits(V)
        out[..., self._sl_z] *= eta_z
        out[..., self._sl_b] = piS * w
        out[..., self._sl_b] *= eta_z
        out[..., self._sl_g] = s * h
        return out

    def jvp(self, y: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directional derivative ``(dF/dy) v`` for one direction ``v`` of shape (size,).

        Forward-mode differentiation of :meth:`rhs`, written out by hand. The
        right-hand side does not depend on ``B`` or ``Gamma``.
        """
        ops = self.ops
        p = self.forward(y)
        h, s, oms, F, V, w = (p["margin"], p["s"], p["one_minus_s"], p["features"],
                              p["mix"], p["drive"])
        dh = v[self._sl_h]
        ds = -s * oms * dh
        dA = ops.gather_logits(v[self._sl_z])
        # d f^ = diag(f^) dz - f^ (f^ . f^ dz)
        dF = F * dA - F * ops.expand(ops.entry_sum(F * F * dA))
        dV = self.mix(ops.expand(dh) * F + ops.expand(h) * dF)
        dw = ops.entry_sum(dF * V + F * dV)
        inner = ops.expand(w) * F - V
        dinner = ops.expand(dw) * F + ops.expand(w) * dF - dV
        s_s = ops.expand(s)
        dterm = ops.expand(self.pi) * (ops.expand(ds) * F * inner + s_s * dF * inner
                                       + s_s * F * dinner)
        out = np.empty(self.size)
        out[self._sl_h] = self.margin_rate * ds
        out[self._sl_z] = self.eta_z * ops.scatter_logits(dterm)
        out[self._sl_b] = self.eta_z * self.pi * (ds * w + s * dw)
        out[self._sl_g] = ds * h + s * dh
        return out

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic Jacobian of the Level R right-hand side, shape (size, size)."""
        self.njev += 1
        J = np.zeros((self.size, self.size))
        e = np.zeros(self.size)
        for i in range(self._sl_b.start):  # B and Gamma columns are zero
            e[i] = 1.0
            J[:, i] = self.jvp(y, e)
            e[i] = 0.0
        return J

    def jac_sparsity(self):
        """Sparsity pattern of ``dF/dy`` (scipy sparse matrix), or None when it is too large.

        Class ``n``'s rows (its logits and ``B_n``) depend on ``h_n'`` and the
        logits of ``n'`` for every class ``n'`` that shares a token with ``n``
        (through ``f^_n . f^_n'`` in ``v_n``) and ``n`` itself; ``h_n`` on
        ``h_n``; ``Gamma_n`` on ``h_n``. None when the pattern would exceed
        :data:`~odeflow.fields.base.PATTERN_BYTES_LIMIT` (classes coupled
        through tokens common to all of them make it dense).
        """
        K, size, t = self.K, self.size, self.table
        seg, col, zpos = t.entry_of, t.column, t.logit_position
        ones = np.ones(seg.size)
        touch = sparse.csr_matrix((ones, (seg, col)), shape=(K, self.ops.C))
        near = ((touch @ touch.T) + sparse.identity(K, format="csr")).astype(bool).astype(float)
        sizes = np.diff(t.indptr) + 1.0
        if 12 * float(sizes @ (near @ sizes)) > PATTERN_BYTES_LIMIT:
            return None
        # columns each class reads: its h and its logits
        own_cols = sparse.csr_matrix(
            (np.ones(K + seg.size), (np.concatenate([np.arange(K), seg]),
                                     np.concatenate([np.arange(K), K + zpos]))),
            shape=(K, size)).astype(bool).astype(float)
        reads = near @ own_cols
        # rows each class writes: its logits and B_n
        writes = sparse.csr_matrix(
            (np.ones(seg.size + K), (np.concatenate([K + zpos, self._sl_b.start + np.arange(K)]),
                                     np.concatenate([seg, np.arange(K)]))), shape=(size, K))
        diag = sparse.csr_matrix((np.ones(2 * K), (np.concatenate(
            [np.arange(K), self._sl_g.start + np.arange(K)]), np.tile(np.arange(K), 2))),
            shape=(size, size))
        return ((writes @ reads) + diag).astype(bool).tocsr()

    # -------------------------------------------------------------- results
    def implied_decoder(self, h: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """The decoder ``Y = sum_n w_n f^_n^T``, ``w_n = h_n (e_n - 1/M)`` (Lemma 3), lumped.

        Parameters
        ----------
        h : ndarray, shape (n, K)
        Z : ndarray, shape (n, q, L)
            Logits over ``data.active_tokens``.

        Returns
        -------
        ndarray, shape (n, R, L)
            Rows in :class:`~odeflow.fields.exact.ExactFlow`'s lumped layout:
            the ``K`` next tokens in class order, then (when ``M > K``) the
            row shared by the other ``M - K`` outputs.
        """
        data = self.data
        F = feature_vectors(data.active_log_probs, Z[:, data.class_query_index, :])
        shared = -np.einsum("tk,tkl->tl", h, F) / self.M
        rows = h[..., None] * F + shared[:, None, :]
        if self.M > self.K:
            rows = np.concatenate([rows, shared[:, None, :]], axis=1)
        return rows

    def trajectory(self, t, states, stats):
        from odeflow.results.trajectory import ReducedTrajectory

        data = self.data
        h = states[:, self._sl_h]
        series = {"margin": h, "B": states[:, self._sl_b],
                  "gamma_integral": states[:, self._sl_g]}
        traj = ReducedTrajectory(data, t, states[:, self._sl_z], self.z_base, series=series,
                                 stats=stats, meta=self.parameters(),
                                 logit_index=(self.logit_query, self.logit_token))
        nbytes = 8 * t.size * (self.K + 1) * data.active_tokens.size
        if nbytes <= DECODER_BYTES_LIMIT:
            traj.decoder_lumped = self.implied_decoder(h, traj.z_active)
        else:
            traj.meta["decoder"] = (f"implied decoder not stored ({nbytes} bytes > "
                                    f"{DECODER_BYTES_LIMIT}); see implied_decoder()")
        return traj

    def parameters(self) -> dict:
        out = super().parameters()
        out.update({"beta": self.beta.tolist(), "iota": self.iota.tolist()})
        return out
