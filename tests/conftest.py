"""Hypothesis profiles for the test suite (see docs/testing.md).

``default``
    Derandomized (the same examples on every run and every machine), no
    example database, no deadline, :data:`DEFAULT_EXAMPLES` examples per
    property: the whole property suite runs in well under five minutes on two
    cores. Used unless ``HYPOTHESIS_PROFILE`` names another profile, and in
    particular under ``CI=true`` (Hypothesis would otherwise switch to its own
    ``ci`` profile).
``thorough``
    Ten times the examples of ``default``, randomized (new examples on every
    run; a failure prints the seed and the ``@reproduce_failure`` blob). Run it
    with ``HYPOTHESIS_PROFILE=thorough python -m pytest tests/properties -m ""``
    (``-m ""`` also selects the tests marked ``slow``).

Tests that set their own ``max_examples`` scale it with
:func:`tests.properties.examples`, so ``thorough`` multiplies those too.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: Examples per property in the default profile.
DEFAULT_EXAMPLES = 25
#: How many times more examples the thorough profile runs.
THOROUGH_FACTOR = 10

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

settings.register_profile("default", max_examples=DEFAULT_EXAMPLES, derandomize=True,
                          database=None, print_blob=False, **_COMMON)
settings.register_profile("thorough", max_examples=THOROUGH_FACTOR * DEFAULT_EXAMPLES,
                          derandomize=False, print_blob=True, **_COMMON)

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "").strip() or "default"
settings.load_profile(PROFILE)


def pytest_report_header(config):
    current = settings.default
    return (f"hypothesis profile: {PROFILE!r} (max_examples={current.max_examples}, "
            f"derandomize={current.derandomize})")
