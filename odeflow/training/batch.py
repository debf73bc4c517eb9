"""The finite-``T`` model on sampled sequences (Sec. 3.1 of the paper; ``docs/validation.md``).

A sequence of class ``n`` (drawn with probability ``pi_n``) has ``T - 1``
contextual tokens drawn i.i.d. from ``c_{.|n}`` and the query token
``x_T = psi(n)`` last. The 1-layer model attends from the query to the
contextual positions and decodes the normalised attention output:

.. math::

    b_t = \\mathrm{softmax}_t(z_{x_T, x_t}), \\quad f = X^\\top b, \\quad
    \\hat f = f / \\|f\\|_2, \\quad
    \\ell = -\\log \\mathrm{softmax}(Y \\hat f)_{x_{T+1}},

and the batch loss is the mean of ``ell`` over the batch. As ``T -> inf``,
``f -> f_n`` of Eqn 5 and the expected batch gradient tends to the population
gradient of Eqn 2 (Lemma 2), whose flow is Level E.

Everything works on the *lumped* state of :class:`odeflow.fields.ExactFlow`:
decoder rows for the ``K`` next tokens plus one row shared by the ``M - K``
other outputs (multiplicity ``M - K`` in the log-sum-exp), and columns for the
active tokens only. This is exact for sampled gradients as well: from
``Y(0) = 0`` the non-next output rows receive identical updates, columns of
tokens that never occur stay zero, and only active tokens are ever sampled.
Tokens in a :class:`Batch` are therefore *indices into* ``data.active_tokens``.

The private functions carry a leading *run* axis ``S`` so that independent
runs (an ensemble over seeds) advance together in one set of array operations.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from odeflow.data import DataModel
from odeflow.errors import ValidationError
from odeflow.numerics import logsumexp
from odeflow.training.common import check_count


class Batch(NamedTuple):
    """A batch of sampled sequences.

    Attributes
    ----------
    classes : ndarray of int, shape (B,) or (S, B)
        Class index of each sequence (position in ``data.classes``); its next
        token is ``data.next_tokens[classes]``, its query
        ``data.query_tokens[data.class_query_index[classes]]``.
    tokens : ndarray of int, shape (B, T - 1) or (S, B, T - 1)
        Contextual tokens ``x_1 .. x_{T-1}`` as indices into ``data.active_tokens``.
    """

    classes: np.ndarray
    tokens: np.ndarray


class LumpedLayout:
    """Index bookkeeping of the lumped state and the samplers of one data model.

    Parameters
    ----------
    data : DataModel

    Attributes
    ----------
    K, L, q, R : int
        Classes, active tokens, query tokens in use, lumped decoder rows.
    multiplicity, log_multiplicity : ndarray, shape (R,)
        How many outputs each lumped decoder row stands for (``M - K`` for the last
        row when ``M > K``).
    """

    def __init__(self, data: DataModel):
        if not isinstance(data, DataModel):
            raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
        self.data = data
        K = data.num_classes
        self.K, self.L, self.q = K, data.active_tokens.size, data.query_tokens.size
        self.multiplicity = data.output_multiplicity
        self.R = self.multiplicity.size
        self.log_multiplicity = np.log(self.multiplicity)
        self.class_query = np.asarray(data.class_query_index, dtype=np.int64)
        self.target = np.eye(K, self.R)
        self.class_cdf = np.cumsum(data.weights)
        self.class_cdf[-1] = 1.0
        tables = [_alias_table(p) for p in data.active_probs]
        self.alias_keep = np.concatenate([keep for keep, _ in tables])
        self.alias_other = np.concatenate([other for _, other in tables])

    def sample(self, rng: np.random.Generator, batch_size: int, seq_len: int) -> Batch:
        """Draw ``batch_size`` sequences of length ``seq_len`` (class by ``pi``, tokens i.i.d.).

        Tokens come from Walker's alias method, one uniform number per token:
        its integer part (times ``L``) picks a column ``j`` of the class's table,
        its fractional part keeps ``j`` or takes its alias.
        """
        classes = np.searchsorted(self.class_cdf, rng.random(batch_size), side="right")
        classes = np.minimum(classes, self.K - 1)
        x = rng.random((batch_size, seq_len - 1)) * self.L
        column = np.minimum(x.astype(np.int64), self.L - 1)
        cell = column + (classes * self.L)[:, None]
        keep = (x - column) < self.alias_keep[cell]
        tokens = np.where(keep, column, self.alias_other[cell])
        return Batch(classes, tokens)


class UnlumpedLayout(LumpedLayout):
    """All ``M`` decoder rows over the active columns, next tokens first.

    Row ``k < K`` is the decoder row of next token ``n_k`` (class order), as in
    the lumped layout; rows ``K ..`` are the other outputs in token order
    (:func:`decoder_row_order`), each with multiplicity one.
    """

    def __init__(self, data: DataModel):
        super().__init__(data)
        M = data.vocab_size
        self.R = M
        self.multiplicity = np.ones(M)
        self.log_multiplicity = np.zeros(M)
        self.target = np.eye(self.K, M)


def decoder_row_order(data: DataModel) -> np.ndarray:
    """Output token of each row of an un-lumped run's decoder: next tokens, then the rest."""
    others = np.setdiff1d(np.arange(data.vocab_size), data.next_tokens)
    return np.concatenate([data.next_tokens, others]).astype(np.int64)


