"""Level E: the exact population gradient flow (Lemma 1, Eqns 3-4, 7).

.. math::

    \\dot Y = \\eta_Y \\sum_n \\pi_n (e_n - \\alpha_n) \\hat f_n^\\top, \\qquad
    \\dot z_m = \\eta_Z \\sum_{n \\in \\psi^{-1}(m)} \\pi_n\\,
        \\mathrm{diag}(\\hat f_n) P_n g_n,

with :math:`g_n = Y^\\top (e_n - \\alpha_n)` and :math:`P_n = I - \\hat f_n \\hat f_n^\\top`
(Lemma 1, Eqns 3-4, 7). This is exactly :math:`\\eta \\nabla J` of Eqn 2.

The field is built from a :class:`~odeflow.fields.classes.ClassTable` (one
entry per class, or sampled sub-classes for Level T) and works on per-entry
supports (:class:`~odeflow.fields.classes.Supports`):

- *columns*: the decoder keeps only the ``C`` tokens in some support. The
  columns of every other token never change and never matter: ``f^_n`` is
  zero there, so they neither enter ``Y f^_n`` nor receive ``dY``.
- *logits*: per query token, only the tokens some entry of that query can
  attend (all other logits keep ``Z(0)``; ``dz_ml = 0`` off the supports).
- *rows*: from a symmetric start (``Y(0) = 0``, or the rows of the outputs
  that are never a next token equal on the active columns) the decoder is
  *lumped* exactly (``docs/model.md``): one row per next token plus one row
  standing for the ``M - K`` other outputs (they stay equal; the row enters
  every softmax with multiplicity ``M - K``). A ``Y(0)`` that breaks the
  symmetry keeps all ``M`` output rows (restricted to the active columns).

One right-hand side costs ``O(K R s)`` (``s`` the support size, ``R`` the
decoder rows): logits ``Y f^_n``, back-propagation ``g_n`` on the support and
the scatter of ``dY`` are sparse products; nothing of size ``M`` or ``K x C``
is formed for large tables.
"""

from __future__ import annotations

import numpy as np

from odeflow.data import as_real_array
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS, VectorField, batch_by_loop
from odeflow.fields.classes import ClassTable, Supports


