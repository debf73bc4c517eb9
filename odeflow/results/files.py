"""Result-file helpers every model family's results use (shared).

:func:`read_result_file` (an ``.npz`` result checked to be intact and of the
expected format) and :func:`jsonable` are defined beside the Scan and Snap
:class:`~odeflow.results.Trajectory`, which wrote the first result files; this
module is their family-neutral address, so that another family's results
(e.g. :mod:`odeflow.results.induction`) reach them without importing a Scan and
Snap module.
"""

from odeflow.results.trajectory import jsonable, read_result_file

__all__ = ["jsonable", "read_result_file"]
