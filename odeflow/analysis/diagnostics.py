"""Level R quantities measured on a trajectory (Theorem 1, Eqns 9, 11, 44).

Level R (:class:`odeflow.fields.reduced.ReducedFlow`) *postulates* a decoder
margin ``h_n``, a speed-control coefficient ``gamma`` and coefficients
``iota_n, beta_{nn'}``; Level E (:class:`odeflow.fields.exact.ExactFlow`)
only has ``Y`` and ``Z``. The functions here estimate the Level R quantities
from any trajectory that records a decoder, so the two levels can be compared:

- :func:`empirical_margin`: ``h_n(t)`` read off the decoder logits;
- :func:`empirical_speed_control`: ``gamma iota_n`` and ``gamma beta_{nn'}`` by
  least squares on the back-propagated gradient (Eqn 9);
- :func:`transition_time`: the crossover ``t_0`` where ``exp(h) = M - 1`` (CF2);
- :func:`eqn11_invariant` and :func:`eqn11_spread`: the invariant of Theorem 3
  (Eqn 11) and how far a trajectory is from satisfying it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from odeflow.errors import ValidationError
from odeflow.numerics import logsumexp, normalised_features
from odeflow.results.snap import SnapResult


def _lumped_decoder_logits(traj) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(Y_lumped (n,R,L), F (n,K,L), U = Y f^_n (n,K,R), multiplicity (R,))``.

    Rows as stored (lumped, or all ``M`` outputs); ``traj.decoder_target_rows``
    gives each class's row.
    """
    if getattr(traj, "decoder_lumped", None) is None:
        raise ValidationError("traj", f"flow {getattr(traj, 'flow', '?')!r} records no "
                              "decoder; run flow='exact' (or 'reduced')")
    data = traj.data
    Yl = np.asarray(traj.decoder_lumped, dtype=float)
    _, F = normalised_features(data.active_log_probs, traj.z_active[:, data.class_query_index, :])
    U = F @ np.swapaxes(Yl, -1, -2)
    return Yl, F, U, np.asarray(traj.decoder_multiplicity)


def empirical_margin(traj) -> np.ndarray:
    """Decoder logit margin ``h_n(t)`` measured from the decoder (Eqn 44), shape (n, K).

    ``h_n = u_nn - mean_{j != n} u_nj`` with ``u = Y f^_n`` the output logits of
    class ``n``: the logit of the correct next token minus the mean logit of
    the other ``M - 1`` outputs.

    Notes
    -----
    Convention: at Level R ``Y = sum_n' h_n' (e_n' - 1/M) f^_n'^T`` (Lemma 3), so
    for orthogonal features ``u = h_n (e_n - 1/M)``: every wrong output has
    logit ``-h_n/M`` and the correct one ``h_n (1 - 1/M)``, and their
    difference is ``h_n``, the quantity in ``alpha_nn = e^h/(e^h + M - 1)``. The
    mean over the wrong outputs (rather than, e.g., their maximum or a
    log-sum-exp) is the choice that reproduces ``h_n`` exactly in that case
    and stays linear in ``Y``. On a Level R trajectory with overlapping
    features it differs from the recorded margin by the overlap terms.

    Parameters
    ----------
    traj : Trajectory
        Any trajectory with a decoder (``flow="exact"``, or ``"reduced"``
        whose decoder is the implied ``W F^T``).
    """
    _, _, U, mult = _lumped_decoder_logits(traj)
    data = traj.data
    K, M = data.num_classes, data.vocab_size
    own = U[:, np.arange(K), traj.decoder_target_rows]
    total = np.einsum("tkr,r->tk", U, mult)
    return own - (total - own) / (M - 1)


@dataclass
class SpeedControlFit:
    """Least-squares fit of Eqn 9 at each time; see :func:`empirical_speed_control`.

    Attributes
    ----------
    t : ndarray, shape (n,)
    iota_gamma : ndarray, shape (n, K)
        ``gamma iota_n``: coefficient of ``f^_n`` in ``g_n``.
    beta_gamma : ndarray, shape (n, K, K)
        ``gamma beta_{nn'}``: minus the coefficient of ``f^_n'`` in ``g_n``
        (zero diagonal).
    residual : ndarray, shape (n, K)
        ``||g_n - fit|| / ||g_n||`` (zero where ``g_n = 0``, e.g. at ``Y = 0``).
    gradient_norm : ndarray, shape (n, K)
        ``||g_n||`` over the active tokens.
    margin : ndarray, shape (n, K)
        :func:`empirical_margin`.
    gamma_from_margin : ndarray, shape (n, K)
        ``h (M-1)/(exp(h) + M - 1)`` at the empirical margin, Level R's
        prediction for ``gamma iota_n`` (and ``(M-1) gamma beta_{nn'}``).
    """

    t: np.ndarray
    iota_gamma: np.ndarray
    beta_gamma: np.ndarray
    residual: np.ndarray
    gradient_norm: np.ndarray
    margin: np.ndarray
    gamma_from_margin: np.ndarray


