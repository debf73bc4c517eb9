"""Closed forms of the induction-head family: ``I_S``, ``J_S``, CF-IH1, CF-IH2.

Numeric twins of the sympy derivations ``derivations/cf_ih1_replicator.py`` and
``derivations/cf_ih2_classifier.py`` (``python -m derivations``), for the model
of Chen, Sheen, Wang and Yang, "Unveiling Induction Heads" (2024), as its
training code defines it (``docs/induction.md``, ``docs/derivations.md``).

==================================  ==========================================  ==========
function                            quantity                                    spec 10
==================================  ==========================================  ==========
:func:`mutual_information`          ``I_S`` (modified chi-square MI), nll       CF-IH1
:func:`code_information`            ``J_S``, the same for ``loss="code"``       CF-IH1
:func:`information_table`           ``I_S`` (or ``J_S``) of every subset        CF-IH1
:func:`kernel_information`          the same for a soft copier (logits ``w``)   CF-IH1
:func:`selected_subset`             ``S* = argmax_{|S| <= D} I_S``              CF-IH1
:func:`kappa`                       ``(4 eta_c / U_0) int_0^t a``               CF-IH1
:func:`replicator_weights`          ``p_S(t)`` (log space)                      CF-IH1
:func:`match_probability`           ``rho(z_q)`` on ``S*``                      CF-IH2
:func:`mixture_prediction`          ``y = (1-u) pi_S*(.|z_q) + u nu(z_q)``      CF-IH2
:func:`classifier_loss`             exact 1-D loss of ``a`` at ``p = delta_S*``  CF-IH2
:func:`classifier_loss_derivative`  ``d loss / da``                             CF-IH2
:func:`classifier_curve`            both, laws computed once (for ODE RHS)      CF-IH2
:func:`classifier_constant`         ``C`` and ``loss_inf`` of the asymptote     CF-IH2
:func:`classifier_asymptote`        ``a(t) ~ ln(e^{2 a_0} + 4 eta_a C t) / 2``  CF-IH2
==================================  ==========================================  ==========

The first-order theory behind ``I_S`` (derived in ``cf_ih1_replicator``): to
first order in ``a``, ``y_e(z_q) = mu(e) + a Cov_z(K(z, z_q), pi(e|z))`` under
the stationary key law, so the population loss is
``loss = loss_0 - a sum_k <K_k, G> + O(a^2)`` with the window-pair matrix
``G(z, z_q) = sum_e P(z, e) P(z_q, e) / mu(e) - mu(z) mu(z_q)`` (``P`` the
stationary joint law of a window and its next token). For the exact copier
``K_S(z, z_q) = 1[z_S = z_{q,S}]`` this is
``I_S = sum_{z_S} mu(z_S)^2 (sum_e pi_S(e|z_S)^2 / mu(e) - 1)``; for a soft
copier (logits ``w`` held fixed, as in stage 1 of the population flow) the
same pairing with ``K_S = prod_{h in S} <v^_h(z), v^_h(z_q)>`` gives
:func:`kernel_information`. Every quantity is averaged over the data model's
kernels (the prior sample; exact for a point-mass prior).

A data model is an :class:`~odeflow.data.induction.InductionData`; its
stationary window laws come from :mod:`odeflow.data.induction.markov` (through
``data.window_joint``). Invalid arguments raise :class:`odeflow.ValidationError`
naming the argument.
"""

from __future__ import annotations

import numpy as np

from odeflow.data.checks import validate_finite, validate_positive
from odeflow.data.induction import markov
from odeflow.errors import ValidationError

__all__ = [
    "classifier_asymptote",
    "classifier_constant",
    "classifier_curve",
    "classifier_loss",
    "classifier_loss_derivative",
    "code_information",
    "information_table",
    "kappa",
    "kernel_information",
    "match_probability",
    "mixture_prediction",
    "mutual_information",
    "replicator_weights",
    "selected_subset",
    "subset_laws",
]

