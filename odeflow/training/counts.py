"""The finite-``T`` batch loss through token counts (``docs/validation.md``, ``docs/fidelity.md``).

A sequence enters the 1-layer model only through the counts ``k_l`` of its
``T - 1`` contextual tokens: with ``b_t = softmax_t(z_{x_T, x_t})``,

.. math::

    f_l = \\sum_t b_t [x_t = l] = \\frac{k_l e^{z_{m,l}}}{\\sum_{l'} k_{l'} e^{z_{m,l'}}},

so a batch can be drawn as multinomial counts, ``k ~ Multinomial(T - 1, c_{.|n})``
(the distribution of the counts of ``T - 1`` i.i.d. tokens), at a cost
``O(B L)`` instead of ``O(B T)``, and the loss and its gradient are those of
:func:`odeflow.training.batch_loss` on any token sequence with these counts
(tests check both). Arrays carry a leading run axis ``S`` (the seeds).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from odeflow.training.batch import Batch, LumpedLayout, feature_loss_and_gradient


class CountBatch(NamedTuple):
    """A batch as token counts.

    Attributes
    ----------
    classes : ndarray of int, shape (S, B)
        Class index of each sequence.
    counts : ndarray of int, shape (S, B, L)
        Counts of each active token among the ``T - 1`` contextual tokens.
    """

    classes: np.ndarray
    counts: np.ndarray


def sample_counts(layout: LumpedLayout, rngs, batch_size: int, seq_len: int) -> CountBatch:
    """One batch per generator in ``rngs``: classes by ``pi``, then multinomial counts."""
    probs = layout.data.active_probs
    classes, counts = [], []
    for rng in rngs:
        c = np.searchsorted(layout.class_cdf, rng.random(batch_size), side="right")
        c = np.minimum(c, layout.K - 1)
        classes.append(c)
        counts.append(rng.multinomial(seq_len - 1, probs[c]))
    return CountBatch(np.stack(classes), np.stack(counts))


def counts_of(batch: Batch, num_tokens: int) -> CountBatch:
    """The counts of a token :class:`~odeflow.training.Batch` with shape (S, B, T - 1)."""
    tokens = np.asarray(batch.tokens)
    S, B, _ = tokens.shape
    cells = (np.arange(S * B).reshape(S, B, 1) * num_tokens + tokens).ravel()
    counts = np.bincount(cells, minlength=S * B * num_tokens).reshape(S, B, num_tokens)
    return CountBatch(np.asarray(batch.classes), counts)


def counts_loss_and_gradient(layout: LumpedLayout, Y: np.ndarray, Z: np.ndarray,
                             batch: CountBatch, gradient: bool = True):
    """Mean cross-entropy of a count batch and its gradients, for ``S`` runs at once.

    Parameters
    ----------
    layout : LumpedLayout
        Lumped rows, or :class:`odeflow.training.protocol.UnlumpedLayout`.
    Y : ndarray, shape (S, R, L)
    Z : ndarray, shape (S, q, L)
    batch : CountBatch

    Returns
    -------
    loss : ndarray, shape (S,)
    grad_Y : ndarray, shape (S, R, L), or None
        Per-row gradient (a lumped shared row: the gradient of each tied row).
    grad_Z : ndarray, shape (S, q, L), or None

    Notes
    -----
    Per sequence, ``-(e_n - alpha) f^^T`` for ``Y`` and ``-diag(f^) P g`` with
    ``g = Y^T (e_n - alpha)``, ``P = I - f^ f^^T`` for ``z_m`` (Lemma 1 with the
    finite-``T`` feature), averaged over the batch.
    """
    classes, counts = batch
    qi = layout.class_query[classes]                                    # (S, B)
    z = np.take_along_axis(Z, qi[..., None], axis=1)                    # (S, B, L)
    # c~ = k exp(z - max over the tokens present): no overflow, and the token at the
    # maximum keeps c~ >= 1, so the norm never underflows
    z = np.where(counts > 0, z, -np.inf)
    c = counts * np.exp(z - np.max(z, axis=-1, keepdims=True))
    fhat = c / np.sqrt(np.sum(c * c, axis=-1, keepdims=True))
    return feature_loss_and_gradient(layout, Y, fhat, classes, qi, gradient)
