"""Seeded samples of finite-length sequences as count vectors (Level T, ``docs/fidelity.md``).

A sequence of class ``n`` has ``T - 1`` contextual tokens drawn i.i.d. from
``c_{.|n}`` (the paper's Sec. 3.2). The finite-``T`` model sees a sequence only
through the counts ``k_l`` of its contextual tokens:
``f(x)_l = k_l exp(z_{m,l}) / sum_l' k_l' exp(z_{m,l'})``. So a sequence is a
count vector over its class's support, drawn from a multinomial with ``T - 1``
trials. :func:`sample_counts` draws ``N`` such vectors per class, reproducibly:
class ``k`` uses its own generator, spawned from ``seed`` by
:class:`numpy.random.SeedSequence`, so the first ``N`` samples of a class are
the same whatever ``N``, the other classes and their order of drawing
(a sample of ``2 N`` contains the sample of ``N``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from odeflow.data.checks import check_count
from odeflow.data.model import DataModel
from odeflow.errors import RenamedWarning, ValidationError, renamed_keywords

#: Largest sequence length, sample size or seed taken (the counts are int64).
MAX_COUNT = 2**62 - 1


@dataclass(frozen=True, eq=False)
class CountSample:
    """``N`` sampled sequences per class, as count vectors (Level T).

    Attributes
    ----------
    data : DataModel
    seq_len : int
        ``T``: each sequence has ``T - 1`` contextual tokens.
    sample_size : int
        ``N``, sequences per class (:attr:`samples_per_class` is its old name).
    seed : int
    counts : tuple of ndarray
        ``counts[k]`` has shape ``(N, |support of class k|)``: the contextual
        token counts of the ``N`` sequences of class ``k`` over
        ``data.classes[k].support``; each row sums to ``T - 1``.
    """

    data: DataModel = field(repr=False)
    seq_len: int
    sample_size: int
    seed: int
    counts: tuple = field(repr=False)

    @property
    def samples_per_class(self) -> int:
        """Old name of :attr:`sample_size` (warns :class:`~odeflow.errors.RenamedWarning`)."""
        warnings.warn(RenamedWarning("'samples_per_class' is now 'sample_size'"), stacklevel=2)
        return self.sample_size

    @property
    def size(self) -> int:
        """``K N``, the number of sampled sequences."""
        return self.data.num_classes * self.sample_size

    @property
    def class_index(self) -> np.ndarray:
        """Class (position in ``data.classes``) of each sequence, shape ``(K N,)``; class-major."""
        return np.repeat(np.arange(self.data.num_classes), self.sample_size)

    @property
    def weights(self) -> np.ndarray:
        """Weight ``pi_n / N`` of each sequence, shape ``(K N,)``; they sum to one."""
        return np.asarray(self.data.weights)[self.class_index] / self.sample_size

    def active_counts(self) -> np.ndarray:
        """Counts over ``data.active_tokens``, shape ``(K N, L)`` (zero off the support)."""
        data = self.data
        out = np.zeros((self.size, data.active_tokens.size), dtype=np.int64)
        N = self.sample_size
        for k, cls in enumerate(data.classes):
            cols = np.searchsorted(data.active_tokens, cls.support)
            out[k * N:(k + 1) * N, cols] = self.counts[k]
        return out

    def active_log_probs(self) -> np.ndarray:
        """``log(k_l / (T - 1))`` over the active tokens (``-inf`` where ``k_l = 0``), (K N, L).

        The "probabilities" of each sequence as a sub-class of Level T.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.active_counts()) - np.log(self.seq_len - 1)


@renamed_keywords({"samples_per_class": "sample_size"})
def sample_counts(data: DataModel, seq_len: int, sample_size: int,
                  seed: int = 0) -> CountSample:
    """Draw ``N`` sequences of length ``T`` per class as count vectors (Level T).

    Parameters
    ----------
    data : DataModel
    seq_len : int
        ``T >= 2``; the counts of the ``T - 1`` contextual tokens follow
        ``Multinomial(T - 1, c_{.|n})`` over the class's support.
    sample_size : int
        ``N >= 1`` sequences per class (old name ``samples_per_class``, warns).
    seed : int, default 0
        Non-negative; class ``k`` draws from the ``k``-th child of
        ``numpy.random.SeedSequence(seed)``.

    Returns
    -------
    CountSample
    """
    if not isinstance(data, DataModel):
        raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
    T = check_count(seq_len, "seq_len", 2, maximum=MAX_COUNT)
    N = check_count(sample_size, "sample_size", 1, maximum=MAX_COUNT)
    seed = check_count(seed, "seed", 0, maximum=MAX_COUNT)
    children = np.random.SeedSequence(seed).spawn(data.num_classes)
    counts = []
    for cls, child in zip(data.classes, children, strict=True):
        rng = np.random.default_rng(child)
        drawn = rng.multinomial(T - 1, cls.support_probs, size=N)
        drawn.setflags(write=False)
        counts.append(drawn)
    return CountSample(data, T, N, seed, tuple(counts))
