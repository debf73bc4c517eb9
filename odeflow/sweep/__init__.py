"""Parameter sweeps: one task over a grid of parameters, as an :class:`xarray.Dataset`.

- :mod:`odeflow.sweep.tasks`: the task kinds by name (flows and training runs)
  and their parameters; adding a kind is one registry entry.
  :mod:`odeflow.sweep.induction` registers ``induction_flow`` (the induction-head
  family) and its outputs; :mod:`odeflow.sweep.models` holds a sweep's data model
  as plain data, for every family.
- :mod:`odeflow.sweep.spec`: the checked sweep (grid, seeds, settings, data).
- :mod:`odeflow.sweep.outputs`: the named outputs of one point (each task's set).
- :mod:`odeflow.sweep.backends`: ``serial``, ``processes``, ``dask``.
- :mod:`odeflow.sweep.store`: the incremental zarr store (netCDF on request);
  :mod:`odeflow.sweep.journal` its journal of finished points,
  :mod:`odeflow.sweep.integrity` its checksums and integrity record, and
  :mod:`odeflow.sweep.reading` the checked reading of a store.
- :mod:`odeflow.sweep.run`: :func:`sweep`, the entry point.

xarray, zarr and dask.distributed come with ``pip install "odeflow[sweep]"``;
they are imported only when a sweep runs.

The package itself is callable: ``odeflow.sweep(task, grid, ...)`` is
:func:`odeflow.sweep.run.sweep` (a function of the same name as its package
would otherwise be hidden by the package, or hide it).
"""

import sys
import types

from odeflow.sweep import induction  # noqa: F401 (registers the task induction_flow)
from odeflow.sweep.outputs import VARIABLES
from odeflow.sweep.run import sweep
from odeflow.sweep.spec import SweepSpec, make_spec
from odeflow.sweep.store import open_store
from odeflow.sweep.tasks import TASKS, Parameter, TaskKind, flow_task, register

__all__ = ["Parameter", "SweepSpec", "TASKS", "TaskKind", "VARIABLES",
           "flow_task", "make_spec", "open_store", "register", "sweep"]


class _CallableModule(types.ModuleType):
    """The package, callable as :func:`sweep`."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
