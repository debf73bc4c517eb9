"""The finite-``N`` level of the two-stage family, ``flow="finite_n"`` (``docs/two_stage.md``).

odeflow's own model of the two-stage setting of Gong et al. 2025 (arXiv
2502.20681; only its abstract is readable, so the model, its loss and every
derived statement here are odeflow's, not the paper's). A prompt holds ``N``
labelled examples ``(x_i, y_i)`` and a query ``(x_q, y_q)``; normalised ReLU
attention with block-diagonal key-query weights ``W = diag(W_P, W_Q)`` predicts

.. math::

    f(x_q) = \\frac{1}{N} \\sum_{i=1}^N y_i \\,\\mathrm{ReLU}(x_i^\\top W x_q),
    \\qquad \\ell = l(y_q f(x_q)),

with ``l`` the logistic loss ``log(1 + e^{-m})`` or the squared loss
``(1 - m)^2 / 2`` (:func:`margin_loss`). This level is the gradient flow of the
mean loss over a fixed, seeded sample of ``sample_size`` prompts of ``seq_len``
examples each,

.. math::

    W' = -\\nabla_W \\hat L(W), \\qquad
    \\nabla_W \\hat L = \\frac{1}{S} \\sum_s l'(m_s) \\, y_{q,s} \\frac{1}{N}
    \\sum_i y_{s,i} \\, 1[x_{s,i}^\\top W x_{q,s} > 0] \\, x_{s,i} x_{q,s}^\\top,

restricted to the two diagonal blocks (the ReLU's derivative is taken as 0 at
0). As ``N`` and ``S`` grow it tends to the population flow
(:mod:`odeflow.fields.two_stage.population`). Its state is that of every field
of the family: ``W_P`` (``d_P * d_P``) then ``W_Q`` (``d_Q * d_Q``), row-major.
The trajectory scores each ``W`` with the family's population scorer
(:func:`odeflow.fields.two_stage.scoring.score`), whichever level produced it.

Units: features are in units of the noise's standard deviation, ``W`` and ``f`` are
dimensionless, and ``t`` is in units of the inverse learning rate (gradient descent
with step ``eta`` is the flow at ``t = eta k``).

:func:`sample_prompts`, :func:`attention_output`, :func:`loss_and_gradient` and
:func:`accuracy_by_kind` are the finite-``N`` model itself; real training
(:mod:`odeflow.training.two_stage`) steps the same gradient on sampled prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import check_count, check_seed
from odeflow.data.two_stage import KIND_NAMES, TwoStageData
from odeflow.errors import ValidationError
from odeflow.fields.two_stage.population import TwoStageField, initial_blocks
from odeflow.fields.two_stage.scoring import loss_derivatives

#: Query kinds of the family, by the code of ``sample_examples``: P only, Q only, both.
KINDS = KIND_NAMES


def margin_loss(m: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """``l(m)`` and ``l'(m)`` of the margin ``m = y f``, elementwise: the family's losses
    (:func:`odeflow.fields.two_stage.scoring.loss_derivatives`; logistic in log space)."""
    value, slope, _ = loss_derivatives(loss, m)
    return value, slope


@dataclass(frozen=True)
class Prompts:
    """A sample of prompts: ``S`` prompts of ``N`` labelled examples and one query each.

    Attributes
    ----------
    x : ndarray, shape (S, N, d)
        The examples' inputs ``(p, q)``.
    y : ndarray, shape (S, N)
        Their labels ``+-1``.
    query : ndarray, shape (S, d)
    label : ndarray, shape (S,)
        The queries' labels ``+-1``.
    kind : ndarray of int, shape (S,)
        Each query's kind (0: P only, 1: Q only, 2: both; :data:`KINDS`).
    """

    x: np.ndarray
    y: np.ndarray
    query: np.ndarray
    label: np.ndarray
    kind: np.ndarray

    @property
    def count(self) -> int:
        """``S``, the number of prompts."""
        return int(self.label.size)

    @property
    def seq_len(self) -> int:
        """``N``, the examples of each prompt."""
        return int(self.y.shape[1])


def sample_prompts(data: TwoStageData, count: int, seq_len: int, rng, kind=None) -> Prompts:
    """``count`` prompts of ``seq_len`` examples from ``data``, drawn with ``rng``.

    The examples are ``count * seq_len`` draws of ``data.sample_examples`` (each
    carries P only, Q only or both, with probabilities ``rho, rho, 1 - 2 rho``),
    then the queries, ``data.sample_queries(count, rng, kind=kind)`` (``kind``
    None: every kind, as the examples; else 0, 1 or 2 only).
    """
    count = check_count(count, "count")
    seq_len = check_count(seq_len, "seq_len")
    x, y, _ = data.sample_examples(count * seq_len, rng)
    xq, yq, kq = data.sample_queries(count, rng, kind=kind)
    d = data.d_p + data.d_q
    return Prompts(np.asarray(x, dtype=float).reshape(count, seq_len, d),
                   np.asarray(y, dtype=float).reshape(count, seq_len),
                   np.asarray(xq, dtype=float), np.asarray(yq, dtype=float),
                   np.asarray(kq, dtype=np.int64))


def block_matrix(W_P: np.ndarray, W_Q: np.ndarray) -> np.ndarray:
    """``W = diag(W_P, W_Q)``, shape ``(d, d)``."""
    d_p, d_q = W_P.shape[0], W_Q.shape[0]
    W = np.zeros((d_p + d_q, d_p + d_q))
    W[:d_p, :d_p] = W_P
    W[d_p:, d_p:] = W_Q
    return W


def attention_output(prompts: Prompts, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``f(x_q)`` of every prompt (shape ``(S,)``) and the scores ``u = x_i^T W x_q``
    (shape ``(S, N)``) under weights ``W`` of shape ``(d, d)``."""
    v = prompts.query @ W.T
    u = np.matmul(prompts.x, v[:, :, None])[:, :, 0]
    f = np.mean(prompts.y * np.maximum(u, 0.0), axis=1)
    return f, u


