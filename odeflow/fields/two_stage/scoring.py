"""The outer expectation of the two-stage family: population loss and accuracy of a ``W``.

The population output on a query is ``f(x_q) = g(W x_q)`` (:mod:`.expectations`),
``W = diag(W_P, W_Q)``; a query type's accuracy is ``P(y_q f(x_q) > 0)`` and its
loss ``E[l(y_q f(x_q))]`` (odeflow's model of Gong et al. 2025; ``l`` of
:data:`~odeflow.data.two_stage.LOSSES`). :func:`score` gives the six numbers the
results carry (plus ``loss_both``), the same whichever level produced ``W``.

* Margin Q (exact reduction): ``f = r_P^T p_q + r_Q^T q_q`` with ``r = W^T mu / 2``,
  so on a query of a kind with present blocks ``H``, ``y f = A + B |c_P| + C |c_Q|
  + S Z`` with ``A = sum_H gamma alpha``, ``B = alpha_P [P in H]``, ``C = alpha_Q
  [Q in H]`` (``alpha = <w, r>``) and ``S^2 = sum_blocks |r|^2 - [in H] alpha^2``;
  ``c`` are half-normal, ``Z`` standard normal. The loss is a product rule:
  the Gauss rule of the half-normal law for each ``|c|`` and Gauss-Hermite for
  ``Z``. The accuracy is exact in ``(|c_P|, Z)`` (the skew-normal law:
  ``P(x + B|c| + S Z > 0) = Phi(x/tau) + 2 T(x/tau, B/S)``, ``tau^2 = B^2 + S^2``)
  and by the half-normal rule in ``|c_Q|``.
* Cluster Q: a fixed scrambled Sobol sample of the Gaussian parts of the query
  (seed :data:`SOBOL_SEED`), both labels and both cluster signs on every point.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import expit, log_expit, ndtr, ndtri, owens_t, roots_hermitenorm, roots_legendre

from odeflow.errors import ValidationError
from odeflow.fields.two_stage.expectations import kind_terms, mean_vector

#: Kinds of query: present blocks (P, Q) of kinds 0 (P only), 1 (Q only), 2 (both).
PRESENT = ((True, False), (False, True), (True, True))
#: Upper end of the half-normal's rule (``2 Phi(-9)`` is 2e-19).
HALF_NORMAL_CUT = 9.0
#: Gauss nodes per half-normal and Gauss-Hermite nodes for ``Z`` (margin Q).
HALF_NORMAL_NODES = 24
GAUSS_NODES = 24
#: Sobol points (a power of 2) and seed of the cluster-Q sample.
SOBOL_POINTS = 2**13
SOBOL_SEED = 20250227
#: Names of the numbers :func:`score` returns.
SCORE_KEYS = ("accuracy_p_only", "accuracy_q_only", "accuracy_both", "loss", "loss_p_only",
              "loss_q_only", "loss_both")


def loss_derivatives(name: str, m):
    """``l(m), l'(m), l''(m)`` of the margin ``m = y f``.

    ``"logistic"``: ``l = log(1 + e^-m)`` (``-log_expit(m)``, log-space),
    ``l' = -expit(-m)``, ``l'' = expit(m) expit(-m)``; ``"squared"``:
    ``l = (1 - m)^2 / 2``, ``l' = m - 1``, ``l'' = 1``.
    """
    m = np.asarray(m, dtype=float)
    if name == "logistic":
        return -log_expit(m), -expit(-m), expit(m) * expit(-m)
    if name == "squared":
        return 0.5 * np.square(1.0 - m), m - 1.0, np.ones_like(m)
    raise ValidationError("loss", f"must be 'logistic' or 'squared', got {name!r:.40}")


def _half_normal_gauss(n: int, points: int = 1000):
    """Nodes and weights of the ``n``-point Gauss rule of the half-normal law ``2 phi(c)``,
    ``c >= 0``: the discretised Stieltjes procedure (Gautschi 2004, sec. 2.2.3) on a
    ``points``-point Gauss-Legendre discretisation of ``[0, 2 HALF_NORMAL_CUT]``, then
    the Golub-Welsch eigenvalue problem of the Jacobi matrix."""
    c, wc = _half_normal_legendre(points, 2.0 * HALF_NORMAL_CUT)
    alpha, beta = np.zeros(n), np.zeros(n)
    p_prev, p = np.zeros_like(c), np.ones_like(c)
    norm_prev, norm = 1.0, float(wc.sum())
    for k in range(n):
        alpha[k] = wc @ (c * p * p) / norm
        beta[k] = norm / norm_prev if k else norm
        p_prev, p = p, (c - alpha[k]) * p - (beta[k] if k else 0.0) * p_prev
        norm_prev, norm = norm, float(wc @ (p * p))
    off = np.sqrt(beta[1:])
    nodes, vectors = np.linalg.eigh(np.diag(alpha) + np.diag(off, 1) + np.diag(off, -1))
    weights = vectors[0] ** 2
    return nodes, weights / weights.sum()


def _half_normal_legendre(n: int, cut: float = HALF_NORMAL_CUT):
    """Gauss-Legendre on ``[0, cut]`` times the half-normal density ``2 phi(c)``."""
    x, w = roots_legendre(int(n))
    c = 0.5 * cut * (x + 1.0)
    return c, 0.5 * cut * w * 2.0 * np.exp(-0.5 * c * c) / np.sqrt(2.0 * np.pi)


@functools.lru_cache(maxsize=8)
def quadrature_rule(n_half: int = HALF_NORMAL_NODES, n_gauss: int = GAUSS_NODES,
                    reference: bool = False):
    """Nodes and weights ``(c, wc, z, wz)`` of the half-normal and the standard normal.

    ``sum wc h(c) ~ E h(|c|)``: the Gauss rule of the half-normal law
    (:func:`_half_normal_gauss`), or with ``reference=True`` Gauss-Legendre on
    ``[0, HALF_NORMAL_CUT]`` times ``2 phi(c)`` (the slower rule the default's error
    is measured against); ``sum wz h(z) ~ E h(Z)``: Gauss-Hermite (probabilists').
    Read-only arrays.
    """
    if reference:
        c, wc = _half_normal_legendre(int(n_half))
    else:
        c, wc = _half_normal_gauss(int(n_half))
    z, wz = roots_hermitenorm(int(n_gauss))
    wz = wz / wz.sum()
    for arr in (c, wc, z, wz):
        arr.setflags(write=False)
    return c, wc, z, wz


def reduced_vectors(data, W_P, W_Q):
    """``r_P = W_P^T mu_P / 2``, ``r_Q = W_Q^T mu_Q / 2`` (margin Q): ``f = r^T x_q``."""
    mu = mean_vector(data)
    return 0.5 * W_P.T @ mu[:data.d_p], 0.5 * W_Q.T @ mu[data.d_p:]


def _kind_coefficients(data, r_p, r_q, kind):
    has_p, has_q = PRESENT[kind]
    a_p, a_q = float(r_p @ data.direction_p), float(r_q @ data.direction_q)
    A = has_p * data.gamma_p * a_p + has_q * data.gamma_q * a_q
    S2 = float(r_p @ r_p) - has_p * a_p ** 2 + float(r_q @ r_q) - has_q * a_q ** 2
    return A, has_p * a_p, has_q * a_q, np.sqrt(max(S2, 0.0)), a_p, a_q


def margin_kind(data, r_p, r_q, kind: int, rule=None, gradient: bool = True):
    """Loss, accuracy and loss gradient on one query kind (margin Q, exact reduction).

    Returns
    -------
    loss : float
    accuracy : float
    grad_p, grad_q : ndarray or None
        ``dL_k/dr_P``, ``dL_k/dr_Q`` (None unless ``gradient``).
    """
    c, wc, z, wz = quadrature_rule() if rule is None else rule
    A, B, C, S, a_p, a_q = _kind_coefficients(data, r_p, r_q, kind)
    has_p, has_q = PRESENT[kind]
    c1 = c[:, None, None] if has_p else np.zeros((1, 1, 1))
    w1 = wc[:, None, None] if has_p else np.ones((1, 1, 1))
    c2 = c[None, :, None] if has_q else np.zeros((1, 1, 1))
    w2 = wc[None, :, None] if has_q else np.ones((1, 1, 1))
    weight = w1 * w2 * wz[None, None, :]
    m = A + B * c1 + C * c2 + S * z[None, None, :]
    ell, d1, d2 = loss_derivatives(data.loss, m)
    loss = float(np.sum(weight * ell))
    accuracy = _margin_accuracy(A, B, C, S, has_p, has_q, c, wc)
    if not gradient:
        return loss, accuracy, None, None
    dA = float(np.sum(weight * d1))
    dB = float(np.sum(weight * d1 * c1))
    dC = float(np.sum(weight * d1 * c2))
    dS2 = 0.5 * float(np.sum(weight * d2))
    wp, wq = data.direction_p, data.direction_q
    grad_p = 2.0 * dS2 * r_p
    grad_q = 2.0 * dS2 * r_q
    if has_p:
        grad_p = grad_p + (data.gamma_p * dA + dB - 2.0 * dS2 * a_p) * wp
    if has_q:
        grad_q = grad_q + (data.gamma_q * dA + dC - 2.0 * dS2 * a_q) * wq
    return loss, accuracy, grad_p, grad_q


def _margin_accuracy(A, B, C, S, has_p, has_q, c, wc) -> float:
    """``P(A + B|c_P| + C|c_Q| + S Z > 0)``: closed form (skew-normal) in one present
    block's ``|c|`` and ``Z``, Gauss-Legendre in the other's."""
    if has_p and has_q:
        x, weights, u = A + C * c, wc, B
    else:
        x, weights, u = np.array([A]), np.ones(1), (B if has_p else C)
    tau = np.sqrt(u * u + S * S)
    if tau == 0.0:
        inner = (x > 0).astype(float)
    else:
        inner = ndtr(x / tau) + 2.0 * owens_t(x / tau, u / max(S, 1e-300 * tau))
    return float(np.clip(weights @ inner, 0.0, 1.0))


@functools.lru_cache(maxsize=8)
def _sobol_normals(dim: int, n: int = SOBOL_POINTS, seed: int = SOBOL_SEED):
    from scipy.stats import qmc

    u = qmc.Sobol(d=dim, scramble=True, seed=seed).random(n)
    z = ndtri(np.clip(u, 1e-16, 1.0 - 1e-16))
    z.setflags(write=False)
    return z


def query_sample(data, kind: int, n: int = SOBOL_POINTS):
    """The fixed query sample of one kind: ``(x, y, weight)``, weights summing to 1.

    Every Sobol point of the Gaussian parts is used with ``y = +1`` and ``y = -1``
    (and, for a present cluster Q with ``y = -1``, both signs ``s``); margin blocks
    are ``y (gamma + |<z, w>|) w + z_perp`` as in the sampler.
    """
    z = _sobol_normals(data.d, n)
    has_p, has_q = PRESENT[kind]
    xs, ys, ws = [], [], []
    signs = (-1.0, 1.0) if (has_q and data.q_kind == "cluster") else (0.0,)
    for y in (1.0, -1.0):
        for s in (signs if y < 0 else (0.0,)):
            p, q = z[:, :data.d_p].copy(), z[:, data.d_p:].copy()
            if has_p:
                p = _margin(p, y, data.gamma_p, data.direction_p)
            if has_q and data.q_kind == "margin":
                q = _margin(q, y, data.gamma_q, data.direction_q)
            elif has_q and y < 0:
                q = q + s * data.zeta * data.direction_q
            xs.append(np.concatenate([p, q], 1))
            ys.append(np.full(n, y))
            ws.append(np.full(n, 0.5 / (n * (len(signs) if y < 0 else 1))))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ws)


def _margin(z, y, gamma, w):
    c = z @ w
    return (y * (gamma + np.abs(c)))[:, None] * w + (z - c[:, None] * w)


def sample_kind(data, W_P, W_Q, kind: int, n: int = SOBOL_POINTS, gradient: bool = True):
    """Loss, accuracy and loss gradient ``(dL_k/dW_P, dL_k/dW_Q)`` of one kind on the
    fixed query sample (:func:`query_sample`); any Q law."""
    x, y, w = query_sample(data, kind, n)
    p, q = x[:, :data.d_p], x[:, data.d_p:]
    v = np.concatenate([p @ W_P.T, q @ W_Q.T], 1)
    values, grads = kind_terms(data, v)
    probs = data.kind_probabilities
    f = np.tensordot(probs, values, axes=1)
    ell, d1, _ = loss_derivatives(data.loss, y * f)
    loss, accuracy = float(w @ ell), float(min(w @ (y * f > 0), 1.0))
    if not gradient:
        return loss, accuracy, None, None
    gv = np.tensordot(probs, grads, axes=1) * (w * d1 * y)[:, None]
    return loss, accuracy, gv[:, :data.d_p].T @ p, gv[:, data.d_p:].T @ q


def check_blocks(data, W_P, W_Q):
    """``W_P``, ``W_Q`` as finite float arrays of shapes (d_p, d_p), (d_q, d_q)."""
    out = []
    for name, W, n in (("W_P", W_P, data.d_p), ("W_Q", W_Q, data.d_q)):
        arr = np.asarray(W, dtype=float)
        if arr.shape != (n, n):
            raise ValidationError(name, f"must have shape ({n}, {n}), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValidationError(name, "must be finite")
        out.append(arr)
    return out


def score(data, W_P, W_Q, rule=None) -> dict:
    """Population accuracy and loss of ``W = diag(W_P, W_Q)`` per query type.

    Returns
    -------
    dict
        :data:`SCORE_KEYS`: ``accuracy_*`` = ``P(y_q f(x_q) > 0)`` on P-only,
        Q-only and both-feature queries, ``loss_*`` the expected loss on each, and
        ``loss`` their mixture with weights ``(rho, rho, 1 - 2 rho)``.
    """
    W_P, W_Q = check_blocks(data, W_P, W_Q)
    out = {}
    if data.q_kind == "margin":
        r_p, r_q = reduced_vectors(data, W_P, W_Q)
        results = [margin_kind(data, r_p, r_q, k, rule, gradient=False) for k in range(3)]
    else:
        results = [sample_kind(data, W_P, W_Q, k, gradient=False) for k in range(3)]
    for k, name in enumerate(("p_only", "q_only", "both")):
        out[f"loss_{name}"], out[f"accuracy_{name}"] = results[k][0], results[k][1]
    out["loss"] = float(data.kind_probabilities @ [r[0] for r in results])
    return {key: out[key] for key in SCORE_KEYS}


__all__ = ["SCORE_KEYS", "loss_derivatives", "margin_kind", "quadrature_rule", "query_sample",
           "reduced_vectors", "sample_kind", "score"]
