"""Level T: the gradient flow of the finite-sequence-length objective (``docs/fidelity.md``).

.. math::

    J_T(Y, Z) = \\sum_n \\pi_n \\frac1N \\sum_{s=1}^N
        \\log \\mathrm{softmax}(Y \\hat f(x_{n,s}))_n, \\qquad
    f(x)_l = \\frac{k_l e^{z_{m,l}}}{\\sum_{l'} k_{l'} e^{z_{m,l'}}},

the sample-average approximation of ``E_x[log softmax(Y f^(x))_n]`` over ``N``
seeded sequences of length ``T`` per class (:func:`odeflow.data.sample_counts`;
``k_l`` counts token ``l`` among the ``T - 1`` contextual tokens). Each sampled
sequence is a *sub-class*: "probabilities" ``k / (T - 1)``, weight
``pi_n / N``, and its class's next and query tokens. The Level E field (Lemma 1,
Eqns 3-4, 7) on that table of sub-classes is ``eta * grad J_T``; this module
builds that table (:func:`sample_table`, a
:class:`~odeflow.fields.classes.ClassTable`) and hands it to
:class:`~odeflow.fields.exact.ExactFlow`, whose right-hand side, analytic
Jacobian and objective it reuses unchanged.

State and lumping are Level E's: the decoder rows and the query tokens do not
change and a sample never leaves its class's support, so the state size does
not grow with ``N`` or ``T``. One right-hand side costs ``O(K N R s)``
(``s`` the support size): linear in ``N`` and independent of ``T``
(``benchmarks/bench_finite_t.py``).
As ``T -> inf``, ``k / (T - 1) -> c_{.|n}`` and Level T tends to Level E.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from odeflow.data import CountSample, DataModel, sample_counts
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS
from odeflow.fields.classes import ClassTable
from odeflow.fields.exact import ExactFlow

#: Largest work arrays :meth:`FiniteTFlow.gradients` keeps between calls (bytes); above it
#: (e.g. per-sequence gradients of a whole sample) they are made afresh at each call.
WORK_BYTES = 64 * 2**20
#: Smallest sum of exponentials (a softmax's denominator, a feature's squared norm) that
#: :meth:`FiniteTFlow.gradients` takes at its bound shift; below it the block is shifted
#: by its own maxima, as the dense storage does (every sum is then at least 1).
SHIFT_FLOOR = 1e-250
#: The last ``(data model, sample, table)`` of :func:`sampled_table` (the model weakly).
_LAST_SAMPLE: list = [None]


def sample_table(data: DataModel, sample: CountSample) -> ClassTable:
    """The table of sub-classes of a sample: one entry per sampled sequence.

    Entry ``(k, s)`` has class ``k``'s next and query tokens, weight
    ``pi_k / N``, and support the tokens with ``k_l > 0`` with
    log-probabilities ``log(k_l / (T - 1))``.
    """
    N, T = sample.sample_size, sample.seq_len
    next_token, query_token, supports, log_probs = [], [], [], []
    for cls, counts in zip(data.classes, sample.counts, strict=True):
        for row in counts:
            present = row > 0
            next_token.append(cls.next_token)
            query_token.append(cls.query_token)
            supports.append(cls.support[present])
            log_probs.append(np.log(row[present]) - np.log(T - 1))
    weight = np.repeat(np.asarray(data.weights, dtype=float) / N, N)
    return ClassTable.from_entries(data.vocab_size, next_token, query_token, weight, supports,
                                   log_probs, next_tokens=data.next_tokens)


def sampled_table(data: DataModel, seq_len, sample_size, seed) -> tuple:
    """``(sample, table)``: :func:`odeflow.data.sample_counts` and :func:`sample_table`.

    The last pair is reused for the same data model (the same object) and the same
    ``T``, ``N`` and seed, given as integers: the sample's counts are read-only and
    the table is only read, so the fields of one ensemble of starts or of a sweep
    over learning rates share them instead of drawing and tabulating the same
    sample again for each.
    """
    last = _LAST_SAMPLE[0]
    key = (seq_len, sample_size, seed)
    if (last is not None and last[0]() is data
            and all(type(v) is int for v in key)
            and key == (last[1].seq_len, last[1].sample_size, last[1].seed)):
        return last[1], last[2]
    sample = sample_counts(data, seq_len, sample_size, seed)
    table = sample_table(data, sample)
    _LAST_SAMPLE[0] = (weakref.ref(data), sample, table)
    return sample, table


@dataclass(frozen=True)
class ClassBlocks:
    """The sampled sequences grouped by class, each class on its own support.

    The ``N`` sequences of class ``k`` live on the class's support (``s_k``
    tokens; padded to ``s = max s_k``), so their features form a dense ``(N, s)``
    block and the products with the decoder are ``K`` small ``(N, s) x (s, R)``
    products instead of one ``(K N, C) x (C, R)`` product that is mostly zeros
    (:meth:`FiniteTFlow.gradients`).

    Attributes
    ----------
    log_probs : ndarray, shape (K, N, s)
        ``log(k_l / (T - 1))`` on the class support, ``-inf`` where a sequence
        has no count and on padding (so its feature is exactly 0 there).
    probs : ndarray, shape (K, N, s)
        ``k_l / (T - 1)``, 0 where a sequence has no count and on padding.
    valid : ndarray of bool, shape (K, s)
        The slots of tokens some sequence of the class drew.
    column : ndarray of int, shape (K, s)
        Column (in the field's active tokens) of each support slot; 0 where the
        slot is padding or a token no sequence drew (its feature is 0 in every
        sequence, so the slot reads and writes nothing).
    logit : ndarray of int, shape (K, s)
        Position of the slot's logit among the carried logits (0 likewise).
    own : ndarray of int, shape (K,)
        Each class's decoder row (its next token's; multiplicity 1).
    own_logit : ndarray of int, shape (K, N)
        Position of each sequence's own logit (row ``own``) in a flat ``(K, N, R)``
        block of logits.
    weight : ndarray, shape (K, 1)
        ``pi_k / N``, the weight of each of the class's sequences.
    unit_multiplicity : bool
        Every decoder row stands for one output (un-lumped, or no shared row).
    to_columns, to_logits : scipy.sparse.csr_matrix
        0/1 matrices ``(C, K s)`` and ``(n_logits, K s)`` that sum the slots
        into the columns and the carried logits (valid slots only).
    """

    log_probs: np.ndarray
    probs: np.ndarray
    valid: np.ndarray
    column: np.ndarray
    logit: np.ndarray
    own: np.ndarray
    own_logit: np.ndarray
    weight: np.ndarray
    unit_multiplicity: bool
    to_columns: sparse.csr_matrix
    to_logits: sparse.csr_matrix


def class_blocks(field) -> ClassBlocks:
    """The :class:`ClassBlocks` of a Level T field (its sample, columns and logits)."""
    data, sample, table = field.data, field.sample, field.table
    N, T = sample.sample_size, sample.seq_len
    K = data.num_classes
    s = max(cls.support.size for cls in data.classes)
    log_probs = np.full((K, N, s), -np.inf)
    column = np.zeros((K, s), dtype=np.int64)
    logit = np.zeros((K, s), dtype=np.int64)
    valid = np.zeros((K, s), dtype=bool)
    q, tok = table.logit_index
    keys = table.query_tokens[q] * data.vocab_size + tok
    columns = field.columns
    for k, (cls, counts) in enumerate(zip(data.classes, sample.counts, strict=True)):
        width = cls.support.size
        with np.errstate(divide="ignore"):
            log_probs[k, :, :width] = np.log(counts) - np.log(T - 1)
        drawn = counts.sum(axis=0) > 0
        slots = np.flatnonzero(drawn)
        tokens = cls.support[drawn]
        column[k, slots] = np.searchsorted(columns, tokens)
        logit[k, slots] = np.searchsorted(keys, cls.query_token * data.vocab_size + tokens)
        valid[k, slots] = True
    flat = np.flatnonzero(valid.ravel())
    ones = np.ones(flat.size)
    to_columns = sparse.csr_matrix((ones, (column.ravel()[flat], flat)),
                                   shape=(columns.size, K * s))
    to_logits = sparse.csr_matrix((ones, (logit.ravel()[flat], flat)),
                                  shape=(field.n_logits, K * s))
    own = np.asarray(field.own)[::N]
    if np.any(field.multiplicity[own] != 1.0):
        raise ValidationError("storage", "'blocked' needs each class's own decoder row to "
                              "stand for one output (multiplicity 1)")
    weight = (np.asarray(data.weights, dtype=float) / N)[:, None]
    own_logit = (np.arange(K * N).reshape(K, N) * field.R + own[:, None])
    return ClassBlocks(log_probs, np.exp(log_probs), valid, column, logit, own, own_logit,
                       weight,
                       bool(np.all(field.multiplicity == 1.0)), to_columns, to_logits)


class FiniteTFlow(ExactFlow):
    """Level T vector field: Level E on the table of sampled sub-classes.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of ``Y`` and ``Z``.
    start : (y0, z0), optional
        Initial decoder and logits, as for Level E (old keywords ``y0=``, ``z0=``
        warn). A ``y0`` is kept un-lumped when it breaks the symmetry of the
        non-next rows, e.g. the paper's uniform start.
    seq_len : int, default 128
        ``T`` (the paper's experiments use 128): ``T - 1`` contextual tokens.
    sample_size : int, default 64
        ``N``, sequences per class (old name ``samples_per_class``, warns).
    seed : int, default 0
        Seed of the sample (:func:`odeflow.data.sample_counts`).
    storage : {"auto", "dense", "sparse", "blocked"}, default "auto"
        Storage of the sampled supports, as for Level E (the same numbers
        either way, up to rounding). ``"auto"`` keeps tables above ``K N x C =
        20,000`` sparse; with an un-lumped decoder (``M`` rows, a random start)
        dense storage can be the faster one well above that size.
        ``"blocked"``: the right-hand side and gradient per class block
        (:meth:`gradients`: each class's ``N`` sequences on the class's own
        support), the rest (Jacobian, objective) in ``"auto"`` storage; the
        fastest right-hand side for the optimiser flows of Fig. 6
        (``benchmarks/bench_reproduce.py`` measures all three).

    Attributes
    ----------
    sample : CountSample
        The sampled sequences; entry ``k N + s`` of :attr:`table` is class
        ``k``'s ``s``-th sequence.
    table : ClassTable
        The sub-classes (:func:`sample_table`).
    """

    name = "finite_t"

    @renamed_keywords({**START_PARTS, "samples_per_class": "sample_size"})
    def __init__(self, data, eta_y, eta_z, start=None, seq_len=128, sample_size=64, seed=0,
                 storage="auto"):
        if not isinstance(data, DataModel):
            super().__init__(data, eta_y, eta_z, start=start)  # the usual ValidationError
        if storage not in ("auto", "dense", "sparse", "blocked"):
            raise ValidationError("storage", "must be 'auto', 'dense', 'sparse' or 'blocked', "
                                  f"got {storage!r:.80}")
        sample, table = sampled_table(data, seq_len, sample_size, seed)
        self.blocked = storage == "blocked"
        super().__init__(data, eta_y, eta_z, start=start, table=table,
                         storage="auto" if self.blocked else storage)
        self.sample = sample
        self._blocks = None  # ClassBlocks of gradients(), made at its first call
        self._rate = None
        self._work = (None, None)  # (P, work arrays) of the last gradients() call

    def gradient(self, y: np.ndarray) -> np.ndarray:
        """``grad J_T`` on the flat state (per class block with ``storage="blocked"``)."""
        if self.blocked:
            return self.gradients(y[None])[0]
        return super().gradient(y)

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``eta * grad J_T`` (per class block with ``storage="blocked"``)."""
        if not self.blocked:
            return super().rhs(t, y)
        self.nfev += 1
        if self._rate is None:
            self._rate = self.rate_vector
        out = self.gradients(y[None])[0]
        out *= self._rate
        return out

    def gradients(self, states: np.ndarray, weights=None) -> np.ndarray:
        """``grad J_T`` at every row of ``states`` (P, size), per class block.

        The gradient of :meth:`rates` at unit rates (Eqns 3-4, 6-7), on the
        :class:`ClassBlocks` of the sample: the same numbers up to rounding (the
        zeros off a class's support are left out of the sums). For class ``k``'s
        sequence ``n`` with features ``f_n`` on the slots ``j`` (:meth:`_features`),
        logits ``E_nr = f_n . Y_r``, softmax ``alpha_n`` over the outputs ``r``
        (multiplicities ``m_r``) and residual ``D_n = e_own - alpha_n``, each
        sequence weighted ``w_n`` (``pi_k / N``):

        - ``dJ/dY_jr = sum_n w_n f_nj D_nr``, one ``(s, N) x (N, R)`` product;
        - ``dJ/dz_j = sum_n w_n f_nj (G_nj - f_nj c_n)`` with ``G_nj = sum_r m_r D_nr
          Y_jr`` and ``c_n = f_n . G_n = sum_r m_r D_nr E_nr``, so that
          ``dJ/dz_j = sum_r m_r Y_jr dJ/dY_jr - sum_n w_n f_nj^2 c_n``: no
          ``(N, R) x (R, s)`` product for ``G``.

        Both sums are unchanged by a shift ``Y_jr - q_j`` (``sum_r m_r D_nr = 0``, the
        own row having multiplicity 1), and so is the softmax; the blocks read the
        decoder shifted by each column's largest entry, ``q_j = max_r Y_jr``.

        Two products of ``K N s R`` multiply-adds and ``K N R`` exponentials in all
        (:meth:`_softmax`). The states share this field's layout and may differ in
        anything else (the members of an ensemble of starts).

        ``weights`` (Q, K, N), optional: each sampled sequence's weight in place of
        its class's ``pi_k / N`` (``K`` classes, ``N`` sequences each, in the
        sample's order), e.g. a minibatch's counts over its size, or one-hot rows
        for the per-sequence gradients whose covariance is the minibatch noise.
        Row ``q`` goes with state ``q`` (``P == Q``) or with the one state
        (``P == 1``); the result has ``max(P, Q)`` rows.

        The field keeps its work arrays between calls (:meth:`_work_arrays`), so one
        field must not be evaluated from two threads at once.
        """
        if self._blocks is None:
            self._blocks = class_blocks(self)
        b = self._blocks
        Y = np.asarray(states, dtype=float)
        P, C, R = Y.shape[0], self.C, self.R
        ny = C * R
        work = self._work_arrays(P)
        Yt = Y[:, :ny].reshape(P, C, R)
        Yt = np.subtract(Yt, Yt.max(axis=-1, keepdims=True), out=work["Yt"])  # q_j = 0
        # (P, K, s, R), <= 0; every column index is in range ("clip": an unbuffered take)
        Yc = np.take(Yt, b.column, axis=1, out=work["Yc"], mode="clip")
        F = self._features(Y[:, ny:], work["F"])             # (P, K, N, s)
        X, inv, c = self._softmax(F, Yc, work)                # (P, K, N, R), (P, K, N) x2
        if weights is None:
            per, dYc = b.weight, work["dYc"]                  # (K, 1), (P, K, s, R)
        else:
            per, dYc = self._check_weights(weights, P), None  # (Q, K, N)
        # X = (alpha - e_own) / inv here: sum_n w_n f_nj D_nr in one product
        dYc = np.matmul(np.swapaxes(F * (inv * per)[..., None], -1, -2), X, out=dYc)
        np.negative(dYc, out=dYc)
        Ym = Yc if b.unit_multiplicity else Yc * self.multiplicity
        dz = np.matmul(Ym[..., None, :], dYc[..., :, None])[..., 0, 0]  # (P', K, s)
        dz -= np.matmul((per * c)[..., None, :], F * F)[..., 0, :]
        P = dz.shape[0]
        out = np.empty((P, Y.shape[1]))
        dY = b.to_columns @ np.moveaxis(dYc.reshape(P, -1, R), 1, 0).reshape(-1, P * R)
        out[:, :ny] = np.moveaxis(dY.reshape(C, P, R), 1, 0).reshape(P, ny)
        out[:, ny:] = (b.to_logits @ dz.reshape(P, -1).T).T
        return out

    def _features(self, z: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The features ``f_n`` of every sampled sequence on its class's slots, ``(P, K,
        N, s)``, into ``out``: ``k_l e^{z_l}`` over its Euclidean norm (Eqn 6 on the
        counts), each class's logits shifted by their largest (``e^{z_l - max z}``,
        ``K s`` exponentials); a sequence whose norm falls below :data:`SHIFT_FLOOR`
        at that shift has the whole block recomputed in log space at each
        sequence's own largest ``log k_l + z_l``. ``z`` (P, n_logits): the carried
        logits."""
        b = self._blocks
        zs = np.where(b.valid, z[:, b.logit], -np.inf)       # (P, K, s)
        zs -= zs.max(axis=-1, keepdims=True)
        F = np.multiply(b.probs, np.exp(zs)[:, :, None, :], out=out)
        norm2 = np.einsum("pkns,pkns->pkn", F, F)
        if norm2.min() < SHIFT_FLOOR:
            np.add(b.log_probs, z[:, b.logit][:, :, None, :], out=F)
            F -= F.max(axis=-1, keepdims=True)
            np.exp(F, out=F)
            norm2 = np.einsum("pkns,pkns->pkn", F, F)
        F /= np.sqrt(norm2)[..., None]
        return F

    def _softmax(self, F: np.ndarray, Yc: np.ndarray, work: dict) -> tuple:
        """``(X, inv, c)`` of the logits ``E_nr = f_n . Y_r`` (Eqn 3-4): with ``x_n =
        exp(E_n - s_n)`` for a shift ``s_n`` and ``inv_n = 1 / sum_r m_r x_nr`` (so that
        ``alpha_n = inv_n x_n``), ``X_n = x_n - e_own / inv_n``, i.e. ``-D_n / inv_n``,
        and ``c_n = sum_r m_r (e_own - alpha_n)_r E_nr`` (:meth:`gradients`).

        ``Yc`` is the decoder on the slots shifted by each column's largest entry
        (``Yc <= 0``), so that the shift is the bound ``s_n = f_n . q``, ``q_j = max_r
        Y_jr`` (``f >= 0``: every exponent is at most 0), with no maximum over the ``N
        R`` logits; a block whose sum falls below :data:`SHIFT_FLOOR` is shifted by
        each row's maximum instead. ``c`` does not depend on the shift (``sum_r m_r
        (e_own - alpha)_r = 0``)."""
        b = self._blocks
        P = Yc.shape[0]
        E = np.matmul(F, Yc, out=work["E"])                   # E - f . q <= 0
        X = np.exp(E, out=work["X"])
        total = X @ self.multiplicity
        if total.min() < SHIFT_FLOOR:
            E -= E.max(axis=-1, keepdims=True)
            np.exp(E, out=X)
            total = X @ self.multiplicity
        inv = 1.0 / total
        mX = X if b.unit_multiplicity else X * self.multiplicity
        c = E.reshape(P, -1)[:, b.own_logit]                  # (P, K, N)
        c -= np.matmul(mX[..., None, :], E[..., :, None])[..., 0, 0] * inv
        X.reshape(P, -1)[:, b.own_logit] -= total
        return X, inv, c

    def _work_arrays(self, P: int) -> dict:
        """Work arrays of :meth:`gradients` for ``P`` states, kept for the next call with the
        same ``P`` while they take at most :data:`WORK_BYTES`: fresh arrays of this size
        could fault in their pages at every call (``docs/benchmarks.md``, "Work arrays
        and the integrator, priced again"). Overwritten by the next call."""
        if self._work[0] == P:
            return self._work[1]
        b = self._blocks
        K, N, s = b.log_probs.shape
        R = self.R
        shapes = {"Yt": (P, self.C, R), "Yc": (P, K, s, R), "F": (P, K, N, s),
                  "E": (P, K, N, R), "X": (P, K, N, R), "dYc": (P, K, s, R)}
        work = {name: np.empty(shape) for name, shape in shapes.items()}
        if sum(a.nbytes for a in work.values()) <= WORK_BYTES:
            self._work = (P, work)
        return work

    def _check_weights(self, weights, states: int) -> np.ndarray:
        """``weights`` as a float array (Q, K, N) that pairs with ``states`` rows."""
        K, N = len(self.data.classes), self.sample.sample_size
        arr = np.asarray(weights, dtype=float)
        if arr.ndim != 3 or arr.shape[1:] != (K, N):
            raise ValidationError("weights", f"must have shape (Q, {K}, {N}) (rows, classes, "
                                  f"sequences per class), got {arr.shape}")
        if not (states == 1 or arr.shape[0] in (1, states)):
            raise ValidationError("weights", f"{arr.shape[0]} rows for {states} states: give "
                                  "one row per state, or one state")
        if not np.all(np.isfinite(arr)):
            raise ValidationError("weights", "must be finite")
        return arr

    def parameters(self) -> dict:
        # samples_per_class: the old name, kept one release for readers of the meta
        N = self.sample.sample_size
        return {**super().parameters(), "seq_len": self.sample.seq_len, "sample_size": N,
                "samples_per_class": N, "seed": self.sample.seed}

    def trajectory(self, t, states, stats):
        from odeflow.results import FiniteTTrajectory

        base = super().trajectory(t, states, stats)
        return FiniteTTrajectory(base.data, base.t, base.z_carried, base.z_base,
                                 decoder_lumped=base.decoder_lumped, stats=base.stats,
                                 meta=base.meta, logit_index=(base.logit_query,
                                                              base.logit_token),
                                 decoder_layout=base.decoder_layout,
                                 decoder_base=base.decoder_base)
