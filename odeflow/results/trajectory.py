"""The result of a solve (or of a training run): a :class:`Trajectory`.

A trajectory stores the *lumped* state over time (logits of the query tokens
in use over the active tokens, the lumped decoder, and any scalar series a
flow records) and un-lumps on access, so the accessors return full
``M``-length quantities while storage stays independent of ``M``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from odeflow.data import DataModel
from odeflow.errors import ValidationError
from odeflow.io import atomic_write_npz, provenance, readable_file
from odeflow.numerics import lumped_objective, normalised_features
from odeflow.results.solution import SolverOutput

#: Default largest full decoder array (bytes) :meth:`Trajectory.full_decoder` builds.
DECODER_BYTES_LIMIT = 256 * 2**20

#: Format tag written into saved files.
FILE_FORMAT = "odeflow-trajectory/1"


def jsonable(value):
    """Plain-python copy of ``value`` (numpy scalars and arrays to lists) for JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


class Trajectory(SolverOutput):
    """Time series of the dynamics, with un-lumping accessors.

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
        Extra recorded series with time as the first axis (``margin``,
        ``drive``, ``gamma_integral``, ...).
    stats : dict, optional
        Solver statistics: ``method, nfev, njev, nlu, status, message, wall_time``.
    meta : dict, optional
        Parameters of the run (flow, learning rates, tolerances, ...).
    """

    def __init__(self, data: DataModel, t, z_active, z_base, decoder_lumped=None,
                 series=None, stats=None, meta=None, decoder_layout="lumped",
                 decoder_base=None, logit_index=None):
        self.data = data
        if decoder_layout not in ("lumped", "full"):
            raise ValidationError("decoder_layout", f"must be 'lumped' or 'full', "
                                  f"got {decoder_layout!r}")
        self.decoder_layout = decoder_layout
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

    @property
    def decoder_multiplicity(self) -> np.ndarray:
        """How many outputs each row of :attr:`decoder_lumped` stands for, shape (R,)."""
        if self.decoder_layout == "full":
            return np.ones(self.data.vocab_size)
        return np.asarray(self.data.output_multiplicity)

    @property
    def decoder_target_rows(self) -> np.ndarray:
        """Row of :attr:`decoder_lumped` holding each class's next token, shape (K,)."""
        if self.decoder_layout == "full":
            return self.data.next_tokens
        return np.arange(self.data.num_classes)

    def decoder_nbytes(self) -> int:
        """Bytes of the full ``(n, M, M)`` decoder array :meth:`full_decoder` would build."""
        return 8 * self.t.size * self.data.vocab_size ** 2

    def decoder_at(self, i: int) -> np.ndarray:
        """``Y(t_i)``, shape ``(M, M)`` (rows: outputs; columns: tokens), one time only."""
        Yl = self._require_decoder()
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) \
                or not -self.t.size <= i < self.t.size:
            raise ValidationError("i", f"must be a time index in [0, {self.t.size}), got {i!r}")
        data = self.data
        K, M = data.num_classes, data.vocab_size
        out = np.zeros((M, M)) if self.decoder_base is None else self.decoder_base.copy()
        cols = data.active_tokens
        if self.decoder_layout == "full":
            out[:, cols] = Yl[i]
            return out
        if M > K:
            out[:, cols] = Yl[i, K][None, :]
        out[np.ix_(data.next_tokens, cols)] = Yl[i, :K]
        return out

    def full_decoder(self, max_bytes: int | None = None) -> np.ndarray:
        """``Y(t)`` at every output time, shape ``(n, M, M)``: :meth:`decoder_nbytes` bytes.

        That is ``8 n M^2`` bytes (1.9 GB for ``n = 600`` times at ``M = 200``),
        so it is refused above ``max_bytes`` (default :data:`DECODER_BYTES_LIMIT`,
        256 MiB); pass a larger ``max_bytes`` to ask for it anyway. Prefer
        :meth:`decoder_at` (one time) or :attr:`decoder_lumped` (the stored
        rows over the active tokens).
        """
        limit = DECODER_BYTES_LIMIT if max_bytes is None else int(max_bytes)
        need = self.decoder_nbytes()
        if need > limit:
            raise ValidationError("max_bytes", f"the full decoder (n={self.t.size}, M="
                                  f"{self.data.vocab_size}) needs {need} bytes, more than "
                                  f"{limit}; use decoder_at(i) or decoder_lumped, or pass "
                                  f"max_bytes={need}")
        return np.stack([self.decoder_at(i) for i in range(self.t.size)])

    @property
    def decoder(self) -> np.ndarray:
        """``Y(t)``, shape ``(n, M, M)``: :meth:`full_decoder` with its default size limit.

        Never builds more than :data:`DECODER_BYTES_LIMIT` bytes; see
        :meth:`decoder_at` for one time.
        """
        return self.full_decoder()

    def _require_decoder(self) -> np.ndarray:
        if self.decoder_lumped is None:
            raise ValidationError("decoder", f"flow {self.flow!r} records no decoder")
        return self.decoder_lumped

    @property
    def objective(self) -> np.ndarray:
        """``J(t)`` of Eqn 2 (maximised), shape ``(n,)``."""
        Yl = self._require_decoder()
        _, F = self._active_features()
        return lumped_objective(Yl, F, np.asarray(self.data.weights),
                                np.log(self.decoder_multiplicity),
                                rows=self.decoder_target_rows)

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

    # ------------------------------------------------------- recorded series
    def _series(self, name: str) -> np.ndarray:
        if name not in self.series:
            raise ValidationError(
                name, f"not recorded by flow {self.flow!r}; recorded: {sorted(self.series)} "
                "(see odeflow.analysis.diagnostics for estimates from an exact-flow trajectory)")
        return self.series[name]

    def _per_class(self, values: np.ndarray) -> np.ndarray:
        """(n, K) -> (n,) when the weights are uniform (one shared margin)."""
        if values.ndim == 2 and self.data.uniform_weights:
            return values[:, 0]
        return values

    @property
    def margin(self) -> np.ndarray:
        """Decoder logit margin ``h(t)`` (Eqn 44): shape (n,) for uniform weights, else (n, K)."""
        return self._per_class(self._series("margin"))

    @property
    def gamma(self) -> np.ndarray:
        """Speed-control coefficient ``gamma = h (M-1) / (exp(h) + M - 1)`` (Eqn 9, Theorem 1).

        Same shape as :attr:`margin`; written with ``exp(-h)`` so it never overflows.
        """
        h = self._series("margin")
        M = self.data.vocab_size
        decay = np.exp(-h)
        return self._per_class(h * (M - 1) * decay / (1.0 + (M - 1) * decay))

    @property
    def gamma_integral(self) -> np.ndarray:
        """``Gamma(t) = int_0^t gamma ds`` (Eqn 128), same shape as :attr:`margin`."""
        return self._per_class(self._series("gamma_integral"))

    def B(self, next_token: int) -> np.ndarray:  # noqa: N802 (the paper's symbol)
        """``B_n(t) = eta_Z pi_n int_0^t gamma xi_n ds`` (Eqn 98), shape (n,)."""
        return self._series("B")[:, self.data.class_index(next_token)]

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

    # ------------------------------------------------ optimiser flows (spec 9)
    @property
    def optimizer(self) -> dict | None:
        """The optimiser of an optimiser flow (``docs/optimisers.md``) as a dict, e.g.
        ``{"kind": "momentum", "mu": 0.9, "start": "rest", "modified": True}``;
        None for a gradient flow."""
        return self.meta.get("optimizer")

    @property
    def steps(self) -> np.ndarray:
        """The optimiser steps of an optimiser flow's samples (its time axis ``t``).

        Raises ValidationError naming ``steps`` for a gradient flow, whose ``t``
        is flow time (see :attr:`flow_time`).
        """
        if self.optimizer is None:
            raise ValidationError("steps", f"flow {self.flow!r} is not an optimiser flow; "
                                  "its t is flow time")
        return self.t

    @property
    def flow_time(self) -> np.ndarray | None:
        """First-order flow time of the samples.

        A heavy-ball flow: the warm-up map ``t_k = [k - mu (1 - mu^k)/(1 - mu)]
        / (1 - mu)`` of its steps; an Adam flow: None (Adam has no first-order
        time map, ``docs/optimisers.md``); a gradient flow: ``t``.
        """
        if self.optimizer is None:
            return self.t
        return self.series.get("flow_time")

    @property
    def velocity(self) -> np.ndarray:
        """A heavy-ball flow's velocity ``u = eta v``, shape (n, state size), in the
        level's flat state layout (the field's ``split``); at step ``k`` the ODE's at
        ``s = k + offset``, as the parameters (the recursion's ``u_k`` sits half a step
        earlier on the staggered grid)."""
        return self._optimizer_series("velocity")

    @property
    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """An Adam flow's moments ``(m, v)`` (not bias-corrected), each (n, state
        size), in the level's flat state layout; past the exact steps, at step ``k``
        the ODE's at ``s = k + offset``, as the parameters (the recursion's ``m_k, v_k``
        sit half a step earlier on the staggered grid)."""
        return self._optimizer_series("moment1"), self._optimizer_series("moment2")

    def _optimizer_series(self, name: str) -> np.ndarray:
        if name not in self.series:
            kind = (self.optimizer or {}).get("kind", "none")
            raise ValidationError(name, f"not recorded by this trajectory (optimizer: {kind})")
        return self.series[name]

    # ---------------------------------------------------------------- files
    def save(self, path, field: str = "path") -> Path:
        """Write ``.npz`` (arrays + JSON metadata) through :func:`odeflow.io.atomic_write_npz`.

        Atomic (temp file + rename), symlinks followed, non-regular targets and
        unwritable folders refused with a ValidationError naming ``field``
        (``"out"`` for the CLI flag); no pickle. ``meta["provenance"]``
        (:func:`odeflow.io.provenance`: versions, UTC time, command line,
        seeds) is added unless the trajectory already carries one.
        """
        meta = {**self.meta}
        seeds = {k: v for k, v in meta.items() if "seed" in k}
        meta.setdefault("provenance", provenance(seeds))
        arrays = {"t": self.t, "z_base": self.z_base}
        if self._z_dense is not None:
            arrays["z_active"] = self._z_dense
        else:
            arrays.update({"z_by_logit": self._z_by_logit, "logit_query": self.logit_query,
                           "logit_token": self.logit_token})
        if self.decoder_lumped is not None:
            arrays["decoder_lumped"] = self.decoder_lumped
        for k, v in self.series.items():
            arrays[f"series__{k}"] = v
        if self.decoder_base is not None:
            arrays["decoder_base"] = self.decoder_base
        metadata = {"format": FILE_FORMAT, "data": self.data.to_dict(),
                    "decoder_layout": self.decoder_layout,
                    "stats": jsonable(self.stats), "meta": jsonable(meta)}
        arrays["metadata"] = np.array(json.dumps(metadata))
        return atomic_write_npz(path, arrays, field=field)

    @classmethod
    def load(cls, path) -> Trajectory:
        """Read a file written by :meth:`save`, checked as a format.

        Raises
        ------
        ValidationError
            (field ``path``) for anything that is not an intact odeflow
            trajectory: not an ``.npz`` archive, corrupt or truncated, missing
            or extra arrays, arrays of the wrong type or of shapes inconsistent
            with the stored data model, non-finite values, an unknown format
            version or a damaged metadata record. Nothing is unpickled.
        """
        arrays, metadata = read_result_file(path, FILE_FORMAT)
        where = f"{str(path)!r}"
        try:
            data = DataModel.from_dict(metadata["data"])
        except ValidationError as exc:
            raise ValidationError("path", f"{where}: the stored data model is invalid "
                                  f"({exc})") from None
        layout = metadata.get("decoder_layout", "lumped")
        if layout not in ("lumped", "full"):
            raise ValidationError("path", f"{where}: the metadata record is damaged "
                                  f"(decoder_layout {layout!r:.40})")
        _check_trajectory_arrays(arrays, data, layout, where)
        series = {k[len("series__"):]: v for k, v in arrays.items() if k.startswith("series__")}
        if "z_active" in arrays:
            z, index = arrays["z_active"], None
        else:
            z, index = arrays["z_by_logit"].T, (arrays["logit_query"], arrays["logit_token"])
        return cls(data, arrays["t"], z, arrays["z_base"],
                   decoder_lumped=arrays.get("decoder_lumped"), logit_index=index,
                   series=series, stats=metadata["stats"], meta=metadata["meta"],
                   decoder_layout=layout, decoder_base=arrays.get("decoder_base"))