def empirical_speed_control(traj) -> SpeedControlFit:
    """Fit ``g_n = Y^T (e_n - alpha_n)`` on the features at each time (Eqn 9).

    At each time the back-propagated gradient of class ``n`` (over the active
    tokens; the others are zero) is regressed on the columns
    ``f^_1 .. f^_K`` by least squares:
    ``g_n ~ gamma iota_n f^_n - sum_{n' != n} gamma beta_{nn'} f^_n'``.
    The residual tells how well the Level R form holds.

    Parameters
    ----------
    traj : Trajectory
        A trajectory with a decoder (``flow="exact"`` is the intended use).

    Returns
    -------
    SpeedControlFit
    """
    Yl, F, U, mult = _lumped_decoder_logits(traj)
    data = traj.data
    K, M = data.num_classes, data.vocab_size
    R = Yl.shape[1]
    lse = logsumexp(U, axis=-1, log_weights=np.log(mult))
    alpha = np.exp(U - lse[..., None])
    target = np.zeros((K, R))
    target[np.arange(K), traj.decoder_target_rows] = 1.0
    G = ((target - alpha) * mult) @ Yl                      # (n, K, L)
    design = np.swapaxes(F, -1, -2)                         # (n, L, K)
    coef = np.linalg.pinv(design) @ np.swapaxes(G, -1, -2)  # (n, K coeff, K class)
    coef = np.swapaxes(coef, -1, -2)                        # (n, class, coeff)
    fitted = coef @ F                                       # (n, K, L)
    gnorm = np.linalg.norm(G, axis=-1)
    rnorm = np.linalg.norm(G - fitted, axis=-1)
    residual = np.divide(rnorm, gnorm, out=np.zeros_like(rnorm), where=gnorm > 0)
    iota_gamma = coef[:, np.arange(K), np.arange(K)].copy()
    beta_gamma = -coef
    beta_gamma[:, np.arange(K), np.arange(K)] = 0.0
    h = empirical_margin(traj)
    gamma = h * expit(math.log(M - 1) - h)
    return SpeedControlFit(traj.t.copy(), iota_gamma, beta_gamma, residual, gnorm, h, gamma)


def _crossing_time(t: np.ndarray, h: np.ndarray, level: float) -> float:
    above = np.flatnonzero(h >= level)
    if above.size == 0:
        raise ValidationError(
            "traj", f"the margin stays below ln(M - 1) = {level:.6g} up to t = {t[-1]:g} "
            f"(max {np.max(h):.6g}); solve to a later t_end")
    i = int(above[0])
    if i == 0:
        return float(t[0])
    t_lo, t_hi, h_lo, h_hi = t[i - 1], t[i], h[i - 1], h[i]
    frac = (level - h_lo) / (h_hi - h_lo)
    if t_lo > 0:
        return float(math.exp(math.log(t_lo) + frac * (math.log(t_hi) - math.log(t_lo))))
    return float(t_lo + frac * (t_hi - t_lo))


