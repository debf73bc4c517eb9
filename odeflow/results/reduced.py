"""The series Level R records beside the logits: :class:`ReducedSeries`.

Level R, the reduced flow (``docs/levels.md``), integrates the decoder's logit
margin ``h`` (Eqn 44), ``B_n`` (Eqn 98) and ``Gamma = int gamma ds`` (Eqn 128)
as states; a trajectory of it stores them as the named series
:data:`REDUCED_SERIES`, with time as the first axis and one column per class.
:class:`ReducedSeries` reads them (and ``gamma``, Eqn 9, derived from ``h``);
:class:`~odeflow.results.trajectory.ReducedTrajectory` is the kind of result
that carries them.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError

#: Series a Level R trajectory records, each of shape (n, K).
REDUCED_SERIES = ("margin", "B", "gamma_integral")


class ReducedSeries:
    """Accessors of Level R's recorded series, over the host's ``series`` dict.

    Reads the host's ``series`` (name -> ndarray with time first), ``data``
    (:class:`~odeflow.data.DataModel`) and ``flow``. A series the flow did not
    record raises a ValidationError naming it.
    """

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