def _check_trajectory_arrays(arrays: dict, data: DataModel, layout: str, where: str) -> None:
    """Shapes and index ranges of a trajectory file's arrays against its data model."""
    t = arrays["t"]
    n = t.shape[0] if t.ndim == 1 else -1
    q, L, M = data.query_tokens.size, data.active_tokens.size, data.vocab_size
    R = M if layout == "full" else np.asarray(data.output_multiplicity).size
    expected = {"t": (n,), "z_base": (q, M)}
    if "z_active" in arrays:
        expected["z_active"] = (n, q, L)
    else:
        for name in ("z_by_logit", "logit_query", "logit_token"):
            if name not in arrays:
                raise ValidationError("path", f"{where}: array {name!r} is missing (and no "
                                      "'z_active')")
        P = arrays["logit_query"].shape[0] if arrays["logit_query"].ndim == 1 else -1
        expected.update({"z_by_logit": (P, n), "logit_query": (P,), "logit_token": (P,)})
    if "decoder_lumped" in arrays:
        expected["decoder_lumped"] = (n, R, L)
    if "decoder_base" in arrays:
        expected["decoder_base"] = (M, M)
    for name, value in arrays.items():
        if name.startswith("series__"):
            if value.ndim == 0 or value.shape[0] != n:
                raise ValidationError("path", f"{where}: array {name!r} has shape "
                                      f"{value.shape}; expected {n} times on its first axis")
        elif name not in expected:
            raise ValidationError("path", f"{where}: unexpected array {name!r}; not an "
                                  "odeflow trajectory")
    for name, shape in expected.items():
        if name not in ("logit_query", "logit_token") and arrays[name].dtype != np.float64:
            raise ValidationError("path", f"{where}: array {name!r} has type "
                                  f"{arrays[name].dtype}; odeflow writes float64")
        if arrays[name].shape != shape:
            raise ValidationError("path", f"{where}: array {name!r} has shape "
                                  f"{arrays[name].shape}, inconsistent with the stored data "
                                  f"model (expected {shape})")
    if n < 1 or np.any(np.diff(t) <= 0):
        raise ValidationError("path", f"{where}: the times 't' are empty, repeated or not "
                              "increasing")
    if "logit_query" in expected:
        rows, tokens = arrays["logit_query"], arrays["logit_token"]
        if rows.dtype.kind not in "iu" or tokens.dtype.kind not in "iu" \
                or np.any((rows < 0) | (rows >= q)) \
                or not np.all(np.isin(tokens, data.active_tokens)):
            raise ValidationError("path", f"{where}: 'logit_query'/'logit_token' do not index "
                                  "query tokens and active tokens of the stored data model")


