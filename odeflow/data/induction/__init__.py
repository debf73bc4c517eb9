"""Data model of the induction-head family (Chen, Sheen, Wang, Yang 2024; ``docs/induction.md``).

:class:`InductionData` describes the n-gram Markov data of "Unveiling Induction
Heads" and the model it trains: vocabulary ``d``, n-gram order ``n``, number of
copier heads ``H``, selector degree ``D``, the prior over transition kernels
(a seeded Dirichlet sample or one fixed kernel) and the initial parameters
``w+, w-, c0, a0``. The chain's laws live in :mod:`odeflow.data.induction.markov`.

Layout of the family: tokens ``0..d-1``;
kernel arrays ``(N_pi, d**(n-1), d)`` with context index
``r = sum_m x_{i-m} d**(n-1-m)``; subsets of heads from :func:`subsets`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from odeflow.data.checks import as_real_array, check_count, validate_finite, validate_positive
from odeflow.data.forms import TomlForm
from odeflow.data.induction import markov
from odeflow.errors import ValidationError

#: Absolute tolerance on each kernel row summing to 1 (no renormalisation is done).
SUM_TOLERANCE = 1e-9
#: Most token windows ``d**(2H-1)`` a model may have: the population flow holds about
#: ``H + 6`` dense (windows x windows) float arrays, 32 MiB each at this size.
MAX_WINDOWS = 2048
#: Most entries ``N_pi * d**(2H-1) * d`` of the window laws (8 bytes each: 128 MiB);
#: one right-hand side multiplies a (windows x windows) matrix by ``N_pi (d+1)`` columns.
MAX_LAW_ENTRIES = 2**24
#: Most contexts ``d**(n-1)``: the stationary law solves one dense system of this size
#: per kernel.
MAX_CONTEXTS = 1024
#: Most entries ``N_pi * d**(2(n-1))`` of the context chains' transition matrices (8 bytes
#: each: 128 MiB); their stationary laws take ``N_pi`` dense solves of ``d**(n-1)`` equations.
MAX_CHAIN_ENTRIES = 2**24
#: Most kernels ``N_pi`` in a Dirichlet sample (each is stored with its window laws).
MAX_KERNELS = 100_000
#: Kernels drawn for the ``ih-paper`` preset (``docs/induction.md``); the population
#: flow's cost grows linearly in it.
PAPER_NUM_KERNELS = 256
#: Seed of the ``ih-paper`` kernel sample.
PAPER_SEED = 2024
#: The point-mass kernel of the authors' notebook (d = 2, n = 3; row x_{i-1} d + x_{i-2}).
POINT_KERNEL = ((0.4992, 0.5008), (0.0081, 0.9919), (0.8004, 0.1996), (0.1080, 0.8920))

PRIOR_KINDS = ("dirichlet", "point")
INIT_KEYS = ("w_plus", "w_minus", "c0", "a0")


def subsets(H: int, D: int) -> list[tuple]:
    """Every subset of the heads ``{1..H}`` with at most ``D`` elements, the empty set first.

    Ordered by size, then lexicographically, as tuples of head numbers (the
    family's convention): ``subsets(3, 2) == [(), (1,), (2,), (3,), (1, 2), (1, 3),
    (2, 3)]``. One selector coefficient ``c_S`` per subset (``docs/induction.md``, "Model").
    """
    return [s for k in range(int(D) + 1) for s in itertools.combinations(range(1, int(H) + 1), k)]


def subset_label(subset) -> str:
    """``"{1,2}"`` for the subset of heads ``(1, 2)`` (``"{}"`` for the empty one)."""
    return "{" + ",".join(str(int(h)) for h in subset) + "}"


def check_kernel(kernel, vocab_size: int, n_gram: int, field_name: str = "kernel") -> np.ndarray:
    """A transition kernel as a float array of shape (d**(n-1), d), checked, not renormalised.

    Raises a ValidationError naming ``field_name`` (and the row) for a wrong
    shape, a non-finite or negative entry, or a row whose sum differs from 1
    by more than :data:`SUM_TOLERANCE`.
    """
    arr = as_real_array(kernel, field_name)
    C, d = vocab_size ** (n_gram - 1), vocab_size
    if arr.shape == (1, C, d):
        arr = arr[0]
    if arr.shape != (C, d):
        raise ValidationError(field_name, f"must have shape (d**(n-1), d) = ({C}, {d}), got "
                              f"{arr.shape}")
    for r in range(C):
        row = arr[r]
        if not np.all(np.isfinite(row)):
            raise ValidationError(f"{field_name}[{r}]", f"must be finite, got {row.tolist()}")
        if np.any(row < 0):
            raise ValidationError(f"{field_name}[{r}]", f"probabilities must be >= 0, got "
                                  f"{row.tolist()}")
        if abs(row.sum() - 1.0) > SUM_TOLERANCE:
            raise ValidationError(f"{field_name}[{r}]", f"probabilities must sum to 1 (within "
                                  f"{SUM_TOLERANCE:g}), sum is {row.sum()!r}")
    return arr


class InductionData(TomlForm):
    """n-gram Markov data and the initial model of the induction-head family.

    Parameters
    ----------
    vocab_size : int
        ``d >= 2``.
    n_gram : int
        ``n >= 2``: each token's parents are the tokens at offsets ``1..n-1``.
    heads : int
        ``H >= 1`` copier heads; head ``h`` reads offsets ``h..h+H-1``.
    degree : int
        ``D``, ``1 <= D <= H``: the selector has one coefficient per subset of at
        most ``D`` heads (:func:`subsets`).
    prior : {"dirichlet", "point"} or array_like
        A kernel array given here is a point-mass prior on it (``kernel=``).
        ``"dirichlet"``: each kernel row ``~ Dirichlet(alpha 1_d)``; the
        population flow averages over a seeded sample of ``num_kernels``
        kernels (:func:`markov.sample_dirichlet_kernels`). ``"point"``: the
        one kernel ``kernel``, every expectation exact.
    alpha : float
        Dirichlet concentration (> 0).
    num_kernels : int
        ``N_pi``, kernels in the sample (Dirichlet prior).
    seed : int
        Seed of the kernel sample (Dirichlet prior).
    kernel : array_like of shape (d**(n-1), d)
        The kernel of a point-mass prior; rows sum to 1 (``docs/induction.md``, "Data").
    w_plus, w_minus : float
        Initial copier logits: ``w[h-1, 0] = w+``, ``w[h-1, j] = w-`` for ``j > 0``.
    c0 : float
        Initial selector coefficient of every subset (non-zero: ``p_S = c_S^2 /
        sum c^2`` is undefined at ``c = 0``).
    a0 : float
        Initial classifier weight ``a``.

    Raises
    ------
    ValidationError
        Naming the field: sizes out of range (``degree`` above ``heads``,
        ``n_gram`` below 2, more than :data:`MAX_WINDOWS` windows or
        :data:`MAX_LAW_ENTRIES` window-law entries, more than
        :data:`MAX_CONTEXTS` contexts or :data:`MAX_CHAIN_ENTRIES` context-chain
        entries), ``alpha`` not > 0, a kernel that is not
        a probability table, non-finite initial values.
    """

    toml_keys = ("vocab_size", "n_gram", "heads", "degree", "prior", "init")
    family = "induction"

    def __init__(self, vocab_size, n_gram, heads, degree, prior: str = "dirichlet",
                 alpha=0.1, num_kernels=PAPER_NUM_KERNELS, seed=0, kernel=None,
                 w_plus=3.0, w_minus=0.1, c0=0.01, a0=0.01):
        self.vocab_size = d = check_count(vocab_size, "vocab_size", 2)
        self.n_gram = n = check_count(n_gram, "n_gram", 2)
        self.heads = H = check_count(heads, "heads", 1)
        self.degree = check_count(degree, "degree", 1)
        if self.degree > H:
            raise ValidationError("degree", f"must be <= heads = {H} (subsets of at most D "
                                  f"heads), got {self.degree}")
        if d ** (n - 1) > MAX_CONTEXTS:
            raise ValidationError("n_gram", f"d**(n-1) = {d}**{n - 1} contexts exceed the "
                                  f"limit {MAX_CONTEXTS}")
        if d ** (2 * H - 1) > MAX_WINDOWS:
            raise ValidationError("heads", f"d**(2H-1) = {d}**{2 * H - 1} token windows exceed "
                                  f"the limit {MAX_WINDOWS} (dense window x window arrays)")
        if not isinstance(prior, str):
            prior, kernel = "point", prior
        if prior not in PRIOR_KINDS:
            raise ValidationError("prior", f"must be one of {list(PRIOR_KINDS)}, got {prior!r}")
        self.prior = prior
        if prior == "dirichlet":
            self.alpha = validate_positive(alpha, "alpha")
            self.num_kernels = check_count(num_kernels, "num_kernels", 1, MAX_KERNELS)
            self.seed = check_count(seed, "seed", 0)
            self.kernel = None
            if kernel is not None:
                raise ValidationError("kernel", "is given only with prior='point'")
        else:
            if kernel is None:
                raise ValidationError("kernel", "is required with prior='point'")
            self.kernel = check_kernel(kernel, d, n)
            self.alpha = None
            self.num_kernels = 1
            self.seed = None
        if self.num_kernels * d ** (2 * H - 1) * d > MAX_LAW_ENTRIES:
            raise ValidationError("num_kernels", f"N_pi * d**(2H-1) * d = {self.num_kernels} * "
                                  f"{d ** (2 * H - 1)} * {d} window-law entries exceed the limit "
                                  f"{MAX_LAW_ENTRIES}")
        if self.num_kernels * d ** (2 * (n - 1)) > MAX_CHAIN_ENTRIES:
            raise ValidationError("num_kernels", f"N_pi * d**(2(n-1)) = {self.num_kernels} * "
                                  f"{d ** (2 * (n - 1))} context-chain entries exceed the limit "
                                  f"{MAX_CHAIN_ENTRIES}")
        self.w_plus = validate_finite(w_plus, "w_plus")
        self.w_minus = validate_finite(w_minus, "w_minus")
        self.c0 = validate_finite(c0, "c0")
        if self.c0 == 0:
            raise ValidationError("c0", "must be non-zero (p_S = c_S^2 / sum c^2)")
        self.a0 = validate_finite(a0, "a0")
        self._kernels = None
        self._joints = {}

    # ----------------------------------------------------------------- derived
    @property
    def subsets(self) -> list[tuple]:
        """:func:`subsets` ``(H, D)``."""
        return subsets(self.heads, self.degree)

    @property
    def window_length(self) -> int:
        """``2H - 1``: the offsets a copier head can read (the population flow's windows)."""
        return 2 * self.heads - 1

    @property
    def num_parameters(self) -> int:
        """Length of the flat parameter vector ``(c, w, a)``: ``#S + H**2 + 1``."""
        return len(self.subsets) + self.heads ** 2 + 1

    def window_laws(self) -> np.ndarray:
        """``mu(z, e)`` for windows of :attr:`window_length` tokens, (N_pi, d**(2H-1), d)."""
        return self.window_joint(self.window_length)

    @property
    def kernels(self) -> np.ndarray:
        """The kernels the population flow averages over, shape (N_pi, d**(n-1), d).

        A seeded Dirichlet sample (drawn once, :func:`markov.sample_dirichlet_kernels`)
        or the point-mass kernel. Read-only.
        """
        if self._kernels is None:
            if self.prior == "point":
                k = self.kernel[None].copy()
            else:
                k = markov.sample_dirichlet_kernels(self.vocab_size, self.n_gram, self.alpha,
                                                    self.num_kernels, self.seed)
            k.setflags(write=False)
            self._kernels = k
        return self._kernels

    def window_joint(self, window: int) -> np.ndarray:
        """Stationary ``mu(z, e)`` of each kernel for windows of ``window`` tokens,
        shape (N_pi, d**window, d) (:func:`markov.window_joint_law`; cached, read-only)."""
        window = int(window)
        if window not in self._joints:
            joint = markov.window_joint_law(self.kernels, window)
            joint.setflags(write=False)
            self._joints[window] = joint
        return self._joints[window]

    @property
    def initial_copier_logits(self) -> np.ndarray:
        """``w(0)``, shape (H, H): ``w+`` on ``j = 0``, ``w-`` elsewhere."""
        w = np.full((self.heads, self.heads), self.w_minus)
        w[:, 0] = self.w_plus
        return w

    # ----------------------------------------------------------------- forms
    def to_dict(self) -> dict:
        """Plain-python form (also the TOML schema)."""
        prior = {"kind": self.prior}
        if self.prior == "dirichlet":
            prior.update(alpha=self.alpha, num_kernels=self.num_kernels, seed=self.seed)
        else:
            prior["kernel"] = self.kernel.tolist()
        return {"vocab_size": self.vocab_size, "n_gram": self.n_gram, "heads": self.heads,
                "degree": self.degree, "prior": prior,
                "init": {k: getattr(self, k) for k in INIT_KEYS}}

    @classmethod
    def from_dict(cls, d: Mapping) -> InductionData:
        """Build from the form of :meth:`to_dict`.

        In TOML::

            vocab_size = 3
            n_gram = 3
            heads = 3
            degree = 2
            [prior]                  # kind = "dirichlet": alpha, num_kernels, seed
            kind = "point"           # kind = "point": kernel (d**(n-1) rows of d)
            kernel = [[0.5, 0.5], ...]
            [init]                   # optional: w_plus, w_minus, c0, a0
            w_plus = 3.0
        """
        if not isinstance(d, Mapping):
            raise ValidationError("data model", f"must be a table, got {type(d).__name__}")
        top = cls.toml_keys
        _check_keys(d, top, "")
        for key in top[:4]:
            if key not in d:
                raise ValidationError(key, "is missing")
        prior = d.get("prior", {"kind": "dirichlet"})
        if not isinstance(prior, Mapping):
            raise ValidationError("prior", "must be a table")
        _check_keys(prior, ("kind", "alpha", "num_kernels", "seed", "kernel"), "prior.")
        init = d.get("init", {})
        if not isinstance(init, Mapping):
            raise ValidationError("init", "must be a table")
        _check_keys(init, INIT_KEYS, "init.")
        kind = prior.get("kind", "dirichlet")
        options = {k: prior[k] for k in ("alpha", "num_kernels", "seed", "kernel") if k in prior}
        try:
            return cls(d["vocab_size"], d["n_gram"], d["heads"], d["degree"], prior=kind,
                       **options, **init)
        except ValidationError as exc:
            if exc.field in ("alpha", "num_kernels", "seed") or exc.field.startswith("kernel"):
                raise ValidationError(f"prior.{exc.field}", exc.reason) from None
            if exc.field in INIT_KEYS:
                raise ValidationError(f"init.{exc.field}", exc.reason) from None
            raise

    @classmethod
    def preset_table(cls) -> dict:
        """The built-in models: ``"ih-paper"``, ``"ih-point"`` (:data:`PRESETS`)."""
        return PRESETS

    def __eq__(self, other) -> bool:
        return isinstance(other, InductionData) and self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self) -> str:
        prior = (f"dirichlet(alpha={self.alpha:g}, N_pi={self.num_kernels}, seed={self.seed})"
                 if self.prior == "dirichlet" else "point")
        return (f"InductionData(d={self.vocab_size}, n={self.n_gram}, H={self.heads}, "
                f"D={self.degree}, prior={prior}, w+={self.w_plus:g}, w-={self.w_minus:g}, "
                f"c0={self.c0:g}, a0={self.a0:g})")