#: Losses of the family: ``-log y_target`` and the authors' code's cross-entropy on ``y``.
LOSSES = ("nll", "code")
#: Probabilities at or below this are zero for :func:`classifier_constant` (the laws
#: come from a dense linear solve, accurate to about 1e-15).
ZERO_PROBABILITY = 1e-12


# ---------------------------------------------------------------------------
# the data model's laws (odeflow.data.induction.markov)
# ---------------------------------------------------------------------------
def subset_laws(data, subset) -> np.ndarray:
    """``P_S[k, z_S, e]``: joint law of the tokens at offsets ``S`` and the next token.

    For every kernel ``k`` of ``data`` under its stationary law, shape
    ``(N_pi, d**|S|, d)``; the row sums are ``mu(z_S)`` and ``P_S / mu(z_S)`` is
    ``pi_S(e|z_S)`` (:func:`odeflow.data.induction.markov.subset_joint_law`).
    """
    _, heads, degree = _sizes(data)
    subset = _check_subset(subset, heads, degree)
    return markov.subset_joint_law(data.window_joint(heads), subset)


def _sizes(data) -> tuple[int, int, int]:
    return int(data.vocab_size), int(data.heads), int(data.degree)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _check_loss(loss: str) -> str:
    if loss not in LOSSES:
        raise ValidationError("loss", f"must be one of {list(LOSSES)}, got {loss!r}")
    return loss


def _check_subset(subset, heads: int, degree: int) -> tuple[int, ...]:
    try:
        subset = tuple(sorted(int(h) for h in subset))
    except (TypeError, ValueError):
        raise ValidationError("subset", f"must be a tuple of head numbers, got {subset!r}") \
            from None
    if len(set(subset)) != len(subset) or any(h < 1 or h > heads for h in subset) \
            or len(subset) > degree:
        raise ValidationError("subset", f"must be distinct heads in 1..{heads} with at most "
                              f"{degree} of them, got {subset!r}")
    return subset


def _subset_information(laws: np.ndarray, loss: str) -> np.ndarray:
    """``I_S`` (nll) or ``J_S`` (code) of each kernel from ``P_S`` ``(N, d**|S|, d)``."""
    mu_s = laws.sum(axis=-1, keepdims=True)
    mu_e = laws.sum(axis=-2, keepdims=True)
    if loss == "nll":
        return np.sum(laws**2 / mu_e, axis=(-2, -1)) - np.sum(mu_s**2, axis=(-2, -1))
    target = _softmax(mu_e)
    return np.sum((laws - mu_s * target) * (laws - mu_s * mu_e), axis=(-2, -1))


# ---------------------------------------------------------------------------
# CF-IH1: information of a subset and the replicator
# ---------------------------------------------------------------------------
def mutual_information(data, subset) -> float:
    """``I_S = E_pi sum_{z_S} mu(z_S)^2 (sum_e pi_S(e|z_S)^2 / mu(e) - 1)`` (spec 10, CF-IH1).

    The modified chi-square mutual information between the tokens at the
    parent offsets ``S`` and the next token, under the stationary law of each
    kernel of the data model, averaged over the kernels. ``I_() = 0``.

    Parameters
    ----------
    data : InductionData
    subset : tuple of int
        Head numbers (offsets) ``S``, ``|S| <= D``.
    """
    return float(np.mean(_subset_information(subset_laws(data, subset), "nll")))


def code_information(data, subset) -> float:
    """``J_S = E_pi sum_{z_S} mu(z_S)^2 sum_e (pi_S - softmax(mu))_e (pi_S - mu)_e`` (CF-IH1).

    The coefficient that replaces ``I_S`` in the replicator under
    ``loss="code"`` (cross-entropy applied to the probability vector ``y``).
    """
    return float(np.mean(_subset_information(subset_laws(data, subset), "code")))