#: Arrays every odeflow trajectory file holds (besides ``metadata``).
REQUIRED_ARRAYS = {"odeflow-trajectory": ("t", "z_base")}


def read_result_file(path, file_format: str) -> tuple[dict, dict]:
    """Arrays and metadata of an odeflow result file, checked to be intact.

    Parameters
    ----------
    path : str or os.PathLike
    file_format : str
        The expected ``"<kind>/<version>"`` tag, e.g. ``"odeflow-trajectory/1"``.

    Returns
    -------
    (arrays, metadata) : (dict of str -> ndarray, dict)
        Every array numeric and finite; ``metadata`` a dict with ``format``,
        ``data``, ``stats`` and ``meta``.

    Raises
    ------
    ValidationError
        Naming ``path``, for a file that is not such a result (no raw decoder
        exception ever escapes; nothing is unpickled).
    """
    where = f"{str(path)!r}"
    readable_file(path, "path")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except (OSError, TypeError, ValueError) as exc:
        raise ValidationError("path", f"cannot read {where}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    if magic != b"PK\x03\x04":
        raise ValidationError("path", f"{where} is not an odeflow result file (not an .npz "
                              "archive)")
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except MemoryError:
        raise ValidationError("path", f"{where}: an array is too large to load; the file is "
                              "damaged or not an odeflow result") from None
    except Exception as exc:  # zip, zlib, npy-header and EOF errors of a damaged file
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        if "pickle" in reason.lower():  # numpy's refusal of an object array
            reason = "it holds an object array, which odeflow never writes and never loads"
        raise ValidationError("path", f"{where} is damaged or not an odeflow result file "
                              f"({reason})") from None
    for name, value in arrays.items():  # numpy hands back a member not named .npy as bytes
        if not isinstance(value, np.ndarray):
            raise ValidationError("path", f"{where}: member {name!r} is not an .npy array; "
                                  "not an odeflow result file")
    if "metadata" not in arrays:
        raise ValidationError("path", f"{where} is not an odeflow result file (no metadata)")
    record = arrays.pop("metadata")
    try:
        if record.dtype.kind != "U" or record.shape != ():
            raise ValueError("not a text record")
        metadata = json.loads(str(record))
    except (ValueError, RecursionError) as exc:
        raise ValidationError("path", f"{where}: the metadata record is damaged "
                              f"({str(exc)[:200]})") from None
    if not isinstance(metadata, dict):
        raise ValidationError("path", f"{where}: the metadata record is damaged (not an object)")
    found = metadata.get("format")
    kind, _, _ = file_format.partition("/")
    if not isinstance(found, str) or found.partition("/")[0] != kind:
        raise ValidationError("path", f"{where} is not an {kind} file (format {found!r:.80})")
    if found != file_format:
        raise ValidationError("path", f"{where} has format version {found!r:.80}; this odeflow "
                              f"reads {file_format!r}")
    for key, kind_of in (("data", dict), ("stats", dict), ("meta", dict)):
        if key == "data" and kind == "odeflow-snap" and metadata.get(key, 0) is None:
            continue  # a snap result solved from parameters, without a data model
        if not isinstance(metadata.get(key), kind_of):
            raise ValidationError("path", f"{where}: the metadata record is damaged ({key!r} "
                                  "is missing or not an object)")
    for name in REQUIRED_ARRAYS.get(kind, ()):
        if name not in arrays:
            raise ValidationError("path", f"{where}: array {name!r} is missing")
    for name, value in arrays.items():
        if value.dtype.kind not in "fiu" or value.dtype.kind == "b":
            raise ValidationError("path", f"{where}: array {name!r} has type {value.dtype}; "
                                  "expected numbers")
        if not np.all(np.isfinite(value)):
            raise ValidationError("path", f"{where}: array {name!r} holds non-finite values")
    return arrays, metadata
