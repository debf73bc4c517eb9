"""Closed-form solutions of the reduced (Level R) dynamics.

Vectorised numpy / :mod:`scipy.special` evaluations of the closed forms of
Tian, Wang, Chen and Du, "Scan and Snap" (NeurIPS 2023, arXiv:2305.16380),
as derived and checked with sympy in the top-level ``derivations`` package
(``python -m derivations``):

===========================  ===================================  =====================
function                     quantity                             paper
===========================  ===================================  =====================
:func:`decoder_margin`       logit margin ``h(t)``                Lemma 6, Eqns 44-45
:func:`speed_control`        ``gamma(t)``                         Eqn 9, Theorem 1
:func:`speed_control_early`  ``gamma`` for ``t << t_0``           Lemma 9, Theorem 1(b)
:func:`speed_control_late`   ``gamma`` for ``t >> t_0``           Lemma 9, Theorem 1(b)
:func:`transition_time`      crossover ``t_0`` (``e^h = M - 1``)  Lemma 9, Theorem 1(b)
:func:`gamma_integral`       ``Gamma(t) = int_0^t gamma``         Eqn 128
:func:`relative_gain`        ``r_{l/l'|n}``                       Theorem 3, Eqn 11
:func:`dominant_bounds`      bounds on ``1 + chi_l0``             Eqn 12
:func:`snap_common_logit`    common-token logit ``z_c(t)``        Thm 4, Eqns 13, 124
:func:`snap_B`               ``B_n(t)``                           Thm 4, Eqns 14, 129
===========================  ===================================  =====================

All functions broadcast their arguments, return a numpy float (0-d input) or
array, stay finite for ``t`` up to ``1e12`` and ``M`` up to ``1e6`` (and far
beyond), and are accurate to about ``1e-13`` relative.  Invalid arguments
raise :class:`odeflow.ValidationError` (a :class:`ValueError`) naming the
argument and the offending value.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import wrightomega

from odeflow.errors import ValidationError

__all__ = [
    "decoder_margin",
    "speed_control",
    "speed_control_early",
    "speed_control_late",
    "transition_time",
    "gamma_integral",
    "relative_gain",
    "dominant_bounds",
    "snap_common_logit",
    "snap_B",
]

# Below this value of u = eta_y * pi * t, h(t) = u (1 + O(u / M)) is used as
# the Newton starting point (an upper bound of h, F being convex).
_SERIES_SWITCH = 1e-4
_NEWTON_STEPS = 2


def _guarded(function):
    """Run a closed form with floating-point warnings off, whatever ``np.seterr`` says.

    Intermediate underflow and overflow are handled in the formulas; every
    result is checked by :func:`_out` (finite, or a ValidationError), so a
    caller's ``np.errstate(all="raise")`` cannot turn them into a raw
    FloatingPointError.
    """
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return function(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------
def _to_array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nesting
        raise ValidationError(name, f"must be a number or a rectangular array, got "
                              f"{name}={value!r:.80} ({str(exc).split('.')[0]})") from None
    if arr.dtype == object or arr.dtype.kind == "b" or not np.isrealobj(arr):
        raise ValidationError(name, f"must be real, got {name}={value!r}")
    try:
        arr = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise ValidationError(name, f"must be numeric, got {name}={value!r}") from exc
    return arr


def _require(name: str, arr: np.ndarray, ok: np.ndarray, requirement: str) -> None:
    ok = np.asarray(ok)
    if not np.all(ok):
        bad = arr[~ok] if arr.ndim else arr
        first = np.ravel(bad)[0].item()
        where = ""
        if arr.ndim:
            index = tuple(int(i) for i in np.argwhere(~ok)[0])
            where = f" (first offending element at index {index})"
        raise ValidationError(name, f"must be {requirement}, got {name}={first!r}{where}")


def _finite(name: str, value) -> np.ndarray:
    arr = _to_array(name, value)
    _require(name, arr, np.isfinite(arr), "finite")
    return arr


def _positive(name: str, value) -> np.ndarray:
    arr = _finite(name, value)
    _require(name, arr, arr > 0, "> 0")
    return arr


def _nonnegative(name: str, value) -> np.ndarray:
    arr = _finite(name, value)
    _require(name, arr, arr >= 0, ">= 0")
    return arr


def _vocab(value) -> np.ndarray:
    arr = _finite("M", value)
    _require("M", arr, arr >= 2, ">= 2")
    return arr


def _weight(value, name: str = "pi") -> np.ndarray:
    arr = _positive(name, value)
    _require(name, arr, arr <= 1, "<= 1")
    return arr


def _unit_feature(name: str, value) -> np.ndarray:
    arr = _positive(name, value)
    _require(name, arr, arr <= 1, "<= 1 (an entry of an l2-normalised feature)")
    return arr


#: Largest finite double, the range every result must fit in.
_BIG = float(np.finfo(float).max)


def _broadcast(**arrays) -> list[np.ndarray]:
    """``np.broadcast_arrays`` whose shape mismatch is a ValidationError naming the arguments."""
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        shapes = ", ".join(f"{k}{np.shape(v)}" for k, v in arrays.items())
        raise ValidationError(", ".join(arrays), f"shapes do not broadcast together: {shapes}"
                              ) from None


def _out(x: np.ndarray, field: str = "arguments", what: str = "the result", hint: str = "",
         args: dict | None = None):
    """A numpy scalar for 0-d results, the array otherwise; never inf or NaN.

    A result outside double precision is refused with a ValidationError naming
    ``field``, the offending arguments and the representable range.
    """
    x = np.asarray(x, dtype=float)
    bad = ~np.isfinite(x)
    if np.any(bad):
        index = tuple(int(i) for i in np.argwhere(bad)[0]) if x.ndim else ()
        shown = ""
        if args:
            shown = " at " + ", ".join(
                f"{k}={np.asarray(v)[index].item() if np.ndim(v) else np.asarray(v).item()!r}"
                for k, v in args.items())
        raise ValidationError(field, f"{what} is {x[index].item()!r}{shown}: outside double "
                              f"precision (|value| <= {_BIG:.4g}){'; ' + hint if hint else ''}")
    return x[()]


def _margin_args(t, M, eta_y, pi):
    t = _nonnegative("t", t)
    M = _vocab(M)
    eta_y = _positive("eta_y", eta_y)
    pi = _weight(pi)
    return _broadcast(t=t, M=M, eta_y=eta_y, pi=pi)


def _margin(t, M, eta_y, pi) -> np.ndarray:
    """h(t) for validated, broadcast float arrays (see decoder_margin)."""
    with np.errstate(over="ignore", divide="ignore"):
        u = eta_y * pi * t  # = eta_y pi M t / M, the slope-1 variable
        # an intermediate product that underflowed (eta_y pi < 1e-308): redo it in logs
        u = np.where((u == 0) & (t > 0), np.exp(np.log(eta_y) + np.log(pi) + np.log(t)), u)
        At = u * M  # eta_y pi M t
    if not np.all(np.isfinite(At)):
        bad = np.ravel(t[~np.isfinite(At)])[0].item()
        raise ValidationError(
            "t", f"t={bad!r} is too large: eta_y*pi*M*t overflows double precision"
        )
    Mm1 = M - 1.0
    log_Mm1 = np.log(Mm1)
    # x = (eta_y pi M t + 1)/(M - 1), W = LambertW(exp(x)/(M-1)) = omega(x - log(M-1)).
    x = u * (M / Mm1) + 1.0 / Mm1
    W = wrightomega(x - log_Mm1)
    with np.errstate(divide="ignore"):
        h_w = log_Mm1 + np.log(W)  # = x - W without the cancellation
    use_series = (u < _SERIES_SWITCH) | ~(W > 0) | ~np.isfinite(h_w)
    h = np.where(use_series, u, h_w)

    # Newton on F(h) = expm1(h) + (M-1) h - eta_y pi M t, F' = exp(h) + M - 1.
    # For h > 1 both are scaled by exp(-h) so that exp(h) never overflows.
    for _ in range(_NEWTON_STEPS):
        h_small = np.minimum(h, 1.0)
        h_large = np.maximum(h, 1.0)
        step_small = (np.expm1(h_small) + Mm1 * h_small - At) / (np.exp(h_small) + Mm1)
        e = np.exp(-h_large)
        step_large = (-np.expm1(-h_large) + (Mm1 * h_large - At) * e) / (1.0 + Mm1 * e)
        h = h - np.where(h > 1.0, step_large, step_small)
    return np.maximum(h, 0.0)


def _gamma_from_h(h: np.ndarray, M: np.ndarray) -> np.ndarray:
    e = np.exp(-h)
    return h * (M - 1.0) * e / (1.0 + (M - 1.0) * e)


# ---------------------------------------------------------------------------
# CF1
# ---------------------------------------------------------------------------
@_guarded
def decoder_margin(t, M, eta_y, pi):
    """Decoder logit margin ``h(t)`` of the reduced flow (Lemma 6, Eqns 44-45).

    Solves ``dh/dt = eta_y pi M / (exp(h) + M - 1)``, ``h(0) = 0`` (Eqn 44),
    whose implicit solution is ``exp(h) - 1 + (M - 1) h = eta_y pi M t`` and
    explicit solution (Eqn 45), with ``x = (eta_y pi M t + 1) / (M - 1)``,
    ``h = x - W_0(exp(x) / (M - 1)) = log(M - 1) + log(omega(x - log(M - 1)))``
    (``omega`` = :func:`scipy.special.wrightomega`).  The Wright-omega value
    is polished by Newton steps on the implicit equation, which restores full
    relative accuracy for tiny ``t`` (where the log form cancels) and keeps
    ``exp(h)`` from overflowing for huge ``t``.

    Parameters
    ----------
    t : array_like
        Time, ``t >= 0``.
    M : array_like
        Vocabulary size, ``M >= 2`` (real values allowed).
    eta_y : array_like
        Decoder learning rate, finite and ``> 0``.
    pi : array_like
        Class weight ``pi_n``, ``0 < pi <= 1``.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        ``h(t)`` (broadcast shape of the arguments).

    Raises
    ------
    odeflow.ValidationError
        If an argument is out of range (the message names it and its value).

    Examples
    --------
    >>> float(decoder_margin(0.0, 10, 1.0, 0.5))
    0.0
    """
    t, M, eta_y, pi = _margin_args(t, M, eta_y, pi)
    return _out(_margin(t, M, eta_y, pi))


# ---------------------------------------------------------------------------
# CF2
# ---------------------------------------------------------------------------
@_guarded
def speed_control(t, M, eta_y, pi):
    """Speed-control coefficient ``gamma(t) = h (M - 1) / (exp(h) + M - 1)``.

    The coefficient of the back-propagated gradient (Eqn 9, Theorem 1) for
    uniform class weights, with ``h(t)`` from :func:`decoder_margin`.  Written
    as ``h (M - 1) exp(-h) / (1 + (M - 1) exp(-h))`` to avoid overflow.  Its
    two regimes are :func:`speed_control_early` and
    :func:`speed_control_late` (Lemma 9, Theorem 1(b)).

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        ``gamma(t)``.

    Raises
    ------
    odeflow.ValidationError
        If an argument is out of range.
    """
    t, M, eta_y, pi = _margin_args(t, M, eta_y, pi)
    return _out(_gamma_from_h(_margin(t, M, eta_y, pi), M))


@_guarded
def speed_control_early(t, M, eta_y, pi):
    """Early-time asymptote ``gamma ~ eta_y pi t (M - 1) / M`` (Lemma 9, Theorem 1(b)).

    Valid while ``h << ln M``, i.e. ``t << t_0`` (:func:`transition_time`).

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    t, M, eta_y, pi = _margin_args(t, M, eta_y, pi)
    with np.errstate(over="ignore"):
        value = eta_y * pi * t * ((M - 1.0) / M)
    return _out(value, "t", "gamma_early", args={"t": t, "eta_y": eta_y, "pi": pi})


