"""Real training of the induction-head model at finite ``L`` (spec section 10).

The authors' experiments (``RPE/train_simplified.py`` of
gszfwsb/Unveiling-Induction-Heads) train the simplified two-layer transformer
by *full-batch* gradient descent, learning rate 1, on 9000 sequences of
length ``L = 100``. This module is that model and that training in numpy,
vectorised over sequences, beside the population flow of
:func:`odeflow.solve` (``flow="population"``, ``L -> infinity``).

Data (:func:`sample_sequences`)
    Per sequence a fresh kernel ``pi`` (every context row
    ``~ Dirichlet(alpha 1_d)``) or one fixed kernel (point-mass prior); the
    first ``n - 1`` tokens uniform, then the chain; inputs ``x_1 .. x_L`` and
    target ``x_{L+1}``. Context row ``r = sum_k x_{i-k} d^(n-1-k)`` (the
    offset-1 parent most significant), as in the family's data layer.

Model (:class:`EmpiricalInduction`)
    Copier: head ``h`` (``1..H``) has logits ``w[h-1, j]`` on the offsets
    ``h + j`` (``j = 0..H-1``); ``v_h(l) = sum_j softmax_j(w[h-1]) e_{x_{l-h-j}}``
    and ``v^_h = v_h / ||v_h||``. Selector: ``p_S = c_S^2 / sum c^2`` over the
    subsets ``S`` of heads with ``|S| <= D`` (the empty set included, its
    product is 1) and ``K(l, q) = sum_S p_S prod_{h in S} <v^_h(l), v^_h(q)>``.
    Classifier: ``y = sum_l softmax_l(a K(l, q)) e_{x_l}``. Losses ``"nll"``
    (``-log y_{x_{L+1}}``) and ``"code"`` (``y`` used as logits of a
    cross-entropy, as the authors' training code does).

    **Keys.** The keys are the positions ``l`` with a full window,
    ``2H <= l <= L`` (``l - (2H - 1) >= 1``): each sees the tokens at offsets
    ``1 .. 2H - 1`` before it and offers its own token ``x_l`` as the value.
    The query is ``q = L + 1`` (it sees ``x_L .. x_{L+2-2H}``). The authors'
    code also lets the first ``2H - 1`` positions be keys, with truncated
    (renormalised) copier windows; dropping them changes ``2H - 1`` of ``L``
    keys and keeps every key's ``v_h`` a convex combination of exactly ``H``
    tokens, as in the population flow.

Parameters
    The flat vector of the family's contract,
    ``theta = concatenate(c (#S,), w.ravel() (H*H,), [a])``.

Gradient
    :meth:`EmpiricalInduction.loss_and_gradient` is the exact gradient of the
    empirical mean loss, by hand (chain rule, float64). Because ``v_h(l)``
    depends only on the ``H`` tokens head ``h`` reads, every
    ``<v^_h(l), v^_h(q)>`` is an entry of a ``d^H x d^H`` table; keys of one
    sequence with the same window and value are merged (their count enters the
    softmax as a log weight). Forward and backward passes are then gathers and
    ``bincount`` scatters over the merged keys, independent of ``L`` beyond
    the number of distinct windows: the whole 9000 x 100 training set is a
    few hundred thousand entries.

Time map
    Full-batch gradient descent at learning rate ``eta`` for ``k`` steps is the
    explicit Euler scheme, step ``dt = 1``, of the gradient flow whose rate is
    ``eta``; in the limit of small steps it follows that flow at ``t = k``,
    i.e. the unit-rate gradient flow at ``t = k * eta``. The runs record
    ``t = k`` (the flow is solved with the same rates); with the authors'
    ``lr = 1`` both readings coincide.
"""

from __future__ import annotations

import math
import operator
import sys
from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import validate_finite, validate_positive
from odeflow.data.induction import InductionData, check_kernel
from odeflow.errors import SolveError, ValidationError
from odeflow.fields.induction.base import GROUPS, LOSSES, Schedule, Stage