def _check_keys(table: Mapping, allowed: tuple, prefix: str) -> None:
    extra = sorted(map(str, set(table) - set(allowed)))
    if extra:
        key = extra[0]
        raise ValidationError(f"{prefix}{key if key.strip() else repr(key)}",
                              f"unknown key {key!r}; allowed: {sorted(allowed)}")


def paper_preset() -> InductionData:
    """``ih-paper``: d = 3, n = 3, H = 3, D = 2, Dirichlet(0.1), the code's init
    (w+ = 3, w- = 0.1, c = a = 0.01); :data:`PAPER_NUM_KERNELS` kernels, seed
    :data:`PAPER_SEED`."""
    return InductionData(3, 3, 3, 2, prior="dirichlet", alpha=0.1,
                         num_kernels=PAPER_NUM_KERNELS, seed=PAPER_SEED,
                         w_plus=3.0, w_minus=0.1, c0=0.01, a0=0.01)


def point_preset() -> InductionData:
    """``ih-point``: the notebook's point-mass kernel (:data:`POINT_KERNEL`), d = 2, n = 3,
    H = 2, D = 2 (subsets (), (1,), (2,), (1, 2)); the same init as ``ih-paper``."""
    return InductionData(2, 3, 2, 2, prior="point", kernel=POINT_KERNEL,
                         w_plus=3.0, w_minus=0.1, c0=0.01, a0=0.01)


#: Name -> factory of the built-in induction-head models.
PRESETS = {"ih-paper": paper_preset, "ih-point": point_preset}

__all__ = ["InductionData", "MAX_CHAIN_ENTRIES", "MAX_CONTEXTS", "MAX_KERNELS", "MAX_LAW_ENTRIES",
           "MAX_WINDOWS", "POINT_KERNEL", "PRESETS", "check_kernel", "markov", "subset_label",
           "subsets"]

