"""Data layer: sequence classes, data models, presets and configuration files.

- :mod:`odeflow.data.checks`: the number and text checks every layer and
  every model family uses (shared).
- :mod:`odeflow.data.model`: :class:`SequenceClass` and :class:`DataModel`
  (Scan and Snap, Sec. 3.2; ``docs/model.md``).
- :mod:`odeflow.data.generator`: the paper's synthetic data generator (the
  authors' ``Dataset2``, :func:`sequence_classes`).
- :mod:`odeflow.data.presets`: the built-in data models (``docs/model.md``).
- :mod:`odeflow.data.config`: TOML configuration files (a data model and a
  ``[run]`` table).
- :mod:`odeflow.data.sampling`: seeded samples of finite-length sequences as
  count vectors (Level T, ``docs/fidelity.md``).
- :mod:`odeflow.data.induction`: the induction-head family's n-gram Markov data
  (:class:`InductionData`; ``docs/induction.md``).
"""

from odeflow.data.checks import (
    as_real_array,
    as_real_number,
    parse_toml,
    validate_finite,
    validate_positive,
)
from odeflow.data.config import load_config, parse_config
from odeflow.data.generator import sequence_classes
from odeflow.data.induction import InductionData
from odeflow.data.model import DataModel, SequenceClass
from odeflow.data.presets import DEFAULT_PRESET, PRESETS, make_preset
from odeflow.data.sampling import CountSample, sample_counts

__all__ = ["CountSample", "DEFAULT_PRESET", "DataModel", "InductionData", "PRESETS",
           "SequenceClass",
           "as_real_array", "as_real_number", "load_config", "make_preset", "parse_config",
           "parse_toml",
           "sample_counts", "sequence_classes", "validate_finite", "validate_positive"]