#: The authors' protocol: sequence length, training sequences, learning rate.
PAPER_LENGTH = 100
PAPER_SEQUENCES = 9000
PAPER_RATE = 1.0

#: Upper bound on ``H * d^(2H)`` (the copier tables), so that a typo cannot ask for
#: gigabytes: 3 heads over 10 tokens is 3e6 entries.
TABLE_LIMIT = 20_000_000


# --------------------------------------------------------------------------- checks

def check_count(value, field: str, minimum: int = 1) -> int:
    """An integer (not a bool, not a float) ``>= minimum``, or a ValidationError naming
    ``field``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise ValidationError(field, f"must be an integer, got {value!r:.80}") from None
    if number < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {number}")
    return number


def check_seed(value, field: str = "seed") -> int:
    """A seed for :func:`numpy.random.default_rng`: an integer ``>= 0``."""
    return check_count(value, field, minimum=0)


# --------------------------------------------------------------------------- data

@dataclass(frozen=True)
class InductionSequences:
    """A seeded sample of sequences of an n-gram chain.

    Attributes
    ----------
    tokens : ndarray of int, shape (N, L + 1)
        ``x_1 .. x_{L+1}`` of each sequence; ``tokens[:, :L]`` are the inputs and
        ``tokens[:, L]`` the target.
    vocab_size, n_gram : int
        ``d`` and ``n``.
    seed : int or None
        The seed of :func:`sample_sequences`.
    prior : str
        ``"dirichlet(alpha)"`` or ``"point"``.
    """

    tokens: np.ndarray
    vocab_size: int
    n_gram: int
    seed: int | None = None
    prior: str = ""

    @property
    def count(self) -> int:
        """Number of sequences ``N``."""
        return int(self.tokens.shape[0])

    @property
    def length(self) -> int:
        """Sequence length ``L`` (inputs; the target is one more token)."""
        return int(self.tokens.shape[1] - 1)


def sample_sequences(count: int, length: int, *, vocab_size: int, n_gram: int,
                     alpha: float | None = None, kernel=None,
                     seed: int = 0) -> InductionSequences:
    """Sample ``count`` sequences ``x_1 .. x_{L+1}`` of an ``n``-gram chain (spec section 10).

    Exactly one of ``alpha`` (a fresh kernel per sequence, every context row
    ``~ Dirichlet(alpha 1_d)``) and ``kernel`` (one fixed kernel, shape
    ``(d^(n-1), d)``, rows summing to 1: the point-mass prior) is given. The
    first ``n - 1`` tokens are uniform, then ``x_i ~ pi(. | x_{i-n+1} .. x_{i-1})``
    with context row ``r = sum_{k=1}^{n-1} x_{i-k} d^(n-1-k)``.

    Parameters
    ----------
    count : int
        Number of sequences ``N`` (the authors: 9000 for training).
    length : int
        ``L``: inputs ``x_1 .. x_L``; ``x_{L+1}`` is the target.
    vocab_size, n_gram : int
        ``d >= 2`` and ``n >= 2``.
    alpha : float, optional
        Dirichlet concentration (> 0).
    kernel : array_like, optional
        The point-mass prior's kernel.
    seed : int
        Seed of :func:`numpy.random.default_rng`; the sample is a function of it.

    Returns
    -------
    InductionSequences
    """
    count = check_count(count, "count")
    length = check_count(length, "length")
    d = check_count(vocab_size, "vocab_size", minimum=2)
    n = check_count(n_gram, "n_gram", minimum=2)
    seed = check_seed(seed)
    if length + 1 < n:
        raise ValidationError("length", f"must be >= n_gram - 1 = {n - 1}, got {length}")
    rows = d ** (n - 1)
    if (alpha is None) == (kernel is None):
        raise ValidationError("alpha", "give exactly one of alpha (Dirichlet prior) and "
                              "kernel (point-mass prior)")
    rng = np.random.default_rng(seed)
    if kernel is not None:
        kernel = check_kernel(kernel, d, n, "kernel")
        cumulative = np.broadcast_to(np.cumsum(kernel, axis=1), (1, rows, d))
        prior = "point"
    else:
        alpha = validate_positive(alpha, "alpha")
        kernels = rng.dirichlet(np.full(d, alpha), size=(count, rows))
        cumulative = np.cumsum(kernels, axis=2)
        prior = f"dirichlet({alpha:g})"
    tokens = np.empty((count, length + 1), dtype=np.int64)
    tokens[:, :n - 1] = rng.integers(0, d, size=(count, n - 1))
    which = np.arange(count) if cumulative.shape[0] == count else np.zeros(count, dtype=np.int64)
    for i in range(n - 1, length + 1):
        row = np.zeros(count, dtype=np.int64)
        for k in range(1, n):
            row = row * d + tokens[:, i - k]
        cdf = cumulative[which, row]                         # (N, d)
        u = rng.random(count)[:, None]
        tokens[:, i] = np.minimum((u >= cdf).sum(axis=1), d - 1)
    return InductionSequences(tokens, d, n, seed, prior)


def sample_for(data, count: int = PAPER_SEQUENCES, length: int = PAPER_LENGTH,
               seed: int = 0) -> InductionSequences:
    """:func:`sample_sequences` under the prior of an :class:`odeflow.InductionData`
    (its fixed kernel for a point-mass prior, else Dirichlet(``alpha``) per sequence)."""
    if not isinstance(data, InductionData):
        raise ValidationError("data", f"must be an InductionData, got {type(data).__name__}")
    if data.prior == "point":
        return sample_sequences(count, length, vocab_size=data.vocab_size,
                                n_gram=data.n_gram, kernel=data.kernel, seed=seed)
    return sample_sequences(count, length, vocab_size=data.vocab_size, n_gram=data.n_gram,
                            alpha=data.alpha, seed=seed)


# --------------------------------------------------------------------------- model

def check_subsets(subsets, heads: int) -> list[tuple[int, ...]]:
    """``subsets`` as a list of distinct sorted tuples of head numbers ``1..heads``."""
    out = []
    for i, s in enumerate(subsets):
        try:
            t = tuple(sorted(int(h) for h in s))
        except (TypeError, ValueError):
            raise ValidationError(f"subsets[{i}]", f"must be a tuple of head numbers, "
                                  f"got {s!r}") from None
        if any(h < 1 or h > heads for h in t) or len(set(t)) != len(t):
            raise ValidationError(f"subsets[{i}]", f"heads must be distinct and in 1..{heads}, "
                                  f"got {s!r}")
        out.append(t)
    if not out or len(set(out)) != len(out):
        raise ValidationError("subsets", f"must be a non-empty list of distinct subsets, "
                              f"got {subsets!r}")
    return out


@dataclass(frozen=True)
class MergedKeys:
    """The keys of every sequence, merged by (sequence, window, value).

    Attributes
    ----------
    seq : ndarray of int, shape (E,)
        Sequence of each entry (sorted, so that ``starts`` delimit sequences).
    codes : ndarray of int, shape (E, H)
        Head ``h``'s window code ``sum_j x_{l-h-j} d^j`` of the entry's keys.
    value : ndarray of int, shape (E,)
        The keys' own token ``x_l``.
    log_count : ndarray, shape (E,)
        Log of the number of keys merged into the entry.
    starts : ndarray of int, shape (N,)
        First entry of each sequence.
    query : ndarray of int, shape (N, H)
        The query's window codes.
    target : ndarray of int, shape (N,)
        ``x_{L+1}``.
    """

    seq: np.ndarray
    codes: np.ndarray
    value: np.ndarray
    log_count: np.ndarray
    starts: np.ndarray
    query: np.ndarray
    target: np.ndarray


def merge_keys(tokens: np.ndarray, vocab_size: int, heads: int,
               chunk: int = 2048) -> MergedKeys:
    """Window codes of the keys ``2H <= l <= L`` and of the query, merged per sequence.

    Works through the sequences ``chunk`` at a time, so the temporary arrays stay
    at ``chunk x L`` integers whatever ``N`` is.
    """
    d, H = vocab_size, heads
    N, width = tokens.shape
    L = width - 1
    span = 2 * H - 1
    if L < 2 * H:
        raise ValidationError("length", f"must be >= 2 * heads = {2 * H} so that at least one "
                              f"key has a full window of {span} tokens, got {L}")
    window = d ** span
    parts = []
    query = np.empty((N, H), dtype=np.int64)
    for lo in range(0, N, chunk):
        x = tokens[lo:lo + chunk]
        # window code of position p (0-based; l = p + 1): sum_k x[p - k] d^(k-1), k = 1..2H-1
        z = np.zeros((x.shape[0], L - span + 1), dtype=np.int64)  # key positions p = span..L
        for k in range(span, 0, -1):
            z = z * d + x[:, span - k:width - k]
        keys, qz = z[:, :-1], z[:, -1]                            # p = L is the query
        values = x[:, span:L]
        flat = (np.arange(lo, lo + x.shape[0])[:, None] * window + keys) * d + values
        unique, counts = np.unique(flat.ravel(), return_counts=True)
        parts.append((unique, counts))
        query[lo:lo + x.shape[0]] = _head_codes(qz, d, H)
    unique = np.concatenate([u for u, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    seq, rest = np.divmod(unique, window * d)
    zcode, value = np.divmod(rest, d)
    starts = np.searchsorted(seq, np.arange(N))
    return MergedKeys(seq, _head_codes(zcode, d, H), value, np.log(counts.astype(float)),
                      starts, query, tokens[:, L].copy())


def _head_codes(zcode: np.ndarray, d: int, H: int) -> np.ndarray:
    """Head ``h``'s code (offsets ``h .. h+H-1``) from the window code (offsets ``1..2H-1``)."""
    return np.stack([(zcode // d ** (h - 1)) % d ** H for h in range(1, H + 1)], axis=-1)


class EmpiricalInduction:
    """The finite-``L`` model of the family on a fixed sample: empirical loss and gradient.

    Parameters
    ----------
    sequences : InductionSequences
        The training set (:func:`sample_sequences`).
    heads : int
        ``H``.
    subsets : sequence of tuples
        The selector's subsets (the family's ``subsets(H, D)``).
    loss : {"nll", "code"}
        ``"nll"`` (``-log y_target``, the analysis) or ``"code"`` (cross-entropy
        with ``y`` as logits, the authors' training code).

    Notes
    -----
    Under ``"nll"`` a sequence whose target token is the value of none of its
    keys has ``y_target = 0`` and an infinite loss; the empirical mean is then
    infinite and :meth:`loss_and_gradient` refuses it (naming ``loss``) instead
    of returning ``inf``/``nan``. :attr:`unseen_targets` counts such sequences.
    """

    def __init__(self, sequences: InductionSequences, heads: int, subsets, loss: str = "nll"):
        if not isinstance(sequences, InductionSequences):
            raise ValidationError("sequences", f"must be InductionSequences (sample_sequences), "
                                  f"got {type(sequences).__name__}")
        if loss not in LOSSES:
            raise ValidationError("loss", f"must be one of {list(LOSSES)}, got {loss!r}")
        self.heads = H = check_count(heads, "heads")
        self.subsets = check_subsets(subsets, H)
        self.loss_name = loss
        self.sequences = sequences
        d = self.vocab_size = sequences.vocab_size
        T = d ** H
        if H * T * T > TABLE_LIMIT:
            raise ValidationError("heads", f"H * d^(2H) = {H * T * T:,} copier-table entries "
                                  f"exceeds {TABLE_LIMIT:,} (vocab_size {d}, heads {H})")
        self.keys = merge_keys(sequences.tokens, d, H)
        self.count = sequences.count
        digits = (np.arange(T)[:, None] // d ** np.arange(H)[None, :]) % d      # (T, H)
        self._onehot = (digits[:, :, None] == np.arange(d)).astype(float)     # (T, H, d)
        self._members = np.array([[h in s for h in range(1, H + 1)] for s in self.subsets])
        k = self.keys
        self._pair = np.ascontiguousarray((k.codes * T + k.query[k.seq]).T)     # (H, E)
        self._flat = k.seq * d + k.value                                        # (E,)
        self._match = k.value == k.target[k.seq]
        self.unseen_targets = int(self.count - np.unique(k.seq[self._match]).size)

    # ---- layout ------------------------------------------------------------
    @property
    def size(self) -> int:
        """Length of the flat parameter vector: ``#S + H*H + 1``."""
        return len(self.subsets) + self.heads ** 2 + 1

    def pack(self, c, w, a) -> np.ndarray:
        """``concatenate(c, w.ravel(), [a])`` after shape checks."""
        c = np.asarray(c, dtype=float).ravel()
        w = np.asarray(w, dtype=float)
        if c.shape != (len(self.subsets),):
            raise ValidationError("c", f"must have {len(self.subsets)} entries, got {c.size}")
        if w.shape != (self.heads, self.heads):
            raise ValidationError("w", f"must have shape ({self.heads}, {self.heads}), "
                                  f"got {w.shape}")
        return np.concatenate([c, w.ravel(), [float(a)]])

    def unpack(self, theta) -> tuple[np.ndarray, np.ndarray, float]:
        """``(c, w, a)`` of a flat vector (checked: right length, finite, ``c != 0``)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.size,):
            raise ValidationError("theta", f"must have {self.size} entries (#S + H*H + 1), "
                                  f"got shape {theta.shape}")
        if not np.all(np.isfinite(theta)):
            raise ValidationError("theta", "must be finite")
        nS, H = len(self.subsets), self.heads
        c, w, a = theta[:nS], theta[nS:nS + H * H].reshape(H, H), float(theta[-1])
        if not np.any(c):
            raise ValidationError("theta", "the selector coefficients c are all zero "
                                  "(p_S = c_S^2 / sum c^2 is undefined)")
        return c, w, a

    def group_mask(self, groups) -> np.ndarray:
        """Boolean mask of the flat vector for the parameter ``groups`` (of ``c, w, a``)."""
        nS, H = len(self.subsets), self.heads
        sizes = {"c": nS, "w": H * H, "a": 1}
        mask = []
        for g in GROUPS:
            mask.append(np.full(sizes[g], g in groups))
        return np.concatenate(mask)

    # ---- forward and backward -------------------------------------------------
    def _tables(self, w):
        """Copier tables: softmax ``s`` (H, H), unit vectors (H, T, d), norms, cosines."""
        shifted = w - w.max(axis=1, keepdims=True)
        s = np.exp(shifted)
        s /= s.sum(axis=1, keepdims=True)
        V = np.einsum("tjd,hj->htd", self._onehot, s)
        norm = np.sqrt(np.einsum("htd,htd->ht", V, V))
        unit = V / norm[..., None]
        cos = np.einsum("htd,hud->htu", unit, unit)
        return s, unit, norm, cos

    def loss(self, theta) -> float:
        """The empirical mean loss at ``theta``."""
        return self._evaluate(theta, gradient=False)[0]

    def loss_and_gradient(self, theta) -> tuple[float, np.ndarray]:
        """The empirical mean loss and its exact gradient in ``theta`` (float64)."""
        return self._evaluate(theta, gradient=True)

    def outputs(self, theta) -> np.ndarray:
        """The classifier's output ``y`` of every sequence, shape ``(N, d)``."""
        return self._forward(theta)["y"]

    def _forward(self, theta) -> dict:
        c, w, a = self.unpack(theta)
        k, H, N, d = self.keys, self.heads, self.count, self.vocab_size
        U = float(c @ c)
        p = c * c / U
        s, unit, norm, cos_table = self._tables(w)
        T = cos_table.shape[1]
        cos = np.empty(self._pair.shape)                      # (H, E)
        for h in range(H):
            np.take(cos_table[h].ravel(), self._pair[h], out=cos[h])
        prods = np.empty((len(self.subsets), cos.shape[1]))  # (#S, E)
        for i, members in enumerate(self._members):
            heads_in = np.flatnonzero(members)
            if heads_in.size == 0:
                prods[i] = 1.0
            else:
                prods[i] = cos[heads_in[0]]
                for h in heads_in[1:]:
                    prods[i] *= cos[h]
        K = np.einsum("s,se->e", p, prods)      # einsum, not BLAS: no thread wake-ups
        u = a * K + k.log_count
        peak = np.maximum.reduceat(u, k.starts)
        ex = np.exp(u - peak[k.seq])
        Z = np.add.reduceat(ex, k.starts)
        alpha = ex / Z[k.seq]
        log_z = np.log(Z) + peak                              # log sum_l exp(a K_l)
        y = np.bincount(self._flat, weights=alpha, minlength=N * d).reshape(N, d)
        return dict(c=c, w=w, a=a, U=U, p=p, s=s, unit=unit, norm=norm, cos_table=cos_table,
                    T=T, cos=cos, prods=prods, K=K, u=u, alpha=alpha, y=y, log_z=log_z)

    def _evaluate(self, theta, gradient: bool):
        f = self._forward(theta)
        k, N, H = self.keys, self.count, self.heads
        y, alpha, u = f["y"], f["alpha"], f["u"]
        rows = np.arange(N)
        if self.loss_name == "nll":
            if self.unseen_targets:
                raise ValidationError("loss", f"'nll' is infinite on {self.unseen_targets} of "
                                      f"{N} sequences whose target token is the value of none "
                                      "of their keys (y_target = 0); use loss='code' or "
                                      "longer sequences")
            um = np.where(self._match, u, -np.inf)
            peak = np.maximum.reduceat(um, k.starts)
            em = np.where(self._match, np.exp(um - peak[k.seq]), 0.0)
            zm = np.add.reduceat(em, k.starts)
            per_seq = f["log_z"] - (np.log(zm) + peak)
            value = float(per_seq.mean())
            if not gradient:
                return value, None
            g = alpha - em / zm[k.seq]                        # d loss_n / d u_e
        else:
            top = y.max(axis=1, keepdims=True)
            lse = np.log(np.exp(y - top).sum(axis=1)) + top[:, 0]
            per_seq = lse - y[rows, k.target]
            value = float(per_seq.mean())
            if not gradient:
                return value, None
            r = np.exp(y - lse[:, None])
            r[rows, k.target] -= 1.0                          # d loss_n / d y
            ry = (r * y).sum(axis=1)
            g = alpha * (r.ravel()[self._flat] - ry[k.seq])
        g = g / N
        a, p, c, U = f["a"], f["p"], f["c"], f["U"]
        grad_a = float(np.einsum("e,e->", g, f["K"]))
        dK = a * g
        grad_p = np.einsum("se,e->s", f["prods"], dK)
        grad_c = 2.0 * c / U * (grad_p - p @ grad_p)
        # d loss / d cos_h(e): sum over subsets containing h of p_S * the other factors
        cos = f["cos"]
        dcos = np.zeros_like(cos)                             # (H, E)
        for i, members in enumerate(self._members):
            heads_in = np.flatnonzero(members)
            for h in heads_in:
                others = [h2 for h2 in heads_in if h2 != h]
                if not others:
                    dcos[h] += p[i]
                    continue
                term = p[i] * cos[others[0]]
                for h2 in others[1:]:
                    term *= cos[h2]
                dcos[h] += term
        dcos *= dK
        T = f["T"]
        grad_w = np.empty((H, H))
        for h in range(H):
            gc = np.bincount(self._pair[h], weights=dcos[h],
                             minlength=T * T).reshape(T, T)
            gs = gc + gc.T
            unit, norm, ct = f["unit"][h], f["norm"][h], f["cos_table"][h]
            dV = (gs @ unit - (gs * ct).sum(axis=1)[:, None] * unit) / norm[:, None]
            ds = np.einsum("td,tjd->j", dV, self._onehot)
            sh = f["s"][h]
            grad_w[h] = sh * (ds - sh @ ds)
        return value, np.concatenate([grad_c, grad_w.ravel(), [grad_a]])


# --------------------------------------------------------------------------- training

def joint(steps: int, rate: float = PAPER_RATE) -> Schedule:
    """All groups together at ``rate`` for ``steps`` steps: the authors' joint run
    (:meth:`Schedule.joint <odeflow.fields.induction.base.Schedule.joint>`)."""
    return Schedule.joint(check_count(steps, "steps"), rate)


def checked_stages(schedule) -> list[Stage]:
    """The family's schedule (a :class:`~odeflow.fields.induction.base.Schedule`, a list
    of :class:`~odeflow.fields.induction.base.Stage` or one Stage), checked, with every
    stage's duration a whole number of steps (``t = k``)."""
    if isinstance(schedule, Stage):
        schedule = [schedule]
    if not isinstance(schedule, Schedule):
        try:
            schedule = Schedule(list(schedule))
        except TypeError:
            raise ValidationError("schedule", f"must be a Schedule or a list of Stage, got "
                                  f"{type(schedule).__name__}") from None
    stages = schedule.checked(GROUPS)
    for i, stage in enumerate(stages):
        if not float(stage.duration).is_integer():
            raise ValidationError(f"schedule[{i}].duration", f"must be a whole number of "
                                  f"steps (GD step k is t = k), got {stage.duration!r}")
    return stages


@dataclass(frozen=True)
class InductionRun:
    """Recorded states of a full-batch gradient-descent run.

    Attributes
    ----------
    steps : ndarray of int, shape (n,)
        Step counts of the records (0 = the start).
    t : ndarray, shape (n,)
        Flow time of each record (``t = k``; see the module's time map).
    theta : ndarray, shape (n, P)
        The flat parameter vectors.
    loss : ndarray, shape (n,)
        The empirical mean training loss at each record.
    subsets : list of tuples
    heads : int
    loss_name : str
    """

    steps: np.ndarray
    t: np.ndarray
    theta: np.ndarray
    loss: np.ndarray
    subsets: list
    heads: int
    loss_name: str

    @property
    def a(self) -> np.ndarray:
        """The classifier weight ``a`` at each record, ``(n,)``."""
        return self.theta[:, -1]

    @property
    def subset_weights(self) -> np.ndarray:
        """``p_S = c_S^2 / sum c^2``, ``(n, #S)``."""
        c = self.theta[:, :len(self.subsets)]
        return c * c / (c * c).sum(axis=1, keepdims=True)

    @property
    def copier_logits(self) -> np.ndarray:
        """``w``, ``(n, H, H)``."""
        nS, H = len(self.subsets), self.heads
        return self.theta[:, nS:nS + H * H].reshape(-1, H, H)


def log_spaced_steps(total: int, count: int = 60) -> np.ndarray:
    """About ``count`` step marks from 0 to ``total``: 0, 1, then log-spaced (ints, distinct)."""
    total = check_count(total, "steps", minimum=0)
    if total == 0:
        return np.zeros(1, dtype=np.int64)
    marks = np.unique(np.round(np.logspace(0, math.log10(total), count)).astype(np.int64))
    return np.unique(np.concatenate([[0], marks, [total]]))


def train(model: EmpiricalInduction, theta0, schedule, *,
          record=None, progress: bool | None = None) -> InductionRun:
    """Full-batch gradient descent on the empirical loss of ``model`` (spec section 10).

    Parameters
    ----------
    model : EmpiricalInduction
    theta0 : array_like
        Start, in the contract's flat layout.
    schedule : Schedule, list of Stage or Stage
        The family's schedule (:mod:`odeflow.fields.induction.base`): each stage's
        rates (an omitted group is frozen) and its duration, here a number of steps
        (:func:`joint` for the joint run at lr 1). Stages run one after the other.
    record : sequence of int, optional
        Global step counts to record (default :func:`log_spaced_steps`); the start
        and the end are always recorded.
    progress : bool, optional
        A progress bar (default: when stderr is a terminal).

    Returns
    -------
    InductionRun
        ``t = k``: at learning rate ``eta`` step ``k`` is the gradient flow with rate
        ``eta`` at time ``k`` as the steps shrink (module docstring).
    """
    if not isinstance(model, EmpiricalInduction):
        raise ValidationError("model", f"must be an EmpiricalInduction, got "
                              f"{type(model).__name__}")
    theta = model.pack(*model.unpack(theta0))
    stages = checked_stages(schedule)
    total = sum(int(s.duration) for s in stages)
    if record is None:
        marks = log_spaced_steps(total)
    else:
        marks = np.asarray([check_count(r, "record", minimum=0) for r in record], dtype=np.int64)
        if marks.size and marks.max() > total:
            raise ValidationError("record", f"steps up to {total} only, got {marks.max()}")
        marks = np.unique(np.concatenate([[0], marks, [total]]))
    wanted = set(int(m) for m in marks)
    rows, losses, done = [], [], []
    bar = None
    if progress or (progress is None and sys.stderr.isatty()):
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="induction GD", unit="step", leave=False)
    step = 0
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for stage in stages:
                rate = np.zeros(model.size)
                for g, eta in stage.rates.items():
                    rate[model.group_mask((g,))] = eta
                for _ in range(int(stage.duration)):
                    value, grad = model.loss_and_gradient(theta)
                    if step in wanted:
                        done.append(step)
                        rows.append(theta.copy())
                        losses.append(value)
                    theta = theta - rate * grad
                    step += 1
                    if bar is not None:
                        bar.update()
            if step in wanted:
                done.append(step)
                rows.append(theta.copy())
                losses.append(model.loss(theta))
    except FloatingPointError as exc:
        raise SolveError(f"induction GD: floating-point error at step {step}: {exc} "
                         "(learning rate too large?)", {"failed_step": step}) from None
    finally:
        if bar is not None:
            bar.close()
    steps = np.asarray(done, dtype=np.int64)
    return InductionRun(steps, steps.astype(float), np.asarray(rows), np.asarray(losses),
                        list(model.subsets), model.heads, model.loss_name)


def initial_parameters(model: EmpiricalInduction, *, w_plus: float = 3.0, w_minus: float = 0.1,
                       c0: float = 0.01, a0: float = 0.01) -> np.ndarray:
    """The code's init in the flat layout: ``w+`` on ``j = 0``, ``w-`` elsewhere, ``c = c0``
    on every subset, ``a = a0`` (the ``ih-paper`` defaults)."""
    values = {k: validate_finite(v, k) for k, v in
              (("w_plus", w_plus), ("w_minus", w_minus), ("c0", c0), ("a0", a0))}
    if values["c0"] == 0:
        raise ValidationError("c0", "must be non-zero (p_S = c_S^2 / sum c^2)")
    H = model.heads
    w = np.full((H, H), values["w_minus"])
    w[:, 0] = values["w_plus"]
    return model.pack(np.full(len(model.subsets), values["c0"]), w, values["a0"])

