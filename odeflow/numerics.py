"""Log-space helpers shared by the vector fields and the trajectory accessors.

Attention logits reach hundreds in long runs, so every normalisation here is
done in log space: the attention's normalisation (Eqns 5-6 of Scan and Snap) and
the decoder's softmax (Eqn 2) divide by log-sum-exps, never by sums of
``exp``.
"""

from __future__ import annotations

import numpy as np


def logsumexp(a: np.ndarray, axis: int = -1, log_weights: np.ndarray | None = None) -> np.ndarray:
    """Stable ``log(sum(w * exp(a)))`` along ``axis``; ``-inf`` entries contribute zero.

    Equal, to rounding, to :func:`scipy.special.logsumexp` of ``a + log_weights``
    (the weights given by their logarithms); computed here with plain numpy because
    scipy's function costs several times more per call on small arrays, and
    the training loop calls this on every step.

    Parameters
    ----------
    a : ndarray
        Log-values; may contain ``-inf`` (a slice of only ``-inf`` gives ``-inf``).
    axis : int
        Axis to reduce.
    log_weights : ndarray, optional
        Log multiplicities broadcast against ``a`` (used for the lumped output
        row that stands for ``M - K`` identical outputs).
    """
    if log_weights is not None:
        a = a + log_weights
    peak = np.max(a, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    total = np.sum(np.exp(a - peak), axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):  # log(0) = -inf for a slice of only -inf
        return np.squeeze(np.log(total) + peak, axis=axis)


def normalised_features(log_probs: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Attention output ``f_n`` and l2-normalised feature ``f^_n`` (Eqns 5-6).

    ``c~_n = c_n * exp(z_m)``; ``f_n = c~_n / 1^T c~_n``; ``f^_n = c~_n / ||c~_n||_2``.

    Parameters
    ----------
    log_probs : ndarray, shape (..., L)
        ``log c_{l|n}`` over the active tokens, ``-inf`` outside the support.
    logits : ndarray, shape (..., L)
        ``z_{m, l}`` of the class's query token over the same tokens.

    Returns
    -------
    attention, features : ndarray, shape (..., L)
    """
    a = log_probs + logits
    log_l1 = logsumexp(a, axis=-1)
    log_l2 = 0.5 * logsumexp(2.0 * a, axis=-1)
    return np.exp(a - log_l1[..., None]), np.exp(a - log_l2[..., None])


def feature_vectors(log_probs: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """The l2-normalised features ``f^_n = c~_n / ||c~_n||_2`` only (Eqn 6)."""
    a = log_probs + logits
    return np.exp(a - 0.5 * logsumexp(2.0 * a, axis=-1)[..., None])


def lumped_objective(decoder: np.ndarray, features: np.ndarray, weights: np.ndarray,
                     log_multiplicity: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``J = sum_n pi_n [e_n^T Y f^_n - log 1^T exp(Y f^_n)]`` (Eqn 2) on a lumped decoder.

    Parameters
    ----------
    decoder : ndarray, shape (..., R, L)
        Lumped ``Y``: rows of the ``K`` next tokens in class order, then (when
        ``R = K + 1``) the row shared by the ``M - K`` other outputs.
    features : ndarray, shape (..., K, L)
        ``f^_n`` over the active tokens.
    weights : ndarray, shape (K,)
        ``pi_n``.
    log_multiplicity : ndarray, shape (R,)
        Log of how many outputs each lumped row stands for.
    rows : ndarray of int, shape (K,), optional
        Decoder row of each feature's next token; ``0 .. K-1`` by default. A
        table of sub-classes (Level T's sampled sequences, docs/fidelity.md) has
        several features per next token.
    """
    U = features @ np.swapaxes(decoder, -1, -2)  # (..., K, R)
    lse = logsumexp(U, axis=-1, log_weights=log_multiplicity)
    K = features.shape[-2]
    own = U[..., np.arange(K), np.arange(K) if rows is None else rows]
    return np.sum(weights * (own - lse), axis=-1)


def log_magnitude(x) -> np.ndarray:
    """``ln|x|`` (``-inf`` where ``x = 0``, without a warning): the induction-head
    selector's coordinates."""
    with np.errstate(divide="ignore"):
        return np.log(np.abs(np.asarray(x, dtype=float)))


def log_magnitude_mismatches(log_abs, x, rtol: float = 1e-9) -> np.ndarray:
    """Flat indices where ``e^log_abs`` is not ``|x|`` to ``rtol`` (where ``e^log_abs``
    underflows, ``x`` must be 0): the entries in which ``log_abs`` is not ``ln|x|`` of
    the same numbers."""
    with np.errstate(under="ignore"):
        magnitude = np.exp(np.asarray(log_abs, dtype=float))
    return np.flatnonzero(~np.isclose(magnitude, np.abs(x), rtol=rtol, atol=0.0))
