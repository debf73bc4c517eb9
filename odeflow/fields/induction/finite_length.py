"""The finite-``L`` model of the induction-head family and its level ``flow="finite_l"``.

The gradient flow of the finite-``L`` loss on a fixed sample (``docs/induction.md``).

The population flow (:mod:`~odeflow.fields.induction.population`) takes ``L -> infinity``:
the classifier's attention average over a sequence's keys becomes a ratio of
stationary expectations. At the authors' ``L = 100`` that limit is off by about 0.01
in the loss at identical parameters (``docs/induction.md``: a chain started uniform
is not yet stationary, and a sequence's own windows are few). This level keeps the
finite-``L`` model exactly and replaces the expectation over sequences by the mean
over a fixed, seeded sample of ``sample_size`` sequences of length ``seq_len`` (each
with its own kernel from the prior), like Level T of the Scan-and-Snap family:

.. math::

    \\theta' = -\\eta \\odot \\nabla_\\theta \\frac{1}{N} \\sum_{i=1}^N
    \\ell(\\theta; x^{(i)}_{1..L+1}),

with the model, its keys and both losses of
:class:`odeflow.training.induction.EmpiricalInduction` (the same code, and the
same exact gradient, that full-batch training descends). With the training set's
own sample (``seed`` equal to the run's) it is the flow that full-batch gradient
descent discretises; with another seed it predicts the run, with a sampling error
of order ``1/sqrt(sample_size)`` (0.0025 in the loss at 9000 sequences).

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
    The family's flat parameter vector,
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.data.checks import check_count, check_seed
from odeflow.data.induction.sequences import (
    PAPER_LENGTH,
    PAPER_SEQUENCES,
    InductionSequences,
    sample_for,
)
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.induction.base import GROUPS, LOSSES, InductionField

#: :class:`FiniteLengthFlow`'s sample options, by the names the front ends use too
#: (``odeflow run`` flags and ``[run]`` keys, ``induction_flow`` sweep parameters).
SAMPLE_OPTIONS = ("seq_len", "sample_size", "seed")

#: Old names of the sample options -> the new ones (``docs/api.md``, "One name per
#: concept"); the front ends' old ``sample_seed`` is ``seed``.
RENAMED = {"length": "seq_len", "sequences": "sample_size"}
FRONT_END_RENAMED = {**RENAMED, "sample_seed": "seed"}

#: Upper bound on ``H * d^(2H)`` (the copier tables), so that a typo cannot ask for
#: gigabytes: 3 heads over 10 tokens is 3e6 entries.
TABLE_LIMIT = 20_000_000


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
        raise ValidationError("seq_len", f"must be >= 2 * heads = {2 * H} so that at least one "
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

    The model keeps work arrays over its merged key entries (reused by every
    evaluation, as the population flow's :class:`WindowLaws` does): one instance
    must not be evaluated from two threads at once.
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
        self.count = sequences.sample_size
        digits = (np.arange(T)[:, None] // d ** np.arange(H)[None, :]) % d      # (T, H)
        self._onehot = (digits[:, :, None] == np.arange(d)).astype(float)     # (T, H, d)
        self._members = np.array([[h in s for h in range(1, H + 1)] for s in self.subsets])
        k = self.keys
        self._pair = np.ascontiguousarray((k.codes * T + k.query[k.seq]).T)     # (H, E)
        self._flat = k.seq * d + k.value                                        # (E,)
        self._match = k.value == k.target[k.seq]
        self.unseen_targets = int(self.count - np.unique(k.seq[self._match]).size)
        # work arrays over the merged entries, reused by every call (fresh arrays of
        # this size cost page faults); overwritten by the next call
        E = k.seq.size
        self._cos = np.empty((H, E))
        self._prods = np.empty((len(self.subsets), E))
        self._dcos = np.empty((H, E))
        self._entry = {name: np.empty(E) for name in ("K", "u", "ex", "alpha", "g", "dK",
                                                      "spread", "term")}

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
        work = self._entry
        cos = self._cos                                       # (H, E)
        for h in range(H):
            np.take(cos_table[h].ravel(), self._pair[h], out=cos[h])
        prods = self._prods                                   # (#S, E)
        for i, members in enumerate(self._members):
            heads_in = np.flatnonzero(members)
            if heads_in.size == 0:
                prods[i] = 1.0
            else:
                prods[i] = cos[heads_in[0]]
                for h in heads_in[1:]:
                    prods[i] *= cos[h]
        K = np.einsum("s,se->e", p, prods, out=work["K"])  # not BLAS: no thread wake-ups
        u = np.multiply(K, a, out=work["u"])
        u += k.log_count
        peak = np.maximum.reduceat(u, k.starts)
        spread = np.take(peak, k.seq, out=work["spread"])     # per entry, its sequence's
        ex = np.subtract(u, spread, out=work["ex"])
        np.exp(ex, out=ex)
        Z = np.add.reduceat(ex, k.starts)
        alpha = np.divide(ex, np.take(Z, k.seq, out=spread), out=work["alpha"])
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
            g = np.take(r.ravel(), self._flat, out=self._entry["g"])
            g -= np.take(ry, k.seq, out=self._entry["spread"])
            g *= alpha
        g = np.divide(g, N, out=self._entry["g"])
        a, p, c, U = f["a"], f["p"], f["c"], f["U"]
        grad_a = float(np.einsum("e,e->", g, f["K"]))
        dK = np.multiply(g, a, out=self._entry["dK"])
        grad_p = np.einsum("se,e->s", f["prods"], dK)
        grad_c = 2.0 * c / U * (grad_p - p @ grad_p)
        # d loss / d cos_h(e): sum over subsets containing h of p_S * the other factors
        cos = f["cos"]
        dcos = self._dcos                                     # (H, E)
        dcos.fill(0.0)
        for i, members in enumerate(self._members):
            heads_in = np.flatnonzero(members)
            for h in heads_in:
                others = [h2 for h2 in heads_in if h2 != h]
                if not others:
                    dcos[h] += p[i]
                    continue
                term = np.multiply(cos[others[0]], p[i], out=self._entry["term"])
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


# --------------------------------------------------------------------------- the level

class FiniteLengthFlow(InductionField):
    """``flow="finite_l"``: gradient flow of the finite-``L`` mean loss on a fixed sample.

    Parameters
    ----------
    data : InductionData
        Its prior (Dirichlet ``alpha`` or the point-mass kernel) draws the sample.
    loss, rates, start
        As :class:`~odeflow.fields.induction.base.InductionField`. Under ``"nll"``
        a sample in which some sequence's target is the value of none of its keys
        has an infinite loss and is refused (naming ``loss``); ``"code"`` is finite.
    seq_len : int, default 100
        ``L``, tokens per sequence before the target (``>= 2H``: at least one key).
        Old name ``length`` (warns).
    sample_size : int, default 9000
        ``N``, sequences in the sample. Old name ``sequences`` (warns).
    seed : int, default 0
        Seed of the sample (:func:`odeflow.training.induction.sample_for`; the
        protocol's training set is seed 0, so pass another seed for a sample
        independent of it).
    """

    name = "finite_l"
    #: As the population flow's: LSODA, the flow being stiff only in places
    #: (``docs/benchmarks.md``).
    preferred_method = "LSODA"

    @renamed_keywords(RENAMED)
    def __init__(self, data, loss: str = "nll", rates=None, start=None,
                 seq_len: int = PAPER_LENGTH, sample_size: int = PAPER_SEQUENCES,
                 seed: int = 0, start_log_c=None):
        super().__init__(data, loss=loss, rates=rates, start=start, start_log_c=start_log_c)
        seq_len = check_count(seq_len, "seq_len")
        if seq_len < 2 * self.heads:
            raise ValidationError("seq_len", f"must be >= 2H = {2 * self.heads} (a key needs "
                                  f"2H - 1 tokens before it), got {seq_len}")
        self.seq_len = seq_len
        self.sample_size = check_count(sample_size, "sample_size")
        self.seed = check_seed(seed)
        # the sampler bounds the sample's size (MAX_SAMPLE_ENTRIES), naming sample_size
        sample = sample_for(data, self.sample_size, self.seq_len, seed=self.seed)
        self.model = EmpiricalInduction(sample, self.heads, self.subsets, loss=self.loss_name)
        if self.loss_name == "nll" and self.model.unseen_targets:
            raise ValidationError("loss", f"'nll' is infinite on this sample: "
                                  f"{self.model.unseen_targets} of {self.sample_size} sequences "
                                  "have a target that is the value of none of their keys; "
                                  "use loss='code' or another seed")

    def loss_and_gradient(self, y, gradient: bool = True, value: bool = True):
        if not gradient:
            return self.model.loss(y), None
        out, grad = self.model.loss_and_gradient(y)
        return (out if value else None), grad

    def parameters(self) -> dict:
        return {**super().parameters(), "seq_len": self.seq_len,
                "sample_size": self.sample_size, "seed": self.seed}