def information_table(data, loss: str = "nll") -> dict[tuple[int, ...], float]:
    """``{S: I_S}`` (``loss="nll"``) or ``{S: J_S}`` (``"code"``) over every ``|S| <= D``.

    In the order of the family's subsets (by size, then lexicographically,
    the empty set first).
    """
    loss = _check_loss(loss)
    return {s: float(np.mean(_subset_information(subset_laws(data, s), loss)))
            for s in data.subsets}


def selected_subset(data, loss: str = "nll") -> tuple[int, ...]:
    """``S* = argmax_{|S| <= D} I_S`` (``J_S`` under ``loss="code"``), the subset CF-IH1 selects."""
    table = information_table(data, loss)
    return max(table, key=table.get)


def _copier_features(logits: np.ndarray, d: int, length: int) -> np.ndarray:
    """``v^_h(z)`` for every window ``z`` of ``length`` tokens: shape ``(H, d**length, d)``."""
    heads = logits.shape[0]
    windows = markov.window_tokens(d, length)  # column m - 1: offset m
    weights = _softmax(logits)  # (H, H): head h, offset h + j
    features = np.zeros((heads, len(windows), d))
    for h in range(heads):
        for j in range(heads):
            features[h, np.arange(len(windows)), windows[:, h + j]] += weights[h, j]
    return features / np.linalg.norm(features, axis=-1, keepdims=True)


def kernel_information(data, copier_logits=None, loss: str = "nll") -> dict:
    """``{S: <K_S, G>}``: the first-order coefficient of every subset for a given copier.

    ``G(z, z_q) = sum_e P(z, e) P(z_q, e) / mu(e) - mu(z) mu(z_q)`` (nll) or
    ``sum_e (P(z_q, e) - mu(z_q) softmax(mu)_e) (P(z, e) - mu(z) mu(e))``
    (code), paired with ``K_S(z, z_q) = prod_{h in S} <v^_h(z), v^_h(z_q)>``
    over windows of ``2H - 1`` tokens, averaged over the kernels. With
    ``copier_logits=None`` the copier is exact (``v^_h = e_{x_{l-h}}``) and
    the result equals :func:`information_table`; with the logits ``w`` of a
    population run held fixed it is the coefficient of stage 1 of that run.

    Parameters
    ----------
    data : InductionData
    copier_logits : array_like, shape (H, H), optional
        ``w[h-1, j]``: head ``h``'s logit on offset ``h + j``.
    loss : {"nll", "code"}
    """
    loss = _check_loss(loss)
    d, heads, _ = _sizes(data)
    length = 2 * heads - 1
    if copier_logits is None:
        logits = np.full((heads, heads), -np.inf)
        logits[:, 0] = 0.0
    else:
        logits = np.asarray(copier_logits, dtype=float)
        if logits.shape != (heads, heads) or not np.all(np.isfinite(logits)):
            raise ValidationError("copier_logits", f"must be a finite ({heads}, {heads}) "
                                  f"array, got shape {logits.shape}")
    features = _copier_features(logits, d, length)
    grams = np.einsum("hzc,hqc->hzq", features, features)  # (H, windows, windows)
    laws = data.window_joint(length)
    pairing = np.zeros(grams.shape[1:])
    for law in laws:
        mu_z = law.sum(axis=1)
        mu_e = law.sum(axis=0)
        if loss == "nll":
            pairing += (law / mu_e) @ law.T - np.outer(mu_z, mu_z)
        else:
            target = _softmax(mu_e)
            pairing += (law - np.outer(mu_z, mu_e)) @ (law - np.outer(mu_z, target)).T
    pairing /= len(laws)
    table = {}
    for s in data.subsets:
        k = np.ones_like(pairing)
        for h in s:
            k = k * grams[h - 1]
        table[s] = float(np.sum(k * pairing))
    return table


