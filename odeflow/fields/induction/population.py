"""The population flow of the induction-head model, ``flow="population"`` (spec section 10).

``L -> infinity``: the key windows follow the chain's stationary law, so for a
query window ``z_q`` (the ``2H - 1`` tokens before the query) the classifier's
output is

    y_e(z_q) = sum_z mu(z) e^{a K(z, z_q)} pi(e|z) / sum_z mu(z) e^{a K(z, z_q)},
    K(z, z_q) = sum_S p_S prod_{h in S} <v^_h(z), v^_h(z_q)>,

with ``v_h(z) = sum_j softmax_j(w_h) e_{z_{h+j}}`` (soft copier), ``v^ = v /
||v||`` and ``p_S = c_S^2 / sum c^2``, and the loss is the expectation over the
query window, its next token and the prior (a fixed seeded sample of ``N_pi``
kernels; exact for a point mass): ``loss = -E_pi sum_{z_q} mu(z_q) sum_e
pi(e|z_q) log y_e(z_q)`` (``loss="nll"``) or, with ``y`` used as logits,
``E_pi sum_{z_q} mu(z_q) sum_e pi(e|z_q) (-y_e + log sum_e' e^{y_e'})``
(``loss="code"``, the authors' training code).

The gradient is analytic (:func:`window_loss` and
:meth:`PopulationFlow.loss_and_gradient`): the chain rule through the
classifier softmax over the key windows (a matrix product of the window laws
with ``e^{a K}``, shifted per query column in log space), the kernel ``K``,
``p_S``, the normalisation of ``v`` and ``softmax(w)``. One right-hand side is
two products of a ``W x W`` matrix (``W = d**(2H-1)``) with the ``W x N_pi (d +
1)`` window laws: the cost grows like ``d**(4H-2) N_pi``
(``benchmarks/bench_induction.py``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp, softmax

from odeflow.fields.induction.base import InductionField


class WindowLaws:
    """The window laws of a data model arranged for :func:`window_loss`.

    Parameters
    ----------
    laws : ndarray, shape (N_pi, W, d)
        ``P_k(z, e)``: each kernel's stationary law of a window and its next token.

    Attributes
    ----------
    joint : ndarray, shape (W, N_pi * d)
        ``P`` with the windows first (kernel-major columns).
    marginal : ndarray, shape (W, N_pi)
        ``mu_k(z)``.
    stacked : ndarray, shape (W, N_pi * (d + 1))
        ``[joint, marginal]``: one matrix product gives numerators and denominators.
    """

    def __init__(self, laws: np.ndarray):
        laws = np.asarray(laws, dtype=float)
        self.count, self.windows, self.vocab = laws.shape
        N, W, d = laws.shape
        self.joint = np.ascontiguousarray(laws.transpose(1, 0, 2).reshape(W, N * d))
        self.marginal = np.ascontiguousarray(laws.sum(axis=2).T)
        self.stacked = np.ascontiguousarray(np.concatenate([self.joint, self.marginal], axis=1))
        self.joint3 = self.joint.reshape(W, N, d)
        self.positive = self.joint3 > 0
        self.seen = self.marginal > 0


def window_loss(laws: WindowLaws, kernel: np.ndarray, a: float, loss: str = "nll",
                gradient: bool = True):
    """Population loss of a window kernel ``K`` and its gradient in ``K`` and ``a``.

    Parameters
    ----------
    laws : WindowLaws
    kernel : ndarray, shape (W, W)
        ``K[z, z_q]`` (key window first).
    a : float
        Classifier weight.
    loss : {"nll", "code"}
    gradient : bool
        Also return the derivatives.

    Returns
    -------
    value : float
        The loss averaged over the kernels of the sample.
    d_kernel : ndarray, shape (W, W), or None
        ``d loss / d K[z, z_q]``.
    d_a : float or None
        ``d loss / d a``.
    """
    N, W, d = laws.count, laws.windows, laws.vocab
    logits = a * kernel
    shifted = logits - logits.max(axis=0, keepdims=True)       # log-space per query column
    weights = np.exp(shifted)                                   # (z, z_q), max 1 per column
    both = weights.T @ laws.stacked                              # (z_q, N (d + 1))
    num = both[:, :N * d].reshape(W, N, d)
    den = both[:, N * d:]                                        # (z_q, N)
    P, mu = laws.joint3, laws.marginal
    safe_den = np.where(laws.seen, den, 1.0)
    if loss == "nll":
        safe_num = np.where(laws.positive, num, 1.0)
        value = (-np.sum(P * np.log(safe_num)) + np.sum(mu * np.log(safe_den))) / N
        if not gradient:
            return float(value), None, None
        d_num = np.where(laws.positive, -P / safe_num, 0.0) / N
        d_den = np.where(laws.seen, mu / safe_den, 0.0) / N
    else:
        y = num / safe_den[:, :, None]
        value = (-np.sum(P * y) + np.sum(mu * logsumexp(y, axis=2))) / N
        if not gradient:
            return float(value), None, None
        d_y = (-P + mu[:, :, None] * softmax(y, axis=2)) / N
        d_num = d_y / safe_den[:, :, None]
        d_den = np.where(laws.seen, -np.sum(d_y * y, axis=2) / safe_den, 0.0)
    back = np.concatenate([d_num.reshape(W, N * d), d_den], axis=1)  # (z_q, N (d + 1))
    d_logits = (laws.stacked @ back.T) * weights                 # (z, z_q)
    return float(value), a * d_logits, float(np.sum(d_logits * kernel))


def subset_products(grams: np.ndarray, subsets) -> np.ndarray:
    """``prod_{h in S} G_h`` for every subset (the empty product is 1): (#S, W, W)."""
    out = np.empty((len(subsets),) + grams.shape[1:])
    for i, s in enumerate(subsets):
        out[i] = 1.0
        for h in s:
            out[i] *= grams[h - 1]
    return out


def selector_gradient(d_kernel, grams, products, subsets, p, with_grams: bool = True):
    """Chain rule from ``d loss / d K`` to ``d loss / d p_S`` and ``d loss / d G_h``.

    ``K = sum_S p_S prod_{h in S} G_h``. Returns ``(d_p (#S,), d_grams (H, W, W) or None)``.
    """
    d_p = products.reshape(len(subsets), -1) @ d_kernel.ravel()
    if not with_grams:
        return d_p, None
    d_grams = np.zeros_like(grams)
    for i, s in enumerate(subsets):
        for h in s:
            rest = p[i]
            for g in s:
                if g != h:
                    rest = rest * grams[g - 1]
            d_grams[h - 1] += rest
    d_grams *= d_kernel[None]
    return d_p, d_grams


def coefficient_gradient(c: np.ndarray, d_p: np.ndarray) -> np.ndarray:
    """``d loss / d c`` from ``d loss / d p`` with ``p_S = c_S^2 / sum c^2``."""
    u = float(np.dot(c, c))
    p = c * c / u
    return 2.0 * c / u * (d_p - np.dot(p, d_p))


class PopulationFlow(InductionField):
    """``flow="population"``: gradient flow of the ``L -> infinity`` loss (spec section 10).

    State ``theta = (c (#S,), w (H*H,), a)``. Parameters as
    :class:`~odeflow.fields.induction.base.InductionField` (``loss``, ``rates``,
    ``start``).
    """

    name = "population"
    groups = ("c", "w", "a")

    def __init__(self, data, loss: str = "nll", rates=None, start=None):
        super().__init__(data, loss=loss, rates=rates, start=start)
        H, d = self.heads, int(data.vocab_size)
        self.windows = WindowLaws(data.window_laws())
        W = self.windows.windows
        digits = np.arange(W)[:, None] // d ** np.arange(2 * H - 2, -1, -1)[None, :] % d
        # onehot[h-1, j, z, :] = e_{z_{h+j}}: the token head h reads at its j-th offset
        self.onehot = np.zeros((H, H, W, d))
        for h in range(H):
            for j in range(H):
                self.onehot[h, j, np.arange(W), digits[:, h + j]] = 1.0

    def features(self, w: np.ndarray):
        """``(softmax(w) (H, H), v (H, W, d), ||v|| (H, W, 1), v^ (H, W, d))``."""
        s = softmax(w, axis=1)
        v = np.einsum("hj,hjzd->hzd", s, self.onehot, optimize=True)
        norm = np.linalg.norm(v, axis=2, keepdims=True)
        return s, v, norm, v / norm

    def loss_and_gradient(self, y: np.ndarray, gradient: bool = True):
        parts = self.split(y)
        c, w, a = parts["c"], parts["w"], parts["a"]
        p = c * c / np.dot(c, c)
        s, _, norm, vhat = self.features(w)
        grams = vhat @ vhat.transpose(0, 2, 1)
        products = subset_products(grams, self.subsets)
        kernel = np.tensordot(p, products, axes=1)
        value, d_kernel, d_a = window_loss(self.windows, kernel, a, self.loss_name, gradient)
        if not gradient:
            return value, None
        d_p, d_grams = selector_gradient(d_kernel, grams, products, self.subsets, p)
        d_vhat = (d_grams + d_grams.transpose(0, 2, 1)) @ vhat
        d_v = (d_vhat - vhat * np.sum(vhat * d_vhat, axis=2, keepdims=True)) / norm
        d_s = np.einsum("hzd,hjzd->hj", d_v, self.onehot, optimize=True)
        d_w = s * (d_s - np.sum(s * d_s, axis=1, keepdims=True))
        return value, self.pack(coefficient_gradient(c, d_p), d_w, d_a)