@_guarded
def speed_control_late(t, M, eta_y, pi):
    """Late-time asymptote ``gamma ~ (M - 1) ln(eta_y pi M t) / (eta_y pi M t)``.

    Lemma 9, Theorem 1(b): valid once ``h >> ln M``, i.e. ``t >> t_0``
    (:func:`transition_time`); the ratio to :func:`speed_control` tends to 1.
    Evaluated as ``((M - 1)/M) ln(eta_y pi M t) / (eta_y pi t)`` with the
    logarithm taken as a sum of logarithms, so it does not overflow.

    Parameters
    ----------
    t : array_like
        Time, ``t > 0`` (the asymptote is undefined at ``t = 0``).
    M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Negative where ``eta_y pi M t < 1``, far outside its range of validity.

    Raises
    ------
    odeflow.ValidationError
        If an argument is out of range or ``t == 0``.
    """
    t = _positive("t", t)
    t, M, eta_y, pi = _margin_args(t, M, eta_y, pi)
    log_At = np.log(eta_y) + np.log(pi) + np.log(M) + np.log(t)
    # ln(A t) / (eta_y pi t) with the denominator as exp(-sum of logs): no underflow to 0
    with np.errstate(over="ignore"):
        value = ((M - 1.0) / M) * log_At * np.exp(-(np.log(eta_y) + np.log(pi) + np.log(t)))
    return _out(value, "t", "gamma_late", hint="the late-time asymptote is for t >> t_0",
                args={"t": t, "M": M, "eta_y": eta_y, "pi": pi})