def transition_time(traj, source: str = "auto"):
    """Crossover time ``t_0`` where ``exp(h) = M - 1``, i.e. ``alpha_nn = 1/2`` (CF2).

    The first sample with ``h >= ln(M - 1)`` is located and ``h`` is
    interpolated linearly in ``log t`` between it and the previous sample
    (linearly in ``t`` when the previous sample is ``t = 0``). Both stages of
    ``gamma`` are close to power laws in ``t`` (CF2), so log-time
    interpolation is accurate on the log-spaced grids :func:`odeflow.solve`
    uses. CF2 predicts ``t_0 = (M - 2 + (M-1) ln(M-1)) / (eta_Y pi M)``.

    Parameters
    ----------
    traj : Trajectory or SnapResult
        A Level R trajectory (recorded margin), a Level E trajectory
        (margin from :func:`empirical_margin`) or a Sec. 6 result.
    source : {"auto", "recorded", "decoder"}
        ``"recorded"``: the flow's ``margin`` series; ``"decoder"``:
        :func:`empirical_margin`; ``"auto"``: the recorded margin if there is
        one, else the decoder.

    Returns
    -------
    ndarray of shape (K,), or float for a :class:`~odeflow.results.SnapResult`

    Raises
    ------
    ValidationError
        If the margin never reaches ``ln(M - 1)`` on the trajectory.
    """
    if source not in ("auto", "recorded", "decoder"):
        raise ValidationError("source", f"must be 'auto', 'recorded' or 'decoder', "
                              f"got {source!r}")
    t = np.asarray(traj.t, dtype=float)
    if isinstance(traj, SnapResult):  # one margin, M in meta
        if source == "decoder":
            raise ValidationError("source", "a snap result has no decoder")
        level = math.log(int(traj.meta["vocab_size"]) - 1)
        return _crossing_time(t, np.asarray(traj.margin, dtype=float), level)
    series = traj.series
    level = math.log(traj.data.vocab_size - 1)
    if source == "recorded" or (source == "auto" and "margin" in series):
        if "margin" not in series:
            raise ValidationError("source", f"flow {traj.flow!r} records no margin")
        h = np.asarray(series["margin"], dtype=float)
    else:
        h = empirical_margin(traj)
    return np.array([_crossing_time(t, h[:, k], level) for k in range(h.shape[1])])


def eqn11_invariant(traj, next_token: int) -> np.ndarray:
    """``chi_l / ((1 + chi_l) f^_nl(0)^2)`` for the distinct tokens of ``n`` (Eqn 11).

    Theorem 3 says this is the same for every ``l in G_DT(n)`` at each time
    (exactly at Level R, approximately at Level E). Computed as
    ``-expm1(-2 (z_ml(t) - z_ml(0))) / f^_nl(0)^2`` (no cancellation for small
    growth); ``t = 0`` is the first recorded time.

    Returns
    -------
    ndarray, shape (n, D)
        One column per distinct token of ``n`` (``data.distinct_tokens(n)``).
    """
    data = traj.data
    i = data.class_index(next_token)
    tokens = data.distinct_tokens(next_token)
    cols = np.searchsorted(data.active_tokens, tokens)
    z = traj.z_active[:, data.class_query_index[i], :]
    _, F0 = normalised_features(data.active_log_probs[i], z[0])
    dz = z[:, cols] - z[0, cols]
    return -np.expm1(-2.0 * dz) / F0[cols] ** 2


def eqn11_spread(traj, floor: float = 0.0) -> np.ndarray:
    """Relative spread of the Eqn 11 invariant at each time, shape (n,).

    For each class with at least two distinct tokens,
    ``(max_l I_l - min_l I_l) / max_l |I_l|`` with ``I`` from
    :func:`eqn11_invariant`; the largest over classes is returned. Times
    where every ``|chi_l/(1+chi_l)|`` of a class is ``<= floor`` (always
    ``t = 0``, where the invariant is 0/0) count as zero. A trajectory stores
    ``z(t)``, not ``z(t) - z(0)``, so with ``Z(0) != 0`` a growth ``dz`` carries a
    round-off of about ``eps |z(0)| / dz`` relative (and ``atol / dz`` from the
    solver); a ``floor`` of ``1e-4`` keeps only growths resolved well above it.

    Raises
    ------
    ValidationError
        If no class has two distinct tokens.
    """
    data = traj.data
    out = np.zeros(traj.t.size)
    used = 0
    for n in data.next_tokens:
        if data.distinct_tokens(n).size < 2:
            continue
        used += 1
        inv = eqn11_invariant(traj, int(n))
        i = data.class_index(int(n))
        cols = np.searchsorted(data.active_tokens, data.distinct_tokens(n))
        z = traj.z_active[:, data.class_query_index[i], :]
        growth = np.max(np.abs(-np.expm1(-2.0 * (z[:, cols] - z[0, cols]))), axis=1)
        scale = np.max(np.abs(inv), axis=1)
        ok = (growth > floor) & (scale > 0)
        spread = np.zeros(traj.t.size)
        spread[ok] = (np.max(inv[ok], axis=1) - np.min(inv[ok], axis=1)) / scale[ok]
        out = np.maximum(out, spread)
    if used == 0:
        raise ValidationError("data", "Eqn 11 needs a class with at least two distinct tokens")
    return out
