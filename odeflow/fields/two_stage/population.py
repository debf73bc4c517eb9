"""The population flow of the two-stage family (``N -> infinity``): :class:`PopulationFlow`.

odeflow's model of Gong et al. (2025, arXiv 2502.20681): the key-query weights
``W = diag(W_P, W_Q)`` follow ``W' = -grad L(W)`` restricted to the diagonal
blocks, ``L(W) = E_{x_q, y_q}[l(y_q f(x_q))]`` with ``f(x_q) = g(W x_q)``,
``g(v) = E_x[y ReLU(x^T v)]`` (:mod:`.expectations`). Time is in units of the
inverse learning rate (gradient descent with step ``eta`` is this flow at
``t = eta k``).

Margin Q: ``f(x_q) = r_P^T p_q + r_Q^T q_q`` with ``r = W^T mu / 2`` (``mu = E[y x]``),
so ``dL/dW_P = mu_P (dL/dr_P)^T / 2`` (rank one) and the loss and ``dL/dr`` come
from the product rule of :func:`~.scoring.margin_kind`. Cluster Q: the
gradient ``E[l'(y f) y (dg/da) p_q^T]`` on the fixed query sample of
:func:`~.scoring.query_sample` (:data:`CLUSTER_FLOW_POINTS` Sobol points).
"""

from __future__ import annotations

import numpy as np

from odeflow.data.checks import as_real_array
from odeflow.errors import ValidationError
from odeflow.fields.base import Field
from odeflow.fields.two_stage import scoring
from odeflow.fields.two_stage.expectations import mean_vector

#: Sobol points per kind of the cluster-Q flow's gradient.
CLUSTER_FLOW_POINTS = 2**11


