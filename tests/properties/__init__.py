"""Property-based tests (hypothesis), split by theme; see docs/testing.md.

- ``test_data_properties``: the data layer and the TOML/config loaders, valid
  and invalid input.
- ``test_exact_properties``: Level E (Lemma 1, Eqns 3-4, 7).
- ``test_reduced_properties``: Level R (Theorem 1-3, Eqns 10-12, 98).
- ``test_closed_form_properties``: the closed forms CF1-CF6 and the snap system.
- ``test_robustness_properties``: extreme valid parameters and bad solve arguments.
- ``test_induction_properties``: the induction-head family's data model and flows.
- ``test_fuzz_properties``, ``test_store_tamper_properties``: the CLI and result-file
  fuzzers (strategies in ``tests/fuzzers.py``; invalid inputs in ``tests/invalid_inputs.py``).

Helpers shared by these modules live here.
"""

from __future__ import annotations

import numpy as np
from hypothesis import settings


def examples(n: int) -> int:
    """``n`` examples under the default profile, scaled by the active profile.

    A test that needs fewer (costly) or more (cheap) examples than the profile
    sets ``@settings(max_examples=examples(n))``; the thorough profile then still
    runs ten times as many.
    """
    base = settings.get_profile("default").max_examples
    return max(1, round(n * settings.default.max_examples / base))


def assert_field(exc: BaseException, field: str) -> None:
    """``exc`` is a ValidationError (a ValueError) whose message starts with ``field``."""
    from odeflow import ValidationError

    assert isinstance(exc, ValueError), f"{type(exc).__name__}: {exc}"
    assert isinstance(exc, ValidationError), f"{type(exc).__name__}: {exc}"
    message = str(exc)
    assert message.startswith(field), f"expected a message naming {field!r}, got {message!r}"
    assert message.startswith(exc.field + ":"), message


def monotone_violation(series: np.ndarray, increasing: bool = True) -> float:
    """Largest step against the expected direction along axis 0 (0 if none)."""
    steps = np.diff(np.asarray(series, dtype=float), axis=0)
    worst = -steps if increasing else steps
    return float(max(0.0, np.max(worst))) if worst.size else 0.0


#: Examples per fuzzer under the thorough profile (at least).
THOROUGH_FUZZ = 2000


def fuzz_examples(n: int) -> int:
    """``n`` examples per fuzzer under the default profile, >= THOROUGH_FUZZ under thorough."""
    if settings.default.max_examples > settings.get_profile("default").max_examples:
        return max(THOROUGH_FUZZ, examples(n))
    return n
