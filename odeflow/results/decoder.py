"""The decoder series of a Scan and Snap trajectory, lumped or full: :class:`DecoderSeries`.

A flow that moves the decoder ``Y`` (Level E, Level T, SGD and training runs)
or implies one (Level R, Lemma 3) records it over the active tokens only, in
one of two layouts:

- ``"lumped"``: one row per next token ``n`` (class order), then, when
  ``M > K``, one row shared by the ``M - K`` outputs that are no class's next
  token (they move together, :class:`odeflow.fields.exact.ExactFlow`);
- ``"full"``: all ``M`` output rows in token order (a random start, whose rows
  differ).

:class:`DecoderSeries` un-lumps these rows on access (``Y(t_i)`` as an
``(M, M)`` matrix) and evaluates the objective ``J(t)`` of Eqn 2 on them.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError
from odeflow.numerics import lumped_objective

#: Default largest full decoder array (bytes) :meth:`DecoderSeries.full_decoder` builds.
DECODER_BYTES_LIMIT = 256 * 2**20
#: The decoder layouts a trajectory stores.
DECODER_LAYOUTS = ("lumped", "full")


def check_layout(layout: str) -> str:
    """``layout`` if it is one of :data:`DECODER_LAYOUTS`; else ValidationError."""
    if layout not in DECODER_LAYOUTS:
        raise ValidationError("decoder_layout", f"must be 'lumped' or 'full', got {layout!r}")
    return layout


class DecoderSeries:
    """Accessors of a trajectory's decoder rows (mixed into :class:`~odeflow.results.Trajectory`).

    Reads the host's ``data`` (:class:`~odeflow.data.DataModel`), ``t``,
    ``decoder_lumped`` (ndarray ``(n, R, L)`` over ``data.active_tokens``, or
    None for a flow that records no decoder), ``decoder_layout``
    (``"lumped"`` or ``"full"``) and ``decoder_base`` (``Y(0)``, ``(M, M)``, whose
    columns of inactive tokens the decoder keeps for ever; None for zero).
    """

    @property
    def decoder_multiplicity(self) -> np.ndarray:
        """How many outputs each row of ``decoder_lumped`` stands for, shape (R,)."""
        if self.decoder_layout == "full":
            return np.ones(self.data.vocab_size)
        return np.asarray(self.data.output_multiplicity)

    @property
    def decoder_target_rows(self) -> np.ndarray:
        """Row of ``decoder_lumped`` holding each class's next token, shape (K,)."""
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
        :meth:`decoder_at` (one time) or ``decoder_lumped`` (the stored rows
        over the active tokens).
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
        """``J(t)`` of Eqn 2 (maximised), shape ``(n,)``, from the stored rows and features."""
        Yl = self._require_decoder()
        _, F = self._active_features()
        return lumped_objective(Yl, F, np.asarray(self.data.weights),
                                np.log(self.decoder_multiplicity),
                                rows=self.decoder_target_rows)
