"""Data layer: sequence classes and the data model of Sec. 3.2.

A *sequence class* is indexed by its next token ``n``; it fixes the query token
``m = psi(n)`` and the distribution ``c_{l|n}`` of contextual tokens. A
:class:`DataModel` holds the vocabulary size ``M``, the classes and their
weights ``pi_n`` and derives the token groups ``G(l)``, the distinct tokens of
each class and the common tokens (Scan and Snap, Sec. 3.2; ``docs/model.md``).

Every invalid input raises :class:`odeflow.errors.ValidationError` (a
``ValueError``) naming the field and the offending value. Nothing is
renormalised unless the caller passes ``normalize=True``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from odeflow.data.checks import as_real_array, check_count
from odeflow.data.forms import TomlForm
from odeflow.errors import ValidationError

#: Absolute tolerance on ``sum(probs) == 1`` and ``sum(weights) == 1``.
SUM_TOLERANCE = 1e-9

#: Largest vocabulary size accepted. The flows' state is lumped and does not grow
#: with ``M``, but ``Z(0)`` and the dense accessors hold rows of length ``M``
#: (8 bytes per token), so a larger ``M`` could not be allocated.
MAX_VOCAB_SIZE = 10**8


def _as_token(value, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValidationError(field_name, f"must be an integer token id, got {value!r}")
    value = int(value)
    if value < 0:
        raise ValidationError(field_name, f"token id must be >= 0, got {value}")
    if value >= 2**62:  # beyond int64 arrays; in-range ids are checked against M later
        raise ValidationError(field_name, f"token id {value} is too large")
    return value


def _as_float_array(values, field_name: str) -> np.ndarray:
    arr = as_real_array(values, field_name)
    if arr.ndim != 1:
        raise ValidationError(field_name, f"must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(field_name, f"must be finite, entry {i} is {arr[i]!r}")
    return arr


def _check_distribution(values: np.ndarray, field_name: str, normalize: bool,
                        positive: bool = False) -> np.ndarray:
    neg = values < 0 if not positive else values <= 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        word = "positive" if positive else "non-negative"
        raise ValidationError(field_name, f"must be {word}, entry {i} is {values[i]!r}")
    with np.errstate(over="ignore"):
        total = float(np.sum(values))
    if normalize:
        if not total > 0:
            raise ValidationError(field_name, f"cannot normalise: sum is {total!r}")
        positive = values > 0
        if not math.isfinite(total):  # rescale first so that the sum is finite
            values = values / np.max(values)
            total = float(np.sum(values))
        out = values / total
        if np.any(out[positive] == 0):  # never let a support entry underflow to 0
            raise ValidationError(field_name, "cannot normalise: entries differ by more "
                                  "than the floating-point range")
        return out
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValidationError(
            field_name,
            f"must sum to 1 within {SUM_TOLERANCE:g}, sums to {total!r} "
            "(pass normalize=True to rescale)",
        )
    return values


@dataclass(frozen=True, eq=False)
class SequenceClass:
    """One sequence class: next token ``n``, query token ``m = psi(n)``, ``c_{.|n}``.

    Parameters
    ----------
    next_token : int
        The token to predict, ``x_{T+1} = n`` (a row of the decoder ``Y``).
    query_token : int
        The query token ``x_T = psi(n)`` (a row of the logits ``Z``).
    probs : array_like of length M, or mapping {token: probability}
        The contextual distribution ``c_{l|n} = P(l | m, n)`` (Sec. 3.2). A
        length-``M`` array is checked against the vocabulary size by
        :class:`DataModel`.
    normalize : bool, default False
        Rescale ``probs`` to sum to one instead of rejecting them; ``probs``
        then holds the rescaled values.

    Attributes
    ----------
    probs : ndarray or dict
        ``c_{.|n}`` as validated, in the form it was given (array or
        ``{token: probability}``), normalised when ``normalize=True``.
    support : ndarray of int
        Tokens with ``c_{l|n} > 0``, sorted.
    support_probs : ndarray
        ``c_{l|n}`` on ``support``.
    dense_length : int or None
        Length of ``probs`` when given as an array (must equal ``M``).
    """

    next_token: int
    query_token: int
    probs: object = field(repr=False)
    normalize: bool = False
    support: np.ndarray = field(init=False, repr=False)
    support_probs: np.ndarray = field(init=False, repr=False)
    dense_length: int | None = field(init=False, repr=False)

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "next_token", _as_token(self.next_token, "next_token"))
        set_(self, "query_token", _as_token(self.query_token, "query_token"))
        probs = self.probs
        if isinstance(probs, Mapping):
            tokens = [_as_token(k, f"probs[{k!r}]") for k in probs]
            if len(set(tokens)) != len(tokens):
                raise ValidationError("probs", "a token appears twice")
            values = _as_float_array([probs[k] for k in probs], "probs")
            dense_length = None
        else:
            values = _as_float_array(probs, "probs")
            tokens = list(range(values.size))
            dense_length = values.size
        if values.size == 0:
            raise ValidationError("probs", "is empty")
        values = _check_distribution(values, "probs", self.normalize)
        if isinstance(probs, Mapping):
            set_(self, "probs", {int(k): float(v) for k, v in zip(tokens, values, strict=True)})
        else:
            set_(self, "probs", values)
        tokens = np.asarray(tokens, dtype=np.int64)
        order = np.argsort(tokens)
        tokens, values = tokens[order], values[order]
        keep = values > 0
        set_(self, "support", tokens[keep])
        set_(self, "support_probs", values[keep])
        set_(self, "dense_length", dense_length)
        set_(self, "normalize", False)  # already applied; never re-applied on copies

    def to_dict(self) -> dict:
        """Plain-python form used by TOML/JSON output (sparse: tokens and probs)."""
        return {
            "next_token": self.next_token,
            "query_token": self.query_token,
            "tokens": [int(x) for x in self.support],
            "probs": [float(x) for x in self.support_probs],
        }


class DataModel(TomlForm):
    """A data distribution: vocabulary size, sequence classes and class weights.

    Parameters
    ----------
    vocab_size : int
        ``M >= 2``; every token id lies in ``[0, M)``.
    classes : sequence of SequenceClass
        ``K >= 1`` classes with distinct next tokens.
    weights : sequence of float or mapping {next_token: weight}, optional
        Class weights ``pi_n > 0`` summing to one; uniform ``1/K`` by default
        (the paper's choice).
    normalize : bool, default False
        Rescale ``weights`` to sum to one instead of rejecting them.

    Notes
    -----
    Derived sets follow the paper's Sec. 3.2: ``G(l) = {n : c_{l|n} > 0}``; ``l`` is
    *distinct* for ``n`` if ``G(l) = {n}`` and *common* if ``|G(l)| > 1``.
    """

    toml_keys = ("classes", "normalize", "vocab_size")
    family = "scan_snap"

    def __init__(self, vocab_size, classes, weights=None, normalize: bool = False):
        vocab_size = check_count(vocab_size, "vocab_size", 2)
        if vocab_size > MAX_VOCAB_SIZE:
            raise ValidationError("vocab_size", f"must be <= {MAX_VOCAB_SIZE} (Z(0) holds "
                                  f"rows of length M), got {vocab_size}")
        self.vocab_size = vocab_size
        if isinstance(classes, SequenceClass) or not isinstance(classes, Sequence):
            raise ValidationError("classes", "must be a list of SequenceClass")
        if len(classes) == 0:
            raise ValidationError("classes", "needs at least one sequence class")
        seen: dict[int, int] = {}
        for i, cls in enumerate(classes):
            name = f"classes[{i}]"
            if not isinstance(cls, SequenceClass):
                raise ValidationError(name, f"must be a SequenceClass, got {type(cls).__name__}")
            for attr in ("next_token", "query_token"):
                tok = getattr(cls, attr)
                if tok >= vocab_size:
                    raise ValidationError(
                        f"{name}.{attr}", f"token id {tok} is outside [0, {vocab_size})")
            if cls.dense_length is not None and cls.dense_length != vocab_size:
                raise ValidationError(
                    f"{name}.probs",
                    f"has length {cls.dense_length}, expected vocab_size = {vocab_size}")
            if cls.support.size and cls.support[-1] >= vocab_size:
                raise ValidationError(
                    f"{name}.probs",
                    f"token id {int(cls.support[-1])} is outside [0, {vocab_size})")
            if cls.next_token in seen:
                raise ValidationError(
                    f"{name}.next_token",
                    f"duplicate next token {cls.next_token} (also classes[{seen[cls.next_token]}])")
            seen[cls.next_token] = i
        self.classes: tuple[SequenceClass, ...] = tuple(classes)
        K = len(self.classes)
        if weights is None:
            w = np.full(K, 1.0 / K)
        else:
            if isinstance(weights, Mapping):
                missing = [c.next_token for c in self.classes if c.next_token not in weights]
                if missing or len(weights) != K:
                    raise ValidationError(
                        "weights", f"must give one weight per next token; missing {missing}")
                weights = [weights[c.next_token] for c in self.classes]
            w = _as_float_array(weights, "weights")
            if w.size != K:
                raise ValidationError("weights", f"has {w.size} entries for {K} classes")
            w = _check_distribution(w, "weights", normalize, positive=True)
        self.weights = w
        self.weights.setflags(write=False)

    # ------------------------------------------------------------------ basics
    def __repr__(self) -> str:
        return (f"DataModel(vocab_size={self.vocab_size}, classes={self.num_classes}, "
                f"queries={self.query_tokens.tolist()}, active_tokens={self.active_tokens.size})")

    def __eq__(self, other) -> bool:
        if not isinstance(other, DataModel):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    @property
    def num_classes(self) -> int:
        """``K``, the number of sequence classes."""
        return len(self.classes)

    @cached_property
    def next_tokens(self) -> np.ndarray:
        """Next tokens ``n_1..n_K`` in class order."""
        return np.array([c.next_token for c in self.classes], dtype=np.int64)

    @cached_property
    def query_tokens(self) -> np.ndarray:
        """Query tokens in use, sorted."""
        return np.unique([c.query_token for c in self.classes]).astype(np.int64)

    @cached_property
    def class_query_index(self) -> np.ndarray:
        """For each class, the index of its query token in :attr:`query_tokens`."""
        return np.searchsorted(self.query_tokens, [c.query_token for c in self.classes])

    @cached_property
    def active_tokens(self) -> np.ndarray:
        """Tokens in the support of at least one class, sorted (``L`` of them)."""
        return np.unique(np.concatenate([c.support for c in self.classes])).astype(np.int64)

    @cached_property
    def active_probs(self) -> np.ndarray:
        """``c_{l|n}`` over :attr:`active_tokens`, shape ``(K, L)``."""
        out = np.zeros((self.num_classes, self.active_tokens.size))
        for i, c in enumerate(self.classes):
            out[i, np.searchsorted(self.active_tokens, c.support)] = c.support_probs
        return out

    @cached_property
    def output_multiplicity(self) -> np.ndarray:
        """How many decoder outputs each row of the lumped decoder stands for.

        The lumped decoder of Level E (``docs/model.md``) keeps one row per next token, in
        class order, then, when ``M > K``, one row shared by the ``M - K``
        outputs that are never a next token. Shape ``(K,)`` or ``(K + 1,)``.
        """
        K, M = self.num_classes, self.vocab_size
        out = np.ones(K + (1 if M > K else 0))
        if M > K:
            out[-1] = M - K
        out.setflags(write=False)
        return out

    @cached_property
    def active_log_probs(self) -> np.ndarray:
        """``log c_{l|n}`` over :attr:`active_tokens` (``-inf`` off the support)."""
        with np.errstate(divide="ignore"):
            return np.log(self.active_probs)

    def class_index(self, next_token: int) -> int:
        """Position of the class whose next token is ``next_token``."""
        hits = np.flatnonzero(self.next_tokens == next_token)
        if hits.size == 0:
            raise ValidationError(
                "next_token", f"{next_token!r} is not the next token of any class "
                f"(next tokens: {self.next_tokens.tolist()})")
        return int(hits[0])

    def query_index(self, query_token: int) -> int:
        """Position of ``query_token`` in :attr:`query_tokens`."""
        hits = np.flatnonzero(self.query_tokens == query_token)
        if hits.size == 0:
            raise ValidationError(
                "query_token", f"{query_token!r} is not the query token of any class "
                f"(query tokens: {self.query_tokens.tolist()})")
        return int(hits[0])

    def classes_of_query(self, query_token: int) -> np.ndarray:
        """Next tokens ``psi^{-1}(m)`` of the classes with query ``m``."""
        qi = self.query_index(query_token)
        return self.next_tokens[self.class_query_index == qi]

    def probs(self, next_token: int) -> np.ndarray:
        """Dense ``c_{.|n}`` of length ``M``."""
        c = self.classes[self.class_index(next_token)]
        out = np.zeros(self.vocab_size)
        out[c.support] = c.support_probs
        return out

    def weight(self, next_token: int) -> float:
        """Class weight ``pi_n``."""
        return float(self.weights[self.class_index(next_token)])

    @property
    def uniform_weights(self) -> bool:
        """True when all ``pi_n`` are equal (to round-off)."""
        return bool(np.allclose(self.weights, self.weights[0], rtol=1e-12, atol=0))

    # -------------------------------------------------------------- token sets
    def token_group(self, token: int) -> np.ndarray:
        """``G(l) = {n : c_{l|n} > 0}`` as an array of next tokens."""
        token = _as_token(token, "token")
        col = np.searchsorted(self.active_tokens, token)
        if col >= self.active_tokens.size or self.active_tokens[col] != token:
            return np.array([], dtype=np.int64)
        return self.next_tokens[self.active_probs[:, col] > 0]

    @cached_property
    def _group_sizes(self) -> np.ndarray:
        return np.count_nonzero(self.active_probs > 0, axis=0)

    def distinct_tokens(self, next_token: int) -> np.ndarray:
        """``G_DT(n)``: tokens whose group is exactly ``{n}``, sorted."""
        i = self.class_index(next_token)
        mask = (self._group_sizes == 1) & (self.active_probs[i] > 0)
        return self.active_tokens[mask]

    def common_tokens(self) -> np.ndarray:
        """``G_CT``: tokens with ``|G(l)| > 1``, sorted."""
        return self.active_tokens[self._group_sizes > 1]

    # ------------------------------------------------------------ conversions
    def to_dict(self) -> dict:
        """Plain-python form (sparse probabilities) for TOML and JSON."""
        classes = []
        for c, w in zip(self.classes, self.weights, strict=True):
            d = c.to_dict()
            d["weight"] = float(w)
            classes.append(d)
        return {"vocab_size": self.vocab_size, "classes": classes}

    @classmethod
    def from_dict(cls, d: Mapping) -> DataModel:
        """Build from the form of :meth:`to_dict` (also the TOML schema).

        Each class has ``next_token``, ``query_token`` and either ``tokens`` and
        ``probs`` arrays, or ``probs`` as a table ``{"token" = prob}``, or a
        dense ``probs`` array of length ``vocab_size``; ``weight`` is optional
        (all or none). A top-level ``normalize = true`` rescales probabilities
        and weights.
        """
        if not isinstance(d, Mapping):
            raise ValidationError("data model", f"must be a table, got {type(d).__name__}")
        unknown = set(d) - set(cls.toml_keys)
        if unknown:
            key = sorted(map(str, unknown))[0]
            raise ValidationError(key if key.strip() else repr(key),
                                  f"unknown key {key!r} in data model; allowed: "
                                  "['classes', 'normalize', 'vocab_size']")
        if "vocab_size" not in d:
            raise ValidationError("vocab_size", "is missing")
        normalize = d.get("normalize", False)
        if not isinstance(normalize, bool):
            raise ValidationError("normalize", f"must be true or false, got {normalize!r}")
        raw = d.get("classes")
        if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)) or not raw:
            raise ValidationError("classes", "must be a non-empty array of tables")
        classes, weights = [], []
        for i, entry in enumerate(raw):
            name = f"classes[{i}]"
            if not isinstance(entry, Mapping):
                raise ValidationError(name, "must be a table")
            unknown = set(entry) - {"next_token", "query_token", "tokens", "probs", "weight"}
            if unknown:
                key = sorted(map(str, unknown))[0]
                raise ValidationError(f"{name}.{key if key.strip() else repr(key)}",
                                      f"unknown key {key!r}; allowed: ['next_token', 'probs', "
                                      "'query_token', 'tokens', 'weight']")
            for key in ("next_token", "query_token", "probs"):
                if key not in entry:
                    raise ValidationError(f"{name}.{key}", "is missing")
            probs = entry["probs"]
            if "tokens" in entry:
                toks = entry["tokens"]
                if not isinstance(toks, Sequence) or isinstance(toks, (str, bytes)):
                    raise ValidationError(f"{name}.tokens", "must be an array of token ids")
                if not isinstance(probs, Sequence) or isinstance(probs, (str, bytes)) \
                        or len(toks) != len(probs):
                    raise ValidationError(
                        f"{name}.probs", "must be an array as long as tokens")
                toks = [_as_token(tok, f"{name}.tokens[{j}]") for j, tok in enumerate(toks)]
                probs = dict(zip(toks, probs, strict=True))
                if len(probs) != len(toks):
                    raise ValidationError(f"{name}.tokens", "a token appears twice")
            elif isinstance(probs, Mapping):
                parsed = {}
                for k, v in probs.items():
                    try:
                        parsed[int(k)] = v
                    except (TypeError, ValueError) as exc:
                        raise ValidationError(
                            f"{name}.probs", f"key {k!r} is not a token id") from exc
                probs = parsed
            try:
                classes.append(SequenceClass(entry["next_token"], entry["query_token"],
                                             probs, normalize=normalize))
            except ValidationError as exc:
                raise ValidationError(f"{name}.{exc.field}", str(exc).split(": ", 1)[1]) from None
            weights.append(entry.get("weight"))
        given = [w is not None for w in weights]
        if any(given) and not all(given):
            raise ValidationError("classes[].weight", "give a weight for every class or none")
        return cls(d["vocab_size"], classes, weights if all(given) else None,
                   normalize=normalize)

    @classmethod
    def preset_table(cls) -> dict:
        """The built-in data models (``docs/model.md``): :data:`PRESETS`."""
        return PRESETS


#: Name -> factory of the built-in data models. Filled by :mod:`odeflow.data.presets`
#: (imported with :mod:`odeflow.data`), so that this module needs nothing above it.
PRESETS: dict = {}