def initial_blocks(data, start):
    """``(W_P, W_Q)`` at ``t = 0`` from the ``start`` option.

    None -> ``sigma0 I``; an array of shape (d, d) whose off-diagonal blocks are
    zero; or a pair ``(W_P, W_Q)``. Raises a ValidationError naming ``start``.
    """
    if start is None:
        return data.sigma0 * np.eye(data.d_p), data.sigma0 * np.eye(data.d_q)
    if isinstance(start, (tuple, list)) and len(start) == 2:
        try:
            return scoring.check_blocks(data, start[0], start[1])
        except ValidationError as exc:
            raise ValidationError(f"start.{exc.field}", exc.reason) from None
    arr = as_real_array(start, "start")
    if arr.shape != (data.d, data.d):
        raise ValidationError("start", f"must be None, a pair (W_P, W_Q) or an array of shape "
                              f"(d, d) = ({data.d}, {data.d}), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValidationError("start", "must be finite")
    k = data.d_p
    if np.any(arr[:k, k:] != 0) or np.any(arr[k:, :k] != 0):
        raise ValidationError("start", "must be block-diagonal (W = diag(W_P, W_Q)); its "
                              "off-diagonal blocks are not zero")
    return arr[:k, :k].copy(), arr[k:, k:].copy()


class TwoStageField(Field):
    """Base of the two-stage levels: state ``(W_P, W_Q)`` flattened row-major.

    A subclass defines :meth:`loss_and_gradient`. ``gradient(y) = -dL/dy``,
    :attr:`rate_vector` is ones, and ``rhs(t, y) = rate_vector * gradient(y)``.
    """

    def __init__(self, data, start=None):
        super().__init__()
        self.data = data
        self._start = initial_blocks(data, start)
        self._np = data.d_p * data.d_p
        self.rate_vector = np.ones(self.size)
        self.rate_vector.setflags(write=False)

    @property
    def size(self) -> int:
        return self.data.d_p ** 2 + self.data.d_q ** 2

    def initial_state(self) -> np.ndarray:
        return np.concatenate([self._start[0].ravel(), self._start[1].ravel()])

    def split(self, y: np.ndarray):
        """``(W_P, W_Q)`` of the flat state ``y``."""
        y = np.asarray(y, dtype=float)
        dp, dq = self.data.d_p, self.data.d_q
        return y[:self._np].reshape(dp, dp), y[self._np:].reshape(dq, dq)

    def loss_and_gradient(self, y: np.ndarray):
        """``(L, dL/dy)`` at the flat state ``y``."""
        raise NotImplementedError

    def loss(self, y: np.ndarray) -> float:
        """The loss at the flat state ``y``."""
        return self.loss_and_gradient(y)[0]

    def gradient(self, y: np.ndarray) -> np.ndarray:
        """``-dL/dy``: the direction the flow follows."""
        return -self.loss_and_gradient(y)[1]

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``W' = -dL/dW`` on the diagonal blocks."""
        self.nfev += 1
        return self.rate_vector * self.gradient(y)

    def parameters(self) -> dict:
        return {"flow": self.name, "loss": self.data.loss,
                "start": [self._start[0].tolist(), self._start[1].tolist()]}

    def trajectory(self, t, states, stats):
        """A :class:`~odeflow.results.two_stage.TwoStageTrajectory` whose accuracies and
        losses are the population scorer's (:func:`~.scoring.score`) at every state."""
        from odeflow.results.two_stage import SERIES, TwoStageTrajectory

        states = np.atleast_2d(np.asarray(states, dtype=float))
        blocks = [self.split(row) for row in states]
        scores = [scoring.score(self.data, W_P, W_Q) for W_P, W_Q in blocks]
        series = {k: np.array([s[k] for s in scores]) for k in SERIES}
        t = np.asarray(t, dtype=float)
        meta = {**self.parameters(), "t_span": [float(t[0]), float(t[-1])]}
        return TwoStageTrajectory(t, np.array([b[0] for b in blocks]),
                                  np.array([b[1] for b in blocks]), series, stats=stats,
                                  meta=meta, data=self.data, scorer=scoring.score)


class PopulationFlow(TwoStageField):
    """Population gradient flow of ``W = diag(W_P, W_Q)`` (``flow="population"``).

    Parameters
    ----------
    data : TwoStageData
    start : None, ndarray of shape (d, d), or pair of arrays
        ``W(0)`` (:func:`initial_blocks`; None -> ``sigma0 I``).
    """

    name = "population"
    #: LSODA needs about two thirds of RK45's right-hand sides on ``ts-default`` (the
    #: late stage, where the weights grow slowly, is mildly stiff).
    preferred_method = "LSODA"

    def loss_and_gradient(self, y: np.ndarray):
        W_P, W_Q = self.split(y)
        if self.data.q_kind == "margin":
            loss, g_p, g_q = margin_loss_and_gradient(self.data, W_P, W_Q)
        else:
            loss, g_p, g_q = cluster_loss_and_gradient(self.data, W_P, W_Q)
        return loss, np.concatenate([g_p.ravel(), g_q.ravel()])


def reduced_loss_and_gradient(data, r_p, r_q, rule=None):
    """``(L, dL/dr_P, dL/dr_Q)`` of the margin model ``f = r_P^T p_q + r_Q^T q_q``."""
    probs = data.kind_probabilities
    loss, g_p, g_q = 0.0, np.zeros(data.d_p), np.zeros(data.d_q)
    for k in range(3):
        if probs[k] == 0.0:
            continue
        lk, _, gp, gq = scoring.margin_kind(data, r_p, r_q, k, rule)
        loss += probs[k] * lk
        g_p += probs[k] * gp
        g_q += probs[k] * gq
    return loss, g_p, g_q


def margin_loss_and_gradient(data, W_P, W_Q, rule=None):
    """``(L, dL/dW_P, dL/dW_Q)`` for the margin Q: ``dL/dW_P = mu_P (dL/dr_P)^T / 2``."""
    mu = mean_vector(data)
    r_p, r_q = scoring.reduced_vectors(data, W_P, W_Q)
    loss, g_p, g_q = reduced_loss_and_gradient(data, r_p, r_q, rule)
    return loss, 0.5 * np.outer(mu[:data.d_p], g_p), 0.5 * np.outer(mu[data.d_p:], g_q)


def full_loss_and_gradient(data, W, rule=None):
    """``(L, dL/dW)`` for a full ``d x d`` key-query matrix ``W`` (margin Q).

    ``g`` is linear for a margin Q, so ``f(x_q) = mu^T W x_q / 2`` for any ``W``:
    ``r = W^T mu / 2`` and ``dL/dW = mu (dL/dr)^T / 2``. Its diagonal blocks are the
    block flow's gradient; the off-diagonal blocks are what the block-diagonal
    model leaves out.
    """
    if data.q_kind != "margin":
        raise ValidationError("q_kind", "the full-W loss is written for the margin Q only")
    mu = mean_vector(data)
    r = 0.5 * np.asarray(W, dtype=float).T @ mu
    loss, g_p, g_q = reduced_loss_and_gradient(data, r[:data.d_p], r[data.d_p:], rule)
    return loss, 0.5 * np.outer(mu, np.concatenate([g_p, g_q]))


def cluster_loss_and_gradient(data, W_P, W_Q, n: int = CLUSTER_FLOW_POINTS):
    """``(L, dL/dW_P, dL/dW_Q)`` on the fixed query sample (any Q law; the cluster Q's)."""
    probs = data.kind_probabilities
    loss, g_p, g_q = 0.0, np.zeros((data.d_p, data.d_p)), np.zeros((data.d_q, data.d_q))
    for k in range(3):
        if probs[k] == 0.0:
            continue
        lk, _, gp, gq = scoring.sample_kind(data, W_P, W_Q, k, n=n)
        loss += probs[k] * lk
        g_p += probs[k] * gp
        g_q += probs[k] * gq
    return loss, g_p, g_q


__all__ = ["CLUSTER_FLOW_POINTS", "PopulationFlow", "TwoStageField", "cluster_loss_and_gradient",
           "full_loss_and_gradient", "initial_blocks", "margin_loss_and_gradient",
           "reduced_loss_and_gradient"]
