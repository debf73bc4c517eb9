"""Seeded samples of n-gram Markov sequences for the finite-``L`` model (``docs/induction.md``).

The authors' protocol (``RPE/train_simplified.py`` of gszfwsb/Unveiling-Induction-Heads,
read, not copied) trains on 9000 sequences of length ``L = 100``: per sequence a fresh
kernel ``pi`` (every context row ``~ Dirichlet(alpha 1_d)``) or one fixed kernel
(point-mass prior); the first ``n - 1`` tokens uniform, then the chain; inputs ``x_1 ..
x_L`` and target ``x_{L+1}``. Context row ``r = sum_k x_{i-k} d^(n-1-k)`` (the offset-1
parent most significant), as in the family's data layer. Used by the finite-``L`` level
(:mod:`odeflow.fields.induction.finite_length`) and by real training
(:mod:`odeflow.training.induction`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import check_count, check_seed, validate_positive
from odeflow.data.induction import InductionData, check_kernel
from odeflow.errors import RenamedWarning, ValidationError, renamed_keywords

#: The authors' protocol: sequence length and training sequences.
PAPER_LENGTH = 100
PAPER_SEQUENCES = 9000
#: Most numbers a sample may hold, tokens ``N * (L + 1)`` or Dirichlet kernel
#: entries ``N * d**n`` (8 bytes each: 400 MB), so that a typo fails by name
#: instead of exhausting memory.
MAX_SAMPLE_ENTRIES = 50_000_000


# --------------------------------------------------------------------------- data

@dataclass(frozen=True)
class InductionSequences:
    """A seeded sample of sequences of an n-gram chain.

    Attributes
    ----------
    tokens : ndarray of int, shape (N, L + 1)
        ``x_1 .. x_{L+1}`` of each sequence; ``tokens[:, :L]`` are the inputs and
        ``tokens[:, L]`` the target.
    vocab_size, n_gram : int
        ``d`` and ``n``.
    seed : int or None
        The seed of :func:`sample_sequences`.
    prior : str
        ``"dirichlet(alpha)"`` or ``"point"``.
    """

    tokens: np.ndarray
    vocab_size: int
    n_gram: int
    seed: int | None = None
    prior: str = ""

    @property
    def sample_size(self) -> int:
        """Number of sequences ``N``."""
        return int(self.tokens.shape[0])

    @property
    def seq_len(self) -> int:
        """Sequence length ``L`` (inputs; the target is one more token)."""
        return int(self.tokens.shape[1] - 1)

    @property
    def count(self) -> int:
        """Old name of :attr:`sample_size` (warns :class:`~odeflow.errors.RenamedWarning`)."""
        warnings.warn(RenamedWarning("'count' is now 'sample_size'"), stacklevel=2)
        return self.sample_size

    @property
    def length(self) -> int:
        """Old name of :attr:`seq_len` (warns :class:`~odeflow.errors.RenamedWarning`)."""
        warnings.warn(RenamedWarning("'length' is now 'seq_len'"), stacklevel=2)
        return self.seq_len


#: Old keyword names of the samplers (``docs/api.md``, "One name per concept").
RENAMED = {"count": "sample_size", "length": "seq_len"}


@renamed_keywords(RENAMED)
def sample_sequences(sample_size: int, seq_len: int, *, vocab_size: int, n_gram: int,
                     alpha: float | None = None, kernel=None, seed: int = 0,
                     size_field: str = "sample_size") -> InductionSequences:
    """Sample ``sample_size`` sequences ``x_1 .. x_{L+1}`` of an ``n``-gram chain.

    Exactly one of ``alpha`` (a fresh kernel per sequence, every context row
    ``~ Dirichlet(alpha 1_d)``) and ``kernel`` (one fixed kernel, shape
    ``(d^(n-1), d)``, rows summing to 1: the point-mass prior) is given. The
    first ``n - 1`` tokens are uniform, then ``x_i ~ pi(. | x_{i-n+1} .. x_{i-1})``
    with context row ``r = sum_{k=1}^{n-1} x_{i-k} d^(n-1-k)``.

    Parameters
    ----------
    sample_size : int
        Number of sequences ``N`` (the authors: 9000 for training).
    seq_len : int
        ``L``: inputs ``x_1 .. x_L``; ``x_{L+1}`` is the target.
    vocab_size, n_gram : int
        ``d >= 2`` and ``n >= 2``.
    alpha : float, optional
        Dirichlet concentration (> 0).
    kernel : array_like, optional
        The point-mass prior's kernel.
    seed : int
        Seed of :func:`numpy.random.default_rng`; the sample is a function of it.
    size_field : str
        The name ``sample_size`` has in the caller's errors.

    Returns
    -------
    InductionSequences
    """
    count = check_count(sample_size, size_field)
    length = check_count(seq_len, "seq_len")
    d = check_count(vocab_size, "vocab_size", minimum=2)
    n = check_count(n_gram, "n_gram", minimum=2)
    seed = check_seed(seed)
    if length + 1 < n:
        raise ValidationError("seq_len", f"must be >= n_gram - 1 = {n - 1}, got {length}")
    rows = d ** (n - 1)
    for what, entries in ((f"tokens {size_field} * (seq_len + 1)", count * (length + 1)),
                          (f"kernel entries {size_field} * d**n",
                           count * rows * d if kernel is None else 0)):
        if entries > MAX_SAMPLE_ENTRIES:
            raise ValidationError(size_field, f"{what} = {entries:,} exceeds "
                                  f"{MAX_SAMPLE_ENTRIES:,} (about 400 MB)")
    if (alpha is None) == (kernel is None):
        raise ValidationError("alpha", "give exactly one of alpha (Dirichlet prior) and "
                              "kernel (point-mass prior)")
    rng = np.random.default_rng(seed)
    if kernel is not None:
        kernel = check_kernel(kernel, d, n, "kernel")
        cumulative = np.broadcast_to(np.cumsum(kernel, axis=1), (1, rows, d))
        prior = "point"
    else:
        alpha = validate_positive(alpha, "alpha")
        kernels = rng.dirichlet(np.full(d, alpha), size=(count, rows))
        cumulative = np.cumsum(kernels, axis=2)
        prior = f"dirichlet({alpha:g})"
    tokens = np.empty((count, length + 1), dtype=np.int64)
    tokens[:, :n - 1] = rng.integers(0, d, size=(count, n - 1))
    which = np.arange(count) if cumulative.shape[0] == count else np.zeros(count, dtype=np.int64)
    for i in range(n - 1, length + 1):
        row = np.zeros(count, dtype=np.int64)
        for k in range(1, n):
            row = row * d + tokens[:, i - k]
        cdf = cumulative[which, row]                         # (N, d)
        u = rng.random(count)[:, None]
        tokens[:, i] = np.minimum((u >= cdf).sum(axis=1), d - 1)
    return InductionSequences(tokens, d, n, seed, prior)


@renamed_keywords(RENAMED)
def sample_for(data, sample_size: int = PAPER_SEQUENCES, seq_len: int = PAPER_LENGTH,
               seed: int = 0, size_field: str = "sample_size") -> InductionSequences:
    """:func:`sample_sequences` under the prior of an :class:`odeflow.InductionData`
    (its fixed kernel for a point-mass prior, else Dirichlet(``alpha``) per sequence;
    ``size_field`` names ``sample_size`` in errors)."""
    if not isinstance(data, InductionData):
        raise ValidationError("data", f"must be an InductionData, got {type(data).__name__}")
    if data.prior == "point":
        return sample_sequences(sample_size, seq_len, vocab_size=data.vocab_size,
                                n_gram=data.n_gram, kernel=data.kernel, seed=seed,
                                size_field=size_field)
    return sample_sequences(sample_size, seq_len, vocab_size=data.vocab_size,
                            n_gram=data.n_gram, alpha=data.alpha, seed=seed,
                            size_field=size_field)