def unlump_decoder(data: DataModel, lumped: np.ndarray) -> np.ndarray:
    """All ``M`` rows, in token order, of a lumped decoder (the shared row repeated)."""
    M, K = data.vocab_size, data.num_classes
    out = np.empty(lumped.shape[:-2] + (M, lumped.shape[-1]))
    if M > K:
        out[...] = lumped[..., K:K + 1, :]
    out[..., data.next_tokens, :] = lumped[..., :K, :]
    return out


def decoder_in_token_order(data: DataModel, decoder: np.ndarray, lumped: bool) -> np.ndarray:
    """A run's decoder (lumped, or un-lumped in :func:`decoder_row_order`) in token order."""
    if lumped:
        return unlump_decoder(data, decoder)
    out = np.empty_like(decoder)
    out[..., decoder_row_order(data), :] = decoder
    return out


def _alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias table of a distribution ``p`` over ``L`` items (Vose's construction).

    Returns ``keep`` and ``other``: item ``j`` is drawn with probability
    ``(keep_j + sum_{i: other_i = j} (1 - keep_i)) / L = p_j``. Items with
    ``p_j = 0`` have ``keep_j = 0`` and an alias with ``p > 0``, so they are never drawn.
    """
    L = p.size
    scaled = p * L
    keep = np.zeros(L)
    other = np.full(L, int(np.argmax(p)), dtype=np.int64)
    small = [i for i in range(L) if scaled[i] < 1.0]
    large = [i for i in range(L) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        keep[s], other[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    for i in small + large:  # left over by round-off: mass ~1 each
        keep[i] = 1.0 if p[i] > 0 else 0.0
    return keep, other


def sample_batch(data: DataModel, rng: np.random.Generator, batch_size: int,
                 seq_len: int) -> Batch:
    """Sample a batch of sequences: classes by ``pi``, contextual tokens i.i.d. from ``c_{.|n}``.

    Parameters
    ----------
    data : DataModel
    rng : numpy.random.Generator
    batch_size : int
        ``B >= 1`` sequences.
    seq_len : int
        ``T >= 2``: ``T - 1`` contextual tokens, then the query token.

    Returns
    -------
    Batch
        ``classes`` of shape (B,) and ``tokens`` of shape (B, T - 1).
    """
    batch_size = check_count(batch_size, "batch_size")
    seq_len = check_count(seq_len, "seq_len", minimum=2)
    return LumpedLayout(data).sample(rng, batch_size, seq_len)


# ------------------------------------------------------------------ forward
def _features(layout: LumpedLayout, Z: np.ndarray, batch: Batch):
    """Finite-``T`` attention output ``f`` and ``f^`` per sequence, shape (S, B, L)."""
    classes, tokens = batch
    S, B, T1 = tokens.shape
    L = layout.L
    qi = layout.class_query[classes]
    flat = (qi[..., None] * L + tokens).reshape(S, B * T1)
    a = np.take_along_axis(Z.reshape(S, -1), flat, axis=1).reshape(S, B, T1)
    b = np.exp(a - logsumexp(a, axis=-1)[..., None])          # softmax over positions
    cells = (np.arange(S * B).reshape(S, B, 1) * L + tokens).ravel()
    f = np.bincount(cells, weights=b.ravel(), minlength=S * B * L).reshape(S, B, L)
    fhat = f / np.sqrt(np.sum(f * f, axis=-1, keepdims=True))
    return qi, f, fhat


def stacked_loss_and_gradient(layout: LumpedLayout, Y: np.ndarray, Z: np.ndarray,
                              batch: Batch, gradient: bool = True):
    """Batch loss and gradients of ``S`` independent runs at once.

    Parameters
    ----------
    layout : LumpedLayout
    Y : ndarray, shape (S, R, L)
        Lumped decoders.
    Z : ndarray, shape (S, q, L)
        Attention logits over the active tokens.
    batch : Batch
        ``classes`` (S, B) and ``tokens`` (S, B, T - 1), one batch per run.
    gradient : bool
        Also return the gradients (see :func:`batch_loss_gradient`).

    Returns
    -------
    loss : ndarray, shape (S,)
    grad_Y : ndarray, shape (S, R, L), or None
    grad_Z : ndarray, shape (S, q, L), or None
    """
    qi, _, fhat = _features(layout, Z, batch)
    return feature_loss_and_gradient(layout, Y, fhat, batch.classes, qi, gradient)


def feature_loss_and_gradient(layout: LumpedLayout, Y: np.ndarray, fhat: np.ndarray,
                              classes: np.ndarray, qi: np.ndarray, gradient: bool = True):
    """Batch loss and gradients from the sequences' features ``f^`` (shape (S, B, L)).

    ``classes`` and ``qi`` (S, B) are each sequence's class and query index.
    Per sequence the gradients are ``-(e_n - alpha) f^^T`` for ``Y`` and
    ``-diag(f^) P g`` with ``g = Y^T (e_n - alpha)``, ``P = I - f^ f^^T`` for
    ``z_m``, averaged over the batch; returns ``(loss, grad_Y, grad_Z)`` as
    :func:`stacked_loss_and_gradient`.
    """
    U = fhat @ np.swapaxes(Y, -1, -2)                             # (S, B, R)
    lse = logsumexp(U, axis=-1, log_weights=layout.log_multiplicity)
    own = np.take_along_axis(U, classes[..., None], axis=-1)[..., 0]
    loss = np.mean(lse - own, axis=-1)
    if not gradient:
        return loss, None, None
    B = classes.shape[-1]
    residual = layout.target[classes] - np.exp(U - lse[..., None])  # e_n - alpha
    grad_Y = -(np.swapaxes(residual, -1, -2) @ fhat) / B
    backprop = (residual * layout.multiplicity) @ Y                # g = Y^T (e_n - alpha)
    along = np.sum(fhat * backprop, axis=-1, keepdims=True)
    per_seq = fhat * (backprop - fhat * along)                     # diag(f^) P g
    if layout.q == 1:
        grad_Z = -np.sum(per_seq, axis=1, keepdims=True) / B
    else:
        onehot = (qi[..., None] == np.arange(layout.q)).astype(float)
        grad_Z = -(np.swapaxes(onehot, -1, -2) @ per_seq) / B
    return loss, grad_Y, grad_Z


def _single_run(layout, decoder, logits, batch):
    Y = np.asarray(decoder, dtype=float)
    Z = np.asarray(logits, dtype=float)
    if Y.shape != (layout.R, layout.L):
        raise ValidationError("decoder", f"must have the lumped shape {(layout.R, layout.L)}, "
                              f"got {Y.shape}")
    if Z.shape != (layout.q, layout.L):
        raise ValidationError("logits", f"must have shape {(layout.q, layout.L)}, got {Z.shape}")
    classes = np.asarray(batch.classes, dtype=np.int64)
    tokens = np.asarray(batch.tokens, dtype=np.int64)
    if classes.ndim != 1 or tokens.ndim != 2 or tokens.shape[0] != classes.size:
        raise ValidationError("batch", f"needs classes (B,) and tokens (B, T-1), got "
                              f"{classes.shape} and {tokens.shape}")
    return Y[None], Z[None], Batch(classes[None], tokens[None])


def batch_loss(data: DataModel, decoder, logits, batch: Batch) -> float:
    """Mean cross-entropy of a batch under the finite-``T`` model.

    Parameters
    ----------
    data : DataModel
    decoder : ndarray, shape (R, L)
        Lumped decoder ``Y`` (next-token rows in class order, then the shared row).
    logits : ndarray, shape (q, L)
        Attention logits ``Z`` of the query tokens in use over the active tokens.
    batch : Batch
        From :func:`sample_batch`.

    Returns
    -------
    float
        ``(1/B) sum_s -log softmax(Y f^_s)_{n_s}``, the softmax taken over all
        ``M`` outputs (the shared row counted ``M - K`` times).
    """
    layout = LumpedLayout(data)
    loss, _, _ = stacked_loss_and_gradient(layout, *_single_run(layout, decoder, logits, batch),
                                    gradient=False)
    return float(loss[0])


def batch_loss_gradient(data: DataModel, decoder, logits, batch: Batch):
    """Gradient of :func:`batch_loss` with respect to the un-lumped ``Y`` and ``Z``.

    The per-sequence gradients are those of Lemma 1 with the finite-``T``
    feature: ``-(e_n - alpha) f^^T`` for ``Y`` and ``-diag(f^) P g`` with
    ``g = Y^T (e_n - alpha)``, ``P = I - f^ f^^T`` for ``z_{x_T}`` (the
    normalisation of the attention softmax cancels because ``P f = 0``).

    Returns
    -------
    grad_decoder : ndarray, shape (R, L)
        Row ``k < K``: the gradient for the decoder row of next token ``n_k``.
        Last row (when ``M > K``): the gradient for *each one* of the ``M - K``
        tied rows, i.e. ``1/(M - K)`` times the derivative of the lumped loss
        with respect to the shared row. SGD steps every row by this amount.
    grad_logits : ndarray, shape (q, L)
        Gradient for the logits of the query tokens in use over active tokens
        (the logits of inactive tokens have zero gradient).
    """
    layout = LumpedLayout(data)
    _, gY, gZ = stacked_loss_and_gradient(layout, *_single_run(layout, decoder, logits, batch))
    return gY[0], gZ[0]