@_guarded
def transition_time(M, eta_y, pi):
    """Crossover time ``t_0`` at which ``exp(h) = M - 1`` (Lemma 9, Theorem 1(b)).

    From the implicit form of Eqn 45:
    ``t_0 = (M - 2 + (M - 1) ln(M - 1)) / (eta_y pi M)``, i.e.
    ``O(K ln M / eta_y)`` for ``pi = 1/K``.  ``t_0 = 0`` for ``M = 2``.

    Parameters
    ----------
    M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    M = _vocab(M)
    eta_y = _positive("eta_y", eta_y)
    pi = _weight(pi)
    M, eta_y, pi = _broadcast(M=M, eta_y=eta_y, pi=pi)
    # (M - 2 + (M - 1) ln(M - 1)) / M first (always finite), then the rates one at a time
    per_token = (M - 2.0) / M + ((M - 1.0) / M) * np.log1p(M - 2.0)
    with np.errstate(over="ignore"):
        value = per_token / eta_y / pi
    return _out(value, "eta_y", "t_0", hint="eta_y * pi is too small",
                args={"M": M, "eta_y": eta_y, "pi": pi})


# ---------------------------------------------------------------------------
# CF3
# ---------------------------------------------------------------------------
@_guarded
def gamma_integral(t, M, eta_y, pi):
    """``Gamma(t) = int_0^t gamma(s) ds = (M - 1) h(t)^2 / (2 M eta_y pi)`` (Eqn 128).

    Follows from ``gamma = h (M - 1) h' / (eta_y pi M)`` (Eqn 44).

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    t, M, eta_y, pi = _margin_args(t, M, eta_y, pi)
    h = _margin(t, M, eta_y, pi)
    with np.errstate(over="ignore"):
        value = _gamma_integral(h, M, eta_y, pi)
    return _out(value, "t", "Gamma(t)", args={"t": t, "M": M, "eta_y": eta_y, "pi": pi})


