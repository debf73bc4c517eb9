"""The import path of ``odeflow verify``'s Python names (:func:`verify` and its defaults).

The function :func:`verify` (also ``odeflow.analysis.verify`` and
``odeflow.verify``) lives in :mod:`odeflow.analysis.verification`, the
Scan and Snap checks CF1-CF6 in :mod:`odeflow.analysis.checks_scan_snap` and
their inputs in :mod:`odeflow.analysis.checks_scan_snap_inputs`; this module
re-exports their public names so that ``from odeflow.analysis.verify import
...`` keeps working.
"""

from odeflow.analysis.check_registry import (
    CheckResult,
    CheckSettings,
    VerificationReport,
    relative_error,
)
from odeflow.analysis.checks_scan_snap import CHECKS, SCAN_SNAP_CHECKS
from odeflow.analysis.checks_scan_snap_inputs import (
    integrate_margin,
    random_data_model,
    snap_data_model,
)
from odeflow.analysis.verification import (
    DEFAULT_ATOL,
    DEFAULT_METHOD,
    DEFAULT_RTOL,
    DEFAULT_TOLERANCE,
    POINTS_PER_DECADE,
    T_MAX,
    T_MIN,
    verify,
)

__all__ = ["CHECKS", "DEFAULT_ATOL", "DEFAULT_METHOD", "DEFAULT_RTOL", "DEFAULT_TOLERANCE",
           "POINTS_PER_DECADE", "SCAN_SNAP_CHECKS", "T_MAX", "T_MIN", "CheckResult",
           "CheckSettings", "VerificationReport", "integrate_margin", "random_data_model",
           "relative_error", "snap_data_model", "verify"]