class ExactFlow(VectorField):
    """Level E vector field on the state ``(Y^T over active columns, carried logits)``.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of ``Y`` and ``Z`` (Eqns 3-4).
    start : (y0, z0), optional
        ``z0``: the initial logits (see :func:`odeflow.fields.base.initial_logits`);
        ``y0``, ndarray of shape (M, M): the initial decoder ``Y(0)`` (rows:
        outputs, columns: tokens); either None: zero; old keywords ``y0=``, ``z0=``
        warn. ``y0`` is finite; its columns of tokens outside every support never
        change and never matter (``f^_n`` is zero there); the decoder is
        lumped when the rows of the non-next outputs are equal on the active
        columns, and kept with all ``M`` rows otherwise.
    table : ClassTable, optional
        The class structure; :meth:`ClassTable.from_data_model` of ``data``
        by default. Its query tokens must be query tokens of ``data``.
    storage : {"auto", "dense", "sparse"}, default "auto"
        Storage of the supports (:class:`~odeflow.fields.classes.Supports`);
        the same numbers either way.
    unlumped : bool, default False
        Keep all ``M`` decoder rows even from a symmetric ``Y(0)`` (the same
        flow, at ``M / K`` times the cost; used to check the lumping).

    Notes
    -----
    Flat state: ``Y^T`` of shape ``(C, R)`` (active columns x decoder rows;
    rows are the next tokens of ``table.next_tokens`` then, when lumped and
    ``M`` exceeds their number, the shared row; or all ``M`` outputs when
    un-lumped), followed by the carried logits in the order of
    :attr:`ClassTable.logit_index`. :meth:`split` returns ``(Y (R, C), z)``.
    """

    name = "exact"

    @renamed_keywords(START_PARTS)
    def __init__(self, data, eta_y, eta_z, start=None, table=None, storage="auto",
                 unlumped=False):
        super().__init__(data, eta_y, eta_z, start=start)
        y0 = self.start_decoder
        if table is None:
            table = ClassTable.from_data_model(data)
        elif not isinstance(table, ClassTable):
            raise ValidationError("table", f"must be a ClassTable, got {type(table).__name__}")
        if table.vocab_size != data.vocab_size or not np.isin(table.query_tokens,
                                                              data.query_tokens).all():
            raise ValidationError("table", "must use the data model's vocabulary and "
                                  "query tokens")
        if storage not in ("auto", "dense", "sparse"):
            raise ValidationError("storage", f"must be 'auto', 'dense' or 'sparse', "
                                  f"got {storage!r}")
        self.table = table
        self.ops = Supports(table, None if storage == "auto" else storage == "dense")
        self.has_jacobian = True
        M, K = data.vocab_size, table.num_entries
        self.C = self.ops.C
        self.columns = table.active_tokens
        self.pi = np.asarray(table.weight, dtype=float)
        self._pi_s = self.ops.expand(self.pi)
        self._pi_col = self.pi[:, None]
        self._scaled = None  # constants of _rhs_dense, made at its first call
        rows0, self.lumped = self._initial_decoder(y0, bool(unlumped))
        self.y0 = None if y0 is None else as_real_array(y0, "y0")
        n_next = table.next_tokens.size
        if self.lumped:
            self.output_tokens = table.next_tokens
            self.multiplicity = np.ones(n_next + (1 if M > n_next else 0))
            if M > n_next:
                self.multiplicity[-1] = M - n_next
            own = np.asarray(table.next_row)
        else:
            self.output_tokens = np.arange(M)
            self.multiplicity = np.ones(M)
            own = np.asarray(table.next_tokens)[table.next_row]
        self.R = self.multiplicity.size
        self.own = own
        self.target = np.zeros((K, self.R))
        self.target[np.arange(K), own] = 1.0
        self._rows0 = rows0
        self._ny = self.C * self.R
        self.n_logits = self.ops.n_logits
        qrow, tok = table.logit_index
        self.logit_query = np.searchsorted(data.query_tokens, table.query_tokens)[qrow]
        self.logit_token = tok

    def _initial_decoder(self, y0, unlumped: bool) -> tuple[np.ndarray, bool]:
        """Decoder rows over the active columns at ``t = 0`` and whether they are lumped."""
        table, M = self.table, self.data.vocab_size
        nxt = np.asarray(table.next_tokens)
        n_rows = nxt.size + (1 if M > nxt.size else 0)
        if y0 is None:
            if unlumped:
                return np.zeros((M, self.C)), False
            return np.zeros((n_rows, self.C)), True
        arr = as_real_array(y0, "y0")
        if arr.shape != (M, M):
            raise ValidationError("y0", f"must have shape (M, M) = ({M}, {M}), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValidationError("y0", "must be finite")
        active = arr[:, self.columns]
        others = np.setdiff1d(np.arange(M), nxt)
        if unlumped:
            return active, False
        if others.size == 0 or np.all(active[others] == active[others[0]]):
            rows = active[nxt]
            if others.size:
                rows = np.vstack([rows, active[others[0]]])
            return rows, True
        return active, False

    @property
    def size(self) -> int:
        return self._ny + self.n_logits

    def initial_state(self) -> np.ndarray:
        y = np.empty(self.size)
        y[: self._ny] = self._rows0.T.ravel()
        y[self._ny:] = self.z_base[self.logit_query, self.logit_token]
        return y

    def split(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(Y (R, C), z (n_logits,))`` of a flat state."""
        return y[: self._ny].reshape(self.C, self.R).T, y[self._ny:]

    # ----------------------------------------------------------------- pieces
    def forward(self, y: np.ndarray) -> dict:
        """Intermediate quantities of Eqns 3-7 at state ``y``.

        Returns a dict with ``Yt`` (``Y^T``, (C, R)), ``features`` ``f^_n`` and
        ``backprop`` ``g_n`` as support values (see
        :class:`~odeflow.fields.classes.Supports`), ``alpha`` (K, R; per output
        token) and ``residual`` ``e_n - alpha_n`` (K, R). In dense storage ``y``
        may carry a leading batch axis.
        """
        ops = self.ops
        Yt = y[..., : self._ny].reshape(y.shape[:-1] + (self.C, self.R))
        F = ops.features(y[..., self._ny:])
        E = ops.rows_times(F, Yt)
        E -= E.max(axis=-1, keepdims=True)
        np.exp(E, out=E)
        alpha = E
        alpha /= (E @ self.multiplicity)[..., None]
        D = self.target - alpha
        G = ops.sample(D * self.multiplicity, Yt)
        return {"Yt": Yt, "features": F, "alpha": alpha, "residual": D, "backprop": G}

    def objective(self, y: np.ndarray) -> float:
        """``J(Y, Z) = sum_n pi_n [e_n^T Y f^_n - log 1^T exp(Y f^_n)]`` (Eqn 2)."""
        Yt = y[: self._ny].reshape(self.C, self.R)
        U = self.ops.rows_times(self.ops.features(y[self._ny:]), Yt)
        peak = U.max(axis=1)
        lse = peak + np.log(np.exp(U - peak[:, None]) @ self.multiplicity)
        own = U[np.arange(U.shape[0]), self.own]
        return float(np.sum(self.pi * (own - lse)))

    def margins(self, y: np.ndarray) -> np.ndarray:
        """Margin ``h_n = u_nn - mean_{j != n} u_nj`` of each class, ``u = Y f^_n`` (Eqn 44).

        The logit of the correct next token minus the mean logit of the other
        ``M - 1`` outputs (the convention of
        :func:`odeflow.analysis.diagnostics.empirical_margin`, which equals
        Level R's ``h_n`` for orthogonal features); for a table of sampled
        sub-classes (Level T), the weighted mean over each class's entries.
        """
        Yt = y[: self._ny].reshape(self.C, self.R)
        U = self.ops.rows_times(self.ops.features(y[self._ny:]), Yt)
        own = U[np.arange(U.shape[0]), self.own]
        others = (U @ self.multiplicity - own) / (self.data.vocab_size - 1)
        row, n = self.table.next_row, self.table.next_tokens.size
        return (np.bincount(row, self.pi * (own - others), minlength=n)
                / np.bincount(row, self.pi, minlength=n))

    @property
    def rate_vector(self) -> np.ndarray:
        """Learning rate of each state entry: ``eta_Y`` on the decoder, ``eta_Z`` on the
        logits, so that :meth:`rhs` is ``rate_vector * gradient`` (what an optimiser flow,
        :class:`~odeflow.fields.optimizers.OptimizerFlow`, needs of a parameter level)."""
        out = np.full(self.size, self.eta_z)
        out[: self._ny] = self.eta_y
        return out

    def gradient(self, y: np.ndarray) -> np.ndarray:
        """The plain gradient ``grad J`` (Eqns 3-4 at unit rates) on the flat state.

        Lumped decoder rows hold the gradient of each of the rows they stand for
        (they are equal), not their sum. That is why a lumped state is valid under
        Adam (:class:`~odeflow.fields.optimizers.OptimizerFlow`), which acts per
        entry: the lumped entries share their gradient exactly (``docs/optimisers.md``).
        """
        return self.rates(y, 1.0, 1.0)

    def gradients(self, states: np.ndarray) -> np.ndarray:
        """:meth:`gradient` at every row of ``states`` (shape (P, size)), shape (P, size).

        The states share this field's layout (table, columns, decoder rows) and
        may differ in anything else, e.g. the members of an ensemble started
        from different draws (:class:`~odeflow.fields.ensemble.StartEnsemble`).
        One vectorised evaluation in dense storage, a loop otherwise.
        """
        return self.rates(np.asarray(states, dtype=float), 1.0, 1.0)

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """Eqns 3-4 (Lemma 1) on the state."""
        self.nfev += 1
        if self.ops.dense:
            return self._rhs_dense(y)
        return self.rates(y, self.eta_y, self.eta_z)

    def _rhs_dense(self, y: np.ndarray) -> np.ndarray:
        """:meth:`rates` for one state in dense storage, with fewer numpy calls.

        The same arithmetic as :meth:`forward` + :meth:`rates` (log-space
        features and softmax), fused for small states, where the per-call cost of
        numpy dominates: the learning rates are folded into the class weights,
        and the output is assembled by one concatenation.
        """
        if self._scaled is None:
            self._scaled = (self.pi[:, None] * self.eta_y, self._pi_s * self.eta_z,
                            self.target * self.multiplicity, self.ops.zgather.ravel())
        pi_y, pi_z, target_m, zflat = self._scaled
        mult, log_probs, zgather = self.multiplicity, self.ops.log_probs, self.ops.zgather
        Yt = y[: self._ny].reshape(self.C, self.R)
        z = y[self._ny:]
        # features f^_n (Eqn 6), log space
        F = log_probs + z[zgather]
        F -= F.max(axis=1, keepdims=True)
        np.exp(F, out=F)
        F /= np.sqrt(np.einsum("kc,kc->k", F, F))[:, None]
        # output softmax alpha_n over the (lumped) rows, log space; D = e_n - alpha_n
        E = F @ Yt
        E -= E.max(axis=1, keepdims=True)
        np.exp(E, out=E)
        E /= (E @ mult)[:, None]
        D = self.target - E
        # back-propagated g_n = Y^T (e_n - alpha_n) with multiplicities (Eqn 7)
        G = (target_m - E * mult) @ Yt.T
        G -= F * np.einsum("kc,kc->k", F, G)[:, None]
        G *= F
        G *= pi_z
        return np.concatenate(((F.T @ (pi_y * D)).ravel(),
                               np.bincount(zflat, G.ravel(), minlength=self.n_logits)))

    def rates(self, y: np.ndarray, eta_y, eta_z) -> np.ndarray:
        """The right-hand side for states ``y`` of shape (..., size) and learning rates
        broadcast against ``y[..., :1]`` (one per state of a batch, or scalars)."""
        ops = self.ops
        if y.ndim > 1 and not ops.dense:
            return batch_by_loop(self.rates, y, eta_y, eta_z)
        p = self.forward(y)
        F, D, G = p["features"], p["residual"], p["backprop"]
        out = np.empty(y.shape)
        dY = ops.columns_times(F, self._pi_col * D)
        out[..., : self._ny] = dY.reshape(y.shape[:-1] + (self._ny,))
        out[..., : self._ny] *= eta_y
        G -= F * ops.expand(ops.entry_dot(F, G))
        G *= F
        G *= self._pi_s
        out[..., self._ny:] = ops.scatter_logits(G)
        out[..., self._ny:] *= eta_z
        return out

    def jvp(self, y: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directional derivative ``(dF/dy) v`` for one direction ``v`` of shape (size,).

        Forward-mode differentiation of :meth:`rhs`, written out by hand.
        """
        ops = self.ops
        p = self.forward(y)
        Yt, F, alpha, D, G = p["Yt"], p["features"], p["alpha"], p["residual"], p["backprop"]
        dYt = v[: self._ny].reshape(self.C, self.R)
        dA = ops.gather_logits(v[self._ny:])
        # d f^ = diag(f^) dz - f^ (f^ . f^ dz)
        dF = F * dA - F * ops.expand(ops.entry_sum(F * F * dA))
        dU = ops.rows_times(F, dYt) + ops.rows_times(dF, Yt)
        dD = -alpha * (dU - ((alpha * dU) @ self.multiplicity)[:, None])
        piD, pidD = self.pi[:, None] * D, self.pi[:, None] * dD
        ddYt = ops.columns_times(F, pidD) + ops.columns_times(dF, piD)
        dG = ops.sample(D * self.multiplicity, dYt) + ops.sample(dD * self.multiplicity, Yt)
        S = ops.expand(ops.entry_sum(F * G))
        dS = ops.expand(ops.entry_sum(dF * G + F * dG))
        proj = G - F * S
        dproj = dG - dF * S - F * dS
        ddz = ops.scatter_logits(self._pi_s * (dF * proj + F * dproj))
        return np.concatenate([self.eta_y * ddYt.ravel(), self.eta_z * ddz])

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic Jacobian of Eqns 3-4, shape (size, size), one :meth:`jvp` per column."""
        self.njev += 1
        J = np.empty((self.size, self.size))
        e = np.zeros(self.size)
        for i in range(self.size):
            e[i] = 1.0
            J[:, i] = self.jvp(y, e)
            e[i] = 0.0
        return J

    # -------------------------------------------------------------- results
    def trajectory(self, t, states, stats):
        from odeflow.results import Trajectory

        data = self.data
        n = states.shape[0]
        cols = np.searchsorted(data.active_tokens, self.columns)
        Yt = states[:, : self._ny].reshape(n, self.C, self.R)
        Y = np.zeros((n, self.R, data.active_tokens.size))
        if self.y0 is not None and cols.size < data.active_tokens.size:
            # columns of the data model no entry of the table can write (e.g. tokens
            # no sampled sequence of Level T contains) keep their Y(0) for ever
            rows = self.output_tokens
            if self.lumped and self.R > rows.size:
                shared = np.setdiff1d(np.arange(data.vocab_size), rows)[0]
                rows = np.append(rows, shared)
            Y[:] = self.y0[np.ix_(rows, data.active_tokens)]
        Y[:, :, cols] = np.swapaxes(Yt, 1, 2)
        return Trajectory(data, t, states[:, self._ny:], self.z_base, decoder_lumped=Y,
                          logit_index=(self.logit_query, self.logit_token),
                          decoder_layout="lumped" if self.lumped else "full",
                          decoder_base=self.y0, stats=stats, meta=self.parameters())

    def parameters(self) -> dict:
        out = super().parameters()
        out["decoder_layout"] = "lumped" if self.lumped else "full"
        return out
