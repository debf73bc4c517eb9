"""Data model of the two-stage family: :class:`TwoStageData`.

odeflow's own model built from the description of Gong et al. (2025, arXiv
2502.20681, "Disentangling Feature Structure: A Mathematically Provable
Two-Stage Training Dynamics in Transformers"): only the paper's abstract could
be read, so nothing here is the paper's construction or claim.

An example is ``x = (p, q)`` with ``p`` in ``R^{d_p}`` (the elementary feature P)
and ``q`` in ``R^{d_q}`` (the specialised feature Q), and a label ``y = +-1``,
equally likely. A present margin block is ``p = y gamma_P w_P + z`` with
``z ~ N(0, I)`` conditioned on ``y <z, w_P> >= 0`` (half-space Gaussian), the
same for ``q`` with ``gamma_Q, w_Q``; an absent block is label-blind ``N(0, I)``.
Kinds: P only (probability ``rho``), Q only (``rho``), both (``1 - 2 rho``).
The cluster Q (``q_kind = "cluster"``) is ``q = z`` for ``y = +1`` and
``q = z + s zeta w_Q`` with ``s = +-1`` equally likely for ``y = -1``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from odeflow.data.checks import as_real_array, check_count, validate_positive
from odeflow.data.forms import TomlForm
from odeflow.errors import ValidationError

#: Largest block size ``d_p`` or ``d_q``.
MAX_BLOCK = 256
#: Losses ``l(m)`` of the margin ``m = y f``: logistic ``log(1 + e^-m)``, squared ``(1 - m)^2 / 2``.
LOSSES = ("logistic", "squared")
#: Q feature laws: a margin feature like P, or the notebook's cluster feature.
Q_KINDS = ("margin", "cluster")
#: Example kinds: 0 P only, 1 Q only, 2 both.
KIND_NAMES = ("p_only", "q_only", "both")
#: A direction whose norm is within this of 1 is kept as given (so a saved one reads back
#: exactly); any other non-zero one is divided by its norm.
UNIT_TOLERANCE = 1e-12
#: Most examples or queries one call of a sampler draws.
MAX_SAMPLES = 10**8


def _direction(value, size: int, name: str) -> tuple:
    """``value`` as a unit vector of length ``size`` (None -> ``(1,...,1)/sqrt(size)``).

    A non-zero vector is normalised (only its direction enters the model); a
    zero, non-finite or wrongly sized one is refused naming ``name``.
    """
    if value is None:
        return tuple([1.0 / math.sqrt(size)] * size)
    arr = as_real_array(value, name)
    if arr.ndim != 1 or arr.size != size:
        raise ValidationError(name, f"must be a vector of length {size}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValidationError(name, "must be finite")
    norm = float(np.linalg.norm(arr))
    if norm == 0.0:
        raise ValidationError(name, "must be non-zero (a direction; it is normalised)")
    if abs(norm - 1.0) > UNIT_TOLERANCE:
        arr = arr / norm
    return tuple(float(v) for v in arr)


@dataclasses.dataclass(frozen=True)
class TwoStageData(TomlForm):
    """Elementary (P) and specialised (Q) features of the two-stage family.

    Parameters
    ----------
    d_p, d_q : int
        Block sizes (``1..MAX_BLOCK``); ``d = d_p + d_q``.
    w_p, w_q : tuple of float or None
        Directions of the margins (for the cluster Q, ``w_q`` is the offset's
        direction ``u``); None -> ``(1,...,1)/sqrt(d)``. A non-unit vector is
        normalised; a zero one is refused.
    gamma_p, gamma_q : float
        Margins ``gamma_P, gamma_Q > 0`` (dimensionless, in units of the noise's
        standard deviation).
    rho : float
        Probability of a P-only example and of a Q-only example, in ``[0, 1/2]``.
    sigma0 : float
        Scale of the start ``W = sigma0 I`` (> 0).
    loss : {"logistic", "squared"}
        ``l(m) = log(1 + e^-m)`` or ``(1 - m)^2 / 2`` of the margin ``m = y f``.
    q_kind : {"margin", "cluster"}
        The law of the Q block.
    zeta : float
        Cluster offset (> 0; used when ``q_kind == "cluster"``).

    Raises
    ------
    ValidationError
        Naming the field.
    """

    d_p: int = 2
    d_q: int = 2
    w_p: tuple | None = None
    w_q: tuple | None = None
    gamma_p: float = 3.0
    gamma_q: float = 0.5
    rho: float = 0.2
    sigma0: float = 0.01
    loss: str = "logistic"
    q_kind: str = "margin"
    zeta: float = 2.0

    family = "two_stage"
    toml_marker = "gamma_p"
    toml_keys = ("d_p", "d_q", "w_p", "w_q", "gamma_p", "gamma_q", "rho", "sigma0", "loss",
                 "q_kind", "zeta")

    def __post_init__(self):
        put = object.__setattr__
        put(self, "d_p", check_count(self.d_p, "d_p", 1, MAX_BLOCK))
        put(self, "d_q", check_count(self.d_q, "d_q", 1, MAX_BLOCK))
        put(self, "w_p", _direction(self.w_p, self.d_p, "w_p"))
        put(self, "w_q", _direction(self.w_q, self.d_q, "w_q"))
        put(self, "gamma_p", validate_positive(self.gamma_p, "gamma_p"))
        put(self, "gamma_q", validate_positive(self.gamma_q, "gamma_q"))
        rho = self.rho
        if isinstance(rho, bool) or not isinstance(rho, (int, float, np.integer, np.floating)):
            raise ValidationError("rho", f"must be a number in [0, 1/2], got {rho!r:.40}")
        if not (math.isfinite(rho) and 0.0 <= rho <= 0.5):
            raise ValidationError("rho", f"must be in [0, 1/2], got {rho!r}")
        put(self, "rho", float(rho))
        put(self, "sigma0", validate_positive(self.sigma0, "sigma0"))
        if self.loss not in LOSSES:
            raise ValidationError("loss", f"must be one of {list(LOSSES)}, got {self.loss!r:.40}")
        if self.q_kind not in Q_KINDS:
            raise ValidationError("q_kind", f"must be one of {list(Q_KINDS)}, got "
                                  f"{self.q_kind!r:.40}")
        put(self, "zeta", validate_positive(self.zeta, "zeta"))

    # ----------------------------------------------------------------- derived
    @property
    def d(self) -> int:
        """``d_p + d_q``."""
        return self.d_p + self.d_q

    @property
    def kind_probabilities(self) -> np.ndarray:
        """``(rho, rho, 1 - 2 rho)``: P only, Q only, both."""
        return np.array([self.rho, self.rho, 1.0 - 2.0 * self.rho])

    @property
    def direction_p(self) -> np.ndarray:
        """``w_P`` as an array."""
        return np.array(self.w_p)

    @property
    def direction_q(self) -> np.ndarray:
        """``w_Q`` (the cluster offset's direction for the cluster Q) as an array."""
        return np.array(self.w_q)

    # ----------------------------------------------------------------- sampling
    def sample_examples(self, n, rng: np.random.Generator):
        """Draw ``n`` labelled examples.

        Returns
        -------
        x : ndarray, shape (n, d)
            ``(p, q)`` rows.
        y : ndarray of int, shape (n,)
            Labels in ``{-1, +1}``.
        kind : ndarray of int, shape (n,)
            0 P only, 1 Q only, 2 both.
        """
        return self.sample_queries(n, rng)

    def sample_queries(self, n, rng: np.random.Generator, kind=None):
        """Draw ``n`` queries from the example law, or of one ``kind`` (0, 1, 2) only.

        Same returns as :meth:`sample_examples`; reproducible for a given ``rng`` state.
        """
        n = check_count(n, "n", 0, MAX_SAMPLES)
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("rng", f"must be a numpy Generator, got {type(rng).__name__}")
        y = rng.choice(np.array([-1, 1]), size=n)
        if kind is None:
            kinds = rng.choice(3, size=n, p=self.kind_probabilities)
        else:
            k = check_count(kind, "kind", 0, 2)
            kinds = np.full(n, k)
        p = rng.standard_normal((n, self.d_p))
        q = rng.standard_normal((n, self.d_q))
        has_p, has_q = kinds != 1, kinds != 0
        p[has_p] = _margin_block(p[has_p], y[has_p], self.gamma_p, self.direction_p)
        if self.q_kind == "margin":
            q[has_q] = _margin_block(q[has_q], y[has_q], self.gamma_q, self.direction_q)
        else:
            neg = has_q & (y < 0)
            s = rng.choice(np.array([-1.0, 1.0]), size=int(neg.sum()))
            q[neg] += self.zeta * s[:, None] * self.direction_q[None, :]
        return np.concatenate([p, q], axis=1), y, kinds

    # ----------------------------------------------------------------- forms
    def to_dict(self) -> dict:
        """Plain-python form (also the TOML schema); ``w_p``, ``w_q`` as lists."""
        d = dataclasses.asdict(self)
        d["w_p"], d["w_q"] = list(self.w_p), list(self.w_q)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> TwoStageData:
        """Build from the form of :meth:`to_dict` (every key optional; unknown keys refused)."""
        if not isinstance(d, Mapping):
            raise ValidationError("data model", f"must be a table, got {type(d).__name__}")
        extra = sorted(map(str, set(d) - set(cls.toml_keys)))
        if extra:
            raise ValidationError(extra[0], f"unknown key {extra[0]!r}; allowed: "
                                  f"{sorted(cls.toml_keys)}")
        kwargs = dict(d)
        for key in ("w_p", "w_q"):
            if kwargs.get(key) is not None:
                kwargs[key] = tuple(as_real_array(kwargs[key], key).ravel().tolist())
        return cls(**kwargs)

    @classmethod
    def preset_table(cls) -> dict:
        """The built-in models: ``"ts-default"``, ``"ts-cluster"`` (:data:`PRESETS`)."""
        return PRESETS


def _margin_block(z: np.ndarray, y: np.ndarray, gamma: float, w: np.ndarray) -> np.ndarray:
    """``y gamma w + z`` with ``z ~ N(0, I)`` conditioned on ``y <z, w> >= 0``.

    The component of ``z`` along ``w`` is replaced by ``y |<z, w>|`` (the half-space
    Gaussian: its perpendicular part is independent of it), so a row is
    ``y (gamma + |c|) w + z_perp`` with ``c ~ N(0, 1)``.
    """
    c = z @ w
    z_perp = z - c[:, None] * w[None, :]
    return (y * (gamma + np.abs(c)))[:, None] * w[None, :] + z_perp


def default_preset() -> TwoStageData:
    """``ts-default``: ``d_P = d_Q = 2``, ``w = (1, 1)/sqrt 2``, ``gamma_P = 3``,
    ``gamma_Q = 0.5``, ``rho = 0.2``, ``sigma0 = 0.01``, logistic loss, margin Q."""
    return TwoStageData()


def cluster_preset() -> TwoStageData:
    """``ts-cluster``: ``ts-default`` with the cluster Q (``zeta = 2``)."""
    return TwoStageData(q_kind="cluster")


#: Name -> factory of the built-in two-stage models.
PRESETS = {"ts-default": default_preset, "ts-cluster": cluster_preset}

__all__ = ["KIND_NAMES", "LOSSES", "MAX_BLOCK", "PRESETS", "Q_KINDS", "TwoStageData"]
