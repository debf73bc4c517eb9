"""n-gram Markov chains of the induction-head family (``docs/induction.md``; pure numpy).

Conventions, fixed for the family:

- tokens ``0..d-1``; an ``n``-gram chain: each token's parents are the tokens
  at offsets ``1..n-1`` before it;
- a kernel array has shape ``(N_pi, d**(n-1), d)``; row ``r`` of kernel ``k`` is
  ``pi_k(. | x_{i-1}, ..., x_{i-n+1})`` with the *context index*
  ``r = sum_{m=1}^{n-1} x_{i-m} d**(n-1-m)`` (the offset-1 parent is the most
  significant digit; for ``n = 3``: ``r = x_{i-1} d + x_{i-2}``);
- a *window* of length ``W`` before a position ``l`` is the tuple
  ``z = (z_1, ..., z_W)`` with ``z_m = x_{l-m}`` (offset ``m``), indexed the same
  way, ``index(z) = sum_m z_m d**(W-m)``. The population flow uses
  ``W = 2H-1`` (every offset a copier head reads), the exact-copier reduction
  ``W = H``.

All laws are under stationarity of the chain on its ``(n-1)``-token contexts.
Every function is vectorised over the leading kernel axis ``N_pi``.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError


def sample_dirichlet_kernels(vocab_size: int, n_gram: int, alpha: float, count: int,
                             seed: int) -> np.ndarray:
    """A seeded sample of ``count`` transition kernels with Dirichlet rows.

    Each row ``pi(. | ctx) ~ Dirichlet(alpha 1_d)`` independently (``docs/induction.md``,
    "Data").

    Random stream: ``numpy.random.default_rng(seed).dirichlet(alpha * ones(d),
    size=(count, d**(n-1)))``: kernels in order, rows in context-index order
    within a kernel; nothing else is drawn from the generator. Growing
    ``count`` keeps the first kernels unchanged.

    Returns
    -------
    ndarray, shape (count, d**(n-1), d)
    """
    rng = np.random.default_rng(seed)
    d = int(vocab_size)
    return rng.dirichlet(np.full(d, float(alpha)), size=(int(count), d ** (int(n_gram) - 1)))


def context_transition_matrix(kernels: np.ndarray) -> np.ndarray:
    """The chain on ``(n-1)``-token contexts: ``T[k, r, r']`` for each kernel ``k``.

    From context ``r = (x_{i-1}, ..., x_{i-n+1})`` the next token ``e`` is drawn
    from ``pi(e | r)`` and the context becomes ``r' = (e, x_{i-1}, ..., x_{i-n+2})``,
    i.e. ``r' = e d**(n-2) + floor(r / d)``.

    Returns
    -------
    ndarray, shape (N_pi, C, C) with ``C = d**(n-1)``; rows sum to 1.
    """
    N, C, d = kernels.shape
    T = np.zeros((N, C, C))
    r = np.arange(C)
    for e in range(d):
        T[:, r, e * (C // d) + r // d] += kernels[:, :, e]
    return T


def stationary_context_law(kernels: np.ndarray) -> np.ndarray:
    """Stationary law ``nu_k(r)`` of the context chain of each kernel.

    Solves ``nu T = nu``, ``sum nu = 1`` (one equation of the singular system
    replaced by the normalisation).

    Raises
    ------
    ValidationError
        (field ``kernel``) when a kernel's chain has no unique stationary law
        (it is reducible, e.g. a kernel with zero entries that splits the
        contexts into closed classes).

    Returns
    -------
    ndarray, shape (N_pi, d**(n-1))
    """
    T = context_transition_matrix(kernels)
    N, C, _ = T.shape
    A = np.transpose(T, (0, 2, 1)) - np.eye(C)
    A[:, -1, :] = 1.0
    b = np.zeros((N, C))
    b[:, -1] = 1.0
    for k in range(N):
        if np.linalg.matrix_rank(A[k]) < C:
            raise ValidationError("kernel", f"kernel {k}: the chain on contexts has no unique "
                                  "stationary law (reducible chain)")
    nu = np.linalg.solve(A, b[..., None])[..., 0]
    if np.any(nu < -1e-12):
        raise ValidationError("kernel", "a stationary law came out negative (reducible or "
                              "ill-conditioned chain)")
    nu = np.clip(nu, 0.0, None)
    return nu / nu.sum(axis=1, keepdims=True)


def window_joint_law(kernels: np.ndarray, window: int) -> np.ndarray:
    """Stationary joint law of a window ``z`` of ``W`` tokens and the next token ``e``.

    ``mu(z, e) = P(x_{l-1} = z_1, ..., x_{l-W} = z_W, x_l = e)`` under the
    stationary law, for each kernel: the stationary context law extended token
    by token with the kernel, ``P(x_1..x_m) = nu(x_1..x_{n-1}) prod_{i>=n}
    pi(x_i | x_{i-1}..x_{i-n+1})`` (chronological order), marginalised to the
    last ``W + 1`` tokens and re-ordered by offset.

    Returns
    -------
    ndarray, shape (N_pi, d**W, d); sums to 1 over the last two axes.
    """
    N, C, d = kernels.shape
    ctx_len = _digits(C, d)
    nu = stationary_context_law(kernels)
    # chronological axes: oldest first. Context index has the newest (offset 1) as the
    # most significant digit, so reverse the digits to make the oldest come first.
    joint = nu.reshape((N,) + (d,) * ctx_len)
    joint = np.transpose(joint, (0,) + tuple(range(ctx_len, 0, -1)))
    # kernel with chronological parent axes (oldest first) and the new token last
    kern = kernels.reshape((N,) + (d,) * ctx_len + (d,))
    kern = np.transpose(kern, (0,) + tuple(range(ctx_len, 0, -1)) + (ctx_len + 1,))
    need = window + 1
    length = ctx_len
    while length < need:
        # joint over (x_1..x_length); append x_{length+1} ~ pi(. | last ctx_len tokens)
        j = joint.reshape((N,) + (d,) * length + (1,))
        k = kern.reshape((N,) + (1,) * (length - ctx_len) + (d,) * ctx_len + (d,))
        joint = j * k
        length += 1
    if length > need:  # marginalise the oldest tokens
        joint = joint.reshape((N, d ** (length - need), d ** need)).sum(axis=1)
        joint = joint.reshape((N,) + (d,) * need)
    # axes now (x_{l-W}, ..., x_{l-1}, x_l): reverse the window axes to offset order
    joint = np.transpose(joint, (0,) + tuple(range(window, 0, -1)) + (window + 1,))
    return np.ascontiguousarray(joint.reshape(N, d ** window, d))


def _digits(size: int, d: int) -> int:
    """The ``m`` with ``d**m == size`` (number of tokens an index of ``size`` values encodes)."""
    m = 0
    while d ** m < size:
        m += 1
    if d ** m != size:
        raise ValidationError("kernel", f"{size} rows is not a power of the vocabulary size {d}")
    return m


def window_law(joint: np.ndarray) -> np.ndarray:
    """``mu(z) = sum_e mu(z, e)``, shape (N_pi, d**W)."""
    return joint.sum(axis=2)


def next_token_conditional(joint: np.ndarray) -> np.ndarray:
    """``pi(e | z) = mu(z, e) / mu(z)`` (uniform ``1/d`` on windows of probability 0).

    Shape (N_pi, d**W, d).
    """
    m = joint.sum(axis=2, keepdims=True)
    d = joint.shape[2]
    out = np.full(joint.shape, 1.0 / d)
    np.divide(joint, m, out=out, where=m > 0)
    return out


def window_tokens(vocab_size: int, window: int) -> np.ndarray:
    """Tokens of every window: ``Z[index, m-1] = z_m`` (offset ``m``), shape (d**W, W)."""
    d = int(vocab_size)
    idx = np.arange(d ** window)
    powers = d ** np.arange(window - 1, -1, -1)
    return (idx[:, None] // powers[None, :]) % d


def subset_joint_law(joint: np.ndarray, offsets) -> np.ndarray:
    """Joint law ``mu(z_S, e)`` of the tokens at ``offsets`` S and the next token.

    ``z_S = (z_m for m in offsets)`` in the order given, indexed
    ``sum_i z_{S_i} d**(|S|-1-i)``; the empty subset gives the next-token law
    ``mu(e)`` with one row.

    Returns
    -------
    ndarray, shape (N_pi, d**|S|, d)
    """
    N, Z, d = joint.shape
    W = _digits(Z, d)
    offsets = tuple(int(m) for m in offsets)
    for m in offsets:
        if not 1 <= m <= W:
            raise ValidationError("offsets", f"offset {m} outside the window 1..{W}")
    tokens = window_tokens(d, W)
    sub_index = np.zeros(Z, dtype=int)
    for m in offsets:
        sub_index = sub_index * d + tokens[:, m - 1]
    member = np.zeros((Z, d ** len(offsets)))      # member[z, s] = 1[z_S = s]
    member[np.arange(Z), sub_index] = 1.0
    return np.einsum("nze,zs->nse", joint, member)


def subset_marginal(joint: np.ndarray, offsets) -> np.ndarray:
    """``mu(z_S)``: law of the parents at ``offsets``, shape (N_pi, d**|S|)."""
    return subset_joint_law(joint, offsets).sum(axis=2)


def subset_conditional(joint: np.ndarray, offsets) -> np.ndarray:
    """``pi_S(e | z_S) = mu(z_S, e) / mu(z_S)`` (uniform on parent values of probability 0).

    Shape (N_pi, d**|S|, d).
    """
    return next_token_conditional(subset_joint_law(joint, offsets))


def next_token_law(joint: np.ndarray) -> np.ndarray:
    """``mu(e)``: stationary law of a single token, shape (N_pi, d)."""
    return joint.sum(axis=1)