def _gamma_integral(h, M, eta_y, pi):
    """(M - 1) h^2 / (2 M eta_y pi), as (h / eta_y)(h / pi): no 0/0 when h^2 underflows."""
    return (0.5 * (M - 1.0) / M) * (h / eta_y) * (h / pi)


# ---------------------------------------------------------------------------
# CF4, CF5
# ---------------------------------------------------------------------------
@_guarded
def relative_gain(chi_l, f0_l, f0_lprime):
    """Relative gain ``r_{l/l'|n}(t) = (fhat_l(0)^2 / fhat_l'(0)^2 - 1) chi_l(t)`` (Eqn 11).

    Theorem 3: for two distinct tokens ``l, l'`` of class ``n``,
    ``fhat_l(t)^2/fhat_l'(t)^2 - fhat_l(0)^2/fhat_l'(0)^2`` equals this
    expression, with the growth factor
    ``chi_l(t) = exp(2 (z_l(t) - z_l(0))) - 1``.

    Parameters
    ----------
    chi_l : array_like
        Growth factor of token ``l``, finite and ``> -1``.
    f0_l, f0_lprime : array_like
        Initial features ``fhat_l(0)`` and ``fhat_l'(0)`` (not squared),
        ``0 < f <= 1``.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    chi_l = _finite("chi_l", chi_l)
    _require("chi_l", chi_l, chi_l > -1, "> -1")
    f0_l = _unit_feature("f0_l", f0_l)
    f0_lprime = _unit_feature("f0_lprime", f0_lprime)
    chi_l, f0_l, f0_lprime = _broadcast(chi_l=chi_l, f0_l=f0_l, f0_lprime=f0_lprime)
    # (f^2/g^2 - 1) = ((f - g)/g) ((f + g)/g): no cancellation, no underflow of g^2
    with np.errstate(over="ignore", invalid="ignore"):
        value = ((f0_l - f0_lprime) / f0_lprime) * ((f0_l + f0_lprime) / f0_lprime) * chi_l
    return _out(value, "chi_l", "r", args={"chi_l": chi_l, "f0_l": f0_l,
                                           "f0_lprime": f0_lprime})


@_guarded
def dominant_bounds(B, f0_l0, log=False):
    """Bounds ``exp(2 fhat_l0(0)^2 B) <= 1 + chi_l0 <= exp(2 B)`` (Eqn 12).

    Valid for the dominant distinct token ``l0`` of a class when the common
    tokens' logits do not grow, ``B = B_n(t) >= 0`` being the integrated rate
    of Eqn 98.

    Parameters
    ----------
    B : array_like
        ``B_n(t)``, finite and ``>= 0``.
    f0_l0 : array_like
        ``fhat_l0(0)`` (not squared), ``0 < f <= 1``.
    log : bool, optional
        Return the bounds on ``ln(1 + chi_l0)`` instead (no overflow).

    Returns
    -------
    (lower, upper) : tuple
        Bounds on ``1 + chi_l0`` (or on its logarithm if ``log``).
    """
    B = _nonnegative("B", B)
    f0_l0 = _unit_feature("f0_l0", f0_l0)
    B, f0_l0 = _broadcast(B=B, f0_l0=f0_l0)
    with np.errstate(over="ignore"):
        lo_log = 2.0 * f0_l0 * f0_l0 * B
        hi_log = 2.0 * B
    if log:
        return _out(lo_log, "B", "2 B", args={"B": B}), _out(hi_log, "B", "2 B", args={"B": B})
    hint = f"exp(2 B) needs B <= {np.log(_BIG) / 2:.6g}; pass log=True for larger B"
    with np.errstate(over="ignore"):
        return (_out(np.exp(lo_log), "B", "exp(2 f^2 B)", hint, {"B": B, "f0_l0": f0_l0}),
                _out(np.exp(hi_log), "B", "exp(2 B)", hint, {"B": B}))


# ---------------------------------------------------------------------------
# CF6
# ---------------------------------------------------------------------------
def _snap_log1pq(t, M, eta_y, eta_z, pi, a, zc0):
    """ln(1 + q), q = 2 a eta_z exp(2 zc0) Gamma(t), and the broadcast zc0."""
    t, M, eta_y, pi = _margin_args(t, M, eta_y, pi)
    eta_z = _positive("eta_z", eta_z)
    a = _nonnegative("a", a)
    zc0 = _finite("zc0", zc0)
    t, M, eta_y, pi, eta_z, a, zc0 = _broadcast(t=t, M=M, eta_y=eta_y, pi=pi, eta_z=eta_z,
                                                a=a, zc0=zc0)
    h = _margin(t, M, eta_y, pi)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        Gamma = _gamma_integral(h, M, eta_y, pi)
        q_direct = 2.0 * a * eta_z * Gamma * np.exp(2.0 * zc0)
        # every factor in log space, so that no product overflows before the log
        log_Gamma = (np.log(0.5 * (M - 1.0) / M) + 2.0 * np.log(h) - np.log(eta_y)
                     - np.log(pi))
        log_q = np.log(2.0) + np.log(a) + np.log(eta_z) + log_Gamma + 2.0 * zc0
        representable = (q_direct > 1e-290) | (q_direct == 0.0)
        direct = np.isfinite(q_direct) & (np.abs(zc0) < 300.0) & representable
        log1p_direct = np.log1p(np.where(direct, q_direct, 0.0))
        L = np.where(direct, log1p_direct, np.logaddexp(0.0, log_q))
        L = np.where(a == 0.0, 0.0, L)  # q = 0 exactly, whatever Gamma is
    return L, zc0, pi


@_guarded
def snap_common_logit(t, M, eta_y, eta_z, pi, a, zc0):
    """Common-token logit ``z_c(t)`` in the setting of Theorem 4 (Eqns 13, 124).

    Solves ``dz_c/dt = -a eta_z gamma(t) exp(2 z_c)``:
    ``z_c(t) = -1/2 ln(exp(-2 z_c(0)) + 2 a eta_z Gamma(t))``, with
    ``Gamma`` from Eqn 128 (:func:`gamma_integral`).  Evaluated as
    ``z_c(0) - 1/2 ln(1 + 2 a eta_z exp(2 z_c(0)) Gamma)`` with
    ``log1p`` / ``logaddexp``.

    Parameters
    ----------
    t, M, eta_y, pi : array_like
        As in :func:`decoder_margin`.
    eta_z : array_like
        Attention learning rate, finite and ``> 0``.
    a : array_like
        ``a = beta (K - 1) c_{c|n}^2 / rho_0^2``, finite and ``>= 0``.
    zc0 : array_like
        Initial common-token logit ``z_c(0)``, finite.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    L, zc0, _ = _snap_log1pq(t, M, eta_y, eta_z, pi, a, zc0)
    return _out(zc0 - 0.5 * L, "t", "z_c(t)")


@_guarded
def snap_B(t, M, eta_y, eta_z, pi, a, zc0):
    """``B_n(t) = (pi/2) ln(1 + 2 a eta_z exp(2 z_c(0)) Gamma(t))`` (Thm 4, Eqns 14, 129).

    With Eqn 128 this is
    ``(pi/2) ln(1 + a exp(2 z_c(0)) (M - 1) eta_z h(t)^2 / (M eta_y pi))``:
    ``B`` grows like ``ln(1 + C eta_z eta_y t^2)`` while ``t << t_0``
    (scanning) and like ``pi ln ln t`` once ``t >> t_0`` (snapping).

    Parameters
    ----------
    t, M, eta_y, eta_z, pi, a, zc0 : array_like
        As in :func:`snap_common_logit`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
    """
    L, _, pi = _snap_log1pq(t, M, eta_y, eta_z, pi, a, zc0)
    return _out(0.5 * pi * L, "t", "B(t)")
