"""The class structure a vector field is built from: a table of (sub)classes.

A :class:`ClassTable` lists *entries*; each entry has a next-token row, a
query row, a weight and a support (index array of tokens with their
log-probabilities). Several entries may share a next token and a query token:
Level E on a data model has one entry per sequence class
(:meth:`ClassTable.from_data_model`), while the finite-``T`` flow (Level T,
``docs/fidelity.md``) is Level E on sampled sub-classes of weight ``pi_n / N`` with
probabilities ``k / (T - 1)``, built with :meth:`ClassTable.from_entries`.

:class:`Supports` holds the table's supports in the storage that suits its
size: dense ``(K, C)`` arrays masked by ``-inf`` log-probabilities for small
tables (fewest numpy calls per right-hand side), or flat index arrays (one
entry's support after the other, CSR order) with scatters by
:func:`numpy.bincount` and sparse products for large ones, so that the cost of
one right-hand side grows with the number of support entries, not with
``K x C``. The fields write their formulas once against its operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import sparse

from odeflow.data import DataModel, as_real_array
from odeflow.errors import ValidationError

#: Largest ``K x C`` (entries x columns) kept as dense masked arrays by
#: :class:`Supports`; above it the supports are stored as index arrays.
DENSE_SUPPORT_LIMIT = 20_000
#: Largest ``K x C`` for which :meth:`Supports.sample` in sparse storage forms the full
#: ``(K, C)`` product and reads the support from it (one BLAS call, faster than the
#: gather at this size); above it, the gather in chunks (memory ~ support entries).
SAMPLE_PRODUCT_LIMIT = 4_000_000
#: Elements of a gathered ``(support entries, rows)`` block processed at once by
#: :meth:`Supports.sample` in sparse storage (bounds its temporary memory).
GATHER_CHUNK = 2_000_000


@dataclass(frozen=True, eq=False)
class ClassTable:
    """A table of (sub)classes: the class structure of Levels E and T.

    Parameters
    ----------
    vocab_size : int
        ``M``.
    next_tokens : ndarray of int, shape (R_n,)
        Distinct next tokens (the decoder rows the entries target), in the
        order the lumped decoder keeps them.
    query_tokens : ndarray of int, shape (q,)
        Distinct query tokens, sorted (the rows of ``Z`` in the state).
    next_row : ndarray of int, shape (K,)
        For each entry, its next token's position in ``next_tokens``.
    query_row : ndarray of int, shape (K,)
        For each entry, its query token's position in ``query_tokens``.
    weight : ndarray, shape (K,)
        Entry weights (``pi_n`` for a class; ``pi_n / N`` for one of ``N``
        sampled sub-classes), finite and ``> 0``.
    indptr : ndarray of int, shape (K + 1,)
        Entry ``k``'s support is ``tokens[indptr[k]:indptr[k + 1]]`` (CSR).
    tokens : ndarray of int, shape (nnz,)
        Support tokens, sorted within each entry, every entry non-empty.
    log_probs : ndarray, shape (nnz,)
        ``log c_{l|k}`` on the support (finite).

    Notes
    -----
    Build it with :meth:`from_data_model` or :meth:`from_entries` (which
    check their input); the per-entry views are :meth:`support` and
    :meth:`entry_log_probs`.
    """

    vocab_size: int
    next_tokens: np.ndarray
    query_tokens: np.ndarray
    next_row: np.ndarray
    query_row: np.ndarray
    weight: np.ndarray
    indptr: np.ndarray
    tokens: np.ndarray
    log_probs: np.ndarray = field(repr=False)

    # ------------------------------------------------------------ builders
    @classmethod
    def from_data_model(cls, data: DataModel) -> ClassTable:
        """One entry per sequence class of ``data``, in class order.

        ``next_tokens`` are ``data.next_tokens`` (class order) and
        ``query_tokens`` are ``data.query_tokens``; weights are ``pi_n`` and
        supports ``c_{.|n}``'s. Nothing of size ``K x L`` is built.
        """
        if not isinstance(data, DataModel):
            raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
        supports = [c.support for c in data.classes]
        with np.errstate(divide="ignore"):
            log_probs = [np.log(c.support_probs) for c in data.classes]
        K = data.num_classes
        return cls._build(data.vocab_size, data.next_tokens.copy(), data.query_tokens.copy(),
                          np.arange(K), np.asarray(data.class_query_index, dtype=np.int64),
                          np.asarray(data.weights, dtype=float), supports, log_probs)

    @classmethod
    def from_entries(cls, vocab_size: int, next_token, query_token, weight, supports,
                     log_probs, next_tokens=None) -> ClassTable:
        """A table from per-entry lists (entries may share next and query tokens).

        Parameters
        ----------
        vocab_size : int
        next_token, query_token : sequence of int, length K
            Each entry's next token and query token.
        weight : sequence of float, length K
            Entry weights, finite and ``> 0``.
        supports : sequence of 1-d int arrays, length K
            Each entry's support tokens (distinct, in ``[0, M)``, non-empty).
        log_probs : sequence of 1-d float arrays, length K
            ``log c_{l|k}`` on each support (finite), same lengths.
        next_tokens : sequence of int, optional
            Order of the decoder rows: every next token used, each once (e.g.
            ``data.next_tokens``); by default the next tokens in order of
            first appearance.
        """
        M = int(vocab_size)
        nt = np.asarray(next_token, dtype=np.int64)
        qt = np.asarray(query_token, dtype=np.int64)
        K = nt.size
        if K == 0 or nt.shape != (K,) or qt.shape != (K,):
            raise ValidationError("next_token", "next_token and query_token must be "
                                  "non-empty 1-d sequences of the same length")
        w = as_real_array(weight, "weight")
        if w.shape != (K,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValidationError("weight", f"must be {K} finite values > 0")
        if len(supports) != K or len(log_probs) != K:
            raise ValidationError("supports", f"needs {K} supports and log_probs")
        for name, arr in (("next_token", nt), ("query_token", qt)):
            if np.any(arr < 0) or np.any(arr >= M):
                raise ValidationError(name, f"token ids must lie in [0, {M})")
        if next_tokens is None:
            _, first = np.unique(nt, return_index=True)
            rows = nt[np.sort(first)]
        else:
            rows = np.asarray(next_tokens, dtype=np.int64)
            if np.unique(rows).size != rows.size or not np.isin(nt, rows).all():
                raise ValidationError("next_tokens", "must list every next token used, once")
        order = np.argsort(rows)
        next_row = order[np.searchsorted(rows[order], nt)]
        queries = np.unique(qt)
        return cls._build(M, rows, queries, next_row, np.searchsorted(queries, qt), w,
                          supports, log_probs)

    @classmethod
    def _build(cls, M, next_tokens, query_tokens, next_row, query_row, weight, supports,
               log_probs) -> ClassTable:
        sizes = np.array([np.size(s) for s in supports], dtype=np.int64)
        if np.any(sizes == 0):
            raise ValidationError("supports", f"entry {int(np.argmin(sizes))} has an empty "
                                  "support")
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        tokens = np.concatenate([np.asarray(s, dtype=np.int64).ravel() for s in supports])
        lp = np.concatenate([as_real_array(v, "log_probs").ravel() for v in log_probs])
        if lp.shape != tokens.shape:
            raise ValidationError("log_probs", "must have one value per support token")
        if not np.all(np.isfinite(lp)):
            raise ValidationError("log_probs", "must be finite (zero-probability tokens "
                                  "are not in a support)")
        if np.any(tokens < 0) or np.any(tokens >= M):
            raise ValidationError("supports", f"token ids must lie in [0, {M})")
        seg = np.repeat(np.arange(sizes.size), sizes)
        order = np.lexsort((tokens, seg))
        tokens, lp = tokens[order], lp[order]
        if np.any((np.diff(tokens) == 0) & (np.diff(seg) == 0)):
            raise ValidationError("supports", "a token appears twice in one support")
        arrays = [next_tokens, query_tokens, next_row, query_row, weight, indptr, tokens, lp]
        for a in arrays:
            a.setflags(write=False)
        return cls(int(M), *arrays)

    # ------------------------------------------------------------ views
    @property
    def num_entries(self) -> int:
        """``K``, the number of entries."""
        return int(self.next_row.size)

    @property
    def nnz(self) -> int:
        """Total number of support entries (sum of support sizes)."""
        return int(self.tokens.size)

    def support(self, k: int) -> np.ndarray:
        """Support tokens of entry ``k`` (sorted)."""
        return self.tokens[self.indptr[k]:self.indptr[k + 1]]

    def entry_log_probs(self, k: int) -> np.ndarray:
        """``log c_{l|k}`` on the support of entry ``k``."""
        return self.log_probs[self.indptr[k]:self.indptr[k + 1]]

    @cached_property
    def entry_of(self) -> np.ndarray:
        """For each support entry, the table entry it belongs to, shape (nnz,)."""
        return np.repeat(np.arange(self.num_entries), np.diff(self.indptr))

    @cached_property
    def active_tokens(self) -> np.ndarray:
        """Tokens in some support, sorted (the ``C`` columns a decoder can write)."""
        return np.unique(self.tokens)

    @cached_property
    def column(self) -> np.ndarray:
        """Column of each support entry in :attr:`active_tokens`, shape (nnz,)."""
        return np.searchsorted(self.active_tokens, self.tokens)

    @cached_property
    def logit_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(query_row, token)`` of every logit some entry can attend, sorted.

        Per query token, only the tokens in the support of an entry of that
        query; these are the logits the flows carry (all others stay at
        ``Z(0)``).
        """
        key = self.query_row[self.entry_of] * self.vocab_size + self.tokens
        uniq = np.unique(key)
        return uniq // self.vocab_size, uniq % self.vocab_size

    @cached_property
    def logit_position(self) -> np.ndarray:
        """Position of each support entry's logit in :attr:`logit_index`, shape (nnz,)."""
        key = self.query_row[self.entry_of] * self.vocab_size + self.tokens
        q, t = self.logit_index
        return np.searchsorted(q * self.vocab_size + t, key)


