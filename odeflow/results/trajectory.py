"""The result of a Scan and Snap solve or training run: :class:`Trajectory` and its kinds.

A trajectory stores the *lumped* state over time (logits of the query tokens
in use over the active tokens, the decoder rows over the active tokens, and
any series a flow records) and un-lumps on access, so the accessors return
full ``M``-length quantities while storage stays independent of ``M``.

Each kind of result is a class listing the series it records (``SERIES``):

- :class:`Trajectory`: logits and, for flows that move it, the decoder
  (:class:`~odeflow.results.decoder.DecoderSeries`, lumped or full rows):
  Level E, SGD and training runs;
- :class:`ReducedTrajectory`: Level R, which records the margin, ``B`` and
  ``Gamma`` (:class:`~odeflow.results.reduced.ReducedSeries`) and implies the
  decoder;
- :class:`~odeflow.results.FiniteTTrajectory`: Level T, over a seeded sample.

An optimiser flow of any kind adds its optimiser state to ``series``
(``velocity`` or ``moment1``, ``moment2``, and ``flow_time``), read by the
accessors every result shares (:class:`~odeflow.results.solution.SolverOutput`:
``optimizer``, ``steps``, ``flow_time``, ``velocity``, ``moments``). The file
layout is :mod:`odeflow.results.trajectory_file`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from odeflow.data import DataModel
from odeflow.errors import ValidationError
from odeflow.numerics import normalised_features
from odeflow.results.decoder import DECODER_BYTES_LIMIT, DecoderSeries, check_layout
from odeflow.results.files import read_result_file
from odeflow.results.reduced import REDUCED_SERIES, ReducedSeries
from odeflow.results.solution import SolverOutput
from odeflow.results.trajectory_file import read_trajectory, write_trajectory
from odeflow.tables import blocks, log_spaced_rows

__all__ = ["DECODER_BYTES_LIMIT", "KINDS", "ReducedTrajectory", "Trajectory", "read_result_file"]

#: The kind of result of each flow that has a class of its own (each subclass's
#: ``FLOWS``): what :meth:`Trajectory.load` returns for a file of that flow.
KINDS: dict[str, type] = {}


class Trajectory(DecoderSeries, SolverOutput):
    """Time series of a Scan and Snap flow's logits and decoder, with un-lumping accessors.

    Parameters
    ----------
    data : DataModel
    t : ndarray, shape (n,)
    z_active : ndarray, shape (n, q, L), or (n, P) with ``logit_index``
        Logits of the query tokens in use (``data.query_tokens``) over the
        active tokens (``data.active_tokens``); or, with ``logit_index``, only
        the ``P`` logits a flow carries (compact storage; the others stay at
        ``z_base``).
    z_base : ndarray, shape (q, M)
        Logits at ``t = 0`` over all tokens; inactive tokens keep these values.
    decoder_lumped : ndarray, shape (n, R, L), optional
        Decoder over the active tokens. With ``decoder_layout="lumped"`` its
        rows are the ``K`` next tokens in class order, then (when ``M > K``)
        the row shared by the ``M - K`` other outputs (see
        :class:`odeflow.fields.exact.ExactFlow`); with ``"full"`` they are all
        ``M`` outputs in token order (``R = M``).
    logit_index : (ndarray, ndarray) of int, shape (P,) each, optional
        ``(query row in data.query_tokens, token)`` of each stored logit, for
        compact ``z_active``.
    decoder_layout : {"lumped", "full"}, default "lumped"
    decoder_base : ndarray, shape (M, M), optional
        ``Y(0)``, whose columns of inactive tokens the decoder keeps for ever;
        zero by default.
    series : dict of str -> ndarray, optional
        Recorded series with time as the first axis (a kind's :attr:`SERIES`,
        an optimiser flow's state, a sweep's ``J``).
    stats : dict, optional
        Solver statistics: ``method, nfev, njev, nlu, status, message, wall_time``.
    meta : dict, optional
        Parameters of the run (flow, learning rates, tolerances, ...).

    Attributes
    ----------
    SERIES : tuple of str
        The series this kind of result records (none for Level E).
    FLOWS : tuple of str
        The flows whose results are of this kind, for :meth:`load` (a subclass
        declares its own; Level E, SGD and training runs are plain trajectories).

    Notes
    -----
    Level R's accessors (:attr:`margin`, :attr:`gamma`, :attr:`gamma_integral`,
    :meth:`B`; :class:`~odeflow.results.reduced.ReducedSeries`) are on
    :class:`ReducedTrajectory`, the kind Level R returns and a Level R file loads as.
    """

    SERIES: tuple = ()
    FLOWS: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for flow in cls.__dict__.get("FLOWS", ()):
            KINDS[flow] = cls

    def __init__(self, data: DataModel, t, z_active, z_base, decoder_lumped=None,
                 series=None, stats=None, meta=None, decoder_layout="lumped",
                 decoder_base=None, logit_index=None):
        self.data = data
        self.decoder_layout = check_layout(decoder_layout)
        self.decoder_base = None if decoder_base is None else np.asarray(decoder_base,
                                                                          dtype=float)
        self.t = np.asarray(t, dtype=float)
        self.z_base = np.asarray(z_base, dtype=float)
        self._set_logits(np.asarray(z_active, dtype=float), logit_index)
        self.decoder_lumped = None if decoder_lumped is None else np.asarray(decoder_lumped)
        self.series = {k: np.asarray(v) for k, v in (series or {}).items()}
        self.stats = dict(stats or {})
        self.meta = dict(meta or {})

    def _set_logits(self, z: np.ndarray, logit_index) -> None:
        """Store the logits compactly, logit-major: ``(P, n)`` and their ``(query, token)``.

        Logit-major is the layout of ``solve_ivp``'s output (``sol.y``), so a
        solve's logits are stored without a transposing copy; the storage is
        contiguous, so derived quantities round the same after save and load.
        """
        data = self.data
        q, L = data.query_tokens.size, data.active_tokens.size
        if logit_index is None:
            if z.ndim != 3 or z.shape != (self.t.size, q, L):
                raise ValidationError("z_active", f"has shape {z.shape}, inconsistent with "
                                      f"t ({self.t.size}) and the data model")
            self.logit_query = np.repeat(np.arange(q), L)
            self.logit_token = np.tile(data.active_tokens, q)
            self._z_dense = np.ascontiguousarray(z)
            self._z_by_logit = np.ascontiguousarray(self._z_dense.reshape(self.t.size, q * L).T)
            return
        rows, tokens = (np.asarray(a, dtype=np.int64) for a in logit_index)
        if z.ndim != 2 or z.shape != (self.t.size, rows.size) or tokens.shape != rows.shape:
            raise ValidationError("z_active", f"has shape {z.shape}, inconsistent with t "
                                  f"({self.t.size}) and logit_index ({rows.size} logits)")
        key = rows * data.vocab_size + tokens
        if np.all(np.diff(key) > 0):  # the fields' order already: no copy of the values
            self.logit_query, self.logit_token = rows, tokens
            self._z_by_logit = np.ascontiguousarray(z.T)
        else:
            order = np.argsort(key, kind="stable")
            self.logit_query, self.logit_token = rows[order], tokens[order]
            self._z_by_logit = np.ascontiguousarray(z.T[order])
        self._z_dense = None

    @property
    def z_carried(self) -> np.ndarray:
        """The stored logits, shape ``(n, P)`` (a view), in the order of
        ``(logit_query, logit_token)``."""
        return self._z_by_logit.T

    @property
    def z_active(self) -> np.ndarray:
        """Logits of the query tokens in use over the active tokens, shape ``(n, q, L)``.

        Built from the compact storage on first use (``8 n q L`` bytes); the
        accessors :meth:`logits`, :meth:`attention` and :meth:`features` take a
        token subset or one time instead.
        """
        if self._z_dense is None:
            data = self.data
            out = np.repeat(self.z_base[:, data.active_tokens][None], self.t.size, axis=0)
            out[:, self.logit_query, np.searchsorted(data.active_tokens, self.logit_token)] = \
                self.z_carried
            self._z_dense = out
        return self._z_dense

    def _logit_values(self, qi: int, tokens: np.ndarray, index) -> np.ndarray:
        """``z_{m, tokens}`` at all times (n, len) or at time ``index`` (len,)."""
        M = self.data.vocab_size
        key = self.logit_query * M + self.logit_token
        want = qi * M + tokens
        pos = np.minimum(np.searchsorted(key, want), key.size - 1)
        found = key[pos] == want
        base = self.z_base[qi, tokens]
        if index is None:
            return np.where(found, self._z_by_logit[pos].T, base)
        return np.where(found, self._z_by_logit[pos, index], base)

    def _check_tokens(self, tokens) -> np.ndarray | None:
        if tokens is None:
            return None
        arr = np.asarray(tokens)
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or np.any(arr < 0) \
                or np.any(arr >= self.data.vocab_size):
            raise ValidationError("tokens", f"must be token ids in [0, "
                                  f"{self.data.vocab_size}), got {tokens!r:.80}")
        return arr.astype(np.int64)

    def _check_index(self, index):
        if index is None:
            return None
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) \
                or not -self.t.size <= index < self.t.size:
            raise ValidationError("index", f"must be a time index in [0, {self.t.size}), "
                                  f"got {index!r}")
        return int(index)

    def __repr__(self) -> str:
        return (f"Trajectory(flow={self.flow!r}, n={self.t.size}, "
                f"t=[{self.t[0]:g}, {self.t[-1]:g}], data={self.data!r})")

    @property
    def flow(self) -> str:
        """Which process produced this trajectory (``exact``, ``reduced``, ``sgd``, ...)."""
        return str(self.meta.get("flow", "unknown"))

    # ----------------------------------------------------------- accessors
    def logits(self, query_token: int, tokens=None, index=None) -> np.ndarray:
        """``z_m(t)``: shape ``(n, M)``, or ``(n, len(tokens))`` / one time ``index``.

        Parameters
        ----------
        query_token : int
        tokens : array_like of int, optional
            Only these tokens (no ``(n, M)`` array is built).
        index : int, optional
            Only the output time ``t[index]``.
        """
        qi = self.data.query_index(query_token)
        tokens = self._check_tokens(tokens)
        index = self._check_index(index)
        want = np.arange(self.data.vocab_size) if tokens is None else tokens
        return self._logit_values(qi, want, index)

    def _class_logits(self) -> np.ndarray:
        """Active-token logits of each class's query, shape (n, K, L)."""
        return self.z_active[:, self.data.class_query_index, :]

    def _active_features(self) -> tuple[np.ndarray, np.ndarray]:
        return normalised_features(self.data.active_log_probs, self._class_logits())

    def _dense(self, active: np.ndarray) -> np.ndarray:
        """Values over ``data.active_tokens`` (n, L) spread to all ``M`` tokens, (n, M)."""
        out = np.zeros((self.t.size, self.data.vocab_size))
        out[:, self.data.active_tokens] = active
        return out

    def _support_features(self, next_token: int, index):
        """``(support, f_n, f^_n)`` on the support of class ``n`` (time axis unless ``index``)."""
        i = self.data.class_index(next_token)
        cls = self.data.classes[i]
        z = self._logit_values(int(self.data.class_query_index[i]), cls.support, index)
        f, fh = normalised_features(np.log(cls.support_probs), z)
        return cls.support, f, fh

    def _on_tokens(self, support, values, tokens, index) -> np.ndarray:
        if tokens is None:
            out = np.zeros((self.t.size, self.data.vocab_size) if index is None
                           else (self.data.vocab_size,))
            out[..., support] = values
            return out
        pos = np.minimum(np.searchsorted(support, tokens), support.size - 1)
        return np.where(support[pos] == tokens, values[..., pos], 0.0)

    def attention(self, next_token: int, tokens=None, index=None) -> np.ndarray:
        """``f_n(t)`` (attention output, sums to one) (Eqn 5).

        Shape ``(n, M)``; or only ``tokens`` and/or only time ``index`` (as
        :meth:`logits`), computed on the class's support without ``(n, M)`` arrays.
        """
        tokens, index = self._check_tokens(tokens), self._check_index(index)
        support, f, _ = self._support_features(next_token, index)
        return self._on_tokens(support, f, tokens, index)

    def features(self, next_token: int, tokens=None, index=None) -> np.ndarray:
        """``f^_n(t) = c~_n / ||c~_n||_2`` (Eqn 6); shapes as :meth:`attention`."""
        tokens, index = self._check_tokens(tokens), self._check_index(index)
        support, _, fh = self._support_features(next_token, index)
        return self._on_tokens(support, fh, tokens, index)

    # ------------------------------------------- Eqn 11 quantities (any flow)
    def _token_logit(self, class_position: int, token: int, name: str = "token") -> np.ndarray:
        """``z_ml(t)`` for the query of a class, read from the stored logits, shape (n,)."""
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)) \
                or not 0 <= token < self.data.vocab_size:
            raise ValidationError(name, f"must be a token id in [0, {self.data.vocab_size}), "
                                  f"got {token!r}")
        qi = int(self.data.class_query_index[class_position])
        return self._logit_values(qi, np.array([token]), None)[:, 0]

    def growth_factor(self, next_token: int, token: int) -> np.ndarray:
        """``chi_l(t) = exp(2 (z_ml(t) - z_ml(0))) - 1`` for ``m = psi(n)`` (Theorem 3)."""
        z = self._token_logit(self.data.class_index(next_token), token)
        return np.expm1(2.0 * (z - z[0]))

    def relative_gain(self, next_token: int, token: int, other: int) -> np.ndarray:
        """``r_{l/l'|n}(t) = f^_nl(t)^2/f^_nl'(t)^2 - f^_nl(0)^2/f^_nl'(0)^2`` (Eqn 11).

        Computed from log-probabilities and logits, so no normalisation enters.
        """
        i = self.data.class_index(next_token)
        cls = self.data.classes[i]
        log_c = {}
        for name, tok in (("token", token), ("other", other)):
            at = np.flatnonzero(cls.support == tok)
            if at.size == 0:
                raise ValidationError(name, f"token {tok!r} is not in the support of class "
                                      f"{next_token}")
            log_c[name] = np.log(cls.support_probs[at[0]])
        log_ratio = (log_c["token"] - log_c["other"] + self._token_logit(i, token)
                     - self._token_logit(i, other, "other"))
        # r = rho(0) * expm1(2 (log_ratio - log_ratio(0))): no cancellation for small r
        return np.exp(2.0 * log_ratio[0]) * np.expm1(2.0 * (log_ratio - log_ratio[0]))

    def xi(self, next_token: int) -> np.ndarray:
        """``xi_n = sum_{n' != n} beta_{nn'} f^_n . f^_n'``, shape (n,) (``docs/levels.md``).

        ``beta`` is the one the flow used (``meta["beta"]``; ``1/(M-1)`` off the
        diagonal by default).
        """
        i = self.data.class_index(next_token)
        K, M = self.data.num_classes, self.data.vocab_size
        beta = np.asarray(self.meta.get("beta", np.full((K, K), 1.0 / (M - 1))), dtype=float)
        _, F = self._active_features()
        overlaps = np.einsum("tl,tkl->tk", F[:, i, :], F)
        weights = beta[i].copy()
        weights[i] = 0.0
        return overlaps @ weights

    # ---------------------------------------------------------------- files
    def summary_table(self, rows: int = 8, width: int | None = None) -> str:
        """Objective and attention at log-spaced times (what ``odeflow run`` prints).

        For each class: attention on its top distinct token (largest ``c_{l|n}``)
        and the total attention on the common tokens. Computed over the active
        tokens only, so the memory used does not grow with the vocabulary size.
        ``width``: columns past it continue in a further block led by ``t``
        (:func:`odeflow.tables.blocks`); None: one block.
        """
        data = self.data
        idx = log_spaced_rows(self.t, rows)
        active = data.active_tokens
        common = np.searchsorted(active, data.common_tokens())
        header = ["t"]
        has_objective = self.decoder_lumped is not None
        if has_objective:
            header.append("J")
            J = self.objective[idx]
        cols = []
        for i, n in enumerate(data.next_tokens):
            f, _ = normalised_features(data.active_log_probs[i],
                                       self.z_active[idx][:, data.class_query_index[i], :])
            distinct = np.searchsorted(active, data.distinct_tokens(n))
            if distinct.size:
                top = distinct[np.argmax(data.active_probs[i][distinct])]
                header.append(f"f[{n}][{active[top]}] top distinct")
                cols.append(f[:, top])
            if common.size:
                header.append(f"f[{n}] common")
                cols.append(f[:, common].sum(axis=1))
            if len(cols) >= 6:
                break
        body = []
        for row, i in enumerate(idx):
            vals = [f"{self.t[i]:.4g}"]
            if has_objective:
                vals.append(f"{J[row]:.6f}")
            vals += [f"{c[row]:.6f}" for c in cols]
            body.append(vals)
        return "\n".join(blocks(header, body, keys=1, width=width))

    def save(self, path, field: str = "path") -> Path:
        """Write ``.npz`` (arrays + JSON metadata) through :func:`odeflow.io.atomic_write_npz`.

        Layout: :mod:`odeflow.results.trajectory_file`. Atomic (temp file +
        rename), symlinks followed, non-regular targets and unwritable folders
        refused with a ValidationError naming ``field`` (``"out"`` for the CLI
        flag); no pickle. ``meta["provenance"]`` (:func:`odeflow.io.provenance`:
        versions, UTC time, command line, seeds) is added unless the trajectory
        already carries one.
        """
        return write_trajectory(path, self, field)

    @classmethod
    def load(cls, path) -> Trajectory:
        """Read a file written by :meth:`save`, checked as a format.

        Returns the kind of result of the stored flow (:data:`KINDS`, e.g. a
        :class:`ReducedTrajectory` for ``flow="reduced"``) when that kind is a
        ``cls``; else a ``cls``.

        Raises
        ------
        ValidationError
            (field ``path``) for anything that is not an intact odeflow
            trajectory: not an ``.npz`` archive, corrupt or truncated, missing
            or extra arrays, arrays of the wrong type or of shapes inconsistent
            with the stored data model, non-finite values, an unknown format
            version or a damaged metadata record. Nothing is unpickled.
        """
        args, kwargs = read_trajectory(path)
        kind = KINDS.get(str(kwargs["meta"].get("flow")), cls)
        return (kind if issubclass(kind, cls) else cls)(*args, **kwargs)


class ReducedTrajectory(ReducedSeries, Trajectory):
    """A :class:`Trajectory` of Level R (``flow="reduced"``, ``docs/levels.md``).

    Same parameters as :class:`Trajectory`; ``series`` holds :attr:`SERIES`,
    read by :attr:`margin`, :attr:`gamma`, :attr:`gamma_integral` and
    :meth:`B`, and ``decoder_lumped`` the decoder the margins imply (Lemma 3).
    """

    SERIES = REDUCED_SERIES
    FLOWS = ("reduced",)