def kappa(t, eta_c: float, u0: float, a) -> np.ndarray:
    """``kappa(t) = (4 eta_c / U_0) int_0^t a ds`` (spec 10, CF-IH1).

    Parameters
    ----------
    t : array_like
        Times ``>= 0`` (increasing when ``a`` is an array).
    eta_c : float
        Learning rate of the selector coefficients ``c``.
    u0 : float
        ``U_0 = sum_S c_S(0)^2`` (conserved by the flow of ``c``).
    a : float or array_like
        The classifier weight: a constant, or its values at ``t`` (integrated
        by the trapezoid rule from ``t[0] = 0``).
    """
    eta_c = validate_positive(eta_c, "eta_c")
    u0 = validate_positive(u0, "u0")
    t = np.asarray(t, dtype=float)
    a = np.asarray(a, dtype=float)
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValidationError("t", "must be finite and >= 0")
    if not np.all(np.isfinite(a)):
        raise ValidationError("a", "must be finite")
    if a.ndim == 0:
        integral = a * t
    else:
        if a.shape != t.shape or t.ndim != 1 or t[0] != 0 or np.any(np.diff(t) <= 0):
            raise ValidationError("a", "an array of a needs t increasing from 0, same shape")
        integral = np.concatenate([[0.0], np.cumsum(np.diff(t) * (a[1:] + a[:-1]) / 2)])
    return 4.0 * eta_c / u0 * integral


def replicator_weights(p0, info, kappa_values) -> np.ndarray:
    """CF-IH1: ``p_S = p_S(0) exp(kappa I_S) / sum_S' p_S'(0) exp(kappa I_S')``, in log space.

    The solution of ``dp_S/dt = kappa'(t) p_S (I_S - sum_S' p_S' I_S')``.

    Parameters
    ----------
    p0 : array_like, shape (#S,)
        Initial subset weights: ``>= 0``, summing to 1 (not renormalised).
    info : array_like, shape (#S,)
        ``I_S`` (or ``J_S``) per subset.
    kappa_values : float or array_like
        ``kappa(t)``; an array of shape ``(n,)`` gives ``(n, #S)``.

    Returns
    -------
    ndarray, shape (#S,) or (n, #S)
    """
    p0 = np.asarray(p0, dtype=float)
    info = np.asarray(info, dtype=float)
    if p0.ndim != 1 or info.shape != p0.shape:
        raise ValidationError("info", f"must have the shape of p0 {p0.shape}, got {info.shape}")
    if not np.all(np.isfinite(p0)) or np.any(p0 < 0) or abs(p0.sum() - 1.0) > 1e-12:
        raise ValidationError("p0", f"must be >= 0 and sum to 1, got sum {p0.sum()!r}")
    if not np.all(np.isfinite(info)):
        raise ValidationError("info", "must be finite")
    k = np.asarray(kappa_values, dtype=float)
    if not np.all(np.isfinite(k)):
        raise ValidationError("kappa", "must be finite")
    with np.errstate(divide="ignore"):
        logits = np.log(p0) + k[..., None] * info
    return _softmax(logits)


# ---------------------------------------------------------------------------
# CF-IH2: the classifier at p = delta_S*
# ---------------------------------------------------------------------------
def match_probability(data, subset) -> np.ndarray:
    """``rho(z_q)``: probability that a stationary key window matches the query on ``S*``.

    Returns an array ``(N_pi, d**|S*|)``: one row per kernel, one entry per
    value of ``z_{q,S*}`` (equal to ``mu(z_{S*})``).
    """
    return subset_laws(data, subset).sum(axis=-1)


def _mixture_parts(laws: np.ndarray):
    """``rho, 1 - rho, pi_S, nu`` from ``P_S`` (``(..., d**|S|, d)``).

    The non-matching mass ``sum_{s' != s} P_S(s', e)`` is summed directly, not
    formed as ``mu(e) - P_S(s, e)``, so that small entries of ``nu`` keep their
    relative precision.
    """
    rows = laws.shape[-2]
    others = np.stack([np.delete(laws, s, axis=-2).sum(axis=-2) for s in range(rows)], axis=-2)
    rho = laws.sum(axis=-1)
    rest = others.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pi_s = laws / rho[..., None]
        nu = np.where(rest[..., None] > 0, others / rest[..., None], 0.0)
    return rho, rest, pi_s, nu


