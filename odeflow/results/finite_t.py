"""The trajectory of Level T, the finite-sequence-length flow (``docs/fidelity.md``).

Level T's state is the same as Level E's (lumped decoder, logits of the query
tokens in use over the active tokens), so every :class:`Trajectory` accessor
applies; the ones that depend on the sequences read the seeded sample:

- :meth:`FiniteTTrajectory.attention` and :meth:`~FiniteTTrajectory.features`:
  the mean over the class's sampled sequences of ``f(x)`` and ``f^(x)``;
- :attr:`FiniteTTrajectory.objective`: the sample-average objective ``J_T``;
- :meth:`FiniteTTrajectory.population_attention`: the attention ``c_n`` that
  the paper measures (Fig. 6), a function of the logits alone.

The sample is regenerated from ``meta`` (``seq_len``, ``sample_size``,
``seed``), so a saved trajectory read back with :meth:`FiniteTTrajectory.load`
has the same accessors.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from odeflow.data import CountSample, sample_counts
from odeflow.errors import ValidationError
from odeflow.numerics import logsumexp, lumped_objective, normalised_features
from odeflow.results.trajectory import Trajectory


def population_attention(data, z_active: np.ndarray, next_token: int) -> np.ndarray:
    """``c_n(l) ~ c_{l|n} exp(z_{m,l})`` over ``l in G_DT(n)``, normalised there (Fig. 6).

    Parameters
    ----------
    data : DataModel
    z_active : ndarray, shape (..., q, L)
        Logits of the query tokens in use over the active tokens.
    next_token : int

    Returns
    -------
    ndarray, shape (..., D)
        One column per distinct token of ``n`` (``data.distinct_tokens(n)``).

    Raises
    ------
    ValidationError
        If the class has no distinct token.
    """
    i = data.class_index(next_token)
    tokens = data.distinct_tokens(next_token)
    if tokens.size == 0:
        raise ValidationError("next_token", f"class {next_token} has no distinct token")
    cols = np.searchsorted(data.active_tokens, tokens)
    a = data.active_log_probs[i, cols] + z_active[..., data.class_query_index[i], :][..., cols]
    return np.exp(a - logsumexp(a, axis=-1)[..., None])


class FiniteTTrajectory(Trajectory):
    """A :class:`Trajectory` of ``flow="finite_t"`` (Level T, ``docs/fidelity.md``).

    Same parameters as :class:`Trajectory`; ``meta`` must hold ``seq_len``,
    ``sample_size`` (files written before it: ``samples_per_class``) and ``seed``,
    from which :attr:`sample` is redrawn.
    """

    FLOWS = ("finite_t",)

    @cached_property
    def sample(self) -> CountSample:
        """The seeded sample of sequences the flow was solved on."""
        meta = dict(self.meta)
        meta.setdefault("sample_size", meta.get("samples_per_class"))
        if meta["sample_size"] is None:
            del meta["sample_size"]
        try:
            T, N, seed = (meta[k] for k in ("seq_len", "sample_size", "seed"))
        except KeyError as exc:
            raise ValidationError("meta", f"a Level T trajectory needs {exc.args[0]!r}") from None
        return sample_counts(self.data, T, N, seed)

    def _sample_features(self, next_token: int) -> tuple[np.ndarray, np.ndarray]:
        """``f(x)`` and ``f^(x)`` of the class's sequences, shape (n, N, L) each."""
        data = self.data
        i = data.class_index(next_token)
        N = self.sample.sample_size
        log_c = self.sample.active_log_probs()[i * N:(i + 1) * N]
        z = self.z_active[:, data.class_query_index[i], :]
        return normalised_features(log_c, z[:, None, :])

    def attention(self, next_token: int) -> np.ndarray:
        """Mean over the class's sequences of ``f(x)`` (finite-``T`` Eqn 5), shape (n, M)."""
        f, _ = self._sample_features(next_token)
        return self._dense(f.mean(axis=1))

    def features(self, next_token: int) -> np.ndarray:
        """Mean over the class's sequences of ``f^(x) = f(x)/||f(x)||_2``, shape (n, M)."""
        _, fh = self._sample_features(next_token)
        return self._dense(fh.mean(axis=1))

    def population_attention(self, next_token: int) -> np.ndarray:
        """The attention ``c_n`` the paper measures (Fig. 6) over all ``M`` tokens, shape (n, M).

        ``c_n(l) ~ c_{l|n} exp(z_{m,l})`` on the distinct tokens of ``n``,
        normalised over them, zero elsewhere: the paper's Fig. 6 measure.
        """
        c = population_attention(self.data, self.z_active, next_token)
        out = np.zeros((self.t.size, self.data.vocab_size))
        out[:, self.data.distinct_tokens(next_token)] = c
        return out

    @property
    def objective(self) -> np.ndarray:
        """The sample-average finite-``T`` objective ``J_T(t)``, shape (n,)."""
        Yl = self._require_decoder()
        data, sample = self.data, self.sample
        cls, log_c = sample.class_index, sample.active_log_probs()
        qidx, weights = data.class_query_index[cls], sample.weights
        # lumped or full decoder (a random start keeps all M rows): its own rows and weights
        log_mult = np.log(self.decoder_multiplicity)
        rows = self.decoder_target_rows[cls]
        out = np.empty(self.t.size)
        for j in range(self.t.size):  # one time at a time: (K N, L) features, not (n, K N, L)
            _, F = normalised_features(log_c, self.z_active[j][qidx])
            out[j] = lumped_objective(Yl[j], F, weights, log_mult, rows=rows)
        return out