def loss_and_gradient(prompts: Prompts, W_P: np.ndarray, W_Q: np.ndarray, loss: str):
    """Mean loss over ``prompts`` and its gradient in ``W_P`` and ``W_Q``.

    Returns
    -------
    value : float
        ``(1/S) sum_s l(y_{q,s} f_s)``.
    grad_P, grad_Q : ndarray
        ``dL/dW_P`` (``(d_P, d_P)``) and ``dL/dW_Q``: the diagonal blocks of the
        full gradient (module docstring), the ReLU's derivative 0 at 0.
    """
    d_p = W_P.shape[0]
    f, u = attention_output(prompts, block_matrix(W_P, W_Q))
    value, slope = margin_loss(prompts.label * f, loss)
    a = prompts.y * (u > 0.0) / prompts.seq_len
    keys = np.matmul(a[:, None, :], prompts.x)[:, 0, :]
    keys *= (slope * prompts.label / prompts.count)[:, None]
    grad = keys.T @ prompts.query
    return float(np.mean(value)), grad[:d_p, :d_p].copy(), grad[d_p:, d_p:].copy()


def accuracy_by_kind(prompts: Prompts, W: np.ndarray) -> dict:
    """Fraction of queries with ``y_q f(x_q) > 0`` (a tie ``f = 0`` counts 1/2), per kind.

    Returns ``{"p_only": ..., "q_only": ..., "both": ...}``; NaN for a kind with no
    query in the sample.
    """
    f, _ = attention_output(prompts, W)
    right = np.where(f == 0.0, 0.5, (prompts.label * f > 0.0).astype(float))
    return {name: float(np.mean(right[prompts.kind == k])) if np.any(prompts.kind == k)
            else float("nan") for k, name in enumerate(KINDS)}


class FiniteSampleFlow(TwoStageField):
    """Gradient flow of the empirical loss on a fixed sample of prompts, ``flow="finite_n"``.

    Parameters
    ----------
    data : TwoStageData
    seq_len : int, default 64
        ``N``, the labelled examples of each prompt.
    sample_size : int, default 2000
        ``S``, the prompts of the fixed sample.
    seed : int, default 0
        Seed of the ``numpy.random.Generator`` that draws the sample
        (:func:`sample_prompts`).
    start : optional
        ``W(0)`` (:func:`~odeflow.fields.two_stage.population.initial_blocks`;
        ``sigma0 I`` by default).

    Notes
    -----
    ``rhs(t, y) = rate_vector * gradient(y)`` with ``gradient = -grad L`` and unit
    rates (:class:`~odeflow.fields.two_stage.population.TwoStageField`), so odeflow's
    optimiser flows wrap it. A right-hand side costs ``O(S N d)``. Full-batch
    gradient descent with step ``eta`` on the same sample
    (:func:`odeflow.training.two_stage.train` with ``sample="fixed"``) is this
    flow's Euler scheme at ``t = eta k``.
    """

    name = "finite_n"

    def __init__(self, data: TwoStageData, seq_len: int = 64, sample_size: int = 2000,
                 seed: int = 0, start=None):
        if not isinstance(data, TwoStageData):
            raise ValidationError("data", f"must be a TwoStageData, got {type(data).__name__}")
        super().__init__(data, start)
        self.seq_len = check_count(seq_len, "seq_len")
        self.sample_size = check_count(sample_size, "sample_size")
        self.seed = check_seed(seed)
        self.prompts = sample_prompts(data, self.sample_size, self.seq_len,
                                      np.random.default_rng(self.seed))

    def loss_and_gradient(self, y: np.ndarray):
        """``(L, dL/dy)``: the empirical loss and its gradient at the flat state ``y``."""
        value, g_p, g_q = loss_and_gradient(self.prompts, *self.split(y), self.data.loss)
        return value, np.concatenate([g_p.ravel(), g_q.ravel()])

    def parameters(self) -> dict:
        return {**super().parameters(), "seq_len": self.seq_len,
                "sample_size": self.sample_size, "seed": self.seed}


def flat_start(data: TwoStageData, start=None) -> np.ndarray:
    """The flat state ``(W_P, W_Q)`` of the option ``start`` (as the family's fields read it)."""
    W_P, W_Q = initial_blocks(data, start)
    return np.concatenate([np.ravel(W_P), np.ravel(W_Q)]).astype(float)