def _mixture_weight(rho: np.ndarray, rest: np.ndarray, a) -> tuple[np.ndarray, np.ndarray]:
    """``u = (1 - rho) / (rho e^a + 1 - rho)`` and ``1 - u`` (``rest = 1 - rho``).

    Both from log space, so neither overflows for large ``a`` and ``1 - u``
    keeps its relative precision when ``rho`` is tiny.
    """
    with np.errstate(divide="ignore"):
        log_match = np.log(rho) + a
        log_rest = np.log(rest)
        log_den = np.logaddexp(log_match, log_rest)
    return np.exp(log_rest - log_den), np.exp(log_match - log_den)


def mixture_prediction(data, a: float, subset) -> np.ndarray:
    """CF-IH2: ``y(z_q) = (1 - u) pi_S*(.|z_q) + u nu(z_q)`` at ``p = delta_S*``.

    Exact for the exact copier (``K = 1[z_S* = z_{q,S*}]``); ``y`` depends on
    the query only through ``z_{q,S*}``.

    Returns
    -------
    ndarray, shape (N_pi, d**|S*|, d)
    """
    a = validate_finite(a, "a")
    rho, rest, pi_s, nu = _mixture_parts(subset_laws(data, subset))
    u, v = _mixture_weight(rho, rest, a)
    return v[..., None] * pi_s + u[..., None] * nu


def _classifier_terms(laws: np.ndarray, a: np.ndarray, loss: str):
    """Loss and ``d loss/da`` at every ``a`` (1-D), averaged over the kernels of ``laws``."""
    rho, rest, pi_s, nu = _mixture_parts(laws)
    u, v = _mixture_weight(rho[None], rest[None], a[:, None, None])  # (A, N, R); v = 1 - u
    u, v = u[..., None], v[..., None]
    y = v * pi_s + u * nu
    dy = -u * v * (nu - pi_s)  # du/da = -u (1 - u)
    if loss == "nll":
        with np.errstate(divide="ignore", invalid="ignore"):
            value = -np.sum(np.where(laws > 0, laws * np.log(y), 0.0), axis=(-2, -1))
            # -sum_e P dy/y = -rho u^2 v sum_e (nu - pi)^2 / y, using sum nu = sum pi = 1:
            # free of the cancellation of the O(u) terms, and visibly <= 0
            gap = np.where(y > 0, (nu - pi_s) ** 2 / y, 0.0)
            slope = -np.sum(rho[..., None] * u**2 * v * gap, axis=(-2, -1))
    else:
        peak = y.max(axis=-1, keepdims=True)
        lse = np.log(np.sum(np.exp(y - peak), axis=-1)) + peak[..., 0]
        soft = np.exp(y - lse[..., None])
        value = -np.sum(laws * y, axis=(-2, -1)) + np.sum(rho * lse, axis=-1)
        slope = (-np.sum(laws * dy, axis=(-2, -1))
                 + np.sum(rho[..., None] * soft * dy, axis=(-2, -1)))
    return value.mean(axis=-1), slope.mean(axis=-1)


def classifier_loss(data, a, subset, loss: str = "nll") -> np.ndarray:
    """Exact population loss as a function of ``a`` alone at ``p = delta_S*`` (CF-IH2).

    ``loss(a) = -E_pi sum_{z_S} mu(z_S) sum_e pi_S(e|z_S) log y_e(z_S)`` with
    the mixture ``y`` of :func:`mixture_prediction` (``loss="nll"``), or the
    cross-entropy of the vector ``y`` (``loss="code"``). Broadcasts over ``a``.
    """
    loss = _check_loss(loss)
    a = _finite_array(a, "a")
    value, _ = _classifier_terms(subset_laws(data, subset), a.ravel(), loss)
    return value.reshape(a.shape)