class Supports:
    """A :class:`ClassTable`'s supports stored for fast right-hand sides.

    *Support values* (features, gradients on the support) are ``(K, C)``
    arrays that are zero off the support in dense storage, or flat ``(nnz,)``
    arrays in sparse storage. In dense storage every method also takes a
    leading batch axis (several states at once, see
    :class:`~odeflow.fields.stacked.StackedField`).

    Parameters
    ----------
    table : ClassTable
    dense : bool, optional
        Storage; by default dense when ``K x C <=`` :data:`DENSE_SUPPORT_LIMIT`.
    """

    def __init__(self, table: ClassTable, dense: bool | None = None):
        self.table = table
        K, C = table.num_entries, table.active_tokens.size
        self.K, self.C = K, C
        self.n_logits = table.logit_index[0].size
        self.dense = (K * C <= DENSE_SUPPORT_LIMIT) if dense is None else bool(dense)
        seg, col, zpos = table.entry_of, table.column, table.logit_position
        if self.dense:
            self.log_probs = np.full((K, C), -np.inf)
            self.log_probs[seg, col] = table.log_probs
            self.zgather = np.zeros((K, C), dtype=np.int64)
            self.zgather[seg, col] = zpos
            self._zflat = self.zgather.ravel()
            self._positions = seg * C + col
            self._ones = np.ones(C)  # row sums as a matrix-vector product (fast when small)
        else:
            self.log_probs = table.log_probs.copy()
            self.seg, self.col, self.zpos = seg, col, zpos
            self.starts = table.indptr[:-1]
            self._counts = np.diff(table.indptr)
            self._order_t = np.argsort(col, kind="stable")
            self._indptr_t = np.concatenate([[0], np.cumsum(np.bincount(col, minlength=C))])
            self._col_t = seg[self._order_t]
            self._positions = np.arange(seg.size)
        self._scatter = None

    # ----------------------------------------------------- elementwise glue
    def gather_logits(self, z: np.ndarray) -> np.ndarray:
        """The attended logits ``z_{psi(k), l}`` as support values (batch axis allowed)."""
        return z[..., self.zgather] if self.dense else z[..., self.zpos]

    def entry_sum(self, x: np.ndarray) -> np.ndarray:
        """Per-entry sums of support values, shape (..., K)."""
        return x @ self._ones if self.dense else np.add.reduceat(x, self.starts, axis=-1)

    def entry_max(self, x: np.ndarray) -> np.ndarray:
        """Per-entry maxima of support values, shape (..., K)."""
        return x.max(axis=-1) if self.dense else np.maximum.reduceat(x, self.starts, axis=-1)

    def expand(self, v: np.ndarray) -> np.ndarray:
        """A per-entry value ``(..., K)`` broadcast onto the support."""
        # np.repeat reads sequentially, unlike the fancy index v[..., seg]
        return v[..., None] if self.dense else np.repeat(v, self._counts, axis=-1)

    def features(self, z: np.ndarray) -> np.ndarray:
        """``f^_k = c~_k / ||c~_k||_2``, ``c~_k = c_k exp(z_{psi(k)})`` (Eqn 6), log space."""
        a = self.log_probs + self.gather_logits(z)
        if self.dense:  # in place: fewest temporaries for small states
            a -= a.max(axis=-1, keepdims=True)
            np.exp(a, out=a)
            a *= (1.0 / np.sqrt((a * a) @ self._ones))[..., None]
            return a
        e = np.exp(a - self.expand(self.entry_max(a)))
        return e / self.expand(np.sqrt(self.entry_sum(e * e)))

    def entry_dot(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-entry inner products ``sum_l x_kl y_kl``, shape (..., K)."""
        if self.dense:
            return (x * y) @ self._ones
        return np.add.reduceat(x * y, self.starts, axis=-1)

    def scatter_logits(self, x: np.ndarray) -> np.ndarray:
        """Sum support values into the carried logits, shape (..., n_logits)."""
        if x.ndim == (2 if self.dense else 1):
            if self.dense:
                return np.bincount(self._zflat, x.ravel(), minlength=self.n_logits)
            return np.bincount(self.zpos, x, minlength=self.n_logits)
        if self._scatter is None:  # (n_logits, positions) 0/1 matrix for batches
            zpos = self.table.logit_position
            self._scatter = sparse.csr_matrix(
                (np.ones(zpos.size), (zpos, self._positions)),
                shape=(self.n_logits, self.K * self.C if self.dense else zpos.size))
        flat = x.reshape(-1, self._scatter.shape[1])
        return np.asarray(self._scatter @ flat.T).T.reshape(x.shape[:-2 if self.dense else -1]
                                                             + (self.n_logits,))

    def column_sum(self, x: np.ndarray) -> np.ndarray:
        """``sum_k x_k`` over entries, per column, shape (..., C) (sparse: 1-d only)."""
        if self.dense:
            return x.sum(axis=-2)
        return np.bincount(self.col, x, minlength=self.C)

    def at_columns(self, v: np.ndarray) -> np.ndarray:
        """A per-column vector ``(..., C)`` read at each support entry."""
        return v[..., None, :] if self.dense else v[..., self.col]

    # ----------------------------------------------------- products with Y^T
    def _csr(self, x):
        return sparse.csr_matrix((x, self.col, self.table.indptr), shape=(self.K, self.C))

    def _csr_t(self, x):
        return sparse.csr_matrix((x[self._order_t], self._col_t, self._indptr_t),
                                 shape=(self.C, self.K))

    def rows_times(self, x: np.ndarray, B: np.ndarray) -> np.ndarray:
        """``X @ B``: support values ``x`` (rows: entries) times ``B (C, R)`` -> (K, R)."""
        if self.dense:
            return x @ B
        return np.asarray(self._csr(x) @ B)

    def columns_times(self, x: np.ndarray, A: np.ndarray) -> np.ndarray:
        """``X^T @ A``: support values ``x`` transposed times ``A (K, R)`` -> (C, R)."""
        if self.dense:
            return np.swapaxes(x, -1, -2) @ A
        return np.asarray(self._csr_t(x) @ A)

    def sample(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """``(A @ B^T)`` on the support: ``A (K, R)``, ``B (C, R)`` -> support values."""
        if self.dense:
            return A @ np.swapaxes(B, -1, -2)
        if self.K * self.C <= SAMPLE_PRODUCT_LIMIT:  # one BLAS product, then the support
            return (A @ B.T)[self.seg, self.col]
        nnz = self.seg.size
        out = np.empty(nnz)
        step = max(1, GATHER_CHUNK // max(1, B.shape[1]))
        for lo in range(0, nnz, step):
            hi = min(nnz, lo + step)
            out[lo:hi] = np.einsum("jr,jr->j", A[self.seg[lo:hi]], B[self.col[lo:hi]])
        return out
