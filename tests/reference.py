"""Independent, un-lumped reference implementation of Level E (spec sections 2-3).

Written directly from the formulas with dense ``M x M`` matrices and loops over
classes, sharing no code with :mod:`odeflow.fields.exact`; used by the tests to
check the lumped, vectorised implementation.
"""

from __future__ import annotations

import numpy as np


def dense_features(c: np.ndarray, z_row: np.ndarray) -> np.ndarray:
    """f^_n = c~_n / ||c~_n||_2 with c~_n = c_n * exp(z_m) (Eqn 6)."""
    shift = np.max(z_row[c > 0])
    ct = c * np.exp(z_row - shift)
    return ct / np.linalg.norm(ct)


def dense_objective(data, Y: np.ndarray, Z: np.ndarray) -> float:
    """J(Y, Z) = sum_n pi_n [e_n^T Y f^_n - log 1^T exp(Y f^_n)] (Eqn 2); Z is (M, M)."""
    J = 0.0
    for cls, pi in zip(data.classes, data.weights, strict=True):
        c = data.probs(cls.next_token)
        fh = dense_features(c, Z[cls.query_token])
        u = Y @ fh
        peak = u.max()
        J += pi * (u[cls.next_token] - peak - np.log(np.sum(np.exp(u - peak))))
    return J


def dense_rhs(data, Y: np.ndarray, Z: np.ndarray, eta_y: float, eta_z: float):
    """Lemma 1 / Eqns 3-4, 7: (dY/dt, dZ/dt) with full M x M matrices."""
    M = data.vocab_size
    dY = np.zeros_like(Y)
    dZ = np.zeros_like(Z)
    for cls, pi in zip(data.classes, data.weights, strict=True):
        n, m = cls.next_token, cls.query_token
        fh = dense_features(data.probs(n), Z[m])
        u = Y @ fh
        alpha = np.exp(u - u.max())
        alpha /= alpha.sum()
        e = np.zeros(M)
        e[n] = 1.0
        dY += eta_y * pi * np.outer(e - alpha, fh)
        g = Y.T @ (e - alpha)
        P = np.eye(M) - np.outer(fh, fh)
        dZ[m] += eta_z * pi * np.diag(fh) @ P @ g
    return dY, dZ


def random_model(rng, M: int, K: int, n_queries: int, support: int, active: int | None = None):
    """A random DataModel: K classes over ``n_queries`` queries, each class with
    ``support`` tokens drawn from the first ``active`` tokens (default: all)."""
    from odeflow import DataModel, SequenceClass

    active = M if active is None else active
    next_tokens = rng.choice(M, size=K, replace=False)
    classes = []
    for k, n in enumerate(next_tokens):
        toks = rng.choice(active, size=support, replace=False)
        p = rng.uniform(0.1, 1.0, size=support)
        classes.append(SequenceClass(int(n), int(k % n_queries), dict(zip(toks.tolist(),
                                     (p / p.sum()).tolist(), strict=True)), normalize=True))
    w = rng.uniform(0.5, 1.5, size=K)
    return DataModel(M, classes, w / w.sum(), normalize=True)


def unlump(field, y: np.ndarray, base: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Full ``(Y, Z)`` of shape ``(M, M)`` from an ExactFlow state (lumped or not).

    ``base`` fills the logits the state does not carry with ``Z(0)``; turn it
    off for a derivative.
    """
    data = field.data
    M = data.vocab_size
    Yl, z = field.split(y)
    Y = np.zeros((M, M))
    cols = field.columns
    if field.lumped:
        n_next = field.table.next_tokens.size
        if M > n_next:
            Y[:, cols] = Yl[n_next]
        Y[np.ix_(field.table.next_tokens, cols)] = Yl[:n_next]
    else:
        Y[:, cols] = Yl
    Z = np.zeros((M, M))
    if base:
        Z[data.query_tokens] = field.z_base
    Z[data.query_tokens[field.logit_query], field.logit_token] = z
    return Y, Z


def dense_finite_t_objective(data, counts, Y: np.ndarray, Z: np.ndarray) -> float:
    """J_T of spec section 8 on a sample, with full M x M matrices and loops.

    ``counts[k]`` is an array (N, M) of contextual-token counts of the N sampled
    sequences of class k. For a sequence, ``f_l = k_l exp(z_{m,l}) / sum k exp(z_m)``,
    ``f^ = f / ||f||_2`` and its term is ``log softmax(Y f^)_n``, weighted ``pi_n / N``.
    """
    J = 0.0
    for cls, pi, class_counts in zip(data.classes, data.weights, counts, strict=True):
        n, m = cls.next_token, cls.query_token
        for k in class_counts:
            present = k > 0
            shift = np.max(Z[m][present])
            f = k * np.exp(Z[m] - shift)
            f = f / f.sum()
            fh = f / np.sqrt(np.sum(f ** 2))
            u = Y @ fh
            peak = u.max()
            J += pi / len(class_counts) * (u[n] - peak - np.log(np.sum(np.exp(u - peak))))
    return J


def carried_logits(field, z: np.ndarray, base: bool = True) -> np.ndarray:
    """The logits a field carries, ``z`` in its flat order, as ``(q, L)`` over
    ``data.active_tokens`` (``Z(0)`` elsewhere, or zero without ``base``)."""
    data = field.data
    out = field.z_base[:, data.active_tokens].copy() if base else \
        np.zeros((data.query_tokens.size, data.active_tokens.size))
    out[field.logit_query, np.searchsorted(data.active_tokens, field.logit_token)] = z
    return out


def dense_reduced_rhs(data, h, Z, eta_y, eta_z, beta):
    """Level R (Eqns 44, 10, 98, 128) with dense (K, L) features over the active
    tokens and a (K, K) beta, written from the formulas with loops over classes;
    Z is (q, L). Returns (dh, dZ (q, L), dB, dGamma)."""
    M, K = data.vocab_size, data.num_classes
    L = data.active_tokens.size
    F = np.zeros((K, L))
    for k, cls in enumerate(data.classes):
        cols = np.searchsorted(data.active_tokens, cls.support)
        a = np.log(cls.support_probs) + Z[data.class_query_index[k], cols]
        e = np.exp(a - a.max())
        F[k, cols] = e / np.linalg.norm(e)
    s = (M - 1) / (np.exp(h) + M - 1)
    dh = eta_y * data.weights * M / (M - 1) * s
    dZ = np.zeros_like(Z)
    dB = np.zeros(K)
    for k in range(K):
        v = sum(beta[k, j] * h[j] * F[j] for j in range(K))
        w = F[k] @ v
        g = -s[k] * v
        P = np.eye(L) - np.outer(F[k], F[k])
        dZ[data.class_query_index[k]] += eta_z * data.weights[k] * F[k] * (P @ g)
        dB[k] = eta_z * data.weights[k] * s[k] * w
    return dh, dZ, dB, s * h
