"""The paper's measures of attention sparsity (Figs. 4, 6, 11-12).

All functions take attention logits over the active tokens with any leading
axes, ``z_active`` of shape ``(..., q, L)`` (a :class:`~odeflow.Trajectory`'s
``z_active``, or a training run's with the seed axis first), so an ensemble
over seeds and time is measured in one call.

- :func:`distinct_attention`: for each class, the attention restricted to its
  distinct tokens, ``c_n(l) propto c_{l|n} exp(z_{m,l})`` for ``l in G_DT(n)``,
  normalised over ``G_DT(n)``.
- :func:`distinct_entropy`: its entropy, averaged over the classes (Fig. 6).
- :func:`recall_curve`: the recall-threshold relation of Appendix G
  (Figs. 11-12): each entry of ``c_n`` is tagged 1 when it is at least a
  threshold, and the recall is the fraction of distinct tokens tagged 1,
  averaged over the classes. The paper reads a sparser map from a curve that
  falls more slowly over thresholds around ``1 / |G_DT(n)|`` (the uniform
  level): fewer tokens carry most of the attention.
- :func:`class_attention`: ``f_n`` of Eqn 5 over time (the map of Fig. 4).
"""

from __future__ import annotations

import numpy as np

from odeflow.data import DataModel
from odeflow.errors import ValidationError
from odeflow.numerics import normalised_features


def _distinct_mask(data: DataModel) -> np.ndarray:
    """``(K, L)``: True where active token ``l`` is distinct for class ``k``."""
    groups = np.count_nonzero(data.active_probs > 0, axis=0)
    return (data.active_probs > 0) & (groups == 1)[None, :]


def _class_logits(data: DataModel, z_active) -> np.ndarray:
    z = np.asarray(z_active, dtype=float)
    q, L = data.query_tokens.size, data.active_tokens.size
    if z.ndim < 2 or z.shape[-2:] != (q, L):
        raise ValidationError("z_active", f"must end with (queries={q}, active tokens={L}), "
                              f"got shape {z.shape}")
    return z[..., data.class_query_index, :]                           # (..., K, L)


def distinct_attention(data: DataModel, z_active) -> np.ndarray:
    """``c_n`` over the distinct tokens of each class, shape ``(..., K, L)`` (Fig. 6).

    Zero outside ``G_DT(n)``; each class's row sums to one (a class without
    distinct tokens is refused). Computed in log space.
    """
    mask = _distinct_mask(data)
    empty = ~mask.any(axis=1)
    if empty.any():
        n = int(data.next_tokens[np.flatnonzero(empty)[0]])
        raise ValidationError("data", f"class {n} has no distinct tokens")
    log_c = np.where(mask, data.active_log_probs, -np.inf)
    attention, _ = normalised_features(log_c, _class_logits(data, z_active))
    return attention


def distinct_entropy(data: DataModel, z_active, per_class: bool = False) -> np.ndarray:
    """Entropy (nats) of :func:`distinct_attention`, averaged over the classes (Fig. 6).

    Returns shape ``(...)``, or ``(..., K)`` with ``per_class=True``. Uniform
    attention on ``G_DT(n)`` gives ``ln |G_DT(n)|``.
    """
    c = distinct_attention(data, z_active)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(c > 0, c * np.log(c), 0.0)
    H = -np.sum(terms, axis=-1)
    return H if per_class else H.mean(axis=-1)


def recall_curve(data: DataModel, z_active, thresholds) -> np.ndarray:
    """Recall against threshold (Appendix G, Figs. 11-12), shape ``(..., len(thresholds))``.

    For each class, the fraction of its distinct tokens ``l`` with
    ``c_n(l) >= threshold``; averaged over the classes.
    """
    th = np.asarray(thresholds, dtype=float)
    if th.ndim != 1 or th.size == 0 or not np.all(np.isfinite(th)):
        raise ValidationError("thresholds", f"must be a non-empty list of finite numbers, "
                              f"got {thresholds!r:.80}")
    mask = _distinct_mask(data)
    c = distinct_attention(data, z_active)[..., None]                  # (..., K, L, 1)
    hits = np.sum((c >= th) & mask[..., None], axis=-2)                # (..., K, n_th)
    return np.mean(hits / mask.sum(axis=1)[:, None], axis=-2)


def class_attention(data: DataModel, z_active, next_token: int) -> np.ndarray:
    """``f_n`` (Eqn 5) over the active tokens for the class of ``next_token``, ``(..., L)``."""
    i = data.class_index(next_token)
    z = _class_logits(data, z_active)[..., i, :]
    attention, _ = normalised_features(data.active_log_probs[i], z)
    return attention