def classifier_loss_derivative(data, a, subset, loss: str = "nll") -> np.ndarray:
    """``d loss / da`` of :func:`classifier_loss` (analytic: ``du/da = -u (1 - u)``).

    Under ``loss="nll"`` it is computed as
    ``-E_pi sum_s mu(s) u^2 (1 - u) sum_e (nu_e - pi_e)^2 / y_e`` (the terms of
    order ``u`` cancel exactly because ``sum_e nu_e = sum_e pi_e = 1``), so it
    keeps its relative precision as ``a`` grows, and is never positive.

    The 1-D flow of stage 3 is ``a' = -eta_a * classifier_loss_derivative(a)``.
    """
    loss = _check_loss(loss)
    a = _finite_array(a, "a")
    _, slope = _classifier_terms(subset_laws(data, subset), a.ravel(), loss)
    return slope.reshape(a.shape)


def classifier_curve(data, subset, loss: str = "nll"):
    """``curve(a) -> (loss(a), loss'(a))`` with the kernels' laws computed once.

    For right-hand sides of the 1-D stage-3 flow, which evaluate the
    derivative many times; ``a`` is a float or a 1-D array.
    """
    loss = _check_loss(loss)
    laws = subset_laws(data, subset)

    def curve(a):
        a = _finite_array(a, "a")
        value, slope = _classifier_terms(laws, np.atleast_1d(a).ravel(), loss)
        return value.reshape(a.shape), slope.reshape(a.shape)

    return curve


def _finite_array(value, name: str) -> np.ndarray:
    """``value`` as a float array; a ValidationError naming ``name`` if an entry is not finite."""
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValidationError(name, f"must be finite, got {value!r}")
    return arr


def classifier_constant(data, subset) -> tuple[float, float]:
    """``(C, loss_inf)`` of ``loss(a) - loss_inf ~ C e^{-2a}`` (CF-IH2, ``loss="nll"``).

    ``loss_inf = -E_pi sum_s mu(s) sum_e pi_S*(e|s) log pi_S*(e|s)`` and
    ``C = (1/2) E_pi sum_s mu(s) ((1 - mu(s)) / mu(s))^2 chi^2(nu(s) || pi_S*(.|s))``
    with ``chi^2(nu || pi) = sum_e (nu_e - pi_e)^2 / pi_e`` (the first-order
    term in ``u`` vanishes because ``sum_e nu_e = sum_e pi_e = 1``). Needs every
    ``pi_S*(e|s) > 0``.
    """
    laws = subset_laws(data, subset)
    rho, rest, pi_s, nu = _mixture_parts(laws)
    # The laws come from a linear solve for the stationary law: a probability that is
    # zero in exact arithmetic (a transient context) can come out as +-1e-17, and dividing
    # by it would give a huge C instead of the refusal.
    if np.any(pi_s <= ZERO_PROBABILITY):
        raise ValidationError("data", "the asymptote needs every pi_S*(e|z_S*) > 0 "
                              f"(found one <= {ZERO_PROBABILITY:g})")
    chi2 = np.sum((nu - pi_s) ** 2 / pi_s, axis=-1)
    constants = 0.5 * np.sum(rest**2 / rho * chi2, axis=-1)
    limits = -np.sum(laws * np.log(pi_s), axis=(-2, -1))
    return float(np.mean(constants)), float(np.mean(limits))


def classifier_asymptote(t, a0: float, eta_a: float, constant: float) -> np.ndarray:
    """``a(t) ~ (1/2) ln(e^{2 a_0} + 4 eta_a C t)``: the solution of ``a' = 2 eta_a C e^{-2a}``.

    The asymptotic ODE of stage 3 (CF-IH2, ``loss="nll"``), computed as
    ``a_0 + (1/2) log1p(4 eta_a C t e^{-2 a_0})``.
    """
    t = _finite_array(t, "t")
    if np.any(t < 0):
        raise ValidationError("t", "must be >= 0")
    a0 = validate_finite(a0, "a0")
    eta_a = validate_positive(eta_a, "eta_a")
    constant = validate_positive(constant, "constant")
    return a0 + 0.5 * np.log1p(4.0 * eta_a * constant * t * np.exp(-2.0 * a0))
