"""Built-in data models (spec section 7).

``syn-small``
    The synthetic setting of Sec. 8 / Fig. 4 of the paper: ``M = 30``; two
    classes (next tokens 1 and 2) sharing query token 0; tokens 0-9 are common
    to both classes with weight 1; tokens 10-19 are distinct to class 1 and
    20-29 to class 2, each block with weights ``linspace(0.5, 1.5, 10)``
    (increasing with the token id); each class's weights are then normalised.
    Ids of next, query and contextual tokens overlap numerically; their roles
    (row of ``Y``, row of ``Z``, column) are separate.
``syn-medium``
    A scaled version: ``M = 1000``; 5 query tokens (950-954) with 4 classes each
    (next tokens 900-919, class ``k`` has query ``950 + k // 4``); tokens 0-99 are
    common to all 20 classes with weight 1; class ``k`` has 40 distinct tokens
    ``100 + 40 k .. 139 + 40 k`` with weights ``linspace(0.5, 1.5, 40)``. Tokens
    900-999 never occur in a context, so they exercise the lumped state
    (only the 900 active tokens are integrated).
"""

from __future__ import annotations

import numpy as np

from odeflow.data.model import PRESETS, DataModel, SequenceClass


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
    """The ``syn-small`` preset (Sec. 8, Fig. 4)."""
    return _block_model(30, 10, 10, next_tokens=[1, 2], query_tokens=[0, 0])


def syn_medium() -> DataModel:
    """The ``syn-medium`` preset (a scaled ``syn-small``)."""
    return _block_model(1000, 100, 40, next_tokens=list(range(900, 920)),
                        query_tokens=[950 + k // 4 for k in range(20)])


PRESETS.update({"syn-small": syn_small, "syn-medium": syn_medium})

#: The preset used when nothing else is asked for.
DEFAULT_PRESET = "syn-small"


def make_preset(name: str) -> DataModel:
    """Build the preset called ``name`` or raise a ValidationError naming it."""
    return DataModel.preset(name)
