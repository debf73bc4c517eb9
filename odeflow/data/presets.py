"""Built-in data models (the paper's Figs. 4 and 6, Sec. 6; ``docs/model.md``).

The paper's synthetic sets (Sec. 8) come from the authors' generator,
:func:`odeflow.data.generator.sequence_classes` (token ids: common tokens,
per-query common blocks, distinct blocks class by class, query tokens, next
tokens; distinct weights ``linspace(0.1, 1.0, 10)`` before normalisation):

``syn-small`` (paper Fig. 4)
    Two classes with *different* query tokens: ``M = 34``; common tokens 0-9
    (weight 1 each); distinct tokens 10-19 (class of next token 32, query 30)
    and 20-29 (next token 33, query 31). Zero-init loss is ``ln 34``.
``syn-medium-N`` for ``N`` in 1, 3, 5, 10 (paper Fig. 6)
    ``N`` query tokens with two classes each (``K = 2N``), ten common tokens,
    ten distinct tokens per class: ``M = 33, 79, 125, 240``.
``snap-small``
    The setting of Sec. 6 / Theorem 4: one query token (21), one common token
    (0) shared with equal weight by both classes, ten distinct tokens per class
    (1-10 and 11-20), next tokens 22 and 23; ``M = 24``. ``flow="snap"`` and the
    scan-snap plot accept it.

Two models that are not the paper's:

``shared-query-small``
    ``M = 30``; two classes (next tokens 1 and 2) sharing query token 0; tokens
    0-9 common with weight 1; tokens 10-19 distinct to class 1 and 20-29 to
    class 2, each block with weights ``linspace(0.5, 1.5, 10)``, each class
    normalised. Its classes interact through the shared attention row, which
    makes it a test case for Level R. Ids of next, query and contextual tokens
    overlap numerically; their roles (row of ``Y``, row of ``Z``, column) are
    separate.
``shared-query-medium``
    A scaled version: ``M = 1000``; 5 query tokens (950-954) with 4 classes each
    (next tokens 900-919, class ``k`` has query ``950 + k // 4``); tokens 0-99 are
    common to all 20 classes with weight 1; class ``k`` has 40 distinct tokens
    ``100 + 40 k .. 139 + 40 k`` with weights ``linspace(0.5, 1.5, 40)``. Tokens
    900-999 never occur in a context, so they exercise the lumped state
    (only the 900 active tokens are integrated).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from odeflow.data.generator import sequence_classes
from odeflow.data.model import PRESETS, DataModel, SequenceClass

#: Vocabulary sizes of the Fig. 6 sweep: ``syn-medium-N`` has ``N`` query tokens.
SYN_MEDIUM_SIZES = (1, 3, 5, 10)


def _block_model(vocab_size, n_common, n_distinct, next_tokens, query_tokens) -> DataModel:
    classes = []
    ramp = np.linspace(0.5, 1.5, n_distinct)
    for k, (n, m) in enumerate(zip(next_tokens, query_tokens, strict=True)):
        start = n_common + k * n_distinct
        tokens = list(range(n_common)) + list(range(start, start + n_distinct))
        weights = np.concatenate([np.ones(n_common), ramp])
        probs = dict(zip(tokens, weights / weights.sum(), strict=True))
        classes.append(SequenceClass(n, m, probs, normalize=True))
    return DataModel(vocab_size, classes)


def syn_small() -> DataModel:
    """The paper's ``syn-small`` (Sec. 8, Fig. 4): ``M = 34``, two queries, two classes."""
    return sequence_classes(num_last=2, num_next_per_last=1, num_common=10,
                            num_common_per_last=0, num_unique_per_next=10)


def syn_medium(num_last: int) -> DataModel:
    """The paper's ``syn-medium-N`` (Fig. 6): ``N`` queries with two classes each."""
    return sequence_classes(num_last=num_last, num_next_per_last=2, num_common=10,
                            num_common_per_last=0, num_unique_per_next=10)


def snap_small() -> DataModel:
    """One query token and one common token (the setting of Sec. 6, Theorem 4)."""
    return sequence_classes(num_last=1, num_next_per_last=2, num_common=1,
                            num_common_per_last=0, num_unique_per_next=10)


def shared_query_small() -> DataModel:
    """Two classes sharing one query token (``M = 30``; odeflow's former ``syn-small``)."""
    return _block_model(30, 10, 10, next_tokens=[1, 2], query_tokens=[0, 0])


def shared_query_medium() -> DataModel:
    """20 classes on 5 queries, ``M = 1000`` (odeflow's former ``syn-medium``)."""
    return _block_model(1000, 100, 40, next_tokens=list(range(900, 920)),
                        query_tokens=[950 + k // 4 for k in range(20)])


PRESETS.update({"syn-small": syn_small, "snap-small": snap_small,
                "shared-query-small": shared_query_small,
                "shared-query-medium": shared_query_medium})
PRESETS.update({f"syn-medium-{n}": partial(syn_medium, n) for n in SYN_MEDIUM_SIZES})

#: The preset used when nothing else is asked for.
DEFAULT_PRESET = "syn-small"


def make_preset(name: str) -> DataModel:
    """Build the preset called ``name`` or raise a ValidationError naming it."""
    return DataModel.preset(name)
